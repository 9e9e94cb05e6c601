"""Byte ranges, not files (issue 14): an archive above the split size decodes as several Spark
tasks, cut at record boundaries, into exactly the events of the archive decoded whole."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow.dataset as pads
import pytest

import decoders
from dblog import decode as D
from dblog.config import load_config
from dblog.paths import DataRoot
from dblog.pipeline import stage_night
from dblog.stage import load_manifest
from dblog.synthcmd import synth

from .conftest import write_config

pytestmark = pytest.mark.spark
SPLITTABLE = ["fin_rdb", "core_zos", "pos_solid", "erp_db2", "hr_db2v10", "wms_informix"]  # all


def _events(run_dir: Path) -> list[dict]:
    t = pads.dataset(str(run_dir / D.EVENTS_DIR), format="parquet").to_table()
    rows = t.to_pylist()
    return sorted(rows, key=lambda r: (r["source"], r["archive_file"], r["record_index"],
                                       r["kind"], r["record_offset"]))


@pytest.fixture(scope="module")
def night(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ranges")
    cfg = write_config(tmp, [{"name": "fin_rdb", "format": "rdb", "timezone": "Europe/Berlin"},
                             {"name": "core_zos", "format": "lldf",
                              "options": {"codepage": "cp037", "rdw": True}},
                             {"name": "pos_solid", "format": "soliddb"},
                             {"name": "erp_db2", "format": "db2luw",
                              "options": {"byte_order": "little", "codepage": "utf-8"}},
                             {"name": "hr_db2v10", "format": "db2luw",
                              "options": {"layout": "v10", "byte_order": "big", "codepage": "utf-8"}},
                             {"name": "wms_informix", "format": "informix",
                              "timezone": "America/Chicago"}])
    config = load_config(cfg)
    root = DataRoot(tmp / "data")
    synth(config, config.select(None), root, dt.date(2026, 11, 1), 1, 150)
    return cfg, root


def test_split_archives_decode_to_the_events_of_whole_archives(spark, night, monkeypatch):
    cfg, root = night
    whole = stage_night("2026-11-01", str(cfg), str(root.root), run_id="whole")
    D.decode_stage(spark, load_manifest(whole), whole)
    split = stage_night("2026-11-01", str(cfg), str(root.root), run_id="split")
    manifest = load_manifest(split)
    monkeypatch.setenv(D.SPLIT_ENV, "4000")
    ranges = D.plan_ranges(spark, manifest)       # local master, few bytes: framed in the driver
    monkeypatch.setenv(D.DRIVER_FRAMING_ENV, "0")
    assert D.plan_ranges(spark, manifest) == ranges    # by the planning job: the same ranges
    monkeypatch.delenv(D.DRIVER_FRAMING_ENV)
    sizes = {a["file"]: a["size"] for s in manifest["sources"] for a in s["archives"]}
    assert set(k[0] for k in ranges) == set(SPLITTABLE) and ranges
    for (_source, file), rs in ranges.items():
        assert len(rs) > 3 and rs[0]["start"] == 0 and rs[-1]["end"] == sizes[file]
        assert all(a["end"] == b["start"] for a, b in zip(rs, rs[1:]))
    units = D.work_units(manifest, ranges)
    whole_units = [(s["name"], a["file"]) for s in manifest["sources"] for a in s["archives"]
                   if (s["name"], a["file"]) not in ranges]     # small archives stay whole
    assert all(sizes[f] <= 4000 * 2 for _s, f in whole_units), whole_units
    assert len(units) == sum(len(r) for r in ranges.values()) + len(whole_units)
    D.decode_stage(spark, manifest, split)
    got, want = _events(split), _events(whole)
    assert len(got) == len(want) and got == want
    # bytes add up per archive, records are numbered 0.. without gaps
    for file, size in sizes.items():
        rows = [r for r in got if r["archive_file"] == file]
        assert sum(r["n_bytes"] for r in rows) == size


def test_split_size_setting(monkeypatch):
    monkeypatch.setenv(D.SPLIT_ENV, "nonsense")
    with pytest.raises(ValueError, match=D.SPLIT_ENV):
        D.split_bytes()
    monkeypatch.delenv(D.SPLIT_ENV)
    assert D.split_bytes() == 32 << 20


def test_split_target_follows_the_cores(monkeypatch):
    monkeypatch.delenv(D.SPLIT_ENV, raising=False)
    mib = 1 << 20
    # the night's bytes per core, between 4 and 32 MiB
    assert D.split_target(100 * mib, 1) == 32 * mib           # not above the largest range
    assert D.split_target(100 * mib, 8) == 12.5 * mib
    assert D.split_target(100 * mib, 32) == 4 * mib           # not below the smallest
    assert D.split_target(1 * mib, 2) == 4 * mib              # a small night is not cut
    assert D.split_target(20 * mib, 2) == 10 * mib
    assert D.split_target(0, 0) == 4 * mib
    monkeypatch.setenv(D.SPLIT_ENV, str(3 * mib))             # set by hand: as set
    assert D.split_target(100 * mib, 8) == 3 * mib


def test_events_are_one_file_per_unit_written_by_the_workers_and_a_rerun_replaces_them(spark, night):
    """The workers write the events themselves (pyarrow), one file per work unit; Spark,
    pyarrow and DuckDB read the folder alike; the stage run again replaces its files."""
    import duckdb

    cfg, root = night
    run = stage_night("2026-11-01", str(cfg), str(root.root), run_id="files")
    manifest = load_manifest(run)
    units = D.work_units(manifest, D.plan_ranges(spark, manifest))
    D.decode_stage(spark, manifest, run)
    events = Path(run) / D.EVENTS_DIR
    names = sorted(p.name for p in events.iterdir())
    assert names == [f"part-{i:05d}.parquet" for i in range(len(units))]   # nothing hidden left
    first = _events(Path(run))
    n = spark.read.schema(D.spark_event_schema()).parquet(str(events)).count()
    dn = duckdb.sql(f"select count(*) from read_parquet('{events}/*.parquet')").fetchone()[0]
    assert n == dn == len(first) > 0
    D.decode_stage(spark, manifest, run)
    assert sorted(p.name for p in events.iterdir()) == names and _events(Path(run)) == first


def test_a_unit_that_fails_while_writing_leaves_no_file(tmp_path, monkeypatch):
    """A write that dies half-way (disk full, a killed task) leaves neither the file nor its
    hidden temporary: a retry writes it whole, a reader never sees half of it."""
    from decoders.events import EventSink

    def half(unit):
        sink = EventSink("s", "rdb", "a.rbr")
        sink.add("skip", 0, 0, n_bytes=1)
        yield from sink.batches()
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(D, "decode_unit", half)
    with pytest.raises(OSError, match="No space"):
        D.write_unit(3, {}, str(tmp_path))
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(D, "decode_unit", lambda unit: iter(()))
    assert D.write_unit(3, {}, str(tmp_path))[:2] == ("part-00003.parquet", 0)
    assert [p.name for p in tmp_path.iterdir()] == ["part-00003.parquet"]


def test_the_decode_counts_the_rows_in_each_hooks_scope(spark, night, tmp_path):
    """The decode counts per unit the rows in its format's hook scope
    (``resolve_scope_table``; None for a format without one), and
    ``ordering.stage.scoped_rows`` adds those of the rows held from earlier nights: the
    counts Spark's ``resolve_scope`` finds, so that the ordering skips the hook of a night
    without one with no scan (Db2 LUW v7: none; v10: its undo rows)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from dblog.accounting import units_record
    from dblog.ordering.stage import scoped_rows
    from decoders import get

    cfg, root = night
    run_dir = stage_night("2026-11-01", str(cfg), str(root.root), run_id="scoped")
    manifest = load_manifest(run_dir)
    D.decode_stage(spark, manifest, run_dir)
    units = units_record(run_dir)
    events = spark.read.parquet(str(run_dir / D.EVENTS_DIR))
    in_scope = events.filter(F.coalesce(get("db2luw").resolve_scope(), F.lit(False)))
    want = {r["source"]: r["n"] for r in in_scope.groupBy("source")
            .agg(F.count(F.lit(1)).alias("n")).collect()}
    assert want.get("hr_db2v10", 0) > 0 and "erp_db2" not in want
    by_source: dict = {}
    for u in units:
        if u["source"] in ("erp_db2", "hr_db2v10"):
            by_source[u["source"]] = by_source.get(u["source"], 0) + u["scoped"]
        else:
            assert u["scoped"] is None, u
    assert by_source == {"erp_db2": 0, "hr_db2v10": want["hr_db2v10"]}
    # and the carry rows (the ordering writes an empty carry state without a scan when none)
    from dblog.ordering.stage import carry_count

    carry = events.filter(F.col("kind") == "carry").count()
    assert sum(u["carry"] for u in units) == carry_count(run_dir) == carry
    assert scoped_rows(manifest, run_dir, "db2luw") == want["hr_db2v10"]
    assert scoped_rows(manifest, run_dir, "rdb") is None
    # rows held from an earlier night count too: v10 undo rows held for the v7 source
    held = tmp_path / "held"
    held.mkdir()
    from decoders.events import EVENT_SCHEMA

    scoped = pa.Table.from_pylist([r.asDict() for r in in_scope.collect()], schema=EVENT_SCHEMA)
    pq.write_table(scoped.drop_columns(["source"]), held / "part-0.parquet")
    for s in manifest["sources"]:
        if s["name"] == "erp_db2":
            s["prev_held"] = str(held)
    assert scoped_rows(manifest, run_dir, "db2luw") == 2 * want["hr_db2v10"]
    # a unit without a count (a record written before the count existed): no shortcut
    record = json.loads((run_dir / D.UNITS_FILE).read_text())
    for u in record["units"]:
        u.pop("scoped")
    (run_dir / D.UNITS_FILE).write_text(json.dumps(record))
    assert scoped_rows(manifest, run_dir, "db2luw") is None



def test_the_python_workers_job_is_submitted_before_the_driver_goes_on(spark, monkeypatch):
    """``start_python_workers`` returns once its job is submitted: the driver's framing that
    follows holds the GIL and would otherwise hold back the job's py4j calls."""
    import threading
    import time

    sc = spark.sparkContext
    seen = []
    real = D.submitted

    def spy(sc_, group, thread, timeout=2.0):
        ok = real(sc_, group, thread, timeout)
        seen.append((ok, list(sc_.statusTracker().getJobIdsForGroup(group))))
        return ok

    monkeypatch.setattr(D, "submitted", spy)
    D.start_python_workers(spark)()
    assert len(seen) == 1 and seen[0][0] and seen[0][1], seen   # its job existed on return
    assert sc.getLocalProperty("spark.jobGroup.id") is None

    # ``submitted``: seen once the group's job exists; False at once for a thread that
    # ended without one; False after the timeout for a thread still busy without one
    def job():
        sc.setJobGroup("dblog-test-submitted", "test")
        try:
            spark.range(3).count()
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)

    t = threading.Thread(target=job)
    t.start()
    assert real(sc, "dblog-test-submitted", t, timeout=30)
    t.join()
    # a job without the group (a thread whose group did not reach the JVM) counts while active
    slow = threading.Thread(target=lambda: spark.range(0, 2, 1, 2).selectExpr(
        "java_method('java.lang.Thread', 'sleep', 1500L)").collect())
    slow.start()
    assert real(sc, "dblog-test-other-group", slow, timeout=30)
    slow.join()
    done = threading.Thread(target=lambda: None)
    done.start()
    done.join()
    t0 = time.monotonic()
    assert not real(sc, "dblog-test-never", done, timeout=30)
    assert time.monotonic() - t0 < 5
    busy = threading.Thread(target=time.sleep, args=(1.0,))
    busy.start()
    t0 = time.monotonic()
    assert not real(sc, "dblog-test-never", busy, timeout=0.2)
    assert 0.15 <= time.monotonic() - t0 < 0.9
    busy.join()


def test_the_driver_frames_few_bytes_and_no_more_informix_than_its_numpy_pass_reads():
    """A local driver frames up to ``DRIVER_FRAMING_MAX`` in all, and informix only below the
    bytes at which its split loads the compiled pass (a load only decoding workers reuse)."""
    from decoders.informix import columns as IC

    mib = 1 << 20
    assert D.driver_frames([("soliddb", 211 * mib), ("soliddb", 211 * mib)])
    assert D.driver_frames([("lldf", 300 * mib), ("lldf", 300 * mib)])
    assert not D.driver_frames([("lldf", 300 * mib), ("soliddb", 300 * mib), ("rdb", 100 * mib)])
    limit = decoders.get("informix").DRIVER_FRAMING_MAX
    assert limit < min(IC.NATIVE_MIN_BYTES, IC.NATIVE_AFTER_BYTES)
    assert D.driver_frames([("informix", limit), ("rdb", 200 * mib)])
    assert not D.driver_frames([("informix", 200 * mib), ("informix", 71 * mib)])
    assert not D.driver_frames([("informix", limit // 2), ("informix", limit // 2 + 1)])


def test_grouped_units_are_few_tasks_per_core_balanced_by_size_and_keep_every_row():
    rows = [(i, f"u{i}") for i in range(22)]
    sizes = [100 - 3 * i for i in range(22)]
    out, k = D.grouped(rows, sizes, 2)
    assert sorted(out) == rows and k == 6                  # 22 units -> 4 tasks of <= 6 rows
    tasks = [out[i:i + k] for i in range(0, len(out), k)]
    assert [len(t) for t in tasks] == [6, 6, 6, 4]
    loads = [sum(sizes[u] for u, _ in t) for t in tasks]
    assert max(loads[:3]) - min(loads[:3]) <= max(sizes)    # the full tasks carry about equal bytes
    assert D.grouped(rows[:3], sizes[:3], 2) == (rows[:3], 1)   # few units: one per task
    assert D.grouped([], [], 2) == ([], 1)
    many, k = D.grouped(rows, sizes[::-1], 16)              # more task slots than units:
    assert k == 1 and many == rows[::-1]                    # one each, the biggest first
