"""The transactions pass on files: ``transactions`` and the audit's buckets of the rows of
the transactions, in Python tasks, never through the JVM.

``transactions.transaction_counts(..., buckets=True)`` shuffles the narrow columns of every
row by (source, trx_id) through Spark, sorts them, hands them to a Python worker as Arrow
and takes the transactions back: on the 1M Informix night 17 task-seconds, of which the
Python summary is about 3 (docs/BENCHMARK.md, "Twenty-first session"). When the night's
rows are in local Parquet files as the decode, the hook on files (``filehook``) and the
reassembly wrote them, the same pass runs in two Spark jobs of Python tasks
(``filehook.split_then_run``):

1. *split*: one task per file (a decode unit's events without the rows a hook replaced, the
   resolved rows, a held-state file, the reassembled segment groups) reads the columns the
   pass needs, keeps the rows of a transaction (a ``trx_id``, not ``carry``) and appends
   them to an Arrow IPC file grouped by bucket: ``crc32(source) + crc32(trx_id)`` modulo
   the bucket count (``filehook.bucket_count``);
2. *summarise*: one task per bucket (every row of each of its transactions) runs
   ``transactions.summarize`` and ``transactions.categories`` on the whole bucket (no sort:
   Arrow's hash aggregations) and writes its transactions and its buckets as Parquet files
   into ``ordering/trx_counts/_part=trx`` and ``_part=audit``, where the Spark pass writes
   the same rows.

The Spark pass (``transaction_counts``) stays the contract and runs when a row was marked
as a repeated position, without the decode's record of its units, when a DataFrame hook
changed rows, or when a bucket would hold more than ``filehook.MAX_BUCKET_ROWS`` rows (one
transaction of very many rows: Spark's sort spills, and ``stream_summarize`` holds one
chunk).
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from decoders.events import EVENT_SCHEMA

from ..decode import hidden_temp
from . import filehook
from .hooks import scope_table
from .transactions import (AUDIT_COLUMNS, NARROW_COLUMNS, TRX_COUNTS_SCHEMA, _buckets,
                           categories, final, partial)

COLUMNS = list(dict.fromkeys([*NARROW_COLUMNS, *AUDIT_COLUMNS]))
_TYPES = {f.name: f.type for f in EVENT_SCHEMA}
SPLIT_SCHEMA = pa.schema([(c, pa.bool_() if c == "from_state" else _TYPES[c]) for c in COLUMNS]
                         + [("_in_trx", pa.bool_())])
BUCKETS_SCHEMA = pa.schema([("source", pa.string()), ("format", pa.string()),
                            ("archive_file", pa.string()), ("bucket", pa.string()),
                            ("n_records", pa.int64()), ("n_bytes", pa.int64())])
TRX_PART, AUDIT_PART = "_part=trx", "_part=audit"


def _crc(values: pa.Array):
    """crc32 of each string of ``values`` (numpy int64; 0 for null), computed once per
    distinct value."""
    import numpy as np

    enc = values.dictionary_encode() if not pa.types.is_dictionary(values.type) else values
    table = np.array([zlib.crc32(s.encode("utf-8")) if s is not None else 0
                      for s in enc.dictionary.to_pylist()] + [0], np.int64)
    return table[enc.indices.fill_null(len(enc.dictionary)).to_numpy(zero_copy_only=False)]


def buckets_of(batch: pa.RecordBatch, n: int):
    """Each row's bucket: (crc32 of its source + crc32 of its trx_id) modulo ``n``."""
    return (_crc(batch.column("source")) + _crc(batch.column("trx_id"))) % n


def _conform(batch: pa.RecordBatch, spec: dict) -> pa.RecordBatch:
    """A batch read from an input file -> the rows of a transaction, ``SPLIT_SCHEMA``: as
    ``transaction_counts`` selects them (``segments``: the reassembled changes, counted as
    changes, no part of their transaction's outcome)."""
    n = batch.num_rows
    names = batch.schema.names
    segments = spec["role"] == "segments"
    if segments:
        keep = pc.and_(pc.equal(batch.column("kind"), "change"), pc.is_valid(batch.column("trx_id")))
    else:
        keep = pc.and_(pc.is_valid(batch.column("trx_id")), pc.not_equal(batch.column("kind"), "carry"))
    keep = pc.fill_null(keep, False)
    cols = []
    for f in SPLIT_SCHEMA:
        name = f.name
        if name == "_in_trx":
            col = pa.repeat(pa.scalar(not segments), n)
        elif segments and name not in ("source", "trx_id", "kind", "position"):
            col = pa.nulls(n, f.type)
        elif name == "source" and spec.get("source") is not None:
            col = pa.repeat(pa.scalar(spec["source"], pa.string()), n)
        elif name == "from_state" and spec.get("from_state") is not None:
            col = pa.repeat(pa.scalar(bool(spec["from_state"])), n)
        elif name in names:
            col = batch.column(name)
            col = col if col.type == f.type else col.cast(f.type)
        else:
            col = pa.nulls(n, f.type)
        cols.append(col)
    out = pa.RecordBatch.from_arrays(cols, schema=SPLIT_SCHEMA)
    # the rows a hook replaced (its output is in the resolved files): a format's rows
    # (``exclude``), or those in its scope (``scoped``; ``hooks.hooked_rows``, never null)
    fmt = out.column("format")
    if spec.get("exclude"):
        keep = pc.and_(keep, pc.invert(pc.fill_null(
            pc.is_in(fmt, pa.array(spec["exclude"], pa.string())), False)))
    for name in spec.get("scoped") or ():
        replaced = pc.and_(pc.equal(fmt, name), pc.fill_null(scope_table(name)(out), False))
        keep = pc.and_(keep, pc.invert(pc.fill_null(replaced, False)))
    return out.filter(keep)


def split_file(spec: dict) -> tuple[int, dict]:
    """Split task: ``spec`` (path, role, source, from_state, exclude, scoped, buckets, task,
    out)."""
    import pyarrow.parquet as pq

    n = int(spec["buckets"])
    pf = pq.ParquetFile(spec["path"])
    cols = [c for c in pf.schema_arrow.names if c in SPLIT_SCHEMA.names]
    batches = (_conform(b, spec) for b in pf.iter_batches(batch_size=filehook.BATCH_ROWS,
                                                          columns=cols))
    return filehook.write_split(os.path.join(spec["out"], f"{int(spec['task']):05d}.arrow"),
                                SPLIT_SCHEMA, batches, lambda b: buckets_of(b, n))


def _write(table: pa.Table, final_path: str) -> None:
    import pyarrow.parquet as pq

    tmp = hidden_temp(final_path)
    try:
        pq.write_table(table, tmp, compression="snappy")
        os.replace(tmp, final_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def summarize_bucket(spec: dict) -> int:
    """Summarise task: ``spec`` (bucket, parts, out) -> its transactions written to
    ``<out>/_part=trx/part-<bucket>.parquet`` and the buckets of their rows to
    ``<out>/_part=audit/part-<bucket>.parquet``; returns the transactions."""
    rows = filehook.read_bucket(spec["parts"], SPLIT_SCHEMA)
    rows = rows.append_column("_seen", pa.repeat(pa.scalar(False), rows.num_rows))
    trx = final(partial(rows)).cast(TRX_COUNTS_SCHEMA)
    buckets = _buckets(categories(rows), trx).cast(BUCKETS_SCHEMA)
    name = f"part-{int(spec['bucket']):05d}.parquet"
    _write(trx, os.path.join(spec["out"], TRX_PART, name))
    _write(buckets, os.path.join(spec["out"], AUDIT_PART, name))
    return trx.num_rows


def run(spark, inputs: list[dict], out_dir: Path, work: Path, rows: int) -> int:
    """The pass on ``inputs`` (path, role ``rows`` or ``segments``, source or None,
    from_state or None: read from the file, exclude: formats whose rows are left out,
    scoped: formats whose rows in their hook's scope are left out, ``resolve_scope_table``
    on the pass's columns),
    about ``rows`` rows in all -> ``out_dir/_part=trx`` and ``out_dir/_part=audit``
    (replaced). Returns the transactions. Raises ``filehook.TooBig`` before writing."""
    import shutil

    n = filehook.bucket_count(rows, int(spark.sparkContext.defaultParallelism))
    out_dir = Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    for part in (TRX_PART, AUDIT_PART):
        (out_dir / part).mkdir(parents=True)
    return filehook.split_then_run(
        spark, "transactions", [{**x, "buckets": n} for x in inputs], split_file,
        Path(work) / "buckets-trx", n, summarize_bucket,
        lambda b, parts: {"bucket": b, "parts": parts, "out": str(out_dir)},
        "one transaction has too many rows to summarise in memory", "summarise")


__all__ = ["BUCKETS_SCHEMA", "SPLIT_SCHEMA", "buckets_of", "run", "split_file",
           "summarize_bucket"]
