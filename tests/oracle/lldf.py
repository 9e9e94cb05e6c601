"""Oracle: the per-record Log Master (lldf) decoder as it was before the columnar decoder
(decoders/lldf/decoder.py at commit a37ebf5), logic unchanged, imports fixed (its layout in
``lldf_layout``). tests/test_lldf_oracle.py compares the package's decoder with it;
bench/plain.py (baseline (a)) reuses its ``HDR``, ``TableCodec`` and ``_render_columns``.
``decode`` is wrapped with ``accounts_bytes`` like the package's. Do not change its behaviour.

The original docstring:

Decoder of Log Master logical log data files (SPEC section 3, lldf).

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
  ``decode_reassembled``.
* Framing: a record is [RDW] + header (LENGTH bytes) + SEGLEN bytes. A header that cannot
  frame (LENGTH < 288 or > 4096, SEGNUM/TOTALSEGS impossible, a bad RDW, RDW length not
  LENGTH + SEGLEN + 4) quarantines the rest of the file as one row, unless RDWs are on and
  the RDW itself is sound: then only that record is quarantined and decoding resumes after
  it. A file that stops inside a record quarantines the tail (``truncated``).
"""

from __future__ import annotations

import datetime as _dt
import re
import struct
from typing import Callable

from decoders import codecs as C
from decoders.base import DecodeContext
from decoders.catalog import Catalog, Column, Table
from decoders.errors import BadValue, Corrupt, DecodeError, IncompleteSegments, NeedData, \
    UnknownRecordType, UnknownTable
from decoders.events import EventSink, accounts_bytes
from tests.oracle import lldf_layout as L

DEFAULT_CODEPAGE = "cp037"
UTC = _dt.timezone.utc

# ----------------------------------------------------------------- header

# the fields the decoder reads, in layout order (the struct skips the others)
_HDR_FIELDS = ("len_header", "dbid", "tbobid", "len_owner", "len_name", "owner", "name",
               "log_lrsn", "log_rba", "rid", "change_type", "log_rec_disp",
               "uor_commit_timestamp", "uor_disp", "uor_id", "len_segment", "num_segments",
               "segment_no", "order_value", "uor_commit_lrsn", "auth_id")
assert list(_HDR_FIELDS) == [n for n in L.NAMES if n in _HDR_FIELDS]
HDR = L.header_struct(_HDR_FIELDS)
_FRAME = L.header_struct(("len_header", "len_segment", "num_segments", "segment_no"))


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

    @classmethod
    def get(cls, cp: str) -> "_Codepage":
        got = cls._cache.get(cp)
        if got is None:
            try:
                "".encode(cp)
            except LookupError:
                raise BadValue("unknown codepage option", expected="a Python codec",
                               actual=cp) from None
            got = cls._cache[cp] = cls(cp)
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


# ----------------------------------------------------------------- row images

_DATE = re.compile(rb"(\d{4})-(\d\d)-(\d\d)")
_TIME = re.compile(rb"(\d\d)[.:](\d\d)[.:](\d\d)")
_TIMESTAMP = re.compile(rb"(\d{4})-(\d\d)-(\d\d)[-T ](\d\d)[.:](\d\d)[.:](\d\d)\.(\d{6})")


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


def _chars(enc: str, pattern: re.Pattern, build: Callable, what: str) -> Callable[[bytes], object]:
    """DATE/TIME/TIMESTAMP as characters in the table's encoding."""
    table = _to_ascii(enc)

    def dec(raw: bytes):
        if table is None:
            text = _text(enc)(raw).encode("ascii", "replace")
        else:
            text = raw.translate(table) if table else raw
        m = pattern.fullmatch(text)
        if m is None:
            raise BadValue(f"{what} is not in ISO character format", expected=what,
                           actual=text.decode("ascii", "replace"))
        return build(*map(int, m.groups()), what=what)
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
        w = 4 if t == "REAL" else 8 if t == "DOUBLE" else (col.length or 8)
        return f"{w}s", (_ibm4 if w == 4 else C.decode_ibm_float), w
    if t == "CHAR":
        return f"{col.length}s", _text(enc), col.length
    if t == "BINARY":
        return f"{col.length}s", None, col.length
    if t == "DATE":
        return "10s", _chars(enc, _DATE, C.make_date, "DATE"), 10
    if t == "TIME":
        return "8s", _chars(enc, _TIME, C.make_time, "TIME"), 8
    if t == "TIMESTAMP":
        return "26s", _chars(enc, _TIMESTAMP, C.make_timestamp, "TIMESTAMP"), 26
    raise Corrupt(f"column {col.name}: type {t} has no lldf row-image layout",
                  path=f"catalog column {col.name}",
                  expected="SMALLINT/INTEGER/BIGINT/DECIMAL/FLOAT/CHAR/VARCHAR/DATE/TIME/TIMESTAMP",
                  actual=t)


def _render_columns(table: Table) -> list[Column]:
    # 4-byte floats render as IEEE singles only when the decoder marked them ``Float4``
    # (exactly a single); the DOUBLE renderer does exactly that per value.
    return [Column(c.name, "DOUBLE") if c.type == "REAL" or (c.type == "FLOAT" and c.length == 4)
            else c for c in table.columns]


class TableCodec:
    """The precompiled row-image decoder of one table.

    The columns are cut into runs at each variable-length column: each run (null bytes,
    fixed-width values, and the 2-byte length of the VARCHAR that ends it) is one
    ``struct.Struct`` read; the VARCHAR bytes follow it."""

    __slots__ = ("table", "runs", "render", "names")

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
        n = L.LEN2.unpack_from(buf, pos)[0]
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


# ----------------------------------------------------------------- DATA areas

def area_bounds(buf: bytes, pos: int, end: int) -> int:
    """Checks the DATA area at ``buf[pos:end]`` (its 2-byte length must say end - pos);
    returns the position of the area's body."""
    if end == pos:
        return pos            # no DATA area (allowed for truncates, DDL, commands)
    if end - pos < 2:
        raise Corrupt("DATA area too short for its length", offset=pos, path="DATA length",
                      expected=">= 2", actual=end - pos)
    n = L.LEN_AREA.unpack_from(buf, pos)[0]
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
        n = L.LEN2.unpack_from(buf, pos)[0]
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


def _ct_of_rule(rule: str | None) -> str | None:
    if rule and rule.startswith("lldf_change_"):
        code = rule[len("lldf_change_"):]
        return code.ljust(2)
    return None


def decode_reassembled(data: bytes, row: dict, ctx: DecodeContext) -> dict:
    """The change of a complete segment group: ``data`` = the pieces' ``seg_data`` in SEGNUM
    order (the whole DATA area), ``row`` = the first piece's event row. Returns
    ``{"before", "after", "ddl"}``; raises a ``DecodeError`` (the job quarantines)."""
    data = bytes(data)
    cp = _Codepage.get((ctx.options or {}).get("codepage") or DEFAULT_CODEPAGE)
    op = row.get("op")
    ct = _ct_of_rule(row.get("rule")) or {"c": "I ", "u": "UB", "d": "D ", "t": "DT",
                                          "ddl": "CO"}.get(op)
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
        raise exc.located(archive=row.get("archive_file"), offset=row.get("record_offset"))


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


# ----------------------------------------------------------------- framing and records

def _rdw_sound(data: bytes, pos: int) -> bool:
    """Does a plausible RDW (or the end of the file) start at ``pos``?"""
    n = len(data)
    if pos == n:
        return True
    if pos + L.RDW_LEN > n:
        return False
    length, zero = L.RDW.unpack_from(data, pos)
    return zero == 0 and length >= L.RDW_LEN + L.MIN_HEADER and pos + length <= n


def _decode(data: bytes, ctx: DecodeContext, sink: EventSink) -> None:
    opts = ctx.options or {}
    rdw = bool(opts.get("rdw", False))
    n = len(data)
    index = 0
    try:
        cp = _Codepage.get(opts.get("codepage") or DEFAULT_CODEPAGE)
    except DecodeError as exc:
        if n:
            sink.quarantine(exc.located(archive=ctx.archive, offset=0), 0, 0, data[:256])
        return None
    codecs = codecs_for(ctx.catalog)
    ct_of, disp_of, committed = cp.change_type, cp.uor_disp, cp.committed
    add = sink.add
    unpack = HDR.unpack_from
    archive = ctx.archive
    pos = 0

    def rest(exc: DecodeError, at: int) -> None:
        sink.quarantine(exc.located(archive=archive, offset=at, record_index=index),
                        at, index, data[at:at + 256])

    while pos < n:
        start = pos
        # ---- framing
        if rdw:
            if n - pos < L.RDW_LEN:
                rest(NeedData("file ends inside an RDW", path="RDW", expected=L.RDW_LEN,
                              actual=n - pos), start)
                break
            rlen, zero = L.RDW.unpack_from(data, pos)
            if zero != 0 or rlen < L.RDW_LEN + L.MIN_HEADER:
                rest(Corrupt("bad RDW", path="RDW",
                             expected=f"length >= {L.RDW_LEN + L.MIN_HEADER} and 2 zero bytes",
                             actual=f"length {rlen}, flags 0x{zero:04X}"), start)
                break
            rec_end = pos + rlen
            if rec_end > n:
                rest(NeedData("file ends inside the record its RDW announces", path="RDW",
                              expected=rlen, actual=n - pos), start)
                break
            hpos = pos + L.RDW_LEN
        else:
            rec_end = -1
            hpos = pos
            if n - hpos < L.MIN_HEADER:
                rest(NeedData("file ends inside a logical log header", path="LENGTH",
                              expected=L.MIN_HEADER, actual=n - hpos), start)
                break
        len_header, seglen, nsegs, segno = _FRAME.unpack_from(data, hpos)
        problem = None
        if len_header < L.MIN_HEADER or len_header > L.MAX_HEADER:
            problem = Corrupt("header LENGTH out of range", offset=hpos, path="LENGTH",
                              expected=f"{L.MIN_HEADER}..{L.MAX_HEADER}", actual=len_header)
        elif nsegs < 1 or not 1 <= segno <= nsegs:
            problem = Corrupt("impossible SEGNUM/TOTALSEGS", offset=hpos + L.OFFSET["num_segments"],
                              path="TOTALSEGS/SEGNUM", expected="1 <= SEGNUM <= TOTALSEGS",
                              actual=f"{segno}/{nsegs}")
        elif rdw and hpos + len_header + seglen != rec_end:
            problem = Corrupt("RDW length disagrees with LENGTH + SEGLEN", offset=start,
                              path="RDW", expected=L.RDW_LEN + len_header + seglen, actual=rlen)
        if problem is not None:
            if rdw and _rdw_sound(data, rec_end):
                problem.located(archive=archive, record_index=index)
                sink.quarantine(problem, start, index, data[start:rec_end])
                index += 1
                pos = rec_end
                continue
            rest(problem, start)
            break
        dpos = hpos + len_header
        dend = dpos + seglen
        if not rdw and dend > n:
            rest(NeedData("file ends inside the record's DATA (SEGLEN)", offset=dpos,
                          path="SEGLEN", expected=seglen, actual=n - dpos), start)
            break
        pos = dend

        # ---- the record
        (_, dbid, tbobid, len_owner, len_name, owner_raw, name_raw, lrsn, rba, rid, ct_raw,
         lrd_raw, commit_ts_raw, disp_raw, uor_id, _, _, _, order_value, commit_lrsn,
         auth_raw) = unpack(data, hpos)
        trx_id = uor_id.hex().upper()
        lrsn_hex, rba_hex = lrsn.hex().upper(), rba.hex().upper()
        position = lrsn_hex + rba_hex
        try:
            disp = disp_of.get(disp_raw)
            if disp is None:
                raise BadValue("bad UORDISP", offset=hpos + L.OFFSET["uor_disp"], path="UORDISP",
                               expected="C, A or blank", actual=disp_raw.hex().upper())
            if disp == "C":
                trx = {"trx_id": trx_id, "position": position, "trx_end": "commit",
                       "commit_position": commit_lrsn.hex().upper(),
                       "commit_ts": decode_ts17(commit_ts_raw),
                       "user": cp.text(auth_raw, "AUTHID") or None}
            elif disp == "A":
                add("skip", start, index, rule="lldf_uor_aborted", trx_id=trx_id,
                    position=position, trx_end="abort")
                index += 1
                continue
            else:
                trx = {"trx_id": trx_id, "position": position}
            if lrd_raw != committed:
                lrd = lrd_raw.decode(cp.cp, "replace").strip() or "blank"
                if not lrd.isalnum():
                    lrd = "x" + lrd_raw.hex().upper()
                add("skip", start, index, rule=f"lldf_logrecdisp_{lrd}", **trx)
                index += 1
                continue
            ct = ct_of.get(ct_raw)
            if ct is None:
                raise UnknownRecordType("unknown CHANGE TYPE", offset=hpos + L.OFFSET["change_type"],
                                        path="CHANGE TYPE",
                                        expected="/".join(sorted(c.strip() for c in L.CHANGE_TYPES)),
                                        actual=ct_raw.decode(cp.cp, "replace"))
            control = L.CONTROL_TYPES.get(ct)
            if control is not None:
                add("control", start, index, rule=control, position=position)
                index += 1
                continue
            codec = codecs.by_key(dbid, tbobid)
            if isinstance(codec, DecodeError):
                raise Corrupt(codec.reason, path=codec.path, expected=codec.expected,
                              actual=codec.actual)
            row_change = ct in L.IMAGES
            if codec is None:
                if ct not in L.DDL_TYPES:
                    raise UnknownTable("table not in the catalog", offset=hpos + L.OFFSET["dbid"],
                                       path="DBID.TBOBID", expected="a catalog table id",
                                       actual=f"{dbid}.{tbobid}")
                schema = cp.text(owner_raw[:min(len_owner, 8)], "TABLEOWNER")
                tname = cp.text(name_raw[:min(len_name, 18)], "TABLENAME")
            else:
                schema, tname = codec.table.schema, codec.table.name
            op = "u" if ct == "UB" else "c" if ct in ("I ", "IL") else "d" if ct == "D " else \
                "t" if ct in L.TRUNCATE_TYPES else "ddl"
            fields = dict(trx, op=op, table_id=f"{dbid}.{tbobid}", schema_name=schema,
                          table_name=tname,
                          trx_order=f"{order_value:08X}{lrsn_hex}{rba_hex}",
                          row_id=rid.hex().upper() if row_change else None)
            if nsegs > 1:
                add("segment", start, index, seg_key=trx_id + rba_hex + lrsn_hex + rid.hex().upper(),
                    seg_num=segno, seg_total=nsegs, seg_data=data[dpos:dend],
                    rule="lldf_change_" + ct.strip(), **fields)
                index += 1
                continue
            body = area_bounds(data, dpos, dend)
            if row_change:
                if body == dpos:
                    raise Corrupt("row change without a DATA area", offset=dpos, path="DATA",
                                  expected=">= 2 bytes", actual=0)
                before, after = read_row_images(codec, ct, data, body, dend)
                add("change", start, index, before=before, after=after, **fields)
            elif op == "t":
                add("change", start, index, **fields)
            else:
                add("change", start, index, ddl=ddl_text(ct, data, body, dend, cp,
                                                          f"{schema}.{tname}"), **fields)
        except DecodeError as exc:
            exc.located(archive=archive, offset=start, record_index=index)
            sink.quarantine(exc, start, index, data[start:pos], trx_id=trx_id, position=position)
        index += 1
    return None


decode = accounts_bytes(_decode)
