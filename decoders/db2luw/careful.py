"""The careful per-record path of the Db2 LUW decoder: every record the columnar fast path
does not take (DDL, undo and compensation, control records, other record types, and any
record failing a vectorised check) is decoded here, one at a time, with the precise error
(class, offset, field, expected vs actual) of a record that cannot be decoded. It also keeps
the per-transaction state that undo and compensation records are resolved against.

The rules are the decoder's (see ``decoder.py``'s docstring); Version 7 behaves exactly as
the per-record decoder before the columnar rewrite (tests/oracle/db2luw.py)."""

from __future__ import annotations

import datetime as _dt
import math
from typing import Callable

from .. import codecs as C
from ..base import DecodeContext
from ..catalog import Catalog, Table, codec_problem
from ..errors import BadValue, BrokenChain, Corrupt, DecodeError, UnknownRecordType, UnknownTable
from ..events import EventSink
from . import layout as L

DEFAULT_CODEPAGE = "utf-8"
EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
MAX_EPOCH_SECONDS = 253_402_300_799        # 9999-12-31T23:59:59Z: the last time a datetime holds


def rid_text(variant: L.Variant, rid) -> str:
    """``row_id``: V7 RID (sqlint32) as 8 hex digits of its unsigned value; v10 RID (6 opaque
    bytes) as 12 hex digits."""
    if variant is L.V7:
        return format(rid & 0xFFFFFFFF, "08X")
    return bytes(rid).hex().upper()


def text_codec(encoding: str) -> Callable[[bytes], str]:
    """CHAR/VARCHAR bytes -> text; a code page that is not a character set gives ``BadValue``
    on every value (never an exception other than ``DecodeError``)."""
    problem = codec_problem(encoding)
    if problem is not None:
        def refuse(raw: bytes) -> str:
            raise BadValue(f"cannot read CHAR/VARCHAR: {problem}", expected="a character set",
                           actual=encoding)
        return refuse

    def dec(raw: bytes) -> str:
        return C.decode_text(raw, encoding, "CHAR/VARCHAR")
    return dec


def authid_text(raw: bytes, codepage: str) -> str | None:
    """A commit's authorization id: trailing blanks and NULs trimmed; a byte the code page
    cannot read is kept as an escape (never costing the commit); with a code page that is no
    character set, read as ASCII (authids are SQL identifiers)."""
    raw = raw.rstrip(b" \x00")
    if not raw:
        return None
    try:
        return raw.decode(codepage, errors="backslashreplace")
    except (UnicodeError, LookupError, ValueError, TypeError):
        return raw.decode("ascii", errors="backslashreplace")


def _float4(v: float) -> C.Float4:
    return C.Float4(v)


def _packed(scale: int) -> Callable[[bytes], object]:
    def dec(raw: bytes):
        return C.decode_packed(raw, scale)
    return dec


_FIXED, _VAR = 0, 1
_CONVERTERS = {"DECIMAL": None, "DATE": C.decode_db2_date, "TIME": C.decode_db2_time,
               "TIMESTAMP": C.decode_db2_timestamp}


class RowCodec:
    """One table's Formatted User Data Records, one at a time: the table's ``row_layout``
    read with one ``unpack_from``, then a converter per column."""

    __slots__ = ("table", "specs", "fixed", "fixed_size", "render", "names", "layout")

    def __init__(self, table: Table, byte_order: str, codepage: str) -> None:
        self.table = table
        text = text_codec(table.encoding or codepage)
        self.layout = L.row_layout(table.columns, byte_order)
        pos = {name: i for i, name in enumerate(self.layout.names)}
        specs = []
        for i, col in enumerate(table.columns):
            t = col.type
            ni = pos.get(f"c{i}_null", -1)
            if t in L.VARIABLE_TYPES:
                specs.append((_VAR, pos[f"c{i}_ofs"], ni, text if t in L.TEXT_TYPES else None,
                              col.name))
                continue
            if t == "DECIMAL":
                conv = _packed(col.scale or 0)
            elif t in ("REAL", "FLOAT", "DOUBLE"):
                conv = _finite(t, _float4 if L.fixed_type(col) == "f4" else None)
            elif t == "CHAR":
                conv = text
            else:
                conv = _CONVERTERS.get(t)
            specs.append((_FIXED, pos[f"c{i}"], ni, conv, col.name))
        self.fixed = self.layout.struct
        self.fixed_size = self.layout.size
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


def _finite(type_: str, then: Callable | None) -> Callable:
    """REAL/DOUBLE: Db2 stores no NaN or infinity there; such bytes are a bad value."""
    def conv(v: float):
        if not math.isfinite(v):
            raise BadValue(f"{type_} is not a finite number", expected="a finite number",
                           actual=repr(v))
        return v if then is None else then(v)
    return conv


# ----------------------------------------------------------------- per-transaction undo state

class _Change:
    __slots__ = ("pos", "comp", "func", "table_id", "rid", "undone")

    def __init__(self, pos, comp, func, table_id, rid):
        self.pos, self.comp, self.func, self.table_id, self.rid = pos, comp, func, table_id, rid
        self.undone = False


class _Trx:
    __slots__ = ("by_prev", "by_pos", "changes")

    def __init__(self) -> None:
        self.by_prev: dict[bytes, _Change] = {}
        self.by_pos: dict[str, _Change] = {}
        self.changes: list[_Change] = []


class _Skip(Exception):
    """Internal: this row image is not formatted user data (a control record)."""


class Careful:
    """Decodes single records (``record``) into the sink and keeps the undo state; the
    columnar path tells it about the records it decoded itself (``register``, ``ended``)."""

    def __init__(self, ctx: DecodeContext, sink: EventSink, variant: L.Variant,
                 byte_order: str) -> None:
        opts = ctx.options or {}
        self.v = variant
        self.lay = variant.layouts(byte_order)
        self.byte_order = byte_order
        self.codepage = opts.get("codepage") or DEFAULT_CODEPAGE
        self.catalog: Catalog = ctx.catalog
        self.archive = ctx.archive
        self.base = ctx.offset                 # archive offset of data[0] (ranges)
        self.sink = sink
        self.codecs: dict[str, RowCodec] = {}
        self.trxs: dict[str, _Trx] = {}
        v = variant
        self.by_type = {v.NORMAL: self._normal, v.COMPENSATION: self._normal, v.COMMIT: self._commit,
                        v.ABORT: self._abort, v.PENDING_LIST: self._pending_list}
        D, O = L.COMPONENT_DMS, L.COMPONENT_DOM
        self.functions: dict[tuple[int, int], Callable] = {
            (D, L.DMS_ADD_COLUMNS): self._add_columns, (D, L.DMS_ALTER_COLUMN): self._alter_column,
            (D, L.DMS_UNDO_ADD_COLUMNS): self._undo_ddl, (D, L.DMS_UNDO_ALTER_COLUMN): self._undo_ddl,
            (D, L.DMS_UNDO_DELETE): self._undo_row, (D, L.DMS_UNDO_UPDATE): self._undo_row,
            (D, L.DMS_ALTER_ATTRIBUTE): self._alter_attribute, (D, L.DMS_INIT_TABLE): self._init_table,
            (O, L.DOM_CREATE_TABLE): self._create_table, (O, L.DOM_DROP_TABLE): self._drop_table,
            (O, L.DOM_CREATE_INDEX): self._index, (O, L.DOM_DROP_INDEX): self._index,
            (O, L.DOM_TRUNCATE): self._truncate, (O, L.DOM_REORG): self._reorg,
            (O, L.DOM_UNDO_CREATE_TABLE): self._undo_ddl,
        }
        for func, (op, _) in v.row_functions.items():
            self.functions[(D, func)] = self._update if op == "u" else self._row_record
        for func in v.undo_insert_ids:
            self.functions[(D, func)] = self._undo_insert
        if v is L.V10:
            self.functions[(D, L.V10_UNDO_DELETE_EMPTY)] = self._undo_row
        self.undoable = frozenset(v.compensates)
        # an insert or delete to an empty page is the same change as the plain one
        ops = {f: op for f, (op, _) in v.row_functions.items()}
        self._same_op = lambda func: ops.get(func, func)
        prev = "lsn_prev" if v is L.V7 else "lso_prev"
        self._head = self.lay.header.reader(["record_type", "flags", prev]).unpack_from
        self.dms_functions = "/".join(map(str, v.dms_functions))
        self.dom_functions = "/".join(map(str, L.DOM_FUNCTIONS))
        # fields of the record being decoded
        self.off = self.idx = self.nbytes = 0
        self.pos = self.trx = ""
        self.rtype = 0
        self.prev = b""
        self.undo_next = self.compensated = None

    # ------------------------------------------------------------- one record
    def record(self, data: bytes, pos: int, index: int, end: int, position: str, trx: str) -> None:
        """Decode the record whose prefix starts at ``pos`` (it ends at ``end``; the framing
        checked the header's length) into exactly one row."""
        rec = pos + self.v.prefix_size
        rtype, flags, prev = self._head(data, rec)
        self.rtype, self.prev = rtype, prev
        self.off, self.idx, self.nbytes = pos, index, end - pos
        self.pos, self.trx = position, trx
        handler = self.by_type.get(rtype)
        try:
            if handler is None:
                self._other_type(rtype, rec)
            else:
                handler(data, rec, end, flags)
        except DecodeError as exc:
            self.quarantine_record(data, pos, index, end, position, trx, exc)

    def quarantine_record(self, data: bytes, pos: int, index: int, end: int, position: str,
                          trx: str, exc: DecodeError) -> None:
        """The record at ``pos`` could not be decoded: one quarantine row."""
        exc.located(archive=self.archive, offset=self.base + pos, record_index=index)
        self.sink.quarantine(exc, self.base + pos, index, data[pos:min(end, pos + 256)],
                             trx_id=trx, position=position, n_bytes=end - pos)

    def _other_type(self, rtype: int, rec: int) -> None:
        if self.v is L.V10:
            name = L.V10_TYPE_NAMES.get(rtype, f"0x{rtype:04X}")
            self.emit("skip", rule=f"db2luw_record_type_{name}")
        elif rtype < 128 and chr(rtype).isalpha():
            self.emit("skip", rule=f"db2luw_record_type_{chr(rtype)}")
        else:
            raise UnknownRecordType("record type is not an ASCII letter",
                                    offset=self.base + rec + 4, path="lm_header.record_type",
                                    expected="a letter (N C M A E ...)", actual=f"0x{rtype:04X}")

    def emit(self, kind: str, **fields) -> None:
        self.sink.add(kind, self.base + self.off, self.idx, trx_id=self.trx, position=self.pos,
                      n_bytes=self.nbytes, **fields)

    def quarantine_span(self, data: bytes, start: int, end: int, index: int, err: DecodeError) -> None:
        """Bytes ``[start, end)`` that framing could not take as records: one row."""
        err.located(archive=self.archive, record_index=index)
        self.sink.quarantine(err, self.base + start, index, data[start:start + 256],
                             n_bytes=end - start)

    # ------------------------------------------------------------- record types
    def _normal(self, data: bytes, rec: int, end: int, flags: int) -> None:
        v = self.v
        body = rec + v.header_size
        self.undo_next = self.compensated = None
        if self.rtype == v.COMPENSATION:
            body = rec + v.header_size_of(self.rtype, flags)
            if body > end:
                raise Corrupt("compensation record shorter than its Log Manager header",
                              path="lm_header", expected=body - rec, actual=end - rec)
            ext = self.lay.compensation.unpack_dict(data[rec:body] + bytes(v.prop_comp_size), 0)
            self.undo_next = ext.get("lsn_undo_next", ext.get("lso_undo_next"))
            if body == rec + v.prop_comp_size:
                self.compensated = ext.get("lsn_compensated", ext.get("lso_compensated"))
        if body + 2 > end:
            raise Corrupt("record without a DMS/DOM body", offset=self.base + body,
                          path="component header", expected=">= 2 bytes", actual=end - body)
        comp, func = data[body], data[body + 1]
        handler = self.functions.get((comp, func))
        if handler is None:
            if comp == L.COMPONENT_DMS:
                raise UnknownRecordType("unknown DMS function", path="dms_header.function_id",
                                        expected=self.dms_functions, actual=func)
            if comp == L.COMPONENT_DOM:
                raise UnknownRecordType("unknown DOM function", path="dom_header.function_id",
                                        expected=self.dom_functions, actual=func)
            raise UnknownRecordType("unknown component", path="component_id",
                                    expected="1 (DMS) or 4 (DOM)", actual=comp)
        if self.rtype == v.COMPENSATION:
            if (comp, func) in self.undoable:
                self._compensation(data, body, end, comp, func)
                return
            if (comp, func) in v.control_functions:
                self.emit("control", rule="compensation_" + v.control_functions[(comp, func)])
                return
        if (comp, func) in self.undoable:
            self._register_body(comp, func, data, body, end)
        handler(data, body, end)

    def _commit(self, data: bytes, rec: int, end: int, flags: int) -> None:
        v = self.v
        body = rec + v.header_size
        lay = self.lay.commit
        if v is L.V7:
            if body + 4 > end:
                raise Corrupt("commit record without its time", path="commit.time_committed",
                              expected=4, actual=end - body)
            (secs,) = lay.unpack_from(data, body)
            user = authid_text(data[body + 4:end], self.codepage)
        else:
            if body + L.COMMIT_V10_BASIC > end:
                raise Corrupt("commit record without its time", path="commit.time_committed",
                              expected=L.COMMIT_V10_BASIC, actual=end - body)
            secs = lay.reader(["time_committed"]).unpack_from(data, body)[0]
            user = None
            if flags & L.FLAG_PROPAGATABLE:
                if body + lay.size > end:
                    raise Corrupt("propagatable commit record without its authid length",
                                  offset=self.base + body + 8, path="commit.len_authid",
                                  expected=lay.size, actual=end - body)
                n = lay.unpack_from(data, body)[1]
                if body + lay.size + n > end:
                    raise Corrupt("authid longer than the commit record",
                                  offset=self.base + body + 8, path="commit.len_authid",
                                  expected=f"<= {end - body - lay.size}", actual=n)
                user = authid_text(data[body + lay.size:body + lay.size + n], self.codepage)
            if secs > MAX_EPOCH_SECONDS:
                raise BadValue("commit time out of range", offset=self.base + body,
                               path="commit.time_committed",
                               expected=f"<= {MAX_EPOCH_SECONDS} (9999-12-31)", actual=secs)
        self.trxs.pop(self.trx, None)
        rule = "local_pending_list" if self.rtype == v.PENDING_LIST else None
        self.emit("commit", rule=rule, trx_end="commit", commit_position=self.pos,
                  commit_ts=EPOCH + _dt.timedelta(seconds=secs), user=user)

    def _abort(self, data: bytes, rec: int, end: int, flags: int) -> None:
        self.trxs.pop(self.trx, None)
        self.emit("abort", trx_end="abort")

    def _pending_list(self, data: bytes, rec: int, end: int, flags: int) -> None:
        if self.v is L.V10:                      # ends its transaction as committed
            self._commit(data, rec, end, flags)
            return
        self.emit("control", rule="local_pending_list")

    # ------------------------------------------------------------- helpers
    def _dms_table(self, data: bytes, body: int, end: int, need: int, what: str) -> str:
        if body + need > end:
            raise Corrupt(f"{what} body shorter than its layout", offset=self.base + body,
                          path=what, expected=need, actual=end - body)
        _, _, ts, tb = self.lay.dms.unpack_from(data, body)
        return f"{ts}.{tb}"

    def _dom_table(self, data: bytes, body: int, end: int, need: int, what: str) -> str:
        if body + need > end:
            raise Corrupt(f"{what} body shorter than its layout", offset=self.base + body,
                          path=what, expected=need, actual=end - body)
        _, _, _, _, ts, tb, _, _ = self.lay.dom.unpack_from(data, body)
        return f"{ts}.{tb}"

    def codec(self, table_id: str) -> RowCodec:
        codec = self.codecs.get(table_id)
        if codec is None:
            table = self.catalog.table(table_id)
            if table is None:
                raise UnknownTable("table not in the catalog", path="dms_header.table_id",
                                   expected="a catalog table id", actual=table_id)
            codec = self.codecs[table_id] = RowCodec(table, self.byte_order, self.codepage)
        return codec

    def _image(self, codec: RowCodec, data: bytes, start: int, limit: int) -> tuple[str, int]:
        """(JSON of the row image whose record header is at ``start``, end of the image).
        Raises ``_Skip`` for an image that is not formatted user data."""
        base = self.base
        if start + 8 > limit:
            raise Corrupt("row image shorter than its record header", offset=base + start,
                          path="record_header", expected=8, actual=limit - start)
        rtype, rlen = self.lay.record_header.unpack_from(data, start)
        end = start + rlen
        if rlen < 8 or end > limit:
            raise Corrupt("row image length outside the record", offset=base + start + 2,
                          path="record_header.len_record", expected=f"8..{limit - start}",
                          actual=rlen)
        fud, fixed_len = self.lay.fud_header.unpack_from(data, start + 4)
        if rtype not in L.USER_RECORD_TYPES or fud != L.FORMATTED_USER_DATA:
            raise _Skip(end)
        fixed = start + 8
        if fixed + fixed_len > end:
            raise Corrupt("user data shorter than its fixed section", offset=base + start + 6,
                          path="fud_header.len_fixed", expected=fixed_len, actual=end - fixed)
        if fixed_len < codec.fixed_size:
            raise Corrupt("fixed section shorter than the table's columns", offset=base + start + 6,
                          path="fud_header.len_fixed", expected=codec.fixed_size, actual=fixed_len)
        try:
            values = codec.values(data, fixed, fixed_len, end)
        except DecodeError as exc:
            if exc.offset is not None and base:
                exc.offset += base
            raise
        return codec.render(values), end

    def _row_head(self, data: bytes, body: int, end: int, what: str):
        lay = self.lay.row_of(data[body + 1])
        table_id = self._dms_table(data, body, end, lay.size, what)
        rid = lay.unpack_dict(data, body)["rid"]
        return table_id, rid, body + lay.size

    def _row_record(self, data: bytes, body: int, end: int) -> None:
        func = data[body + 1]
        op = self.v.row_functions[func][0]
        table_id, rid, img = self._row_head(data, body, end, L.DMS_FUNCTIONS[func])
        codec = self.codec(table_id)
        try:
            image, _ = self._image(codec, data, img, end)
        except _Skip:
            self.emit("control", rule="internal_control_record", table_id=table_id,
                      row_id=rid_text(self.v, rid))
            return
        t = codec.table
        self.emit("change", trx_order=self.pos, op=op, table_id=table_id, schema_name=t.schema,
                  table_name=t.name, row_id=rid_text(self.v, rid),
                  before=image if op == "d" else None, after=image if op == "c" else None)

    # ------------------------------------------------------------- DMS
    def _update(self, data: bytes, body: int, end: int) -> None:
        v = self.v
        table_id, rid, img = self._row_head(data, body, end, "update_record")
        codec = self.codec(table_id)
        skipped = False
        try:
            before, old_end = self._image(codec, data, img, end)
        except _Skip as s:
            skipped, old_end = True, s.args[0]
        second = old_end + self.lay.row.size
        if second > end:
            raise Corrupt("update record ends before its second DMS header block",
                          offset=self.base + old_end, path="update_record.new",
                          expected=second - old_end, actual=end - old_end)
        comp2, func2 = data[old_end], data[old_end + 1]
        if comp2 != L.COMPONENT_DMS or func2 != v.UPDATE:
            raise Corrupt("update record's second DMS header is not an update header",
                          offset=self.base + old_end, path="update_record.dms_header",
                          expected=f"{L.COMPONENT_DMS}/{v.UPDATE}", actual=f"{comp2}/{func2}")
        try:
            after, _ = self._image(codec, data, second, end)
        except _Skip:
            skipped = True
        if skipped:
            self.emit("control", rule="internal_control_record", table_id=table_id,
                      row_id=rid_text(v, rid))
            return
        t = codec.table
        self.emit("change", trx_order=self.pos, op="u", table_id=table_id, schema_name=t.schema,
                  table_name=t.name, row_id=rid_text(v, rid), before=before, after=after)

    def _ddl(self, table_id: str, op: str, text: Callable[[str, Table | None], str]) -> None:
        table = self.catalog.table(table_id)
        name = table.qualified_name if table else table_id
        self.emit("change", trx_order=self.pos, op=op, table_id=table_id,
                  schema_name=table.schema if table else None,
                  table_name=table.name if table else None, ddl=text(name, table))

    def _add_columns(self, data: bytes, body: int, end: int) -> None:
        lay = self.lay.add_columns
        table_id = self._dms_table(data, body, end, lay.size, "add_columns")
        old, new = lay.unpack_from(data, body)[4:]
        self._ddl(table_id, "ddl",
                  lambda name, t: f"ALTER TABLE {name} ADD COLUMNS (old {old}, new {new})")

    def _alter_column(self, data: bytes, body: int, end: int) -> None:
        lay = self.lay.alter_column
        table_id = self._dms_table(data, body, end, lay.size, "alter_column_length")
        colno, old, new = lay.unpack_from(data, body)[4:]

        def text(name: str, t: Table | None) -> str:
            col = t.columns[colno].name if t is not None and colno < len(t.columns) \
                else f"COLNO {colno}"
            return f"ALTER TABLE {name} ALTER COLUMN {col} SET LENGTH {new} (old {old})"
        self._ddl(table_id, "ddl", text)

    def _alter_attribute(self, data: bytes, body: int, end: int) -> None:
        table_id = self._dms_table(data, body, end, self.lay.alter_attribute.size,
                                   "alter_table_attribute")
        self.emit("control", rule="alter_table_attribute", table_id=table_id)

    def _init_table(self, data: bytes, body: int, end: int) -> None:
        table_id = self._dms_table(data, body, end, self.lay.init_table.size, "initialize_table")
        self.emit("control", rule="initialize_table", table_id=table_id)

    # ------------------------------------------------------------- DOM
    def _create_table(self, data: bytes, body: int, end: int) -> None:
        table_id = self._dom_table(data, body, end, self.lay.table_object.size, "create_table")
        self._ddl(table_id, "ddl", lambda name, t: f"CREATE TABLE {name}")

    def _drop_table(self, data: bytes, body: int, end: int) -> None:
        table_id = self._dom_table(data, body, end, self.lay.table_object.size, "drop_table")
        self._ddl(table_id, "ddl", lambda name, t: f"DROP TABLE {name}")

    def _index(self, data: bytes, body: int, end: int) -> None:
        lay = self.lay.index
        func = data[body + 1]
        table_id = self._dom_table(data, body, end, lay.size, L.DOM_FUNCTIONS[func])
        token = lay.unpack_dict(data, body)["index_token"]
        verb = "CREATE" if func == L.DOM_CREATE_INDEX else "DROP"
        self._ddl(table_id, "ddl", lambda name, t: f"{verb} INDEX (index token {token}) ON {name}")

    def _truncate(self, data: bytes, body: int, end: int) -> None:
        table_id = self._dom_table(data, body, end, self.lay.truncate.size, "truncate_table")
        self._ddl(table_id, "t", lambda name, t: f"TRUNCATE TABLE {name} (IMPORT REPLACE)")

    def _reorg(self, data: bytes, body: int, end: int) -> None:
        table_id = self._dom_table(data, body, end, self.lay.reorg.size, "reorg_table")
        self.emit("control", rule="reorg_table", table_id=table_id)

    # ------------------------------------------------------------- undo state
    def register(self, trx: str, position: str, prev, comp: int, func: int, table_id: str, rid) -> None:
        """Remember a change of ``trx`` so that a later undo of the same transaction can
        name it (the columnar path's ordered pass does the same inline for the changes it
        decoded: keep the two alike)."""
        t = self.trxs.get(trx)
        if t is None:
            t = self.trxs[trx] = _Trx()
        ch = _Change(position, comp, func, table_id, rid)
        t.by_prev[prev] = ch
        t.by_pos[position] = ch
        t.changes.append(ch)

    def ended(self, trx: str) -> None:
        """The transaction committed or aborted: forget its changes."""
        self.trxs.pop(trx, None)

    def _register_body(self, comp: int, func: int, data: bytes, body: int, end: int) -> None:
        lay = self.lay
        if comp == L.COMPONENT_DMS:
            if body + lay.dms.size > end:
                return
            _, _, ts, tb = lay.dms.unpack_from(data, body)
            rid = None
            row = lay.rows.get(func)               # the change functions with a row block
            if row is not None and body + row.size <= end:
                rid = row.unpack_dict(data, body)["rid"]
        else:
            if body + lay.dom.size > end:
                return
            ts, tb = lay.dom.unpack_from(data, body)[4:6]
            rid = None
        self.register(self.trx, self.pos, self.prev, comp, func, f"{ts}.{tb}", rid)

    def resolve(self, trx_id: str, want: int, table_id: str, rid, undo_next=None,
                compensated=None) -> str:
        """The position of the change an undo of ``trx_id`` undoes (``want``: the function
        it reverses); raises ``BrokenChain`` when there is none. Also called by the columnar
        path for the undo records it parsed itself."""
        if self.v is L.V10:
            return self._resolve_lifo(trx_id, want, table_id, rid)
        trx = self.trxs.get(trx_id)
        target = None
        if compensated is not None and compensated != bytes(6):
            target = compensated.hex().upper()
        elif undo_next is not None and trx is not None:
            ch = trx.by_prev.get(undo_next)
            if ch is not None and not ch.undone:
                target = ch.pos
        if target is None and trx is not None:
            for ch in reversed(trx.changes):
                if not ch.undone and ch.func == want and ch.table_id == table_id and ch.rid == rid:
                    target = ch.pos
                    break
        if target is None:
            raise BrokenChain("the change this record undoes is not in the archive",
                              path="undo", expected=f"an earlier function {want} of "
                              f"transaction {trx_id} on table {table_id}"
                              + ("" if rid is None else f" RID {rid_text(self.v, rid)}"),
                              actual="none")
        if trx is not None:
            ch = trx.by_pos.get(target)
            if ch is not None:
                ch.undone = True
        return target

    def _resolve_lifo(self, trx_id: str, want: int, table_id: str, rid) -> str | None:
        """v10: the latest change of the transaction not yet undone; it must be of the
        function the undo reverses, on the same table (and RID when both carry one). None
        when no change of the transaction is left in this archive."""
        trx = self.trxs.get(trx_id)
        top = trx.changes[-1] if trx is not None and trx.changes else None
        what = (f"function {want} of transaction {trx_id} on table {table_id}"
                + ("" if rid is None else f" RID {rid_text(self.v, rid)}"))
        if top is None:
            return None          # the change is in an earlier archive: the ordering job's
        trx.changes.pop()        # resolve_transactions finds it
        same = self._same_op
        if same(top.func) != same(want) or top.table_id != table_id or (
                rid is not None and top.rid is not None and bytes(top.rid) != bytes(rid)):
            raise BrokenChain("the latest change of the transaction not yet undone is not the "
                              "one this record undoes", path="undo", expected=what,
                              actual=f"function {top.func} on table {top.table_id}"
                              + ("" if top.rid is None else f" RID {rid_text(self.v, top.rid)}")
                              + f" at {top.pos}")
        return top.pos

    def _undo(self, want: int, table_id: str, rid, name: str) -> None:
        target = self.resolve(self.trx, want, table_id, rid, self.undo_next, self.compensated)
        self.emit("undo", rule=name, undo_of=target, table_id=table_id,
                  row_id=None if rid is None else rid_text(self.v, rid))

    def _undo_insert(self, data: bytes, body: int, end: int) -> None:
        lay = self.lay.undo_insert
        func = data[body + 1]
        name = L.DMS_FUNCTIONS[func]
        table_id = self._dms_table(data, body, end, lay.size, name)
        rid = lay.unpack_dict(data, body)["rid"]
        self._undo(self.v.undoes[(L.COMPONENT_DMS, func)], table_id, rid, name)

    def _undo_row(self, data: bytes, body: int, end: int) -> None:
        func = data[body + 1]
        name = L.DMS_FUNCTIONS[func]
        table_id, rid, _ = self._row_head(data, body, end, name)
        self._undo(self.v.undoes[(L.COMPONENT_DMS, func)], table_id, rid, name)

    def _undo_ddl(self, data: bytes, body: int, end: int) -> None:
        comp, func = data[body], data[body + 1]
        if comp == L.COMPONENT_DMS:
            table_id = self._dms_table(data, body, end, self.lay.dms.size, L.DMS_FUNCTIONS[func])
            name = L.DMS_FUNCTIONS[func]
        else:
            table_id = self._dom_table(data, body, end, self.lay.dom.size, L.DOM_FUNCTIONS[func])
            name = L.DOM_FUNCTIONS[func]
        self._undo(self.v.undoes[(comp, func)], table_id, None, name)

    def _compensation(self, data: bytes, body: int, end: int, comp: int, func: int) -> None:
        """A compensation record whose body repeats a change function: it undoes an earlier
        change."""
        if comp == L.COMPONENT_DMS:
            name = "compensation_" + L.DMS_FUNCTIONS[func]
            if func in self.v.row_functions:
                table_id, rid, _ = self._row_head(data, body, end, name)
            else:
                table_id, rid = self._dms_table(data, body, end, self.lay.dms.size, name), None
        else:
            name = "compensation_" + L.DOM_FUNCTIONS[func]
            table_id, rid = self._dom_table(data, body, end, self.lay.dom.size, name), None
        self._undo(self.v.compensates[(comp, func)], table_id, rid, name)
