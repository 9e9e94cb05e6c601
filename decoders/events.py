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
``n_records`` per bucket so that the buckets add up to the records read.

A row can also end its transaction (``trx_end`` = ``commit``/``abort``) without being a
commit record: Log Master and Rdb records carry their unit of recovery's disposition.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")

EVENT_FIELDS: list[tuple[str, pa.DataType]] = [
    ("source", pa.string()),
    ("format", pa.string()),
    ("archive_file", pa.string()),
    ("record_offset", pa.int64()),
    ("record_index", pa.int64()),
    ("n_records", pa.int32()),
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
]
EVENT_SCHEMA = pa.schema(EVENT_FIELDS)
EVENT_COLUMNS = [name for name, _ in EVENT_FIELDS]
_COLUMN_SET = frozenset(EVENT_COLUMNS)
# set by the sink itself, never by a decoder's keyword fields
_FIXED = frozenset(("source", "format", "archive_file", "record_offset", "record_index",
                    "n_records", "kind"))
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
        self.records_read = 0

    def __len__(self) -> int:
        return self._n + sum(b.num_rows for b in self._done)

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

    def _seal(self) -> None:
        """Turn the open column lists into an Arrow batch (bounds Python object memory)."""
        if self._n:
            self._done.append(self._build())
            self._cols = {name: [] for name in EVENT_COLUMNS}
            self._n = 0

    def quarantine(self, error, record_offset: int, record_index: int, raw: bytes | None,
                   n_records: int = 1, **fields: Any) -> None:
        """A record that could not be decoded (``error`` is a ``DecodeError``)."""
        self.add("quarantine", record_offset, record_index, n_records,
                 error_class=getattr(error, "error_class", type(error).__name__),
                 message=str(error), raw_hex=raw_hex(raw), **fields)

    def _build(self) -> pa.RecordBatch:
        n = self._n
        constant = {"source": self.source, "format": self.format, "archive_file": self.archive_file}
        arrays = []
        for name, typ in EVENT_FIELDS:
            if name in constant:
                arrays.append(pa.array([constant[name]] * n, type=typ))
                continue
            col = self._cols[name]
            if len(col) < n:
                col.extend([None] * (n - len(col)))
            arrays.append(pa.array(col, type=typ))
        return pa.RecordBatch.from_arrays(arrays, schema=EVENT_SCHEMA)

    def batches(self) -> list[pa.RecordBatch]:
        """All events so far as Arrow batches (the sink is left empty)."""
        self._seal()
        out, self._done = self._done, []
        return out

    def to_table(self) -> pa.Table:
        self._seal()
        return pa.Table.from_batches(self._done, schema=EVENT_SCHEMA)

    def rows(self) -> list[dict]:
        """The events as dicts (tests and tools; the pipeline uses ``batches``)."""
        return self.to_table().to_pylist()


def utc(ts: _dt.datetime | None) -> _dt.datetime | None:
    """A naive UTC datetime or an aware one -> aware UTC (for ``commit_ts``)."""
    if ts is None:
        return None
    if ts.tzinfo is None:
        return ts.replace(tzinfo=_dt.timezone.utc)
    return ts.astimezone(_dt.timezone.utc)
