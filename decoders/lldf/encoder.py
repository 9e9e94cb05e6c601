"""Encoder of Log Master logical log data files: the inverse of ``decoder`` (tests, sample
nights, benchmarks). Writes headers, row images, DATA areas, segments and RDWs."""

from __future__ import annotations

import datetime as _dt
from decimal import Decimal
from typing import Iterable, Sequence

from .. import codecs as C
from ..catalog import Column, Table
from . import layout as L

DEFAULT_CODEPAGE = "cp037"


# ----------------------------------------------------------------- header values

def bin10(value: int) -> bytes:
    """A BIN(10) LRSN/RBA."""
    return value.to_bytes(10, "big")


def ts17(value: _dt.datetime, extra_digits: str = "") -> bytes:
    """A BIN(17) timestamp: digits YYYYMMDDHHMMSS + 20 fraction digits (microseconds,
    then ``extra_digits`` of finer precision, then zeros) read as hex."""
    frac = f"{value.microsecond:06d}{extra_digits}"[:20].ljust(20, "0")
    return bytes.fromhex(value.strftime("%Y%m%d%H%M%S") + frac)


def char(value: str, width: int, codepage: str) -> bytes:
    raw = value.encode(codepage)
    if len(raw) > width:
        raise ValueError(f"{value!r} longer than CHAR({width})")
    return raw + " ".encode(codepage) * (width - len(raw))


_DEFAULTS: dict[str, object] = {}
for _f in L.HEADER.fields:
    _DEFAULTS[_f.name] = "" if _f.kind == "char" else bytes(_f.size) if _f.is_bytes else 0
_DEFAULTS.update(change_type="I ", log_rec_disp="C", uor_disp="C", sql_type="R",
                 anomaly_type="N", num_segments=1, segment_no=1, pagenum_fmt="R",
                 uor_has_comp="N", incomplete_trans="N", incomplete_dep="N")


def encode_header(fields: dict, codepage: str = DEFAULT_CODEPAGE, *,
                  header_len: int = L.MIN_HEADER, pad: int = 0) -> bytes:
    """The logical log header. ``fields`` by our names (``layout.HEADER``), missing ones take
    defaults; ``len_header`` defaults to ``header_len`` (>= 288: the bytes beyond the
    known fields are ``pad`` bytes)."""
    unknown = set(fields) - set(L.HEADER.names)
    if unknown:
        raise KeyError(f"lldf header has no field {sorted(unknown)[0]}")
    vals = []
    for f in L.HEADER.fields:
        v = fields.get(f.name, _DEFAULTS[f.name])
        if f.name == "len_header" and f.name not in fields:
            v = header_len
        if f.kind == "char" and isinstance(v, str):
            v = char(v, f.size, codepage)
        vals.append(v)
    head = L.HEADER.pack(*vals)
    return head + bytes([pad]) * (header_len - L.MIN_HEADER)


# ----------------------------------------------------------------- row images

def encode_date(v: _dt.date) -> str:
    return f"{v.year:04d}-{v.month:02d}-{v.day:02d}"


def encode_time(v: _dt.time) -> str:
    return f"{v.hour:02d}.{v.minute:02d}.{v.second:02d}"


def encode_timestamp(v: _dt.datetime) -> str:
    return f"{v.year:04d}-{v.month:02d}-{v.day:02d}-{v.hour:02d}.{v.minute:02d}." \
           f"{v.second:02d}.{v.microsecond:06d}"


_FIXED_NULL = {"SMALLINT": 2, "INTEGER": 4, "BIGINT": 8, "DATE": 10, "TIME": 8, "TIMESTAMP": 26}


def fixed_width(col: Column) -> int | None:
    """Bytes of the column's value in a row image (None for VARCHAR/VARBINARY)."""
    t = col.type
    if t in _FIXED_NULL:
        return _FIXED_NULL[t]
    if t == "DECIMAL":
        return C.packed_len(col.precision or 1)
    if t == "FLOAT":
        return col.length or 8
    if t == "REAL":
        return 4
    if t == "DOUBLE":
        return 8
    if t in ("CHAR", "BINARY"):
        return col.length
    if t in ("VARCHAR", "VARBINARY"):
        return None
    raise ValueError(f"lldf has no row-image layout for {t}")


def encode_value(col: Column, value, encoding: str, *, positive_sign: int = 0xC) -> bytes:
    """One column of a row image: null byte (nullable), then the value."""
    t = col.type
    null = b""
    if col.nullable:
        null = b"\xff" if value is None else b"\x00"
    elif value is None:
        raise ValueError(f"NULL in NOT NULL column {col.name}")
    if value is None:
        if t in ("VARCHAR", "VARBINARY"):
            return null + L.LEN2.pack(0)
        return null + b"\x00" * fixed_width(col)
    if t == "SMALLINT":
        body = C.s2be.pack(value)
    elif t == "INTEGER":
        body = C.s4be.pack(value)
    elif t == "BIGINT":
        body = C.s8be.pack(value)
    elif t == "DECIMAL":
        body = C.encode_packed(Decimal(value), col.precision, col.scale or 0,
                               positive_sign=positive_sign)
    elif t in ("FLOAT", "REAL", "DOUBLE"):
        body = C.encode_ibm_float(float(value), fixed_width(col))
    elif t == "CHAR":
        body = value.encode(encoding)
        if len(body) != col.length:
            raise ValueError(f"CHAR({col.length}) value {value!r} encodes to {len(body)} bytes")
    elif t == "VARCHAR":
        raw = value.encode(encoding)
        body = L.LEN2.pack(len(raw)) + raw
    elif t == "BINARY":
        body = bytes(value)
    elif t == "VARBINARY":
        body = L.LEN2.pack(len(value)) + bytes(value)
    elif t == "DATE":
        body = encode_date(value).encode(encoding)
    elif t == "TIME":
        body = encode_time(value).encode(encoding)
    elif t == "TIMESTAMP":
        body = encode_timestamp(value).encode(encoding)
    else:
        raise ValueError(f"lldf has no row-image layout for {t}")
    return null + body


def encode_image(table: Table, values: Sequence, *, positive_sign: int = 0xC) -> bytes:
    """A row image: its 2-byte length (not counting itself), then the columns."""
    enc = table.encoding or DEFAULT_CODEPAGE
    body = b"".join(encode_value(c, v, enc, positive_sign=positive_sign)
                    for c, v in zip(table.columns, values, strict=True))
    return L.LEN2.pack(len(body)) + body


def encode_area(body: bytes) -> bytes:
    """The DATA area: a 2-byte length that includes itself, then ``body``."""
    return L.LEN2.pack(len(body) + 2) + body


def row_area(table: Table, before: Sequence | None, after: Sequence | None, **kw) -> bytes:
    body = b""
    if before is not None:
        body += encode_image(table, before, **kw)
    if after is not None:
        body += encode_image(table, after, **kw)
    return encode_area(body)


def exchange_area(clone_owner: str, clone_name: str, codepage: str = DEFAULT_CODEPAGE) -> bytes:
    o, n = clone_owner.encode(codepage), clone_name.encode(codepage)
    return encode_area(L.LEN2.pack(len(o)) + o + L.LEN2.pack(len(n)) + n)


def ddl_area(text: str, codepage: str = DEFAULT_CODEPAGE) -> bytes:
    """CO (catalog object) DATA area as this project reads it: the DDL text in the codepage."""
    return encode_area(text.encode(codepage))


# ----------------------------------------------------------------- records, segments, files

def split_area(area: bytes, cuts: Iterable[int]) -> list[bytes]:
    """Split the DATA area at the given byte positions (0 < cut < len(area))."""
    points = sorted(set(cuts))
    if any(not 0 < p < len(area) for p in points):
        raise ValueError("segment cuts must be inside the DATA area")
    edges = [0, *points, len(area)]
    return [area[a:b] for a, b in zip(edges, edges[1:])]


def split_by_size(area: bytes, max_seglen: int) -> list[bytes]:
    """Log Master's own splitting: pieces of at most ``max_seglen`` bytes."""
    if max_seglen < 1:
        raise ValueError("max_seglen must be positive")
    if len(area) <= max_seglen:
        return [area]
    return [area[i:i + max_seglen] for i in range(0, len(area), max_seglen)]


def encode_records(fields: dict, area: bytes, *, codepage: str = DEFAULT_CODEPAGE,
                   pieces: list[bytes] | None = None, header_len: int = L.MIN_HEADER) -> list[bytes]:
    """The record(s) of one change: one record, or one per segment when ``pieces`` (the
    DATA area split, see ``split_area``) has more than one element. RDW not included."""
    pieces = pieces if pieces is not None else [area]
    if b"".join(pieces) != area:
        raise ValueError("pieces do not make up the DATA area")
    out = []
    for i, piece in enumerate(pieces, 1):
        f = dict(fields, len_segment=len(piece), num_segments=len(pieces), segment_no=i)
        out.append(encode_header(f, codepage, header_len=header_len) + piece)
    return out


def with_rdw(record: bytes) -> bytes:
    return L.RDW.pack(len(record) + L.RDW_LEN, 0) + record


def write_file(records: Iterable[bytes], *, rdw: bool = False) -> bytes:
    return b"".join(with_rdw(r) if rdw else r for r in records)
