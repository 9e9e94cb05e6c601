"""A format's hook on files: its rows grouped by a key in Python tasks, never through the JVM.

A format whose ``resolve_transactions`` needs every row of a key together (Informix: a
source's records of one xid) may also export

    RESOLVE_KEY = "<column>"                 # an integer column
    resolve_table(table, files) -> Iterator[pa.RecordBatch]

the same hook on an Arrow table that holds every row of each (source, key) in it, and the
rows whose key is null (``files``: the Parquet files the rows were read from; the table has
no ``seg_data``). When the night's rows of such a format are in local Parquet files as the
decode wrote them (``decode_units.json``; and no repeated position had to be marked), the
ordering runs this instead of the DataFrame hook: the same rows, without the scan into
Spark rows, the exchange, the sort and the Arrow conversions both ways that made the
DataFrame hook most of the Informix ordering (docs/BENCHMARK.md, "Twentieth session").

Two Spark jobs of Python tasks, one small row back per task (as the decode,
``decode.units_frame``):

1. *split*: a task per few input files (``decode.grouped``: Spark's per-task cost is
   ~50 ms) reads each (a decode unit's events, a held-state file) a batch at a time
   (every column but ``seg_data``) and appends each batch's rows to one Arrow IPC file
   (uncompressed, ``IPC_COMPRESSION``), grouped by bucket: ``hash(source) + key`` modulo
   the number of buckets; rows of a null key go to the bucket of the file's number. It
   returns, per file and bucket, the indexes of its record batches and their rows.
2. *resolve*: one task per bucket reads its batches from every split file (random access
   into the IPC files), hands them to ``resolve_table`` and writes its output as one Parquet
   file into the resolved folder (a hidden name, renamed when whole: a retried task
   replaces it with the same rows).

Memory: a split task holds one batch; a resolve task holds its bucket, which the bucket
count bounds (``bucket_count``: at most ``BUCKET_ROWS`` rows each, one per core when each
gets ``MIN_BUCKET_ROWS``, a multiple of the cores), unless one key has very many rows: when
the split finds a bucket of more than ``MAX_BUCKET_ROWS``, the ordering runs the DataFrame
hook instead (Spark's sort spills) and says so in the log.
"""

from __future__ import annotations

import json
import os
import shutil
import zlib
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from decoders import get as get_format
from decoders.events import EVENT_SCHEMA

from ..decode import PARQUET_OPTIONS, file_bytes, grouped, hidden_temp, units_frame
from ..sparkio import task_count

KEY = "RESOLVE_KEY"
TABLE_HOOK = "resolve_table"
BUCKET_ROWS = 500_000        # rows a resolve task holds at most (sizes the bucket count)
MIN_BUCKET_ROWS = 100_000    # rows below which a night has fewer buckets than cores
MAX_BUCKET_ROWS = 4_000_000  # a bucket bigger than this (one huge key): the DataFrame hook
BATCH_ROWS = 65_536          # rows a split task reads at a time
# the split files are written once and read once, from the page cache: uncompressed
# they are about 3x bigger (the transactions pass's narrow rows: 51 MB for 272,714 rows,
# LZ4 17 MB) and the split and the read of a bucket cost 0.28 instead of 0.42 CPU s per
# 272,714 rows (docs/BENCHMARK.md, "Twenty-third session")
IPC_COMPRESSION = None
SPLIT_SCHEMA = "task INT, rows BIGINT, batches STRING"
RESOLVED_SCHEMA = "bucket INT, rows BIGINT"
STREAM_SCHEMA = pa.schema([f for f in EVENT_SCHEMA if f.name != "seg_data"]
                          + [pa.field("from_state", pa.bool_())])
OUT_SCHEMA = EVENT_SCHEMA.append(pa.field("from_state", pa.bool_()))


class TooBig(RuntimeError):
    """A bucket holds more than ``MAX_BUCKET_ROWS`` rows."""


def table_hook(fmt: str):
    """(key column, ``resolve_table``) of a format that exports both, else None."""
    pkg = get_format(fmt)
    key = getattr(pkg, KEY, None)
    fn = getattr(pkg, TABLE_HOOK, None)
    return None if key is None or fn is None else (key, fn)


def bucket_count(rows: int, cores: int) -> int:
    """Buckets for about ``rows`` rows: at most ``BUCKET_ROWS`` each, one per core when each
    gets ``MIN_BUCKET_ROWS``; more than the cores: a multiple of them (``task_count``)."""
    return task_count(rows, cores, BUCKET_ROWS, MIN_BUCKET_ROWS)


def buckets_of(batch: pa.RecordBatch, key: str, n: int, rest: int):
    """Each row's bucket (numpy int64): (crc32 of its source + its key) modulo ``n``; a row
    of no key (or no source) goes to bucket ``rest``."""
    import numpy as np
    import pyarrow.compute as pc

    src = batch.column("source")
    enc = src.dictionary_encode() if not pa.types.is_dictionary(src.type) else src
    salt = np.array([zlib.crc32(s.encode("utf-8")) % n if s is not None else 0
                     for s in enc.dictionary.to_pylist()] + [0], np.int64)
    codes = enc.indices.fill_null(len(enc.dictionary)).to_numpy(zero_copy_only=False)
    values = batch.column(key)
    valid = pc.and_(pc.is_valid(values), pc.is_valid(src)).to_numpy(zero_copy_only=False)
    k = pc.fill_null(values, 0).cast(pa.int64()).to_numpy(zero_copy_only=False)
    return np.where(valid, (k % n + salt[codes]) % n, rest % n)


def _conform(batch: pa.RecordBatch, source: str | None, from_state: bool) -> pa.RecordBatch:
    """A batch read from an events or held-state file -> ``STREAM_SCHEMA`` (a held file has no
    ``source`` column: its folder is the source's)."""
    n = batch.num_rows
    cols = []
    for f in STREAM_SCHEMA:
        if f.name == "from_state":
            cols.append(pa.repeat(pa.scalar(bool(from_state)), n))
        elif f.name == "source" and source is not None:
            cols.append(pa.repeat(pa.scalar(source, pa.string()), n))
        elif f.name in batch.schema.names:
            col = batch.column(f.name)
            cols.append(col if col.type == f.type else col.cast(f.type))
        else:
            cols.append(pa.nulls(n, f.type))
    return pa.RecordBatch.from_arrays(cols, schema=STREAM_SCHEMA)


def split_file(spec: dict) -> tuple[int, dict]:
    """Split task: ``spec`` (path, source, from_state, key, buckets, task, out) -> (rows,
    {bucket: [[batch index, rows], ...]}) of the IPC file ``<out>/<task>.arrow``."""
    import pyarrow.parquet as pq

    n, task, key = int(spec["buckets"]), int(spec["task"]), spec["key"]
    pf = pq.ParquetFile(spec["path"])
    cols = [c for c in pf.schema_arrow.names if c in STREAM_SCHEMA.names]
    batches = (_conform(b, spec.get("source"), bool(spec["from_state"]))
               for b in pf.iter_batches(batch_size=BATCH_ROWS, columns=cols))
    return write_split(os.path.join(spec["out"], f"{task:05d}.arrow"), STREAM_SCHEMA, batches,
                       lambda b: buckets_of(b, key, n, task))


class SplitWriter:
    """An Arrow IPC file (``IPC_COMPRESSION``) of ``schema``'s batches, each batch's rows grouped by bucket,
    written under a hidden name and renamed when whole (``close``). ``where``: {bucket:
    [[batch index, rows], ...]}; ``rows``: the rows written."""

    def __init__(self, final: str, schema: pa.Schema) -> None:
        self.final, self.tmp = final, hidden_temp(final)
        self.where: dict[int, list] = {}
        self.rows = self._index = 0
        self._sink = pa.OSFile(self.tmp, "wb")
        self._w = pa.ipc.new_file(self._sink, schema,
                                  options=pa.ipc.IpcWriteOptions(compression=IPC_COMPRESSION))

    def write(self, batch: pa.RecordBatch, buckets, keep=None) -> None:
        """``batch``'s rows, ``buckets``: numpy, one bucket per row; ``keep``: numpy, the
        rows to write (all without it), taken once in their buckets' order."""
        import numpy as np

        if not batch.num_rows:
            return
        if keep is None:
            order = np.argsort(buckets, kind="stable")
        else:
            rows = np.flatnonzero(keep)
            order = rows[np.argsort(buckets[rows], kind="stable")]
        bs = buckets[order]
        batch = batch.take(pa.array(order))
        cuts = np.flatnonzero(np.diff(bs)) + 1
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(bs)]):
            if hi > lo:
                self._w.write_batch(batch.slice(int(lo), int(hi - lo)))
                self.where.setdefault(int(bs[lo]), []).append([self._index, int(hi - lo)])
                self._index += 1
        self.rows += len(order)

    def close(self) -> None:
        self._w.close()
        self._sink.close()
        os.replace(self.tmp, self.final)

    def abort(self) -> None:
        """Closes and removes what was written (nothing when ``close`` renamed it)."""
        for x in (self._w, self._sink):
            try:
                x.close()
            except Exception:       # (closing a half-written stream after an error)
                pass
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)


def write_split(final: str, schema: pa.Schema, batches, buckets) -> tuple[int, dict]:
    """``batches`` (of ``schema``) into the Arrow IPC file ``final`` (``SplitWriter``), each
    batch's rows grouped by bucket (``buckets(batch)``: numpy, one bucket per row) -> (rows,
    {bucket: [[batch index, rows], ...]})."""
    w = SplitWriter(final, schema)
    try:
        for batch in batches:
            if batch.num_rows:
                w.write(batch, buckets(batch))
        w.close()
    finally:
        w.abort()
    return w.rows, w.where


def read_bucket(parts, schema: pa.Schema) -> pa.Table:
    """A bucket's rows: ``parts`` [[IPC file, [batch indexes]], ...] (random access into the
    split files), as one chunk per column: a bucket gathers hundreds of small batches, and
    Arrow's kernels (hash aggregations, joins, sorts) over that many chunks took three
    times as long (the transactions pass's summary of a 443,405-row bucket: 0.87 s
    chunked, 0.28 s in one chunk, 0.02 s to combine)."""
    batches = []
    for path, indexes in parts:
        with pa.memory_map(path) as src:
            reader = pa.ipc.open_file(src)
            batches.extend(reader.get_batch(i) for i in indexes)
    return pa.Table.from_batches(batches, schema=schema).combine_chunks()


def resolve_bucket(spec: dict) -> int:
    """Resolve task: ``spec`` (format, bucket, parts: [[IPC file, [batch indexes]], ...],
    files, out) -> rows written to ``<out>/part-<format>-<bucket>.parquet``."""
    import pyarrow.parquet as pq

    from decoders.events import EVENT_COLUMNS

    table = read_bucket(spec["parts"], STREAM_SCHEMA)
    _, fn = table_hook(spec["format"])
    final = os.path.join(spec["out"], f"part-{spec['format']}-{int(spec['bucket']):05d}.parquet")
    tmp = hidden_temp(final)
    rows = 0
    options = {**PARQUET_OPTIONS,
               "write_statistics": [*PARQUET_OPTIONS["write_statistics"], "from_state"]}
    try:
        with pq.ParquetWriter(tmp, OUT_SCHEMA, **options) as writer:
            for b in fn(table, tuple(spec["files"])):
                if b.num_rows:
                    seg = pa.nulls(b.num_rows, OUT_SCHEMA.field("seg_data").type)
                    cols = [seg if name == "seg_data" else b.column(name)
                            for name in [*EVENT_COLUMNS, "from_state"]]
                    writer.write_batch(pa.RecordBatch.from_arrays(cols, schema=OUT_SCHEMA))
                    rows += b.num_rows
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return rows


def _tasks(run):
    """mapInArrow over ``units_frame`` rows: ``run(spec dict)`` -> a tuple of the result
    row's values after the unit id."""
    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for uid, payload in zip(batch.column("unit_id").to_pylist(),
                                    batch.column("payload").to_pylist()):
                yield uid, run(json.loads(payload))
    return fn


def _split_job(split):
    """mapInArrow over ``units_frame`` rows of split tasks: ``split(spec)`` -> (rows,
    {bucket: [[batch, rows], ...]}[, {stream: {bucket: ...}}]) -> one row (task, rows,
    batches as JSON: ``{"b": the file's, "x": the extra streams'}``) per task."""
    def job(batches):
        for uid, out in _tasks(split)(batches):
            rows, where = out[0], out[1]
            extra = out[2] if len(out) > 2 else {}
            yield pa.record_batch([pa.array([uid], pa.int32()), pa.array([rows], pa.int64()),
                                   pa.array([json.dumps({"b": where, "x": extra})])],
                                  names=["task", "rows", "batches"])
    return job


def _bucket_job(work):
    """mapInArrow over ``units_frame`` rows of bucket tasks: ``work(spec)`` -> rows written ->
    one row (bucket, rows) per task."""
    def job(batches):
        for uid, rows in _tasks(work)(batches):
            yield pa.record_batch([pa.array([uid], pa.int32()), pa.array([rows], pa.int64())],
                                  names=["bucket", "rows"])
    return job


def run_tasks(spark, label: str, specs: list[dict], key: str, work) -> int:
    """One Spark job (described as ``label``) of one Python task per spec (``units_frame``,
    in the order given): ``work(spec)`` -> rows written. Checks that every spec's ``key``
    reported; returns the rows."""
    sc = spark.sparkContext
    sc.setJobDescription(label)
    try:
        done = units_frame(spark, [(int(x[key]), json.dumps(x)) for x in specs]) \
            .mapInArrow(_bucket_job(work), RESOLVED_SCHEMA).collect()
    finally:
        sc.setJobDescription(None)
    if {r["bucket"] for r in done} != {int(x[key]) for x in specs}:
        raise RuntimeError(f"{label}: tasks {sorted(r['bucket'] for r in done)} of "
                           f"{sorted(int(x[key]) for x in specs)}")
    return sum(int(r["rows"]) for r in done)


def split_then_run(spark, label: str, specs: list[dict], split, tmp: Path, n: int, work,
                   bucket_spec, too_big: str, verb: str, also: set | frozenset = frozenset()) -> int:
    """Two Spark jobs of Python tasks: ``split(spec)`` for each of ``specs`` (each gets
    ``task`` and ``out``, the folder ``tmp`` of the IPC files; ``write_split``), then
    ``work(bucket_spec(bucket, parts, extra))`` for each of the ``n`` buckets with rows, the
    biggest first (``parts``: ``read_bucket``'s; the job is described as ``<label>: <verb> <n>
    buckets``). Returns the rows the bucket tasks report. A split may also write extra
    streams of its own, ``<task>.<stream>.arrow``, and return their batches by bucket as a
    third value ({stream: {bucket: [[batch, rows], ...]}}): ``extra`` is then {stream: the
    bucket's parts} (a bucket with rows in a stream only has a task too, as has each bucket
    of ``also``).
    Raises ``TooBig`` (``too_big`` says why) before the second job when a bucket holds more
    than ``MAX_BUCKET_ROWS`` rows. ``tmp`` is removed afterwards."""
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    sc = spark.sparkContext
    try:
        specs = [{**x, "task": i, "out": str(tmp)} for i, x in enumerate(specs)]
        sc.setJobDescription(f"{label}: split {len(specs)} files into {n} buckets")
        rows, per_task = grouped([(i, json.dumps(x)) for i, x in enumerate(specs)],
                                 [file_bytes(x.get("path")) for x in specs],
                                 sc.defaultParallelism)
        split_rows = units_frame(spark, rows, per_task) \
            .mapInArrow(_split_job(split), SPLIT_SCHEMA).collect()
        if {r["task"] for r in split_rows} != set(range(len(specs))):
            raise RuntimeError(f"{label}: split tasks {sorted(r['task'] for r in split_rows)} "
                               f"of {len(specs)} files")
        parts: dict[int, list] = {b: [] for b in range(n)}
        extra: dict[int, dict] = {b: {} for b in range(n)}
        sizes, extra_sizes = [0] * n, [0] * n
        for r in split_rows:
            got = json.loads(r["batches"])
            for b, pieces in got["b"].items():
                parts[int(b)].append([str(tmp / f"{r['task']:05d}.arrow"), [i for i, _ in pieces]])
                sizes[int(b)] += sum(k for _, k in pieces)
            for stream, where in got["x"].items():
                for b, pieces in where.items():
                    extra[int(b)].setdefault(stream, []).append(
                        [str(tmp / f"{r['task']:05d}.{stream}.arrow"), [i for i, _ in pieces]])
                    extra_sizes[int(b)] += sum(k for _, k in pieces)
        if max(sizes, default=0) > MAX_BUCKET_ROWS:
            raise TooBig(f"{label}: a bucket of {max(sizes)} rows (more than "
                         f"{MAX_BUCKET_ROWS}): {too_big}")
        jobs = [bucket_spec(b, parts[b], extra[b])
                for b in sorted(range(n), key=lambda b: -sizes[b])
                if sizes[b] or extra_sizes[b] or b in also]
        if not jobs:
            return 0
        return run_tasks(spark, f"{label}: {verb} {len(jobs)} buckets", jobs, "bucket", work)
    finally:
        sc.setJobDescription(None)
        shutil.rmtree(tmp, ignore_errors=True)


def parquet_files(folder: str | Path) -> list[str]:
    """The Parquet files under ``folder`` (any depth), hidden names and ``_`` files left out."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(str(p) for p in folder.rglob("*.parquet")
                  if p.is_file() and not any(part.startswith((".", "_"))
                                             for part in p.relative_to(folder).parts))


def run(spark, fmt: str, inputs: list[dict], out_dir: Path, work: Path, rows: int) -> int:
    """The hook of ``fmt`` on files: ``inputs`` (path, source or None, from_state), about
    ``rows`` rows in all -> Parquet files of ``OUT_SCHEMA`` in ``out_dir``; returns the rows
    written. Raises ``TooBig`` (nothing written to ``out_dir``) when a bucket is too big."""
    key, _ = table_hook(fmt)
    n = bucket_count(rows, int(spark.sparkContext.defaultParallelism))
    files = sorted({x["path"] for x in inputs})
    return split_then_run(
        spark, f"hook {fmt}", [{**x, "key": key, "buckets": n} for x in inputs], split_file,
        Path(work) / f"buckets-{fmt}", n, resolve_bucket,
        lambda b, parts, extra: {"format": fmt, "bucket": b, "parts": parts, "files": files,
                                 "out": str(out_dir)},
        f"one {key} has too many rows to resolve in memory", "resolve")


__all__ = ["OUT_SCHEMA", "STREAM_SCHEMA", "SplitWriter", "TooBig", "bucket_count", "buckets_of",
           "parquet_files", "read_bucket", "resolve_bucket", "run", "split_file",
           "split_then_run", "table_hook", "write_split"]
