"""Decoder of solidDB SYS_LOG CSV exports (SPEC section 3, soliddb).

Framing: RFC 4180 CSV with a header row; a quoted field may span lines. ``record_offset`` is
the byte offset of the row's first byte; a row that ends inside a quoted field or has too
few fields at the end of the file is a truncated tail (``NeedData``), elsewhere ``Corrupt``.

Decisions:

* ``trx_id`` = TRXID (decimal); ``position`` = LOGADDR as 40 upper-case hex digits (binary
  order = log order); the COMMIT's LOGADDR is the ``commit_position``; no ``commit_ts``.
* RECID 0 (EMPTY/NOP padding) is skipped by rule ``soliddb_empty_padding``; TRX_START with
  FLAGS bit 6 marks the transaction ``capture_off`` (its changes are skipped, never published).
* UPDATE_BEFOREIMAGE pairs with the next record of the same TRXID when that is an UPDATE of
  the same RELID (one ``u`` change, ``n_records`` 2); if the next record of the transaction
  is anything else (or the archive ends), the before image is quarantined. An UPDATE with no
  before image is a ``u`` with ``before`` null.
* DDL (13) pairs the same way with a following SQL (6) record: one ``ddl`` change whose text
  is the SQL; without SQL the text is the DDL description and name ("Alter table ERP.X");
  a SQL record alone is a ``ddl`` change. DDL is published even for a RELID the catalog does
  not know (that is how new tables arrive); row changes of unknown RELIDs are quarantined.
* Values: TINYINT/SMALLINT/INTEGER as 4-byte, BIGINT 8-byte big-endian; REAL/FLOAT/DOUBLE as
  8-byte doubles (a REAL renders as the shortest text of its 4-byte value); DATE/TIME/
  TIMESTAMP in the 11-byte layout with nanoseconds truncated to microseconds; DECIMAL from its
  decimal string; CHAR/VARCHAR/CLOB in the table's ``encoding`` (default utf-8); a -2 length
  is a BLOB id (``{"blob_id": n}``). A length past the DATA, or DATA left over after the last
  column, quarantines the record.
"""

from __future__ import annotations

import binascii
import csv
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import codecs as C
from ..base import DecodeContext, hexpos
from ..catalog import Catalog, Table
from ..errors import BadValue, Corrupt, DecodeError, NeedData, UnknownRecordType, UnknownTable
from ..events import EventSink
from ..framing import split_ranges
from ..layout import as_uint8, byte_runs
from ..render import render_rows
from ..vectors import text as vtext
from . import layout as L

DEFAULT_ENCODING = "utf-8"


# ----------------------------------------------------------------- DATA column values

def _fixed(size: int, what: str):
    def check(raw: bytes) -> None:
        if len(raw) != size:
            raise Corrupt(f"{what} value has the wrong length", expected=size, actual=len(raw))
    return check


def _int4(raw: bytes):
    _check4(raw)
    return L.INT4.unpack(raw)[0]


def _int8(raw: bytes):
    _check8(raw)
    return L.INT8.unpack(raw)[0]


def _double(raw: bytes):
    _check8(raw)
    return C.f8be.unpack(raw)[0]


_FLT_MAX = 3.4028234663852886e38


def _real(raw: bytes):
    value = _double(raw)
    if value == value and abs(value) != float("inf") and abs(value) > _FLT_MAX:
        try:                               # values that round to the largest single are fine
            C.encode_f4(value)
        except OverflowError:
            raise BadValue("REAL beyond the range of a 4-byte float", expected="|x| <= 3.4028235e38",
                           actual=repr(value)) from None
    return C.Float4(value)


_check4 = _fixed(4, "integer")
_check8 = _fixed(8, "8-byte")
_check11 = _fixed(L.DATETIME_LEN, "DATE/TIME/TIMESTAMP")


def _datetime_parts(raw: bytes):
    _check11(raw)
    year = L.DATE_YEAR.unpack_from(raw, 0)[0]
    month, day, hour, minute, second = raw[2], raw[3], raw[4], raw[5], raw[6]
    frac_ns = C.u4be.unpack_from(raw, 7)[0]
    if frac_ns > 999_999_999:
        raise BadValue("fraction of second out of range", expected="< 1e9 ns", actual=frac_ns)
    return year, month, day, hour, minute, second, frac_ns // 1000


def _date(raw: bytes):
    y, mo, d, *_ = _datetime_parts(raw)
    return C.make_date(y, mo, d)


def _time(raw: bytes):
    _, _, _, h, mi, s, us = _datetime_parts(raw)
    return C.make_time(h, mi, s, us)


def _timestamp(raw: bytes):
    return C.make_timestamp(*_datetime_parts(raw))


def _decimal(raw: bytes):
    text = raw.decode("ascii", errors="replace").strip()
    try:
        value = Decimal(text)
    except InvalidOperation as exc:
        raise BadValue("DECIMAL is not a decimal string", expected="digits", actual=text) from exc
    if not value.is_finite():
        raise BadValue("DECIMAL is not finite", expected="a finite decimal", actual=text)
    return value


def _text(encoding: str) -> Callable[[bytes], str]:
    return lambda raw: C.decode_text(raw, encoding, "CHAR/VARCHAR")


def _binary(raw: bytes) -> bytes:
    return raw


def value_decoders(table: Table) -> list[Callable[[bytes], object]]:
    enc = table.encoding or DEFAULT_ENCODING
    out = []
    for col in table.columns:
        t = col.type
        out.append({
            "TINYINT": _int4, "SMALLINT": _int4, "INTEGER": _int4, "BIGINT": _int8,
            "REAL": _real, "FLOAT": _double, "DOUBLE": _double, "DECIMAL": _decimal,
            "DATE": _date, "TIME": _time, "TIMESTAMP": _timestamp,
            "CHAR": _text(enc), "VARCHAR": _text(enc), "CLOB": _text(enc),
            "BINARY": _binary, "VARBINARY": _binary, "BLOB": _binary,
        }[t])
    return out


class RowCodec:
    """Decodes the DATA column of one table's row records."""

    __slots__ = ("table", "decoders", "render", "names")

    def __init__(self, table: Table) -> None:
        self.table = table
        self.decoders = value_decoders(table)
        self.render = C.RowRenderer(table.columns)
        self.names = [c.name for c in table.columns]

    def decode(self, data: bytes) -> str:
        values = []
        pos = 0
        n = len(data)
        for i, dec in enumerate(self.decoders):
            col = self.table.columns[i]
            where = f"DATA[{pos}] column {col.name}"
            if pos + 4 > n:
                raise NeedData("DATA shorter than its lengths say: no length for column",
                               path=where, expected=4, actual=n - pos)
            length = L.LEN.unpack_from(data, pos)[0]
            pos += 4
            if length == L.NULL_LEN:
                if not col.nullable:
                    raise BadValue("NULL in a NOT NULL column", path=where)
                values.append(None)
                continue
            if length == L.BLOB_LEN:
                if pos + 8 > n:
                    raise NeedData("DATA shorter than its lengths say: BLOB id", path=where,
                                   expected=8, actual=n - pos)
                values.append(C.BlobRef(L.INT8.unpack_from(data, pos)[0]))
                pos += 8
                continue
            if length < 0:
                raise Corrupt("negative column length", path=where, expected=">= 0 or -1/-2",
                              actual=length)
            if pos + length > n:
                raise NeedData("DATA shorter than its lengths say", path=where,
                               expected=length, actual=n - pos)
            try:
                values.append(dec(data[pos:pos + length]))
            except DecodeError as exc:
                exc.path = exc.path or where
                raise
            pos += length
        if pos != n:
            raise Corrupt("DATA longer than the table's columns", path=f"DATA[{pos}]",
                          expected=pos, actual=n)
        return self.render(values)


def decode_ddl(data: bytes) -> tuple[int, str]:
    """DDL DATA: <length><logrecid><length><info>."""
    if len(data) < 4:
        raise NeedData("DDL DATA too short for its first length", expected=4, actual=len(data))
    n1 = L.LEN.unpack_from(data, 0)[0]
    if n1 not in (1, 2, 4, 8) or 4 + n1 + 4 > len(data):
        raise Corrupt("DDL DATA: bad logrecid length", path="DATA[0]", expected="1/2/4/8",
                      actual=n1) if n1 not in (1, 2, 4, 8) else \
            NeedData("DDL DATA shorter than its lengths say", path="DATA[0]",
                     expected=4 + n1 + 4, actual=len(data))
    logrecid = int.from_bytes(data[4:4 + n1], "big", signed=True)
    pos = 4 + n1
    n2 = L.LEN.unpack_from(data, pos)[0]
    pos += 4
    if n2 < 0 or pos + n2 != len(data):
        raise (NeedData if n2 >= 0 and pos + n2 > len(data) else Corrupt)(
            "DDL DATA: info length does not match", path=f"DATA[{pos - 4}]",
            expected=len(data) - pos, actual=n2)
    info = C.decode_text(data[pos:], "utf-8", "DDL info")
    return logrecid, info


def decode_sql(data: bytes) -> str:
    """SQL DATA: <length><info>."""
    if len(data) < 4:
        raise NeedData("SQL DATA too short for its length", expected=4, actual=len(data))
    n = L.LEN.unpack_from(data, 0)[0]
    if n < 0 or 4 + n != len(data):
        raise (NeedData if n >= 0 and 4 + n > len(data) else Corrupt)(
            "SQL DATA: length does not match", path="DATA[0]", expected=len(data) - 4, actual=n)
    return C.decode_text(data[4:], "utf-8", "SQL text")


def _int_field(text: str, name: str) -> int | None:
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise Corrupt(f"{name} is not an integer", path=name, expected="decimal digits",
                      actual=text[:40]) from None


def _hex_field(text: str, name: str) -> bytes | None:
    if text == "":
        return None
    if len(text) % 2:
        raise Corrupt(f"{name} is odd-length hex", path=name, expected="an even number of digits",
                      actual=len(text))
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise Corrupt(f"{name} is not hex", path=name, expected="0-9a-fA-F",
                      actual=text[:40]) from None


# ----------------------------------------------------------------- CSV framing (linear)

MAX_JOIN_LINES = 64            # a quoted field spanning lines: at most this many lines joined
MAX_JOIN_BYTES = 1 << 20       # ... and this many bytes (SYS_LOG fields are numbers and hex)
_NL, _QUOTE, _COMMA = 0x0A, 0x22, 0x2C
_HEADER_UPPER = [h for h in L.HEADER]


@dataclass
class Rows:
    """The CSV rows of an archive (or range): byte spans, and what framing found."""
    starts: np.ndarray              # row's first byte (archive-relative)
    ends: np.ndarray                # one past its last byte (newline included)
    simple: np.ndarray              # bool: ASCII, no quote, exactly 7 commas, not blank
    errors: dict                    # row number -> DecodeError found while framing
    fields: dict                    # row number -> parsed fields of a row that needed csv
    base: int = 0                   # archive offset of the decoded bytes' first byte
    commas: np.ndarray | None = None    # offsets of the commas in the decoded bytes, when known


SCAN_CHUNK = 1 << 22    # bytes a byte-class scan looks at at once (``byte_positions``)
_DIGIT_BLOCK = 1 << 16  # id fields whose digits ``split`` reads as one matrix


def byte_positions(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Offsets (int64, increasing) of the newlines, quotes, commas and non-ASCII bytes of
    ``buf``, scanned ``SCAN_CHUNK`` bytes at a time: the four masks of a chunk stay in the
    cache and none is as large as the archive (four masks of a 211 MB archive cost four
    passes over memory and the page faults of 844 MB, most of a split's time)."""
    parts: tuple[list, list, list, list] = ([], [], [], [])
    for lo in range(0, len(buf), SCAN_CHUNK):
        chunk = buf[lo:lo + SCAN_CHUNK]
        for out, mask in zip(parts, (chunk == _NL, chunk == _QUOTE, chunk == _COMMA, chunk >= 0x80)):
            found = np.flatnonzero(mask)
            if len(found):
                found += lo
                out.append(found)
    return tuple(np.concatenate(p).astype(np.int64, copy=False) if p else np.zeros(0, np.int64)
                 for p in parts)


def frame_rows(data, base: int = 0, expect_header: bool = True) -> tuple[Rows, int | None]:
    """Rows of a SYS_LOG CSV, in one linear pass (numpy over newlines and quotes).

    A line with an even number of quotes is a row; a line with an odd number is joined with
    the lines after it until the quotes balance (RFC 4180: a quoted field may span lines), but
    only if the joined row parses into the 8 columns, within ``MAX_JOIN_LINES`` lines and
    ``MAX_JOIN_BYTES`` bytes; otherwise the line alone is a damaged row and the next line is
    read afresh, so a stray quote costs its own line, never the rest of the file. Blank lines
    are no rows. The first row must be the header (only the archive's first range has one);
    returns the rows after it and the header row's number, or None when it is missing (the
    row is then quarantined)."""
    buf = as_uint8(data)
    n = len(buf)
    nl, qpos, cpos, hpos = byte_positions(buf)
    starts = np.concatenate(([0], nl + 1)).astype(np.int64)
    ends = np.concatenate((nl + 1, [n])).astype(np.int64)
    keep = starts < ends
    starts, ends = starts[keep], ends[keep]

    def per_line(pos, s, e):                 # how many of ``pos`` fall in each [s, e)
        return np.searchsorted(pos, e) - np.searchsorted(pos, s)

    quotes = per_line(qpos, starts, ends)
    # blank lines (only white space) are no rows; a line that starts with a visible
    # character is not blank, the others (rare) are looked at one by one
    first_byte = buf[np.minimum(starts, max(n - 1, 0))] if n else np.zeros(0, np.uint8)
    maybe = np.isin(first_byte, (0x20, 0x09, 0x0D, 0x0A, 0x0B, 0x0C))
    blank = np.zeros(len(starts), dtype=bool)
    for k in np.flatnonzero(maybe).tolist():
        blank[k] = not bytes(buf[starts[k]:ends[k]]).strip()
    errors: dict = {}
    fields: dict = {}
    if (quotes % 2).any():
        starts, ends, blank, errors, fields = _join_quoted(data, starts, ends, quotes, blank, base)
    keep = ~blank
    starts, ends = starts[keep], ends[keep]
    if errors:
        renum = np.cumsum(keep) - 1
        errors = {int(renum[k]): v for k, v in errors.items() if keep[k]}
        fields = {int(renum[k]): v for k, v in fields.items() if keep[k]}
    simple = ((per_line(qpos, starts, ends) == 0) & (per_line(cpos, starts, ends) == 7)
              & (per_line(hpos, starts, ends) == 0))
    rows = Rows(starts + base, ends + base, simple, errors, fields, base, cpos)
    header = None
    if expect_header and len(starts):
        header = 0 if _header_ok(bytes(buf[starts[0]:ends[0]])) else None
    return rows, header


def _header_ok(raw: bytes) -> bool:
    """Is ``raw`` (the first row, newline included) the SYS_LOG header?"""
    try:
        text = raw.decode("utf-8").rstrip("\r\n")
        got = [f.strip().upper() for f in next(csv.reader([text]))] if text else []
    except (UnicodeDecodeError, csv.Error):
        got = []
    return got == _HEADER_UPPER


def _read_fields(body) -> pa.Table | None:
    """The eight fields of every row of ``body`` (no quoting) as string columns, by
    ``pyarrow.csv`` in this thread (its thread pool costs three times the CPU), or None when
    a row does not have eight fields."""
    import pyarrow.csv as pacsv

    try:
        return pacsv.read_csv(
            pa.py_buffer(body),
            read_options=pacsv.ReadOptions(column_names=list(L.HEADER), block_size=1 << 26,
                                           use_threads=False),
            parse_options=pacsv.ParseOptions(quote_char=False, newlines_in_values=False,
                                             ignore_empty_lines=False),
            convert_options=pacsv.ConvertOptions(
                column_types={h: pa.string() for h in L.HEADER}, strings_can_be_null=False,
                quoted_strings_can_be_null=False))
    except pa.ArrowInvalid:
        return None


def _field_lengths(table: pa.Table) -> np.ndarray:
    """Per row, the bytes of its eight fields together."""
    total = np.zeros(table.num_rows, dtype=np.int64)
    for name in L.HEADER:
        at = 0
        for chunk in table.column(name).chunks:
            off = np.frombuffer(chunk.buffers()[1], dtype=np.int32, count=len(chunk) + 1,
                                offset=chunk.offset * 4)
            total[at:at + len(chunk)] += np.diff(off)
            at += len(chunk)
    return total


def clean_frame(data, base: int = 0, expect_header: bool = True):
    """``frame_rows`` for the usual archive, without a pass per byte class: ASCII only, no
    quote, every line ends with the same line end (``\n`` or ``\r\n``, the last one too),
    every line but the header has exactly eight fields (so none is blank) and the header is
    good. Then every row is simple and the fields of all rows are read at once; returns
    ``(rows, header, fields)``, or None when the archive is not of that kind (the general
    ``frame_rows`` decides then). Every row has eight fields and the bytes add up to the
    archive's size with one line end per row: that proves the rows are exactly its lines."""
    if not isinstance(data, bytes) or not data.endswith(b"\n") or not data.isascii() \
            or data.find(b'"') >= 0:
        return None
    head = 0
    if expect_header:
        head = data.find(b"\n") + 1
        if not _header_ok(data[:head]):
            return None
    if head >= len(data):
        return None
    table = _read_fields(memoryview(data)[head:])
    if table is None or not table.num_rows:
        return None
    lengths = _field_lengths(table) + (len(L.HEADER) - 1)
    n_rows = table.num_rows
    body = len(data) - head
    if int(lengths.sum()) + 2 * n_rows == body:
        lengths += 2
    elif int(lengths.sum()) + n_rows == body and data.find(b"\r") < 0:
        lengths += 1
    else:
        return None
    first = 1 if expect_header else 0
    ends = np.empty(n_rows + first, dtype=np.int64)
    ends[:first] = head
    np.cumsum(lengths, out=ends[first:])
    ends[first:] += head
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1]
    rows = Rows(starts + base, ends + base, np.ones(len(starts), dtype=bool), {}, {}, base)
    return rows, (0 if expect_header else None), table


def _join_quoted(data, starts, ends, quotes, blank, base):
    """Join the lines of quoted fields that span lines (the rare path: a Python loop over the
    lines, each visited a bounded number of times)."""
    out_s, out_e, out_b = [], [], []
    errors, fields = {}, {}
    i, n_lines, size = 0, len(starts), len(data)
    odd = quotes % 2
    while i < n_lines:
        if not odd[i]:
            out_s.append(starts[i]); out_e.append(ends[i]); out_b.append(blank[i])
            i += 1
            continue
        j, count = i, int(quotes[i])
        while count % 2 and j + 1 < n_lines and j - i < MAX_JOIN_LINES \
                and ends[j + 1] - starts[i] <= MAX_JOIN_BYTES:
            j += 1
            count += int(quotes[j])
        row = len(out_s)
        if count % 2 == 0:
            raw = bytes(data[starts[i]:ends[j]])
            got = _parse_quoted(raw)
            if got is not None:
                out_s.append(starts[i]); out_e.append(ends[j]); out_b.append(False)
                fields[row] = got
                i = j + 1
                continue
        # the line alone is damaged; the next line is read afresh
        at_end = ends[i] == size and not bytes(data[starts[i]:ends[i]]).endswith(b"\n")
        errors[row] = (NeedData if at_end else Corrupt)(
            "CSV row ends inside a quoted field" if at_end
            else "CSV row has an unbalanced quote (the quoted field never closes into a row)",
            offset=int(starts[i]) + base)
        out_s.append(starts[i]); out_e.append(ends[i]); out_b.append(False)
        i += 1
    return (np.array(out_s, dtype=np.int64), np.array(out_e, dtype=np.int64),
            np.array(out_b, dtype=bool), errors, fields)


def _parse_quoted(raw: bytes) -> list[str] | None:
    try:
        text = raw.decode("utf-8")
        got = next(csv.reader([text.rstrip("\r\n")], strict=True))
    except (UnicodeDecodeError, csv.Error, StopIteration):
        return None
    return got if len(got) == len(L.HEADER) else None


def parse_row(raw: bytes, offset: int, complete: bool, fields: list | None = None):
    """The fields of one row, or the DecodeError that says why not (the careful path)."""
    if fields is not None:
        return fields
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Corrupt("row is not valid UTF-8", offset=offset + exc.start)
    body = text.rstrip("\r\n")
    if '"' in body:
        try:
            got = next(csv.reader([body], strict=True))
        except csv.Error as exc:
            return Corrupt(f"CSV row cannot be parsed ({exc})", offset=offset)
    else:
        got = body.split(",")
    if len(got) != len(L.HEADER):
        truncated = not complete and len(got) < len(L.HEADER)
        return (NeedData if truncated else Corrupt)(
            "CSV row has the wrong number of fields" + (" (truncated tail)" if truncated else ""),
            offset=offset, expected=len(L.HEADER), actual=len(got))
    if not complete and got[-1] and len(got[-1]) % 2:
        return NeedData("last CSV row is cut short (truncated tail)", offset=offset)
    return got


def split(data, ctx: DecodeContext, target: int) -> list[dict]:
    """Byte ranges cut at row starts that no pairing crosses: a before image or DDL row waits
    for the next row of its transaction, so no cut falls between the two. Rows the fast
    parse does not take are parsed carefully here; a row that does not parse at all pairs
    with nothing (it is quarantined either way)."""
    rows, header = frame_rows(data)
    n = len(rows.starts)
    if n < 2:
        return [{"start": 0, "end": len(data), "index": 0}]
    first = 0 if header is None else 1
    trx = np.full(n, -1, dtype=np.int64)
    recid = np.full(n, -1, dtype=np.int64)
    fast = np.flatnonzero(rows.simple)
    taken = np.zeros(n, dtype=bool)
    if len(fast):
        rid, tid, ok = _split_ids(as_uint8(data), rows, fast)
        recid[fast[ok]], trx[fast[ok]] = rid[ok], tid[ok]
        taken[fast[ok]] = True          # the others (empty, signs, blanks): parsed below
    base = rows.base
    for r in np.flatnonzero(~taken)[:]:
        if r < first or r in rows.errors:
            continue
        raw = bytes(data[int(rows.starts[r]) - base:int(rows.ends[r]) - base])
        fields = parse_row(raw, int(rows.starts[r]), raw.endswith(b"\n"), rows.fields.get(r))
        if isinstance(fields, DecodeError):
            continue
        try:
            rid, tid = _int_field(fields[0], "RECID"), _int_field(fields[2], "TRXID")
        except DecodeError:
            continue
        if rid is not None and tid is not None:
            recid[r], trx[r] = rid, tid
    # the next row of the same transaction, for every row that waits for it
    order = np.lexsort((np.arange(n), trx))
    nxt = np.full(n, -1, dtype=np.int64)
    same = trx[order[1:]] == trx[order[:-1]]
    nxt[order[:-1][same]] = order[1:][same]
    waits = (trx >= 0) & np.isin(recid, (L.UPDATE_BEFOREIMAGE, L.DDL)) & (nxt >= 0)
    blocked = np.zeros(n + 1, dtype=np.int64)
    w = np.flatnonzero(waits)
    np.add.at(blocked, w + 1, 1)
    np.add.at(blocked, nxt[w] + 1, -1)
    allowed = np.cumsum(blocked[:n]) == 0          # a cut before row c: no pairing spans it
    allowed[:first + 1] = False
    index = np.arange(n, dtype=np.int64) - first   # record_index: rows after the header
    ranges = split_ranges(rows.starts, len(data), target, allowed, index)
    out = []
    for a, b, i in ranges:
        r = {"start": a, "end": b, "index": i}
        if a > 0:
            r["split"] = {"header": False}
        out.append(r)
    return out


def _split_ids(buf: np.ndarray, rows: Rows, which: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """RECID and TRXID (fields 1 and 3) of the simple rows ``which``, read between their
    commas and converted by digit arithmetic: all ``split`` needs, without parsing the rows'
    other fields (the decode parses them all; here they cost half a decode). Returns the
    two int64 vectors (-1 for an empty field) and where both fields are empty or 1-18
    plain digits (the others, rare, go through the careful parse)."""
    cpos = rows.commas if rows.commas is not None else np.flatnonzero(buf == _COMMA)
    s = rows.starts[which] - rows.base
    k = np.searchsorted(cpos, s)        # a simple row has its 7 commas before its end
    c0, c1, c2 = cpos[k], cpos[k + 1], cpos[k + 2]

    def number(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Digits in [a, b) as int64 (-1 for an empty field: no transaction); ok where
        empty or 1-18 plain digits."""
        length = b - a
        ok = (length >= 0) & (length <= 18)
        value = np.full(len(a), -1, dtype=np.int64)
        has = np.flatnonzero(ok & (length > 0))
        if not len(has):
            return value, ok
        a, length = a[has], length[has]
        acc = np.zeros(len(has), dtype=np.int64)
        good = np.ones(len(has), dtype=bool)
        # the fields of one length at a time, as a matrix of their digits (a field's length
        # takes few values: one gather and one product per length, not a pass per digit),
        # ``_DIGIT_BLOCK`` fields at a time (the matrix's memory stays bounded)
        for width in np.unique(length).tolist():
            same = np.flatnonzero(length == width)
            powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
            for lo in range(0, len(same), _DIGIT_BLOCK):
                sel = same[lo:lo + _DIGIT_BLOCK]
                digits = buf[a[sel, None] + np.arange(width)].astype(np.int64) - 0x30
                good[sel] = ((digits >= 0) & (digits <= 9)).all(axis=1)
                acc[sel] = digits @ powers
        value[has] = np.where(good, acc, -1)
        ok[has[~good]] = False
        return value, ok

    rid, ok_r = number(s, c0)
    tid, ok_t = number(c1 + 1, c2)
    return rid, tid, ok_r & ok_t


_INT_RE = r"^-?[0-9]{1,18}$"
_HEX_VALUE = np.full(256, -1, dtype=np.int16)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX_VALUE[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX_VALUE[_c] = 10 + _i
_NOT_HEX = _HEX_VALUE < 0


_DIGIT = np.zeros(256, dtype=bool)
_DIGIT[0x30:0x3A] = True


def _plain_ints(text: pa.Array) -> np.ndarray | None:
    """When every value of ``text`` is empty or 1 to 18 ASCII digits (no sign, no blank),
    the mask of the empty ones; else None (the general checks decide)."""
    if text.null_count:
        return None
    off, chars = _text_buffers(text)
    lengths = np.diff(off)
    if not _DIGIT[chars].all() or (lengths > 18).any():
        return None
    return lengths == 0


def _hex_only(text: pa.Array) -> np.ndarray:
    """Per string of ``text``: every byte a hex digit (``^[0-9A-Fa-f]*$``; empty: true,
    null: false), by one table lookup over the column's bytes."""
    n = len(text)
    width = np.int64 if pa.types.is_large_string(text.type) else np.int32
    offsets = np.frombuffer(text.buffers()[1], dtype=width, count=n + 1,
                            offset=text.offset * np.dtype(width).itemsize).astype(np.int64)
    ok = np.ones(n, dtype=bool)
    if text.null_count:
        ok &= ~text.is_null().to_numpy(zero_copy_only=False)
    if text.buffers()[2] is None or offsets[-1] == offsets[0]:
        return ok
    raw = np.frombuffer(text.buffers()[2], dtype=np.uint8)[offsets[0]:offsets[-1]]
    bad = np.flatnonzero(_NOT_HEX[raw])
    if len(bad):
        ok[np.searchsorted(offsets[1:] - offsets[0], bad, side="right")] = False
    return ok


def _fast_columns(data, rows: Rows, which: np.ndarray) -> dict | None:
    """The fields of the simple rows ``which`` as Arrow columns, parsed by ``pyarrow.csv``
    in one call (numbers, hex as text; ``rows`` = their row numbers)."""
    if not len(which):
        return None
    body = byte_runs(data, rows.starts[which] - rows.base, rows.ends[which] - rows.base)
    # every row must end with a newline for the reader to see it as one row
    if not body.endswith(b"\n"):
        body += b"\n"
    table = _read_fields(body)
    if table is None or table.num_rows != len(which):
        return None
    return _columns_of(table, which)


def _columns_of(table: pa.Table, which: np.ndarray) -> dict:
    """The parsed fields (``_read_fields``) of the rows ``which``: numbers checked and
    converted, LOGADDR and DATA as text."""
    out = {"rows": which}
    for name in ("RECID", "TRXID", "RELID", "FLAGS"):
        text = table.column(name).combine_chunks()
        plain = _plain_ints(text)
        if plain is not None:           # every value empty or 1-18 digits: nothing to trim
            empty = plain
            out[name + "_ok"] = np.ones(len(text), dtype=bool)
            if empty.any():
                vals = pc.cast(pc.if_else(pa.array(empty), pa.scalar("0"), text), pa.int64())
                out[name] = pc.if_else(pa.array(empty), pa.nulls(len(text), pa.int64()), vals)
            else:
                out[name] = pc.cast(text, pa.int64())
            continue
        text = pc.utf8_trim(text, " \\r")
        empty = pc.equal(pc.utf8_length(text), 0)
        ok = pc.or_(pc.match_substring_regex(text, _INT_RE), empty)
        out[name + "_ok"] = ok.to_numpy(zero_copy_only=False)
        safe = pc.if_else(pc.and_(ok, pc.invert(empty)), text, pa.scalar("0"))
        vals = pc.cast(safe, pa.int64())
        out[name] = pc.if_else(empty, pa.nulls(len(text), pa.int64()), vals)
    for name in ("LOGADDR", "DATA"):
        out[name] = pc.utf8_trim(table.column(name).combine_chunks(), "\\r")
    return out


# ----------------------------------------------------------------- records -> events

@dataclass
class _Rec:
    """A structurally valid record (it takes part in its transaction's pairing)."""
    row: int
    offset: int
    index: int
    recid: int
    trx: str
    relid: int | None
    flags: int
    logaddr: str
    payload: bytes | None
    raw: bytes


class _Archive:
    """One archive (or range): frame, parse the simple rows in bulk, decode row images per
    table in batches, pair per transaction with array neighbours; the rows and transactions
    that need it go through the careful per-record path (``_StateMachine``), whose rules are
    the module docstring's."""

    def __init__(self, data, ctx: DecodeContext, sink: EventSink) -> None:
        self.data, self.ctx, self.sink = data, ctx, sink
        self.base = ctx.offset
        self.catalog: Catalog = ctx.catalog
        self.codecs: dict[str, RowCodec | None] = {}

    def run(self) -> None:
        data = self.data
        expect_header = not (self.ctx.split and self.ctx.split.get("header") is False)
        clean = clean_frame(data, self.base, expect_header)
        if clean is not None:                       # the usual archive: every row simple
            rows, header, table = clean
            first = 1 if expect_header else 0
            self.index0 = self.ctx.index - first
            self._finish(rows, [], _columns_of(table, np.arange(first, len(rows.starts))))
            return
        rows, header = frame_rows(data, self.base, expect_header)
        n = len(rows.starts)
        first = 0
        if expect_header and n:
            first = 1
            if header is None:
                first = 0
                self._quarantine(rows, 0, self.ctx.index, Corrupt(
                    "missing or bad CSV header", offset=int(rows.starts[0]),
                    expected=",".join(L.HEADER),
                    actual=self._raw(rows, 0).decode("utf-8", "replace").rstrip("\r\n")[:80]))
                careful = list(range(1, n))
                self.index0 = self.ctx.index
                self._finish(rows, careful, None)
                return
        self.index0 = self.ctx.index - first           # record_index of row r
        simple = rows.simple.copy()
        simple[:first] = False
        for r in rows.errors:
            simple[r] = False
        fast = np.flatnonzero(simple)
        cols = _fast_columns(data, rows, fast) if len(fast) else None
        if cols is None:
            fast = fast[:0]
        rest = np.ones(n, dtype=bool)
        rest[:first] = False
        rest[fast] = False
        self._finish(rows, np.flatnonzero(rest).tolist(), cols)

    # ---------------------------------------------------------------- helpers
    def _raw(self, rows: Rows, r: int) -> bytes:
        return bytes(self.data[rows.starts[r] - self.base:rows.ends[r] - self.base])

    def _quarantine(self, rows: Rows, r: int, index: int, err: DecodeError, **fields) -> None:
        at = int(rows.starts[r])
        self.sink.quarantine(err.located(offset=at, record_index=index), at, index,
                             self._raw(rows, r), **fields)

    def codec(self, relid) -> RowCodec | None:
        tid = "" if relid is None else str(relid)
        if tid not in self.codecs:
            table = self.catalog.table(tid)
            self.codecs[tid] = RowCodec(table) if table is not None else None
        return self.codecs[tid]

    # ---------------------------------------------------------------- the whole flow
    def _finish(self, rows: Rows, careful: list[int], cols: dict | None) -> None:
        size = len(self.data)
        complete_end = self.data[-1:] == b"\n" if size else True
        fast = self._fast_structure(rows, cols) if cols is not None else None
        if fast is not None and fast["rest"]:
            careful = sorted(set(careful) | set(fast["rest"]))
        machine_recs: list[_Rec] = []
        for r in careful:
            rec = self._structure(rows, r, complete_end)
            if rec is not None:
                machine_recs.append(rec)
        careful_trx = {rec.trx for rec in machine_recs}
        if fast is not None:
            careful_trx |= self._decode_fast(fast)
            take = np.ones(len(fast["row"]), dtype=bool)
            if careful_trx:
                # transactions as numbers (fast rows' TRXIDs have at most 18 digits)
                bad = [int(t) for t in careful_trx]
                bad = np.array([t for t in bad if abs(t) < 10 ** 18], dtype=np.int64)
                take = ~np.isin(fast["trx_int"], bad)
            if not take.all():
                for k in np.flatnonzero(~take).tolist():
                    machine_recs.append(self._rec_of(fast, k, rows))
            self._emit_fast(rows, fast, take)
        machine_recs.sort(key=lambda rec: rec.row)
        _StateMachine(self).run(machine_recs)

    def _structure(self, rows: Rows, r: int, complete_end: bool) -> _Rec | None:
        """The careful parse of one row: a terminal row (skip, quarantine) or a record."""
        index = self.index0 + r
        offset = int(rows.starts[r])
        raw = self._raw(rows, r)
        if r in rows.errors:
            self._quarantine(rows, r, index, rows.errors[r])
            return None
        complete = raw.endswith(b"\n")
        fields = parse_row(raw, offset, complete, rows.fields.get(r))
        if isinstance(fields, DecodeError):
            self.sink.quarantine(fields.located(offset=offset, record_index=index), offset, index, raw)
            return None
        try:
            recid = _int_field(fields[0], "RECID")
            flags = _int_field(fields[5], "FLAGS") or 0
            if recid == L.EMPTY:
                self.sink.add("skip", offset, index, rule="soliddb_empty_padding")
                return None
            trxid = _int_field(fields[2], "TRXID")
            relid = _int_field(fields[4], "RELID")
            logaddr_b = _hex_field(fields[6], "LOGADDR")
            if logaddr_b is None or len(logaddr_b) != L.LOGADDR_BYTES:
                raise Corrupt("LOGADDR must be 20 bytes", path="LOGADDR", expected=L.LOGADDR_BYTES,
                              actual=None if logaddr_b is None else len(logaddr_b))
            payload = _hex_field(fields[7], "DATA")
        except DecodeError as exc:
            self.sink.quarantine(exc.located(offset=offset, record_index=index), offset, index, raw)
            return None
        logaddr = hexpos(logaddr_b, L.LOGADDR_HEX)
        trx = None if trxid is None else str(trxid)
        try:
            if recid not in L.RECNAMES:
                raise UnknownRecordType("unknown RECID", path="RECID",
                                        expected="/".join(map(str, sorted(L.RECNAMES))), actual=recid)
            if trx is None:
                raise Corrupt("record without TRXID", path="TRXID", expected="a transaction id",
                              actual="NULL")
        except DecodeError as exc:
            self.sink.quarantine(exc.located(offset=offset, record_index=index), offset, index, raw,
                                 trx_id=trx, position=logaddr)
            return None
        return _Rec(r, offset, index, recid, trx, relid, flags, logaddr, payload, raw)

    # ---------------------------------------------------------------- the fast path
    def _fast_structure(self, rows: Rows, cols: dict) -> dict:
        """The fast rows' structure as arrays; rows that are not plain go careful."""
        r = cols["rows"]
        recid = cols["RECID"].fill_null(-1).to_numpy(zero_copy_only=False)
        rec_null = _nulls(cols["RECID"])
        flags = cols["FLAGS"].fill_null(0).to_numpy(zero_copy_only=False)
        early_ok = cols["RECID_ok"] & cols["FLAGS_ok"]
        skip = early_ok & ~rec_null & (recid == L.EMPTY)
        logaddr = cols["LOGADDR"]
        log_ok, upper = _logaddrs(logaddr)
        data_ok, hex_all = _hex_payloads(cols["DATA"])
        trx_null = _nulls(cols["TRXID"])
        known_recid = np.isin(recid, list(L.RECNAMES)) & ~rec_null
        plain = (early_ok & ~skip & cols["TRXID_ok"] & cols["RELID_ok"] & log_ok & data_ok
                 & known_recid & ~trx_null)
        rest = ~skip & ~plain
        keep = np.flatnonzero(plain)
        out = {"rows": r, "skip": skip, "pos": keep, "rest": r[rest].tolist()}
        if not len(keep):
            out.update(row=np.zeros(0, np.int64), trx_int=np.zeros(0, np.int64),
                       recid=np.zeros(0, np.int64), img={})
            return out
        trx_int = cols["TRXID"].fill_null(0).to_numpy(zero_copy_only=False)[keep]
        relid = cols["RELID"].fill_null(-1).to_numpy(zero_copy_only=False)[keep]
        rel_null = _nulls(cols["RELID"])[keep]
        if hex_all is not None:                       # every DATA read at once already
            payload, pay_start, pay_end = hex_all
            pay_start, pay_end = pay_start[keep], pay_end[keep]
        else:                                         # DATA hex -> bytes of the kept rows
            dtext = cols["DATA"].take(pa.array(keep))
            hex_off, hex_raw = _text_buffers(dtext)
            nib = _HEX_VALUE[hex_raw].astype(np.uint8)
            payload = (nib[0::2] << 4) | nib[1::2]
            pay_start, pay_end = hex_off[:-1] // 2, hex_off[1:] // 2
        if upper is not None:                          # LOGADDR upper-cased at once already
            n = len(keep)
            position = pa.StringArray.from_buffers(
                n, pa.py_buffer(np.arange(0, 40 * (n + 1), 40, dtype=np.int32)),
                pa.py_buffer(np.ascontiguousarray(upper(keep))))
        else:
            position = pc.utf8_upper(logaddr.take(pa.array(keep)))
        out.update({
            "row": r[keep], "offset": rows.starts[r[keep]], "index": self.index0 + r[keep],
            "recid": recid[keep], "flags": flags[keep], "trx_int": trx_int,
            "trx": pc.cast(pa.array(trx_int), pa.string()), "relid": relid,
            "rel_null": rel_null, "logaddr": position, "has_data": pay_end > pay_start,
            "payload": payload, "pay_start": pay_start, "pay_end": pay_end,
        })
        return out

    def _relid(self, fast: dict, k: int) -> int | None:
        return None if fast["rel_null"][k] else int(fast["relid"][k])

    def _rec_of(self, fast: dict, k: int, rows: Rows) -> _Rec:
        a, b = fast["pay_start"][k], fast["pay_end"][k]
        r = int(fast["row"][k])
        return _Rec(r, int(fast["offset"][k]), int(fast["index"][k]), int(fast["recid"][k]),
                    str(int(fast["trx_int"][k])), self._relid(fast, k), int(fast["flags"][k]),
                    fast["logaddr"][k].as_py(),
                    fast["payload"][a:b].tobytes() if fast["has_data"][k] else None,
                    self._raw(rows, r))

    def _decode_fast(self, fast: dict) -> set:
        """Row images per table in batches; returns the transactions that need the careful
        path (a record of theirs failed somewhere)."""
        bad_trx: set = set()
        n = len(fast["row"])
        fast["img"] = {}
        if not n:
            return bad_trx
        recid = fast["recid"]
        is_row = np.isin(recid, (L.INSERT, L.UPDATE, L.DELETE_FULL, L.UPDATE_BEFOREIMAGE))
        ok = np.ones(n, dtype=bool)
        relid = fast["relid"]
        rel_null = fast["rel_null"]
        ok &= ~(is_row & ~fast["has_data"])
        row_idx = np.flatnonzero(is_row & ok)
        for rid in np.unique(relid[row_idx]).tolist():
            members = row_idx[(relid[row_idx] == rid) & ~rel_null[row_idx]] if rid != -1 \
                else row_idx[rel_null[row_idx] | (relid[row_idx] == -1)]
            codec = self.codec(None if rid == -1 and rel_null[members].all() else rid)
            if codec is None:
                ok[members] = False
                continue
            good, image = _table_images(codec, fast["payload"], fast["pay_start"],
                                        fast["pay_end"], members)
            ok[members[~good]] = False
            fast["img"][rid] = (codec, members[good], image)
        # DDL and SQL records: rare, decoded one by one
        ddl = {}
        for k in np.flatnonzero(np.isin(recid, (L.DDL, L.SQL))).tolist():
            if not fast["has_data"][k]:
                ok[k] = False
                continue
            raw = fast["payload"][fast["pay_start"][k]:fast["pay_end"][k]].tobytes()
            try:
                ddl[k] = decode_ddl(raw) if recid[k] == L.DDL else decode_sql(raw)
            except DecodeError:
                ok[k] = False
        fast["ddl"] = ddl
        fast["ok"] = ok
        for t in np.unique(fast["trx_int"][~ok]).tolist():
            bad_trx.add(str(t))
        return bad_trx

    def _emit_fast(self, rows: Rows, fast: dict, take: np.ndarray) -> None:
        """Pairing with array neighbours within each transaction, then every row of the fast
        path (skips too) in one ``add_columns`` call in archive order, so that the sink need
        not sort them."""
        n = len(fast["row"])
        sink = self.sink
        recid, row = fast["recid"], fast["row"]
        K_SKIP, K_BEGIN, K_COMMIT, K_CHANGE = 0, 1, 2, 3
        kind = np.full(n, -1, dtype=np.int8)           # per fast row: the row it gives
        paired_bi = paired_ddl = bi = np.zeros(n, dtype=bool)
        nx = np.zeros(n, dtype=np.int64)
        if n and take.any():
            sel = np.flatnonzero(take)
            trx_int = fast["trx_int"]
            order = sel[np.lexsort((row[sel], trx_int[sel]))]
            nxt = np.full(n, -1, dtype=np.int64)
            same = trx_int[order[1:]] == trx_int[order[:-1]]
            nxt[order[:-1][same]] = order[1:][same]
            relid = fast["relid"]
            has_next = nxt >= 0
            nx = np.where(has_next, nxt, 0)
            bi = recid == L.UPDATE_BEFOREIMAGE
            paired_bi = take & bi & has_next & (recid[nx] == L.UPDATE) & (relid[nx] == relid)
            consumed = np.zeros(n, dtype=bool)
            consumed[nx[paired_bi]] = True
            ddl_rec = take & (recid == L.DDL)
            paired_ddl = ddl_rec & has_next & (recid[nx] == L.SQL)
            consumed[nx[paired_ddl]] = True
            live = take & ~consumed
            kind[live & (recid == L.TRX_START)] = K_BEGIN
            kind[live & (recid == L.COMMIT)] = K_COMMIT
            change = live & (np.isin(recid, (L.INSERT, L.DELETE_FULL, L.UPDATE, L.DDL, L.SQL))
                             | paired_bi)
            kind[change] = K_CHANGE
        # every row of the fast path, in archive order (positions in the parsed rows)
        N = len(fast["rows"])
        at_pos = np.full(N, -1, dtype=np.int64)         # position -> fast row (-1: a skip)
        at_pos[fast["pos"]] = np.arange(n)
        emitted = fast["skip"].copy()
        emitted[fast["pos"][kind >= 0]] = True
        where = np.flatnonzero(emitted)
        if len(where):
            k = at_pos[where]
            is_skip = k < 0
            kk = np.where(is_skip, 0, k)
            r_all = fast["rows"][where]
            kinds = np.where(is_skip, K_SKIP, kind[kk] if n else 0)
            self._bulk(rows, fast, r_all, kk, is_skip, kinds,
                       paired_bi[kk] if n else is_skip & False,
                       paired_ddl[kk] if n else is_skip & False, nx)
        if not n or not take.any():
            return
        offsets, index, logaddr = fast["offset"], fast["index"], fast["logaddr"]
        # a before image whose next record of the transaction is not its update
        for k in np.flatnonzero(take & bi & ~paired_bi).tolist():
            sink.quarantine(Corrupt("UPDATE_BEFOREIMAGE not followed by its UPDATE",
                                    offset=int(offsets[k]), path="RECID 5"),
                            int(offsets[k]), int(index[k]), self._raw_row(fast, k),
                            trx_id=str(int(fast["trx_int"][k])), position=logaddr[k].as_py())

    def _bulk(self, rows: Rows, fast: dict, r_all, k, is_skip, kinds, paired_bi, paired_ddl,
              nx) -> None:
        """The rows ``r_all`` (parsed-row numbers, rising) in one ``add_columns`` call: skips
        (``is_skip``) and the fast rows ``k`` of kind ``kinds`` (begin, commit, change)."""
        m = len(r_all)
        kind_text = pa.array(["skip", "begin", "commit", "change"]).take(pa.array(kinds))
        offsets = rows.starts[r_all]
        index = self.index0 + r_all
        if not (~is_skip).any():
            self.sink.add_columns(kind_text, offsets, index, 1, rule="soliddb_empty_padding")
            return
        recid = fast["recid"][k]
        kidx = pa.array(k, mask=is_skip)
        trx = fast["trx"].take(kidx)
        pos = fast["logaddr"].take(kidx)
        change = kinds == 3
        commit = kinds == 2
        begin = kinds == 1
        pairs = change & (paired_bi | paired_ddl)
        n_records = np.where(pairs, 2, 1).astype(np.int32)

        def only(mask, arr):               # arr where mask, else null
            if mask.all():
                return arr
            if not mask.any():
                return None
            return pc.if_else(pa.array(mask), arr, pa.nulls(m, arr.type))

        # ops: c d u ddl
        op_code = np.select([recid == L.INSERT, recid == L.DELETE_FULL,
                             (recid == L.UPDATE) | (recid == L.UPDATE_BEFOREIMAGE)], [0, 1, 2], 3)
        op = pa.array(["c", "d", "u", "ddl"]).take(pa.array(op_code, mask=~change))
        # tables: by RELID (DDL of a RELID the catalog does not know: names null)
        rel = fast["relid"][k]
        rel_null = fast["rel_null"][k] | ~change
        ids, schemas, names = [], [], []
        code = np.zeros(m, dtype=np.int64)
        for j, rid in enumerate(np.unique(rel[~rel_null]).tolist()):
            tid = str(rid)
            table = self.catalog.table(tid)
            ids.append(tid)
            schemas.append(table.schema if table else None)
            names.append(table.name if table else None)
            code[rel == rid] = j
        tcode = pa.array(code, mask=rel_null)
        # images: all tables' images in one array, by rank
        imgs, gidx, base = [], np.full(len(fast["row"]), -1, dtype=np.int64), 0
        for rid, (codec, members, image) in fast["img"].items():
            gidx[members] = base + np.arange(len(members))
            imgs.append(image)
            base += len(members)
        own = gidx[k]
        after_src = np.where(paired_bi, gidx[nx[k]], own)
        has_after = change & ((recid == L.INSERT) | (recid == L.UPDATE) | paired_bi)
        has_before = change & ((recid == L.DELETE_FULL) | paired_bi)
        before = after = None
        if imgs:
            # taken from the tables' images as chunks (no concatenated copy of them all)
            all_img = pa.chunked_array(imgs) if len(imgs) > 1 else imgs[0]
            if has_after.any():
                after = _one_array(all_img.take(pa.array(after_src, mask=~has_after)))
            if has_before.any():
                before = _one_array(all_img.take(pa.array(own, mask=~has_before)))
        # DDL texts (rare)
        ddl = None
        dd = np.flatnonzero(change & ((recid == L.DDL) | (recid == L.SQL)))
        if len(dd):
            texts = []
            for i in dd.tolist():
                kk = int(k[i])
                if recid[i] == L.SQL:
                    texts.append(fast["ddl"][kk])
                elif paired_ddl[i]:
                    texts.append(fast["ddl"][int(nx[kk])])
                else:
                    logrecid, info = fast["ddl"][kk]
                    texts.append(f"{L.DDL_OPS.get(logrecid, f'DDL {logrecid}')} {info}")
            slot = np.full(m, -1, dtype=np.int64)
            slot[dd] = np.arange(len(dd))
            ddl = pa.array(texts, pa.string()).take(pa.array(slot, mask=slot < 0))
        flag = None
        off = begin & ((fast["flags"][k] & L.FLAG_CAPTURE_OFF) != 0)
        if off.any():
            flag = pa.array(["capture_off"]).take(pa.array(np.zeros(m, np.int64), mask=~off))
        self.sink.add_columns(
            kind_text, offsets, index, n_records,
            rule=(pa.array(["soliddb_empty_padding"]).take(pa.array(np.zeros(m, np.int64),
                                                                     mask=~is_skip))
                  if is_skip.any() else None),
            trx_id=trx, position=pos, trx_order=only(change, pos), flag=flag,
            trx_end=only(commit, pa.repeat(pa.scalar("commit"), m)) if commit.any() else None,
            commit_position=only(commit, pos), op=op,
            table_id=pa.array(ids, pa.string()).take(tcode) if ids else None,
            schema_name=pa.array(schemas, pa.string()).take(tcode) if ids else None,
            table_name=pa.array(names, pa.string()).take(tcode) if ids else None,
            before=before, after=after, ddl=ddl)

    def _raw_row(self, fast: dict, k: int) -> bytes:
        a = int(fast["offset"][k]) - self.base
        end = self.data.find(b"\n", a)
        return bytes(self.data[a:len(self.data) if end < 0 else end + 1])


def _one_array(arr) -> pa.Array:
    """An array, or a chunked array's single chunk as it is (``combine_chunks`` copies)."""
    if isinstance(arr, pa.ChunkedArray):
        return arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    return arr


def _nulls(arr: pa.Array) -> np.ndarray:
    if not arr.null_count:
        return np.zeros(len(arr), dtype=bool)
    return arr.is_null().to_numpy(zero_copy_only=False)


def _text_buffers(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string array's offsets (int64, from 0) and the bytes of its values."""
    n = len(text)
    width = np.int64 if pa.types.is_large_string(text.type) else np.int32
    off = np.frombuffer(text.buffers()[1], dtype=width, count=n + 1,
                        offset=text.offset * np.dtype(width).itemsize).astype(np.int64)
    data = text.buffers()[2]
    chars = np.frombuffer(data, dtype=np.uint8)[off[0]:off[-1]] if data is not None \
        else np.zeros(0, np.uint8)
    return off - off[0], chars


_HEX_CHUNK = 1 << 23             # hex digits converted at a time (the bytes objects stay small)


def _unhex(chars: np.ndarray) -> np.ndarray | None:
    """The bytes written by ``chars`` (hex digits, even count) as a new array, or None when
    a byte is no hex digit. In chunks: a bytes object of a whole archive's DATA is fresh
    memory (a page fault per 4 KB) on every call."""
    out = np.empty(len(chars) // 2, dtype=np.uint8)
    try:
        for i in range(0, len(chars), _HEX_CHUNK):
            out[i // 2:(i + _HEX_CHUNK) // 2] = np.frombuffer(
                binascii.unhexlify(chars[i:i + _HEX_CHUNK]), dtype=np.uint8)
    except (binascii.Error, ValueError):
        return None
    return out


def _logaddrs(text: pa.Array) -> tuple[np.ndarray, Callable | None]:
    """Per row: LOGADDR is 40 hex digits; and, when every row's is either that or empty
    (padding records), a function giving the upper-cased LOGADDRs of rows (all good) as an
    (m, 40) array (None: the caller upper-cases the rows it keeps)."""
    n = len(text)
    if n and not text.null_count:
        off, chars = _text_buffers(text)
        lengths = np.diff(off)
        full = lengths == L.LOGADDR_HEX
        m = int(full.sum())
        if len(chars) == L.LOGADDR_HEX * m and (full | (lengths == 0)).all() \
                and _unhex(chars) is not None:
            mat = chars.reshape(m, L.LOGADDR_HEX)
            rank = None if m == n else np.cumsum(full) - 1

            def upper(rows: np.ndarray) -> np.ndarray:
                out = mat[rows if rank is None else rank[rows]]
                # hex digits: the lower-case letters are the bytes with 0x40 and 0x20 set
                for i in range(0, len(out), 1 << 16):
                    part = out[i:i + (1 << 16)]
                    part &= ~((part & 0x40) >> 1)
                return out
            return full, upper
    ok = pc.equal(pc.utf8_length(text), L.LOGADDR_HEX).to_numpy(zero_copy_only=False) \
        & _hex_only(text)
    return ok, None


def _hex_payloads(text: pa.Array):
    """Per row: DATA is an even number of hex digits; and, when every row's is, all of them
    as bytes at once: (payload, start, end) per row (None: the caller converts the rows it
    keeps)."""
    n = len(text)
    if n and not text.null_count:
        off, chars = _text_buffers(text)
        if not (off & 1).any():
            payload = _unhex(chars)
            if payload is not None:
                half = off // 2
                return np.ones(n, dtype=bool), (payload, half[:-1], half[1:])
    dlen = pc.utf8_length(text).to_numpy(zero_copy_only=False)
    return (dlen % 2 == 0) & _hex_only(text), None


def _table_images(codec: RowCodec, payload: np.ndarray, pay_start: np.ndarray,
                  pay_end: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """(ok mask, JSON images of the ok members) of one table's DATA values, decoded column
    by column for all rows at once (the layout of ``RowCodec.decode``)."""
    n = len(members)
    start = pay_start[members].astype(np.int64)
    end = pay_end[members].astype(np.int64)
    pos = start.copy()
    ok = np.ones(n, dtype=bool)
    padded = payload if len(payload) >= 16 else np.concatenate((payload, np.zeros(16, np.uint8)))
    arrays = []
    enc = codec.table.encoding or DEFAULT_ENCODING
    # the values at every byte offset (unaligned views). A value read for a row that is not
    # ok, or for a null, may be cut at the end (read at an earlier offset): it is masked.
    views = {}

    def be(at, width, signed=True):
        dt = {4: ">i4", 8: ">i8", 2: ">u2"}[width] if signed else {4: ">u4", 2: ">u2"}[width]
        view = views.get(dt)
        if view is None:
            view = views[dt] = np.ndarray((len(padded) - width + 1,), dtype=dt, buffer=padded,
                                          strides=(1,))
        at = np.minimum(np.where(ok, at, 0), len(view) - 1)
        return view[at].astype(dt.replace(">", "="))

    for col in codec.table.columns:
        t = col.type
        ok &= pos + 4 <= end
        length = be(pos, 4).astype(np.int64)
        pos = pos + 4
        null = ok & (length == L.NULL_LEN)
        if not col.nullable:
            ok &= ~null
        blob = ok & (length == L.BLOB_LEN)
        if t != "BLOB":
            ok &= ~blob
        ok &= (length >= 0) | null | blob
        vlen = np.where(null, 0, np.where(blob, 8, length))
        ok &= pos + vlen <= end
        vpos = np.where(ok, pos, 0)
        pos = pos + np.where(ok, vlen, 0)
        value_ok = ok & ~null
        if t in ("TINYINT", "SMALLINT", "INTEGER"):
            ok &= null | (length == 4)
            arr = pa.array(be(vpos, 4).astype(np.int64), mask=~(ok & ~null))
        elif t == "BIGINT":
            ok &= null | (length == 8)
            arr = pa.array(be(vpos, 8), mask=~(ok & ~null))
        elif t in ("REAL", "FLOAT", "DOUBLE"):
            ok &= null | (length == 8)
            v = be(vpos, 8).view(np.float64)
            if t == "REAL":
                with np.errstate(invalid="ignore", over="ignore"):
                    too_big = np.isfinite(v) & (np.abs(v.astype(np.float32)) == np.inf)
                ok &= null | ~too_big
            arr = pa.array(v, mask=~(ok & ~null))
        elif t in ("DATE", "TIME", "TIMESTAMP"):
            ok &= null | (length == L.DATETIME_LEN)
            rows11 = np.lib.stride_tricks.as_strided(
                padded, shape=(len(padded) - L.DATETIME_LEN + 1, L.DATETIME_LEN),
                strides=(1, 1), writeable=False)
            raw = rows11[np.minimum(np.where(ok & ~null, vpos, 0), len(rows11) - 1)]
            when, good = _datetimes(raw, t)
            ok &= null | good
            mask = ~(ok & ~null)
            if t == "DATE":
                arr = pa.array(when.astype("datetime64[D]"), pa.date32(), mask=mask)
            elif t == "TIME":
                us = (when - when.astype("datetime64[D]")).astype("timedelta64[us]").astype(np.int64)
                arr = pa.array(us, pa.time64("us"), mask=mask)
            else:
                arr = pa.array(when, pa.timestamp("us"), mask=mask)
        elif t == "DECIMAL":
            text, bad = vtext(payload, np.where(value_ok, vpos, 0), np.where(value_ok, vlen, 0),
                              "ascii")
            ok &= null | ~bad
            arr, good = _decimals(text, col.scale or 0)
            ok &= null | good
            arr = pc.if_else(pa.array(ok & ~null), arr, pa.nulls(n, arr.type))
        elif t in ("CHAR", "VARCHAR", "CLOB"):
            text, bad = vtext(payload, np.where(value_ok, vpos, 0), np.where(value_ok, vlen, 0), enc)
            ok &= null | ~bad
            arr = pc.if_else(pa.array(ok & ~null), text, pa.nulls(n, pa.string()))
        elif t == "BLOB":
            if (blob & ok).any() and ((~blob & ~null & ok).any()):
                ok &= ~(~blob & ~null)       # a mix of ids and bytes: the careful path renders it
            if (blob & ok).any():
                arr = pa.array(be(vpos, 8), mask=~(ok & blob))
            else:
                arr = _binary_column(payload, vpos, vlen, ok & ~null)
        else:                                 # BINARY, VARBINARY
            arr = _binary_column(payload, vpos, vlen, ok & ~null)
        arrays.append(arr)
    ok &= pos == end
    good = pa.array(ok)
    image = render_rows(codec.table.columns, [a.filter(good) for a in arrays], n=int(ok.sum()))
    return ok, image


def _binary_column(payload: np.ndarray, pos: np.ndarray, length: np.ndarray, valid: np.ndarray) -> pa.Array:
    lens = np.where(valid, length, 0).astype(np.int64)
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    idx = np.repeat(np.where(valid, pos, 0) - offsets[:-1], lens) + np.arange(offsets[-1])
    body = payload[idx] if len(idx) else np.zeros(0, np.uint8)
    validity = pa.array(valid).buffers()[1]
    return pa.BinaryArray.from_buffers(pa.binary(), len(lens),
                                       [validity, pa.py_buffer(offsets.astype(np.int32)),
                                        pa.py_buffer(body.tobytes())],
                                       null_count=int((~valid).sum()))


def _datetimes(raw: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """The 11-byte DATE/TIME/TIMESTAMP values (year u2, month .. second u1, fraction u4 ns)
    as datetime64[us] and the rows ``codecs.make_*`` would accept."""
    year = (raw[:, 0].astype(np.int64) << 8) | raw[:, 1]
    month, day, hour, minute, second = (raw[:, k].astype(np.int64) for k in range(2, 7))
    frac = ((raw[:, 7].astype(np.int64) << 24) | (raw[:, 8].astype(np.int64) << 16)
            | (raw[:, 9].astype(np.int64) << 8) | raw[:, 10])
    good = (frac <= 999_999_999) & (hour < 24) & (minute < 60) & (second < 60)
    if kind == "TIME":
        y, mo, d = np.full_like(year, 1970), np.ones_like(month), np.ones_like(day)
    else:
        y, mo, d = year, month, day
        good &= (y >= 1) & (y <= 9999) & (mo >= 1) & (mo <= 12) & (d >= 1)
    y_, mo_, d_ = np.where(good, y, 1970), np.where(good, mo, 1), np.where(good, d, 1)
    month_start = ((y_ - 1970) * 12 + (mo_ - 1)).astype("datetime64[M]")
    days_in = ((month_start + 1).astype("datetime64[D]") - month_start.astype("datetime64[D]")
               ).astype(np.int64)
    good &= d_ <= days_in
    if kind == "DATE":
        h, mi, se, us = 0, 0, 0, 0
    else:
        h, mi, se, us = hour, minute, second, frac // 1000
    date = month_start.astype("datetime64[D]") + (d_ - 1).astype("timedelta64[D]")
    when = (date.astype("datetime64[us]") + (np.where(good, h, 0) * 3_600_000_000
            + np.where(good, mi, 0) * 60_000_000 + np.where(good, se, 0) * 1_000_000
            + np.where(good, us, 0)).astype("timedelta64[us]"))
    return when, good


def _decimals(text: pa.Array, scale: int) -> tuple[pa.Array, np.ndarray]:
    """DECIMAL strings with at most ``scale`` decimals and 30 digits, as decimal128(38, scale);
    anything else (exponents, more decimals to round, blanks) goes the careful way."""
    pattern = r"^-?[0-9]{1,30}$" if scale == 0 else r"^-?[0-9]{1,30}(\.[0-9]{0,%d})?$" % scale
    good = pc.match_substring_regex(text, pattern).fill_null(False).to_numpy(zero_copy_only=False)
    safe = pc.if_else(pa.array(good), text, pa.scalar("0"))
    safe = pc.replace_substring_regex(safe, r"\.$", "")
    return pc.cast(safe, pa.decimal128(38, scale)), good


class _StateMachine:
    """The careful path: the records of the transactions that need it, in file order, with
    the pairing rules of the module docstring, one record at a time."""

    def __init__(self, archive: _Archive) -> None:
        self.a = archive
        self.pending: dict[str, _Pending] = {}

    def run(self, recs: list[_Rec]) -> None:
        sink = self.a.sink
        for rec in recs:
            trx, offset, index = rec.trx, rec.offset, rec.index
            try:
                self.step(rec)
            except DecodeError as exc:
                sink.quarantine(exc.located(offset=offset, record_index=index), offset, index,
                                rec.raw, trx_id=trx, position=rec.logaddr)
        for trx in list(self.pending):
            self.flush(trx)

    def flush(self, trx: str) -> None:
        p = self.pending.pop(trx, None)
        if p is None:
            return
        sink = self.a.sink
        if p.recid == L.DDL:
            logrecid, info = p.payload
            _emit_ddl(sink, self.a.catalog, trx, p, None,
                      f"{L.DDL_OPS.get(logrecid, f'DDL {logrecid}')} {info}")
        else:
            sink.quarantine(Corrupt("UPDATE_BEFOREIMAGE not followed by its UPDATE",
                                    offset=p.offset, path="RECID 5"),
                            p.offset, p.index, p.raw, trx_id=trx, position=p.logaddr)

    def step(self, rec: _Rec) -> None:
        sink, pending = self.a.sink, self.pending
        trx, recid, relid, payload = rec.trx, rec.recid, rec.relid, rec.payload
        offset, index, logaddr = rec.offset, rec.index, rec.logaddr
        waiting = pending.get(trx)
        if waiting is not None:
            partner = (waiting.recid == L.UPDATE_BEFOREIMAGE and recid == L.UPDATE
                       and waiting.relid == relid) or (waiting.recid == L.DDL and recid == L.SQL)
            if not partner:
                self.flush(trx)
                waiting = None
        if recid == L.TRX_START:
            sink.add("begin", offset, index, trx_id=trx, position=logaddr,
                     flag="capture_off" if rec.flags & L.FLAG_CAPTURE_OFF else None)
        elif recid == L.COMMIT:
            sink.add("commit", offset, index, trx_id=trx, position=logaddr, trx_end="commit",
                     commit_position=logaddr)
        elif recid in (L.INSERT, L.DELETE_FULL, L.UPDATE, L.UPDATE_BEFOREIMAGE):
            codec = self.a.codec(relid)
            if codec is None:
                tid = "" if relid is None else str(relid)
                raise UnknownTable("RELID not in the catalog", offset=offset, path="RELID",
                                   expected="a catalog table id", actual=tid or "NULL")
            table = codec.table
            if payload is None:
                raise Corrupt("row record without DATA", path="DATA", expected="hex bytes",
                              actual="NULL")
            image = codec.decode(payload)
            if recid == L.UPDATE_BEFOREIMAGE:
                pending[trx] = _Pending(recid, offset, index, relid, logaddr, image, rec.raw)
                return
            before = after = None
            first_offset, first_index, n, position = offset, index, 1, logaddr
            if recid == L.INSERT:
                op, after = "c", image
            elif recid == L.DELETE_FULL:
                op, before = "d", image
            else:
                op, after = "u", image
                if waiting is not None:
                    pending.pop(trx)
                    before = waiting.payload
                    first_offset, first_index, n, position = \
                        waiting.offset, waiting.index, 2, waiting.logaddr
            sink.add("change", first_offset, first_index, n, trx_id=trx, position=position,
                     trx_order=position, op=op, table_id=table.id, schema_name=table.schema,
                     table_name=table.name, before=before, after=after)
        elif recid == L.DDL:
            if payload is None:
                raise Corrupt("DDL record without DATA", path="DATA", actual="NULL")
            pending[trx] = _Pending(recid, offset, index, relid, logaddr, decode_ddl(payload), rec.raw)
        elif recid == L.SQL:
            if payload is None:
                raise Corrupt("SQL record without DATA", path="DATA", actual="NULL")
            sql = decode_sql(payload)
            if waiting is not None:
                pending.pop(trx)
                _emit_ddl(sink, self.a.catalog, trx, waiting, (offset, index), sql)
            else:
                _emit_ddl(sink, self.a.catalog, trx, _Pending(recid, offset, index, relid, logaddr,
                                                               None, rec.raw), None, sql)


class _Pending:
    __slots__ = ("recid", "offset", "index", "relid", "logaddr", "payload", "raw")

    def __init__(self, recid, offset, index, relid, logaddr, payload, raw):
        self.recid, self.offset, self.index, self.relid = recid, offset, index, relid
        self.logaddr, self.payload, self.raw = logaddr, payload, raw


def _emit_ddl(sink: EventSink, catalog: Catalog, trx: str, first, second: tuple[int, int] | None,
              text: str) -> None:
    tid = None if first.relid is None else str(first.relid)
    table = catalog.table(tid) if tid is not None else None
    sink.add("change", first.offset, first.index, 2 if second else 1, trx_id=trx,
             position=first.logaddr, trx_order=first.logaddr, op="ddl", table_id=tid,
             schema_name=table.schema if table else None,
             table_name=table.name if table else None, ddl=text)


def decode(data: bytes, ctx: DecodeContext, sink: EventSink) -> None:
    """Decode one archive (or a range of it) into ``sink``."""
    _Archive(data, ctx, sink).run()
    return None
