"""`dblog run` end to end on generated nights, checked against what the generator wrote."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow.dataset as pads
import pytest

from dblog.cli import main
from dblog.paths import DataRoot
from dblog.synthcmd import read_expected

from .conftest import write_config

pytestmark = pytest.mark.spark

KEYS = ["trx_id", "op", "table_id", "before", "after", "ddl", "commit_position"]


def read(path: Path, **filters):
    if not path.exists():
        return []
    rows = pads.dataset(str(path), format="parquet", partitioning="hive").to_table().to_pylist()
    return [r for r in rows if all(str(r[k]) == str(v) for k, v in filters.items())]


def published(root: Path, source: str, date: str):
    rows = read(root / "published" / "changes", source=source, date=date)
    return sorted(rows, key=lambda r: (r["commit_seq"], r["event_seq"]))


def check_night(root: Path, source: str, date: str, seq_start: int) -> list[dict]:
    rows = published(root, source, date)
    expected = read_expected(DataRoot(root), source, date)
    assert [{k: r[k] for k in KEYS} for r in rows] == [{k: e[k] for k in KEYS} for e in expected]
    # commit_seq: contiguous from seq_start, one per transaction; event_seq 1.. within each
    trx_seq = []
    for r in rows:
        if not trx_seq or trx_seq[-1][0] != r["trx_id"]:
            trx_seq.append((r["trx_id"], r["commit_seq"]))
            assert r["event_seq"] == 1
        else:
            assert r["commit_seq"] == trx_seq[-1][1]
    assert [s for _, s in trx_seq] == list(range(seq_start, seq_start + len(trx_seq)))
    audit = read(root / "published" / "audit", source=source, date=date)
    assert audit, "no audit rows"
    for a in audit:
        assert a["records_read"] == a["published"] + a["control"] + a["skipped"] + a["held_open"] \
            + a["quarantined"], a
        rules = json.loads(a["skipped_by_rule"])
        assert sum(rules.values()) == a["skipped"]
    assert sum(a["published"] for a in audit) <= sum(1 for _ in rows) * 2
    return rows


@pytest.fixture()
def solid_config(tmp_path):
    return write_config(tmp_path, [{"name": "pos_solid", "format": "soliddb"}])


def run(config, root, date, *extra) -> int:
    return main(["run", "--date", date, "--config", str(config), "--data-root", str(root), *extra])


def synth(config, root, date, days=1, trx=200, seed=0):
    assert main(["synth", "--date", date, "--days", str(days), "--transactions", str(trx),
                 "--config", str(config), "--data-root", str(root), "--seed", str(seed)]) == 0


def test_ten_thousand_transactions_published_completely_and_idempotently(spark, tmp_path, solid_config):
    root = tmp_path / "data"
    synth(solid_config, root, "2026-11-01", trx=10_000)
    assert run(solid_config, root, "2026-11-01") == 0
    first = check_night(root, "pos_solid", "2026-11-01", 1)
    assert len(first) > 25_000
    trx = read(root / "published" / "transactions", source="pos_solid")
    assert {t["status"] for t in trx} == {"committed"}
    # rerun: replaces, never duplicates
    assert run(solid_config, root, "2026-11-01") == 0
    again = check_night(root, "pos_solid", "2026-11-01", 1)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "run_id"} for r in rows]  # noqa: E731
    assert strip(again) == strip(first)
    assert len(read(root / "published" / "transactions", source="pos_solid")) == len(trx)
    report = root / "reports" / "2026-11-01" / "index.html"
    assert report.is_file() and "pos_solid" in report.read_text()


def test_nights_carry_open_transactions_and_reruns_do_not_renumber(spark, tmp_path, solid_config):
    root = tmp_path / "data"
    dates = ["2026-11-01", "2026-11-02", "2026-11-03"]
    synth(solid_config, root, dates[0], days=3, trx=150, seed=5)
    seq = 1
    per_night = {}
    for d in dates:
        assert run(solid_config, root, d) == 0
        rows = check_night(root, "pos_solid", d, seq)
        seq = (rows[-1]["commit_seq"] + 1) if rows else seq
        per_night[d] = rows
    # transactions opened on night 1 and committed on night 2 are published on night 2 only
    begun_1 = {e["trx_id"] for e in read(root / "published" / "state" / "pos_solid" / dates[0] / "held")}
    assert begun_1, "the generator leaves some transactions open"
    assert begun_1 & {r["trx_id"] for r in per_night[dates[1]]}
    assert not begun_1 & {r["trx_id"] for r in per_night[dates[0]]}
    # rerun night 2 after night 3: same rows, same numbers
    assert run(solid_config, root, dates[1]) == 0
    again = check_night(root, "pos_solid", dates[1], per_night[dates[1]][0]["commit_seq"])
    assert [r["commit_seq"] for r in again] == [r["commit_seq"] for r in per_night[dates[1]]]
    assert check_night(root, "pos_solid", dates[2], per_night[dates[2]][0]["commit_seq"])
    # a late archive that adds a transaction to night 2 would renumber night 3: refused
    from decoders.soliddb import encoder as E
    from decoders.soliddb import layout as L
    late = E.write_archive([E.csv_row(L.TRX_START, 99, 99, None, 0, E.logaddr(10**9), None),
                            E.csv_row(L.DDL, 99, 99, 10001, 1, E.logaddr(10**9 + 1),
                                      E.encode_ddl(22, "ERP.ORDERS")),
                            E.csv_row(L.COMMIT, 99, 99, None, 0, E.logaddr(10**9 + 2), None)])
    (root / "landing" / "pos_solid" / dates[1] / "zz_late.csv").write_bytes(late)
    before = published(root, "pos_solid", dates[1])
    assert run(solid_config, root, dates[1]) == 1
    assert published(root, "pos_solid", dates[1]) == before


def test_corrupt_records_quarantined_rest_published(spark, tmp_path, solid_config):
    root = tmp_path / "data"
    synth(solid_config, root, "2026-11-05", trx=100, seed=9)
    night = root / "landing" / "pos_solid" / "2026-11-05"
    archive = sorted(night.iterdir())[0]
    lines = archive.read_bytes().split(b"\r\n")
    # corrupt one INSERT row's DATA (drop 3 hex digits: odd length) -> quarantine, rest published
    idx = next(i for i, line in enumerate(lines) if line.startswith(b"1,DBE_LOGREADER_LOG_REC_INSERT"))
    offset = sum(len(line) + 2 for line in lines[:idx])
    lines[idx] = lines[idx][:-3]
    archive.write_bytes(b"\r\n".join(lines))
    assert run(solid_config, root, "2026-11-05") == 0
    q = read(root / "published" / "quarantine", source="pos_solid", date="2026-11-05")
    assert [(r["archive_file"], r["record_offset"], r["error_class"]) for r in q] == \
        [(str(archive.relative_to(root / "landing")), offset, "corrupt")]
    assert "odd-length hex" in q[0]["message"]
    audit = read(root / "published" / "audit", source="pos_solid", date="2026-11-05")
    assert sum(a["quarantined"] for a in audit) == 1
    for a in audit:
        assert a["records_read"] == a["published"] + a["control"] + a["skipped"] + a["held_open"] \
            + a["quarantined"]
    assert len(published(root, "pos_solid", "2026-11-05")) > 100


def test_backfill_equals_nights_one_by_one(spark, tmp_path, solid_config):
    from chispa import assert_df_equality

    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        synth(solid_config, root, "2026-11-10", days=3, trx=60, seed=2)
    for d in ("2026-11-10", "2026-11-11", "2026-11-12"):
        assert run(solid_config, a, d) == 0
    # b: a backfill that first ran the range, then re-ran it all (reprocess "All Runs")
    for d in ("2026-11-10", "2026-11-11", "2026-11-12") * 2:
        assert run(solid_config, b, d) == 0
    for ds in ("changes", "transactions"):
        da = spark.read.parquet(str(a / "published" / ds)).drop("run_id")
        db = spark.read.parquet(str(b / "published" / ds)).drop("run_id")
        assert_df_equality(da, db, ignore_row_order=True, ignore_column_order=True)


def test_informix_record_quarantined_by_the_transaction_rules_keeps_its_raw_bytes(spark, tmp_path):
    """A broken link is found by the ordering job's Informix step (records are assigned to
    their transactions there), whose stream leaves the records' raw bytes out: the quarantine
    row still shows the record's own bytes, read back from the decoded events, and its
    bytes are accounted as quarantined."""
    config = write_config(tmp_path, [{"name": "wms_informix", "format": "informix",
                                      "timezone": "America/Chicago"}])
    root = tmp_path / "data"
    synth(config, root, "2026-11-05", trx=60, seed=4)
    night = root / "landing" / "wms_informix" / "2026-11-05"
    archive = sorted(night.iterdir())[0]
    lines = archive.read_bytes().split(b"\n")
    idx = [i for i, line in enumerate(lines) if b" HDELETE " in line or b" HINSERT " in line][5]
    tokens = lines[idx].split()
    assert int(tokens[5], 16) != 0x7777
    lines[idx] = lines[idx].replace(b" " + tokens[5] + b" ", b" 7777 ", 1)
    assert lines[idx].split()[5] == b"7777"
    archive.write_bytes(b"\n".join(lines))
    assert run(config, root, "2026-11-05") == 0
    q = read(root / "published" / "quarantine", source="wms_informix", date="2026-11-05")
    assert [(r["archive_file"], r["record_offset"], r["error_class"]) for r in q] == \
        [(str(archive.relative_to(root / "landing")), idx + 1, "broken_chain")]
    assert bytes.fromhex(q[0]["raw_hex"]).startswith(lines[idx][:200])
    audit = read(root / "published" / "audit", source="wms_informix", date="2026-11-05")
    mine = [a for a in audit if a["archive_file"] == q[0]["archive_file"]]
    assert [a["quarantined"] for a in mine] == [1]
    assert mine[0]["bytes_quarantined"] == q[0]["n_bytes"] > len(lines[idx])
    assert sum(a["bytes_decoded"] + a["bytes_quarantined"] for a in audit) == \
        sum(p.stat().st_size for p in night.iterdir())
