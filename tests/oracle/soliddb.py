"""ORACLE (tests only): the per-record solidDB decoder as it was before the columnar rewrite of
decoders/soliddb/decoder.py; tests/test_soliddb_oracle.py checks that both give the same rows.

Decoder of solidDB SYS_LOG CSV exports (SPEC section 3, soliddb).

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

import csv
from decimal import Decimal, InvalidOperation
from typing import Callable

from decoders import codecs as C
from decoders.base import DecodeContext, hexpos
from decoders.catalog import Catalog, Table
from decoders.errors import BadValue, Corrupt, DecodeError, NeedData, UnknownRecordType, UnknownTable
from decoders.events import EventSink
from decoders.soliddb import layout as L

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


def _real(raw: bytes):
    return C.Float4(_double(raw))


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


# ----------------------------------------------------------------- CSV framing

def iter_rows(data: bytes):
    """(offset, line_no, fields | DecodeError, raw) for each CSV row after the header.

    A quoted field may span lines (RFC 4180): physical lines are joined while the row's
    quotes are unbalanced. Offsets are of the row's first byte; line numbers are 1-based."""
    n = len(data)
    pos = 0
    line_no = 0
    first = True
    while pos < n:
        start, start_line = pos, line_no + 1
        end = data.find(b"\n", pos)
        end = n if end < 0 else end + 1
        line_no += 1
        while data.count(b'"', start, end) % 2 and end < n:   # quoted newline: take the next line
            nxt = data.find(b"\n", end)
            end = n if nxt < 0 else nxt + 1
            line_no += 1
        pos = end
        raw = data[start:end]
        complete = raw.endswith(b"\n")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield start, start_line, Corrupt("row is not valid UTF-8", offset=start + exc.start), raw
            first = False
            continue
        body = text.rstrip("\r\n")
        if not body.strip():
            continue  # blank line
        if raw.count(b'"') % 2:
            yield start, start_line, NeedData("CSV row ends inside a quoted field", offset=start), raw
            first = False
            continue
        if '"' in body:
            try:
                fields = next(csv.reader([body], strict=True))
            except csv.Error as exc:
                yield start, start_line, Corrupt(f"CSV row cannot be parsed ({exc})", offset=start), raw
                first = False
                continue
        else:
            fields = body.split(",")
        if first:
            first = False
            if [f.strip().upper() for f in fields] == list(L.HEADER):
                continue
            yield start, start_line, Corrupt("missing or bad CSV header", offset=start,
                                             expected=",".join(L.HEADER), actual=body[:80]), raw
            continue
        if len(fields) != len(L.HEADER):
            truncated = not complete and len(fields) < len(L.HEADER)
            yield start, start_line, (NeedData if truncated else Corrupt)(
                "CSV row has the wrong number of fields" + (" (truncated tail)" if truncated else ""),
                offset=start, expected=len(L.HEADER), actual=len(fields)), raw
            continue
        if not complete and fields[-1] and len(fields[-1]) % 2:
            yield start, start_line, NeedData("last CSV row is cut short (truncated tail)",
                                              offset=start), raw
            continue
        yield start, start_line, fields, raw


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


# ----------------------------------------------------------------- records -> events

class _Pending:
    __slots__ = ("recid", "offset", "index", "relid", "logaddr", "payload", "raw")

    def __init__(self, recid, offset, index, relid, logaddr, payload, raw):
        self.recid, self.offset, self.index, self.relid = recid, offset, index, relid
        self.logaddr, self.payload, self.raw = logaddr, payload, raw


def decode(data: bytes, ctx: DecodeContext, sink: EventSink) -> None:
    catalog: Catalog = ctx.catalog
    codecs: dict[str, RowCodec] = {}
    pending: dict[str, _Pending] = {}   # TRXID -> before image or DDL waiting for its partner

    def table_of(relid: int | None, offset: int) -> tuple[Table, RowCodec]:
        tid = "" if relid is None else str(relid)
        codec = codecs.get(tid)
        if codec is None:
            table = catalog.table(tid)
            if table is None:
                raise UnknownTable("RELID not in the catalog", offset=offset, path="RELID",
                                   expected="a catalog table id", actual=tid or "NULL")
            codec = codecs[tid] = RowCodec(table)
        return codec.table, codec

    def flush(trx: str) -> None:
        """Emit what waits for a partner that did not come."""
        p = pending.pop(trx, None)
        if p is None:
            return
        if p.recid == L.DDL:
            logrecid, info = p.payload
            _emit_ddl(sink, catalog, trx, p, None, f"{L.DDL_OPS.get(logrecid, f'DDL {logrecid}')} {info}")
        else:
            sink.quarantine(Corrupt("UPDATE_BEFOREIMAGE not followed by its UPDATE",
                                    offset=p.offset, path="RECID 5"),
                            p.offset, p.index, p.raw, trx_id=trx, position=p.logaddr)

    index = -1
    for offset, line_no, fields, raw in iter_rows(data):
        index += 1
        if isinstance(fields, DecodeError):
            sink.quarantine(fields.located(offset=offset, record_index=index), offset, index, raw)
            continue
        try:
            recid = _int_field(fields[0], "RECID")
            flags = _int_field(fields[5], "FLAGS") or 0
            if recid == L.EMPTY:
                sink.add("skip", offset, index, rule="soliddb_empty_padding")
                continue
            trxid = _int_field(fields[2], "TRXID")
            relid = _int_field(fields[4], "RELID")
            logaddr_b = _hex_field(fields[6], "LOGADDR")
            if logaddr_b is None or len(logaddr_b) != L.LOGADDR_BYTES:
                raise Corrupt("LOGADDR must be 20 bytes", path="LOGADDR", expected=L.LOGADDR_BYTES,
                              actual=None if logaddr_b is None else len(logaddr_b))
            payload = _hex_field(fields[7], "DATA")
        except DecodeError as exc:
            sink.quarantine(exc.located(offset=offset, record_index=index), offset, index, raw)
            continue
        logaddr = hexpos(logaddr_b, L.LOGADDR_HEX)
        trx = None if trxid is None else str(trxid)
        try:
            if recid not in L.RECNAMES:
                raise UnknownRecordType("unknown RECID", path="RECID",
                                        expected="/".join(map(str, sorted(L.RECNAMES))), actual=recid)
            if trx is None:
                raise Corrupt("record without TRXID", path="TRXID", expected="a transaction id",
                              actual="NULL")
            waiting = pending.get(trx)
            if waiting is not None:
                partner = (waiting.recid == L.UPDATE_BEFOREIMAGE and recid == L.UPDATE
                           and waiting.relid == relid) or \
                          (waiting.recid == L.DDL and recid == L.SQL)
                if not partner:
                    flush(trx)
                    waiting = None
            if recid == L.TRX_START:
                sink.add("begin", offset, index, trx_id=trx, position=logaddr,
                         flag="capture_off" if flags & L.FLAG_CAPTURE_OFF else None)
            elif recid == L.COMMIT:
                sink.add("commit", offset, index, trx_id=trx, position=logaddr, trx_end="commit",
                         commit_position=logaddr)
            elif recid in (L.INSERT, L.DELETE_FULL, L.UPDATE, L.UPDATE_BEFOREIMAGE):
                table, codec = table_of(relid, offset)
                if payload is None:
                    raise Corrupt("row record without DATA", path="DATA", expected="hex bytes",
                                  actual="NULL")
                image = codec.decode(payload)
                if recid == L.UPDATE_BEFOREIMAGE:
                    pending[trx] = _Pending(recid, offset, index, relid, logaddr, image, raw)
                    continue
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
                pending[trx] = _Pending(recid, offset, index, relid, logaddr, decode_ddl(payload), raw)
            elif recid == L.SQL:
                if payload is None:
                    raise Corrupt("SQL record without DATA", path="DATA", actual="NULL")
                sql = decode_sql(payload)
                if waiting is not None:
                    pending.pop(trx)
                    _emit_ddl(sink, catalog, trx, waiting, (offset, index), sql)
                else:
                    p = _Pending(recid, offset, index, relid, logaddr, None, raw)
                    _emit_ddl(sink, catalog, trx, p, None, sql)
        except DecodeError as exc:
            sink.quarantine(exc.located(offset=offset, record_index=index), offset, index, raw,
                            trx_id=trx, position=logaddr)
    for trx in list(pending):
        flush(trx)
    return None


def _emit_ddl(sink: EventSink, catalog: Catalog, trx: str, first: _Pending,
              second: tuple[int, int] | None, text: str) -> None:
    tid = None if first.relid is None else str(first.relid)
    table = catalog.table(tid) if tid is not None else None
    sink.add("change", first.offset, first.index, 2 if second else 1, trx_id=trx,
             position=first.logaddr, trx_order=first.logaddr, op="ddl", table_id=tid,
             schema_name=table.schema if table else None,
             table_name=table.name if table else None, ddl=text)
