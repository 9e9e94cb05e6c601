"""The published changes taken from their files (``dblog.ordering.wide``): the narrow plan's
``seq`` rows name (file, row index); one task per file takes those rows, row group by row
group, and writes them with the sequence columns. Nothing lost, nothing doubled."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from decoders.events import EVENT_SCHEMA, TS
from dblog.ordering import wide

UTC = dt.timezone.utc


def _events(n: int, source_rows: list[str] | None = None) -> pa.Table:
    rows = []
    for i in range(n):
        rows.append({"source": (source_rows or ["s1"] * n)[i], "format": "rdb",
                     "archive_file": "s1/2026-11-01/a.rdb", "record_offset": 100 * i,
                     "record_index": i, "n_records": 1, "n_bytes": 100, "kind": "change",
                     "trx_id": f"T{i // 3}", "position": f"{i:08X}", "op": "m",
                     "table_id": "7", "schema_name": "FIN", "table_name": "T",
                     "before": None, "after": f'{{"ID":{i},"NOTE":"é{i}"}}', "row_id": f"1:{i}:0"})
    return pa.Table.from_pylist(rows, schema=EVENT_SCHEMA)


def _seq(tmp_path, rows: list[int], sources: list[str] | None = None) -> str:
    d = tmp_path / "seq" / "_fid=3"
    d.mkdir(parents=True)
    ts = dt.datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    table = pa.table({
        "_row": pa.array(rows, pa.int64()),
        "source": pa.array(sources or ["s1"] * len(rows)),
        "commit_seq": pa.array([10 + r // 3 for r in rows], pa.int64()),
        "event_seq": pa.array([1 + r % 3 for r in rows], pa.int32()),
        "commit_position": pa.array([f"C{r // 3:04d}" for r in rows]),
        "commit_ts": pa.array([ts + dt.timedelta(seconds=r) for r in rows], TS)})
    # two files, rows out of order: the task sorts them
    half = len(rows) // 2
    pq.write_table(table.slice(half), d / "part-b.parquet")
    pq.write_table(table.slice(0, half), d / "part-a.parquet")
    return str(d)


def test_rows_are_taken_across_row_groups_with_their_sequence_columns(tmp_path):
    events = _events(20)
    path = tmp_path / "part-00000.parquet"
    pq.write_table(events, path, row_group_size=6)           # row groups 0-5, 6-11, 12-17, 18-19
    picked = [0, 2, 5, 6, 13, 17, 18, 19]
    seq = _seq(tmp_path, picked)
    out = tmp_path / "changes"
    counts = wide.write_file_changes(3, str(path), seq, str(out), "run-1", "2026-11-01")
    assert counts == {"s1": len(picked)}
    [f] = list((out / "source=s1" / "date=2026-11-01").iterdir())
    assert f.name == "part-00003.zstd.parquet"
    got = pq.read_table(f)
    assert got.schema.names == [n for n, _ in wide.OUT_FIELDS]
    assert got.column("record_offset").to_pylist() == [100 * i for i in picked]
    assert got.column("log_position").to_pylist() == [f"{i:08X}" for i in picked]
    assert got.column("after").to_pylist() == [f'{{"ID":{i},"NOTE":"é{i}"}}' for i in picked]
    assert got.column("commit_seq").to_pylist() == [10 + i // 3 for i in picked]
    assert got.column("event_seq").to_pylist() == [1 + i % 3 for i in picked]
    assert got.column("commit_position").to_pylist() == [f"C{i // 3:04d}" for i in picked]
    assert set(got.column("run_id").to_pylist()) == {"run-1"}
    assert got.column("commit_ts")[1].as_py().replace(tzinfo=UTC) == \
        dt.datetime(2026, 11, 1, 12, 0, 2, tzinfo=UTC)
    # commit_ts as Spark wrote it before (INT96): one schema across old and new nights
    assert pq.ParquetFile(f).metadata.schema.column(5).physical_type == "INT96"
    assert not [p for p in out.rglob(".*")]                   # no temporary file left


def test_rows_of_two_sources_go_to_their_folders(tmp_path):
    src = ["s1", "s2"] * 5
    path = tmp_path / "part-00000.parquet"
    pq.write_table(_events(10, src), path, row_group_size=4)
    picked = [1, 2, 3, 8]
    seq = _seq(tmp_path, picked, [src[i] for i in picked])
    counts = wide.write_file_changes(3, str(path), seq, str(tmp_path / "c"), "r", "2026-11-01")
    assert counts == {"s2": 2, "s1": 2}
    s2 = pq.read_table(tmp_path / "c" / "source=s2" / "date=2026-11-01")
    assert sorted(s2.column("record_offset").to_pylist()) == [100, 300]


@pytest.mark.parametrize("rows, message", [([1, 1, 4], "published twice"),
                                           ([1, 4, 25], "lie past")])
def test_a_seq_row_the_file_cannot_give_fails_and_writes_nothing(tmp_path, rows, message):
    path = tmp_path / "part-00000.parquet"
    pq.write_table(_events(20), path, row_group_size=6)
    seq = _seq(tmp_path, rows)
    with pytest.raises(RuntimeError, match=message):
        wide.write_file_changes(3, str(path), seq, str(tmp_path / "c"), "r", "2026-11-01")
    assert not [p for p in (tmp_path / "c").rglob("*") if p.is_file()] if (tmp_path / "c").exists() else True


@pytest.mark.spark
def test_tags_name_each_rows_file_and_index_and_the_job_writes_them(spark, tmp_path):
    """``SourceFiles.tag`` gives every row read its file number and its index in the file
    (with a pushed filter skipping row groups), and ``write_changes`` writes exactly the
    rows named, one task per file."""
    from pyspark.sql import functions as F

    folder = tmp_path / "events"
    folder.mkdir()
    pq.write_table(_events(12), folder / "part-00000.parquet", row_group_size=5)
    pq.write_table(_events(7), folder / "part-00001.parquet", row_group_size=5)
    files = wide.SourceFiles()
    df = files.tag(spark.read.parquet(str(folder)), folder)
    assert [p.rsplit("/", 1)[1] for p in files.paths] == ["part-00000.parquet", "part-00001.parquet"]
    got = sorted((r["_fid"], r["_row"], r["record_index"])
                 for r in df.filter(F.col("record_index") >= 4).collect())
    assert got == [(0, i, i) for i in range(4, 12)] + [(1, i, i) for i in range(4, 7)]
    seq = df.filter(F.col("record_index") % 2 == 1).select(
        "_fid", "_row", "source", (F.col("record_index") + 100).alias("commit_seq"),
        F.lit(1).alias("event_seq"), F.col("position").alias("commit_position"),
        F.lit(None).cast("timestamp").alias("commit_ts"))
    seq.write.partitionBy("_fid").parquet(str(tmp_path / "seq"))
    counts = wide.write_changes(spark, files, tmp_path / "seq", tmp_path / "changes", "r", "2026-11-01")
    assert counts == {"s1": 6 + 3}
    out = spark.read.parquet(str(tmp_path / "changes"))
    assert sorted(r["commit_seq"] for r in out.collect()) == sorted(
        [100 + i for i in range(1, 12, 2)] + [100 + i for i in range(1, 7, 2)])
    assert [tuple(x) for x in out.select("source", F.col("date").cast("string")).distinct().collect()] \
        == [("s1", "2026-11-01")]
