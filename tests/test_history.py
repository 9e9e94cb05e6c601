"""12 generated nights of one source through ``pipeline.run_night`` (one Spark session):
the archive of night 9 does not arrive and night 11 carries ten times the usual volume.

The volume checks are the defaults (``volume_collapse``: records read under 1/5 of the
median, severity error; ``volume_explosion``: over 5x, warn) with a shorter history, so
that the test needs 12 nights, not 30: a 6-night window judged from 3 published nights
(``window: 6, min_history: 3`` in sources.yaml; the default 14/7 are judged the same way by
``tests/test_checks.py``). They must refuse night 9 (nothing published, ``dblog run``
exits 1) and warn on night 11 (published, exit 0), and say so in the metrics, the report and
the run's result; the first nights say "not enough history"; every run's OpenLineage
events validate against the OpenLineage JSON schema.

Each night is small (a handful of solidDB transactions, the night's SYS_LOG export as one
archive), so the runs are dominated by the fixed cost of a run (the Great Expectations
checkpoint, Spark job start-up).
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
import subprocess
from pathlib import Path

import pyarrow.dataset as pads
import pytest

from tests import wap_nights as W

def _publish_covers_metrics() -> bool:
    """History is the *published* metrics: the one publish of every registered dataset
    (``publish`` slice, issue 14) publishes ``metrics/``; the publish before it ignores it."""
    import inspect

    from dblog import publish

    return "D.published()" in inspect.getsource(publish)


pytestmark = [pytest.mark.spark, pytest.mark.skipif(
    not _publish_covers_metrics(),
    reason="needs the publish of every registered dataset (metrics/ is history); not on main yet")]

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts" / "history"
FIRST = _dt.date(2026, 10, 1)
NIGHTS = 12
MISSING, SPIKE = 9, 11           # night numbers, 1-based
WINDOW, MIN_HISTORY = 6, 3       # the volume checks' history (defaults: 14 and 7)
CHECKS = [{"name": "volume_collapse", "max_ratio": 5, "direction": "down", "severity": "error",
           "window": WINDOW, "min_history": MIN_HISTORY},
          {"name": "volume_explosion", "max_ratio": 5, "direction": "up", "severity": "warn",
           "window": WINDOW, "min_history": MIN_HISTORY}]
TRX, SPIKE_TRX = 4, 40
_CACHE: dict = {}


def night_date(n: int) -> str:
    return (FIRST + _dt.timedelta(days=n - 1)).isoformat()


def write_night(gen, root: Path, n: int) -> int:
    """Land night ``n``: the generator's archives as one SYS_LOG export (header once)."""
    date = FIRST + _dt.timedelta(days=n - 1)
    out = gen.night(date, SPIKE_TRX if n == SPIKE else TRX)
    target = root / "landing" / W.SOURCE / date.isoformat()
    target.mkdir(parents=True, exist_ok=True)
    parts = [out.archives[k] for k in sorted(out.archives)]
    body = parts[0] + b"".join(p.split(b"\n", 1)[1] for p in parts[1:])
    if n != MISSING:                      # night 9's export never arrives
        (target / f"sys_log_{date:%Y%m%d}.csv").write_bytes(body)
    return len(out.expected)


def history_nights(factory, spark) -> dict:
    if "run" in _CACHE:
        return _CACHE["run"]
    from decoders import get as get_format

    from dblog.cli import main
    from dblog.config import load_config
    from dblog.pipeline import run_night

    top = factory.mktemp("history")
    root = top / "data"
    config = W.write_sources(top, checks=CHECKS)
    src = load_config(config).sources[0]
    gen = get_format("soliddb").Synth(src.name, catalog=src.catalog(), options=src.options, seed=3)
    results, codes = {}, {}
    # nights of a few dozen records: one shuffle partition is plenty (restored afterwards)
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    try:
        _run_nights(gen, root, config, spark, results, codes, main, run_night)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    _CACHE["run"] = {"root": root, "config": config, "results": results, "codes": codes}
    return _CACHE["run"]


def _run_nights(gen, root, config, spark, results, codes, main, run_night) -> None:
    for n in range(1, NIGHTS + 1):
        write_night(gen, root, n)
        date = night_date(n)
        if n in (MISSING, SPIKE):         # these two through the command line: its exit code
            rc, out = W.run_cli("run", "--date", date, "--config", str(config), "--data-root", str(root))
            codes[n] = rc
            results[n] = {"out": out, "run_dir": W.staged_run(root) if rc else None}
        else:
            results[n] = run_night(date, str(config), str(root), spark=spark)


def read_metrics(path: Path, date: str | None = None) -> list[dict]:
    rows = pads.dataset(str(path), format="parquet", partitioning="hive").to_table().to_pylist()
    return [r for r in rows if date is None or str(r["date"]) == date]


def value(rows: list[dict], metric: str) -> float | None:
    got = [r["value"] for r in rows if r["metric"] == metric and r["table_id"] is None]
    assert len(got) <= 1, (metric, got)
    return got[0] if got else None


def validation(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "validation.json").read_text())


def test_missing_archive_fails_and_spike_warns(spark, tmp_path_factory):
    run = history_nights(tmp_path_factory, spark)
    root, results, codes = run["root"], run["results"], run["codes"]

    # exit codes / results: night 9 refused, night 11 published with a warning, the rest published
    assert codes == {MISSING: 1, SPIKE: 0}
    for n, r in results.items():
        if n not in (MISSING, SPIKE):
            assert r.published, (n, r.failures)
            assert not r.failures, (n, r.failures)
    missing_out, spike_out = results[MISSING]["out"], results[SPIKE]["out"]
    assert "VALIDATION FAILED" in missing_out and "history check volume_collapse (error)" in missing_out
    assert "records_read is 0 tonight" in missing_out and "under 1/5 of the median" in missing_out
    assert "PUBLISHED" in spike_out and "warning: history check volume_explosion (warn)" in spike_out

    # the first 3 nights have too little history to judge; from night 4 on the volume is judged
    first = results[1]
    assert not first.warnings
    for n, status in ((1, "not_enough_history"), (MIN_HISTORY, "not_enough_history"),
                      (MIN_HISTORY + 1, "ok")):
        doc = json.loads((root / "reports" / night_date(n) / "summary.json").read_text())
        assert {c["name"]: c["status"] for c in doc["checks"]}["volume_collapse"] == status, n

    # validation.json of night 9 names the metric, tonight's value and the history compared with
    v_missing = validation(results[MISSING]["run_dir"])
    assert v_missing["success"] is False
    [collapse] = [c for c in v_missing["checks"] if c["name"] == "volume_collapse"]
    assert collapse["status"] == "flagged" and collapse["severity"] == "error"
    assert collapse["tonight"] == 0
    assert len(collapse["history"]) == WINDOW and min(collapse["history"]) == night_date(MISSING - WINDOW)
    assert any("volume_collapse" in f for f in v_missing["failures"])

    # metrics: night 9 staged (not published: it failed) with the error verdict ...
    staged = read_metrics(results[MISSING]["run_dir"] / "metrics", night_date(MISSING))
    assert value(staged, "records_read") == 0 and value(staged, "archives") == 0
    assert value(staged, "check:volume_collapse") == 2
    published = root / "published" / "metrics"
    assert not read_metrics(published, night_date(MISSING))
    # ... night 11 published with the warn verdict and ten times the records
    m_spike = read_metrics(published, night_date(SPIKE))
    m_before = read_metrics(published, night_date(SPIKE - 1))
    assert value(m_spike, "check:volume_explosion") == 1 and value(m_spike, "check:volume_collapse") == 0
    assert value(m_spike, "records_read") > 5 * value(m_before, "records_read")
    # every published night has its per-table rows and its stage seconds
    for n in (1, MISSING + 1, NIGHTS):
        rows = read_metrics(published, night_date(n))
        assert {r["table_id"] for r in rows} >= {"10001", "10002", "10003", None}
        assert value(rows, "seconds_stage") >= 0
        assert all(value(rows, f"seconds_{s}") > 0 for s in ("decode", "order", "validate"))
        assert value(rows, "changes") == sum(value(rows, f"changes_{op}") for op in
                                             ("c", "u", "d", "m", "t", "ddl"))

    # the reports: night 9 shows the error, night 11 the warning, night 12 both in its charts
    r_missing = (root / "reports" / night_date(MISSING) / f"{W.SOURCE}.html").read_text()
    assert 'class="badge error">ERROR' in r_missing and "volume_collapse" in r_missing
    r_spike = (root / "reports" / night_date(SPIKE) / f"{W.SOURCE}.html").read_text()
    assert 'class="badge warn">WARN' in r_spike and "volume_explosion" in r_spike
    index_spike = (root / "reports" / night_date(SPIKE) / "index.html").read_text()
    assert "History checks flagged tonight (1)" in index_spike
    r_last = (root / "reports" / night_date(NIGHTS) / f"{W.SOURCE}.html").read_text()
    assert f'data-date="{night_date(MISSING)}" data-nodata="1"' in r_last     # the refused night
    assert f'data-date="{night_date(SPIKE)}"' in r_last
    assert '<text class="mark warn"' in r_last                                   # night 11's warning
    assert "<script" not in r_last and "http://" not in r_last and "https://" not in r_last
    _screenshot(root / "reports" / night_date(NIGHTS))


def _screenshot(report_dir: Path) -> None:
    """The report of the last night as a person sees it (test-artifacts/history/), when Chromium is here."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for page, height in ((f"{W.SOURCE}.html", 2600), ("index.html", 1100)):
        out = ARTIFACTS / f"{Path(page).stem}.png"
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-background-networking", "--hide-scrollbars",
                        f"--window-size=1366,{height}", f"--screenshot={out}",
                        (report_dir / page).as_uri()], capture_output=True, timeout=120)
        assert out.is_file() and out.stat().st_size > 10_000


def test_every_run_wrote_lineage_events_that_validate(spark, tmp_path_factory):
    from tests.test_lineage import validate_event

    run = history_nights(tmp_path_factory, spark)
    root = run["root"]
    for n in range(1, NIGHTS + 1):
        files = sorted((root / "lineage" / night_date(n)).glob("*.jsonl"))
        assert len(files) == 1, (n, files)
        events = [json.loads(line) for line in files[0].read_text().splitlines()]
        assert [e["eventType"] for e in events] == ["START", "FAIL" if n == MISSING else "COMPLETE"]
        for e in events:
            validate_event(e)
        end = events[-1]
        assert end["run"]["runId"] == events[0]["run"]["runId"]
        if n == MISSING:
            assert "volume_collapse" in end["run"]["facets"]["errorMessage"]["message"]
            assert end["outputs"] == []
        else:
            outs = {o["name"].rsplit("/", 1)[1]: o["outputFacets"]["outputStatistics"]["rowCount"]
                    for o in end["outputs"]}
            changes = read_metrics(root / "published" / "changes", night_date(n))
            assert outs["changes"] == len(changes)
            assert outs["metrics"] == len(read_metrics(root / "published" / "metrics", night_date(n)))
            assert set(end["run"]["facets"]["dblog"]["seconds"]) == {
                "stage", "decode", "order", "validate", "publish", "tidy"}
