"""ORACLE (tests only): the per-record Oracle Rdb decoder as it was before the columnar rewrite of
decoders/rdb/decoder.py; tests/test_rdb_oracle.py checks that both give the same rows.

Decoder of Oracle Rdb LogMiner binary output (SPEC section 3, rdb).

LogMiner writes only committed work, transaction by transaction in commit order, with only
the final image of each row per transaction. So every ``M``/``D`` row ends (commits) its
transaction by itself: it carries ``trx_end = commit`` with the commit position and time
read from its own header, and a transaction needs no commit record. A ``C`` record, when
present (``/INCLUDE=ACTION=COMMIT``), is a ``commit`` row (control bucket) with the same
commit position.

Values, all fixed-width hex (text order = log order):

``trx_id``           TSN, decimal.
``commit_position``  COMMIT_TAD ticks (16 hex digits) + TSN (16 hex digits). COMMIT_TAD is the
                     source-local VMS time as written; TSN breaks ties within one tick.
``position``         commit_position + the record's number within its transaction in this
                     archive (8 hex digits, from 0, in file order; the ``C`` record, written
                     last, gets the next number). ``trx_order`` = ``position``. LogMiner writes
                     a transaction's records together, so a transaction is not split across
                     archives.
``commit_ts``        COMMIT_TAD read as local time of ``ctx.timezone`` (zoneinfo; an ambiguous
                     local time takes its first occurrence), as UTC.
``row_id``           DBK as ``area:page:line`` (decimal; bit layout in ``layout.py``).
``table_id``         the catalog id of RECORD_TYPE (decimal); when RECORD_TYPE is not in the
                     catalog, the catalog table whose name is RELATION_NAME (trimmed), and then
                     its catalog id; neither: the record is quarantined (``unknown_table``).

Row data: columns in catalog order at fixed offsets (one precompiled ``struct.Struct`` per
table; a NULL column still occupies its width and its bytes are not read; VARCHAR(n) is a
2-byte length then always n bytes). DATE VMS and TIMESTAMP are 8-byte signed 100 ns ticks
since 1858-11-17, source-local, truncated to microseconds; a DATE column keeps the day only
(SPEC section 5 renders DATE as ``YYYY-MM-DD``). CHAR/VARCHAR are decoded in the table's
``encoding``, default latin-1 (DEC MCS, Rdb's default character set). Null bit vector bits
after the last column's are unused and ignored. DATA_LEN must equal the table's row width
and NBV_LEN its column count, else the record is quarantined (``corrupt``) and decoding goes
on after it. A catalog table with a column type LogMiner does not write (DECIMAL, TIME,
BINARY, LOBs...) cannot describe a row: its records are quarantined as ``unknown_table``.

Every record read gives exactly one sink row (``n_records = 1``). A record whose header or
data runs past the end of the file, or whose ACTION is unknown (the record length cannot be
known), makes resynchronisation impossible: the rest of the file is quarantined as one row
at that offset and decoding stops.
"""

from __future__ import annotations

import datetime as _dt
import struct
from operator import itemgetter
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from decoders import codecs as C
from decoders.base import DecodeContext, hexpos
from decoders.catalog import Catalog, Table
from decoders.errors import BadValue, ConfigError, Corrupt, DecodeError, NeedData, UnknownRecordType, \
    UnknownTable
from decoders.events import RAW_HEX_LIMIT, EventSink
from decoders.rdb import layout as L

_UTC = _dt.timezone.utc


# --------------------------------------------------------------------------- row data

def _char(encoding: str, name: str):
    def conv(raw: tuple, slot: int):
        return C.decode_text(raw[slot], encoding, f"CHAR column {name}")
    return conv


def _varchar(encoding: str, name: str, length: int):
    def conv(raw: tuple, slot: int):
        n = raw[slot]
        if n > length:
            raise BadValue("VARCHAR length beyond the column's length",
                           expected=f"<= {length}", actual=n)
        return C.decode_text(raw[slot + 1][:n], encoding, f"VARCHAR column {name}")
    return conv


def _date(raw: tuple, slot: int):
    return C.decode_vms_time(raw[slot]).date()


def _timestamp(raw: tuple, slot: int):
    return C.decode_vms_time(raw[slot])


class RowCodec:
    """Row data of one table: one precompiled ``struct.Struct`` over all columns (fixed width:
    a NULL column occupies its width, a VARCHAR always its full length), then conversions
    only for the columns that need one (text, VMS times)."""

    __slots__ = ("table", "struct", "width", "ncols", "pick", "convs", "notnull_mask", "all_mask",
                 "render")

    def __init__(self, table: Table) -> None:
        self.table = table
        enc = table.encoding or L.DEFAULT_ENCODING
        codes = []
        slots = []
        convs = []
        slot = 0
        notnull = 0
        for j, col in enumerate(table.columns):
            try:
                code, _ = L.column_codes(col)
            except KeyError:
                raise UnknownTable("the catalog gives the table a column type LogMiner does "
                                   "not write, so it cannot describe the row",
                                   path=f"catalog {table.qualified_name}.{col.name}",
                                   expected=", ".join(L.RDB_TYPES), actual=col.type) from None
            codes.append(code)
            slots.append(slot)
            if col.type == "CHAR":
                convs.append((j, slot, _char(enc, col.name), col.name))
            elif col.type == "VARCHAR":
                convs.append((j, slot, _varchar(enc, col.name, col.length or 0), col.name))
            elif col.type == "DATE":
                convs.append((j, slot, _date, col.name))
            elif col.type == "TIMESTAMP":
                convs.append((j, slot, _timestamp, col.name))
            slot += 2 if col.type == "VARCHAR" else 1
            if not col.nullable:
                notnull |= 1 << j
        self.struct = struct.Struct("<" + "".join(codes))
        self.width = self.struct.size
        self.ncols = len(table.columns)
        self.pick = itemgetter(*slots) if len(slots) > 1 else (lambda raw, s=slots[0]: (raw[s],))
        self.convs = tuple(convs)
        self.notnull_mask = notnull
        self.all_mask = (1 << self.ncols) - 1
        self.render = C.RowRenderer(table.columns)

    def values(self, data: bytes, offset: int, nulls: int) -> list:
        """Column values of the row data at ``offset``; ``nulls`` is the null bit vector as an
        integer (bit i = column i is NULL). The caller has checked the bounds."""
        raw = self.struct.unpack_from(data, offset)
        vals = list(self.pick(raw))
        nulls &= self.all_mask        # bits after the last column's are unused
        if nulls:
            bad = nulls & self.notnull_mask
            if bad:
                j = (bad & -bad).bit_length() - 1
                raise BadValue("NULL in a NOT NULL column", path=f"NBV bit {j} column "
                               f"{self.table.columns[j].name}", expected=0, actual=1)
        name = None
        try:
            if nulls:
                for j, slot, conv, name in self.convs:
                    if not (nulls >> j) & 1:
                        vals[j] = conv(raw, slot)
                while nulls:
                    low = nulls & -nulls
                    vals[low.bit_length() - 1] = None
                    nulls ^= low
            else:
                for j, slot, conv, name in self.convs:
                    vals[j] = conv(raw, slot)
        except DecodeError as exc:
            exc.path = exc.path or f"DATA column {name}"
            raise
        return vals

    def decode(self, data: bytes, offset: int, nulls: int) -> str:
        return self.render(self.values(data, offset, nulls))


# --------------------------------------------------------------------------- tables

class Tables:
    """RECORD_TYPE / RELATION_NAME -> (table, codec), cached per archive."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.by_type: dict[int, RowCodec | None] = {}
        self.by_name: dict[bytes, RowCodec | None] = {}
        self.codecs: dict[str, RowCodec] = {}

    def _codec(self, table: Table) -> RowCodec:
        codec = self.codecs.get(table.id)
        if codec is None:
            codec = self.codecs[table.id] = RowCodec(table)
        return codec

    def get(self, record_type: int, relation_name: bytes) -> RowCodec:
        codec = self.by_type.get(record_type, False)
        if codec is False:
            table = self.catalog.table(str(record_type))
            codec = self.by_type[record_type] = self._codec(table) if table else None
        if codec is not None:
            return codec
        codec = self.by_name.get(relation_name, False)
        if codec is False:
            name = relation_name.decode("latin-1").rstrip(" \x00")
            table = self._by_name(name)
            codec = self.by_name[relation_name] = self._codec(table) if table else None
        if codec is not None:
            return codec
        raise UnknownTable("neither RECORD_TYPE nor RELATION_NAME is in the catalog",
                           path="RECORD_TYPE/RELATION_NAME", expected="a catalog table",
                           actual=f"{record_type} / "
                                  f"{relation_name.decode('latin-1').rstrip(' ' + chr(0))!r}")

    def _by_name(self, name: str) -> Table | None:
        if not name:
            return None
        for t in self.catalog.tables:
            if t.name == name:
                return t
        upper = name.upper()
        for t in self.catalog.tables:
            if t.name.upper() == upper:
                return t
        return None


# --------------------------------------------------------------------------- times

class CommitClock:
    """COMMIT_TAD (source-local VMS ticks) -> (commit_position prefix, UTC commit_ts);
    remembers the last value (all records of a transaction carry the same COMMIT_TAD)."""

    __slots__ = ("zone", "last_ticks", "last_ts")

    def __init__(self, timezone: str) -> None:
        try:
            self.zone = ZoneInfo(timezone or "UTC")
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ConfigError("sources", "timezone", f"unknown time zone {timezone!r}") from exc
        self.last_ticks = None
        self.last_ts = None

    def utc(self, ticks: int) -> _dt.datetime:
        if ticks == self.last_ticks:
            return self.last_ts
        try:
            local = C.decode_vms_time(ticks)
        except DecodeError as exc:
            exc.path = exc.path or "COMMIT_TAD"
            raise
        try:
            ts = local.replace(tzinfo=self.zone).astimezone(_UTC)
        except (OverflowError, ValueError) as exc:
            raise BadValue("COMMIT_TAD cannot be converted to UTC", path="COMMIT_TAD",
                           expected="a time within years 1-9999 in UTC", actual=ticks) from exc
        self.last_ticks, self.last_ts = ticks, ts
        return ts


def local_to_utc(local: _dt.datetime, timezone: str) -> _dt.datetime:
    """The conversion ``CommitClock`` applies, for the generator and tests."""
    return local.replace(tzinfo=ZoneInfo(timezone or "UTC")).astimezone(_UTC)


def commit_position(commit_tad: int, tsn: int) -> str:
    return hexpos(commit_tad, L.TICKS_HEX) + hexpos(tsn, L.TSN_HEX)


# --------------------------------------------------------------------------- records -> events

def decode(data: bytes, ctx: DecodeContext, sink: EventSink) -> None:
    tables = Tables(ctx.catalog)
    clock = CommitClock(ctx.timezone)
    seq: dict[int, int] = {}                  # TSN -> records of it seen in this archive
    n = len(data)
    row_hdr, commit_hdr, commit_data = L.ROW_HEADER, L.COMMIT_HEADER, L.COMMIT_DATA
    row_size, commit_size = row_hdr.size, commit_hdr.size
    act_m, act_d, act_c = L.ACTION_MODIFY[0], L.ACTION_DELETE[0], L.ACTION_COMMIT[0]
    from_bytes = int.from_bytes
    add = sink.add
    seq_hex = f"%0{L.SEQ_HEX}X"
    last_tsn = last_tad = cpos = ts = trx = None     # the transaction of the previous record
    off = 0
    index = 0

    def rest_of_file(exc: DecodeError) -> None:
        sink.quarantine(exc.located(offset=off, record_index=index), off, index,
                        data[off:off + RAW_HEX_LIMIT])

    while off < n:
        action = data[off]
        if action == act_m or action == act_d:
            if off + row_size > n:
                rest_of_file(NeedData("truncated record header", path="header",
                                      expected=row_size, actual=n - off))
                return None
            (_, rel, rtype, len_data, nbv_bits, dbk, _start, commit_tad, tsn, _version) = \
                row_hdr.unpack_from(data, off)
            data_off = off + row_size
            nbv_off = data_off + len_data
            end = nbv_off + ((nbv_bits + 7) >> 3)
            if end > n:
                rest_of_file(NeedData("record data and null bit vector run past the end of "
                                      "the file", path="DATA_LEN/NBV_LEN",
                                      expected=end - off, actual=n - off))
                return None
            cnt = seq.get(tsn, 0)
            seq[tsn] = cnt + 1
            position = None
            try:
                if tsn != last_tsn or commit_tad != last_tad:
                    ts = clock.utc(commit_tad)
                    cpos = commit_position(commit_tad, tsn)
                    trx = str(tsn)
                    last_tsn, last_tad = tsn, commit_tad
                position = cpos + seq_hex % cnt
                codec = tables.get(rtype, rel)
                if len_data != codec.width:
                    raise Corrupt("DATA_LEN does not match the table's row width",
                                  path=f"DATA_LEN ({codec.table.qualified_name})",
                                  expected=codec.width, actual=len_data)
                if nbv_bits != codec.ncols:
                    raise Corrupt("NBV_LEN does not match the table's column count",
                                  path=f"NBV_LEN ({codec.table.qualified_name})",
                                  expected=codec.ncols, actual=nbv_bits)
                nulls = from_bytes(data[nbv_off:end], "little") if nbv_bits else 0
                image = codec.decode(data, data_off, nulls)
            except DecodeError as exc:
                sink.quarantine(exc.located(offset=off, record_index=index), off, index,
                                data[off:min(end, off + RAW_HEX_LIMIT)], trx_id=str(tsn),
                                position=position)
            else:
                table = codec.table
                if action == act_m:
                    op, before, after = "m", None, image
                else:
                    op, before, after = "d", image, None
                add("change", off, index, 1, trx_id=trx, position=position,
                    trx_order=position, trx_end="commit", commit_position=cpos, commit_ts=ts,
                    op=op, table_id=table.id, schema_name=table.schema,
                    table_name=table.name, before=before, after=after, row_id=L.dbk_text(dbk))
        elif action == act_c:
            if off + commit_size > n:
                rest_of_file(NeedData("truncated commit record header", path="header",
                                      expected=commit_size, actual=n - off))
                return None
            (_, _rel, _rtype, len_data, nbv_bits, _tid, _pid, _start, commit_tad, tsn) = \
                commit_hdr.unpack_from(data, off)
            data_off = off + commit_size
            end = data_off + len_data + ((nbv_bits + 7) >> 3)
            if end > n:
                rest_of_file(NeedData("commit record data runs past the end of the file",
                                      path="DATA_LEN", expected=end - off, actual=n - off))
                return None
            cnt = seq.get(tsn, 0)
            seq[tsn] = cnt + 1
            position = None
            try:
                if tsn != last_tsn or commit_tad != last_tad:
                    ts = clock.utc(commit_tad)
                    cpos = commit_position(commit_tad, tsn)
                    trx = str(tsn)
                    last_tsn, last_tad = tsn, commit_tad
                position = cpos + seq_hex % cnt
                if len_data < commit_data.size:
                    raise Corrupt("commit record DATA_LEN shorter than RM_TID_LEN + AERCP_LEN",
                                  path="DATA_LEN", expected=f">= {commit_data.size}",
                                  actual=len_data)
                len_rm_tid, len_aercp = commit_data.unpack_from(data, data_off)
                if commit_data.size + len_rm_tid + len_aercp != len_data:
                    raise Corrupt("commit record: RM_TID_LEN + AERCP_LEN do not fill DATA_LEN",
                                  path="RM_TID_LEN/AERCP_LEN",
                                  expected=len_data - commit_data.size,
                                  actual=len_rm_tid + len_aercp)
                if nbv_bits:
                    raise Corrupt("commit record with a null bit vector", path="NBV_LEN",
                                  expected=0, actual=nbv_bits)
            except DecodeError as exc:
                sink.quarantine(exc.located(offset=off, record_index=index), off, index,
                                data[off:min(end, off + RAW_HEX_LIMIT)], trx_id=str(tsn),
                                position=position)
            else:
                add("commit", off, index, 1, trx_id=trx, position=position,
                    trx_order=position, trx_end="commit", commit_position=cpos, commit_ts=ts)
        else:
            rest_of_file(UnknownRecordType(
                "unknown ACTION: the record's length cannot be known, rest of file quarantined",
                path="ACTION", expected="M, D or C", actual=f"0x{action:02X}"))
            return None
        off = end
        index += 1
    return None
