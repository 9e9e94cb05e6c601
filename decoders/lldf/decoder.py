"""Decoder of Log Master logical log data files (SPEC section 3, lldf).

One event row per record read. Decisions (also in ``__init__``'s docstring):

* ``trx_id`` = UORID as 20 hex digits; ``position`` = LOGLRSN + LOGRBA (40 hex digits: the
  LRSN orders the log across data-sharing members, the RBA breaks ties); ``trx_order`` =
  ORDERVALUE (8) + LOGLRSN (20) + LOGRBA (20) hex, so that its text order is SPEC's sort key
  within the unit of recovery; ``row_id`` = RID (10 hex digits) on row changes.
* UORDISP ``C``: ``trx_end=commit``, ``commit_position`` = UORCOMMITLRSN (20 hex digits),
  ``commit_ts`` = UORCOMMITTIMESTAMP read as **UTC** (Log Master's BIN(17) timestamps carry
  no zone; fraction digits beyond microseconds are truncated), ``user`` = AUTHID.
  UORDISP ``A``: a ``skip`` row (``lldf_uor_aborted``) with ``trx_end=abort`` so the rows of
  the same UORID held open from earlier archives are dropped too. UORDISP blank (or 0x00):
  no ``trx_end``: the unit of recovery stays open.
* LOGRECDISP other than ``C``: ``skip`` row, rule ``lldf_logrecdisp_<X>`` (it still carries
  the UOR's trx_id / trx_end so that the disposition is known).
* ``CM`` / ``SC``: ``control`` rows (``lldf_command`` / ``lldf_status_change``), outside any
  transaction.
* ``DM``/``DT``/``DR``: op ``t`` (any DATA area is ignored: LOAD REPLACE limit keys).
* ``CO``: op ``ddl``; the DATA area (after its length) holds the DDL text in the header
  codepage, which becomes ``ddl`` (trailing blanks/NULs trimmed); an empty area gives
  ``CATALOG OBJECT <owner>.<name>``. ``E`` (exchange): op ``ddl`` with ``ddl`` =
  ``EXCHANGE DATA BETWEEN TABLE <owner>.<name> AND <clone owner>.<clone name>`` from the
  DATA area. DDL of a table the catalog does not know publishes with the header's names;
  row changes and truncates of an unknown table are quarantined (``unknown_table``).
* Segmented records (TOTALSEGS > 1): a ``segment`` row per piece, ``seg_key`` = UORID +
  LOGRBA + LOGLRSN + RID hex, ``seg_data`` = the piece's SEGLEN bytes, every change field
  from the header, and ``rule`` = ``lldf_change_<CHANGE TYPE>`` (what ``decode_reassembled``
  needs to read the area). The ordering job concatenates a complete group and calls
  ``decode_reassembled`` (or ``decode_reassembled_many`` for a batch of groups).

How (issue 13): one framing pass (``_Framer``: a tight loop over RDW / LENGTH / SEGLEN),
then the records a chunk at a time: headers gathered with numpy (``layout.HEADER``),
change types and dispositions classified with lookup tables and masks, positions as hex
with ``framing.hex_bytes``, row images decoded per table in batches (``ColumnCodec``:
null bytes, big-endian integers, packed decimals, IBM hex floats, CHAR/VARCHAR and
character DATE/TIME/TIMESTAMP in the table's code page, all in ``decoders/vectors.py``)
and rendered with ``render``, the rows handed to the sink with ``add_columns``. A record
that fails any vectorised check goes through the careful per-record path (the decoder
before this one, ``_careful_record``), which quarantines it with the precise error.

Framing and damage (issue 15): a record is [RDW] + header (LENGTH bytes, 288..4096) +
SEGLEN bytes; it frames when LENGTH is in range, 1 <= SEGNUM <= TOTALSEGS, the record ends
inside the archive and (RDW on) the RDW's length is 4 + LENGTH + SEGLEN with zero flags.
Where a record does not frame, the decoder scans for the next plausible record start
(``framing.resync``): one that frames, whose CHANGE TYPE, UORDISP and LOGRECDISP are codes
of the vendor table, whose EBCDIC name fields (SYSTEMID, DBNAME, TSNAME, TABLEOWNER,
TABLENAME, AUTHID) hold text of the code page, whose DATA length equals SEGLEN (records not
segmented), and which is followed by another record that frames (or the end). The bytes in
between become one quarantine row (the error of the record that did not frame, n_records 1,
n_bytes the span). When the record before the damage was misframed itself (LENGTH or SEGLEN
damaged: its DATA length disagrees with SEGLEN, or a plausible record starts inside it), the
damaged span starts at that record instead. So one damaged length or type byte costs the
damaged record, not the rest of the archive. Bad values in a row image (packed sign, null
indicator, date characters, VARCHAR longer than declared) quarantine only their record.

Ranges (issue 14): ``split`` cuts an archive at record starts found by the same framing
(any record boundary can be a cut: segments are independent rows); ``decode`` on a range
(``ctx.offset`` / ``ctx.index``) gives exactly that range's rows of the whole decode.
"""

from __future__ import annotations

import datetime as _dt
import struct
from array import array
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import codecs as C
from .. import vectors as V
from ..base import DecodeContext
from ..catalog import Catalog, Column, Table
from ..errors import BadValue, Corrupt, DecodeError, IncompleteSegments, NeedData, \
    UnknownRecordType, UnknownTable
from ..events import TS, EventSink
from ..framing import Damage, Frames, hex_bytes, hex_ints, resync, split_ranges
from ..layout import as_uint8
from ..render import join_rows, render_values
from . import layout as L

DEFAULT_CODEPAGE = "cp037"
UTC = _dt.timezone.utc
H = L.HEADER
CHUNK = 1 << 16            # records decoded together (bounds the columnar path's memory)

# ----------------------------------------------------------------- header

# the fields the careful path reads, in layout order (the struct skips the others)
_HDR_FIELDS = ("len_header", "dbid", "tbobid", "len_owner", "len_name", "owner", "name",
               "log_lrsn", "log_rba", "rid", "change_type", "log_rec_disp",
               "uor_commit_timestamp", "uor_disp", "uor_id", "len_segment", "num_segments",
               "segment_no", "order_value", "uor_commit_lrsn", "auth_id")
HDR = H.reader(_HDR_FIELDS)
_FRAME = H.reader(("len_header", "len_segment", "num_segments", "segment_no"))
_FRAME_CT = H.reader(("change_type", "len_segment", "num_segments", "segment_no"))
_RDW = L.RDW.struct
_U2 = struct.Struct(">H")
# the header fields the columnar path gathers
_GATHER = ("len_header", "dbid", "tbobid", "log_lrsn", "log_rba", "rid", "change_type",
           "log_rec_disp", "uor_commit_timestamp", "uor_disp", "uor_id", "num_segments",
           "segment_no", "order_value", "uor_commit_lrsn", "auth_id")
# EBCDIC name fields checked when resynchronising
_TEXT_FIELDS = ("system_id", "dbname", "tsname", "owner", "name", "auth_id")
CT_LIST = tuple(sorted(L.CHANGE_TYPES))
_CT_NUM = {ct: i for i, ct in enumerate(CT_LIST)}
_OPS = {**L.ROW_TYPES, **{t: "t" for t in L.TRUNCATE_TYPES}, **{t: "ddl" for t in L.DDL_TYPES}}


class _Codepage:
    """Per-codepage lookup tables of the EBCDIC CHAR header codes (built once)."""

    _cache: dict[str, "_Codepage"] = {}

    def __init__(self, cp: str) -> None:
        self.cp = cp
        self.change_type = {ct.encode(cp): ct for ct in L.CHANGE_TYPES}
        self.change_type[("E" + "\x00").encode(cp)] = "E "
        self.uor_disp = {d.encode(cp): (" " if d == "\x00" else d) for d in L.UOR_DISPS}
        self.committed = L.LOGRECDISP_COMMITTED.encode(cp)
        self._text: dict[bytes, str] = {}
        # the same codes as numpy lookup tables (the columnar path)
        self.ct_index = np.full(1 << 16, -1, dtype=np.int16)      # 2 bytes -> CT_LIST index
        for raw, ct in self.change_type.items():
            if len(raw) == 2:
                self.ct_index[raw[0] << 8 | raw[1]] = _CT_NUM[ct]
        self.disp_index = np.full(256, -1, dtype=np.int8)         # 0 C, 1 A, 2 open
        for raw, d in self.uor_disp.items():
            if len(raw) == 1:
                self.disp_index[raw[0]] = {"C": 0, "A": 1}.get(d, 2)
        self.committed_byte = self.committed[0] if len(self.committed) == 1 else -1
        self.lrd_rules = []
        for b in range(256):
            lrd = bytes([b]).decode(cp, "replace").strip() or "blank"
            if not lrd.isalnum():
                lrd = "x" + bytes([b]).hex().upper()
            self.lrd_rules.append(f"lldf_logrecdisp_{lrd}")
        self.lrd_plausible = np.zeros(256, dtype=bool)
        for d in L.LOGRECDISPS:
            raw = d.encode(cp)
            if len(raw) == 1:
                self.lrd_plausible[raw[0]] = True
        self.text_byte = np.zeros(256, dtype=bool)                 # printable or NUL
        for b in range(256):
            try:
                ch = bytes([b]).decode(cp)
            except (UnicodeDecodeError, ValueError):
                continue
            self.text_byte[b] = b == 0 or (len(ch) == 1 and ch.isprintable())
        self.sbcs = V.sbcs_utf8(cp) is not None

    @classmethod
    def get(cls, cp: str) -> "_Codepage":
        got = cls._cache.get(cp)
        if got is None:
            try:
                "".encode(cp)
                got = cls(cp)
            except (LookupError, UnicodeError, ValueError, TypeError):
                raise BadValue("unknown codepage option", expected="a Python text codec",
                               actual=cp) from None
            cls._cache[cp] = got
        return got

    def text(self, raw: bytes, what: str) -> str:
        """A CHAR header field, trailing blanks/NULs trimmed (memoised: few distinct values)."""
        got = self._text.get(raw)
        if got is None:
            got = C.decode_text(raw, self.cp, what).rstrip(" \x00")
            if len(self._text) > 4096:
                self._text.clear()
            self._text[raw] = got
        return got

    def texts(self, raw: np.ndarray, offsets: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        """Many CHAR fields / DDL texts at once: (strings, bad mask)."""
        if self.sbcs:
            return V.text_sbcs(raw, offsets, self.cp)
        return V.text_from_flat(raw, offsets, self.cp)


_TS_CACHE: dict[bytes, _dt.datetime | None] = {}


def decode_ts17(raw: bytes) -> _dt.datetime | None:
    """BIN(17) timestamp -> UTC-aware datetime (None when all zero). The 34 hex digits are
    YYYYMMDDHHMMSS and fraction digits; digits beyond microseconds are truncated."""
    got = _TS_CACHE.get(raw)
    if got is not None or raw in _TS_CACHE:
        return got
    if not any(raw):
        return None
    h = raw.hex()
    if not h.isdigit():
        raise BadValue("BIN(17) timestamp holds a non-decimal nibble", path="UORCOMMITTIMESTAMP",
                       expected="34 decimal digits", actual=h.upper())
    value = C.make_timestamp(int(h[0:4]), int(h[4:6]), int(h[6:8]), int(h[8:10]),
                             int(h[10:12]), int(h[12:14]), int(h[14:20]),
                             what="UORCOMMITTIMESTAMP").replace(tzinfo=UTC)
    if len(_TS_CACHE) > 65536:
        _TS_CACHE.clear()
    _TS_CACHE[raw] = value
    return value


# ----------------------------------------------------------------- row images, per value
# (the careful path: the decoder before the columnar one; its errors are the reference)

def _text(enc: str) -> Callable[[bytes], str]:
    def dec(raw: bytes) -> str:
        try:
            return raw.decode(enc)
        except UnicodeDecodeError:
            return C.decode_text(raw, enc, "CHAR/VARCHAR")   # raises with the details
    return dec


def _to_ascii(enc: str) -> bytes | None:
    """A ``bytes.translate`` table from a single-byte codepage to ASCII (non-ASCII -> '?'),
    b"" when the codepage is ASCII-compatible (no translation), None when it is neither."""
    if "0-9.:T ".encode(enc) == b"0-9.:T ":
        return b""
    try:
        chars = [bytes([b]).decode(enc) for b in range(256)]
    except UnicodeDecodeError:
        return None
    if any(len(c) != 1 for c in chars):
        return None
    return bytes(ord(c) if ord(c) < 128 else 0x3F for c in chars)


def _chars(enc: str, parse: Callable[[bytes], object]) -> Callable[[bytes], object]:
    """DATE/TIME/TIMESTAMP as characters in the table's encoding (``codecs.char_*``)."""
    table = _to_ascii(enc)

    def dec(raw: bytes):
        if table is None:
            text = _text(enc)(raw).encode("ascii", "replace")
        else:
            text = raw.translate(table) if table else raw
        return parse(text)
    return dec


def _packed(precision: int, scale: int) -> Callable[[bytes], object]:
    even = precision % 2 == 0

    def dec(raw: bytes):
        if even and raw[0] >> 4:
            raise BadValue("packed decimal has more digits than its precision",
                           expected=f"DECIMAL({precision})", actual=raw.hex().upper())
        return C.decode_packed(raw, scale)
    return dec


def _ibm4(raw: bytes):
    """A 4-byte IBM float: a ``Float4`` when it is exactly an IEEE single (rendered as the
    shortest single text), else a plain float (outside the single range: rendered exactly)."""
    v = C.decode_ibm_float(raw)
    try:
        exact = C.f4be.unpack(C.f4be.pack(v))[0] == v
    except OverflowError:
        exact = False
    return C.Float4(v) if exact else v


_INTS = {"SMALLINT": "h", "INTEGER": "i", "BIGINT": "q"}
_VAR = {"VARCHAR", "VARBINARY"}
_CHAR_WIDTH = {"DATE": 10, "TIME": 8, "TIMESTAMP": 26}


def _fixed(col: Column, enc: str) -> tuple[str, Callable | None, int]:
    """struct code, converter, width of a fixed-width column value."""
    t = col.type
    if t in _INTS:
        code = _INTS[t]
        return code, None, struct.calcsize(">" + code)
    if t == "DECIMAL":
        w = C.packed_len(col.precision or 1)
        return f"{w}s", _packed(col.precision or 1, col.scale or 0), w
    if t in ("FLOAT", "REAL", "DOUBLE"):
        w = _float_width(col)
        return f"{w}s", (_ibm4 if w == 4 else C.decode_ibm_float), w
    if t == "CHAR":
        return f"{col.length}s", _text(enc), col.length
    if t == "BINARY":
        return f"{col.length}s", None, col.length
    if t == "DATE":
        return "10s", _chars(enc, C.char_date), 10
    if t == "TIME":
        return "8s", _chars(enc, C.char_time), 8
    if t == "TIMESTAMP":
        return "26s", _chars(enc, C.char_timestamp), 26
    raise Corrupt(f"column {col.name}: type {t} has no lldf row-image layout",
                  path=f"catalog column {col.name}",
                  expected="SMALLINT/INTEGER/BIGINT/DECIMAL/FLOAT/CHAR/VARCHAR/DATE/TIME/TIMESTAMP",
                  actual=t)


def _float_width(col: Column) -> int:
    return 4 if col.type == "REAL" else 8 if col.type == "DOUBLE" else (col.length or 8)


def _render_columns(table: Table) -> list[Column]:
    # 4-byte floats render as IEEE singles only when the decoder marked them ``Float4``
    # (exactly a single); the DOUBLE renderer does exactly that per value.
    return [Column(c.name, "DOUBLE") if c.type == "REAL" or (c.type == "FLOAT" and c.length == 4)
            else c for c in table.columns]


class TableCodec:
    """The per-record row-image decoder of one table (the careful path).

    The columns are cut into runs at each variable-length column: each run (null bytes,
    fixed-width values, and the 2-byte length of the VARCHAR that ends it) is one
    ``struct.Struct`` read; the VARCHAR bytes follow it."""

    __slots__ = ("table", "runs", "render", "names", "columnar")

    def __init__(self, table: Table) -> None:
        self.table = table
        enc = table.encoding or DEFAULT_CODEPAGE
        self.names = [c.name for c in table.columns]
        self.runs: list[tuple] = []
        codes: list[str] = []
        slots: list[tuple] = []
        nvals = size = 0
        for ci, col in enumerate(table.columns):
            ni = -1
            at = size
            if col.nullable:
                codes.append("B")
                ni, nvals, size = nvals, nvals + 1, size + 1
            if col.type in _VAR:
                codes.append("H")
                conv = _text(enc) if col.type == "VARCHAR" else bytes
                var = (ci, ni, nvals, conv, col.length or 0, at)
                self.runs.append((struct.Struct(">" + "".join(codes)), size + 2, tuple(slots), var))
                codes, slots, nvals, size = [], [], 0, 0
                continue
            code, conv, width = _fixed(col, enc)
            codes.append(code)
            slots.append((ci, ni, nvals, conv, at))
            nvals, size = nvals + 1, size + width
        if slots:
            self.runs.append((struct.Struct(">" + "".join(codes)), size, tuple(slots), None))
        self.render = C.RowRenderer(_render_columns(table))
        self.columnar = ColumnCodec(table)

    def _fail(self, exc: DecodeError, ci: int, at: int) -> DecodeError:
        exc.offset = at
        exc.path = f"row image column {self.names[ci]}" + (f" ({exc.path})" if exc.path else "")
        exc.args = (exc._render(),)
        return exc

    def values(self, buf: bytes, pos: int, end: int) -> list:
        """The column values of the row image whose columns span ``buf[pos:end]``."""
        out: list = []
        for st, size, slots, var in self.runs:
            if pos + size > end:
                ci = slots[0][0] if slots else var[0]
                raise Corrupt("row image shorter than its columns", offset=pos,
                              path=f"row image column {self.names[ci]}",
                              expected=size, actual=end - pos)
            vals = st.unpack_from(buf, pos)
            for ci, ni, vi, conv, at in slots:
                if ni >= 0:
                    nb = vals[ni]
                    if nb:
                        if nb == 0xFF:
                            out.append(None)
                            continue
                        raise self._fail(BadValue("bad null indicator", expected="0x00 or 0xFF",
                                                  actual=f"0x{nb:02X}"), ci, pos + at)
                if conv is None:
                    out.append(vals[vi])
                else:
                    try:
                        out.append(conv(vals[vi]))
                    except DecodeError as exc:
                        raise self._fail(exc, ci, pos + at) from None
            pos += size
            if var is not None:
                ci, ni, li, conv, maxlen, at = var
                n = vals[li]
                if ni >= 0 and vals[ni]:
                    if vals[ni] != 0xFF:
                        raise self._fail(BadValue("bad null indicator", expected="0x00 or 0xFF",
                                                  actual=f"0x{vals[ni]:02X}"), ci, pos - size + at)
                    if n:
                        raise self._fail(Corrupt("NULL VARCHAR with a non-zero length",
                                                 expected=0, actual=n), ci, pos - size + at)
                    out.append(None)
                    continue
                if n > maxlen:
                    raise self._fail(BadValue("VARCHAR longer than its declared length",
                                              expected=f"<= {maxlen}", actual=n), ci, pos - size + at)
                if pos + n > end:
                    raise self._fail(Corrupt("VARCHAR runs past its row image",
                                             expected=n, actual=end - pos), ci, pos - size + at)
                try:
                    out.append(conv(buf[pos:pos + n]))
                except DecodeError as exc:
                    raise self._fail(exc, ci, pos) from None
                pos += n
        if pos != end:
            raise Corrupt("row image longer than the table's columns", offset=pos,
                          path="row image", expected=0, actual=end - pos)
        return out

    def image(self, buf: bytes, pos: int, end: int) -> tuple[str, int]:
        """One row image at ``pos`` (its 2-byte length first) -> (JSON, position after it)."""
        if pos + 2 > end:
            raise Corrupt("no room for a row image length in the DATA area", offset=pos,
                          path="row image length", expected=2, actual=end - pos)
        n = _U2.unpack_from(buf, pos)[0]
        stop = pos + 2 + n
        if stop > end:
            raise Corrupt("row image length past the DATA area", offset=pos,
                          path="row image length", expected=f"<= {end - pos - 2}", actual=n)
        return self.render(self.values(buf, pos + 2, stop)), stop


class Codecs:
    """Table codecs of one catalog, built on first use (compile errors memoised)."""

    __slots__ = ("catalog", "_by_key", "_by_id")

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._by_key: dict[tuple[int, int], TableCodec | DecodeError | None] = {}
        self._by_id: dict[str, TableCodec | DecodeError | None] = {}

    def by_id(self, table_id: str | None) -> TableCodec | DecodeError | None:
        if table_id in self._by_id:
            return self._by_id[table_id]
        table = self.catalog.table(table_id) if table_id is not None else None
        codec: TableCodec | DecodeError | None = None
        if table is not None:
            try:
                codec = TableCodec(table)
            except DecodeError as exc:
                codec = exc
        self._by_id[table_id] = codec
        return codec

    def by_key(self, dbid: int, obid: int) -> TableCodec | DecodeError | None:
        key = (dbid, obid)
        got = self._by_key.get(key, self)
        if got is self:
            got = self._by_key[key] = self.by_id(f"{dbid}.{obid}")
        return got


_CODECS: dict[int, Codecs] = {}


def codecs_for(catalog: Catalog) -> Codecs:
    got = _CODECS.get(id(catalog))
    if got is None or got.catalog is not catalog:
        if len(_CODECS) > 32:
            _CODECS.clear()
        got = _CODECS[id(catalog)] = Codecs(catalog)
    return got


# ----------------------------------------------------------------- DATA areas, per value

def area_bounds(buf: bytes, pos: int, end: int) -> int:
    """Checks the DATA area at ``buf[pos:end]`` (its 2-byte length must say end - pos);
    returns the position of the area's body."""
    if end == pos:
        return pos            # no DATA area (allowed for truncates, DDL, commands)
    if end - pos < 2:
        raise Corrupt("DATA area too short for its length", offset=pos, path="DATA length",
                      expected=">= 2", actual=end - pos)
    n = _U2.unpack_from(buf, pos)[0]
    if n != end - pos:
        raise Corrupt("DATA length past the record" if n > end - pos else
                      "DATA length shorter than the record's DATA", offset=pos,
                      path="DATA length", expected=end - pos, actual=n)
    return pos + 2


def read_row_images(codec: TableCodec, ct: str, buf: bytes, body: int, end: int):
    has_before, has_after = L.IMAGES[ct]
    before = after = None
    pos = body
    if has_before:
        before, pos = codec.image(buf, pos, end)
    if has_after:
        after, pos = codec.image(buf, pos, end)
    if pos != end:
        raise Corrupt("DATA area longer than its row images", offset=pos, path="DATA",
                      expected=0, actual=end - pos)
    return before, after


def read_exchange(buf: bytes, body: int, end: int, cp: _Codepage) -> str:
    """E DATA: 2-byte length + clone owner, 2-byte length + clone name."""
    parts = []
    pos = body
    for what in ("clone table owner", "clone table name"):
        if pos + 2 > end:
            raise Corrupt(f"exchange DATA too short for the {what} length", offset=pos,
                          path=what, expected=2, actual=end - pos)
        n = _U2.unpack_from(buf, pos)[0]
        if pos + 2 + n > end:
            raise Corrupt(f"{what} runs past the DATA area", offset=pos, path=what,
                          expected=f"<= {end - pos - 2}", actual=n)
        parts.append(C.decode_text(bytes(buf[pos + 2:pos + 2 + n]), cp.cp, what).rstrip(" \x00"))
        pos += 2 + n
    if pos != end:
        raise Corrupt("exchange DATA longer than its two names", offset=pos, path="DATA",
                      expected=0, actual=end - pos)
    return ".".join(parts)


def ddl_text(ct: str, buf: bytes, body: int, end: int, cp: _Codepage, table: str) -> str:
    if ct == "E ":
        return L.EXCHANGE_DDL.format(table=table, clone=read_exchange(buf, body, end, cp))
    text = C.decode_text(bytes(buf[body:end]), cp.cp, "CO DDL text").rstrip(" \x00")
    return text or L.CATALOG_OBJECT_DDL.format(table=table)


# ----------------------------------------------------------------- row images, by column

def _u16(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Big-endian halfwords at ``pos`` (positions clipped into the buffer: callers mask)."""
    last = max(len(buf) - 2, 0)
    p = np.clip(pos, 0, last)
    if len(buf) < 2:
        return np.zeros(len(p), dtype=np.int64)
    return (buf[p].astype(np.int64) << 8) | buf[p + 1]


def _rows(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """``(n, width)`` bytes at ``pos`` (clipped into the buffer: callers mask)."""
    if len(buf) < width:
        return np.zeros((len(pos), width), dtype=np.uint8)
    windows = np.lib.stride_tricks.as_strided(buf, shape=(len(buf) - width + 1, width),
                                              strides=(1, 1), writeable=False)
    return windows[np.clip(pos, 0, len(buf) - width)]


def _null_where(arr: pa.Array, null: np.ndarray | None) -> pa.Array:
    if null is None or not null.any():
        return arr
    return pc.if_else(pa.array(null), pa.nulls(len(arr), arr.type), arr)


def _binary(raw: np.ndarray, offsets: np.ndarray) -> pa.Array:
    offsets = np.asarray(offsets, dtype=np.int64)
    n = len(offsets) - 1
    if offsets[-1] < 2**31:
        return pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                             pa.py_buffer(np.ascontiguousarray(raw).tobytes())])
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets),
                                                                   pa.py_buffer(np.ascontiguousarray(raw).tobytes())]
                                            ).cast(pa.binary())


class ColumnCodec:
    """The row images of one table, a batch at a time (the fast path): ``decode(buf, starts,
    ends)`` -> (JSON text of the good images, good mask). An image is bad when any check of
    the careful path (``TableCodec``) could fail on it; those go through the careful path.

    Columns are walked in order over the whole batch: a position per image, null bytes and
    VARCHAR lengths read at those positions, fixed-width values gathered as ``(n, width)``
    byte arrays and converted with ``vectors``; the JSON text rendered a column at a time."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.enc = table.encoding or DEFAULT_CODEPAGE
        self.sbcs = V.sbcs_utf8(self.enc) is not None
        self.ok = True                       # False: every image takes the careful path
        self.specs = []
        for col in table.columns:
            t = col.type
            if t in _VAR:
                self.specs.append((col, "var", 0))
            elif t in _INTS:
                self.specs.append((col, "int", struct.calcsize(_INTS[t])))
            elif t == "DECIMAL":
                self.specs.append((col, "dec", C.packed_len(col.precision or 1)))
            elif t in ("FLOAT", "REAL", "DOUBLE"):
                w = _float_width(col)
                self.ok &= w in (4, 8)
                self.specs.append((col, "float", w))
            elif t in ("CHAR", "BINARY"):
                self.ok &= bool(col.length)
                self.specs.append((col, t.lower(), col.length or 0))
            elif t in _CHAR_WIDTH:
                self.specs.append((col, t.lower(), _CHAR_WIDTH[t]))
            else:
                self.ok = False
                self.specs.append((col, "none", 0))

    def decode(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray
               ) -> tuple[pa.Array, np.ndarray]:
        n = len(starts)
        if not self.ok or n == 0:
            return pa.array([], pa.string()), np.zeros(n, dtype=bool)
        pos = starts.astype(np.int64, copy=True)
        bad = np.zeros(n, dtype=bool)
        values = []
        for col, kind, width in self.specs:
            null = None
            if col.nullable:
                bad |= pos >= ends
                nb = buf[np.clip(pos, 0, len(buf) - 1)] if len(buf) else np.zeros(n, np.uint8)
                null = nb == 0xFF
                bad |= (nb != 0) & ~null
                pos += 1
            if kind == "var":
                bad |= pos + 2 > ends
                ln = _u16(buf, pos)
                pos += 2
                if null is not None:
                    bad |= null & (ln != 0)
                    live = ~null
                else:
                    live = np.ones(n, dtype=bool)
                bad |= live & ((ln > (col.length or 0)) | (pos + ln > ends))
                ln = np.where(bad | ~live, 0, ln)
                raw, offsets = V.flat(buf, pos, ln)
                if col.type == "VARCHAR":
                    arr, vbad = self._text(raw, offsets)
                    bad |= vbad & live
                else:
                    arr = _binary(raw, offsets)
                pos += ln
                values.append((col, kind, arr, null))
                continue
            bad |= pos + width > ends
            rows = _rows(buf, pos, width)
            pos += width
            arr, vbad = self._fixed(col, kind, rows)
            if vbad is not None:
                bad |= vbad if null is None else (vbad & ~null)
            values.append((col, kind, arr, null))
        bad |= pos != ends
        good = ~bad
        keep = None if good.all() else pa.array(np.flatnonzero(good))
        texts = []
        for col, kind, arr, null in values:
            if keep is not None:
                if isinstance(arr, tuple):
                    arr = tuple(a[good] for a in arr)
                else:
                    arr = arr.take(keep)
                null = null[good] if null is not None else None
            texts.append(self._render(col, kind, arr, null))
        return join_rows(self.table.columns, texts, int(good.sum())), good

    def _text(self, raw: np.ndarray, offsets: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        if self.sbcs:
            return V.text_sbcs(raw, offsets, self.enc)
        return V.text_from_flat(raw, offsets, self.enc)

    def _fixed(self, col: Column, kind: str, rows: np.ndarray):
        if kind == "int":
            return pa.array(V.ints_be(rows)), None
        if kind == "dec":
            text, bad = V.packed_decimal(rows, col.scale or 0)
            if (col.precision or 1) % 2 == 0:
                bad = bad | ((rows[:, 0] >> 4) != 0)
            return text, bad
        if kind == "float":
            return (V.ibm_floats(rows),), None
        if kind == "char":
            n, w = rows.shape
            return self._text(rows.reshape(-1), np.arange(n + 1, dtype=np.int64) * w)
        if kind == "binary":
            n, w = rows.shape
            return _binary(rows.reshape(-1), np.arange(n + 1, dtype=np.int64) * w), None
        ascii_ = V.ascii_rows(rows, self.enc)
        if ascii_ is None:
            return pa.nulls(len(rows), pa.string()), np.ones(len(rows), dtype=bool)
        # checked with vectors (the twins of codecs.char_*); the JSON text is the characters
        # themselves in the canonical places (what RowRenderer writes for the parsed value)
        bad = (V.char_dates if kind == "date" else V.char_times if kind == "time"
               else V.char_timestamps)(ascii_)[1]
        return _iso_json(ascii_, kind), bad

    @staticmethod
    def _render(col: Column, kind: str, arr, null: np.ndarray | None) -> pa.Array:
        if kind in _CHAR_KINDS:                     # already JSON text
            arr = _null_where(arr, null)
            return pc.fill_null(arr, "null") if arr.null_count else arr
        if kind == "float":
            (v64,) = arr
            mask = null if null is not None and null.any() else None
            if col.type == "REAL" or (col.type == "FLOAT" and col.length == 4):
                with np.errstate(over="ignore", invalid="ignore"):
                    v32 = v64.astype(np.float32)
                exact = v32.astype(np.float64) == v64
                text = render_values(Column(col.name, "REAL"), pa.array(v32, mask=mask))
                if not exact.all():
                    wide = render_values(Column(col.name, "DOUBLE"), pa.array(v64, mask=mask))
                    text = pc.if_else(pa.array(exact), text, wide)
                return text
            return render_values(Column(col.name, "DOUBLE"), pa.array(v64, mask=mask))
        return render_values(col, _null_where(arr, null))


_CHAR_KINDS = ("date", "time", "timestamp")
# canonical JSON text of ISO character DATE / TIME / TIMESTAMP, as (source column or -1, char)
_ISO_LAYOUT = {
    "date": [(-1, '"')] + [(i, "") for i in range(10)] + [(-1, '"')],
    "time": [(-1, '"'), (0, ""), (1, ""), (-1, ":"), (3, ""), (4, ""), (-1, ":"), (6, ""), (7, ""),
             (-1, '"')],
    "timestamp": [(-1, '"')] + [(i, "") for i in range(10)] + [(-1, "T"), (11, ""), (12, ""),
                  (-1, ":"), (14, ""), (15, ""), (-1, ":"), (17, ""), (18, ""), (-1, ".")]
                 + [(i, "") for i in range(20, 26)] + [(-1, '"')],
}


def _iso_json(ascii_: np.ndarray, kind: str) -> pa.Array:
    """The JSON text (quoted ``YYYY-MM-DD`` / ``HH:MM:SS`` / ``YYYY-MM-DDTHH:MM:SS.ffffff``) of
    checked ISO character values, rearranged from their own digits."""
    lay = _ISO_LAYOUT[kind]
    n = len(ascii_)
    out = np.empty((n, len(lay)), dtype=np.uint8)
    for j, (src, ch) in enumerate(lay):
        out[:, j] = ascii_[:, src] if src >= 0 else ord(ch)
    offsets = np.arange(n + 1, dtype=np.int32) * len(lay)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(out))


def _images(buf: np.ndarray, codec: ColumnCodec, dpos: np.ndarray, dend: np.ndarray,
            has_before: np.ndarray, has_after: np.ndarray):
    """The row images of DATA areas ``[dpos, dend)`` of one table (area length checked):
    (JSON texts, before index, after index, good mask): area i's before image is
    ``texts[before[i]]`` (-1: none, or the area is not good), the same for after."""
    n = len(dpos)
    ok = (dend - dpos >= 2) & (_u16(buf, dpos) == dend - dpos)
    pos = dpos + 2
    b_start = pos + 2
    b_len = _u16(buf, pos)
    ok &= ~has_before | (b_start + b_len <= dend)
    pos = np.where(has_before, b_start + b_len, pos)
    a_start = pos + 2
    a_len = _u16(buf, pos)
    ok &= ~has_after | (a_start + a_len <= dend)
    pos = np.where(has_after, a_start + a_len, pos)
    ok &= pos == dend
    wb, wa = np.flatnonzero(ok & has_before), np.flatnonzero(ok & has_after)
    starts = np.concatenate([b_start[wb], a_start[wa]])
    ends = np.concatenate([b_start[wb] + b_len[wb], a_start[wa] + a_len[wa]])
    texts, good_img = codec.decode(buf, starts, ends)
    good = ok.copy()
    good[wb[~good_img[:len(wb)]]] = False
    good[wa[~good_img[len(wb):]]] = False
    # where each area's images are in ``texts`` (the good images, in order)
    slot = np.cumsum(good_img) - 1
    bi = np.full(n, -1, dtype=np.int64)
    ai = np.full(n, -1, dtype=np.int64)
    bi[wb] = slot[:len(wb)]
    ai[wa] = slot[len(wb):]
    bi[~good] = -1
    ai[~good] = -1
    return texts, bi, ai, good


def _take(arr: pa.Array, idx: np.ndarray) -> pa.Array:
    """``arr[idx]``, null where ``idx`` < 0."""
    if not len(idx):
        return pa.array([], arr.type)
    if (idx < 0).all():
        return pa.nulls(len(idx), arr.type)
    return arr.take(pa.array(idx, mask=idx < 0))


# ----------------------------------------------------------------- framing and resynchronisation

class _Framer:
    """Frames ``data`` (the whole archive or a range of it): record starts and lengths, and
    the damaged spans between them (see the module docstring)."""

    def __init__(self, data, rdw: bool, cp: _Codepage, base: int = 0) -> None:
        self.data = data
        self.buf = as_uint8(data)
        self.hi = len(self.buf)
        self.rdw = rdw
        self.hoff = L.RDW_LEN if rdw else 0
        self.cp = cp
        self.base = base

    # ---- one record (the careful step: the oracle's checks and errors, in its order)
    def step(self, pos: int, hi: int | None = None) -> int:
        """The length of the record at ``pos``, or raises the ``DecodeError`` that says why
        it does not frame. ``hi``: where the record must end by, when that is the next
        plausible record rather than the end of the data (the error then depends only on the
        bytes before it, so that a range of the archive decodes to the same rows)."""
        data, base = self.data, self.base
        if hi is None or hi >= self.hi:
            hi, ends, short = self.hi, "file ends", NeedData
        else:
            ends, short = "the next plausible record starts", Corrupt
        rec_end = rlen = -1
        if self.rdw:
            if hi - pos < L.RDW_LEN:
                raise short(f"{ends} inside an RDW", path="RDW", expected=L.RDW_LEN,
                            actual=hi - pos)
            rlen, zero = _RDW.unpack_from(data, pos)
            if zero != 0 or rlen < L.RDW_LEN + L.MIN_HEADER:
                raise Corrupt("bad RDW", path="RDW",
                              expected=f"length >= {L.RDW_LEN + L.MIN_HEADER} and 2 zero bytes",
                              actual=f"length {rlen}, flags 0x{zero:04X}")
            rec_end = pos + rlen
            if rec_end > hi:
                raise short(f"{ends} inside the record its RDW announces", path="RDW",
                            expected=rlen, actual=hi - pos)
            hpos = pos + L.RDW_LEN
        else:
            hpos = pos
            if hi - hpos < L.MIN_HEADER:
                raise short(f"{ends} inside a logical log header", path="LENGTH",
                            expected=L.MIN_HEADER, actual=hi - hpos)
        len_header, seglen, nsegs, segno = _FRAME.unpack_from(data, hpos)
        if len_header < L.MIN_HEADER or len_header > L.MAX_HEADER:
            raise Corrupt("header LENGTH out of range", offset=base + hpos, path="LENGTH",
                          expected=f"{L.MIN_HEADER}..{L.MAX_HEADER}", actual=len_header)
        if nsegs < 1 or not 1 <= segno <= nsegs:
            raise Corrupt("impossible SEGNUM/TOTALSEGS",
                          offset=base + hpos + H.offset("num_segments"), path="TOTALSEGS/SEGNUM",
                          expected="1 <= SEGNUM <= TOTALSEGS", actual=f"{segno}/{nsegs}")
        if self.rdw and hpos + len_header + seglen != rec_end:
            raise Corrupt("RDW length disagrees with LENGTH + SEGLEN", offset=base + pos,
                          path="RDW", expected=L.RDW_LEN + len_header + seglen, actual=rlen)
        dpos = hpos + len_header
        if dpos + seglen > hi:
            raise short(f"{ends} inside the record's DATA (SEGLEN)", offset=base + dpos,
                        path="SEGLEN", expected=seglen, actual=hi - dpos)
        return dpos + seglen - pos

    # ---- the whole span
    def frame(self) -> Frames:
        data, hi = self.data, self.hi
        starts, lens = array("q"), array("q")
        damaged: list[Damage] = []
        unpack = _FRAME.unpack_from
        lo_h, hi_h = L.MIN_HEADER, L.MAX_HEADER
        pos = 0
        if self.rdw:
            rdw = _RDW.unpack_from
            while pos < hi:
                if hi - pos >= 4 + lo_h:
                    rlen, zero = rdw(data, pos)
                    lh, sl, ns, sn = unpack(data, pos + 4)
                    if (zero == 0 and rlen == 4 + lh + sl and lo_h <= lh <= hi_h and 1 <= sn <= ns
                            and pos + rlen <= hi):
                        starts.append(pos)
                        lens.append(rlen)
                        pos += rlen
                        continue
                pos = self._damage(pos, starts, lens, damaged)
        else:
            u2 = _U2.unpack_from
            while pos < hi:
                if hi - pos >= lo_h:
                    lh, sl, ns, sn = unpack(data, pos)
                    end = pos + lh + sl
                    if lo_h <= lh <= hi_h and 1 <= sn <= ns and end <= hi:
                        # no RDW to confirm the lengths: a record not segmented must also have
                        # its DATA length equal SEGLEN (a row change has DATA), or be followed
                        # by a plausible record
                        if ns == 1 and (u2(data, pos + lh)[0] != sl if sl >= 2 else
                                        sl == 1 or self._row_change(pos)) \
                                and not (end == hi or self._plausible_at(end)):
                            pos = self._misframed(pos, damaged)
                            continue
                        starts.append(pos)
                        lens.append(lh + sl)
                        pos = end
                        continue
                pos = self._damage(pos, starts, lens, damaged)
        return Frames(np.frombuffer(starts, dtype=np.int64).copy() if len(starts) else
                      np.zeros(0, np.int64),
                      np.frombuffer(lens, dtype=np.int64).copy() if len(lens) else
                      np.zeros(0, np.int64), damaged)

    def _damage(self, q: int, starts: array, lens: array, damaged: list) -> int:
        """The record at ``q`` does not frame: record the damaged span, return where framing
        resumes. Without RDWs, the record before it may be the damaged one (its LENGTH or
        SEGLEN wrong, so that ``q`` is not a record start): then the span starts there."""
        c = resync(self.buf, q, self.hi, self._plausible)
        try:
            self.step(q, c)
            err: DecodeError = Corrupt("record runs past the next plausible record",
                                       path="LENGTH/SEGLEN")
        except DecodeError as exc:
            err = exc
        if not self.rdw and starts and starts[-1] + lens[-1] == q and \
                not (damaged and damaged[-1].end == starts[-1]):
            p = starts[-1]
            if self._consistent(p) is not True and not self._explains(q, c) \
                    and not self._header_like(q):
                # q is no header: the record before it was misframed
                starts.pop()
                lens.pop()
                return self._misframed(p, damaged)
        damaged.append(Damage(q, c, err))
        return c

    def _misframed(self, p: int, damaged: list) -> int:
        """The record at ``p`` frames by its own lengths but nothing plausible follows it:
        its LENGTH or SEGLEN is damaged. The span up to the next plausible record is damaged."""
        c = resync(self.buf, p, self.hi, self._plausible)
        lh, sl = _FRAME.unpack_from(self.data, p + self.hoff)[:2]
        err = Corrupt("record misframed: no plausible record follows it (LENGTH or SEGLEN "
                      f"damaged); resynchronised at 0x{self.base + c:X}", offset=self.base + p,
                      path="LENGTH/SEGLEN", expected="a record at its end",
                      actual=f"LENGTH {lh}, SEGLEN {sl}")
        damaged.append(Damage(p, c, err))
        return c

    def _plausible_at(self, pos: int) -> bool:
        return bool(self._plausible(self.buf, np.array([pos], dtype=np.int64))[0])

    def _header_like(self, q: int) -> bool:
        """Do the code and name fields at ``q`` look like a header's (its lengths aside)?"""
        if q + self.hoff + L.MIN_HEADER > self.hi:
            return False
        return bool(self._domain(self.buf, np.array([q], dtype=np.int64))[0])

    def _consistent(self, p: int) -> bool | None:
        """Does the (not segmented) record at ``p`` have a DATA length equal to its SEGLEN
        (None: nothing to compare: segments, records without DATA that need none)?"""
        lh, sl, ns, _ = _FRAME.unpack_from(self.data, p + self.hoff)
        if ns != 1:
            return None
        if sl == 0:
            return False if self._row_change(p) else None
        if sl < 2:
            return False
        return _U2.unpack_from(self.data, p + self.hoff + lh)[0] == sl

    def _inconsistent(self, pos: np.ndarray) -> np.ndarray:
        """``_consistent(p) is False`` for the framed records at ``pos`` (no RDW), at once."""
        buf = self.buf
        lh = _u16(buf, pos)
        sl = _u16(buf, pos + H.offset("len_segment"))
        ns = _u16(buf, pos + H.offset("num_segments"))
        row = _IS_ROW_CT[self.cp.ct_index[_u16(buf, pos + H.offset("change_type"))]]
        area = _u16(buf, pos + lh)
        return (ns == 1) & (((sl >= 2) & (area != sl)) | (sl == 1) | ((sl == 0) & row))

    def _row_change(self, p: int) -> bool:
        """Is the record at ``p`` a row change (which always has a DATA area)?"""
        return self.cp.change_type.get(_FRAME_CT.unpack_from(self.data, p + self.hoff)[0]) in L.IMAGES

    def _explains(self, q: int, c: int) -> bool:
        """Do the fields of the damaged record at ``q`` account for the span ``[q, c)`` (one
        of its length fields damaged, the others right)?"""
        hq = q + self.hoff
        if hq + L.MIN_HEADER > self.hi:
            return False
        lh, sl, _, _ = _FRAME.unpack_from(self.data, hq)
        span = c - hq
        in_range = L.MIN_HEADER <= lh <= L.MAX_HEADER
        if (in_range and lh + sl == span) or L.MIN_HEADER <= span - sl <= L.MAX_HEADER:
            return True
        return (in_range and hq + lh + 2 <= c
                and _U2.unpack_from(self.data, hq + lh)[0] == span - lh)

    # ---- vectorised plausibility (candidates of resync)
    def _frames_at(self, buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(frames mask, record end) of records at ``pos``: the fast loop's checks."""
        hp = pos + self.hoff
        ok = hp + L.MIN_HEADER <= self.hi
        lh = _u16(buf, hp)
        sl = _u16(buf, hp + H.offset("len_segment"))
        ns = _u16(buf, hp + H.offset("num_segments"))
        sn = _u16(buf, hp + H.offset("segment_no"))
        end = hp + lh + sl
        ok &= (lh >= L.MIN_HEADER) & (lh <= L.MAX_HEADER) & (sn >= 1) & (sn <= ns) & (end <= self.hi)
        if self.rdw:
            ok &= (_u16(buf, pos + 2) == 0) & (_u16(buf, pos) == L.RDW_LEN + lh + sl)
        return ok, end

    def _domain(self, buf: np.ndarray, cand: np.ndarray) -> np.ndarray:
        """CHANGE TYPE, UORDISP, LOGRECDISP and the EBCDIC name fields of the headers at
        ``cand`` (inside the buffer) hold values of their domains."""
        hp = cand + self.hoff
        cp = self.cp
        ok = cp.ct_index[_u16(buf, hp + H.offset("change_type"))] >= 0
        ok &= cp.disp_index[buf[hp + H.offset("uor_disp")]] >= 0
        ok &= cp.lrd_plausible[buf[hp + H.offset("log_rec_disp")]]
        for name in _TEXT_FIELDS:
            f = H.by_name[name]
            ok &= cp.text_byte[_rows(buf, hp + f.offset, f.size)].all(axis=1)
        return ok

    def _plausible(self, buf: np.ndarray, cand: np.ndarray) -> np.ndarray:
        out = np.zeros(len(cand), dtype=bool)
        ok, end = self._frames_at(buf, cand)
        idx = np.flatnonzero(ok)
        if not len(idx):
            return out
        c, end = cand[idx], end[idx]
        hp = c + self.hoff
        ok = self._domain(buf, c)
        lh = _u16(buf, hp)
        sl = _u16(buf, hp + H.offset("len_segment"))
        ns = _u16(buf, hp + H.offset("num_segments"))
        ok &= (ns > 1) | (sl == 0) | ((sl >= 2) & (_u16(buf, hp + lh) == sl))
        nxt_ok, _ = self._frames_at(buf, end)
        ok &= (end == self.hi) | nxt_ok
        out[idx[ok]] = True
        return out


# ----------------------------------------------------------------- the careful path (one record)

def _careful_record(data, start: int, hpos: int, rec_end: int, index: int, ctx: DecodeContext,
                    cp: _Codepage, codecs: Codecs, sink: EventSink, base: int) -> None:
    """The decoder before the columnar one, for one framed record (its rows, its errors)."""
    add = sink.add
    archive = ctx.archive
    n_bytes = rec_end - start
    (len_header, dbid, tbobid, len_owner, len_name, owner_raw, name_raw, lrsn, rba, rid, ct_raw,
     lrd_raw, commit_ts_raw, disp_raw, uor_id, seglen, nsegs, segno, order_value, commit_lrsn,
     auth_raw) = HDR.unpack_from(data, hpos)
    dpos = hpos + len_header
    dend = rec_end
    at = base + start
    trx_id = uor_id.hex().upper()
    lrsn_hex, rba_hex = lrsn.hex().upper(), rba.hex().upper()
    position = lrsn_hex + rba_hex
    try:
        disp = cp.uor_disp.get(disp_raw)
        if disp is None:
            raise BadValue("bad UORDISP", offset=hpos + H.offset("uor_disp"), path="UORDISP",
                           expected="C, A or blank", actual=disp_raw.hex().upper())
        if disp == "C":
            trx = {"trx_id": trx_id, "position": position, "trx_end": "commit",
                   "commit_position": commit_lrsn.hex().upper(),
                   "commit_ts": decode_ts17(commit_ts_raw),
                   "user": cp.text(auth_raw, "AUTHID") or None}
        elif disp == "A":
            add("skip", at, index, rule="lldf_uor_aborted", trx_id=trx_id,
                position=position, trx_end="abort", n_bytes=n_bytes)
            return
        else:
            trx = {"trx_id": trx_id, "position": position}
        if lrd_raw != cp.committed:
            add("skip", at, index, rule=cp.lrd_rules[lrd_raw[0]], n_bytes=n_bytes, **trx)
            return
        ct = cp.change_type.get(ct_raw)
        if ct is None:
            raise UnknownRecordType("unknown CHANGE TYPE", offset=hpos + H.offset("change_type"),
                                    path="CHANGE TYPE",
                                    expected="/".join(sorted(c.strip() for c in L.CHANGE_TYPES)),
                                    actual=ct_raw.decode(cp.cp, "replace"))
        control = L.CONTROL_TYPES.get(ct)
        if control is not None:
            add("control", at, index, rule=control, position=position, n_bytes=n_bytes)
            return
        codec = codecs.by_key(dbid, tbobid)
        if isinstance(codec, DecodeError):
            raise Corrupt(codec.reason, path=codec.path, expected=codec.expected,
                          actual=codec.actual)
        row_change = ct in L.IMAGES
        if codec is None:
            if ct not in L.DDL_TYPES:
                raise UnknownTable("table not in the catalog", offset=hpos + H.offset("dbid"),
                                   path="DBID.TBOBID", expected="a catalog table id",
                                   actual=f"{dbid}.{tbobid}")
            schema = cp.text(owner_raw[:min(len_owner, 8)], "TABLEOWNER")
            tname = cp.text(name_raw[:min(len_name, 18)], "TABLENAME")
        else:
            schema, tname = codec.table.schema, codec.table.name
        op = _OPS[ct]
        fields = dict(trx, op=op, table_id=f"{dbid}.{tbobid}", schema_name=schema,
                      table_name=tname, trx_order=f"{order_value:08X}{lrsn_hex}{rba_hex}",
                      row_id=rid.hex().upper() if row_change else None, n_bytes=n_bytes)
        if nsegs > 1:
            add("segment", at, index, seg_key=trx_id + rba_hex + lrsn_hex + rid.hex().upper(),
                seg_num=segno, seg_total=nsegs, seg_data=bytes(data[dpos:dend]),
                rule="lldf_change_" + ct.strip(), **fields)
            return
        body = area_bounds(data, dpos, dend)
        if row_change:
            if body == dpos:
                raise Corrupt("row change without a DATA area", offset=dpos, path="DATA",
                              expected=">= 2 bytes", actual=0)
            before, after = read_row_images(codec, ct, data, body, dend)
            add("change", at, index, before=before, after=after, **fields)
        elif op == "t":
            add("change", at, index, **fields)
        else:
            add("change", at, index, ddl=ddl_text(ct, data, body, dend, cp, f"{schema}.{tname}"),
                **fields)
    except DecodeError as exc:
        if exc.offset is not None:
            exc.offset += base           # offsets in ``data`` -> in the archive
        exc.located(archive=archive, offset=at, record_index=index)
        sink.quarantine(exc, at, index, data[start:rec_end], trx_id=trx_id, position=position,
                        n_bytes=n_bytes)


# ----------------------------------------------------------------- the columnar path

def _hexcat(*arrays) -> pa.Array:
    return pc.binary_join_element_wise(*arrays, pa.scalar("", pa.string()))


def _where(mask: np.ndarray, arr: pa.Array) -> pa.Array:
    """``arr`` where ``mask``, null elsewhere."""
    if mask.all():
        return arr
    if not mask.any():
        return pa.nulls(len(arr), arr.type)
    return pc.if_else(pa.array(mask), arr, pa.nulls(len(arr), arr.type))


def _pick(values: list, codes: np.ndarray, typ=pa.string()) -> pa.Array:
    """``values[code]`` per row (null where code < 0)."""
    return pa.array(values, typ).take(pa.array(codes.astype(np.int64), mask=codes < 0))


_KINDS = ["change", "skip", "control", "segment"]
K_CHANGE, K_SKIP, K_CONTROL, K_SEGMENT = range(4)


class _Chunk:
    """The records ``[lo, hi)`` of a framing, decoded a column at a time."""

    def __init__(self, data, buf: np.ndarray, starts: np.ndarray, lens: np.ndarray,
                 indexes: np.ndarray, rdw: bool, cp: _Codepage, codecs: Codecs) -> None:
        self.data, self.buf = data, buf
        self.starts, self.lens, self.indexes = starts, lens, indexes
        self.hoff = L.RDW_LEN if rdw else 0
        self.cp, self.codecs = cp, codecs

    def run(self, ctx: DecodeContext, sink: EventSink, base: int) -> None:
        buf, cp = self.buf, self.cp
        n = len(self.starts)
        hpos = self.starts + self.hoff
        hd = H.gather(buf, hpos, _GATHER)
        dpos = hpos + hd["len_header"].astype(np.int64)
        dend = self.starts + self.lens
        ct_raw = hd["change_type"].astype(np.int64)
        ct = cp.ct_index[(ct_raw[:, 0] << 8) | ct_raw[:, 1]].astype(np.int64)
        disp = cp.disp_index[hd["uor_disp"][:, 0]]
        lrd = hd["log_rec_disp"][:, 0]
        nsegs = hd["num_segments"].astype(np.int64)
        careful = disp < 0
        abort = disp == 1
        com = disp == 0
        # commit fields (UORDISP C): BIN(17) timestamp and AUTHID
        ts, ts_bad, ts_zero = V.bcd_timestamps(hd["uor_commit_timestamp"])
        auth = hd["auth_id"]
        user, user_bad = cp.texts(auth.reshape(-1), np.arange(n + 1, dtype=np.int64) * auth.shape[1])
        careful |= com & (ts_bad | user_bad)
        live = ~careful & ~abort
        skip = live & (lrd != cp.committed_byte)
        live &= ~skip
        careful |= live & (ct < 0)
        live &= ct >= 0
        ct_code = np.where(ct >= 0, ct, 0)
        is_control = live & _IS_CONTROL[ct_code]
        rest = live & ~is_control
        # tables
        key = (hd["dbid"].astype(np.int64) << 16) | hd["tbobid"].astype(np.int64)
        tab_of = np.full(n, -1, dtype=np.int64)
        tables: list[TableCodec] = []
        uniq, inv = np.unique(np.where(rest, key, -1), return_inverse=True)
        for u_i, k in enumerate(uniq.tolist()):
            if k < 0:
                continue
            codec = self.codecs.by_key(k >> 16, k & 0xFFFF)
            rows = inv == u_i
            if isinstance(codec, TableCodec):
                tab_of[rows] = len(tables)
                tables.append(codec)
            else:                      # catalog error, unknown table, DDL of an unknown table
                careful |= rows
        rest &= tab_of >= 0
        seg = rest & (nsegs > 1)
        whole = rest & ~seg
        is_row = _IS_ROW[ct_code]
        is_co = ct_code == _CT_NUM["CO"]
        is_ex = ct_code == _CT_NUM["E "]
        # DATA areas of the records that are not segmented
        alen = np.where(dend - dpos >= 2, _u16(buf, dpos), -1)
        area_ok = (dend == dpos) | ((dend - dpos >= 2) & (alen == dend - dpos))
        careful |= whole & ~area_ok
        careful |= whole & is_row & (dend == dpos)
        whole &= ~careful
        before_i = np.full(n, -1, dtype=np.int64)
        after_i = np.full(n, -1, dtype=np.int64)
        texts: list[pa.Array] = []
        offset = 0
        for t_i, codec in enumerate(tables):
            rows = np.flatnonzero(whole & is_row & (tab_of == t_i))
            if not len(rows):
                continue
            ctr = ct_code[rows]
            json, bi, ai, good = _images(buf, codec.columnar, dpos[rows], dend[rows],
                                         _HAS_BEFORE[ctr], _HAS_AFTER[ctr])
            careful[rows[~good]] = True
            texts.append(json)
            before_i[rows] = np.where(bi >= 0, offset + bi, -1)
            after_i[rows] = np.where(ai >= 0, offset + ai, -1)
            offset += len(json)
        ddl = self._ddl(whole & (is_co | is_ex) & ~careful, is_ex, dpos, dend, tab_of, tables,
                        careful)
        fast = ~careful
        # ---- careful records (their own rows, errors included)
        for i in np.flatnonzero(careful).tolist():
            s = int(self.starts[i])
            _careful_record(self.data, s, s + self.hoff, s + int(self.lens[i]), int(self.indexes[i]),
                            ctx, cp, self.codecs, sink, base)
        if not fast.any():
            return
        f = np.flatnonzero(fast)
        kind = np.where(abort | skip, K_SKIP, np.where(is_control, K_CONTROL,
                                                       np.where(seg, K_SEGMENT, K_CHANGE)))[f]
        has_trx = (abort | skip | rest)[f]
        comf = com[f]
        chg = (rest & fast)[f]                       # change and segment rows
        segf = seg[f]
        ctf = ct_code[f]
        # rules: aborted, LOGRECDISP, control, segment
        rule_list = ["lldf_uor_aborted"] + cp.lrd_rules + list(_CONTROL_RULES) + _SEG_RULES
        rule = np.full(len(f), -1, dtype=np.int64)
        rule[abort[f]] = 0
        rule = np.where(skip[f], 1 + lrd[f].astype(np.int64), rule)
        rule = np.where(is_control[f], 257 + _CONTROL_NUM[ctf], rule)
        rule = np.where(segf, 257 + len(_CONTROL_RULES) + ctf, rule)
        hsub = hd[f]
        position = hex_bytes(np.concatenate([hsub["log_lrsn"], hsub["log_rba"]], axis=1))
        trx_id = hex_bytes(hsub["uor_id"])
        cols = {
            "rule": _pick(rule_list, rule),
            "trx_id": _where(has_trx, trx_id),
            "position": position,
            "trx_end": _pick(["commit", "abort"], np.where(has_trx & comf, 0,
                                                           np.where(abort[f], 1, -1))),
            "commit_position": _where(has_trx & comf, hex_bytes(hsub["uor_commit_lrsn"])),
            "commit_ts": pa.array(ts[f], TS, mask=~(has_trx & comf) | ts_zero[f]),
            "user": _where(has_trx & comf, pc.utf8_rtrim(user.take(pa.array(f)), characters=" \x00")),
        }
        cols["user"] = pc.if_else(pc.equal(cols["user"], ""), pa.scalar(None, pa.string()),
                                  cols["user"])
        tf = tab_of[f]
        tcodes = np.where(chg, tf, -1)
        cols.update(
            op=_pick([_OPS.get(c) for c in CT_LIST], np.where(chg, ctf, -1)),
            table_id=_pick([c.table.id for c in tables], tcodes),
            schema_name=_pick([c.table.schema for c in tables], tcodes),
            table_name=_pick([c.table.name for c in tables], tcodes),
            trx_order=_where(chg, _hexcat(hex_ints(hsub["order_value"], 8), position)),
            row_id=_where(chg & _IS_ROW[ctf], hex_bytes(hsub["rid"])),
        )
        if offset:
            allt = pa.concat_arrays(texts)
            cols["before"] = _take(allt, before_i[f])
            cols["after"] = _take(allt, after_i[f])
        if ddl is not None:
            cols["ddl"] = ddl.take(pa.array(f))
        if segf.any():
            sidx = f[segf]
            seg_at = np.full(len(f), -1, dtype=np.int64)
            seg_at[segf] = np.arange(len(sidx))
            raw, offs = V.flat(buf, dpos[sidx], dend[sidx] - dpos[sidx])
            sdata = _binary(raw, offs)
            skey = _hexcat(trx_id.filter(pa.array(segf)),
                           hex_bytes(hsub["log_rba"][segf]), hex_bytes(hsub["log_lrsn"][segf]),
                           hex_bytes(hsub["rid"][segf]))
            cols["seg_key"] = _take(skey, seg_at)
            cols["seg_data"] = _take(sdata, seg_at)
            cols["seg_num"] = pa.array(hsub["segment_no"].astype(np.int32), mask=~segf)
            cols["seg_total"] = pa.array(nsegs[f].astype(np.int32), mask=~segf)
        sink.add_columns(_pick(_KINDS, kind), base + self.starts[f], self.indexes[f], 1,
                         n_bytes=self.lens[f], **cols)

    def _ddl(self, mask, is_ex, dpos, dend, tab_of, tables, careful) -> pa.Array | None:
        """``ddl`` text of CO / E records (full length, null elsewhere); records whose text
        the fast path cannot make are marked careful."""
        rows = np.flatnonzero(mask)
        if not len(rows):
            return None
        n = len(dpos)
        buf, cp = self.buf, self.cp
        body = np.where(dend[rows] > dpos[rows], dpos[rows] + 2, dpos[rows])
        end = dend[rows]
        ex = is_ex[rows]
        names = pa.array([f"{c.table.schema}.{c.table.name}" for c in tables], pa.string())
        table = names.take(pa.array(tab_of[rows]))
        # CO: the text, trimmed; empty -> CATALOG OBJECT
        raw, offs = V.flat(buf, body, np.where(ex, 0, end - body))
        co, bad = cp.texts(raw, offs)
        co = pc.utf8_rtrim(co, characters=" \x00")
        co = pc.if_else(pc.equal(co, ""), _hexcat(pa.scalar("CATALOG OBJECT "), table), co)
        # E: two names with their lengths, ending the area
        l1 = _u16(buf, body)
        p2 = body + 2 + l1
        l2 = _u16(buf, p2)
        stop = p2 + 2 + l2
        ex_ok = (body + 2 <= end) & (p2 + 2 <= end) & (stop == end)
        bad |= ex & ~ex_ok
        good_ex = ex & ex_ok
        r1, o1 = V.flat(buf, body + 2, np.where(good_ex, l1, 0))
        r2, o2 = V.flat(buf, p2 + 2, np.where(good_ex, l2, 0))
        own, b1 = cp.texts(r1, o1)
        nam, b2 = cp.texts(r2, o2)
        bad |= ex & (b1 | b2)
        clone = _hexcat(pc.utf8_rtrim(own, characters=" \x00"), pa.scalar("."),
                        pc.utf8_rtrim(nam, characters=" \x00"))
        exch = _hexcat(pa.scalar("EXCHANGE DATA BETWEEN TABLE "), table, pa.scalar(" AND "), clone)
        text = pc.if_else(pa.array(ex), exch, co)
        careful[rows[bad]] = True
        out = np.full(n, -1, dtype=np.int64)
        out[rows] = np.arange(len(rows))
        out[rows[bad]] = -1
        return _take(text, out)


_IS_CONTROL = np.array([ct in L.CONTROL_TYPES for ct in CT_LIST])
_CONTROL_RULES = tuple(L.CONTROL_TYPES[ct] for ct in CT_LIST if ct in L.CONTROL_TYPES)
_CONTROL_NUM = np.array([_CONTROL_RULES.index(L.CONTROL_TYPES[ct]) if ct in L.CONTROL_TYPES else 0
                         for ct in CT_LIST], dtype=np.int64)
_SEG_RULES = ["lldf_change_" + ct.strip() for ct in CT_LIST]
_IS_ROW = np.array([ct in L.IMAGES for ct in CT_LIST])
_IS_ROW_CT = np.append(_IS_ROW, False)          # indexed by a CT_LIST index or -1 (unknown)
_HAS_BEFORE = np.array([L.IMAGES.get(ct, (False, False))[0] for ct in CT_LIST])
_HAS_AFTER = np.array([L.IMAGES.get(ct, (False, False))[1] for ct in CT_LIST])


def decode(data, ctx: DecodeContext, sink: EventSink) -> None:
    """Decode an archive, or the range of one that starts at ``ctx.offset`` (record
    ``ctx.index``): one row per record, one quarantine row per damaged span."""
    opts = ctx.options or {}
    rdw = bool(opts.get("rdw", False))
    base = int(getattr(ctx, "offset", 0) or 0)
    first = int(getattr(ctx, "index", 0) or 0)
    n = len(data)
    try:
        cp = _Codepage.get(opts.get("codepage") or DEFAULT_CODEPAGE)
    except DecodeError as exc:
        if n:
            sink.quarantine(exc.located(archive=ctx.archive, offset=base), base, first, data[:256],
                            n_bytes=n)
        return None
    framer = _Framer(data, rdw, cp, base)
    frames = framer.frame()
    rec_idx, dmg_idx = frames.record_indexes(first)
    for d, i in zip(frames.damaged, dmg_idx):
        err = d.error.located(archive=ctx.archive, offset=base + d.start, record_index=i)
        sink.quarantine(err, base + d.start, i, data[d.start:d.start + 256], n_records=d.records,
                        n_bytes=d.length)
    if not len(frames):
        return None
    codecs = codecs_for(ctx.catalog)
    for lo in range(0, len(frames), CHUNK):
        hi = min(lo + CHUNK, len(frames))
        _Chunk(data, framer.buf, frames.starts[lo:hi], frames.lengths[lo:hi], rec_idx[lo:hi],
               rdw, cp, codecs).run(ctx, sink, base)
    return None


def split(data, ctx: DecodeContext, target_bytes: int) -> list[dict]:
    """Byte ranges of about ``target_bytes`` covering the archive, cut at record starts (any
    record boundary: segments are rows of their own), for ``decode`` with ``ctx.offset`` =
    ``start`` and ``ctx.index`` = ``index``."""
    opts = ctx.options or {}
    try:
        cp = _Codepage.get(opts.get("codepage") or DEFAULT_CODEPAGE)
    except DecodeError:
        return [{"start": 0, "end": len(data), "index": 0}]
    framer = _Framer(data, bool(opts.get("rdw", False)), cp)
    frames = framer.frame()
    rec_idx, _ = frames.record_indexes(0)
    # a cut where decoding a range starts and ends exactly as in the whole archive: not
    # right after a damaged span (its extent and error look at the record after it), nor
    # after a record whose DATA length disagrees with SEGLEN (kept because the record after
    # it is plausible)
    starts, ends = frames.starts, frames.ends
    allowed = np.ones(len(starts), dtype=bool)
    allowed[1:] = ends[:-1] == starts[1:]
    if not framer.rdw and len(starts) > 1:
        allowed[1:] &= ~framer._inconsistent(starts[:-1])
    return [{"start": s, "end": e, "index": i}
            for s, e, i in split_ranges(starts, len(data), max(1, int(target_bytes)),
                                        allowed=allowed, first_index=rec_idx)]


# ----------------------------------------------------------------- segments

def _ct_of_rule(rule: str | None) -> str | None:
    if rule and rule.startswith("lldf_change_"):
        code = rule[len("lldf_change_"):]
        return code.ljust(2)
    return None


def _reassembled_ct(row: dict) -> str | None:
    return _ct_of_rule(row.get("rule")) or {"c": "I ", "u": "UB", "d": "D ", "t": "DT",
                                            "ddl": "CO"}.get(row.get("op"))


def _reassembled_careful(data: bytes, row: dict, ctx: DecodeContext, cp: _Codepage) -> dict:
    ct = _reassembled_ct(row)
    where = "reassembled DATA area"
    try:
        body = area_bounds(data, 0, len(data))
        if ct in L.IMAGES:
            codec = codecs_for(ctx.catalog).by_id(row.get("table_id"))
            if codec is None:
                raise UnknownTable("table not in the catalog", path="DBID.TBOBID",
                                   expected="a catalog table id", actual=row.get("table_id"))
            if isinstance(codec, DecodeError):
                raise Corrupt(codec.reason, path=codec.path, expected=codec.expected,
                              actual=codec.actual)
            if body == 0:
                raise Corrupt("row change without a DATA area", path="DATA", expected=">= 2 bytes",
                              actual=0)
            before, after = read_row_images(codec, ct, data, body, len(data))
            return {"before": before, "after": after, "ddl": None}
        if ct in L.TRUNCATE_TYPES:
            return {"before": None, "after": None, "ddl": None}
        if ct in L.DDL_TYPES:
            table = f"{row.get('schema_name') or ''}.{row.get('table_name') or ''}"
            return {"before": None, "after": None,
                    "ddl": ddl_text(ct, data, body, len(data), cp, table)}
        raise UnknownRecordType("segment group of an unexpected CHANGE TYPE", path="rule",
                                expected="lldf_change_<type>", actual=row.get("rule"))
    except DecodeError as exc:
        if exc.offset is not None:
            exc.path = f"{where}+0x{exc.offset:X}" + (f" {exc.path}" if exc.path else "")
            exc.offset = None
        else:
            exc.path = where + (f" {exc.path}" if exc.path else "")
        exc.args = (exc._render(),)
        return exc.located(archive=row.get("archive_file"), offset=row.get("record_offset"))


def decode_reassembled_many(datas: list[bytes], rows: list[dict], ctx: DecodeContext
                            ) -> list[dict | DecodeError]:
    """The changes of complete segment groups (``datas[i]``: group i's ``seg_data`` in SEGNUM
    order, its whole DATA area; ``rows[i]``: its first piece's event row): per group
    ``{"before", "after", "ddl"}``, or the ``DecodeError`` to quarantine it with. Row images
    are decoded per table in batches by the same code as the archive decoder's."""
    cp = _Codepage.get((ctx.options or {}).get("codepage") or DEFAULT_CODEPAGE)
    out: list = [None] * len(datas)
    datas = [bytes(d) for d in datas]
    cts = [_reassembled_ct(r) for r in rows]
    codecs = codecs_for(ctx.catalog)
    by_table: dict[str, list[int]] = {}
    for i, (ct, row) in enumerate(zip(cts, rows)):
        if ct in L.IMAGES and isinstance(codecs.by_id(row.get("table_id")), TableCodec):
            by_table.setdefault(row.get("table_id"), []).append(i)
    for tid, idx in by_table.items():
        codec = codecs.by_id(tid)
        lens = np.array([len(datas[i]) for i in idx], dtype=np.int64)
        dend = np.cumsum(lens)
        dpos = dend - lens
        buf = np.frombuffer(b"".join(datas[i] for i in idx), dtype=np.uint8)
        ctn = np.array([_CT_NUM[cts[i]] for i in idx], dtype=np.int64)
        json, bi, ai, good = _images(buf, codec.columnar, dpos, dend, _HAS_BEFORE[ctn],
                                     _HAS_AFTER[ctn])
        bl, al = _take(json, bi).to_pylist(), _take(json, ai).to_pylist()
        for k, i in enumerate(idx):
            if good[k]:
                out[i] = {"before": bl[k], "after": al[k], "ddl": None}
    for i, got in enumerate(out):
        if got is None:
            out[i] = _reassembled_careful(datas[i], rows[i], ctx, cp)
    return out


def decode_reassembled(data: bytes, row: dict, ctx: DecodeContext) -> dict:
    """The change of a complete segment group: ``data`` = the pieces' ``seg_data`` in SEGNUM
    order (the whole DATA area), ``row`` = the first piece's event row. Returns
    ``{"before", "after", "ddl"}``; raises a ``DecodeError`` (the job quarantines)."""
    (got,) = decode_reassembled_many([data], [row], ctx)
    if isinstance(got, DecodeError):
        raise got
    return got


def assemble_segments(pieces: list[dict]) -> bytes:
    """Concatenate the ``seg_data`` of one segment group's rows in SEGNUM order; raises
    ``IncompleteSegments`` naming the pieces it has (archive, offset) and the missing ones."""
    if not pieces:
        raise IncompleteSegments("empty segment group")
    total = pieces[0]["seg_total"]
    by_num = {p["seg_num"]: p for p in pieces}
    missing = [i for i in range(1, total + 1) if i not in by_num]
    extra = sorted(set(by_num) - set(range(1, total + 1)))
    if missing or extra or len(pieces) != len(by_num):
        have = ", ".join(f"{p['seg_num']}/{p['seg_total']} at {p.get('archive_file')}:"
                         f"{p.get('record_offset')}" for p in sorted(pieces, key=lambda p: p["seg_num"]))
        raise IncompleteSegments(
            f"segment group {pieces[0].get('seg_key')} incomplete: has {have}",
            archive=pieces[0].get("archive_file"), offset=pieces[0].get("record_offset"),
            expected=f"segments 1..{total}",
            actual=f"missing {missing}" + (f", unexpected {extra}" if extra else "")
                   + (", duplicates" if len(pieces) != len(by_num) else ""))
    return b"".join(by_num[i]["seg_data"] for i in range(1, total + 1))
