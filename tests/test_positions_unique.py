"""The decode's proof that no record position repeats (``decode.PositionRun``,
``accounting.positions_unique``): the ordering skips its search for repeated positions only
when every work unit's keys rise and the units' key ranges do not overlap; a night with a
record read twice still has it quarantined (``duplicate_position``)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from decoders.events import EVENT_SCHEMA
from dblog import accounting
from dblog.decode import UNITS_FILE, PositionRun


def _batch(rows: list[tuple]) -> pa.RecordBatch:
    """rows of (kind, position, seg_num)."""
    return pa.RecordBatch.from_pylist(
        [{"source": "s", "format": "rdb", "kind": k, "position": p, "seg_num": n} for k, p, n in rows],
        schema=EVENT_SCHEMA)


def _run(*batches) -> dict:
    run = PositionRun()
    for b in batches:
        run.add(_batch(b))
    return json.loads(run.to_json())


def test_a_run_rises_across_batches_and_ignores_rows_that_publish_nothing():
    got = _run([("begin", "0001", None), ("change", "0002", None), ("skip", "0002", None),
                ("control", None, None), ("quarantine", "0001", None)],
               [("segment", "0003", 1), ("segment", "0003", 2), ("commit", "0004", None)],
               [])
    assert got == {"first": ["0001", 0], "last": ["0004", 0], "rising": True}


@pytest.mark.parametrize("batches", [
    [[("change", "0002", None), ("change", "0001", None)]],                  # falls
    [[("change", "0002", None), ("change", "0002", None)]],                  # repeats
    [[("segment", "0003", 2), ("segment", "0003", 1)]],                      # pieces out of order
    [[("change", "0005", None)], [("commit", "0005", None)]],                # repeats across batches
])
def test_a_run_that_does_not_rise_says_so(batches):
    assert _run(*batches)["rising"] is False


def test_no_row_with_a_position_gives_an_empty_run():
    assert _run([("control", None, None), ("skip", "0001", None)]) == \
        {"first": None, "last": None, "rising": True}


def _units(tmp_path, *runs, source="s"):
    units = [{"source": source, "file": f"part-{i:05d}.parquet", "rows": 1, "positions": r}
             for i, r in enumerate(runs)]
    (tmp_path / UNITS_FILE).write_text(json.dumps({"units": units}))


def _rng(first, last, rising=True):
    return {"first": [first, 0], "last": [last, 0], "rising": rising}


def test_units_prove_unique_positions_only_when_their_ranges_are_apart(tmp_path):
    manifest = {"sources": [{"name": "s"}]}
    assert accounting.positions_unique(manifest, tmp_path) is False          # no record of the decode
    _units(tmp_path, _rng("0010", "0019"), _rng("0000", "0009"), {"first": None, "last": None,
                                                                  "rising": True})
    assert accounting.positions_unique(manifest, tmp_path) is True
    _units(tmp_path, _rng("0010", "0019"), _rng("0000", "0010"))             # share 0010
    assert accounting.positions_unique(manifest, tmp_path) is False
    _units(tmp_path, _rng("0010", "0019"), _rng("0000", "0009", rising=False))
    assert accounting.positions_unique(manifest, tmp_path) is False
    (tmp_path / UNITS_FILE).write_text("{not json")
    assert accounting.positions_unique(manifest, tmp_path) is False


def test_each_source_is_proved_on_its_own(tmp_path):
    manifest = {"sources": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}
    assert accounting.unique_sources(manifest, tmp_path) == set()          # no record of the decode
    units = [{"source": "a", "file": "part-00000.parquet", "positions": _rng("0010", "0019")},
             {"source": "a", "file": "part-00001.parquet", "positions": _rng("0000", "0009")},
             {"source": "b", "file": "part-00002.parquet", "positions": _rng("0000", "0009")},
             {"source": "b", "file": "part-00003.parquet",
              "positions": {"first": None, "last": None, "rising": False}},
             {"source": "c", "file": "part-00004.parquet", "positions": _rng("0000", "0009")},
             {"source": "c", "file": "part-00005.parquet", "positions": _rng("0009", "0019")}]
    (tmp_path / UNITS_FILE).write_text(json.dumps({"units": units}))
    assert accounting.unique_sources(manifest, tmp_path) == {"a"}     # b falls, c's ranges share 0009
    assert accounting.positions_unique(manifest, tmp_path) is False
    assert accounting.positions_unique({"sources": [{"name": "a"}]}, tmp_path) is True


def test_held_rows_positions_come_from_the_footers(tmp_path):
    held = tmp_path / "held"
    held.mkdir()
    rows = [{"kind": "change", "position": p, "trx_id": "9"} for p in ("0005", "0007")]
    pq.write_table(pa.Table.from_pylist(rows, schema=EVENT_SCHEMA), held / "part-0.parquet")
    manifest = {"sources": [{"name": "s", "prev_held": str(held)}]}
    _units(tmp_path, _rng("0010", "0019"))
    assert accounting.positions_unique(manifest, tmp_path) is True
    _units(tmp_path, _rng("0006", "0019"))                                   # 0007 may repeat
    assert accounting.positions_unique(manifest, tmp_path) is False
    pq.write_table(pa.Table.from_pylist(rows, schema=EVENT_SCHEMA), held / "part-1.parquet",
                   write_statistics=False)
    _units(tmp_path, _rng("0010", "0019"))
    assert accounting.positions_unique(manifest, tmp_path) is False         # no statistics: look


@pytest.mark.spark
def test_a_record_read_twice_is_still_quarantined_end_to_end(spark, tmp_path):
    """An rdb night plus a third archive holding the first records of the second again:
    the decode cannot prove the positions unique, the search runs and quarantines the
    repeats; the night's changes are those the generator wrote. The same night without the
    extra archive is proved unique."""
    from bench.plain import split
    from dblog.cli import main
    from dblog.paths import DataRoot
    from dblog.synthcmd import read_expected

    from .conftest import write_config
    from .test_pipeline import KEYS, published

    config = write_config(tmp_path, [{"name": "fin_rdb", "format": "rdb", "timezone": "Europe/Vienna"}])
    date = "2026-11-01"
    for name, extra in (("clean", False), ("twice", True)):
        root = tmp_path / name
        assert main(["synth", "--date", date, "--transactions", "300", "--config", str(config),
                     "--data-root", str(root)]) == 0
        landing = root / "landing" / "fin_rdb" / date
        archives = sorted(landing.iterdir())
        if extra:
            records = split("rdb", archives[-1].read_bytes())
            (landing / "zz_again.rdb").write_bytes(b"".join(records[:12]))
        assert main(["run", "--date", date, "--config", str(config), "--data-root", str(root)]) == 0
        [run_dir] = list((root / "staging").iterdir())
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert accounting.positions_unique(manifest, run_dir) is (not extra)
        rows = published(root, "fin_rdb", date)
        expected = read_expected(DataRoot(root), "fin_rdb", date)
        assert [{k: r[k] for k in KEYS} for r in rows] == [{k: e[k] for k in KEYS} for e in expected]
        q = pads.dataset(str(root / "published" / "quarantine"), format="parquet",
                               partitioning="hive").to_table().to_pylist() \
            if (root / "published" / "quarantine").exists() else []
        dup = [r for r in q if r["error_class"] == "duplicate_position"]
        assert len(dup) == (12 if extra else 0)
        assert all(r["archive_file"].endswith("zz_again.rdb") for r in dup)
