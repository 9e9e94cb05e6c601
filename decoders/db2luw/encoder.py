"""Encoder of Db2 LUW Version 7 log-read buffer streams: the inverse of ``decoder``
(tests, sample nights, benchmarks). Every layout is written with the same compiled
``Db2Structs`` the decoder reads with."""

from __future__ import annotations

import decimal
import struct
from typing import Iterable, Sequence

from .. import codecs as C
from ..catalog import Table
from . import layout as L


def table_ids(table_id: str) -> tuple[int, int]:
    """``"2.5"`` -> (tablespace id 2, table id 5)."""
    ts, tb = table_id.split(".")
    return int(ts), int(tb)


def lsn(n: int) -> bytes:
    return n.to_bytes(L.LSN_LEN, "big")


def tid(n: int) -> bytes:
    return n.to_bytes(L.TID_LEN, "big")


class Encoder:
    """Writes records in one source byte order and codepage."""

    def __init__(self, byte_order: str = "little", codepage: str = "utf-8") -> None:
        self.st = L.structs(byte_order)
        self.codepage = codepage
        self._cols: dict[int, list] = {}

    # ------------------------------------------------------------- Log Manager framing
    def record(self, lsn_: bytes, rtype: str, body: bytes, *, tid_: bytes,
               prev: bytes = L.ZERO_LSN, flags: int = L.FLAG_PROPAGATABLE,
               undo_next: bytes | None = None, compensated: bytes | None = None) -> bytes:
        """LSN prefix + Log Manager header + body. A ``C`` record gets the 26-byte header,
        or the 32-byte one when ``flags`` has the propagatable bit."""
        extra = b""
        if rtype == "C":
            extra = undo_next if undo_next is not None else L.ZERO_LSN
            if flags & L.FLAG_PROPAGATABLE:
                extra += compensated if compensated is not None else L.ZERO_LSN
        length = L.LRH_LEN + len(extra) + len(body)
        head = self.st.lm_header.pack(length, ord(rtype), flags, prev, tid_)
        return lsn_ + head + extra + body

    def commit(self, secs: int, authid: str = "") -> bytes:
        return self.st.commit.pack(secs) + authid.encode("ascii")

    # ------------------------------------------------------------- component headers
    def dms_header(self, func: int, table_id: str) -> bytes:
        return self.st.dms_header.pack(L.COMPONENT_DMS, func, *table_ids(table_id))

    def dom_header(self, func: int, table_id: str, obj: tuple[int, int] | None = None,
                   object_type: int = 0, flags: int = 0) -> bytes:
        ts, tb = table_ids(table_id)
        ots, oid = obj if obj is not None else (ts, tb)
        return self.st.dom_header.pack(L.COMPONENT_DOM, func, ots, oid, ts, tb, object_type, flags)

    # ------------------------------------------------------------- row images
    def _columns(self, table: Table) -> list:
        cols = self._cols.get(id(table))
        if cols is None:
            cols = []
            enc = table.encoding or self.codepage
            for col in table.columns:
                code, nvals = self.st.column_code(col)
                size = struct.calcsize(self.st.prefix + code)
                cols.append((col, code, nvals, size, enc))
            self._cols[id(table)] = cols
        return cols

    def _fixed_value(self, col, code: str, size: int, enc: str, v) -> bytes:
        t = col.type
        if t == "DECIMAL":
            with decimal.localcontext() as dctx:   # exact up to DECIMAL(31)
                dctx.prec = 64
                return C.encode_packed(v, col.precision or 9, col.scale or 0)
        if t == "DATE":
            return C.encode_db2_date(v)
        if t == "TIME":
            return C.encode_db2_time(v)
        if t == "TIMESTAMP":
            return C.encode_db2_timestamp(v)
        if t == "CHAR":
            raw = v.encode(enc)
            if len(raw) > size:
                raise ValueError(f"CHAR({size}) value {v!r} is {len(raw)} bytes")
            return raw + " ".encode(enc) * (size - len(raw))
        if t == "BINARY":
            raw = bytes(v)
            if len(raw) > size:
                raise ValueError(f"BINARY({size}) value is {len(raw)} bytes")
            return raw + bytes(size - len(raw))
        return struct.pack(self.st.prefix + code, v)

    def user_data(self, table: Table, values: Sequence, *, formatted: int = L.FORMATTED_USER_DATA,
                  record_type: int = 0x00) -> bytes:
        """Record header + Formatted User Data Record of one row (values in catalog order)."""
        cols = self._columns(table)
        fixed_len = sum(size + (1 if col.nullable else 0) for col, _, _, size, _ in cols)
        fixed = bytearray()
        var = bytearray()
        for (col, code, nvals, size, enc), v in zip(cols, values, strict=True):
            if v is None:
                if not col.nullable:
                    raise ValueError(f"NULL in NOT NULL column {col.name}")
                fixed += bytes(size) + bytes((L.NULL_FLAG_NULL,))
                continue
            if nvals == 2:
                raw = v.encode(enc) if isinstance(v, str) else bytes(v)
                fixed += self.st.variable_ref.pack(fixed_len + len(var), len(raw))
                var += raw
            else:
                fixed += self._fixed_value(col, code, size, enc, v)
            if col.nullable:
                fixed += bytes((L.NULL_FLAG_VALUE,))
        assert len(fixed) == fixed_len
        fud = self.st.fud_header.pack(formatted, fixed_len) + bytes(fixed) + bytes(var)
        return self.st.record_header.pack(record_type, 4 + len(fud)) + fud

    # ------------------------------------------------------------- DMS bodies
    def row_body(self, func: int, table_id: str, rid: int, image: bytes, *, free: int = 0,
                 ofs: int = 0) -> bytes:
        return self.dms_header(func, table_id) + \
            self.st.row_block.pack(rid, len(image), free, ofs) + image

    def insert(self, table: Table, rid: int, values: Sequence, **kw) -> bytes:
        return self.row_body(L.DMS_INSERT, table.id, rid, self.user_data(table, values, **kw))

    def delete(self, table: Table, rid: int, values: Sequence, **kw) -> bytes:
        return self.row_body(L.DMS_DELETE, table.id, rid, self.user_data(table, values, **kw))

    def update(self, table: Table, rid: int, old: Sequence, new: Sequence) -> bytes:
        """Old image, a second DMS header block, the new image (Table 109)."""
        old_img = self.user_data(table, old)
        new_img = self.user_data(table, new)
        return self.row_body(L.DMS_UPDATE, table.id, rid, old_img) + \
            self.row_body(L.DMS_UPDATE, table.id, rid, new_img)

    def undo_insert(self, table_id: str, rid: int, reclen: int = 0) -> bytes:
        return self.dms_header(L.DMS_UNDO_INSERT, table_id) + \
            self.st.undo_insert.pack(rid, reclen, 0)

    def undo_delete(self, table: Table, rid: int, values: Sequence) -> bytes:
        """Rollback delete: the row put back."""
        return self.row_body(L.DMS_UNDO_DELETE, table.id, rid, self.user_data(table, values))

    def undo_update(self, table: Table, rid: int, values: Sequence) -> bytes:
        """Rollback update: the old image put back."""
        return self.row_body(L.DMS_UNDO_UPDATE, table.id, rid, self.user_data(table, values))

    def add_columns(self, table_id: str, old: int, new: int, *, undo: bool = False) -> bytes:
        func = L.DMS_UNDO_ADD_COLUMNS if undo else L.DMS_ADD_COLUMNS
        return self.dms_header(func, table_id) + self.st.add_columns.pack(old, new) + \
            bytes(old * L.OLD_COLUMN_ELEMENT + new * L.NEW_COLUMN_ELEMENT)

    def alter_column(self, table_id: str, colno: int, old: int, new: int, *,
                     undo: bool = False) -> bytes:
        func = L.DMS_UNDO_ALTER_COLUMN if undo else L.DMS_ALTER_COLUMN
        return self.dms_header(func, table_id) + self.st.alter_column.pack(colno, old, new)

    def alter_attribute(self, table_id: str, mask: int = 0x1, values: int = 0x1) -> bytes:
        return self.dms_header(L.DMS_ALTER_ATTRIBUTE, table_id) + \
            self.st.alter_attribute.pack(mask, values)

    def init_table(self, table_id: str, ncols: int = 0) -> bytes:
        desc = bytes((0, 0)) + self.st.u2.pack(ncols) + bytes(8 * ncols)
        return self.dms_header(L.DMS_INIT_TABLE, table_id) + \
            self.st.init_table.pack(L.ZERO_LSN, 0, 0, 0, 0, 0, len(desc)) + desc

    # ------------------------------------------------------------- DOM bodies
    def create_table(self, table_id: str, *, undo: bool = False) -> bytes:
        func = L.DOM_UNDO_CREATE_TABLE if undo else L.DOM_CREATE_TABLE
        return self.dom_header(func, table_id) + self.st.table_object.pack(bytes(56))

    def drop_table(self, table_id: str) -> bytes:
        return self.dom_header(L.DOM_DROP_TABLE, table_id) + self.st.table_object.pack(bytes(56))

    def index(self, table_id: str, token: int, root: int = 0, *, drop: bool = False) -> bytes:
        func = L.DOM_DROP_INDEX if drop else L.DOM_CREATE_INDEX
        ts, _ = table_ids(table_id)
        return self.dom_header(func, table_id, obj=(ts, token), object_type=1) + \
            self.st.index.pack(token, root)

    def truncate(self, table_id: str, internal: bytes = b"") -> bytes:
        return self.dom_header(L.DOM_TRUNCATE, table_id) + internal

    def reorg(self, table_id: str, index_token: int = 0) -> bytes:
        return self.dom_header(L.DOM_REORG, table_id) + \
            self.st.reorg.pack(bytes(252), index_token, 0)


def concat(records: Iterable[bytes]) -> bytes:
    return b"".join(records)
