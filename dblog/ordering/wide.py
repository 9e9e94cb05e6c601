"""The published changes without shuffling a row image: the narrow plan decides, the files give.

Every row the ordering may publish was read from a Parquet file of the run (the decoded
``events``, the rows held from an earlier night, the Informix hook's ``ordering/resolved``,
the reassembled ``ordering/segments``). ``SourceFiles`` numbers those files and tags each row
read from them with its file (``_fid``) and its index in the file (``_row``, Spark's
``_metadata.row_index``). The ordering's joins and the ``event_seq`` window then run on
narrow rows only (positions, ids, the two tags): which changes publish, with which
``commit_seq``, ``event_seq``, ``commit_position`` and ``commit_ts``, written as
``ordering/seq/_fid=<n>/`` (``seq_columns``).

``write_changes`` then makes the published ``changes`` in one Spark job of one task per
file (``decode.units_frame``): the task reads its file's ``seq`` rows and its file row group
by row group with pyarrow, takes the published rows (a mask of their row indexes), adds the
sequence columns and writes ``changes/source=<S>/date=<D>/part-<fid>.zstd.parquet`` (under
a hidden name, renamed when whole: a retried task replaces its own file). The row images
are read once and written once; they are never shuffled, sorted or converted to JVM rows,
which at a million changes was most of the ordering's CPU (docs/BENCHMARK.md, "The
published changes without a wide shuffle"). A task's memory is one row group of its file
plus the file's ``seq`` rows; the work spreads over the cluster as the decode's does (one
task per decoded range).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa

from decoders.events import TS

from .schema import CHANGE_COLUMNS, DICTIONARY_COLUMNS

SEQ = "seq"                       # ordering/seq/_fid=<n>/: the published rows, narrow
FID, ROW = "_fid", "_row"
SEQ_COLUMNS = [ROW, "source", "commit_seq", "event_seq", "commit_position", "commit_ts"]
# the published columns taken from the row's file (``position`` is published as
# ``log_position``); the others come from ``seq`` or are the run's
FROM_FILE = ["format", "trx_id", "op", "table_id", "schema_name", "table_name", "before", "after",
             "ddl", "row_id", "position", "archive_file", "record_offset"]
OUT_FIELDS = [("format", pa.string()), ("commit_seq", pa.int64()), ("event_seq", pa.int32()),
              ("trx_id", pa.string()), ("commit_position", pa.string()), ("commit_ts", TS),
              ("op", pa.string()), ("table_id", pa.string()), ("schema_name", pa.string()),
              ("table_name", pa.string()), ("before", pa.string()), ("after", pa.string()),
              ("ddl", pa.string()), ("row_id", pa.string()), ("log_position", pa.string()),
              ("archive_file", pa.string()), ("record_offset", pa.int64()), ("run_id", pa.string())]
OUT_SCHEMA = pa.schema(OUT_FIELDS)
assert [n for n, _ in OUT_FIELDS] == [c for c in CHANGE_COLUMNS if c not in ("source", "date")]
WRITTEN_SCHEMA = "fid INT, source STRING, rows LONG"


class SourceFiles:
    """The Parquet files the ordering reads rows from, numbered from 0 in the order they are
    tagged (``paths[fid]``)."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def tag(self, df, folder: str | Path):
        """``df`` (read from ``folder``, a flat folder of Parquet files) + ``_fid`` (int: the
        file's number) and ``_row`` (long: the row's index in its file). The number is a
        constant map of the query from the file's name, so tagging costs no job; a file
        that appears in the folder after this call gets a null ``_fid`` and
        ``write_changes`` refuses to lose its rows."""
        from pyspark.sql import functions as F

        folder = Path(folder)
        names = sorted(p.name for p in folder.iterdir()
                       if p.is_file() and not p.name.startswith((".", "_"))) if folder.is_dir() else []
        ids = {}
        for name in names:
            ids[name] = len(self.paths)
            self.paths.append(str((folder / name).resolve()))
        if ids:
            lookup = F.create_map(*[x for name in names for x in (F.lit(name), F.lit(ids[name]))])
            fid = lookup[F.col("_metadata.file_name")]
        else:
            fid = F.lit(None)
        return df.withColumns({FID: fid.cast("int"), ROW: F.col("_metadata.row_index").cast("long")})


def seq_columns(published):
    """Published changes with ``event_seq`` (and ``_fid``, ``_row``, ``commit_seq``,
    ``commit_position``, ``commit_ts``) -> the ``seq`` rows (``FID`` + ``SEQ_COLUMNS``)."""
    return published.select(FID, *SEQ_COLUMNS)


# ----------------------------------------------------------------- the task (a Python worker)

def _out_table(taken: pa.Table, seq: pa.Table, run_id: str) -> pa.Table:
    n = taken.num_rows
    cols = {
        "format": taken.column("format"), "commit_seq": seq.column("commit_seq"),
        "event_seq": seq.column("event_seq"), "trx_id": taken.column("trx_id"),
        "commit_position": seq.column("commit_position"), "commit_ts": seq.column("commit_ts"),
        "op": taken.column("op"), "table_id": taken.column("table_id"),
        "schema_name": taken.column("schema_name"), "table_name": taken.column("table_name"),
        "before": taken.column("before"), "after": taken.column("after"),
        "ddl": taken.column("ddl"), "row_id": taken.column("row_id"),
        "log_position": taken.column("position"), "archive_file": taken.column("archive_file"),
        "record_offset": taken.column("record_offset"),
        "run_id": pa.repeat(pa.scalar(run_id, pa.string()), n),
    }
    return pa.Table.from_arrays([cols[name].cast(t) for name, t in OUT_FIELDS], schema=OUT_SCHEMA)


def _seq_rows(seq_dir: str | None) -> pa.Table:
    """The ``seq`` rows of one file, by row index (none without a folder)."""
    import pyarrow.compute as pc

    from .trxfiles import read_rows

    seq = read_rows(seq_dir, SEQ_COLUMNS) if seq_dir is not None else None
    if seq is None or seq.num_rows == 0:
        return pa.table({c: pa.array([], t) for c, t in
                         [(ROW, pa.int64()), ("source", pa.string()), ("commit_seq", pa.int64()),
                          ("event_seq", pa.int32()), ("commit_position", pa.string()), ("commit_ts", TS)]})
    return seq.take(pc.sort_indices(seq, [(ROW, "ascending")]))


def write_file_changes(fid: int, path: str, seq_dir: str | None, out_dir: str, run_id: str,
                       date: str, held: dict | None = None) -> dict[str, int]:
    """The published rows of one file -> ``<out_dir>/source=<S>/date=<date>/part-<fid>.zstd.parquet``
    (one per source among them). Returns {source: rows written}. Raises when a ``seq`` row
    names a row the file does not have, or a row twice (the narrow plan and the file
    disagree: nothing may be lost or doubled). With ``held`` (``trxfiles.HeldRows``'s spec),
    the file's held rows too, from the same reads of its row groups (the wide columns of
    a row group decoded once for both); ``seq_dir`` None: the file publishes no row."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from .trxfiles import HeldRows

    seq = _seq_rows(seq_dir)
    rows = seq.column(ROW).to_numpy()
    if len(rows) > 1 and np.any(np.diff(rows) <= 0):
        raise RuntimeError(f"ordering: a row of {path} is published twice")
    # as Spark wrote the changes before (``commit_ts`` as INT96, read back as a timestamp by
    # Spark, pyarrow and DuckDB alike), so that a dataset of nights written by both reads
    # with one schema
    options = {"compression": "zstd", "use_deprecated_int96_timestamps": True,
               "use_dictionary": [n for n, _ in OUT_FIELDS if n in DICTIONARY_COLUMNS]}
    writers: dict[str, tuple] = {}
    counts: dict[str, int] = {}

    def write(source: str, table: pa.Table) -> None:
        got = writers.get(source)
        if got is None:
            folder = os.path.join(out_dir, f"source={source}", f"date={date}")
            os.makedirs(folder, exist_ok=True)
            final = os.path.join(folder, f"part-{fid:05d}.zstd.parquet")
            tmp = os.path.join(folder, f".part-{fid:05d}.zstd.parquet.{os.getpid()}.tmp")
            got = writers[source] = (pq.ParquetWriter(tmp, OUT_SCHEMA, **options), tmp, final)
        got[0].write_table(table)
        counts[source] = counts.get(source, 0) + table.num_rows

    kept = None
    try:
        pf = pq.ParquetFile(path)
        if held is not None:
            kept = HeldRows(held, pf.schema_arrow.names)
            both = list(dict.fromkeys([*FROM_FILE, *kept.cols]))
        start = done = 0
        for rg in range(pf.num_row_groups):
            n = pf.metadata.row_group(rg).num_rows
            hi = int(np.searchsorted(rows, start + n))
            held_hi = kept.upto(start + n) if kept is not None else 0
            group = None
            if kept is not None and held_hi > kept.done:
                group = pf.read_row_group(rg, columns=both)
                kept.take(group, start, held_hi)
            if hi > done:
                if group is None:
                    group = pf.read_row_group(rg, columns=FROM_FILE)
                # (the rows ascend: a mask keeps them in order, cheaper than ``take``)
                keep = np.zeros(group.num_rows, bool)
                keep[rows[done:hi] - start] = True
                taken = group.filter(pa.array(keep))
                part = seq.slice(done, hi - done)
                out = _out_table(taken, part, run_id)
                sources = part.column("source")
                first = sources[0].as_py()
                if pc.all(pc.equal(sources, first)).as_py():
                    write(first, out)
                else:
                    for s in pc.unique(sources).to_pylist():
                        write(s, out.filter(pc.equal(sources, s)))
                done = hi
            start += n
        if done != len(rows):
            raise RuntimeError(f"ordering: {len(rows) - done} published rows of {path} lie past "
                               f"its {start} rows")
        if kept is not None:
            kept.finish(start)
        for writer, tmp, final in writers.values():
            writer.close()
            os.replace(tmp, final)
    finally:
        if kept is not None:
            kept.abort()
        for writer, tmp, _ in writers.values():
            if os.path.exists(tmp):
                writer.close()
                os.unlink(tmp)
    return counts


def _write_partition(out_dir: str, run_id: str, date: str):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for uid, payload in zip(batch.column("unit_id").to_pylist(),
                                    batch.column("payload").to_pylist()):
                unit = json.loads(payload)
                counts = write_file_changes(uid, unit["path"], unit["seq"], out_dir, run_id, date,
                                            unit.get("held"))
                yield pa.record_batch([pa.array([uid] * len(counts), pa.int32()),
                                       pa.array(list(counts), pa.string()),
                                       pa.array(list(counts.values()), pa.int64())],
                                      names=["fid", "source", "rows"])
    return run


def write_changes(spark, files: SourceFiles, seq_dir: Path, out_dir: Path, run_id: str,
                  date: str, held: list[dict] | None = None) -> dict[str, int]:
    """``changes`` from the ``seq`` rows (``seq_dir``, partitioned by ``_fid``) and the files
    they name: a few files per task (``decode.grouped``), balanced by their bytes. Returns
    {source: rows written}. With ``held`` (``trxfiles.held_specs``: the held rows of each
    file that has some), the same tasks also write the held state (their folder already
    made), a file holding held rows but no published one getting a task of its own."""
    from ..decode import file_bytes, grouped, units_frame

    seq_dir, out_dir = Path(seq_dir), Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)        # a rerun of the stage replaces what it wrote
    out_dir.mkdir(parents=True)
    units = []
    for d in sorted(seq_dir.glob(f"{FID}=*")) if seq_dir.is_dir() else []:
        value = d.name.split("=", 1)[1]
        if not value.isdigit() or int(value) >= len(files.paths):
            raise RuntimeError(f"ordering: published rows of a file the stage did not read "
                               f"({d}); nothing may be lost")
        fid = int(value)
        units.append((fid, files.paths[fid], str(d)))
    published = {u[0] for u in units}
    held_by = {int(h["fid"]): h for h in held or []}
    units += [(fid, h["path"], None) for fid, h in held_by.items() if fid not in published]
    if not units:
        return {}
    sc = spark.sparkContext
    rows, per_task = grouped([(fid, json.dumps({"path": path, "seq": seq,
                                                "held": held_by.get(fid)}))
                              for fid, path, seq in units],
                             [file_bytes(path) for _fid, path, _seq in units],
                             sc.defaultParallelism)
    df = units_frame(spark, rows, per_task)
    sc.setJobDescription("write changes (rows taken from their files)")
    try:
        written = df.mapInArrow(_write_partition(str(out_dir), run_id, date), WRITTEN_SCHEMA).collect()
    finally:
        sc.setJobDescription(None)
    missing = sorted(published - {r["fid"] for r in written})
    if missing:     # a file with seq rows writes at least one row
        raise RuntimeError(f"ordering: the published rows of files {missing[:10]} were not written")
    counts: dict[str, int] = {}
    for r in written:
        counts[r["source"]] = counts.get(r["source"], 0) + int(r["rows"])
    return counts
