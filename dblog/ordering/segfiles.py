"""Segment reassembly on files: ``segments.segment_groups`` and ``reassemble`` in Python
tasks, never through the JVM.

In Spark the reassembly shuffles every piece with its bytes by (source, ``seg_key``),
collects them into arrays and hands the groups to a Python worker as Arrow, which turns
them into Python rows: on the 1M Log Master night (444,090 pieces, 154,804 groups, 64 MB of
bytes) 20 s of wall and 36 task-seconds (docs/BENCHMARK.md, "Twenty-first session"). When
the night's rows are in local Parquet files as the decode wrote them, the same groups are
made in two Spark jobs of Python tasks (``filehook.split_then_run``): *split* (one task per
file: its pieces, every header column and ``seg_data``, grouped by bucket ``crc32(source) +
crc32(seg_key)``), then *reassemble* (one task per bucket: the groups' counts, completeness
and first piece's header as ``segment_groups`` defines them, the bytes of each complete
group joined in ``seg_num`` order, then ``segments._decode_groups``, the decoding the Spark
step runs) writing ``GROUP_SCHEMA`` files into ``ordering/segments``. ``segment_groups`` and
``reassemble`` stay the contract and run otherwise; ``tests/test_ordering_trxfiles.py``
compares the published datasets both ways.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from decoders.events import EVENT_SCHEMA

from . import filehook
from .segments import GROUP_SCHEMA, HEADER, _decode_groups
from .trxfiles import _crc

_TYPES = {f.name: f.type for f in EVENT_SCHEMA}
PIECE_SCHEMA = pa.schema([(c, _TYPES[c]) for c in HEADER] + [("seg_data", pa.binary()),
                                                               ("from_state", pa.bool_())])
KEYS = ["source", "seg_key"]


def _conform(batch: pa.RecordBatch, spec: dict) -> pa.RecordBatch:
    """A batch of an input file -> its ``segment`` rows, ``PIECE_SCHEMA``."""
    n = batch.num_rows
    names = batch.schema.names
    cols = []
    for f in PIECE_SCHEMA:
        if f.name == "source" and spec.get("source") is not None:
            cols.append(pa.repeat(pa.scalar(spec["source"], pa.string()), n))
        elif f.name == "from_state" and spec.get("from_state") is not None:
            cols.append(pa.repeat(pa.scalar(bool(spec["from_state"])), n))
        elif f.name in names:
            c = batch.column(f.name)
            cols.append(c if c.type == f.type else c.cast(f.type))
        else:
            cols.append(pa.nulls(n, f.type))
    out = pa.RecordBatch.from_arrays(cols, schema=PIECE_SCHEMA)
    keep = pc.fill_null(pc.equal(out.column("kind"), "segment"), False)
    if spec.get("exclude"):
        keep = pc.and_(keep, pc.invert(pc.fill_null(
            pc.is_in(out.column("format"), pa.array(spec["exclude"], pa.string())), False)))
    return out.filter(keep)


def split_file(spec: dict) -> tuple[int, dict]:
    """Split task: ``spec`` (path, source, exclude, buckets, task, out)."""
    import pyarrow.parquet as pq

    n = int(spec["buckets"])
    pf = pq.ParquetFile(spec["path"])
    cols = [c for c in pf.schema_arrow.names if c in PIECE_SCHEMA.names]
    batches = (_conform(b, spec) for b in pf.iter_batches(batch_size=filehook.BATCH_ROWS,
                                                          columns=cols))
    return filehook.write_split(os.path.join(spec["out"], f"{int(spec['task']):05d}.arrow"),
                                PIECE_SCHEMA, batches,
                                lambda b: (_crc(b.column("source")) + _crc(b.column("seg_key"))) % n)


def groups(pieces: pa.Table) -> pa.Table:
    """Pieces -> one row per (source, seg_key), as ``segments.segment_groups``: the header of
    its piece of the lowest ``seg_num`` (null fields when no piece has one), ``complete``
    (SQL's three-valued logic: null when a count it compares is null) and, for complete
    groups, ``data``: the pieces' bytes joined in ``seg_num`` order."""
    return sorted_groups(pieces)[0]


def sorted_groups(pieces: pa.Table) -> tuple[pa.Table, pa.Table, np.ndarray]:
    """``groups`` of ``pieces``, the pieces sorted by (source, seg_key, seg_num), and each
    sorted piece's group (its row in the groups)."""
    n = pieces.num_rows
    order = pc.sort_indices(pieces, sort_keys=[("source", "ascending", "at_end"),
                                               ("seg_key", "ascending", "at_end"),
                                               ("seg_num", "ascending", "at_end")])
    pieces = pieces.take(order)
    src, key = pieces.column("source").combine_chunks(), pieces.column("seg_key").combine_chunks()
    if n:
        same = pc.and_(pc.fill_null(pc.equal(src.slice(1), src.slice(0, n - 1)),
                                    pc.and_(pc.is_null(src.slice(1)), pc.is_null(src.slice(0, n - 1)))),
                       pc.fill_null(pc.equal(key.slice(1), key.slice(0, n - 1)),
                                    pc.and_(pc.is_null(key.slice(1)), pc.is_null(key.slice(0, n - 1)))))
        first = np.concatenate([[True], ~same.to_numpy(zero_copy_only=False)])
    else:
        first = np.zeros(0, bool)
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], n)
    gid = np.repeat(np.arange(len(starts)), ends - starts)
    num, total = pieces.column("seg_num"), pieces.column("seg_total")
    agg = pa.table({"g": gid, "seg_num": num, "seg_total": total}).group_by("g", use_threads=False) \
        .aggregate([("seg_num", "count", pc.CountOptions("all")), ("seg_num", "count_distinct"),
                    ("seg_total", "max"), ("seg_total", "min"), ("seg_num", "min"),
                    ("seg_num", "max")]).sort_by("g")
    n_rows = agg.column("seg_num_count")
    n_have = agg.column("seg_num_count_distinct")
    t_max, t_min = agg.column("seg_total_max"), agg.column("seg_total_min")
    s_min, s_max = agg.column("seg_num_min"), agg.column("seg_num_max")
    t_max64 = pc.cast(t_max, pa.int64())
    complete = pc.and_kleene(pc.and_kleene(pc.and_kleene(pc.and_kleene(
        pc.equal(pc.cast(n_rows, pa.int64()), t_max64),
        pc.equal(pc.cast(n_have, pa.int64()), t_max64)), pc.equal(t_min, t_max)),
        pc.equal(s_min, 1)), pc.equal(s_max, t_max))
    # the header of the first piece (sorted: the lowest seg_num, nulls last; none has one:
    # min_by gives null)
    head = pieces.take(pa.array(starts)).drop(["seg_data"]) if len(starts) else \
        pieces.drop(["seg_data"]).slice(0, 0)
    has_num = pc.is_valid(head.column("seg_num"))
    cols = {}
    for name in HEADER:
        c = head.column(name)
        cols[name] = c if name in KEYS else pc.if_else(has_num, c, pa.scalar(None, c.type))
    return pa.table({**cols, "complete": complete,
                     "data": _joined(pieces.column("seg_data"), starts, complete)}), pieces, gid


def _joined(seg_data, starts: np.ndarray, complete) -> pa.Array:
    """Each group's pieces' bytes joined (large_binary): the pieces are sorted, so a group's
    bytes are one run of the column's data buffer, sliced by the offsets of its first piece
    and of the next group's; null for a group not complete or with a null piece (Spark's
    concat of a null gives null)."""
    n, k = len(seg_data), len(starts)
    if k == 0:
        return pa.array([], pa.large_binary())
    sd = seg_data.combine_chunks() if isinstance(seg_data, pa.ChunkedArray) else seg_data
    sd = sd.cast(pa.large_binary())
    offs = np.frombuffer(sd.buffers()[1], np.int64)[sd.offset:sd.offset + n + 1]
    null_piece = pc.is_null(sd).to_numpy(zero_copy_only=False)
    has_null = np.add.reduceat(null_piece.astype(np.int64), starts) > 0
    ok = pc.fill_null(complete, False).to_numpy(zero_copy_only=False) & ~has_null
    data = sd.buffers()[2] if sd.buffers()[2] is not None else pa.py_buffer(b"")
    runs = pa.Array.from_buffers(pa.large_binary(), k, [
        None, pa.py_buffer(np.ascontiguousarray(offs[np.r_[starts, n]], np.int64)), data])
    return pc.if_else(pa.array(ok), runs, pa.scalar(None, pa.large_binary()))


def reassemble_bucket(spec: dict) -> int:
    """Reassemble task: ``spec`` (bucket, parts, manifest, out) -> the bucket's groups decoded
    (``segments._decode_groups``) in ``<out>/part-<bucket>.parquet``; returns the groups."""
    import pyarrow.parquet as pq

    from ..decode import hidden_temp

    manifest = json.loads(Path(spec["manifest"]).read_text())
    catalogs = {s["name"]: s["catalog"] for s in manifest["sources"]}
    options = {s["name"]: (s["options"], s["timezone"]) for s in manifest["sources"]}
    g, pieces, gid = sorted_groups(filehook.read_bucket(spec["parts"], PIECE_SCHEMA))
    final = os.path.join(spec["out"], f"part-{int(spec['bucket']):05d}.parquet")
    tmp = hidden_temp(final)
    rows = 0
    outcomes = []
    try:
        with pq.ParquetWriter(tmp, GROUP_SCHEMA, compression="snappy") as w:
            for b in _decode_groups(catalogs, options)(g.to_batches(max_chunksize=10_000)):
                w.write_batch(b)
                rows += b.num_rows
                outcomes.append(pa.table(b).select(OUTCOME_COLUMNS))
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    if spec.get("pieces_out"):
        write_pieces(pieces, outcomes, spec, gid)
    return rows


# ----------------------------------------------------------------- the pieces' buckets

OUTCOME_COLUMNS = ["source", "seg_key", "kind", "trx_id", "position", "error_class", "message",
                   "complete"]
RAW_BYTES = 256     # (``quarantine.RAW_BYTES``)
PIECES_BUCKETS = "_buckets"     # the bucket count the pieces were routed by
ROUTED_SCHEMA = pa.schema([
    ("source", pa.string()), ("trx_id", pa.string()), ("via_group", pa.bool_()),
    ("r_position", pa.string()), ("r_class", pa.string()), ("r_message", pa.string()),
    ("complete", pa.bool_()), ("format", pa.string()), ("archive_file", pa.string()),
    ("record_offset", pa.int64()), ("seg_key", pa.string()), ("seg_num", pa.int64()),
    ("seg_total", pa.int64()), ("n_records", pa.int64()), ("n_bytes", pa.int64()),
    ("from_state", pa.bool_()), ("seg_data", pa.binary())])


def write_pieces(pieces: pa.Table, outcomes: list[pa.Table], spec: dict,
                 gid: np.ndarray | None = None) -> None:
    """A reassemble task's pieces, each with its group's outcome (``segment_buckets``'s join
    of a piece with its group, local here: the bucket holds the whole group), routed to the
    transactions pass's bucket of the one transaction its bucket depends on: the group's
    when the group decoded into a change (the piece shares the change's bucket), else the
    piece's own (held with it, skipped with it, else quarantined). Written as
    ``<pieces_out>/_b=<trx bucket>/part-<bucket>.parquet`` (``ROUTED_SCHEMA``; ``seg_data``,
    cut to ``RAW_BYTES``, only where the piece may be quarantined). ``gid``: each piece's
    row in the outcomes (``sorted_groups``), which then need no join; a piece of no source
    or key meets no group (as the join's null keys); without it, the join."""
    from .trxfiles import _write, buckets_of

    if pieces.num_rows == 0:
        return
    out = pa.concat_tables(outcomes) if outcomes else pa.table(
        {c: pa.array([], GROUP_SCHEMA.field(c).type) for c in OUTCOME_COLUMNS})
    out = out.rename_columns(["source", "seg_key", "r_kind", "r_trx_id", "r_position",
                              "r_error_class", "r_error_message", "complete"])
    p = pieces.drop_columns(["complete"]) if "complete" in pieces.column_names else pieces
    if gid is not None:
        if len(gid) != p.num_rows or (len(gid) and int(gid.max()) >= out.num_rows):
            raise RuntimeError(f"ordering: {p.num_rows} segment pieces and {len(gid)} group "
                               f"rows for {out.num_rows} groups disagree")
        keyless = pc.or_(pc.is_null(p.column("source")), pc.is_null(p.column("seg_key"))) \
            .to_numpy(zero_copy_only=False)
        at = pa.array(gid, mask=keyless) if keyless.any() else pa.array(gid)
        got = out.drop_columns(["source", "seg_key"]).take(at)
        rows = p
        for name in got.column_names:
            rows = rows.append_column(name, got.column(name))
    else:
        rows = p.join(out, ["source", "seg_key"], join_type="left outer", use_threads=False)
    r_kind = rows.column("r_kind")
    via = pc.fill_null(pc.equal(r_kind, "change"), False)
    failed = pc.fill_null(pc.equal(r_kind, "quarantine"), False)
    trx_id = pc.if_else(via, rows.column("r_trx_id"), rows.column("trx_id"))
    # (a piece that shares a change's bucket is never quarantined unless the change has no
    # transaction id: its bytes are kept for the others only)
    maybe_q = pc.or_(pc.invert(via), pc.is_null(rows.column("r_trx_id")))
    data = rows.column("seg_data")
    cut = pc.binary_slice(data, 0, RAW_BYTES)
    routed = pa.table({
        "source": rows.column("source"), "trx_id": trx_id, "via_group": via,
        "r_position": rows.column("r_position"),
        "r_class": pc.if_else(failed, rows.column("r_error_class"), pa.scalar(None, pa.string())),
        "r_message": pc.if_else(failed, rows.column("r_error_message"),
                                pa.scalar(None, pa.string())),
        "complete": rows.column("complete"), "format": rows.column("format"),
        "archive_file": rows.column("archive_file"),
        "record_offset": rows.column("record_offset").cast(pa.int64()),
        "seg_key": rows.column("seg_key"), "seg_num": rows.column("seg_num").cast(pa.int64()),
        "seg_total": rows.column("seg_total").cast(pa.int64()),
        "n_records": rows.column("n_records").cast(pa.int64()),
        "n_bytes": rows.column("n_bytes").cast(pa.int64()),
        "from_state": rows.column("from_state"),
        "seg_data": pc.if_else(maybe_q, cut, pa.scalar(None, pa.binary()))}, schema=ROUTED_SCHEMA)
    n = int(spec["trx_buckets"])
    b = buckets_of(pa.record_batch([routed.column("source").combine_chunks(),
                                    routed.column("trx_id").combine_chunks()],
                                   names=["source", "trx_id"]), n)
    name = f"part-{int(spec['bucket']):05d}.parquet"
    for bucket in np.unique(b):
        folder = os.path.join(spec["pieces_out"], f"_b={int(bucket)}")
        os.makedirs(folder, exist_ok=True)
        _write(routed.filter(pa.array(b == bucket)), os.path.join(folder, name))


def run(spark, inputs: list[dict], manifest_path: Path, out_dir: Path, work: Path,
        rows: int, pieces_out: Path | None = None, trx_rows: int | None = None) -> int:
    """The reassembly on ``inputs`` (``trxfiles`` inputs of role ``rows``; about ``rows``
    rows) -> ``GROUP_SCHEMA`` files in ``out_dir`` (replaced); with ``pieces_out``, the
    pieces with their group's outcome routed to the transactions pass's buckets there
    (``write_pieces``; replaced; the pass's bucket count from ``trx_rows``, the rows it
    reads, else ``rows``). Returns the groups. Raises ``filehook.TooBig`` before writing."""
    import shutil

    cores = int(spark.sparkContext.defaultParallelism)
    n = filehook.bucket_count(rows, cores)
    n_trx = filehook.bucket_count(rows if trx_rows is None else trx_rows, cores)
    out_dir = Path(out_dir)
    for folder in (out_dir, pieces_out):
        if folder is not None and Path(folder).exists():
            shutil.rmtree(folder)
    out_dir.mkdir(parents=True)
    extra = {}
    if pieces_out is not None:
        Path(pieces_out).mkdir(parents=True)
        (Path(pieces_out) / PIECES_BUCKETS).write_text(str(n_trx))
        extra = {"pieces_out": str(Path(pieces_out).resolve()), "trx_buckets": n_trx}
    if not inputs:              # (no file that may hold a piece: no group)
        return 0
    return filehook.split_then_run(
        spark, "segments", [{**x, "buckets": n} for x in inputs], split_file,
        Path(work) / "buckets-seg", n, reassemble_bucket,
        lambda b, parts, _: {"bucket": b, "parts": parts, "manifest": str(manifest_path),
                             "out": str(out_dir), **extra},
        "one segment key has too many pieces to reassemble in memory", "reassemble")


__all__ = ["PIECE_SCHEMA", "groups", "reassemble_bucket", "run", "sorted_groups", "split_file"]
