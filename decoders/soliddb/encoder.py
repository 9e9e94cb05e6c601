"""Encoder of solidDB SYS_LOG CSV exports: the inverse of ``decoder`` (tests, sample nights)."""

from __future__ import annotations

import datetime as _dt
from decimal import Decimal
from typing import Iterable

from .. import codecs as C
from ..catalog import Table
from . import layout as L


def encode_value(col, value, encoding: str = "utf-8") -> bytes:
    """<length><data> of one column value."""
    if value is None:
        return L.LEN.pack(L.NULL_LEN)
    if isinstance(value, C.BlobRef):
        return L.LEN.pack(L.BLOB_LEN) + L.INT8.pack(int(value))
    t = col.type
    if t in ("TINYINT", "SMALLINT", "INTEGER"):
        body = L.INT4.pack(value)
    elif t == "BIGINT":
        body = L.INT8.pack(value)
    elif t in ("REAL", "FLOAT", "DOUBLE"):
        body = C.f8be.pack(float(value))
    elif t == "DECIMAL":
        body = str(Decimal(value)).encode("ascii")
    elif t in ("DATE", "TIME", "TIMESTAMP"):
        body = encode_datetime(value)
    elif t in ("CHAR", "VARCHAR", "CLOB"):
        body = value.encode(encoding)
    else:  # BINARY, VARBINARY, BLOB inline
        body = bytes(value)
    return L.LEN.pack(len(body)) + body



def encode_datetime(value) -> bytes:
    if isinstance(value, _dt.datetime):
        parts = (value.year, value.month, value.day, value.hour, value.minute, value.second,
                 value.microsecond * 1000)
    elif isinstance(value, _dt.date):
        parts = (value.year, value.month, value.day, 0, 0, 0, 0)
    else:  # time
        parts = (0, 0, 0, value.hour, value.minute, value.second, value.microsecond * 1000)
    y, mo, d, h, mi, s, ns = parts
    return L.DATE_YEAR.pack(y) + bytes((mo, d, h, mi, s)) + C.u4be.pack(ns)


def encode_row(table: Table, values: Iterable) -> bytes:
    enc = table.encoding or "utf-8"
    return b"".join(encode_value(c, v, enc) for c, v in zip(table.columns, values, strict=True))


def encode_ddl(logrecid: int, info: str) -> bytes:
    body = info.encode("utf-8")
    return L.LEN.pack(4) + C.s4be.pack(logrecid) + L.LEN.pack(len(body)) + body


def encode_sql(sql: str) -> bytes:
    body = sql.encode("utf-8")
    return L.LEN.pack(len(body)) + body


def logaddr(n: int) -> bytes:
    """A 20-byte log address; binary order is log order."""
    return (0x0000000000000001FFFFFFFF << 64 | n).to_bytes(L.LOGADDR_BYTES, "big")


def csv_row(recid: int, trxid: int | None, stmttrxid: int | None, relid: int | None, flags: int,
            addr: bytes | None, data: bytes | None, *, upper: bool = True) -> str:
    def num(v):
        return "" if v is None else str(v)

    def hx(b):
        if b is None:
            return ""
        return b.hex().upper() if upper else b.hex()
    return ",".join((str(recid), L.RECNAMES.get(recid, "UNKNOWN"), num(trxid), num(stmttrxid),
                     num(relid), str(flags), hx(addr), hx(data))) + "\r\n"


def write_archive(rows: Iterable[str]) -> bytes:
    return (",".join(L.HEADER) + "\r\n" + "".join(rows)).encode("utf-8")
