"""The search for repeated record positions inside the transactions pass on files
(``trxfiles``: the split buckets the keys of the sources the decode did not prove, the
summarise tasks count them): the same rows as the Spark search
(``accounting.quarantine_duplicate_positions``), and a night where it finds one runs the
Spark search first and publishes what that path publishes."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from decoders.events import EVENT_SCHEMA
from dblog.decode import POSITION_KINDS
from dblog.ordering import filehook, stage, trxfiles


def test_a_positions_hash_depends_on_its_value_only():
    values = ["00DB7AB47EB05500000000000000000A52E01BD5", "12", None, "é1234567", "abcdefgh",
              "xabcdefgh", "", "0000002800D66C8C"]
    arr = pa.array(values * 2)
    h = trxfiles.tail_hash(arr)
    assert h.dtype == np.uint64 and len(h) == len(arr)
    assert (h[:len(values)] == h[len(values):]).all()
    # the same values in other batches, slices and chunks hash the same
    assert (trxfiles.tail_hash(arr.slice(3, 5)) == h[3:8]).all()
    assert (trxfiles.tail_hash(pa.chunked_array([arr.slice(0, 5), arr.slice(5)])) == h).all()
    # a null is the empty string; different values here differ
    assert h[2] == h[6]
    assert len({int(x) for i, x in enumerate(h[:len(values)]) if i != 6}) == len(values) - 1
    assert len(trxfiles.tail_hash(pa.array([], pa.string()))) == 0
    # the same values as large strings (64-bit offsets) hash the same
    assert (trxfiles.tail_hash(arr.cast(pa.large_string())) == h).all()


@pytest.mark.parametrize("positions", [
    [f"{i * 7919:040X}" for i in range(60_000)],        # Log Master's LRSN + RBA
    [str(10_000 + i) for i in range(60_000)],            # short decimal positions
])
def test_the_searchs_buckets_are_even(positions):
    keys = pa.record_batch([pa.array(["src"] * len(positions)), pa.array(positions),
                            pa.array(np.zeros(len(positions), np.int32))],
                           schema=trxfiles.POS_SCHEMA)
    b = trxfiles.position_buckets(keys, 6)
    counts = np.bincount(b, minlength=6)
    assert counts.min() > 0.9 * len(positions) / 6, counts


def _rows(source, specs):
    return [{"source": source, "format": "lldf", "archive_file": a, "record_offset": off,
             "record_index": off, "n_records": 1, "n_bytes": 10, "kind": kind,
             "position": pos, "seg_num": sn, "trx_id": "T1" if kind != "skip" else None}
            for a, off, kind, pos, sn in specs]


def test_the_split_and_the_summarise_find_the_repeats_the_spark_search_would(tmp_path):
    """Two files of two sources: a position repeated across files, one inside a file, the
    pieces of a segmented record (told apart by seg_num), rows that publish nothing
    (``skip``: not compared), a source the decode proved (not searched) and rows held from an
    earlier night (``source`` from the spec)."""
    a = _rows("a", [("x1", 0, "change", "P1", None), ("x1", 1, "segment", "P2", 1),
                    ("x1", 2, "segment", "P2", 2), ("x1", 3, "skip", "P3", None),
                    ("x1", 4, "change", "P4", None), ("x1", 5, "commit", "P4", None)])
    b = _rows("a", [("x2", 0, "change", "P1", None), ("x2", 1, "skip", "P3", None),
                    ("x2", 2, "segment", "P2", 2)]) \
        + _rows("proved", [("y", 0, "change", "P1", None), ("y", 1, "change", "P1", None)])
    held = [{k: v for k, v in r.items() if k != "source"}
            for r in _rows("a", [("x0", 9, "begin", "P9", None), ("x0", 10, "change", "P5", None)])]
    paths = []
    for i, rows in enumerate((a, b)):
        paths.append(str(tmp_path / f"e{i}.parquet"))
        pq.write_table(pa.Table.from_pylist(rows, schema=EVENT_SCHEMA), paths[-1])
    held_schema = pa.schema([f for f in EVENT_SCHEMA if f.name != "source"])
    paths.append(str(tmp_path / "held.parquet"))
    pq.write_table(pa.Table.from_pylist(held, schema=held_schema), paths[-1])
    out = tmp_path / "split"
    out.mkdir()
    n = 3
    parts: dict[int, list] = {}
    for task, (path, source) in enumerate(zip(paths, [None, None, "a"])):
        rows, where, extra = trxfiles.split_file({
            "path": path, "role": "rows", "source": source, "from_state": source is not None,
            "buckets": n, "task": task, "out": str(out), "check": True, "check_sources": ["a"],
            "exclude": [], "scoped": []})
        for bucket, pieces in extra[trxfiles.POS_STREAM].items():
            parts.setdefault(int(bucket), []).append(
                [str(out / f"{task:05d}.{trxfiles.POS_STREAM}.arrow"), [p for p, _ in pieces]])
    found = [r for b in sorted(parts) for r in trxfiles.repeated_keys(
        filehook.read_bucket(parts[b], trxfiles.POS_SCHEMA)).to_pylist()]
    # the rule, in plain Python (``quarantine_duplicate_positions``' candidates and key)
    everything = [*a, *b, *[{**r, "source": "a"} for r in held]]
    keys = Counter((r["source"], r["position"], r["seg_num"] or 0) for r in everything
                   if r["source"] == "a" and r["position"] and r["kind"] in POSITION_KINDS)
    expected = {k: c for k, c in keys.items() if c > 1}
    assert {(r["source"], r["position"], r["_sn"]): r["n"] for r in found} == expected
    assert expected == {("a", "P1", 0): 2, ("a", "P2", 2): 2, ("a", "P4", 0): 2}


@pytest.mark.spark
def test_a_log_master_night_read_twice_publishes_what_the_spark_search_publishes(
        spark, tmp_path, monkeypatch):
    """A Log Master night (its positions are never proved unique) plus an archive holding
    its first records again: the pass on files finds the repeats, the ordering searches in
    Spark first and publishes what it publishes with the Spark search alone; the night
    without the extra archive runs no Spark search."""
    from chispa import assert_df_equality

    from bench.plain import split
    from dblog.cli import main
    from dblog.paths import DataRoot
    from dblog.synthcmd import read_expected

    from .conftest import write_config
    from .test_pipeline import KEYS, published

    config = write_config(tmp_path, [{"name": "core_zos", "format": "lldf",
                                      "options": {"codepage": "cp037", "rdw": True}}])
    date = "2026-11-01"
    searched, found = [], []
    real_search, real_run = stage.quarantine_duplicate_positions, trxfiles.run

    def search(*a, **k):
        searched.append(1)
        return real_search(*a, **k)

    def run(*a, **k):
        try:
            return real_run(*a, **k)
        except trxfiles.RepeatedPositions as exc:
            found.append(str(exc))
            raise

    monkeypatch.setattr(stage, "quarantine_duplicate_positions", search)
    monkeypatch.setattr(trxfiles, "run", run)
    roots = {}
    for name in ("clean", "twice", "spark"):
        root = roots[name] = tmp_path / name
        assert main(["synth", "--date", date, "--transactions", "200", "--config", str(config),
                     "--data-root", str(root)]) == 0
        if name != "clean":
            landing = root / "landing" / "core_zos" / date
            archives = sorted(landing.iterdir())
            records = split("lldf", archives[-1].read_bytes(), {"rdw": True})
            (landing / ("zz_again" + archives[-1].suffix)).write_bytes(b"".join(records[:40]))
        before = len(searched), len(found)
        with monkeypatch.context() as m:
            if name == "spark":          # the Spark search first, as before the pass searched
                m.setattr(stage, "pass_search", lambda *a: None)
            assert main(["run", "--date", date, "--config", str(config),
                         "--data-root", str(root)]) == 0
        assert (len(searched) - before[0], len(found) - before[1]) == \
            {"clean": (0, 0), "twice": (1, 1), "spark": (1, 0)}[name], name
    assert "record positions met more than once" in found[0]
    q = spark.read.parquet(str(roots["twice"] / "published" / "quarantine"))
    assert q.filter("error_class = 'duplicate_position'").count() > 0
    for ds in ("changes", "transactions", "audit", "quarantine"):
        frames = {n: spark.read.parquet(str(roots[n] / "published" / ds)).drop("run_id")
                  for n in ("twice", "spark")}
        assert frames["twice"].count() > 0
        assert_df_equality(frames["twice"], frames["spark"], ignore_row_order=True,
                           ignore_column_order=True)
    # both nights published the changes the generator wrote, each once
    for name in ("clean", "twice"):
        rows = published(roots[name], "core_zos", date)
        expected = read_expected(DataRoot(roots[name]), "core_zos", date)
        assert rows and [{k: r[k] for k in KEYS} for r in rows] == \
            [{k: e[k] for k in KEYS} for e in expected], name


def test_the_reassembly_reads_only_the_files_that_may_hold_a_piece(tmp_path):
    """``stage.segment_inputs``: a decoded file of a Log Master source and its held file are
    read, those of a solidDB source are not (nor a hook's output on files for solidDB); a
    decoded file the decode's record does not name and a DataFrame hook's output are read
    (they may hold anything)."""
    from dblog.decode import EVENTS_DIR, UNITS_FILE

    events = tmp_path / EVENTS_DIR
    events.mkdir()
    (tmp_path / UNITS_FILE).write_text(json.dumps({"units": [
        {"source": "zos", "file": "part-00000.parquet"},
        {"source": "solid", "file": "part-00001.parquet"}]}))
    manifest = {"sources": [{"name": "zos", "format": "lldf"},
                            {"name": "solid", "format": "soliddb"}]}
    inputs = [{"path": str(events.resolve() / f"part-0000{i}.parquet"), "source": None}
              for i in range(3)]
    inputs += [{"path": "/held/zos/part-0.parquet", "source": "zos"},
               {"path": "/held/solid/part-0.parquet", "source": "solid"},
               {"path": str(tmp_path / "ordering" / "resolved" / "part-x.parquet"),
                "source": None},
               {"path": str(tmp_path / "ordering" / "resolved" / "part-soliddb-00000.parquet"),
                "source": None}]
    got = stage.segment_inputs(inputs, manifest, tmp_path, ["lldf"])
    assert [x["path"] for x in got] == [inputs[i]["path"] for i in (0, 2, 3, 5)]
    # without the decode's record every file is read
    assert stage.segment_inputs(inputs, manifest, None, ["lldf"]) == \
        [x for x in inputs[:-1] if x["source"] != "solid"]


@pytest.mark.spark
def test_a_night_without_a_file_that_may_hold_a_piece_has_no_group(spark, tmp_path):
    """A Log Master source with no archive tonight beside others: the reassembly on files
    gets no file, writes no group and says how many buckets the pieces (none) were routed
    to; the groups read back are none."""
    from dblog.ordering import segfiles
    from dblog.ordering.segments import empty_groups

    out, pieces = tmp_path / "segments", tmp_path / "pieces"
    assert segfiles.run(spark, [], tmp_path / "m.json", out, tmp_path, 0, pieces,
                        trx_rows=10) == 0
    assert out.is_dir() and not any(out.iterdir())
    assert (pieces / segfiles.PIECES_BUCKETS).read_text() == \
        str(filehook.bucket_count(10, int(spark.sparkContext.defaultParallelism)))
    assert spark.read.schema(empty_groups(spark).schema).parquet(str(out)).count() == 0
