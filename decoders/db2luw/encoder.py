"""Encoder of Db2 LUW log-read buffer streams, Version 7 and v10: the inverse of ``decoder``
(tests, sample nights, benchmarks). Every record is written with the same layouts the decoder
reads with (``layout.py``), in the source byte order."""

from __future__ import annotations

import decimal
from typing import Iterable, Sequence

from .. import codecs as C
from ..catalog import Table
from . import layout as L


def table_ids(table_id: str) -> tuple[int, int]:
    """``"2.5"`` -> (tablespace id 2, table id 5)."""
    ts, tb = table_id.split(".")
    return int(ts), int(tb)


def lsn(n: int) -> bytes:
    """A Version 7 LSN (6 bytes, big-endian)."""
    return n.to_bytes(6, "big")


def tid(n: int) -> bytes:
    """A transaction id (6 bytes)."""
    return n.to_bytes(6, "big")


ZERO_LSN = lsn(0)


def rid_bytes(rid: int) -> bytes:
    """A v10 RID (6 opaque bytes) from a number (big-endian, so its hex reads as the number)."""
    return rid.to_bytes(6, "big")


class Encoder:
    """Writes records of one layout (``v7`` / ``v10``) in one byte order and code page."""

    def __init__(self, byte_order: str = "little", codepage: str = "utf-8", layout: str = "v7") -> None:
        self.variant = L.variant(layout)
        self.lay = self.variant.layouts(byte_order)
        self.byte_order = byte_order
        self.codepage = codepage
        self._rows: dict[int, tuple] = {}

    # ------------------------------------------------------------- record framing
    def record(self, lsn_: bytes, rtype: str, body: bytes, *, tid_: bytes,
               prev: bytes = ZERO_LSN, flags: int = L.FLAG_PROPAGATABLE,
               undo_next: bytes | None = None, compensated: bytes | None = None) -> bytes:
        """Version 7: LSN prefix + Log Manager header + body. A ``C`` record gets the 26-byte
        header, or the 32-byte one when ``flags`` has the propagatable bit."""
        v, lay = self.variant, self.lay
        assert v is L.V7, "record() writes Version 7 records; use record10() for v10"
        code = ord(rtype)
        size = v.header_size_of(code, flags)
        fields = dict(len_record=size + len(body), record_type=code, flags=flags, lsn_prev=prev,
                      tid=tid_)
        if size > v.header_size:
            fields["lsn_undo_next"] = undo_next if undo_next is not None else ZERO_LSN
            fields["lsn_compensated"] = compensated if compensated is not None else ZERO_LSN
        head = lay.compensation.pack(**fields)[:size]
        return lay.prefix.pack(lsn_) + head + body

    def record10(self, lsn_: int, rtype: int, body: bytes, *, tid_: bytes, lfs: int, lso: int,
                 lso_prev: int = 0, flags: int = L.FLAG_PROPAGATABLE, stream: int = 0,
                 undo_next: int | None = None, compensated: int | None = None,
                 sqlcode: int = 0) -> bytes:
        """v10: ``db2ReadLogFilterData`` (type-1 LRI = LFS, LSN; type-2 LRI part1 = the
        record's own LSO) + the 40/56/64-byte header + body."""
        v, lay = self.variant, self.lay
        assert v is L.V10, "record10() writes v10 records; use record() for Version 7"
        size = v.header_size_of(rtype, flags)
        length = size + len(body)
        fields = dict(len_record=length, record_type=rtype, flags=flags, lsn=lsn_, lfs=lfs,
                      lso_prev=lso_prev, tid=tid_, log_stream_id=stream)
        if size > v.header_size:
            fields.update(extra_stream_id=stream, lso_undo_next=undo_next or 0,
                          lso_compensated=compensated or 0)
        head = lay.compensation.pack(**fields)[:size]
        prefix = lay.prefix.pack(lri1_type=1, lri1_part1=lfs, lri1_part2=lsn_, lri2_type=2,
                                 lri2_part1=lso, len_real_record=length, sqlcode=sqlcode)
        return prefix + head + body

    def commit(self, secs: int, authid: str = "", *, propagatable: bool = True) -> bytes:
        """Commit body: V7 time + authid (the rest); v10 time u64 + (propagatable only)
        authid length + authid."""
        if self.variant is L.V7:
            return self.lay.commit.pack(secs) + authid.encode("ascii")
        if not propagatable:
            return self.lay.commit.pack(secs, 0)[:L.COMMIT_V10_BASIC]
        raw = authid.encode("ascii")
        return self.lay.commit.pack(secs, len(raw)) + raw

    def abort(self, authid: str = "") -> bytes:
        """Abort body: empty in V7 (none is documented); v10 authid length + authid."""
        if self.variant is L.V7:
            return b""
        raw = authid.encode("ascii")
        return self.lay.abort.pack(len(raw)) + raw

    # ------------------------------------------------------------- component headers
    def dms_header(self, func: int, table_id: str) -> bytes:
        return self.lay.dms.pack(L.COMPONENT_DMS, func, *table_ids(table_id))

    def dom_header(self, func: int, table_id: str, obj: tuple[int, int] | None = None,
                   object_type: int = 0, flags: int = 0) -> bytes:
        ts, tb = table_ids(table_id)
        ots, oid = obj if obj is not None else (ts, tb)
        return self.lay.dom.pack(L.COMPONENT_DOM, func, ots, oid, ts, tb, object_type, flags)

    def _dom(self, layout, func: int, table_id: str, obj=None, object_type: int = 0,
             **fields) -> bytes:
        ts, tb = table_ids(table_id)
        ots, oid = obj if obj is not None else (ts, tb)
        return layout.pack(component_id=L.COMPONENT_DOM, function_id=func, obj_tablespace_id=ots,
                           obj_id=oid, tablespace_id=ts, table_id=tb, object_type=object_type,
                           **fields)

    def _dms(self, layout, func: int, table_id: str, **fields) -> bytes:
        ts, tb = table_ids(table_id)
        return layout.pack(component_id=L.COMPONENT_DMS, function_id=func, tablespace_id=ts,
                           table_id=tb, **fields)

    # ------------------------------------------------------------- row images
    def _row(self, table: Table) -> tuple:
        got = self._rows.get(id(table))
        if got is None or got[3] is not table:      # the table is kept: its id stays its own
            lay = L.row_layout(table.columns, self.byte_order)
            enc = table.encoding or self.codepage
            got = self._rows[id(table)] = (lay, enc, {f.name: f for f in lay.fields}, table)
        return got

    def _fixed_value(self, col, size: int, enc: str, v):
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
        return v

    def user_data(self, table: Table, values: Sequence, *, formatted: int = L.FORMATTED_USER_DATA,
                  record_type: int = 0x00) -> bytes:
        """Record header + Formatted User Data Record of one row (values in catalog order)."""
        lay, enc, by_name, _ = self._row(table)
        fixed_len = lay.size
        named: dict = {}
        var = bytearray()
        for i, (col, v) in enumerate(zip(table.columns, values, strict=True)):
            if v is None:
                if not col.nullable:
                    raise ValueError(f"NULL in NOT NULL column {col.name}")
                named[f"c{i}_null"] = L.NULL_FLAG_NULL
                continue
            if col.type in L.VARIABLE_TYPES:
                raw = v.encode(enc) if isinstance(v, str) else bytes(v)
                named[f"c{i}_ofs"], named[f"c{i}_len"] = fixed_len + len(var), len(raw)
                var += raw
            else:
                named[f"c{i}"] = self._fixed_value(col, by_name[f"c{i}"].size, enc, v)
        fixed = lay.pack(**named)
        fud = self.lay.fud_header.pack(formatted, fixed_len) + fixed + bytes(var)
        return self.lay.record_header.pack(record_type, 4 + len(fud)) + fud

    # ------------------------------------------------------------- DMS bodies
    def _rid(self, rid):
        if self.variant is L.V7:
            return rid
        return rid if isinstance(rid, bytes) else rid_bytes(rid)

    def row_body(self, func: int, table_id: str, rid, image: bytes, *, free: int = 0,
                 ofs: int = 0) -> bytes:
        """DMS header + the row block of ``func`` + the image (record header and data)."""
        layout = self.lay.rows.get(func, self.lay.row)
        return self._dms(layout, func, table_id, rid=self._rid(rid), len_record=len(image),
                         free_space=free, ofs_record=ofs) + image

    def insert(self, table: Table, rid, values: Sequence, *, empty_page: bool = False, **kw) -> bytes:
        v = self.variant
        func = L.V10_INSERT_EMPTY if empty_page else v.INSERT
        return self.row_body(func, table.id, rid, self.user_data(table, values, **kw))

    def delete(self, table: Table, rid, values: Sequence, *, empty_page: bool = False, **kw) -> bytes:
        v = self.variant
        func = L.V10_DELETE_EMPTY if empty_page else v.DELETE
        return self.row_body(func, table.id, rid, self.user_data(table, values, **kw))

    def update(self, table: Table, rid, old: Sequence, new: Sequence) -> bytes:
        """Old image, a second DMS header block, the new image (Table 109)."""
        u = self.variant.UPDATE
        return self.row_body(u, table.id, rid, self.user_data(table, old)) + \
            self.row_body(u, table.id, rid, self.user_data(table, new))

    def undo_insert(self, table_id: str, rid, reclen: int = 0, *, empty_page: bool = False) -> bytes:
        func = L.V10_UNDO_INSERT_EMPTY if empty_page else L.DMS_UNDO_INSERT
        return self._dms(self.lay.undo_insert, func, table_id, rid=self._rid(rid),
                         len_record=reclen, free_space=0)

    def undo_delete(self, table: Table, rid, values: Sequence, *, empty_page: bool = False) -> bytes:
        """Rollback delete: the row put back."""
        func = L.V10_UNDO_DELETE_EMPTY if empty_page else L.DMS_UNDO_DELETE
        return self.row_body(func, table.id, rid, self.user_data(table, values))

    def undo_update(self, table: Table, rid, values: Sequence) -> bytes:
        """Rollback update: the old image put back."""
        return self.row_body(L.DMS_UNDO_UPDATE, table.id, rid, self.user_data(table, values))

    def add_columns(self, table_id: str, old: int, new: int, *, undo: bool = False) -> bytes:
        func = L.DMS_UNDO_ADD_COLUMNS if undo else L.DMS_ADD_COLUMNS
        return self._dms(self.lay.add_columns, func, table_id, num_old_columns=old,
                         num_new_columns=new) + \
            bytes(old * L.OLD_COLUMN_ELEMENT + new * L.NEW_COLUMN_ELEMENT)

    def alter_column(self, table_id: str, colno: int, old: int, new: int, *,
                     undo: bool = False) -> bytes:
        func = L.DMS_UNDO_ALTER_COLUMN if undo else L.DMS_ALTER_COLUMN
        return self._dms(self.lay.alter_column, func, table_id, colno=colno, old_length=old,
                         new_length=new)

    def alter_attribute(self, table_id: str, mask: int = 0x1, values: int = 0x1) -> bytes:
        return self._dms(self.lay.alter_attribute, L.DMS_ALTER_ATTRIBUTE, table_id,
                         alter_mask=mask, alter_values=values)

    def init_table(self, table_id: str, ncols: int = 0) -> bytes:
        desc = self.lay.table_description.pack(record_type=0, num_columns=ncols) + \
            bytes(L.COLUMN_DESCRIPTOR * ncols)
        return self._dms(self.lay.init_table, L.DMS_INIT_TABLE, table_id,
                         len_table_description=len(desc)) + desc

    # ------------------------------------------------------------- DOM bodies
    def create_table(self, table_id: str, *, undo: bool = False) -> bytes:
        func = L.DOM_UNDO_CREATE_TABLE if undo else L.DOM_CREATE_TABLE
        return self._dom(self.lay.table_object, func, table_id, internal=bytes(56))

    def drop_table(self, table_id: str) -> bytes:
        return self._dom(self.lay.table_object, L.DOM_DROP_TABLE, table_id, internal=bytes(56))

    def index(self, table_id: str, token: int, root: int = 0, *, drop: bool = False) -> bytes:
        func = L.DOM_DROP_INDEX if drop else L.DOM_CREATE_INDEX
        ts, _ = table_ids(table_id)
        return self._dom(self.lay.index, func, table_id, obj=(ts, token), object_type=1,
                         index_token=token, index_root_page=root)

    def truncate(self, table_id: str, internal: bytes = b"") -> bytes:
        return self._dom(self.lay.truncate, L.DOM_TRUNCATE, table_id) + internal

    def reorg(self, table_id: str, index_token: int = 0) -> bytes:
        return self._dom(self.lay.reorg, L.DOM_REORG, table_id, internal=bytes(252),
                         index_token=index_token)


def concat(records: Iterable[bytes]) -> bytes:
    return b"".join(records)
