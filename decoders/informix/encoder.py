"""Writer of Informix ``onlog`` text: the inverse of ``decoder`` (tests, sample nights).

``OnlogWriter`` lays records out the way ``onlog`` prints one logical-log file: addresses
start at 0x18 (past the page header) and grow by each record's length (addr(n) + len(n) =
addr(n+1)), the header line is repeated every 18 records, and with ``dumps=True`` (``-l``)
each record is followed by an indented hex + ASCII dump of its bytes.
"""

from __future__ import annotations

import datetime as _dt
from typing import Iterable, Mapping

from ..codecs import u2be, u4be
from . import layout as L

FIRST_ADDR = 0x18
HEADER_EVERY = 18
TYPE_CODES = {t: i + 1 for i, t in enumerate(sorted(L.RECORD_TYPES))}
FIXED_LEN = {"BEGIN": 40, "COMMIT": 36, "ROLLBACK": 36, "CLR": 24, "BEGCOM": 24, "SYNC": 24,
             "XAPREPARE": 24, "ENDTRANS": 24}


def two_digit_year(year: int) -> int:
    if not (1900 + L.YEAR_PIVOT <= year < 2000 + L.YEAR_PIVOT):
        raise ValueError(f"year {year} cannot be written with two digits")
    return year % 100


def format_value(kind: str, value) -> str:
    if kind == L.HEX:
        return format(int(value), "x")
    if kind == L.DEC:
        return str(int(value))
    if kind == L.DATE:
        return f"{value.month:02d}/{value.day:02d}/{two_digit_year(value.year):02d}"
    if kind == L.TIME:
        return f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    text = str(value)
    if kind == L.USED_FREE and text not in L.USED_FREE_VALUES:
        raise ValueError(f"status must be USED or FREE, got {text!r}")
    if not text or text != text.strip() or "\n" in text:
        raise ValueError(f"ASCII column value {text!r} cannot be printed")
    return text


def format_columns(rtype: str, values: Mapping) -> list[str]:
    cols = L.RECORD_TYPES[rtype]
    out = [format_value(kind, values[name]) for name, kind, _ in cols]
    for (name, kind, _), text in zip(cols[:-1], out[:-1]):
        if kind in (L.ASCII, L.USED_FREE) and any(c.isspace() for c in text):
            raise ValueError(f"{rtype}.{name}: only a last ASCII column may hold blanks")
    if cols and cols[-1][1] != L.ASCII and any(c.isspace() for c in out[-1]):
        raise ValueError(f"{rtype}: value with blanks")
    return out


def format_record(addr: int, length: int, rtype: str, xid: int, id_: int, link: int,
                  values: Mapping | Iterable[str], *, raw_columns: bool = False) -> str:
    """One record line; ``raw_columns=True`` takes the additional columns as printed text
    (to write malformed lines in tests)."""
    extra = list(values) if raw_columns else format_columns(rtype, values)
    head = f"{addr:<8x} {length:<4d} {rtype:<8s} {xid:<8d} {id_:<2d} {link:<8x}"
    return " ".join([head, *extra]).rstrip() if extra else head.rstrip()


def default_length(rtype: str, values: Mapping) -> int:
    if rtype in FIXED_LEN:
        return FIXED_LEN[rtype]
    n = 24 + 4 * len(L.RECORD_TYPES[rtype])
    for name in ("slotlen", "new_slotlen"):
        if name in values:
            n += int(values[name])
            break
    for name, kind, _ in L.RECORD_TYPES[rtype]:
        if kind == L.ASCII:
            n += len(str(values[name]).encode("utf-8")) + 1
    return (n + 3) // 4 * 4


def record_image(addr: int, length: int, rtype: str, xid: int, link: int, line: str) -> bytes:
    """Bytes for the ``-l`` dump: a small header, then the record's printed columns."""
    head = (u4be.pack(length) + u2be.pack(TYPE_CODES.get(rtype, 0)) + u2be.pack(0)
            + u4be.pack(xid & 0xFFFFFFFF) + u4be.pack(link) + u4be.pack(addr) + bytes(4))
    body = " ".join(line.split()[L.N_HEADER:]).encode("utf-8")
    return (head + body)[:length].ljust(length, b"\0")


def dump_lines(image: bytes) -> list[str]:
    """``onlog -l`` style: indented, 16 bytes a line as 4 hex words, then ASCII."""
    out = []
    for off in range(0, len(image), 16):
        chunk = image[off:off + 16]
        words = " ".join(chunk[i:i + 4].hex() for i in range(0, len(chunk), 4))
        text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        out.append(f"        {words:<35s}  {text}")
    return out


class OnlogWriter:
    """Writes the onlog text of one logical-log file."""

    def __init__(self, uniqid: int, *, dumps: bool = False, first_addr: int = FIRST_ADDR,
                 header_every: int = HEADER_EVERY) -> None:
        self.uniqid = uniqid
        self.dumps = dumps
        self.addr = first_addr
        self.header_every = header_every
        self.lines: list[str] = []
        self.n_records = 0

    def file_name(self, prefix: str = "onlog") -> str:
        return f"{prefix}_{self.uniqid}.txt"

    def _header(self) -> None:
        if self.header_every and self.n_records % self.header_every == 0:
            if self.lines:
                self.lines.append("")
            self.lines.append(L.HEADER_LINE)

    def add(self, rtype: str, xid: int, link: int, values: Mapping | None = None, *,
            id_: int = 0, length: int | None = None) -> int:
        """Append a record; returns its address."""
        values = values or {}
        length = length or default_length(rtype, values)
        addr = self.addr
        self._header()
        line = format_record(addr, length, rtype, xid, id_, link, values)
        self.lines.append(line)
        if self.dumps:
            self.lines.extend(dump_lines(record_image(addr, length, rtype, xid, link, line)))
        self.addr += length
        self.n_records += 1
        return addr

    def add_line(self, line: str, *, length: int = 24) -> None:
        """Append a line as it is (malformed records for tests); it takes ``length`` bytes."""
        self._header()
        self.lines.append(line)
        self.addr += length
        self.n_records += 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def data(self) -> bytes:
        return self.text().encode("utf-8")


def stamp(ts: _dt.datetime) -> dict:
    """date/time columns of BEGIN, COMMIT, ROLLBACK (local time, whole seconds)."""
    return {"date": ts.date(), "time": ts.time().replace(microsecond=0)}
