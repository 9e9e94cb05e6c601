"""The transactions pass on files: ``transactions`` and the audit's buckets of the rows of
the transactions, in Python tasks, never through the JVM.

``transactions.transaction_counts(..., buckets=True)`` shuffles the narrow columns of every
row by (source, trx_id) through Spark, sorts them, hands them to a Python worker as Arrow
and takes the transactions back: on the 1M Informix night 17 task-seconds, of which the
Python summary is about 3 (docs/BENCHMARK.md, "Twenty-first session"). When the night's
rows are in local Parquet files as the decode, the hook on files (``filehook``) and the
reassembly wrote them, the same pass runs in two Spark jobs of Python tasks
(``filehook.split_then_run``):

1. *split*: a task per few files (``decode.grouped``; a file is a decode unit's events
   without the rows a hook replaced, the resolved rows, a held-state file, the reassembled
   segment groups) reads each file's columns the pass needs, keeps the rows of a
   transaction (a ``trx_id``, not ``carry``) and appends them to an Arrow IPC file grouped
   by bucket: ``crc32(source) + crc32(trx_id)`` modulo the bucket count
   (``filehook.bucket_count``);
2. *summarise*: one task per bucket (every row of each of its transactions) summarises
   the whole bucket (``bucketsum.Summary``: the rules of ``transactions.summarize`` and
   ``transactions.categories`` on integer group numbers, no sort, no join by the string
   keys) and writes its transactions and its buckets as Parquet files
   into ``ordering/trx_counts/_part=trx`` and ``_part=audit``, where the Spark pass writes
   the same rows.

The split tasks also take what the audit and the quarantine need of the rows they read
(``Side``), the summarise tasks bucket the segment pieces routed to them by the reassembly
(``_piece_buckets``), and after the pass one Python task ranks the transactions of a night
that fits one range partition (``rank_file``); the sequence tasks then write each bucket's
changes' ``commit_seq`` and its transactions (``sequence_bucket``), and the tasks that take
the published rows from their files take the held rows in the same reads (``HeldRows``,
``wide.write_file_changes``).

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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from decoders.events import EVENT_SCHEMA

from ..decode import hidden_temp
from . import filehook
from .bucketsum import Summary, _codes
from .hooks import scope_table
from .transactions import AUDIT_COLUMNS, KEYS, NARROW_COLUMNS, TRX_COUNTS_DDL, TRX_COUNTS_SCHEMA
from .wide import FID, ROW, SEQ_COLUMNS

# the columns of ``event_seq``'s order beside the pass's, and each row's file and index in
# it (``wide``: the published rows are taken from their files by those)
ORDER_COLUMNS = ["trx_order", "record_index"]
COLUMNS = list(dict.fromkeys([*NARROW_COLUMNS, *AUDIT_COLUMNS, *ORDER_COLUMNS]))
_TYPES = {f.name: f.type for f in EVENT_SCHEMA}
SPLIT_SCHEMA = pa.schema([(c, pa.bool_() if c == "from_state" else _TYPES[c]) for c in COLUMNS]
                         + [("_in_trx", pa.bool_()), (FID, pa.int32()), (ROW, pa.int64())])
PUB_SCHEMA = pa.schema([(FID, pa.int32()), (ROW, pa.int64()), ("source", pa.string()),
                        ("trx_id", pa.string()), ("event_seq", pa.int32())])
SEQ_SCHEMA = pa.schema([(ROW, pa.int64()), ("source", pa.string()), ("commit_seq", pa.int64()),
                        ("event_seq", pa.int32()), ("commit_position", pa.string()),
                        ("commit_ts", pa.timestamp("us", tz="UTC"))])
assert SEQ_SCHEMA.names == SEQ_COLUMNS
BUCKETS_SCHEMA = pa.schema([("source", pa.string()), ("format", pa.string()),
                            ("archive_file", pa.string()), ("bucket", pa.string()),
                            ("n_records", pa.int64()), ("n_bytes", pa.int64())])
TRX_PART, AUDIT_PART, PUB_PART, HELD_PART = "_part=trx", "_part=audit", "_part=pub", "_part=held"
BUCKET = "_bucket"


def per_value(values, fn, dtype=np.int64, null=0):
    """``fn(value)`` of each string of ``values`` (numpy; ``null`` for a null), computed once
    per distinct value."""
    codes, dictionary = _codes(values)
    return np.array([fn(s) if s is not None else null for s in dictionary.to_pylist()]
                    + [null], dtype)[codes]


def string_offsets(arr: pa.Array) -> np.ndarray:
    """The ``n + 1`` offsets of a (large) string or binary array's values in its data
    buffer (numpy, the array's own slice)."""
    wide = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    return np.frombuffer(arr.buffers()[1], np.int64 if wide else np.int32)[
        arr.offset:arr.offset + len(arr) + 1]


def _crc_table() -> np.ndarray:
    """The CRC-32 (IEEE 802.3, as ``zlib.crc32``) lookup table of the reflected polynomial."""
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> np.uint32(1)) ^ np.uint32(0xEDB88320), t >> np.uint32(1))
    return t.astype(np.uint32)


CRC_TABLE = _crc_table()


CRC_VECTOR_BYTES = 64     # longer strings (rare ids) go through ``zlib`` one by one


def crc32_strings(values) -> np.ndarray:
    """``zlib.crc32`` of the UTF-8 bytes of each string of ``values`` (numpy int64; 0 for a
    null) without a Python call per value: one vector step per byte position, over the
    strings at least that long (sorted by length once); a string longer than
    ``CRC_VECTOR_BYTES`` through ``zlib``, so that one long value never costs a step per
    byte for the whole column."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    n = len(arr)
    if n == 0:
        return np.zeros(0, np.int64)
    offs = string_offsets(arr).astype(np.int64)
    start, length = offs[:-1], np.diff(offs)
    long_ = np.flatnonzero(length > CRC_VECTOR_BYTES)
    if len(long_):
        length = np.where(length > CRC_VECTOR_BYTES, 0, length)
    crc = np.full(n, 0xFFFFFFFF, np.uint32)
    data = arr.buffers()[2]
    if data is not None and length.any():
        data = np.frombuffer(data, np.uint8)
        order = np.argsort(-length, kind="stable")     # longest first: a prefix is active
        live, at = crc[order], start[order]
        counts = np.bincount(length, minlength=int(length.max()) + 1)
        active = n - np.cumsum(counts)                  # strings longer than j, for each j
        for j in range(int(length.max())):
            k = int(active[j])
            c = live[:k]
            live[:k] = CRC_TABLE[(c ^ data[at[:k] + j]) & np.uint32(0xFF)] ^ (c >> np.uint32(8))
        crc[order] = live
    out = (crc ^ np.uint32(0xFFFFFFFF)).astype(np.int64)
    for i in long_:
        out[i] = zlib.crc32(arr[int(i)].as_buffer())
    if arr.null_count:
        out[~arr.is_valid().to_numpy(zero_copy_only=False)] = 0
    return out


def _crc(values):
    """crc32 of each string of ``values`` (numpy int64; 0 for null), computed once per
    distinct value (``crc32_strings`` of the column's dictionary)."""
    codes, dictionary = _codes(values)
    return np.append(crc32_strings(dictionary), 0)[codes]


def numbered(trx: pa.Table) -> pa.Array:
    """The transactions that get a ``commit_seq`` (``sequence.numbered``): committed, with
    published changes."""
    return pc.fill_null(pc.and_(pc.equal(trx.column("status"), "committed"), pc.greater(
        pc.coalesce(trx.column("event_count"), 0), 0)), False)


def buckets_of(batch: pa.RecordBatch, n: int):
    """Each row's bucket: (crc32 of its source + crc32 of its trx_id) modulo ``n``."""
    return (_crc(batch.column("source")) + _crc(batch.column("trx_id"))) % n


def _conform(batch: pa.RecordBatch, spec: dict, first_row: int):
    """A batch read from an input file -> (its rows as ``SPLIT_SCHEMA``, the mask of those of
    a transaction: numpy), as ``transaction_counts`` selects them (``segments``: the
    reassembled changes, counted as changes, no part of their transaction's outcome).
    ``first_row``: the index of the batch's first row in its file. (The caller takes the
    rows of the mask once, in their buckets' order: no copy of the batch filtered first.)"""
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
        elif name == FID:
            col = pa.repeat(pa.scalar(spec.get("fid"), pa.int32()), n)
        elif name == ROW:
            col = pa.array(np.arange(first_row, first_row + n, dtype=np.int64))
        elif segments and name not in ("source", "trx_id", "kind", "position", "archive_file",
                                       *ORDER_COLUMNS):
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
    replaced = pa.repeat(pa.scalar(False), n)
    if spec.get("exclude"):
        replaced = pc.or_(replaced, pc.fill_null(
            pc.is_in(fmt, pa.array(spec["exclude"], pa.string())), False))
    for name in spec.get("scoped") or ():
        replaced = pc.or_(replaced, pc.fill_null(
            pc.and_(pc.equal(fmt, name), pc.fill_null(scope_table(name)(out), False)), False))
    if spec.get("side") is not None:
        spec["_side"].add(batch, out, pc.invert(replaced), segments)
    return out, pc.and_(keep, pc.invert(replaced)).to_numpy(zero_copy_only=False)


# ----------------------------------------------------------------- the night's side outputs

SIDE_COLUMNS = ["error_class", "message", "raw_hex", "record_offset"]
QUARANTINE_SCHEMA = pa.schema([("source", pa.string()), ("format", pa.string()),
                               ("archive_file", pa.string()), ("record_offset", pa.int64()),
                               ("error_class", pa.string()), ("message", pa.string()),
                               ("raw_hex", pa.string()), ("n_records", pa.int64()),
                               ("n_bytes", pa.int64())])
OTHER_SCHEMA = pa.schema([("source", pa.string()), ("format", pa.string()),
                          ("archive_file", pa.string()), ("bucket", pa.string()),
                          ("n_records", pa.int64()), ("n_bytes", pa.int64())])
LOST_SCHEMA = pa.schema([("source", pa.string()), ("archive_file", pa.string()),
                         ("message", pa.string())])
SIDE_PARTS = {"other": OTHER_SCHEMA, "lost": LOST_SCHEMA, "quarantine": QUARANTINE_SCHEMA}
SIDE_DDL = {name: ", ".join(f"{f.name} {'LONG' if f.type == pa.int64() else 'STRING'}"
                            for f in schema) for name, schema in SIDE_PARTS.items()}


def _sum_other(t: pa.Table) -> pa.Table:
    """``OTHER_SCHEMA`` rows summed per (source, format, archive_file, bucket); a sum of
    nulls only is null, as Spark's."""
    keys = ["source", "format", "archive_file", "bucket"]
    g = t.group_by(keys, use_threads=False).aggregate([("n_records", "sum"), ("n_bytes", "sum")])
    return pa.table({**{k: g.column(k) for k in keys},
                     "n_records": g.column("n_records_sum").cast(pa.int64()),
                     "n_bytes": g.column("n_bytes_sum").cast(pa.int64())}, schema=OTHER_SCHEMA)


class Side:
    """What a split task also takes from the rows it reads (every row of ``ev``: its file's
    rows but those a hook replaced), so that the audit and the quarantine need not scan the
    night again in Spark: the audit's buckets of the rows read tonight without a
    transaction (``audit.other_buckets``, summed per source, format, archive and bucket),
    the lost archives' first message (``accounting.complete_audit``) and the quarantine
    rows (``quarantine.decoder_quarantine`` and ``orphan_quarantine``). Spark's
    three-valued logic throughout: a row whose condition is null is left out."""

    def __init__(self) -> None:
        self.other: list[pa.Table] = []
        self.lost: list[pa.Table] = []
        self.quarantine: list[pa.Table] = []

    def add(self, raw: pa.RecordBatch, rows: pa.RecordBatch, kept, segments: bool = False) -> None:
        """A batch read (``raw``), conformed (``rows``), the rows no hook replaced (``kept``);
        ``segments``: the reassembled groups, of which only the changes without a
        transaction id count (``orphan_quarantine`` of ``reassembled_changes``)."""
        from ..decode import LOST_CLASSES
        from .classify import QUARANTINED

        n = rows.num_rows
        kind = rows.column("kind")
        tonight = pc.and_kleene(kept, pc.invert(rows.column("from_state")))

        def col(name, t):
            return raw.column(name).cast(t) if name in raw.schema.names else pa.nulls(n, t)

        def where(mask):
            return pc.fill_null(mask, False)

        if segments:
            orphan = where(pc.and_kleene(pc.and_kleene(tonight, pc.equal(kind, "change")),
                                         pc.is_null(raw.column("trx_id"))))
            if pc.any(orphan).as_py():
                self.quarantine.append(pa.table({
                    "source": rows.column("source"), "format": col("format", pa.string()),
                    "archive_file": col("archive_file", pa.string()),
                    "record_offset": col("record_offset", pa.int64()),
                    "error_class": pa.repeat(pa.scalar("no_transaction"), n),
                    "message": pa.repeat(pa.scalar("change record without a transaction id"), n),
                    "raw_hex": pa.nulls(n, pa.string()),
                    "n_records": col("n_records", pa.int64()),
                    "n_bytes": col("n_bytes", pa.int64())},
                    schema=QUARANTINE_SCHEMA).filter(orphan))
            return

        # the rows the audit counts without a transaction (``audit._counted``)
        counted = pc.and_kleene(pc.and_kleene(tonight, pc.invert(
            pc.is_in(kind, pa.array(["segment", "carry"])))), pc.or_kleene(
            pc.not_equal(kind, "change"), pc.and_kleene(pc.is_null(rows.column("seg_key")),
                                                        pc.greater(rows.column("n_records"), 0))))
        other = where(pc.and_kleene(counted, pc.is_null(rows.column("trx_id"))))
        if pc.any(other).as_py():
            t = pa.table(rows).filter(other)
            k = t.column("kind")
            quarantined = pc.fill_null(pc.is_in(k, pa.array(["change", "quarantine"])), False)
            skip = pc.fill_null(pc.equal(k, "skip"), False)
            bucket = pc.if_else(quarantined, pa.scalar(QUARANTINED),
                                pc.if_else(skip, pc.binary_join_element_wise(
                                    "skipped:", t.column("rule"), ""), pa.scalar("control")))
            g = pa.table({"source": t.column("source"), "format": t.column("format"),
                          "archive_file": t.column("archive_file"), "bucket": bucket,
                          "n_records": t.column("n_records").cast(pa.int64()),
                          "n_bytes": t.column("n_bytes").cast(pa.int64())})
            self.other.append(_sum_other(g))
        q = where(pc.and_kleene(tonight, pc.equal(kind, "quarantine")))
        orphan = where(pc.and_kleene(pc.and_kleene(tonight, pc.equal(kind, "change")),
                                     pc.is_null(rows.column("trx_id"))))
        if pc.any(pc.or_(q, orphan)).as_py():
            error_class = col("error_class", pa.string())
            message = col("message", pa.string())
            quarantine = pa.table({
                "source": rows.column("source"), "format": rows.column("format"),
                "archive_file": rows.column("archive_file"),
                "record_offset": col("record_offset", pa.int64()),
                "error_class": pc.if_else(orphan, pa.scalar("no_transaction"), error_class),
                "message": pc.if_else(orphan, pa.scalar("change record without a transaction id"),
                                      message),
                "raw_hex": pc.utf8_lower(pc.if_else(orphan, pa.scalar(None, pa.string()),
                                                    col("raw_hex", pa.string()))),
                "n_records": rows.column("n_records").cast(pa.int64()),
                "n_bytes": rows.column("n_bytes").cast(pa.int64())}, schema=QUARANTINE_SCHEMA)
            self.quarantine.append(quarantine.filter(pc.or_(q, orphan)))
            lost = where(pc.and_kleene(q, pc.is_in(error_class, pa.array(list(LOST_CLASSES)))))
            if pc.any(lost).as_py():
                self.lost.append(pa.table({"source": rows.column("source"),
                                           "archive_file": rows.column("archive_file"),
                                           "message": message}, schema=LOST_SCHEMA).filter(lost))

    def write(self, folder: str, task: int) -> None:
        """``<folder>/<part>/part-<task>.parquet`` for each part with rows: ``other``
        summed again over the task's batches, ``lost`` one row per (source, archive)."""
        parts = {"other": self.other, "lost": self.lost, "quarantine": self.quarantine}
        for part, tables in parts.items():
            if not tables:
                continue
            t = pa.concat_tables(tables)
            if part == "other":
                t = _sum_other(t)
            elif part == "lost":
                g = t.group_by(["source", "archive_file"], use_threads=False) \
                    .aggregate([("message", "first")])
                t = pa.table({"source": g.column("source"),
                              "archive_file": g.column("archive_file"),
                              "message": g.column("message_first")}, schema=LOST_SCHEMA)
            os.makedirs(os.path.join(folder, part), exist_ok=True)
            _write(t, os.path.join(folder, part, f"part-{task:05d}.parquet"))


# ----------------------------------------------------------------- repeated positions

# what the split keeps of a row for the search for repeated positions
# (``accounting.quarantine_duplicate_positions``: the key of a row that takes part in
# publishing), bucketed by a hash of the key (``position_buckets``)
POS_SCHEMA = pa.schema([("source", pa.string()), ("position", pa.string()), ("_sn", pa.int32())])
POS_STREAM = "pos"
REPEATS = "_repeats"        # (``_``: not read as data by Spark)
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9))


class RepeatedPositions(RuntimeError):
    """The split found a record position repeated in a source's night: the rows must be
    marked (``quarantine_duplicate_positions``) before any step uses them."""


def tail_hash(values) -> np.ndarray:
    """A 64-bit hash of each string (uint64; a null as the empty string) from its last 8
    bytes (zeros before a shorter one) and its length, without a Python call per row: the
    positions of a night differ in their low digits."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    n = len(arr)
    if n == 0:
        return np.zeros(0, np.uint64)
    arr = pc.fill_null(arr, "") if arr.null_count else arr
    offs = string_offsets(arr)
    start, end = offs[:-1], offs[1:]
    data = arr.buffers()[2]
    if data is None or end[-1] == start[0]:
        tail = np.zeros(n, np.uint64)
    else:
        data = np.frombuffer(data, np.uint8)
        idx = end[:, None] - 8 + np.arange(8)
        tail = np.where(idx >= start[:, None], data[np.maximum(idx, 0)], 0).astype(np.uint8) \
            .view("<u8").ravel()
    h = tail * _MIX[0]
    h ^= h >> np.uint64(29)
    return h + (end - start).astype(np.uint64) * _MIX[1]


def position_buckets(keys: pa.RecordBatch, n: int):
    """Each ``POS_SCHEMA`` row's bucket of the search (numpy int64): a hash of (source,
    position, ``_sn``) modulo ``n``."""
    h = tail_hash(keys.column("position")) + _crc(keys.column("source")).astype(np.uint64) * _MIX[2]
    h += keys.column("_sn").to_numpy(zero_copy_only=False).astype(np.uint64)
    h ^= h >> np.uint64(31)
    return (h % np.uint64(n)).astype(np.int64)


def position_keys(raw: pa.RecordBatch, spec: dict, sources: pa.Array) -> pa.RecordBatch:
    """The keys (``POS_SCHEMA``) of the rows of a batch read from a decoded or held file
    that the search compares (``quarantine_duplicate_positions``' ``candidate``: a
    position, a kind of ``POSITION_KINDS``, a source in ``sources``, those the decode did
    not prove); ``_sn``: ``seg_num`` or 0."""
    from ..decode import POSITION_KINDS

    n = raw.num_rows
    names = raw.schema.names
    src = pa.repeat(pa.scalar(spec["source"], pa.string()), n) \
        if spec.get("source") is not None else raw.column("source")
    pos = raw.column("position") if "position" in names else pa.nulls(n, pa.string())
    kind = raw.column("kind")
    sn = raw.column("seg_num").cast(pa.int32()) if "seg_num" in names else pa.nulls(n, pa.int32())
    mask = pc.fill_null(pc.and_(pc.and_(pc.is_valid(pos), pc.is_in(kind, pa.array(POSITION_KINDS))),
                                pc.is_in(src, sources)), False)
    keys = pa.RecordBatch.from_arrays([src, pos, pc.fill_null(sn, 0)], schema=POS_SCHEMA)
    return keys.filter(mask)


def repeated_keys(keys: pa.Table) -> pa.Table:
    """The (source, position, ``_sn``) met more than once, with their count ``n``."""
    g = keys.group_by(POS_SCHEMA.names, use_threads=False).aggregate([([], "count_all")])
    return g.filter(pc.greater(g.column("count_all"), 1)).rename_columns(
        [*POS_SCHEMA.names, "n"])


def split_file(spec: dict):
    """Split task: ``spec`` (path, role, source, from_state, exclude, scoped, buckets, task,
    out; with ``check_sources`` and ``check``, a decoded or held file: the keys of its rows
    of those sources for the search for repeated positions, the stream ``pos``, bucketed
    by ``position_buckets``) -> (rows, {bucket: [[batch, rows], ...]}, {"pos": ...})."""
    import pyarrow.parquet as pq

    n = int(spec["buckets"])
    pf = pq.ParquetFile(spec["path"])
    side = spec.get("side") is not None
    check = spec.get("check_sources") if spec.get("check") else None
    wanted = SPLIT_SCHEMA.names + (SIDE_COLUMNS if side else []) + (["seg_num"] if check else [])
    cols = [c for c in pf.schema_arrow.names if c in wanted]
    spec = {**spec, "_side": Side()} if side else spec
    task = int(spec["task"])
    main = filehook.SplitWriter(os.path.join(spec["out"], f"{task:05d}.arrow"), SPLIT_SCHEMA)
    pos = None
    try:
        if check:
            pos = filehook.SplitWriter(os.path.join(spec["out"], f"{task:05d}.{POS_STREAM}.arrow"),
                                       POS_SCHEMA)
            sources = pa.array(sorted(check), pa.string())
        first = 0
        for b in pf.iter_batches(batch_size=filehook.BATCH_ROWS, columns=cols):
            out, keep = _conform(b, spec, first)
            if keep.any():
                main.write(out, buckets_of(out, n), keep)
            if pos is not None:
                keys = position_keys(b, spec, sources)
                if keys.num_rows:
                    pos.write(keys, position_buckets(keys, n))
            first += b.num_rows
        main.close()
        if pos is not None:
            pos.close()
    finally:
        main.abort()
        if pos is not None:
            pos.abort()
    if side:
        spec["_side"].write(spec["side"], task)
    return main.rows, main.where, ({} if pos is None else {POS_STREAM: pos.where})


def _write(table: pa.Table, final_path: str) -> None:
    import pyarrow.parquet as pq

    tmp = hidden_temp(final_path)
    try:
        pq.write_table(table, tmp, compression="snappy")
        os.replace(tmp, final_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_rows(table: pa.Table, final_path: str) -> None:
    """A small table of row numbers that one task writes and one task reads (the held rows'
    indexes, a file's ``seq`` rows) as an Arrow IPC file (``<final_path>.arrow``), under a
    hidden name renamed when whole: a Parquet file's footer and encoding cost more than
    such a file's rows (2 ms a file, a thousand files a 1M night)."""
    final_path = final_path[:-len(".parquet")] + ".arrow" if final_path.endswith(".parquet") \
        else final_path
    tmp = hidden_temp(final_path)
    try:
        with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
            w.write_table(table)
        os.replace(tmp, final_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def read_rows(folder: str, columns: list[str] | None = None) -> pa.Table | None:
    """The tables of a folder of ``write_rows`` files and Parquet files (the ``seq`` rows
    Spark writes), in name order; None when it has none."""
    import pyarrow.parquet as pq

    names = sorted(f for f in os.listdir(folder) if not f.startswith((".", "_"))) \
        if os.path.isdir(folder) else []
    parts = []
    for f in names:
        path = os.path.join(folder, f)
        if f.endswith(".arrow"):
            with pa.memory_map(path) as src:
                t = pa.ipc.open_file(src).read_all()
            parts.append(t.select(columns) if columns else t)
        else:
            parts.append(pq.read_table(path, columns=columns))
    return pa.concat_tables(parts) if parts else None


def _piece_buckets(spec: dict, trx: pa.Table, name: str) -> pa.Table:
    """The segment pieces routed to this bucket (``segfiles.write_pieces``) with the status
    of the transaction their bucket depends on: ``classify.segment_buckets`` (a piece of a
    group decoded into a change: the change's bucket, ``change_bucket``; else held with its
    open transaction, skipped with its rolled-back one, else quarantined). Returns tonight's
    pieces summed by bucket (``BUCKETS_SCHEMA``: the audit's, beside the rows'); the
    quarantined pieces (every one, held from earlier nights too, as ``segment_quarantine``)
    are written to ``<side>/quarantine/part-p<bucket>.parquet``."""
    import pyarrow.parquet as pq

    from .classify import HELD, PUBLISHED, QUARANTINED
    from .segfiles import ROUTED_SCHEMA

    folder = os.path.join(spec["pieces"], f"_b={int(spec['bucket'])}")
    files = filehook.parquet_files(folder) if os.path.isdir(folder) else []
    if not files:
        return BUCKETS_SCHEMA.empty_table()
    p = pa.concat_tables([pq.read_table(f, schema=ROUTED_SCHEMA) for f in files])
    # (a join carries no list column: the transaction's row, then its ``undone`` taken)
    t = trx.select(["source", "trx_id", "status", "capture_off"]) \
        .append_column("_t", pa.array(np.arange(trx.num_rows), pa.int64()))
    p = p.append_column("_i", pa.array(np.arange(p.num_rows), pa.int64()))
    j = p.join(t, ["source", "trx_id"], join_type="left outer", use_threads=False) \
        .sort_by("_i")
    j = j.append_column("undone", trx.column("undone").take(j.column("_t")))
    status = j.column("status")
    via = j.column("via_group").to_numpy(zero_copy_only=False)
    is_open = pc.fill_null(pc.equal(status, "open"), False).to_numpy(zero_copy_only=False)
    rolled = pc.fill_null(pc.equal(status, "rolled_back"), False).to_numpy(zero_copy_only=False)
    no_id = pc.is_null(j.column("trx_id")).to_numpy(zero_copy_only=False)
    capture = pc.fill_null(j.column("capture_off"), False).to_numpy(zero_copy_only=False)
    # (``array_contains(undone, r_position)``: looked at only where a list is not empty)
    compensated_ = np.zeros(j.num_rows, bool)
    some = np.flatnonzero(pc.fill_null(pc.greater(pc.list_value_length(j.column("undone")), 0),
                                       False).to_numpy(zero_copy_only=False) & via)
    if len(some):
        idx = pa.array(some)
        for k, u, pos in zip(some, j.column("undone").take(idx).to_pylist(),
                             j.column("r_position").take(idx).to_pylist()):
            compensated_[k] = pos is not None and pos in u
    bucket = np.where(
        via,
        np.where(no_id, QUARANTINED, np.where(is_open, HELD, np.where(
            rolled, "skipped:rolled_back", np.where(capture, "skipped:capture_off", np.where(
                compensated_, "skipped:compensated", PUBLISHED))))),
        np.where(is_open, HELD, np.where(rolled, "skipped:rolled_back", QUARANTINED)))
    bucket = pa.array(bucket.astype(object), pa.string())
    tonight = pc.fill_null(pc.invert(j.column("from_state")), False)
    mine = pa.table({"source": j.column("source"), "format": j.column("format"),
                     "archive_file": j.column("archive_file"), "bucket": bucket,
                     "n_records": j.column("n_records"), "n_bytes": j.column("n_bytes")})
    g = mine.filter(tonight).group_by(["source", "format", "archive_file", "bucket"],
                                      use_threads=False) \
        .aggregate([("n_records", "sum"), ("n_bytes", "sum")])
    out = pa.table({"source": g.column("source"), "format": g.column("format"),
                    "archive_file": g.column("archive_file"), "bucket": g.column("bucket"),
                    "n_records": g.column("n_records_sum"), "n_bytes": g.column("n_bytes_sum")},
                   schema=BUCKETS_SCHEMA)
    q = pc.equal(bucket, QUARANTINED)
    if pc.any(q).as_py() and spec.get("side"):
        qj = j.filter(q)
        num, tot = qj.column("seg_num").cast(pa.string()), qj.column("seg_total").cast(pa.string())
        default = pc.binary_join_element_wise(
            "segment ", num, " of ", tot, " of record ", qj.column("seg_key"),
            ": the group never completed (committed unit of recovery)", "")
        q_class = pc.if_else(pc.fill_null(qj.column("complete"), False), "bad_segments",
                             "incomplete_segments")
        raw = pa.array([None if x is None else x.hex() for x in qj.column("seg_data").to_pylist()],
                       pa.string())
        quarantine = pa.table({
            "source": qj.column("source"), "format": qj.column("format"),
            "archive_file": qj.column("archive_file"), "record_offset": qj.column("record_offset"),
            "error_class": pc.coalesce(qj.column("r_class"), q_class),
            "message": pc.coalesce(qj.column("r_message"), default), "raw_hex": raw,
            "n_records": qj.column("n_records"), "n_bytes": qj.column("n_bytes")},
            schema=QUARANTINE_SCHEMA)
        folder = os.path.join(spec["side"], "quarantine")
        os.makedirs(folder, exist_ok=True)
        _write(quarantine, os.path.join(folder, f"part-p{name[len('part-'):]}"))
    return out


def summarize_bucket(spec: dict) -> int:
    """Summarise task: ``spec`` (bucket, parts, out) -> its transactions written to
    ``<out>/_part=trx/part-<bucket>.parquet``, the buckets of their rows to
    ``<out>/_part=audit/...`` and the changes it publishes to ``<out>/_part=pub/...``;
    returns the transactions."""
    name = f"part-{int(spec['bucket']):05d}.parquet"
    pos_parts = (spec.get("extra") or {}).get(POS_STREAM)
    if pos_parts:
        found = repeated_keys(filehook.read_bucket(pos_parts, POS_SCHEMA))
        if found.num_rows:
            import json

            os.makedirs(os.path.join(spec["out"], REPEATS), exist_ok=True)
            with open(os.path.join(spec["out"], REPEATS, name[:-len(".parquet")] + ".json"),
                      "w") as fh:
                json.dump({"keys": found.num_rows, "first": found.slice(0, 1).to_pylist()[0]}, fh)
    # (a bucket of the search's keys or of routed segment pieces only has no rows)
    rows = filehook.read_bucket(spec["parts"], SPLIT_SCHEMA)
    rows = rows.append_column("_seen", pa.repeat(pa.scalar(False), rows.num_rows))
    done = Summary(rows)
    trx = done.trx
    buckets = done.audit_buckets().cast(BUCKETS_SCHEMA)
    if spec.get("pieces"):
        buckets = pa.concat_tables([buckets, _piece_buckets(spec, trx, name)])
    _write(trx, os.path.join(spec["out"], TRX_PART, name))
    _write(buckets, os.path.join(spec["out"], AUDIT_PART, name))
    _write(done.published(PUB_SCHEMA, FID, ROW), os.path.join(spec["out"], PUB_PART, name))
    # the rows of the transactions still open, but quarantine rows (``state.held_rows``)
    # and the reassembled changes (the next night reassembles their pieces again)
    held = done.held(FID, ROW)
    fids = held.column(FID)
    for fid in pc.unique(fids).to_pylist():
        folder = os.path.join(spec["out"], HELD_PART, f"{FID}={int(fid)}")
        os.makedirs(folder, exist_ok=True)
        write_rows(held.filter(pc.equal(fids, fid)).select([ROW]), os.path.join(folder, name))
    return trx.num_rows


def run(spark, inputs: list[dict], out_dir: Path, work: Path, rows: int,
        side: Path | None = None, pieces: Path | None = None,
        check: set | None = None) -> int:
    """The pass on ``inputs`` (path, role ``rows`` or ``segments``, source or None,
    from_state or None: read from the file, exclude: formats whose rows are left out,
    scoped: formats whose rows in their hook's scope are left out, ``resolve_scope_table``
    on the pass's columns),
    about ``rows`` rows in all -> ``out_dir/_part=trx`` and ``out_dir/_part=audit``
    and ``out_dir/_part=pub`` (replaced); with ``side``, the split tasks' side outputs
    there (``Side``: ``other``, ``lost``, ``quarantine``; replaced); with ``pieces``, the
    segment pieces routed to the buckets (``segfiles.write_pieces``) bucketed with their
    transactions (``_piece_buckets``). With ``check`` (source names), the pass also searches
    those sources' rows of the decoded and held files (``check`` set in their input) for a
    record position met twice (``quarantine_duplicate_positions``, which the caller then
    skipped): the split buckets their keys, the summarise tasks count them. Returns (the
    bucket count, the transactions). Raises ``filehook.TooBig`` before writing, and
    ``RepeatedPositions`` after the pass when the search found one."""
    import shutil

    n = filehook.bucket_count(rows, int(spark.sparkContext.defaultParallelism))
    out_dir = Path(out_dir)
    for folder in (out_dir, side):
        if folder is not None and Path(folder).exists():
            shutil.rmtree(folder)
    for part in (TRX_PART, AUDIT_PART, PUB_PART, HELD_PART):
        (out_dir / part).mkdir(parents=True)
    extra = {} if side is None else {"side": str(Path(side).resolve())}
    if pieces is not None:
        from .segfiles import PIECES_BUCKETS

        routed = int((Path(pieces) / PIECES_BUCKETS).read_text())
        if routed != n:
            raise RuntimeError(f"ordering: the segment pieces were routed to {routed} buckets, "
                               f"the transactions pass has {n}")
        extra["pieces"] = str(Path(pieces).resolve())
    if check:
        extra["check_sources"] = sorted(check)
    # (a bucket that the reassembly routed pieces to gets its task without rows too: the
    # pieces of a transaction with no row tonight are bucketed all the same)
    routed = {b for b in range(n) if pieces is not None and (Path(pieces) / f"_b={b}").is_dir()}
    done = filehook.split_then_run(
        spark, "transactions", [{**x, "buckets": n, **extra} for x in inputs], split_file,
        Path(work) / "buckets-trx", n, summarize_bucket,
        lambda b, parts, more: {"bucket": b, "parts": parts, "out": str(out_dir),
                                "extra": more, **extra},
        "one transaction has too many rows to summarise in memory", "summarise", also=routed)
    found = sorted((out_dir / REPEATS).glob("*.json")) if check else []
    if found:
        import json

        got = [json.loads(f.read_text()) for f in found]
        first = got[0]["first"]
        raise RepeatedPositions(
            f"ordering: {sum(g['keys'] for g in got)} record positions met more than once "
            f"(source {first['source']}, position {first['position']}, {first['n']} times)")
    return n, done


# ----------------------------------------------------------------- held state

class HeldRows:
    """The held rows of one file (``spec``: fid, path, source: the file's source when it has
    no such column, ids: the folder of its held rows' indexes, out), every event column,
    taken a row group at a time (``take``) and written as
    ``<out>/source=<S>/part-<fid>.parquet`` (as Spark writes the held state: no ``source``
    column, timestamps as INT96) by ``finish``; ``abort`` removes what is half written.
    ``names``: the file's columns. Raises when an index is repeated."""

    def __init__(self, spec: dict, names: list[str]) -> None:
        from decoders.events import EVENT_COLUMNS

        ids = read_rows(spec["ids"])
        ids = ids if ids is not None else pa.table({ROW: pa.array([], pa.int64())})
        self.rows = np.sort(ids.column(ROW).to_numpy())
        if len(self.rows) > 1 and np.any(np.diff(self.rows) <= 0):
            raise RuntimeError(f"ordering: a held row of {spec['path']} is named twice")
        self.spec, self.names = spec, names
        self.cols = [c for c in EVENT_COLUMNS if c in names]
        self.schema = pa.schema([f for f in EVENT_SCHEMA if f.name != "source"])
        self.writers: dict[str, tuple] = {}
        self.done = self.total = 0

    def upto(self, end: int) -> int:
        """The index in ``rows`` of the first held row at or past file row ``end``."""
        return int(np.searchsorted(self.rows, end))

    def take(self, table: pa.Table, start: int, hi: int) -> None:
        """The held rows ``rows[done:hi]`` from ``table``, the file's rows from ``start`` (a
        row group, with ``cols`` among its columns)."""
        import pyarrow.parquet as pq

        from ..mirror import escape_path_name

        if hi <= self.done:
            return
        taken = table.take(pa.array(self.rows[self.done:hi] - start))
        self.done = hi
        k = taken.num_rows
        sources = taken.column("source") if "source" in self.names else \
            pa.chunked_array([pa.repeat(pa.scalar(self.spec["source"], pa.string()), k)])
        out = pa.table([taken.column(f.name).cast(f.type) if f.name in self.names
                        else pa.nulls(k, f.type) for f in self.schema], schema=self.schema)
        for src in pc.unique(sources).to_pylist():
            part = out.filter(pc.equal(sources, src))
            got = self.writers.get(src)
            if got is None:
                folder = os.path.join(self.spec["out"], f"source={escape_path_name(src)}")
                os.makedirs(folder, exist_ok=True)
                final_path = os.path.join(folder, f"part-{int(self.spec['fid']):05d}.parquet")
                tmp = hidden_temp(final_path)
                got = self.writers[src] = (pq.ParquetWriter(
                    tmp, self.schema, compression="snappy",
                    use_deprecated_int96_timestamps=True), tmp, final_path)
            got[0].write_table(part)
            self.total += part.num_rows

    def finish(self, n_rows: int) -> int:
        """Checks that every held row was taken (the file has ``n_rows``), renames the
        files; returns the rows written."""
        if self.done != len(self.rows):
            raise RuntimeError(f"ordering: {len(self.rows) - self.done} held rows of "
                               f"{self.spec['path']} lie past its {n_rows} rows")
        for writer, tmp, final_path in self.writers.values():
            writer.close()
            os.replace(tmp, final_path)
        self.writers = {}
        return self.total

    def abort(self) -> None:
        for writer, tmp, _ in self.writers.values():
            if os.path.exists(tmp):
                writer.close()
                os.unlink(tmp)


def held_specs(pass_dir: Path, inputs: list[dict], out_dir: Path) -> list[dict]:
    """The ``HeldRows`` specs of the files holding held rows (the pass's ``_part=held``)."""
    by_fid = {int(x["fid"]): x for x in inputs}
    specs = []
    for d in sorted((Path(pass_dir) / HELD_PART).glob(f"{FID}=*")):
        fid = int(d.name.split("=", 1)[1])
        x = by_fid[fid]
        specs.append({"fid": fid, "path": x["path"], "source": x.get("source"), "ids": str(d),
                      "out": str(out_dir)})
    return specs


# ----------------------------------------------------------------- sequence

def bucket_column(n: int):
    """``buckets_of`` as a Spark Column (crc32 of the UTF-8 bytes, as ``zlib.crc32``): the
    ranking writes the transactions by the pass's bucket (``<trx>/_bucket=<b>``), so that a
    bucket's task reads its own."""
    from pyspark.sql import functions as F

    crc = [F.crc32(F.col(c).cast("binary")) for c in KEYS]
    return F.pmod(crc[0] + crc[1], F.lit(int(n))).cast("int")


RANKED_DDL = TRX_COUNTS_DDL + ", seq_part INT, seq_local LONG, _bucket INT"
RANK_KEY_COLUMNS = ["source", "commit_position", "trx_id", "status", "event_count", "commit_ts"]
RANK_SUMMARY = "_ranks.json"     # (``_``: not read as data by Spark)
SEQUENCE_TRX_COLUMNS = [*KEYS, "seq_part", "seq_local", "commit_position", "commit_ts"]


def rank_file(spec: dict) -> int:
    """Ranking task for a night whose numbered transactions fit one range partition
    (``sequence.rank_partitions`` == 1): ``spec`` (pass: the pass's ``_part=trx`` folder,
    n: the bucket count, out: the ranked folder) -> every transaction of each bucket with
    ``seq_part`` 0 and ``seq_local`` (its index among the numbered transactions sorted by
    ``sequence.SEQ_KEYS``, nulls first, as Spark's sort) or both null when it gets no
    ``commit_seq``, written as ``<out>/_bucket=<b>/part-00000.parquet``: the rows and the
    layout of ``stage.rank_transactions`` with one range partition (with ``transactions``:
    the numbered ones only, ``SEQUENCE_TRX_COLUMNS``, taken from the sort keys, as an Arrow
    IPC file, ``write_rows``: what ``sequence_bucket`` reads, which then also writes the
    bucket's transactions). Beside
    them ``<out>/_ranks.json``: the small table the stage collected from them (per seq_part
    and source: n, first_local, n_changes, n_open). Holds the sort keys of the night's
    transactions (at most ``RANK_ROWS_PER_TASK``, the rows of Spark's one partition) and
    one bucket's transactions at a time. Returns the transactions ranked."""
    import json

    import numpy as np
    import pyarrow.parquet as pq

    n = int(spec["n"])
    files = [(b, os.path.join(spec["pass"], f"part-{b:05d}.parquet")) for b in range(n)]
    files = [(b, f) for b, f in files if os.path.exists(f)]
    keys = [pq.read_table(f, columns=RANK_KEY_COLUMNS) for _, f in files]
    sizes = [t.num_rows for t in keys]
    numbered_masks = [numbered(t) for t in keys]
    num = pa.concat_tables([t.filter(m).select(["source", "commit_position", "trx_id",
                                                   "event_count"])
                            for t, m in zip(keys, numbered_masks)]) if keys else None
    total = 0 if num is None else num.num_rows
    local = np.empty(total, np.int64)
    if total:
        order = pc.sort_indices(num, sort_keys=[(c, "ascending", "at_start")
                                                for c in ("source", "commit_position", "trx_id")])
        local[order.to_numpy()] = np.arange(total, dtype=np.int64)
    # the small table: per source, the numbered (seq_part 0) and the others (null)
    rows = []
    if total:
        g = pa.table({"source": num.column("source"), "l": local,
                      "c": pc.coalesce(num.column("event_count"), 0)}) \
            .group_by("source", use_threads=False).aggregate(
                [("l", "count"), ("l", "min"), ("c", "sum")])
        rows += [{"seq_part": 0, "source": s, "n": n_, "first_local": f, "n_changes": c,
                  "n_open": 0} for s, n_, f, c in zip(
                      *(g.column(x).to_pylist() for x in ("source", "l_count", "l_min", "c_sum")))]
    rest = pa.concat_tables([t.filter(pc.invert(m)) for t, m in zip(keys, numbered_masks)]) \
        if keys else None
    if rest is not None and rest.num_rows:
        g = pa.table({"source": rest.column("source"),
                      "o": pc.cast(pc.fill_null(pc.equal(rest.column("status"), "open"), False),
                                   pa.int64())}) \
            .group_by("source", use_threads=False).aggregate([("o", "count"), ("o", "sum")])
        rows += [{"seq_part": None, "source": s, "n": n_, "first_local": None, "n_changes": 0,
                  "n_open": o} for s, n_, o in zip(
                      *(g.column(x).to_pylist() for x in ("source", "o_count", "o_sum")))]
    start = 0
    for (b, f), size, m, key in zip(files, sizes, numbered_masks, keys):
        mask = m.to_numpy(zero_copy_only=False)
        k = int(mask.sum())
        seq_local = np.zeros(size, np.int64)
        seq_local[mask] = local[start:start + k]
        start += k
        folder = os.path.join(spec["out"], f"{BUCKET}={b}")
        os.makedirs(folder, exist_ok=True)
        if spec.get("transactions"):
            # the sequence step alone reads these: the numbered transactions, its columns
            # (it also writes the bucket's transactions, ``_write_transactions``)
            key = key.filter(m)
            write_rows(pa.table({"source": key.column("source"), "trx_id": key.column("trx_id"),
                                 "seq_part": pa.repeat(pa.scalar(0, pa.int32()), k),
                                 "seq_local": pa.array(seq_local[mask]),
                                 "commit_position": key.column("commit_position"),
                                 "commit_ts": key.column("commit_ts")}),
                       os.path.join(folder, "part-00000.parquet"))
            continue
        table = pq.read_table(f, schema=TRX_COUNTS_SCHEMA)
        table = table.append_column("seq_part", pc.if_else(
            m, pa.scalar(0, pa.int32()), pa.scalar(None, pa.int32()))) \
            .append_column("seq_local", pc.if_else(m, pa.array(seq_local),
                                                   pa.scalar(None, pa.int64())))
        _write(table, os.path.join(folder, "part-00000.parquet"))
    tmp = hidden_temp(os.path.join(spec["out"], RANK_SUMMARY))
    with open(tmp, "w") as fh:
        json.dump(rows, fh)
    os.replace(tmp, os.path.join(spec["out"], RANK_SUMMARY))
    return int(sum(sizes))


def _write_transactions(table: pa.Table, commit_seq: pa.Array, spec: dict,
                        bucket: int) -> None:
    """A bucket's transactions (``TRX_COUNTS_SCHEMA``) and their ``commit_seq`` (null but for
    the numbered ones) -> the published ``transactions`` of the night: those not open, as
    the stage's Spark write makes them (``TRANSACTION_COLUMNS``; ``source`` and ``date`` in
    the folder names, ``commit_ts`` as INT96), ``<transactions>/source=<S>/date=<D>/
    part-<bucket>.parquet``."""
    from .nightfiles import write_by_source
    from .schema import DICTIONARY_COLUMNS

    n = table.num_rows
    out = pa.table({"trx_id": table.column("trx_id"), "commit_seq": commit_seq,
                    "status": table.column("status"),
                    "begin_position": table.column("begin_position"),
                    "commit_position": table.column("commit_position"),
                    "commit_ts": table.column("commit_ts"), "user": table.column("user"),
                    "event_count": table.column("event_count"),
                    "run_id": pa.repeat(pa.scalar(spec["run_id"], pa.string()), n),
                    "source": table.column("source"),
                    "date": pa.repeat(pa.scalar(spec["date"], pa.string()), n)})
    keep = pc.fill_null(pc.not_equal(table.column("status"), "open"), True)
    write_by_source(out.filter(keep), Path(spec["transactions"]), spec["date"],
                    f"part-{bucket:05d}.parquet", compression="snappy",
                    use_deprecated_int96_timestamps=True,
                    use_dictionary=[c for c in out.column_names if c in DICTIONARY_COLUMNS])


def rank(spark, pass_dir: Path, n: int, out_dir: Path,
         transactions: Path | None = None) -> list[dict]:
    """``ordering/trx`` by the pass's bucket from its transactions (``pass_dir/_part=trx``)
    in one Python task (``rank_file``) instead of Spark's range sort and partitioned write,
    for a night whose numbered transactions fit one range partition; with
    ``transactions``, the numbered ones only, for ``sequence``, which then writes the
    night's transactions into that folder (made empty here). ``out_dir`` is replaced.
    Returns the small table (``rank_file``)."""
    import json
    import shutil

    out_dir = Path(out_dir)
    for folder in (out_dir, transactions):
        if folder is None:
            continue
        if Path(folder).exists():
            shutil.rmtree(folder)
        Path(folder).mkdir(parents=True)
    spec = {"task": 0, "pass": str(Path(pass_dir) / TRX_PART), "n": int(n), "out": str(out_dir),
            "transactions": transactions is not None}
    filehook.run_tasks(spark, f"sequence: rank the transactions of {n} buckets", [spec], "task",
                       rank_file)
    return json.loads((out_dir / RANK_SUMMARY).read_text())


OFFSET_SCHEMA = pa.schema([("seq_part", pa.int32()), ("source", pa.string()),
                           ("seq_offset", pa.int64())])


def sequence_bucket(spec: dict) -> int:
    """Sequence task: ``spec`` (bucket, pub: the bucket's published changes, trx: its ranked
    transactions' folder, offsets: ``sequence.partition_offsets`` rows, seq: the ``seq``
    folder) -> each change's ``commit_seq`` (offset of its transaction's range partition
    and source + its index there + 1), ``commit_position`` and ``commit_ts``, written as
    ``<seq>/_fid=<file>/part-<bucket>.parquet`` (``wide``). Returns the rows written;
    raises when a change finds no numbered transaction (nothing may be lost). With
    ``transactions`` (the ranking in Python: ``rank_file``), also the bucket's transactions
    (``pass``: its ``trx_counts`` file) with their ``commit_seq`` there
    (``_write_transactions``; ``run_id``, ``date``)."""
    import pyarrow.parquet as pq

    if spec.get("transactions"):
        _sequence_transactions(spec)
    if not os.path.exists(spec["pub"]):
        return 0
    pub = pq.read_table(spec["pub"], schema=PUB_SCHEMA)
    if pub.num_rows == 0:
        return 0
    trx = read_rows(spec["trx"], SEQUENCE_TRX_COLUMNS)
    trx = trx if trx is not None else pa.table(
        {c: pa.array([], t) for c, t in [("source", pa.string()), ("trx_id", pa.string()),
                                          ("seq_part", pa.int32()), ("seq_local", pa.int64()),
                                          ("commit_position", pa.string()),
                                          ("commit_ts", pa.timestamp("us", tz="UTC"))]})
    trx = trx.filter(pc.is_valid(trx.column("seq_part")))
    offsets = pa.table([pa.array([o[i] for o in spec["offsets"]], t) for i, t in
                        enumerate((pa.int32(), pa.string(), pa.int64()))], schema=OFFSET_SCHEMA)
    trx = trx.join(offsets, ["seq_part", "source"], join_type="inner", use_threads=False)
    trx = pa.table({"source": trx.column("source"), "trx_id": trx.column("trx_id"),
                    "commit_seq": pc.add(pc.add(trx.column("seq_offset"), trx.column("seq_local")), 1),
                    "commit_position": trx.column("commit_position"),
                    "commit_ts": trx.column("commit_ts")})
    rows = pub.join(trx, KEYS, join_type="inner", use_threads=False)
    if rows.num_rows != pub.num_rows:
        raise RuntimeError(f"ordering: {pub.num_rows - rows.num_rows} published changes of "
                           f"bucket {spec['bucket']} found no numbered transaction")
    fids = rows.column(FID)
    for fid in pc.unique(fids).to_pylist():
        mine = rows.filter(pc.equal(fids, fid))
        folder = os.path.join(spec["seq"], f"{FID}={int(fid)}")
        os.makedirs(folder, exist_ok=True)
        write_rows(mine.select(SEQ_SCHEMA.names).cast(SEQ_SCHEMA),
                   os.path.join(folder, f"part-{int(spec['bucket']):05d}.parquet"))
    return rows.num_rows


def _sequence_transactions(spec: dict) -> None:
    """``sequence_bucket``'s transactions: the bucket's ``trx_counts`` rows, the numbered
    ones (``rank_file``'s mask) with ``commit_seq`` = the offset of their source (one range
    partition) + ``seq_local`` + 1, as the changes get it."""
    import pyarrow.parquet as pq

    path = os.path.join(spec["pass"], f"part-{int(spec['bucket']):05d}.parquet")
    if not os.path.exists(path):
        return
    table = pq.read_table(path, schema=TRX_COUNTS_SCHEMA)
    mask = numbered(table).to_numpy(zero_copy_only=False)
    ranked = read_rows(spec["trx"], ["seq_local"])
    local = ranked.column("seq_local").to_numpy() if ranked is not None \
        else np.zeros(0, np.int64)
    if len(local) != int(mask.sum()):
        raise RuntimeError(f"ordering: bucket {spec['bucket']} has {int(mask.sum())} numbered "
                           f"transactions, the ranking {len(local)}")
    offset = {(o[0], o[1]): int(o[2]) for o in spec["offsets"]}
    off = per_value(table.column("source"), lambda s: offset.get((0, s), 0) + 1)
    seq = np.zeros(table.num_rows, np.int64)
    seq[mask] = local + off[mask]
    _write_transactions(table, pc.if_else(pa.array(mask), pa.array(seq),
                                          pa.scalar(None, pa.int64())), spec, int(spec["bucket"]))


def sequence(spark, pass_dir: Path, trx_dir: Path, offsets: list, n: int, seq_dir: Path,
             transactions: Path | None = None, run_id: str = "", date: str = "") -> int:
    """The ``seq`` rows (``wide``) from the pass's published changes (``pass_dir/_part=pub``)
    and the ranked transactions written by bucket (``trx_dir/_bucket=<b>``): one Python task
    per bucket (``sequence_bucket``), in place of the join and the ``event_seq`` window;
    with ``transactions`` (the ranking in Python, ``rank``, which made that folder), also
    the night's transactions there (``run_id``, ``date``). ``seq_dir`` is replaced. Returns
    the rows written."""
    import shutil

    seq_dir = Path(seq_dir)
    if seq_dir.exists():
        shutil.rmtree(seq_dir)
    seq_dir.mkdir(parents=True)
    pub = Path(pass_dir) / PUB_PART
    trx = Path(pass_dir) / TRX_PART
    extra = {} if transactions is None else {
        "transactions": str(Path(transactions).resolve()), "pass": str(trx),
        "run_id": run_id, "date": date}
    specs = [{"bucket": b, "pub": str(pub / f"part-{b:05d}.parquet"),
              "trx": str(Path(trx_dir) / f"{BUCKET}={b}"),
              "offsets": [list(o) for o in offsets], "seq": str(seq_dir), **extra}
             for b in range(n) if (pub / f"part-{b:05d}.parquet").exists()
             or (transactions is not None and (trx / f"part-{b:05d}.parquet").exists())]
    if not specs:
        return 0
    return filehook.run_tasks(spark, f"sequence: {len(specs)} buckets", specs, "bucket",
                              sequence_bucket)


__all__ = ["BUCKETS_SCHEMA", "POS_SCHEMA", "RepeatedPositions", "SPLIT_SCHEMA", "bucket_column",
           "buckets_of", "crc32_strings", "HeldRows", "held_specs", "position_buckets", "position_keys",
           "rank", "rank_file", "repeated_keys", "run", "sequence", "sequence_bucket",
           "split_file", "summarize_bucket", "tail_hash"]
