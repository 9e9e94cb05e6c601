"""Decoded events: one row per record read (or per group of records that form one change).

Every format's decoder writes into an ``EventSink``; the sink builds Arrow record batches
of ``EVENT_SCHEMA``, the one schema the decode job writes and the ordering job reads.

Kinds of rows (column ``kind``):

``change``      a row change / truncate / DDL (op, table, before/after ...)
``begin``       start of a transaction (may carry ``flag`` = ``capture_off``)
``commit``      end of a transaction that committed (commit_position, commit_ts, user)
``abort``       end of a transaction that rolled back
``undo``        a record that undoes an earlier change of its transaction (``undo_of``)
``control``     any other control record (checkpoint, pending list, command, ...)
``skip``        a record skipped by a named rule (``rule``)
``quarantine``  a record that could not be decoded (error_class, message, raw_hex)
``segment``     one piece of a segmented record (Log Master); the ordering job reassembles
``carry``       no record: decoder state carried to the next night (``message`` = JSON)

``n_records`` is how many records of the archive the row stands for (2 for a solidDB
before/after pair, 1 + remainder records for Informix, 0 for ``carry``); the audit adds
``n_records`` per bucket so that the buckets add up to the records read. ``n_bytes`` is how
many bytes of the archive the row stands for: the rows of one archive add up to its size
(SPEC section 5, "Accounting"). A decoder that knows its records' lengths sets it; for the
others ``account_bytes`` derives it from the record offsets (each row counts the bytes from
its record's start to the next row's record start; the first also counts any bytes before it).

Two ways in: ``add`` (one row, keyword fields: the careful per-record path, e.g. quarantine)
and ``add_columns`` (many rows at once from numpy/Arrow columns: the fast path). Rows come
out of ``batches`` in archive order, (record_index, order of adding), whatever the order
the decoder added them in.

A row can also end its transaction (``trx_end`` = ``commit``/``abort``) without being a
commit record: Log Master and Rdb records carry their unit of recovery's disposition.
"""

from __future__ import annotations

import datetime as _dt
import functools
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

TS = pa.timestamp("us", tz="UTC")

EVENT_FIELDS: list[tuple[str, pa.DataType]] = [
    ("source", pa.string()),
    ("format", pa.string()),
    ("archive_file", pa.string()),
    ("record_offset", pa.int64()),
    ("record_index", pa.int64()),
    ("n_records", pa.int32()),
    ("n_bytes", pa.int64()),
    ("kind", pa.string()),
    ("rule", pa.string()),
    ("flag", pa.string()),
    ("trx_id", pa.string()),
    ("position", pa.string()),
    ("trx_order", pa.string()),
    ("trx_end", pa.string()),
    ("commit_position", pa.string()),
    ("commit_ts", TS),
    ("user", pa.string()),
    ("op", pa.string()),
    ("table_id", pa.string()),
    ("schema_name", pa.string()),
    ("table_name", pa.string()),
    ("before", pa.string()),
    ("after", pa.string()),
    ("ddl", pa.string()),
    ("row_id", pa.string()),
    ("undo_of", pa.string()),
    ("seg_key", pa.string()),
    ("seg_num", pa.int32()),
    ("seg_total", pa.int32()),
    ("seg_data", pa.binary()),
    ("error_class", pa.string()),
    ("message", pa.string()),
    ("raw_hex", pa.string()),
    # facts of a record whose transaction is assigned after decoding, by the ordering job's
    # format hook (informix: ``resolve_transactions``); null on every other row
    ("xid", pa.int64()),
    ("link", pa.int64()),
    ("record_type", pa.string()),
]
EVENT_SCHEMA = pa.schema(EVENT_FIELDS)
EVENT_COLUMNS = [name for name, _ in EVENT_FIELDS]
_COLUMN_SET = frozenset(EVENT_COLUMNS)
# set by the sink itself, never by a decoder's keyword fields
_FIXED = frozenset(("source", "format", "archive_file", "record_offset", "record_index",
                    "n_records", "kind"))
_TYPES = dict(EVENT_FIELDS)
KINDS = ("change", "begin", "commit", "abort", "undo", "control", "skip", "quarantine",
         "segment", "carry")
OPS = ("c", "u", "d", "m", "t", "ddl")
RAW_HEX_LIMIT = 256


def raw_hex(raw: bytes | memoryview | None) -> str | None:
    if raw is None:
        return None
    return bytes(raw[:RAW_HEX_LIMIT]).hex()


class EventSink:
    """Column-wise builder of decoded events for one archive."""

    def __init__(self, source: str, fmt: str, archive_file: str, batch_rows: int = 65536) -> None:
        self.source = source
        self.format = fmt
        self.archive_file = archive_file
        self.batch_rows = batch_rows
        self._cols: dict[str, list] = {name: [] for name in EVENT_COLUMNS}
        self._n = 0          # rows in the open column lists
        self._done: list[pa.RecordBatch] = []
        self._ordered = True  # rows so far are in (record_index) order
        self._last_index = -(1 << 62)
        self.records_read = 0

    def __len__(self) -> int:
        return self._n + sum(b.num_rows for b in self._done)

    # ------------------------------------------------------------------ one row
    def add(self, kind: str, record_offset: int, record_index: int, n_records: int = 1,
            **fields: Any) -> None:
        """One row. Only the fields given cost anything: a column that a row leaves out is
        padded with nulls lazily (when the column is next used, or when the batch is built)."""
        cols = self._cols
        n = self._n
        cols["record_offset"].append(record_offset)
        cols["record_index"].append(record_index)
        cols["n_records"].append(n_records)
        cols["kind"].append(kind)
        if record_index < self._last_index:
            self._ordered = False
        self._last_index = record_index
        for name, value in fields.items():
            if value is None:
                continue
            col = cols.get(name)
            if col is None or name in _FIXED:
                raise TypeError(f"unknown event field: {name}")
            if len(col) < n:
                col.extend([None] * (n - len(col)))
            col.append(value)
        self._n = n + 1
        self.records_read += n_records
        if self._n >= self.batch_rows:
            self._seal()

    def quarantine(self, error, record_offset: int, record_index: int, raw: bytes | None,
                   n_records: int = 1, **fields: Any) -> None:
        """A record that could not be decoded (``error`` is a ``DecodeError``; an
        ``UnknownTable`` puts its table id on the row)."""
        if "table_id" not in fields and getattr(error, "table_id", None) is not None:
            fields["table_id"] = error.table_id
        self.add("quarantine", record_offset, record_index, n_records,
                 error_class=getattr(error, "error_class", type(error).__name__),
                 message=str(error), raw_hex=raw_hex(raw), **fields)

    # ------------------------------------------------------------------ many rows
    def add_columns(self, kind, record_offset, record_index, n_records=1, **fields: Any) -> None:
        """Many rows at once. Every argument is a column (numpy array, Arrow array, list) of
        the same length, or a scalar (the same value on every row; ``None``: null).
        ``kind`` may be a scalar or a column. The fast path of the columnar decoders."""
        offsets = np.asarray(record_offset, dtype=np.int64)
        n = len(offsets)
        if n == 0:
            return
        self._seal()
        given = {"kind": kind, "record_offset": offsets, "record_index": record_index,
                 "n_records": n_records, **fields}
        arrays = []
        nulls: dict = {}                  # one all-null column per type, shared (immutable)
        for name, typ in EVENT_FIELDS:
            value = None if name in ("source", "format", "archive_file") \
                else given.pop(name, None)           # the constants: filled in _finish
            if value is None:
                got = nulls.get(typ)
                if got is None:
                    got = nulls[typ] = pa.nulls(n, typ)
                arrays.append(got)
                continue
            arrays.append(_column(value, typ, n, name))
        if given:
            raise TypeError(f"unknown event fields: {', '.join(sorted(given))}")
        batch = pa.RecordBatch.from_arrays(arrays, schema=EVENT_SCHEMA)
        idx = batch.column("record_index")
        if len(idx):
            first = pc.min(idx).as_py()
            if first < self._last_index or not _nondecreasing(idx):
                self._ordered = False
            self._last_index = max(self._last_index, pc.max(idx).as_py())
        self.records_read += int(pc.sum(batch.column("n_records")).as_py() or 0)
        self._done.append(batch)

    # ------------------------------------------------------------------ out
    def _seal(self) -> None:
        """Turn the open column lists into an Arrow batch (bounds Python object memory)."""
        if self._n:
            self._done.append(self._build())
            self._cols = {name: [] for name in EVENT_COLUMNS}
            self._n = 0

    def _build(self) -> pa.RecordBatch:
        n = self._n
        arrays = []
        for name, typ in EVENT_FIELDS:
            if name in ("source", "format", "archive_file"):
                arrays.append(pa.nulls(n, typ))
                continue
            col = self._cols[name]
            if len(col) < n:
                col.extend([None] * (n - len(col)))
            arrays.append(pa.array(col, type=typ))
        return pa.RecordBatch.from_arrays(arrays, schema=EVENT_SCHEMA)

    def _finish(self) -> pa.Table:
        """Everything so far as one table in archive order, constant columns filled."""
        self._seal()
        table = pa.Table.from_batches(self._done, schema=EVENT_SCHEMA)
        self._done = []
        if not self._ordered and table.num_rows:
            # a stable sort: ties keep the order of adding (numpy's timsort merges the sorted
            # runs the batches are; Arrow's sort_indices cost 4x as much)
            chunks = table.column("record_index").chunks    # (ChunkedArray.to_numpy: 0.13 s)
            index = np.concatenate([c.to_numpy(zero_copy_only=False) for c in chunks])
            order = pa.array(np.argsort(index, kind="stable"))
            n = table.num_rows
            # a column null on every row (most are, for most formats), and the constants
            # (filled below), need no take
            table = pa.Table.from_arrays(
                [pa.nulls(n, col.type) if name in _CONST or col.null_count == n
                 else col.take(order) for name, col in zip(table.column_names, table.columns)],
                schema=EVENT_SCHEMA)
        self._ordered = True
        n = table.num_rows
        for name in ("source", "format", "archive_file"):
            i = EVENT_SCHEMA.get_field_index(name)
            table = table.set_column(i, EVENT_SCHEMA.field(i),
                                     pa.repeat(pa.scalar(getattr(self, _CONST[name]),
                                                         EVENT_SCHEMA.field(i).type), n))
        return table

    def account_bytes(self, size: int, line_starts: np.ndarray | None = None, offset: int = 0,
                      line: int = 0) -> None:
        """Fill ``n_bytes`` of the rows that have none (see the module docstring).

        ``size`` is the length of the decoded bytes, which start at archive offset ``offset``
        (line ``line`` + 1 for text formats); ``line_starts`` (text formats whose
        ``record_offset`` is a 1-based line number) the byte offset of each line's start, or a
        function giving them (called only when a row has no byte count)."""
        table = self._finish()
        nb = table.column("n_bytes")
        # where the decoded bytes start, as a record_offset (a 1-based line for text formats)
        first = line + 1 if line_starts is not None else offset
        if table.num_rows == 0 or nb.null_count == 0:
            self._done = table.to_batches(self.batch_rows)
            if table.num_rows == 0 and size > 0:
                # bytes but no row at all (e.g. a truncated header line): a control row holds them
                self.add("control", first, 0, 0, rule="no_records", n_bytes=size)
            return
        offs = table.column("record_offset").to_numpy(zero_copy_only=False).astype(np.int64)
        offs = offs - (line if line_starts is not None else offset)
        counts = table.column("n_records").to_numpy(zero_copy_only=False)
        missing = nb.is_null().to_numpy(zero_copy_only=False)
        if line_starts is not None:
            line_starts = np.asarray(line_starts() if callable(line_starts) else line_starts,
                                     dtype=np.int64)
            ok = (offs >= 1) & (offs <= len(line_starts))
            pos = np.where(ok, line_starts[np.clip(offs - 1, 0, max(len(line_starts) - 1, 0))]
                           if len(line_starts) else 0, -1)
        else:
            pos = np.where((offs >= 0) & (offs <= size), offs, -1)
        counted = (pos >= 0) & (counts > 0)
        # byte extents of the rows that carry bytes already (a decoder that knows lengths)
        known = np.asarray(nb.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        starts = _distinct(pos[counted])
        out = np.zeros(len(offs), dtype=np.int64)
        if len(starts):
            nxt = np.append(starts[1:], size)
            # the first row at each start carries that record's bytes, the others none
            order = np.flatnonzero(counted & missing)
            for_row = pos[order]
            chosen = order[_first_of_each(for_row)]
            k = np.searchsorted(starts, pos[chosen])
            out[chosen] = nxt[k] - pos[chosen]
            if len(chosen) and starts[0] > 0:
                out[chosen[np.argmin(pos[chosen])]] += starts[0]
        filled = np.where(missing, out, known)
        i = EVENT_SCHEMA.get_field_index("n_bytes")
        table = table.set_column(i, EVENT_SCHEMA.field(i), pa.array(filled, pa.int64()))
        self._done = table.to_batches(self.batch_rows)
        if not len(starts) and size > 0 and not known.any():
            # bytes but no record (e.g. only a CSV header): one control row holds them
            self.add("control", first, 0, 0, rule="no_records", n_bytes=size)

    def batches(self) -> list[pa.RecordBatch]:
        """All events so far as Arrow batches, in archive order (the sink is left empty)."""
        table = self._finish()
        return table.to_batches(self.batch_rows) if table.num_rows else []

    def to_table(self) -> pa.Table:
        table = self._finish()
        self._done = table.to_batches(self.batch_rows)
        return table

    def rows(self) -> list[dict]:
        """The events as dicts (tests and tools; the pipeline uses ``batches``)."""
        return self.to_table().to_pylist()


_CONST = {"source": "source", "format": "format", "archive_file": "archive_file"}


def _run_starts(a: np.ndarray) -> np.ndarray | None:
    """Where each run of equal values of ``a`` starts (a mask), when ``a`` is sorted (rows in
    archive order); None when it is not."""
    if len(a) >= 2 and not (a[1:] >= a[:-1]).all():
        return None
    keep = np.empty(len(a), dtype=bool)
    keep[:1] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return keep


def _distinct(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)``; in one pass when ``a`` is sorted already (numpy's hash table costs
    ~0.8 us a value when most values differ)."""
    keep = _run_starts(a)
    return np.unique(a) if keep is None else a[keep]


def _first_of_each(a: np.ndarray) -> np.ndarray:
    """``np.unique(a, return_index=True)[1]``: where each distinct value first occurs, in the
    order of the values; in one pass when ``a`` is sorted already."""
    keep = _run_starts(a)
    return np.unique(a, return_index=True)[1] if keep is None else np.flatnonzero(keep)


def _nondecreasing(idx: pa.Array) -> bool:
    a = idx.to_numpy(zero_copy_only=False)
    return bool(len(a) < 2 or (a[1:] >= a[:-1]).all())


def _column(value, typ: pa.DataType, n: int, name: str) -> pa.Array:
    """One ``add_columns`` argument as an Arrow array of ``n`` rows of type ``typ``."""
    if value is None:
        return pa.nulls(n, typ)
    if isinstance(value, (pa.Array, pa.ChunkedArray)):
        arr = value.combine_chunks() if isinstance(value, pa.ChunkedArray) else value
    elif isinstance(value, np.ndarray):
        arr = pa.array(value)
    elif isinstance(value, (list, tuple)):
        arr = pa.array(value, type=typ)
    else:                                   # a scalar: the same value on every row
        return pa.repeat(pa.scalar(value, typ), n)
    if len(arr) != n:
        raise ValueError(f"event column {name} has {len(arr)} values for {n} rows")
    if not arr.type.equals(typ):
        arr = arr.cast(typ)
    return arr


def utc(ts: _dt.datetime | None) -> _dt.datetime | None:
    """A naive UTC datetime or an aware one -> aware UTC (for ``commit_ts``)."""
    if ts is None:
        return None
    if ts.tzinfo is None:
        return ts.replace(tzinfo=_dt.timezone.utc)
    return ts.astimezone(_dt.timezone.utc)


def line_starts(data: bytes | memoryview) -> np.ndarray:
    """Byte offset of the start of each line (lines end with ``\\n``)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(buf == 0x0A) + 1
    starts = np.concatenate(([0], ends))
    return starts[starts < len(buf)] if len(buf) else starts[:0]


def accounts_bytes(decode: Callable, lines: bool = False) -> Callable:
    """Wrap a format's ``decode`` so that every row it adds carries ``n_bytes`` (rows the
    decoder gave no byte count get one from the record offsets; see ``account_bytes``)."""

    @functools.wraps(decode)
    def decode_accounted(data, ctx, sink: EventSink):
        out = decode(data, ctx, sink)
        sink.account_bytes(len(data), (lambda: line_starts(data)) if lines else None,
                           getattr(ctx, "offset", 0), getattr(ctx, "line", 0))
        return out

    return decode_accounted
