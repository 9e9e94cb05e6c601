"""History checks (dblog/checks.py): configuration errors, the verdicts, a history read
bounded by the window. No Spark: the published metrics are written here with pyarrow."""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

import pytest
import yaml

from decoders.errors import ConfigError
from dblog import checks as C
from dblog import metrics as M
from dblog.config import load_config
from dblog.paths import DataRoot

from .conftest import REPO

DATE = "2026-11-20"


def config_with(tmp_path: Path, checks) -> Path:
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump({"sources": [{
        "name": "pos_solid", "format": "soliddb",
        "catalog": str(REPO / "include" / "catalogs" / "pos_solid.json"), "checks": checks}]}))
    return path


@pytest.mark.parametrize("checks, key, reason", [
    ("volume", "sources[0].checks", "expected a list of checks"),
    ([{"metric": "records_read"}], "sources[0].checks[0]", "at least one of max_ratio"),
    ([{"metric": "record_read", "max_ratio": 5}], "sources[0].checks[0].metric", "unknown metric 'record_read'"),
    ([{"max_ratio": 5}], "sources[0].checks[0].metric", "missing"),
    ([{"metric": "changes", "max_ratio": 1}], "sources[0].checks[0].max_ratio", "above 1"),
    ([{"metric": "changes", "max_ratio": "5"}], "sources[0].checks[0].max_ratio", "expected a number"),
    ([{"metric": "changes", "max_ratio": 5, "direction": "sideways"}], "sources[0].checks[0].direction",
     "expected one of both, up, down"),
    ([{"metric": "changes", "max": 5, "direction": "up"}], "sources[0].checks[0].direction",
     "only applies with max_ratio"),
    ([{"metric": "changes", "max_ratio": 5, "severity": "fatal"}], "sources[0].checks[0].severity",
     "expected one of warn, error, off"),
    ([{"metric": "changes", "max_ratio": 5, "window": 0}], "sources[0].checks[0].window", "from 1 to 366"),
    ([{"metric": "changes", "max_ratio": 5, "window": 5, "min_history": 6}],
     "sources[0].checks[0].min_history", "from 1 to 5"),
    ([{"metric": "changes", "min": 5, "max": 1}], "sources[0].checks[0].min", "above max"),
    ([{"metric": "changes", "max": 1, "colour": "red"}], "sources[0].checks[0].colour", "unknown key"),
    ([{"name": "Big Nights", "metric": "changes", "max": 1}], "sources[0].checks[0].name", "[a-z0-9_]+"),
    ([{"name": "a", "metric": "changes", "max": 1}, {"name": "a", "metric": "changes", "max": 2}],
     "sources[0].checks[1].name", "duplicate check name"),
    ([{"metric": "seconds_decode", "max": 60, "table": "10001"}], "sources[0].checks[0].metric",
     "unknown table metric"),
])
def test_bad_checks_name_file_key_and_reason(tmp_path, checks, key, reason):
    path = config_with(tmp_path, checks)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    text = str(err.value)
    assert str(path) in text and key in text and reason in text, text


def test_bad_checks_make_dblog_run_exit_2(tmp_path, capsys):
    from dblog.cli import main

    path = config_with(tmp_path, [{"metric": "records_read", "max_ratio": 0.5}])
    assert main(["run", "--date", DATE, "--config", str(path), "--data-root", str(tmp_path / "d")]) == 2
    assert "sources[0].checks[0].max_ratio" in capsys.readouterr().err


def test_defaults_are_on_and_can_be_replaced_or_switched_off(tmp_path):
    [src] = load_config(config_with(tmp_path, None)).sources
    assert [c.name for c in src.checks] == [c.name for c in C.DEFAULT_CHECKS]
    [src] = load_config(config_with(tmp_path, [
        {"name": "volume_explosion", "severity": "off"},
        {"name": "volume_collapse", "metric": "changes", "max_ratio": 3, "direction": "down", "window": 7},
        {"metric": "changes_d", "table": "10001", "max": 100, "severity": "warn"}])).sources
    by = {c.name: c for c in src.checks}
    assert by["volume_explosion"].severity == "off"
    assert by["volume_collapse"] == C.Check("volume_collapse", "changes", "error", max_ratio=3,
                                            direction="down", window=7, min_history=7)
    assert by["changes_d_bounds_10001"].table == "10001"
    assert src.to_json()["checks"][0]["name"] == "volume_collapse"


def test_judge_ratio_increase_bounds_and_not_enough_history():
    hist = {f"2026-11-{d:02d}": v for d, v in zip(range(6, 20), [100, 90, 110] * 4 + [100, 100])}
    collapse = C.Check("volume_collapse", "records_read", "error", max_ratio=5, direction="down")
    r = C.judge(collapse, "s", DATE, 19, hist)
    assert r.status == "flagged" and r.failed and r.median == 100 and r.verdict == 2
    assert "records_read is 19 tonight (2026-11-20), under 1/5 of the median 100" in r.message
    assert "14 published nights 2026-11-06..2026-11-19" in r.message and "11-06=100" in r.message
    assert C.judge(collapse, "s", DATE, 20, hist).status == "ok"
    assert C.judge(collapse, "s", DATE, 10_000, hist).status == "ok"         # down only
    explosion = C.Check("volume_explosion", "records_read", "warn", max_ratio=5, direction="up")
    r = C.judge(explosion, "s", DATE, 501, hist)
    assert r.flagged and not r.failed and r.verdict == 1
    both = C.Check("x", "changes", "error", max_ratio=2)
    assert C.judge(both, "s", DATE, 49, hist).flagged and C.judge(both, "s", DATE, 201, hist).flagged
    jump = C.Check("q", "quarantine_share", "warn", max_increase=0.01)
    shares = {d: 0.002 for d in hist}
    assert C.judge(jump, "s", DATE, 0.0121, shares).flagged
    assert C.judge(jump, "s", DATE, 0.0119, shares).status == "ok"
    # 6 published nights of the 7 needed: not judged, whatever tonight's value
    few = dict(list(hist.items())[:6])
    r = C.judge(collapse, "s", DATE, 0, few)
    assert r.status == "not_enough_history" and not r.flagged and r.verdict == 0
    assert "not enough history: 6 of the 7 published nights needed" in r.reason
    # absolute bounds judge from the first night
    age = C.Check("open_transaction_age", "open_trx_oldest_age_nights", "warn", max=3)
    assert C.judge(age, "s", DATE, 4, {}).flagged and C.judge(age, "s", DATE, 3, {}).status == "ok"
    # a metric the night does not have (solidDB has no commit times)
    lag = C.Check("lag", "commit_lag_p95_s", "warn", max=3600)
    assert C.judge(lag, "s", DATE, None, {}).status == "no_value"
    # a median of 0: anything above it is over any ratio
    zero = {d: 0 for d in hist}
    assert C.judge(explosion, "s", DATE, 1, zero).flagged
    assert not C.judge(collapse, "s", DATE, 0, zero).flagged


def _publish_metrics(base: Path, source: str, date: str, records: float) -> None:
    M.write_rows(base, source, date, [M.metric_row("records_read", records, "r"),
                                      M.metric_row("changes", records / 2, "r", {"table_id": "10001",
                                                                                 "schema_name": "ERP",
                                                                                 "table_name": "ORDERS"})], "0")


def test_history_reads_only_the_window(tmp_path, monkeypatch):
    root = DataRoot(tmp_path / "data")
    version = root.root / ".published" / "v1"
    base = version / "metrics"
    day = _dt.date.fromisoformat(DATE)
    for i in range(1, 61):                       # 60 published nights before tonight
        if i != 3:                               # the third night before failed: not published
            _publish_metrics(base, "pos_solid", (day - _dt.timedelta(days=i)).isoformat(), 100 + i)
    _publish_metrics(base, "other", (day - _dt.timedelta(days=1)).isoformat(), 7)
    root.root.mkdir(parents=True, exist_ok=True)
    os.symlink(".published/v1", root.published)
    looked: list[str] = []
    real = M.read_partition

    def spy(path, *a, **k):
        looked.append(Path(path).name)
        return real(path, *a, **k)

    monkeypatch.setattr(M, "read_partition", spy)
    hist = M.history(root, "pos_solid", DATE, 14, {"records_read"}, source_only=True)
    assert len(hist) == 13 and len(looked) == 13                       # 14 nights, one missing
    assert min(hist) == (day - _dt.timedelta(days=14)).isoformat()
    assert max(hist) == (day - _dt.timedelta(days=1)).isoformat()
    assert all(r["table_id"] is None and r["metric"] == "records_read" for rows in hist.values() for r in rows)

    manifest = {"date": DATE, "run_id": "r", "sources": [
        {"name": "pos_solid", "checks": [c.to_json() for c in C.DEFAULT_CHECKS]}]}
    tonight = {"pos_solid": [M.metric_row("records_read", 20, "r"),
                             M.metric_row("quarantine_share", 0.0, "r"),
                             M.metric_row("open_trx_oldest_age_nights", 0, "r")]}
    results = {r.name: r for r in C.run_checks(manifest, tonight, root)}
    assert results["volume_collapse"].failed                             # 20 < median 108 / 5
    assert len(results["volume_collapse"].history) == 13
    assert results["quarantine_share_jump"].status == "no_value" or \
        results["quarantine_share_jump"].status == "not_enough_history"
    assert results["open_transaction_age"].status == "ok"
    rows = C.verdict_rows(list(results.values()), "r")["pos_solid"]
    assert {r["metric"]: r["value"] for r in rows} == {
        "check:volume_collapse": 2.0, "check:volume_explosion": 0.0, "check:open_transaction_age": 0.0}
