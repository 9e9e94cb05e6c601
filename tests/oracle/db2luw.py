"""Oracle: the per-record Db2 LUW Version 7 decoder as it was before the columnar decoder
(decoders/db2luw/decoder.py at commit a37ebf5), logic unchanged, imports fixed (its layout in
``db2luw_layout``). tests/test_db2luw_oracle.py compares the package's decoder with it;
bench/plain.py (baseline (a)) reuses its ``RowCodec`` and layouts. ``decode`` is wrapped
with ``accounts_bytes`` like the package's. Do not change its behaviour.

The original docstring:
Decoder of Db2 LUW Version 7 log-read buffer streams (SPEC section 3, db2luw).

The archive is ``repeat { LSN (6 bytes), log record }``; each log record starts with the
Log Manager header (20 bytes; 26 for a compensation record ``C``; 32 for a propagatable
compensation record, i.e. ``C`` with flag 0x0002). Every record read gives exactly one
event row (``n_records`` = 1); ``record_offset`` is the offset of the record's LSN prefix.

Decisions (where SPEC and the vendor text leave room):

* ``position`` = the record's LSN, ``trx_id`` = the TID, both 12 upper-case hex digits
  (LSNs/TIDs are byte strings compared big-endian, never byte-swapped).
* ``row_id`` = the RID (``sqlint32`` in source byte order) as 8 upper-case hex digits of
  its unsigned 32-bit value (page and slot stay readable: ``0001A203``).
* Record types: ``N`` decoded by component (DMS 1, DOM 4) and function; ``C`` likewise, as
  an undo; ``M`` commit (time at offset 20, authid = the rest, trailing blanks and NULs
  trimmed; a byte the codepage cannot read is kept as an escape, never costing the commit);
  ``A`` abort; ``E`` control ``local_pending_list``; any other letter is skipped with rule
  ``db2luw_record_type_<letter>``. A type that is no ASCII letter is quarantined.
* Changes: 118 ``c``, 106 ``d``, 120 ``u`` (before and after image); DOM 101/4/2/3 and
  DMS 102/113 ``ddl`` with a readable description; DOM 11 ``t`` (with a description in
  ``ddl`` too). 124, 128, DOM 35 and row records whose image is not formatted user data
  (record-header type not 0x00/0x10, or Formatted User Data byte 0 not 1) are ``control``.
  A compensation record whose body is 124/128/35 is ``control`` (``compensation_<name>``).
* Undo: DMS 110/111/112/104/115 and DOM 130 (in any record type) and every ``C`` record
  with a change function are ``undo`` rows whose ``undo_of`` is the position of the change
  they undo, found by the first rule that applies:
    1. 32-byte header: the compensated LSN at offset 26 (when not zero);
    2. 26-byte header: the transaction's change record whose previous-LSN field equals the
       "LSN of the record before the compensated one" at offset 20 (a transaction's records
       form one backward chain, so that record is unique);
    3. otherwise (20-byte undo records, or the chain does not reach back far enough): the
       latest change of the same transaction, on the same table and RID (no RID for DDL),
       of the function the undo reverses (110->118, 111->106, 112->120, 104->102,
       115->113, 130->101; a ``C`` record that repeats a change function reverses its
       inverse: 118 (re-insert) a 106, 106 an 118, 120 an 120, DDL the same DDL), that
       nothing has undone yet.
  Rule 1 is trusted as written: it is the only rule that reaches a change in another
  archive of the night (the sample-night generator uses it for exactly that case).
  Rules 2 and 3 see this archive only (archives are decoded independently); an undo whose
  change cannot be found is quarantined (``broken_chain``) so that it is never lost.
  The ordering job skips the undone change (rule ``compensated``); an undone DDL is dropped
  with its undo.
* Table id = ``<tablespace id>.<table id>``. A row change of a table the catalog does not
  know is quarantined (``unknown_table``); DDL and truncate of an unknown table publish
  with ``table_id`` set and null schema/table names (CREATE TABLE is usually of a table the
  catalog does not know yet). Undo and control records do not need the catalog.
* Column values: CHAR/VARCHAR/CLOB in the table's ``encoding`` when the catalog gives one,
  else the source ``codepage`` option (default utf-8). BLOB/CLOB/VARBINARY have the
  4-byte offset/length fixed part of VARCHAR. A fixed section longer than the catalog's
  columns need is accepted (bytes beyond are ignored); a shorter one is corrupt.
* DMS 113/115 (alter column length) are not laid out in the vendor document; the project
  reads them as padding(2), column number u2 (0-based, like SYSCAT.COLUMNS.COLNO),
  reserved(2), old length u4, new length u4 (``layout.ALTER_COLUMN``).
* Packed DATE/TIME/TIMESTAMP take a table-driven fast path; anything it does not accept
  goes to the shared codec in ``decoders.codecs``, which gives the canonical ``BadValue``.
* Framing errors: a tail shorter than LSN + header, or a record length past the end of the
  file, is ``truncated`` (NeedData); a record length smaller than its header is ``corrupt``.
  Either way the rest of the file is one quarantine row and decoding stops. Any other bad
  record is quarantined alone and decoding goes on with the next record.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import struct
from typing import Callable

from decoders import codecs as C
from decoders.base import DecodeContext
from decoders.catalog import Catalog, Table
from decoders.errors import BadValue, BrokenChain, Corrupt, DecodeError, NeedData, UnknownRecordType, \
    UnknownTable
from decoders.events import EventSink, accounts_bytes
from tests.oracle import db2luw_layout as L

DEFAULT_CODEPAGE = "utf-8"
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _pos(lsn: bytes) -> str:
    return lsn.hex().upper()


def _rid(rid: int) -> str:
    return format(rid & 0xFFFFFFFF, "08X")


# ----------------------------------------------------------------- row images

def _text(encoding: str) -> Callable[[bytes], str]:
    def dec(raw: bytes) -> str:
        return C.decode_text(raw, encoding, "CHAR/VARCHAR")
    return dec


def _float4(v: float) -> C.Float4:
    return C.Float4(v)


def _packed(scale: int) -> Callable[[bytes], object]:
    def dec(raw: bytes):
        return C.decode_packed(raw, scale)
    return dec


# Fast paths for the packed DATE/TIME/TIMESTAMP of the hot loop: a byte -> two-digit value
# table; anything unusual (a non-decimal nibble, an impossible date) is handed to the shared
# codec, which raises the canonical ``BadValue``.
_BCD = [-1 if (b >> 4) > 9 or (b & 15) > 9 else (b >> 4) * 10 + (b & 15) for b in range(256)]


def _date(raw: bytes):
    v = [_BCD[x] for x in raw]
    if -1 not in v:
        try:
            return _dt.date(v[0] * 100 + v[1], v[2], v[3])
        except ValueError:
            pass
    return C.decode_db2_date(raw)


def _time(raw: bytes):
    v = [_BCD[x] for x in raw]
    if -1 not in v:
        try:
            return _dt.time(v[0], v[1], v[2])
        except ValueError:
            pass
    return C.decode_db2_time(raw)


def _timestamp(raw: bytes):
    v = [_BCD[x] for x in raw]
    if -1 not in v:
        try:
            return _dt.datetime(v[0] * 100 + v[1], v[2], v[3], v[4], v[5], v[6],
                                (v[7] * 100 + v[8]) * 100 + v[9])
        except ValueError:
            pass
    return C.decode_db2_timestamp(raw)


_FIXED, _VAR = 0, 1


class RowCodec:
    """Precompiled extractor of one table's Formatted User Data Records: one struct
    ``unpack_from`` for the whole fixed section, then a converter per column."""

    __slots__ = ("table", "specs", "fixed", "fixed_size", "render", "names")

    def __init__(self, table: Table, st: L.Db2Structs, codepage: str) -> None:
        self.table = table
        enc = table.encoding or codepage
        text = _text(enc)
        codes = [st.prefix]
        specs = []
        vi = 0
        for col in table.columns:
            t = col.type
            if t not in L.FIXED_TYPE_CODES and t not in ("VARCHAR", "VARBINARY", "CLOB", "BLOB"):
                raise ValueError(f"db2luw cannot decode column type {t}")
            code, nvals = st.column_code(col)
            codes.append(code)
            if nvals == 2:
                kind = _VAR
                conv = text if t in ("VARCHAR", "CLOB") else None
            else:
                kind = _FIXED
                conv = {
                    "REAL": _float4, "DECIMAL": _packed(col.scale or 0),
                    "DATE": _date, "TIME": _time, "TIMESTAMP": _timestamp, "CHAR": text,
                }.get(t)
                if t == "FLOAT" and col.length == 4:
                    conv = _float4
            ni = -1
            if col.nullable:
                codes.append("B")
                ni = vi + nvals
            specs.append((kind, vi, ni, conv, col.name))
            vi += nvals + (1 if col.nullable else 0)
        self.fixed = struct.Struct("".join(codes))
        self.fixed_size = self.fixed.size
        self.specs = tuple(specs)
        self.render = C.RowRenderer(table.columns)
        self.names = [c.name for c in table.columns]

    def values(self, data: bytes, fixed: int, fixed_len: int, end: int) -> list:
        """Column values of the image whose fixed section starts at ``fixed`` (call it in a
        decimal context of more than 31 digits, as ``decode`` does, for exact DECIMAL(31))."""
        raw = self.fixed.unpack_from(data, fixed)
        var_end = end - fixed               # variable data must lie before the image's end
        out = []
        append = out.append
        name = ""
        try:
            for kind, vi, ni, conv, name in self.specs:
                if ni >= 0:
                    nb = raw[ni]
                    if nb:
                        if nb != L.NULL_FLAG_NULL:
                            raise BadValue("null flag is neither 0x00 nor 0x01",
                                           expected="0x00/0x01", actual=f"0x{nb:02X}")
                        append(None)
                        continue
                if kind == _FIXED:
                    v = raw[vi]
                    append(v if conv is None else conv(v))
                else:
                    ofs, ln = raw[vi], raw[vi + 1]
                    if ln and (ofs < fixed_len or ofs + ln > var_end):
                        raise Corrupt("column data offset outside the record",
                                      offset=fixed + ofs, path="variable_ref",
                                      expected=f"{fixed_len}..{var_end} (variable section)",
                                      actual=f"offset {ofs} length {ln}")
                    v = data[fixed + ofs:fixed + ofs + ln]
                    append(v if conv is None else conv(v))
        except DecodeError as exc:
            exc.path = f"column {name}" + (f" {exc.path}" if exc.path else "")
            if exc.offset is None:
                exc.offset = fixed
            raise
        return out


# ----------------------------------------------------------------- per-transaction undo state

class _Change:
    __slots__ = ("lsn", "func", "table_id", "rid", "undone")

    def __init__(self, lsn, func, table_id, rid):
        self.lsn, self.func, self.table_id, self.rid, self.undone = lsn, func, table_id, rid, False


class _Trx:
    __slots__ = ("by_prev", "by_lsn", "changes")

    def __init__(self) -> None:
        self.by_prev: dict[bytes, _Change] = {}
        self.by_lsn: dict[str, _Change] = {}
        self.changes: list[_Change] = []


class _Skip(Exception):
    """Internal: this row image is not formatted user data (a control record)."""


# ----------------------------------------------------------------- the decoder

class Decoder:
    """Decodes one archive. Handlers are found with dicts keyed by record type and by
    (component, function); every handler emits exactly one event row for its record."""

    def __init__(self, ctx: DecodeContext, sink: EventSink) -> None:
        opts = ctx.options or {}
        self.st = L.structs(opts.get("byte_order", "little"))
        self.codepage = opts.get("codepage") or DEFAULT_CODEPAGE
        self.catalog: Catalog = ctx.catalog
        self.archive = ctx.archive
        self.sink = sink
        self.codecs: dict[str, RowCodec | None] = {}
        self.trxs: dict[str, _Trx] = {}
        st = self.st
        self.lm = st.lm_header
        self.dms = st.dms_header
        self.dom = st.dom_header
        self.row_block = st.row_block
        self.rec_header = st.record_header
        self.fud_header = st.fud_header
        self.by_type = {
            L.NORMAL: self._normal, L.COMPENSATION: self._normal, L.COMMIT: self._commit,
            L.ABORT: self._abort, L.PENDING_LIST: self._pending_list,
        }
        D, O = L.COMPONENT_DMS, L.COMPONENT_DOM
        self.functions: dict[tuple[int, int], Callable] = {
            (D, L.DMS_INSERT): self._insert, (D, L.DMS_DELETE): self._delete,
            (D, L.DMS_UPDATE): self._update, (D, L.DMS_ADD_COLUMNS): self._add_columns,
            (D, L.DMS_ALTER_COLUMN): self._alter_column,
            (D, L.DMS_UNDO_INSERT): self._undo_insert, (D, L.DMS_UNDO_DELETE): self._undo_row,
            (D, L.DMS_UNDO_UPDATE): self._undo_row, (D, L.DMS_UNDO_ADD_COLUMNS): self._undo_ddl,
            (D, L.DMS_UNDO_ALTER_COLUMN): self._undo_ddl,
            (D, L.DMS_ALTER_ATTRIBUTE): self._alter_attribute, (D, L.DMS_INIT_TABLE): self._init_table,
            (O, L.DOM_CREATE_TABLE): self._create_table, (O, L.DOM_DROP_TABLE): self._drop_table,
            (O, L.DOM_CREATE_INDEX): self._index, (O, L.DOM_DROP_INDEX): self._index,
            (O, L.DOM_TRUNCATE): self._truncate, (O, L.DOM_REORG): self._reorg,
            (O, L.DOM_UNDO_CREATE_TABLE): self._undo_ddl,
        }
        # changes that an undo can name: registered before their body is decoded
        self.undoable = frozenset(L.COMPENSATES)
        # record fields of the record being decoded
        self.off = self.idx = 0
        self.pos = self.trx = ""
        self.rtype = 0
        self.prev = L.ZERO_LSN
        self.undo_next: bytes | None = None
        self.compensated: bytes | None = None

    # ------------------------------------------------------------- framing
    def run(self, data: bytes) -> None:
        n = len(data)
        pos = 0
        index = 0
        lm = self.lm
        lm_size = lm.size
        head = L.LSN_LEN + lm_size
        by_type = self.by_type
        sink = self.sink
        while pos < n:
            if n - pos < head:
                self._rest(data, pos, index, NeedData(
                    "truncated tail: too short for an LSN and a Log Manager header",
                    offset=pos, path="lm_header", expected=head, actual=n - pos))
                return
            lsn = data[pos:pos + L.LSN_LEN]
            length, rtype, flags, prev, tid = lm.unpack_from(data, pos + L.LSN_LEN)
            if length < lm_size:
                self._rest(data, pos, index, Corrupt(
                    "record length smaller than the Log Manager header; cannot resynchronise",
                    offset=pos + L.LSN_LEN, path="lm_header.len_record",
                    expected=f">= {lm_size}", actual=length))
                return
            end = pos + L.LSN_LEN + length
            if end > n:
                self._rest(data, pos, index, NeedData(
                    "record length past the end of the file", offset=pos + L.LSN_LEN,
                    path="lm_header.len_record", expected=length,
                    actual=n - pos - L.LSN_LEN))
                return
            self.off, self.idx = pos, index
            self.pos = lsn.hex().upper()
            self.trx = tid.hex().upper()
            self.rtype, self.prev = rtype, prev
            handler = by_type.get(rtype)
            try:
                if handler is None:
                    if rtype < 128 and chr(rtype).isalpha():
                        sink.add("skip", pos, index, rule=f"db2luw_record_type_{chr(rtype)}",
                                 trx_id=self.trx, position=self.pos)
                    else:
                        raise UnknownRecordType("record type is not an ASCII letter",
                                                offset=pos + L.LSN_LEN + 4,
                                                path="lm_header.record_type",
                                                expected="a letter (N C M A E ...)",
                                                actual=f"0x{rtype:04X}")
                else:
                    handler(data, pos + L.LSN_LEN, end, flags)
            except DecodeError as exc:
                exc.located(archive=self.archive, offset=pos, record_index=index)
                sink.quarantine(exc, pos, index, data[pos:min(end, pos + 256)],
                                trx_id=self.trx, position=self.pos)
            pos = end
            index += 1

    def _rest(self, data: bytes, pos: int, index: int, err: DecodeError) -> None:
        err.located(archive=self.archive, record_index=index)
        self.sink.quarantine(err, pos, index, data[pos:pos + 256])

    def emit(self, kind: str, **fields) -> None:
        self.sink.add(kind, self.off, self.idx, trx_id=self.trx, position=self.pos, **fields)

    # ------------------------------------------------------------- Log Manager record types
    def _normal(self, data: bytes, rec: int, end: int, flags: int) -> None:
        body = rec + L.LRH_LEN
        self.undo_next = self.compensated = None
        if self.rtype == L.COMPENSATION:
            if flags & L.FLAG_PROPAGATABLE:
                body = rec + L.LRH_PROP_COMP_LEN
            else:
                body = rec + L.LRH_COMP_LEN
            if body > end:
                raise Corrupt("compensation record shorter than its Log Manager header",
                              path="lm_header", expected=body - rec, actual=end - rec)
            self.undo_next = data[rec + L.LRH_LEN:rec + L.LRH_COMP_LEN]
            if body == rec + L.LRH_PROP_COMP_LEN:
                self.compensated = data[rec + L.LRH_COMP_LEN:body]
        if body + 2 > end:
            raise Corrupt("record without a DMS/DOM body", offset=body,
                          path="component header", expected=">= 2 bytes", actual=end - body)
        comp, func = data[body], data[body + 1]
        handler = self.functions.get((comp, func))
        if handler is None:
            if comp == L.COMPONENT_DMS:
                raise UnknownRecordType("unknown DMS function", path="dms_header.function_id",
                                        expected="/".join(map(str, L.DMS_FUNCTIONS)), actual=func)
            if comp == L.COMPONENT_DOM:
                raise UnknownRecordType("unknown DOM function", path="dom_header.function_id",
                                        expected="/".join(map(str, L.DOM_FUNCTIONS)), actual=func)
            raise UnknownRecordType("unknown component", path="component_id",
                                    expected="1 (DMS) or 4 (DOM)", actual=comp)
        if self.rtype == L.COMPENSATION:
            if (comp, func) in self.undoable:
                self._compensation(data, body, end, comp, func)
                return
            if (comp, func) in L.CONTROL_FUNCTIONS:
                self.emit("control", rule="compensation_" + L.CONTROL_FUNCTIONS[(comp, func)])
                return
        if (comp, func) in self.undoable:
            self._register(comp, func, data, body, end)
        handler(data, body, end)

    def _commit(self, data: bytes, rec: int, end: int, flags: int) -> None:
        body = rec + L.LRH_LEN
        if body + 4 > end:
            raise Corrupt("commit record without its time", path="commit.time_committed",
                          expected=4, actual=end - body)
        (secs,) = self.st.commit.unpack_from(data, body)
        authid = data[body + 4:end].rstrip(b" \x00")
        user = authid.decode(self.codepage, errors="backslashreplace") if authid else None
        self.trxs.pop(self.trx, None)
        self.emit("commit", trx_end="commit", commit_position=self.pos,
                  commit_ts=_EPOCH + _dt.timedelta(seconds=secs), user=user)

    def _abort(self, data: bytes, rec: int, end: int, flags: int) -> None:
        self.trxs.pop(self.trx, None)
        self.emit("abort", trx_end="abort")

    def _pending_list(self, data: bytes, rec: int, end: int, flags: int) -> None:
        self.emit("control", rule="local_pending_list")

    # ------------------------------------------------------------- helpers
    def _dms_table(self, data: bytes, body: int, end: int, need: int, what: str):
        if body + need > end:
            raise Corrupt(f"{what} body shorter than its layout", offset=body,
                          path=what, expected=need, actual=end - body)
        _, _, ts, tb = self.dms.unpack_from(data, body)
        return f"{ts}.{tb}"

    def _dom_table(self, data: bytes, body: int, end: int, need: int, what: str):
        if body + need > end:
            raise Corrupt(f"{what} body shorter than its layout", offset=body,
                          path=what, expected=need, actual=end - body)
        _, _, _, _, ts, tb, _, _ = self.dom.unpack_from(data, body)
        return f"{ts}.{tb}"

    def _codec(self, table_id: str) -> RowCodec:
        codec = self.codecs.get(table_id)
        if codec is None:
            table = self.catalog.table(table_id)
            if table is None:
                raise UnknownTable("table not in the catalog", path="dms_header.table_id",
                                   expected="a catalog table id", actual=table_id)
            codec = self.codecs[table_id] = RowCodec(table, self.st, self.codepage)
        return codec

    def _image(self, codec: RowCodec, data: bytes, start: int, limit: int) -> tuple[str, int]:
        """(JSON of the row image whose record header is at ``start``, end of the image).
        Raises ``_Skip`` for an image that is not formatted user data."""
        if start + 8 > limit:
            raise Corrupt("row image shorter than its record header", offset=start,
                          path="record_header", expected=8, actual=limit - start)
        rtype, rlen = self.rec_header.unpack_from(data, start)
        end = start + rlen
        if rlen < 8 or end > limit:
            raise Corrupt("row image length outside the record", offset=start + 2,
                          path="record_header.len_record", expected=f"8..{limit - start}",
                          actual=rlen)
        fud, fixed_len = self.fud_header.unpack_from(data, start + 4)
        if rtype not in L.USER_RECORD_TYPES or fud != L.FORMATTED_USER_DATA:
            raise _Skip(end)
        fixed = start + 8
        if fixed + fixed_len > end:
            raise Corrupt("user data shorter than its fixed section", offset=start + 6,
                          path="fud_header.len_fixed", expected=fixed_len, actual=end - fixed)
        if fixed_len < codec.fixed_size:
            raise Corrupt("fixed section shorter than the table's columns", offset=start + 6,
                          path="fud_header.len_fixed", expected=codec.fixed_size, actual=fixed_len)
        return codec.render(codec.values(data, fixed, fixed_len, end)), end

    def _row_head(self, data: bytes, body: int, end: int, what: str):
        table_id = self._dms_table(data, body, end, self.dms.size + self.row_block.size, what)
        rid = self.row_block.unpack_from(data, body + self.dms.size)[0]
        return table_id, rid, body + self.dms.size + self.row_block.size

    def _row_change(self, op: str, data: bytes, body: int, end: int, what: str) -> None:
        table_id, rid, img = self._row_head(data, body, end, what)
        codec = self._codec(table_id)
        try:
            image, _ = self._image(codec, data, img, end)
        except _Skip:
            self.emit("control", rule="internal_control_record", table_id=table_id,
                      row_id=_rid(rid))
            return
        t = codec.table
        self.emit("change", trx_order=self.pos, op=op, table_id=table_id, schema_name=t.schema,
                  table_name=t.name, row_id=_rid(rid),
                  before=image if op == "d" else None, after=image if op == "c" else None)

    # ------------------------------------------------------------- DMS
    def _insert(self, data: bytes, body: int, end: int) -> None:
        self._row_change("c", data, body, end, "insert_record")

    def _delete(self, data: bytes, body: int, end: int) -> None:
        self._row_change("d", data, body, end, "delete_record")

    def _update(self, data: bytes, body: int, end: int) -> None:
        table_id, rid, img = self._row_head(data, body, end, "update_record")
        codec = self._codec(table_id)
        skipped = False
        try:
            before, old_end = self._image(codec, data, img, end)
        except _Skip as s:
            skipped, old_end = True, s.args[0]
        second = old_end + self.dms.size + self.row_block.size
        if second > end:
            raise Corrupt("update record ends before its second DMS header block", offset=old_end,
                          path="update_record.new", expected=second - old_end,
                          actual=end - old_end)
        comp2, func2 = data[old_end], data[old_end + 1]
        if comp2 != L.COMPONENT_DMS or func2 != L.DMS_UPDATE:
            raise Corrupt("update record's second DMS header is not an update header",
                          offset=old_end, path="update_record.dms_header",
                          expected=f"{L.COMPONENT_DMS}/{L.DMS_UPDATE}", actual=f"{comp2}/{func2}")
        try:
            after, _ = self._image(codec, data, second, end)
        except _Skip:
            skipped = True
        if skipped:
            self.emit("control", rule="internal_control_record", table_id=table_id,
                      row_id=_rid(rid))
            return
        t = codec.table
        self.emit("change", trx_order=self.pos, op="u", table_id=table_id, schema_name=t.schema,
                  table_name=t.name, row_id=_rid(rid), before=before, after=after)

    def _ddl(self, table_id: str, op: str, text: Callable[[str, Table | None], str]) -> None:
        table = self.catalog.table(table_id)
        name = table.qualified_name if table else table_id
        self.emit("change", trx_order=self.pos, op=op, table_id=table_id,
                  schema_name=table.schema if table else None,
                  table_name=table.name if table else None, ddl=text(name, table))

    def _add_columns(self, data: bytes, body: int, end: int) -> None:
        lay = self.st.add_columns
        table_id = self._dms_table(data, body, end, self.dms.size + lay.size, "add_columns")
        old, new = lay.unpack_from(data, body + self.dms.size)
        self._ddl(table_id, "ddl",
                  lambda name, t: f"ALTER TABLE {name} ADD COLUMNS (old {old}, new {new})")

    def _alter_column(self, data: bytes, body: int, end: int) -> None:
        lay = self.st.alter_column
        table_id = self._dms_table(data, body, end, self.dms.size + lay.size, "alter_column_length")
        colno, old, new = lay.unpack_from(data, body + self.dms.size)

        def text(name: str, t: Table | None) -> str:
            col = t.columns[colno].name if t is not None and colno < len(t.columns) \
                else f"COLNO {colno}"
            return f"ALTER TABLE {name} ALTER COLUMN {col} SET LENGTH {new} (old {old})"
        self._ddl(table_id, "ddl", text)

    def _alter_attribute(self, data: bytes, body: int, end: int) -> None:
        lay = self.st.alter_attribute
        table_id = self._dms_table(data, body, end, self.dms.size + lay.size, "alter_table_attribute")
        self.emit("control", rule="alter_table_attribute", table_id=table_id)

    def _init_table(self, data: bytes, body: int, end: int) -> None:
        lay = self.st.init_table
        table_id = self._dms_table(data, body, end, self.dms.size + lay.size, "initialize_table")
        self.emit("control", rule="initialize_table", table_id=table_id)

    # ------------------------------------------------------------- DOM
    def _create_table(self, data: bytes, body: int, end: int) -> None:
        table_id = self._dom_table(data, body, end, self.dom.size + self.st.table_object.size,
                                   "create_table")
        self._ddl(table_id, "ddl", lambda name, t: f"CREATE TABLE {name}")

    def _drop_table(self, data: bytes, body: int, end: int) -> None:
        table_id = self._dom_table(data, body, end, self.dom.size + self.st.table_object.size,
                                   "drop_table")
        self._ddl(table_id, "ddl", lambda name, t: f"DROP TABLE {name}")

    def _index(self, data: bytes, body: int, end: int) -> None:
        lay = self.st.index
        func = data[body + 1]
        table_id = self._dom_table(data, body, end, self.dom.size + lay.size,
                                   L.DOM_FUNCTIONS[func])
        token, _root = lay.unpack_from(data, body + self.dom.size)
        verb = "CREATE" if func == L.DOM_CREATE_INDEX else "DROP"
        self._ddl(table_id, "ddl", lambda name, t: f"{verb} INDEX (index token {token}) ON {name}")

    def _truncate(self, data: bytes, body: int, end: int) -> None:
        table_id = self._dom_table(data, body, end, self.dom.size, "truncate_table")
        self._ddl(table_id, "t", lambda name, t: f"TRUNCATE TABLE {name} (IMPORT REPLACE)")

    def _reorg(self, data: bytes, body: int, end: int) -> None:
        table_id = self._dom_table(data, body, end, self.dom.size + self.st.reorg.size, "reorg_table")
        self.emit("control", rule="reorg_table", table_id=table_id)

    # ------------------------------------------------------------- undo and compensation
    def _register(self, comp: int, func: int, data: bytes, body: int, end: int) -> None:
        """Remember a change so that a later undo of the same transaction can name it."""
        if comp == L.COMPONENT_DMS:
            if body + self.dms.size > end:
                return
            _, _, ts, tb = self.dms.unpack_from(data, body)
            rid = None
            if func in (L.DMS_INSERT, L.DMS_DELETE, L.DMS_UPDATE) and \
                    body + self.dms.size + self.row_block.size <= end:
                rid = self.row_block.unpack_from(data, body + self.dms.size)[0]
        else:
            if body + self.dom.size > end:
                return
            ts, tb = self.dom.unpack_from(data, body)[4:6]
            rid = None
        trx = self.trxs.get(self.trx)
        if trx is None:
            trx = self.trxs[self.trx] = _Trx()
        ch = _Change(self.pos, func, f"{ts}.{tb}", rid)
        trx.by_prev[self.prev] = ch
        trx.by_lsn[self.pos] = ch
        trx.changes.append(ch)

    def _resolve(self, want: int, table_id: str, rid: int | None) -> str:
        trx = self.trxs.get(self.trx)
        target = None
        if self.compensated is not None and self.compensated != L.ZERO_LSN:
            target = _pos(self.compensated)
        elif self.undo_next is not None and trx is not None:
            ch = trx.by_prev.get(self.undo_next)
            if ch is not None and not ch.undone:
                target = ch.lsn
        if target is None and trx is not None:
            for ch in reversed(trx.changes):
                if not ch.undone and ch.func == want and ch.table_id == table_id and ch.rid == rid:
                    target = ch.lsn
                    break
        if target is None:
            raise BrokenChain("the change this record undoes is not in the archive",
                              path="undo", expected=f"an earlier function {want} of "
                              f"transaction {self.trx} on table {table_id}"
                              + ("" if rid is None else f" RID {_rid(rid)}"), actual="none")
        if trx is not None:
            ch = trx.by_lsn.get(target)
            if ch is not None:
                ch.undone = True
        return target

    def _undo(self, want: int, table_id: str, rid: int | None, name: str) -> None:
        target = self._resolve(want, table_id, rid)
        self.emit("undo", rule=name, undo_of=target, table_id=table_id,
                  row_id=None if rid is None else _rid(rid))

    def _undo_insert(self, data: bytes, body: int, end: int) -> None:
        lay = self.st.undo_insert
        table_id = self._dms_table(data, body, end, self.dms.size + lay.size, "undo_insert_record")
        rid = lay.unpack_from(data, body + self.dms.size)[0]
        self._undo(L.DMS_INSERT, table_id, rid, "undo_insert_record")

    def _undo_row(self, data: bytes, body: int, end: int) -> None:
        func = data[body + 1]
        name = L.DMS_FUNCTIONS[func]
        table_id, rid, _ = self._row_head(data, body, end, name)
        self._undo(L.UNDOES[(L.COMPONENT_DMS, func)], table_id, rid, name)

    def _undo_ddl(self, data: bytes, body: int, end: int) -> None:
        comp, func = data[body], data[body + 1]
        if comp == L.COMPONENT_DMS:
            table_id = self._dms_table(data, body, end, self.dms.size, L.DMS_FUNCTIONS[func])
            name = L.DMS_FUNCTIONS[func]
        else:
            table_id = self._dom_table(data, body, end, self.dom.size, L.DOM_FUNCTIONS[func])
            name = L.DOM_FUNCTIONS[func]
        self._undo(L.UNDOES[(comp, func)], table_id, None, name)

    def _compensation(self, data: bytes, body: int, end: int, comp: int, func: int) -> None:
        """A ``C`` record whose body repeats a change function: it undoes an earlier change."""
        if comp == L.COMPONENT_DMS:
            name = "compensation_" + L.DMS_FUNCTIONS[func]
            if func in (L.DMS_INSERT, L.DMS_DELETE, L.DMS_UPDATE):
                table_id, rid, _ = self._row_head(data, body, end, name)
            else:
                table_id, rid = self._dms_table(data, body, end, self.dms.size, name), None
        else:
            name = "compensation_" + L.DOM_FUNCTIONS[func]
            table_id, rid = self._dom_table(data, body, end, self.dom.size, name), None
        self._undo(L.COMPENSATES[(comp, func)], table_id, rid, name)


def _decode(data: bytes, ctx: DecodeContext, sink: EventSink) -> None:
    """Decode one Db2 LUW archive into ``sink`` (one row per record read)."""
    with decimal.localcontext() as dctx:     # DECIMAL(31): exact, whatever the caller's context
        dctx.prec = 64
        Decoder(ctx, sink).run(data)
    return None


decode = accounts_bytes(_decode)
