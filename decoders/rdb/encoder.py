"""Encoder of Oracle Rdb LogMiner binary output: the inverse of ``decoder`` (tests, sample
nights). Layouts come from ``layout.py``; nothing here is redefined."""

from __future__ import annotations

import datetime as _dt
import struct
from typing import Sequence

from .. import codecs as C
from ..catalog import Table
from . import layout as L


def vms_ticks(value: _dt.datetime | _dt.date, extra_ticks: int = 0) -> int:
    """A (source-local) date or naive datetime as DATE VMS ticks."""
    if not isinstance(value, _dt.datetime):
        value = _dt.datetime(value.year, value.month, value.day)
    return C.encode_vms_time(value, extra_ticks)


class RowEncoder:
    """Row data and null bit vector of one table."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.encoding = table.encoding or L.DEFAULT_ENCODING
        self.codes = [L.column_codes(c) for c in table.columns]
        self.struct = struct.Struct("<" + "".join(code for code, _ in self.codes))

    @property
    def width(self) -> int:
        return self.struct.size

    def encode(self, values: Sequence, *, null_fill: bytes | None = None,
               extra_ticks: int = 0) -> tuple[bytes, bytes]:
        """(row data, null bit vector). A NULL column occupies its width: zero bytes, or
        ``null_fill`` repeated (to show a decoder that it must not read them)."""
        parts: list = []
        nulls = 0
        null_cols: list[int] = []
        for j, (col, value) in enumerate(zip(self.table.columns, values, strict=True)):
            t = col.type
            if value is None:
                nulls |= 1 << j
                null_cols.append(j)
                parts.extend(_placeholder(t))
            elif t in ("CHAR", "VARCHAR"):
                raw = value.encode(self.encoding)
                n = col.length or 0
                if len(raw) > n:
                    raise ValueError(f"{col.name}: {len(raw)} bytes do not fit {t}({n})")
                if t == "CHAR":
                    parts.append(raw.ljust(n, b" "))
                else:
                    parts.extend((len(raw), raw))       # struct pads the n bytes with zeros
            elif t == "DATE":
                parts.append(vms_ticks(value))
            elif t == "TIMESTAMP":
                parts.append(vms_ticks(value, extra_ticks))
            elif t in ("REAL", "DOUBLE"):
                parts.append(float(value))
            else:
                parts.append(int(value))
        data = bytearray(self.struct.pack(*parts))
        if null_fill and null_cols:
            self._fill(data, null_cols, null_fill)
        nbv = nulls.to_bytes(L.nbv_bytes(len(self.table.columns)), "little")
        return bytes(data), nbv

    def _fill(self, data: bytearray, cols: list[int], fill: bytes) -> None:
        starts = []
        pos = 0
        for _, width in self.codes:
            starts.append(pos)
            pos += width
        for j in cols:
            width = self.codes[j][1]
            data[starts[j]:starts[j] + width] = (fill * (width // len(fill) + 1))[:width]


def _placeholder(t: str) -> tuple:
    if t == "VARCHAR":
        return (0, b"")
    if t == "CHAR":
        return (b"",)
    if t in ("REAL", "DOUBLE"):
        return (0.0,)
    return (0,)


def relation_name(name: str) -> bytes:
    raw = name.encode("latin-1")
    if len(raw) > L.RELATION_NAME_LEN:
        raise ValueError(f"relation name {name!r} longer than {L.RELATION_NAME_LEN}")
    return raw.ljust(L.RELATION_NAME_LEN, b" ")


def row_record(action: bytes, relation: str | bytes, record_type: int, dbk: int, start_tad: int,
               commit_tad: int, tsn: int, data: bytes, nbv: bytes, *, nbv_bits: int | None = None,
               record_version: int = 1, len_data: int | None = None) -> bytes:
    """One ``M``/``D`` record: 74-byte header, row data, null bit vector. ``nbv_bits`` defaults
    to 8 * len(nbv) only when not given; pass the column count. ``len_data`` overrides DATA_LEN
    (corrupt inputs for tests)."""
    rel = relation if isinstance(relation, bytes) else relation_name(relation)
    header = L.ROW_HEADER.pack(
        action, rel, record_type, len(data) if len_data is None else len_data,
        8 * len(nbv) if nbv_bits is None else nbv_bits, dbk, start_tad, commit_tad, tsn,
        record_version)
    return header + data + nbv


def commit_record(start_tad: int, commit_tad: int, tsn: int, *, tid: int = 0, pid: int = 0,
                  rm_tid: bytes = b"", aercp: bytes = b"") -> bytes:
    """One ``C`` record: 72-byte header (TID and PID where DBK sits), then RM_TID_LEN,
    AERCP_LEN, RM_TID, AERCP."""
    body = L.COMMIT_DATA.pack(len(rm_tid), len(aercp)) + rm_tid + aercp
    header = L.COMMIT_HEADER.pack(L.ACTION_COMMIT, b"\x00" * L.RELATION_NAME_LEN, 0, len(body), 0,
                                  tid, pid, start_tad, commit_tad, tsn)
    return header + body
