"""Decoder of Oracle Rdb LogMiner binary output (SPEC section 3, rdb).

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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import codecs as C
from ..base import DecodeContext, hexpos
from ..framing import Damage, Frames, concat_text, resync, split_ranges
from ..layout import as_uint8
from ..render import render_rows
from ..vectors import text as vtext, text_fixed, vms_times
from ..catalog import Catalog, Table
from ..errors import BadValue, ConfigError, Corrupt, DecodeError, NeedData, UnknownRecordType, \
    UnknownTable
from ..events import RAW_HEX_LIMIT, EventSink
from . import layout as L

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
                 "render", "layout", "notnull_bool", "encoding")

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
                                   "not write, so it cannot describe the row", table_id=table.id,
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
        # the fast path's view of the row: (column, byte offset, "CHAR" | "VARCHAR" | dtype)
        layout, off = [], 0
        for col in table.columns:
            kind = col.type if col.type in ("CHAR", "VARCHAR") else np.dtype(L.NUMPY_COLUMNS[col.type])
            layout.append((col, off, kind))
            off += L.column_codes(col)[1]
        self.layout = tuple(layout)
        self.notnull_bool = np.array([not c.nullable for c in table.columns], dtype=bool)
        self.encoding = enc

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
                           table_id=str(record_type),
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


_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_UTC)
_EPOCH_NAIVE = _dt.datetime(1970, 1, 1)
_ONE_US = _dt.timedelta(microseconds=1)
OFFSET_STEP_US = 15 * 60 * 1_000_000     # local time spans whose UTC offset is read at both ends


def _to_utc_us(us: int, zone) -> int | None:
    """``CommitClock``'s conversion of one local time (microseconds since 1970, naive) to
    UTC microseconds; None where it cannot be (beyond years 1-9999 either side)."""
    try:
        loc = _EPOCH_NAIVE + _dt.timedelta(microseconds=us)
        return (loc.replace(tzinfo=zone).astimezone(_UTC) - _EPOCH_UTC) // _ONE_US
    except (OverflowError, ValueError):
        return None


def local_to_utc_us(local_us: np.ndarray, zone) -> tuple[np.ndarray, np.ndarray]:
    """``_to_utc_us`` of every value of the sorted ``local_us`` (UTC microseconds, 0 where it
    cannot be) and the mask of those. The offset (UTC - local, ``fold=0``: the first of an
    ambiguous local time, the offset before a gap for a missing one) is a step function of
    the local time that steps only at the zone's transitions, months apart: it is read with
    Python at both ends of each ``OFFSET_STEP_US`` span holding values, and where both ends
    agree the span's values take it; a span with a transition (or a bound of the calendar)
    in it is converted value by value."""
    out = np.zeros(len(local_us), dtype=np.int64)
    bad = np.zeros(len(local_us), dtype=bool)
    if not len(local_us):
        return out, bad
    span = local_us // OFFSET_STEP_US
    cut = np.flatnonzero(np.diff(span)) + 1
    firsts = np.concatenate(([0], cut)).tolist()
    lasts = np.concatenate((cut, [len(local_us)])).tolist()
    for s, a, b in zip(span[firsts].tolist(), firsts, lasts):
        lo, hi = s * OFFSET_STEP_US, (s + 1) * OFFSET_STEP_US - 1
        u_lo, u_hi = _to_utc_us(lo, zone), _to_utc_us(hi, zone)
        if u_lo is not None and u_hi is not None and u_lo - lo == u_hi - hi:
            out[a:b] = local_us[a:b] + (u_lo - lo)
            continue
        for k in range(a, b):
            got = _to_utc_us(int(local_us[k]), zone)
            if got is None:
                bad[k] = True
            else:
                out[k] = got
    return out, bad


def commit_position(commit_tad: int, tsn: int) -> str:
    return hexpos(commit_tad, L.TICKS_HEX) + hexpos(tsn, L.TSN_HEX)


# --------------------------------------------------------------------------- framing

_M, _D, _C = L.ACTION_MODIFY[0], L.ACTION_DELETE[0], L.ACTION_COMMIT[0]
_ROW_SIZE, _COMMIT_SIZE = L.ROW.size, L.COMMIT.size
_LENS = L.ROW.reader(["len_data", "num_nbv_bits"])          # DATA_LEN, NBV_LEN at 36
_LENS_AT = L.ROW.offset("len_data")
_COMMIT_LENS = L.COMMIT_DATA.struct


def _shapes(catalog: Catalog) -> dict[int, tuple[int, int, str]]:
    """RECORD_TYPE -> (row width, column count, name) of every catalog table LogMiner can
    write (what framing checks a record's DATA_LEN and NBV_LEN against)."""
    out = {}
    for t in catalog.tables:
        try:
            width = sum(L.column_codes(c)[1] for c in t.columns)
        except KeyError:
            continue
        if t.id.isdigit():
            out[int(t.id)] = (width, len(t.columns), t.qualified_name)
    return out


def _length_problem(data, pos: int, n: int, shapes: dict) -> tuple[int, DecodeError | None]:
    """(length, None) for a record at ``pos`` whose framing holds, else (0, error)."""
    act = data[pos]
    if act == _M or act == _D:
        hs = _ROW_SIZE
    elif act == _C:
        hs = _COMMIT_SIZE
    else:
        return 0, UnknownRecordType(
            "unknown ACTION: the record's length cannot be known; skipped to the next "
            "plausible record", path="ACTION", expected="M, D or C", actual=f"0x{act:02X}")
    if pos + hs > n:
        what = "truncated commit record header" if act == _C else "truncated record header"
        return 0, NeedData(what, path="header", expected=hs, actual=n - pos)
    dl, nb = _LENS.unpack_from(data, pos)
    length = hs + dl + ((nb + 7) >> 3)
    if pos + length > n:
        if act == _C:
            return 0, NeedData("commit record data runs past the end of the file",
                               path="DATA_LEN", expected=length, actual=n - pos)
        return 0, NeedData("record data and null bit vector run past the end of the file",
                           path="DATA_LEN/NBV_LEN", expected=length, actual=n - pos)
    nxt = pos + length
    if nxt == n or data[nxt] in (_M, _D, _C):
        return length, None
    # the record after is no record: trust this length only if the record's own shape holds
    if act == _C:
        if nb == 0 and dl >= 8 and sum(_COMMIT_LENS.unpack_from(data, pos + hs)) + 8 == dl:
            return length, None
        return 0, Corrupt("commit record lengths lead to no record", path="DATA_LEN",
                          expected="RM_TID_LEN + AERCP_LEN + 8", actual=dl)
    rtype = int.from_bytes(data[pos + 32:pos + 36], "little")
    shape = shapes.get(rtype)
    if shape is not None and shape[0] == dl and shape[1] == nb:
        return length, None
    if shape is not None and shape[0] != dl:
        return 0, Corrupt("DATA_LEN does not match the table's row width",
                          path=f"DATA_LEN ({shape[2]})", expected=shape[0], actual=dl)
    if shape is not None:
        return 0, Corrupt("NBV_LEN does not match the table's column count",
                          path=f"NBV_LEN ({shape[2]})", expected=shape[1], actual=nb)
    return 0, Corrupt("DATA_LEN/NBV_LEN lead to no record (the bytes after it are not a record)",
                      path="DATA_LEN/NBV_LEN", expected="a record or the end of the file",
                      actual=f"0x{data[nxt]:02X} at {nxt}")


def _plausible(shapes: dict):
    """Vectorised check of candidate record starts (resynchronisation): a known ACTION, a
    length inside the archive, for M/D a printable RELATION_NAME and a (DATA_LEN, NBV_LEN)
    pair of a catalog table, for C consistent commit lengths, and the record after it a
    record (or the end)."""
    known = np.array(sorted({(w << 16) | c for w, c, _ in shapes.values()}), dtype=np.int64)

    def check(buf: np.ndarray, cand: np.ndarray) -> np.ndarray:
        n = len(buf)
        if n < _COMMIT_SIZE:
            return np.zeros(len(cand), dtype=bool)
        c = np.minimum(cand, n - _COMMIT_SIZE)
        act = buf[c]
        is_md = (act == _M) | (act == _D)
        is_c = act == _C
        hs = np.where(is_c, _COMMIT_SIZE, _ROW_SIZE)
        ok = (is_md | is_c) & (cand + hs <= n)
        dl = buf[c + 36].astype(np.int64) | (buf[c + 37].astype(np.int64) << 8)
        nb = buf[c + 38].astype(np.int64) | (buf[c + 39].astype(np.int64) << 8)
        length = hs + dl + ((nb + 7) >> 3)
        ok &= cand + length <= n
        rel = buf[c[:, None] + np.arange(1, 32)]
        printable = ((rel >= 0x20) & (rel <= 0x7E)).all(axis=1)
        md_ok = is_md & printable & np.isin((dl << 16) | nb, known)
        cd = np.minimum(c + _COMMIT_SIZE, n - 8)
        u4 = lambda o: (buf[cd + o].astype(np.int64) | (buf[cd + o + 1].astype(np.int64) << 8)
                        | (buf[cd + o + 2].astype(np.int64) << 16)
                        | (buf[cd + o + 3].astype(np.int64) << 24))
        c_ok = is_c & (nb == 0) & (dl >= 8) & (u4(0) + u4(4) + 8 == dl) & (c + _COMMIT_SIZE + 8 <= n)
        nxt = cand + length
        after = (nxt == n) | ((nxt < n) & np.isin(buf[np.minimum(nxt, n - 1)], (_M, _D, _C)))
        return ok & (md_ok | c_ok) & after

    return check


def frame(data, shapes: dict, start: int = 0, end: int | None = None) -> Frames:
    """Record starts and lengths of ``data[start:end]``, damaged spans resynchronised."""
    n = len(data) if end is None else end
    starts: list[int] = []
    lengths: list[int] = []
    damaged: list[Damage] = []
    plausible = None
    unpack = _LENS.unpack_from
    add_start, add_length = starts.append, lengths.append
    m, d, c, row_size, commit_size = _M, _D, _C, _ROW_SIZE, _COMMIT_SIZE
    pos = start
    while pos < n:
        # the common case inline: a known ACTION, lengths inside the span, a record after it
        act = data[pos]
        hs = row_size if (act == m or act == d) else commit_size if act == c else 0
        if hs and pos + hs <= n:
            dl, nb = unpack(data, pos)
            nxt = pos + hs + dl + ((nb + 7) >> 3)
            if nxt == n or (nxt < n and data[nxt] in (m, d, c)):
                add_start(pos)
                add_length(nxt - pos)
                pos = nxt
                continue
        length, err = _length_problem(data, pos, n, shapes)
        if err is None:
            add_start(pos)
            add_length(length)
            pos += length
            continue
        if plausible is None:
            plausible = _plausible(shapes)
        nxt = resync(data, pos, n, plausible)
        damaged.append(Damage(pos, nxt, err))
        pos = nxt
    return Frames(np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64), damaged)


def split(data, ctx: DecodeContext, target: int) -> list[dict]:
    """Byte ranges of one archive cut where a transaction starts that no earlier record of the
    archive belongs to (a record's position counts the records of its TSN in the archive)."""
    fr = frame(data, _shapes(ctx.catalog))
    rec_idx, _ = fr.record_indexes()
    if len(fr) < 2:
        return [{"start": 0, "end": len(data), "index": 0}]
    tsn = L.ROW.gather(data, fr.starts, ["tsn"])["tsn"] if len(data) >= _ROW_SIZE else None
    if tsn is None:
        return [{"start": 0, "end": len(data), "index": 0}]
    # a cut before record i is allowed when no TSN of records < i appears at or after i
    _, first, inverse = np.unique(tsn, return_index=True, return_inverse=True)
    last = np.zeros(len(first), dtype=np.int64)
    np.maximum.at(last, inverse, np.arange(len(tsn)))
    reach = np.maximum.accumulate(last[inverse])          # last record of any TSN seen so far
    allowed = np.zeros(len(tsn), dtype=bool)
    allowed[1:] = reach[:-1] < np.arange(1, len(tsn))
    # a damaged span starts no range: cut only at records
    ranges = split_ranges(fr.starts, len(data), target, allowed, rec_idx)
    return [{"start": a, "end": b, "index": i} for a, b, i in ranges]


# --------------------------------------------------------------------------- records -> events

class _Archive:
    """What decoding one archive (or range) needs: the catalog's codecs, the clock, the sink."""

    def __init__(self, data, ctx: DecodeContext, sink: EventSink) -> None:
        self.data = data
        self.ctx = ctx
        self.sink = sink
        self.base = ctx.offset
        self.tables = Tables(ctx.catalog)
        self.clock = CommitClock(ctx.timezone)
        self.shapes = _shapes(ctx.catalog)

    # ---------------------------------------------------------------- the careful path
    def careful(self, off: int, index: int, length: int, cnt: int) -> None:
        """One framed record, decoded on its own: exactly one row (change, commit or
        quarantine) with the precise error of anything wrong with it."""
        data, sink, at = self.data, self.sink, self.base + off
        end = off + length
        action = data[off]
        if action != _C:
            fields = L.ROW_HEADER.unpack_from(data, off)
            commit_tad, tsn = fields[7], fields[8]
        else:
            fields = L.COMMIT_HEADER.unpack_from(data, off)
            commit_tad, tsn = fields[8], fields[9]
        position = None
        try:
            ts = self.clock.utc(commit_tad)
            cpos = commit_position(commit_tad, tsn)
            position = cpos + "%08X" % cnt
            if action != _C:
                (_, rel, rtype, len_data, nbv_bits, dbk, _s, _c, _t, _v) = fields
                codec = self.tables.get(rtype, rel)
                if len_data != codec.width:
                    raise Corrupt("DATA_LEN does not match the table's row width",
                                  path=f"DATA_LEN ({codec.table.qualified_name})",
                                  expected=codec.width, actual=len_data)
                if nbv_bits != codec.ncols:
                    raise Corrupt("NBV_LEN does not match the table's column count",
                                  path=f"NBV_LEN ({codec.table.qualified_name})",
                                  expected=codec.ncols, actual=nbv_bits)
                nbv_off = off + _ROW_SIZE + len_data
                nulls = int.from_bytes(data[nbv_off:end], "little") if nbv_bits else 0
                image = codec.decode(data, off + _ROW_SIZE, nulls)
            else:
                len_data, nbv_bits = fields[3], fields[4]
                if len_data < L.COMMIT_DATA.size:
                    raise Corrupt("commit record DATA_LEN shorter than RM_TID_LEN + AERCP_LEN",
                                  path="DATA_LEN", expected=f">= {L.COMMIT_DATA.size}",
                                  actual=len_data)
                len_rm_tid, len_aercp = _COMMIT_LENS.unpack_from(data, off + _COMMIT_SIZE)
                if L.COMMIT_DATA.size + len_rm_tid + len_aercp != len_data:
                    raise Corrupt("commit record: RM_TID_LEN + AERCP_LEN do not fill DATA_LEN",
                                  path="RM_TID_LEN/AERCP_LEN",
                                  expected=len_data - L.COMMIT_DATA.size,
                                  actual=len_rm_tid + len_aercp)
                if nbv_bits:
                    raise Corrupt("commit record with a null bit vector", path="NBV_LEN",
                                  expected=0, actual=nbv_bits)
        except DecodeError as exc:
            sink.quarantine(exc.located(offset=at, record_index=index), at, index,
                            data[off:min(end, off + RAW_HEX_LIMIT)], n_bytes=length,
                            trx_id=str(tsn), position=position)
            return
        if action == _C:
            sink.add("commit", at, index, 1, n_bytes=length, trx_id=str(tsn), position=position,
                     trx_order=position, trx_end="commit", commit_position=cpos, commit_ts=ts)
            return
        table = codec.table
        op, before, after = ("m", None, image) if action == _M else ("d", image, None)
        sink.add("change", at, index, 1, n_bytes=length, trx_id=str(tsn), position=position,
                 trx_order=position, trx_end="commit", commit_position=cpos, commit_ts=ts,
                 op=op, table_id=table.id, schema_name=table.schema, table_name=table.name,
                 before=before, after=after, row_id=L.dbk_text(dbk))

    def damage(self, d: Damage, index: int) -> None:
        at = self.base + d.start
        self.sink.quarantine(d.error.located(offset=at, record_index=index), at, index,
                             self.data[d.start:min(d.end, d.start + RAW_HEX_LIMIT)],
                             n_bytes=d.length)

    # ---------------------------------------------------------------- the fast path
    def decode(self) -> None:
        data = self.data
        fr = frame(data, self.shapes)
        rec_idx, dmg_idx = fr.record_indexes(self.ctx.index)
        for d, i in zip(fr.damaged, dmg_idx):
            self.damage(d, i)
        if not len(fr):
            return
        buf = as_uint8(data)
        starts, lengths = fr.starts, fr.lengths
        head = L.COMMIT.gather(buf, starts, ["action", "relation_name", "record_type",
                                            "len_data", "num_nbv_bits", "commit_tad", "tsn"])
        act = head["action"][:, 0]
        tsn = head["tsn"]
        tad = head["commit_tad"]
        cnt = _count_within(tsn)
        careful = np.zeros(len(fr), dtype=bool)
        # commit times: per distinct COMMIT_TAD (one per transaction), not per record
        utc_us, bad_ts = self._commit_times(tad)
        careful |= bad_ts
        # commit records
        is_c = act == _C
        if is_c.any():
            ci = np.flatnonzero(is_c)
            tail = np.minimum(starts[ci] + _COMMIT_SIZE, len(buf) - 8)
            lens = L.COMMIT_DATA.gather(buf, np.where(starts[ci] + _COMMIT_SIZE + 8 <= len(buf),
                                                      tail, 0))
            dl = head["len_data"][ci].astype(np.int64)
            ok = ((head["num_nbv_bits"][ci] == 0) & (dl >= 8)
                  & (lens["len_rm_tid"].astype(np.int64) + lens["len_aercp"] + 8 == dl))
            careful[ci[~ok]] = True
        # row records, per table
        rows = np.flatnonzero(~is_c & ~careful)
        images: dict[int, tuple] = {}
        for key, members in self._groups(head, rows).items():
            codec = key
            if codec is None:
                careful[members] = True
                continue
            ok, image = self._images(codec, buf, starts[members], head, members)
            careful[members[~ok]] = True
            images[id(codec)] = (codec, members[ok], image)
        # positions and transaction columns for every record on the fast path
        fast = ~careful
        if fast.any():
            self._emit(fr, rec_idx, act, tsn, tad, cnt, utc_us, fast, is_c, images)
        for i in np.flatnonzero(careful).tolist():
            self.careful(int(starts[i]), int(rec_idx[i]), int(lengths[i]), int(cnt[i]))

    def _commit_times(self, tad: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """UTC microseconds of each COMMIT_TAD (source-local) and the rows that cannot be."""
        local, bad = vms_times(tad)
        local_us = local.astype(np.int64)
        if self.clock.zone.key == "UTC":
            return local_us, bad
        uniq, inverse = np.unique(local_us, return_inverse=True)
        conv, bad_u = local_to_utc_us(uniq, self.clock.zone)
        return conv[inverse], bad | bad_u[inverse]

    def _groups(self, head, rows: np.ndarray) -> dict:
        """RowCodec (None: unknown table) -> record positions (into the framed records)."""
        out: dict = {}
        if not len(rows):
            return out
        rtype = head["record_type"][rows]
        for t in np.unique(rtype).tolist():
            members = rows[rtype == t]
            table = self.tables.catalog.table(str(t))
            if table is not None:
                codec = self._codec(table)
                out.setdefault(codec, []).append(members)
                continue
            # RECORD_TYPE not in the catalog: by RELATION_NAME, per distinct name
            names = head["relation_name"][members]
            keys = [bytes(x) for x in names]
            by_name: dict[bytes, list[int]] = {}
            for m, k in zip(members.tolist(), keys):
                by_name.setdefault(k, []).append(m)
            for k, ms in by_name.items():
                try:
                    codec = self.tables.get(t, k)
                except DecodeError:
                    codec = None
                except Exception:
                    codec = None
                out.setdefault(codec, []).append(np.array(ms, dtype=np.int64))
        return {k: np.sort(np.concatenate(v)) for k, v in out.items()}

    def _codec(self, table: Table):
        try:
            return self.tables._codec(table)
        except DecodeError:
            return None

    def _images(self, codec: "RowCodec", buf: np.ndarray, starts: np.ndarray, head,
                members: np.ndarray) -> tuple[np.ndarray, pa.Array]:
        """(ok mask over the members, JSON images of the ok members) for one table."""
        n = len(members)
        ok = ((head["len_data"][members] == codec.width)
              & (head["num_nbv_bits"][members] == codec.ncols))
        data_at = starts + _ROW_SIZE
        if not ok.any():
            return ok, pa.array([], pa.string())
        # rows whose lengths are wrong are read at a safe place and then dropped
        data_at = np.where(ok, data_at, 0)
        nbv_len = (codec.ncols + 7) >> 3
        nulls = np.zeros((n, codec.ncols), dtype=bool)
        if nbv_len:
            nbv = _windows(buf, nbv_len)[data_at + codec.width]
            nulls = np.unpackbits(nbv, axis=1, bitorder="little")[:, :codec.ncols].astype(bool)
        ok &= ~(nulls & codec.notnull_bool).any(axis=1)
        rows = _windows(buf, codec.width)[data_at] if codec.width else np.zeros((n, 0), np.uint8)
        arrays = []
        for j, (col, off, kind) in enumerate(codec.layout):
            null = nulls[:, j]
            if kind == "VARCHAR":
                ln = rows[:, off].astype(np.int64) | (rows[:, off + 1].astype(np.int64) << 8)
                over = ln > (col.length or 0)
                ok &= ~(over & ~null)
                ln = np.where(null | over, 0, ln)
                arr, bad = vtext(buf, data_at + off + 2, ln, codec.encoding)
                ok &= ~(bad & ~null)
                arrays.append(_with_nulls(arr, null))
            elif kind == "CHAR":
                arr, bad = text_fixed(rows[:, off:off + (col.length or 0)], codec.encoding)
                ok &= ~(bad & ~null)
                arrays.append(_with_nulls(arr, null))
            else:
                raw = np.ascontiguousarray(rows[:, off:off + kind.itemsize]).view(kind).reshape(n)
                if col.type in ("DATE", "TIMESTAMP"):
                    when, bad = vms_times(raw)
                    ok &= ~(bad & ~null)
                    if col.type == "DATE":
                        arrays.append(pa.array(when.astype("datetime64[D]"), pa.date32(),
                                               mask=null))
                    else:
                        arrays.append(pa.array(when, pa.timestamp("us"), mask=null))
                else:
                    arrays.append(pa.array(raw, mask=null))
        if not ok.all():
            good = pa.array(ok)
            arrays = [a.filter(good) for a in arrays]
        return ok, render_rows(codec.table.columns, arrays, n=int(ok.sum()))

    def _emit(self, fr: Frames, rec_idx, act, tsn, tad, cnt, utc_us, fast, is_c, images) -> None:
        """One batch of every record on the fast path, in record order (so the sink need not
        sort): commit rows and change rows side by side, the row images of every table
        placed by one ``take`` into ``before`` or ``after``."""
        sink, base = self.sink, self.base
        idx = np.flatnonzero(fast)
        n = len(idx)
        trx = pc.cast(pa.array(tsn[idx]), pa.string())
        cpos, position = positions(tad[idx], tsn[idx], cnt[idx])
        ts = pa.array(utc_us[idx], pa.timestamp("us", tz="UTC"))
        commit = is_c[idx]
        # each change row's image: its place in the images of all tables, laid end to end
        slot = np.full(len(fr), -1, dtype=np.int64)
        which = np.full(len(fr), -1, dtype=np.int64)
        tables, parts, placed = [], [], 0
        for codec, members, image in images.values():
            if not len(members):
                continue
            slot[members] = np.arange(placed, placed + len(members))
            which[members] = len(tables)
            placed += len(members)
            tables.append(codec.table)
            parts.append(image)
        slot, which = slot[idx], which[idx]
        if ((slot < 0) != commit).any():
            raise AssertionError("a change row on the fast path without its row image")
        is_m = act[idx] == _M
        if parts:
            image = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
            before = image.take(pa.array(slot, mask=commit | is_m))
            after = image.take(pa.array(slot, mask=commit | ~is_m))
        else:
            before = after = None
        per_table = pa.array(which, mask=commit)
        names = lambda attr: pa.array([getattr(t, attr) for t in tables], pa.string()).take(per_table)
        dbk = np.zeros(n, dtype=np.uint64)
        change = np.flatnonzero(~commit)
        if len(change):
            dbk[change] = L.ROW.gather(self.data, fr.starts[idx[change]], ["dbk"])["dbk"]
        row_id = concat_text(pc.cast(pa.array(dbk >> 48, mask=commit), pa.string()), pa.scalar(":"),
                             pc.cast(pa.array((dbk >> 16) & 0xFFFFFFFF), pa.string()),
                             pa.scalar(":"), pc.cast(pa.array(dbk & 0xFFFF), pa.string()))
        kind = _KINDS.take(pa.array(commit.view(np.int8)))
        op = _OPS.take(pa.array((~is_m).view(np.int8), mask=commit))
        sink.add_columns(kind, fr.starts[idx] + base, rec_idx[idx], 1, n_bytes=fr.lengths[idx],
                         trx_id=trx, position=position, trx_order=position, trx_end="commit",
                         commit_position=cpos, commit_ts=ts, op=op, table_id=names("id"),
                         schema_name=names("schema"), table_name=names("name"),
                         before=before, after=after, row_id=row_id)


_KINDS = pa.array(["change", "commit"])
_OPS = pa.array(["m", "d"])
_HEX_PAIRS = np.frombuffer(b"".join(b"%02X" % i for i in range(256)), dtype=np.uint16)


def positions(tad: np.ndarray, tsn: np.ndarray, cnt: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """(commit_position, position) of records: COMMIT_TAD and TSN as 16 hex digits each, then
    the record's number in its transaction as 8 (upper case, zero-padded: ``commit_position``
    and ``hexpos`` per value). Built as one 40-character-wide matrix of digit pairs."""
    n = len(tad)
    cnt = np.asarray(cnt, dtype=np.int64)
    if n and (int(cnt.max()) >> (4 * L.SEQ_HEX) or int(cnt.min()) < 0):
        raise ValueError(f"a value needs more than {L.SEQ_HEX} hex digits")
    pairs = np.empty((n, L.POSITION_HEX // 2), dtype=np.uint16)
    be = lambda v, t: np.ascontiguousarray(v, dtype=t).view(np.uint8).reshape(n, np.dtype(t).itemsize)
    pairs[:, 0:8] = _HEX_PAIRS[be(np.asarray(tad).astype(np.uint64), ">u8")]
    pairs[:, 8:16] = _HEX_PAIRS[be(tsn, ">u8")]
    pairs[:, 16:20] = _HEX_PAIRS[be(cnt.astype(np.uint32), ">u4")]
    width = L.COMMIT_POSITION_HEX
    commit = np.ascontiguousarray(pairs[:, :width // 2])
    text = lambda buf, w: pa.StringArray.from_buffers(
        n, pa.py_buffer(np.arange(0, (n + 1) * w, w, dtype=np.int32)), pa.py_buffer(buf))
    return text(commit, width), text(pairs, L.POSITION_HEX)


def _count_within(keys: np.ndarray) -> np.ndarray:
    """For each element, how many earlier elements have the same key (in array order)."""
    n = len(keys)
    if not n:
        return np.zeros(0, dtype=np.int64)
    pos = np.arange(n)
    first = np.ones(n, dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    heads = keys[first]
    if len(np.unique(heads)) == len(heads):
        # every key in one run (LogMiner writes a transaction's records together): the
        # count is the distance from the run's start
        return pos - np.maximum.accumulate(np.where(first, pos, 0))
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    first = np.ones(n, dtype=bool)
    first[1:] = sk[1:] != sk[:-1]
    start = np.maximum.accumulate(np.where(first, pos, 0))
    out = np.empty(n, dtype=np.int64)
    out[order] = pos - start
    return out


def _windows(buf: np.ndarray, width: int) -> np.ndarray:
    """Every ``width``-byte window of ``buf`` (a view: ``_windows(buf, w)[starts]`` copies the
    rows at ``starts`` whole, one row at a time instead of one index per byte)."""
    return np.lib.stride_tricks.as_strided(buf, shape=(max(len(buf) - width + 1, 0), width),
                                           strides=(buf.strides[0], buf.strides[0]),
                                           writeable=False)


def _with_nulls(arr: pa.Array, null: np.ndarray) -> pa.Array:
    """``arr`` (a string array) with the rows of ``null`` null too, its values left in place
    (a new validity bitmap, no copy of the strings)."""
    if not null.any():
        return arr
    if arr.offset or not pa.types.is_string(arr.type):
        return pc.if_else(pa.array(null), pa.nulls(len(arr), arr.type), arr)
    valid = ~null
    if arr.null_count:
        valid &= arr.is_valid().to_numpy(zero_copy_only=False)
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    _, offsets, data = arr.buffers()
    return pa.Array.from_buffers(arr.type, len(arr), [bitmap, offsets, data],
                                 null_count=int(len(arr) - valid.sum()))


def decode(data: bytes, ctx: DecodeContext, sink: EventSink) -> None:
    """Decode one archive (or a range of it, ``ctx.offset``/``ctx.index``) into ``sink``."""
    _Archive(data, ctx, sink).decode()
    return None
