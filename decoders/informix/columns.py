"""Columnar reading of ``onlog`` text: the lines are found once, then parsed by column.

``Text(data)`` splits the bytes into lines with one newline scan (numpy), classifies them
with masks (blank, ``-l`` dump line, header line, record line) and cuts the record lines
into whitespace-separated tokens, all at once: a token is a run of bytes that are not
white space inside a record line. Fields are then read for every record at once:

* numbers: the token's bytes gathered right-aligned into a fixed-width matrix, each byte
  mapped to its digit value by a lookup table (invalid bytes flag the row), digits times
  powers of the base summed per row (hex and decimal);
* the record type: the token's bytes left-aligned into 16 bytes, hashed, looked up once
  per distinct value;
* every documented column of every record type checked against its kind (hex, decimal,
  ASCII, USED/FREE, MM/DD/YY, HH:MM:SS), per type over the records of that type.

Record lines laid out the way ``onlog`` prints them (fixed header columns, one blank between
the further columns) are read by fixed columns instead (``Records``, ``fixed.py``: 64-bit
words of a per-line byte matrix, SWAR checks and conversions, no token scan); the token
reader (``TokenRecords``) takes the lines that do not fit and gives the same values.

A record line takes the fast path only when it is plain (printable ASCII, blanks and tabs),
every token fits the widths read here and every column is valid; any other line is
``fast = False`` and goes through the careful per-record parser (``decoder.parse_record``),
which names the error. The fast path never accepts a line the careful parser rejects.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..layout import as_uint8
from . import fixed as F
from . import layout as L

# bytes.isspace(): blank, \t, \n, \v, \f, \r
WS = np.zeros(256, dtype=bool)
WS[[0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20]] = True
# bytes a fast-path record line may hold: printable ASCII, blank and tab
PLAIN = np.zeros(256, dtype=bool)
PLAIN[0x21:0x7F] = True
PLAIN[[0x09, 0x20]] = True

_BAD = 255
HEXVAL = np.full(256, _BAD, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    HEXVAL[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    HEXVAL[_c] = 10 + _i
DECVAL = np.full(256, _BAD, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789"):
    DECVAL[_c] = _i

HEX_WIDTH = 16          # hex tokens read on the fast path (longer: careful path)
DEC_WIDTH = 18          # decimal digits read on the fast path (fits int64)
ADDR_WIDTH = 8          # addr / link: 32 bits (MAX_ADDR)
HEAD_DEC_WIDTH = 9      # len / xid / id
TYPE_WIDTH = 16

LINE_BLANK, LINE_DUMP, LINE_HEADER, LINE_RECORD, LINE_INDENTED = 0, 1, 2, 3, 4


def _pow(base: int, width: int) -> np.ndarray:
    return (np.uint64(base) ** np.arange(width - 1, -1, -1, dtype=np.uint64)).astype(np.uint64)


_POW = {(16, HEX_WIDTH): _pow(16, HEX_WIDTH), (10, DEC_WIDTH): _pow(10, DEC_WIDTH),
        (16, ADDR_WIDTH): _pow(16, ADDR_WIDTH), (10, HEAD_DEC_WIDTH): _pow(10, HEAD_DEC_WIDTH),
        (10, 2): _pow(10, 2)}


PAD = 32                # blank bytes before and after the compact buffer of record lines


def read_number(buf: np.ndarray, s: np.ndarray, e: np.ndarray, base: int,
                width: int) -> tuple[np.ndarray, np.ndarray]:
    """Unsigned numbers in ``buf[s:e]`` (digits only): (values as uint64, ok mask). Not ok:
    empty, longer than ``width``, or a byte that is not a digit of ``base``. ``buf`` has
    ``PAD`` bytes before and after every span (no index leaves it). The digits are gathered
    right-aligned into an ``(n, width)`` matrix once; hex digits are packed two a byte and
    read as big-endian words, decimal digits summed with their powers of ten."""
    n = len(s)
    if n == 0:
        return np.zeros(0, np.uint64), np.zeros(0, bool)
    table = HEXVAL if base == 16 else DECVAL
    length = e - s
    ok = (length >= 1) & (length <= width)
    pos = (e - width)[:, None] + np.arange(width)
    digits = table[buf[pos]]
    digits[pos < s[:, None]] = 0
    bad = (digits == _BAD).any(axis=1)
    ok &= ~bad
    digits[bad] = 0
    if base == 16:                       # width <= 16: one 64-bit word
        if width < 16:
            digits = np.concatenate((np.zeros((n, 16 - width), np.uint8), digits), axis=1)
        packed = (digits[:, 0::2] << 4) | digits[:, 1::2]
        value = np.ascontiguousarray(packed).view(">u8")[:, 0].astype(np.uint64)
    else:
        value = digits.astype(np.uint64) @ _POW[(base, width)]
    value[~ok] = 0
    return value, ok


def gather_left(buf: np.ndarray, s: np.ndarray, e: np.ndarray, width: int) -> np.ndarray:
    """``(n, width)`` uint8: each token's first ``width`` bytes, NUL-padded (``buf`` padded)."""
    pos = s[:, None] + np.arange(width)[None, :]
    ch = buf[pos]
    ch[pos >= e[:, None]] = 0
    return ch


def gather_left_safe(buf: np.ndarray, s: np.ndarray, e: np.ndarray, width: int) -> np.ndarray:
    """``gather_left`` for a buffer without padding."""
    pos = np.minimum(s[:, None] + np.arange(width)[None, :], max(len(buf) - 1, 0))
    ch = buf[pos] if len(buf) else np.zeros(pos.shape, np.uint8)
    ch[pos >= e[:, None]] = 0
    return ch


def _spans(buf: np.ndarray, s: np.ndarray, e: np.ndarray,
           valid: np.ndarray | None = None) -> pa.Array:
    """``buf[s:e]`` of non-overlapping spans as a large binary array (null where not
    ``valid``): the spans (in buffer order) and the gaps between them are one zero-copy
    array, the spans are taken from it."""
    n = len(s)
    if n == 0:
        return pa.array([], pa.large_binary())
    s = s.astype(np.int64)
    e = np.maximum(e.astype(np.int64), s)
    order = None
    if n > 1 and not (s[1:] >= s[:-1]).all():
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
    bounds = np.empty(2 * n, dtype=np.int64)
    bounds[0::2] = s
    bounds[1::2] = e
    whole = pa.LargeBinaryArray.from_buffers(pa.large_binary(), 2 * n - 1,
                                             [None, pa.py_buffer(bounds), pa.py_buffer(buf)])
    take = np.arange(0, 2 * n, 2, dtype=np.int64)
    if order is not None:
        inverse = np.empty(n, dtype=np.int64)
        inverse[order] = np.arange(n)
        take = take[inverse]
    return pc.take(whole, pa.array(take, mask=None if valid is None else ~valid))


def substrings(buf: np.ndarray, s: np.ndarray, e: np.ndarray) -> pa.Array:
    """``buf[s:e]`` for every row (spans of printable ASCII: not checked again) as an Arrow
    string array: the bytes gathered once, the offsets their running lengths."""
    n = len(s)
    lens = np.maximum(np.asarray(e, np.int64) - s, 0)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    total = int(offsets[-1])
    if total >= 1 << 31:
        return _spans(buf, s, e).cast(pa.large_string()).cast(pa.string())
    idx = np.repeat(np.asarray(s, np.int64) - offsets[:-1], lens) + np.arange(total)
    data = buf[idx] if total else np.zeros(0, np.uint8)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32)),
                                       pa.py_buffer(data))


def substrings_binary(buf: np.ndarray, s: np.ndarray, e: np.ndarray,
                      valid: np.ndarray | None = None) -> pa.Array:
    """``buf[s:e]`` for every row (non-overlapping spans) as an Arrow binary array, null
    where not ``valid``."""
    return _spans(buf, s, e, valid).cast(pa.binary())


def binary_spans(buf: np.ndarray, s: np.ndarray, e: np.ndarray, valid: np.ndarray,
                 patch: dict[int, bytes] | None = None) -> pa.Array:
    """``substrings_binary`` by the compiled pass's copy (``native.copy_spans``: one loop, no
    Arrow take), where it is loaded; the rows of ``patch`` get its bytes instead."""
    nat = _native_state["module"]
    n = len(s)
    s = np.array(s, np.int64)
    lens = np.maximum(np.asarray(e, np.int64) - s, 0)
    if patch:
        rows = np.fromiter(patch, np.int64, len(patch))
        lens[rows] = [len(b) for b in patch.values()]
    if nat is None or n == 0 or int(lens.sum()) >= 1 << 31:
        out = substrings_binary(buf, s, e, valid)
        if patch:
            idx = np.full(n, -1, np.int64)
            idx[rows] = np.arange(len(rows))
            got = pa.array(list(patch.values()), pa.binary())
            out = pc.if_else(pa.array(idx >= 0), pc.take(got, pa.array(np.maximum(idx, 0))), out)
        return out
    if patch:
        s[rows] = -1
    total = int(lens.sum())
    off = nat.empty(n + 1, np.int32)
    off[0] = 0
    np.cumsum(lens, out=off[1:])
    data = pa.allocate_buffer(total + 8)         # room for the last word copied
    out = np.frombuffer(data, np.uint8)
    nat.copy_spans(buf, s, off, out)
    for r, b in (patch or {}).items():
        out[off[r]:off[r] + len(b)] = np.frombuffer(b, np.uint8)
    nulls = n - int(np.count_nonzero(valid))
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    return pa.BinaryArray.from_buffers(pa.binary(), n, [bitmap, pa.py_buffer(off), data], nulls)


def _string_array(n: int, off: np.ndarray, data: pa.Buffer, bitmap: np.ndarray,
                  nulls: int) -> pa.Array:
    return pa.StringArray.from_buffers(n, pa.py_buffer(off), data,
                                       pa.py_buffer(bitmap) if nulls else None, nulls)


def dict_strings(values, codes: np.ndarray) -> pa.Array | None:
    """``values[codes]`` as Arrow strings (a code < 0 or a value None: null), built in one
    pass by the compiled pass's kernels (None where it is not loaded): what ``take`` of the
    values with the codes as a masked index gives."""
    nat = _native_state["module"]
    if nat is None:
        return None
    n = len(codes)
    enc = [b"" if v is None else v.encode("utf-8") for v in values]
    dvalid = np.array([v is not None for v in values] or [False], np.bool_)
    doff = np.zeros(len(enc) + 1, np.int64)
    np.cumsum([len(b) for b in enc], out=doff[1:])
    ddata = np.frombuffer(b"".join(enc) + bytes(8), np.uint8)
    off = nat.empty(n + 1, np.int32)
    bitmap = np.zeros((n + 7) // 8, np.uint8)
    total, nulls = nat.dict_offsets(doff, dvalid, codes, off, bitmap)
    if total >= 1 << 31:
        return None
    data = pa.allocate_buffer(total + 8)
    nat.dict_fill(doff, ddata, codes, off, np.frombuffer(data, np.uint8))
    return _string_array(n, off, data, bitmap, nulls)


def dict_columns(codes: np.ndarray, specs: list, bounds: list | None = None) -> list | None:
    """String columns ``values[codes[row]]`` for every ``(row, values)`` of ``specs`` (a
    code < 0 or a value None: null), built in one pass over the rows by the compiled pass's
    kernel (``native.dict_columns``); None where it is not loaded. With ``bounds`` (row
    ranges), a list of columns per range (the dictionaries prepared once)."""
    nat = _native_state["module"]
    if nat is None:
        return None
    nc = len(specs)
    enc, valid, base, longest = [], [], [0], []
    for _row, values in specs:
        b = [b"" if v is None else v.encode("utf-8") for v in values]
        enc += b
        valid += [v is not None for v in values]
        base.append(len(enc))
        longest.append(max([len(x) for x in b] or [0]))
    doff = np.zeros(len(enc) + 1, np.int64)
    np.cumsum([len(b) for b in enc], out=doff[1:])
    ddata = np.frombuffer(b"".join(enc) + bytes(8), np.uint8)
    dvalid = np.array(valid + [False], np.bool_)
    src = np.array([row for row, _v in specs], np.int64)
    base = np.array(base, np.int64)
    out_all = []
    for lo, hi in bounds or [(0, codes.shape[1])]:
        m = hi - lo
        room = [k * m + 8 for k in longest]
        if sum(room) >= 1 << 31:
            return None
        dstart = np.zeros(nc, np.int64)
        np.cumsum(room[:-1], out=dstart[1:])
        out = pa.allocate_buffer(int(sum(room)))
        off = nat.empty((nc, m + 1), np.int32)
        bitmap = np.zeros((nc, (m + 7) // 8), np.uint8)
        part = np.ascontiguousarray(codes[:, lo:hi])
        totals, nulls = nat.dict_columns(part, src, doff, ddata, dvalid, base, off, bitmap,
                                         np.frombuffer(out, np.uint8), dstart)
        out_all.append([pa.StringArray.from_buffers(
            m, pa.py_buffer(off[c]), out.slice(int(dstart[c]), max(int(totals[c]), 1)),
            pa.py_buffer(bitmap[c]) if nulls[c] else None, int(nulls[c])) for c in range(nc)])
    return out_all if bounds is not None else out_all[0]


def native_positions(uniqid: int, addr: np.ndarray, rows: np.ndarray) -> pa.Array | None:
    """``positions(uniqid, addr[rows])`` in one pass (None without the compiled pass)."""
    nat = _native_state["module"]
    if nat is None:
        return None
    n = len(rows)
    data = pa.allocate_buffer(16 * n + 8)
    head = F.U64(int.from_bytes(b"%08X" % uniqid, "little"))
    nat.positions(head, addr, rows, np.frombuffer(data, np.uint8))
    offsets = np.arange(n + 1, dtype=np.int32) * 16
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), data)


def word_strings(w: np.ndarray, k: np.ndarray) -> pa.Array:
    """The first ``k`` (0..8) bytes of every 64-bit word (printable ASCII) as Arrow strings."""
    n = len(w)
    k = np.asarray(k, np.int64)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(k, out=offsets[1:])
    total = int(offsets[-1])
    raw = np.ascontiguousarray(w, dtype="<u8").view(np.uint8)
    idx = np.repeat(np.arange(n, dtype=np.int64) * 8 - offsets[:-1], k) + np.arange(total)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32)),
                                       pa.py_buffer(raw[idx]))


_HEX_PAIRS = np.frombuffer(b"".join(b"%02x" % i for i in range(256)), dtype=np.uint8).reshape(256, 2)


def hex_digits(values: np.ndarray, width: int = 16) -> np.ndarray:
    """``(n, width)`` uint8: lower-case hex digits of every value, zero-padded (width even)."""
    v = np.ascontiguousarray(values, dtype=">u8")
    raw = v.view(np.uint8).reshape(-1, 8)[:, 8 - width // 2:]
    return _HEX_PAIRS[raw].reshape(len(v), width)


def hex_text(values: np.ndarray) -> pa.Array:
    """``format(v, "x")`` of every value (lower case, no leading zeros), as Arrow strings."""
    v = np.asarray(values, dtype=np.uint64)
    n = len(v)
    width = 16 if n and int(v.max()) >> 32 else 8
    digits = hex_digits(v, width)
    ndig = np.ones(n, dtype=np.int64)
    for k in range(1, width):
        ndig += v >= (np.uint64(1) << np.uint64(4 * k))
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(ndig, out=offsets[1:])
    # the last ndig digits of every row
    idx = np.repeat(np.arange(n, dtype=np.int64) * width + width - offsets[1:], ndig) \
        + np.arange(int(offsets[-1]))
    raw = digits.reshape(-1)[idx]
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(raw.tobytes())) \
        .cast(pa.string())


_HEX_UPPER_PAIRS = np.frombuffer(b"".join(b"%02X" % i for i in range(256)),
                                 dtype=np.uint8).reshape(256, 2)


def hex8_words(v: np.ndarray) -> np.ndarray:
    """The 8 upper-case hex digits of every 32-bit value as one little-endian 64-bit word
    (its bytes in print order), by SWAR: the nibbles spread to one a byte, most significant
    in the lowest byte, then 0-9 -> '0'-'9' and 10-15 -> 'A'-'F' with one carry per byte."""
    x = np.asarray(v, np.uint64) & np.uint64(0xFFFFFFFF)
    # nibble k (from the top) to byte k: spread 32 bits to 64, one nibble a byte
    x = ((x & np.uint64(0xFFFF0000)) >> np.uint64(16)) | ((x & np.uint64(0xFFFF)) << np.uint64(32))
    x = ((x & np.uint64(0x0000FF000000FF00)) >> np.uint64(8)) \
        | ((x & np.uint64(0x000000FF000000FF)) << np.uint64(16))
    x = ((x & np.uint64(0x00F000F000F000F0)) >> np.uint64(4)) \
        | ((x & np.uint64(0x000F000F000F000F)) << np.uint64(8))
    letter = ((x + np.uint64(0x0606060606060606)) >> np.uint64(4)) & np.uint64(0x0101010101010101)
    return x + np.uint64(0x3030303030303030) + letter * np.uint64(7)


def positions(uniqid: int, addr: np.ndarray) -> pa.Array:
    """``<uniqid><addr>`` as 8 + 8 upper-case hex digits for every addr (32 bits)."""
    n = len(addr)
    out = np.empty((n, 2), dtype="<u8")
    out[:, 0] = np.frombuffer(b"%08X" % uniqid, dtype="<u8")[0]
    out[:, 1] = hex8_words(addr)
    offsets = np.arange(n + 1, dtype=np.int32) * 16
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(out))


# ----------------------------------------------------------------- record types

TYPE_NAMES: tuple[str, ...] = tuple(sorted(L.RECORD_TYPES))
TYPE_CODE: dict[bytes, int] = {t.encode(): i for i, t in enumerate(TYPE_NAMES)}
N_TYPES = len(TYPE_NAMES)
UNKNOWN_TYPE = -1


def _type_codes(mat: np.ndarray) -> np.ndarray:
    """Codes of the record types in an ``(n, 16)`` uint8 matrix (UNKNOWN_TYPE: unknown)."""
    n = len(mat)
    if n == 0:
        return np.zeros(0, np.int16)
    words = np.ascontiguousarray(mat).view(np.uint64).reshape(n, 2)
    key = words[:, 0] ^ (words[:, 1] * np.uint64(0x9E3779B97F4A7C15))
    enc = pa.array(key).dictionary_encode()
    inverse = enc.indices.to_numpy()
    uniq = enc.dictionary.to_numpy()
    first = np.zeros(len(uniq), dtype=np.int64)
    first[inverse[::-1]] = np.arange(n - 1, -1, -1)     # first row of every distinct key
    codes_u = np.array([TYPE_CODE.get(bytes(mat[i]).rstrip(b"\0"), UNKNOWN_TYPE) for i in first],
                       dtype=np.int16)
    codes = codes_u[inverse]
    # hash collisions: every row must equal its group's representative
    same = (words == words[first][inverse]).all(axis=1)
    codes[~same] = UNKNOWN_TYPE
    return codes


# ----------------------------------------------------------------- the text

_WS_RE = r"[\t\n\v\f\r ]"                 # bytes.isspace()
_BLANK_LINE = "^" + _WS_RE + "*$"
# a header line: the six column titles (any case, any white space, leading white space too),
# then possibly more titles (e.g. ``subtype specific-info``)
_HEADER_LINE = "(?is)^" + _WS_RE + "*" + (_WS_RE + "+").join(L.HEADER) + "(?:" + _WS_RE + ".*)?$"
# an ``onlog -l`` dump line: indented, groups of hex byte pairs (1 to 8 bytes each) separated
# by one blank or tab, then optionally, after two or more blanks, a character rendering of
# at most 20 printable characters (one per byte, 16 bytes a line, plus separators). An
# indented record line does not pass: its columns are not hex pairs, or the text after its
# first column is longer than a rendering.
DUMP_LINE = (r"^[ \t]+(?:[0-9a-fA-F]{2}){1,8}(?:[ \t](?:[0-9a-fA-F]{2}){1,8})*"
             r"(?:[ \t]{2,}[ -~]{1,20})?[ \t\r\n]*$")


# the ``onlog -l`` dump line as ``encoder.dump_lines`` lays it out: 8 blanks, the hex of c
# bytes (1 <= c <= 16) in 4-byte words (8 lower-case digits) separated by one blank, padded
# with blanks to column 43, 2 blanks, the c characters of the rendering (printable ASCII):
# c = length - 45. Checked on a 64-byte window per line: byte d = b ^ TPL passes where
# d < LIM1 or (d - OFF) mod 256 < LIM2 (TPL, LIM1, OFF, LIM2 per column and per c).
_DUMP_WIDTH = 64
_DUMP_RENDER_AT = 45


def _dump_template(c: int) -> tuple[np.ndarray, ...]:
    tpl = np.zeros(_DUMP_WIDTH, np.uint8)
    lim1 = np.ones(_DUMP_WIDTH, np.uint8)         # blank columns: d == 0 (b == 0x20)
    off = np.zeros(_DUMP_WIDTH, np.uint8)
    lim2 = np.zeros(_DUMP_WIDTH, np.uint8)
    tpl[:_DUMP_RENDER_AT] = 0x20
    for q in range(_DUMP_RENDER_AT - 8):
        g, r = divmod(q, 9)
        if r < 8 and g * 8 + r < 2 * c:             # a hex digit: 0-9 -> 0..9, a-f -> 0x51..0x56
            tpl[8 + q], lim1[8 + q], off[8 + q], lim2[8 + q] = 0x30, 10, 0x51, 6
    end = _DUMP_RENDER_AT + c
    lim1[_DUMP_RENDER_AT:end], off[_DUMP_RENDER_AT:end], lim2[_DUMP_RENDER_AT:end] = 0, 0x20, 0x5F
    lim1[end:], lim2[end:] = 0, 0xFF                # past the line: anything but 0xff
    return tpl, lim1, off, lim2


_DUMP_TEMPLATES = {c: _dump_template(c) for c in range(1, 17)}
_ALL_ONES = np.uint64(0x0101010101010101)
_DUMP_CHUNK = 4096                  # lines per step: the step's arrays stay in the CPU cache


def canonical_dumps(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Which lines (``starts``, ``lengths`` without line end) are dump lines laid out exactly
    the canonical way (see above), checked by fixed columns on a byte matrix. Every such line
    matches ``DUMP_LINE``; a line that is not canonical is left to the regular expression."""
    out = np.zeros(len(starts), dtype=bool)
    c = lengths - _DUMP_RENDER_AT
    cand = (c >= 1) & (c <= 16) & (starts + _DUMP_WIDTH <= len(buf))
    if not cand.any():
        return out
    window = np.lib.stride_tricks.sliding_window_view(buf, _DUMP_WIDTH)
    counts = np.bincount(c[cand], minlength=17)
    for cv in np.flatnonzero(counts).tolist():
        rows = np.flatnonzero(cand & (c == cv))
        k = min(len(rows), _DUMP_CHUNK)
        tpl, lim1, off, lim2 = (np.tile(t, k) for t in _DUMP_TEMPLATES[cv])
        e = np.empty(k * _DUMP_WIDTH, np.uint8)
        g1 = np.empty(k * _DUMP_WIDTH, bool)
        g2 = np.empty(k * _DUMP_WIDTH, bool)
        for a in range(0, len(rows), _DUMP_CHUNK):
            part = rows[a:a + _DUMP_CHUNK]
            m = len(part) * _DUMP_WIDTH
            ee, h1, h2 = e[:m], g1[:m], g2[:m]
            dd = window[starts[part]].reshape(m)
            np.bitwise_xor(dd, tpl[:m], out=dd)
            np.less(dd, lim1[:m], out=h1)
            np.subtract(dd, off[:m], out=ee)
            np.less(ee, lim2[:m], out=h2)
            np.logical_or(h1, h2, out=h1)
            words = h1.view(np.uint64) == _ALL_ONES        # 8 bytes all good
            ok = words.view(np.uint64) == _ALL_ONES         # the 8 words of a line
            out[part[ok]] = True
    return out


def _lines_array(data, starts: np.ndarray, size: int) -> pa.Array:
    """Every line (with its newline) as one zero-copy Arrow array over ``data``."""
    offsets = np.append(starts, size).astype(np.int64)
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(starts),
                                            [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _matches(text: "Text", rows: np.ndarray, pattern: str) -> np.ndarray:
    """Which of the lines ``rows`` of ``text`` match ``pattern`` (RE2)."""
    if not len(rows):
        return np.zeros(0, dtype=bool)
    got = pc.match_substring_regex(text.lines_array(rows), pattern)
    return np.asarray(got.to_numpy(zero_copy_only=False), dtype=bool)


_ADDR_WORD = F.U64(int.from_bytes(b"addr", "little"))


def _has_cr(data, buf: np.ndarray) -> bool:
    """Whether the text holds a carriage return (``bytes.find``: memchr, no mask)."""
    if isinstance(data, (bytes, bytearray)):
        return data.find(b"\r") >= 0
    return bool((buf == 0x0D).any())


# ----------------------------------------------------------------- the compiled pass

# ``native.py`` (numba) does the newline scan, the line kinds, the dump-line check and the
# fixed-column reading in one pass over the text, and the records-mode rows in a few more.
# Importing numba and loading the cached machine code costs ~0.5-0.8 s of CPU once per
# process (the first compile on a machine, before numba's cache holds it, ~10-14 s), and
# the pass saves ~4-6 ms of CPU per MB of text: it pays back after ~100-150 MB. So a text
# of at least NATIVE_MIN_BYTES uses it, a process that has read NATIVE_AFTER_BYTES by numpy
# loads it (many ranges of a big night in one Spark worker: at most twice the best cost),
# and once it is loaded every text of at least NATIVE_LOADED_MIN_BYTES uses it. A night of
# small archives (``make run``: ~1 MB each) never imports numba.
# ``DBLOG_INFORMIX_NATIVE``: ``auto`` (default), ``1`` (always, where numba loads), ``0``
# (never).
NATIVE_MIN_BYTES = 128 << 20
NATIVE_LOADED_MIN_BYTES = 256 << 10
NATIVE_AFTER_BYTES = 128 << 20
_native_state: dict = {"module": None, "failed": False, "numpy_bytes": 0}


def native_mode() -> str:
    v = os.environ.get("DBLOG_INFORMIX_NATIVE", "auto").strip().lower()
    return {"1": "always", "true": "always", "always": "always", "0": "never",
            "false": "never", "never": "never"}.get(v, "auto")


def native_wanted(nbytes: int) -> bool:
    """Whether a text of ``nbytes`` is read by the compiled pass (see above)."""
    st = _native_state
    mode = native_mode()
    if mode == "never" or st["failed"] or sys.byteorder != "little":
        return False
    if mode == "always":
        return True
    if st["module"] is not None:
        return nbytes >= NATIVE_LOADED_MIN_BYTES
    if nbytes >= NATIVE_MIN_BYTES or (nbytes >= NATIVE_LOADED_MIN_BYTES
                                      and st["numpy_bytes"] + nbytes >= NATIVE_AFTER_BYTES):
        return True
    st["numpy_bytes"] += nbytes
    return False


def _native_module():
    """``native`` with its functions loaded (compiled, or from numba's cache), or None when
    numba is not installed or does not load (then numpy reads every text)."""
    st = _native_state
    if st["module"] is None and not st["failed"]:
        try:
            from . import native as nat

            nat.read(np.frombuffer(b"addr\n18 x\n", np.uint8), _native_tables())
            st["module"] = nat
        except Exception as exc:  # noqa: BLE001 - numba missing or broken: numpy does it
            st["failed"] = True
            print(f"decoders.informix: the compiled pass is not used ({type(exc).__name__}: "
                  f"{str(exc)[:200]}); numpy reads the texts", file=sys.stderr)
    return st["module"]


_NATIVE_TABLES: tuple | None = None


def _dump_masks() -> np.ndarray:
    """``(17, 8, 4)`` uint64: for every rendering width c (1..16) and every 8-byte word of the
    64-byte window of a canonical dump line (``_dump_template``), the top bits of its bytes
    that must be blank, a lower-case hex digit, printable (0x20..0x7e), not 0xff."""
    out = np.zeros((17, 8, 4), np.uint64)
    for c, (tpl, lim1, off, lim2) in _DUMP_TEMPLATES.items():
        for q in range(_DUMP_WIDTH):
            t, a, o, b = int(tpl[q]), int(lim1[q]), int(off[q]), int(lim2[q])
            if (t, a, o, b) == (0x20, 1, 0, 0):
                cls = 0                      # blank
            elif (t, a, o, b) == (0x30, 10, 0x51, 6):
                cls = 1                      # 0-9 a-f
            elif (t, a, o, b) == (0, 0, 0x20, 0x5F):
                cls = 2                      # 0x20..0x7e
            elif (t, a, o, b) == (0, 0, 0, 0xFF):
                cls = 3                      # anything but 0xff
            else:
                raise RuntimeError(f"dump template column {q} of width {c} has no class")
            out[c, q // 8, cls] |= np.uint64(0x80 << (8 * (q % 8)))
    return out


def _native_tables() -> tuple:
    """The arguments of ``native.scan`` after the text: the header line, the record types
    (perfect hash of the short names, the long ones as two words) and the columns of every
    type (count, kinds, rest of line)."""
    global _NATIVE_TABLES
    if _NATIVE_TABLES is None:
        kind_code = {L.HEX: 0, L.DEC: 1, L.ASCII: 2, L.USED_FREE: 3, L.DATE: 4, L.TIME: 5}
        maxc = max(1, max(len(c) for c in L.RECORD_TYPES.values()))
        ncols = np.zeros(N_TYPES, np.int64)
        kinds = np.zeros((N_TYPES, maxc), np.int64)
        rest = np.zeros(N_TYPES, np.bool_)
        for code, t in enumerate(TYPE_NAMES):
            cols = L.RECORD_TYPES[t]
            ncols[code] = len(cols)
            for k, (_n, kind, _l) in enumerate(cols):
                kinds[code, k] = kind_code[kind]
            rest[code] = t in L.REST_OF_LINE
        longs = [t for t in TYPE_NAMES if 8 < len(t) < F.TYPE_MAX]
        lkeys = np.zeros((len(longs), 2), np.uint64)
        for i, t in enumerate(longs):
            b = t.encode().ljust(16, b"\0")
            lkeys[i] = (int.from_bytes(b[:8], "little"), int.from_bytes(b[8:], "little"))
        lcode = np.array([TYPE_CODE[t.encode()] for t in longs], np.int64)
        if F._TYPE_HASH is None:
            raise RuntimeError("no perfect hash of the record type names")
        mul, table = F._TYPE_HASH
        _NATIVE_TABLES = (np.frombuffer(L.HEADER_LINE.encode(), np.uint8).copy(), _dump_masks(),
                          F.U64(mul),
                          F.U64(64 - F._HASH_BITS), table.astype(np.int64),
                          F._TYPE_KEYS.astype(np.uint64), _KEY_CODE.astype(np.int64), lkeys,
                          lcode, ncols, kinds, rest, maxc)
    return _NATIVE_TABLES


_FEW_LINES = 4096          # lines_array: up to this many lines copied one by one


class Text:
    """The lines of one onlog text, classified: blank, dump, header, record, and indented
    lines that are none of those (``LINE_INDENTED``: quarantined, never dropped)."""

    def __init__(self, data, native: bool | None = None, scratch=None) -> None:
        buf = self.buf = as_uint8(data)
        n = self.size = len(buf)
        self._data = data
        self._array = None
        self.native = None               # the compiled pass's record lines (native.py)
        self.scratch = None
        self._record_lines = None
        if native is None:
            native = native_wanted(n)
        nat = _native_module() if native else None
        if nat is not None:
            self._init_native(nat, buf, scratch)
            return
        nl = np.flatnonzero(buf == 0x0A)
        k = len(nl)
        m = k if n == 0 or buf[-1] == 0x0A else k + 1      # an unterminated last line counts
        starts = np.empty(m, np.int64)
        ends = np.empty(m, np.int64)
        if m:
            starts[0] = 0
            np.add(nl[:m - 1], 1, out=starts[1:])
            ends[:k] = nl
            if m > k:
                ends[k] = n
        self.complete = np.ones(m, dtype=bool)
        if m > k:
            self.complete[-1] = False
        # a \r before the line end is cut (looked for only where the text holds one)
        self.cr = False                  # some line had its \r cut
        if m and _has_cr(data, buf):
            cut = (ends > starts) & (buf[np.maximum(ends - 1, 0)] == 0x0D)
            self.cr = bool(cut.any())
            ends = ends - cut
        self.starts, self.ends = starts, ends
        self.n_lines = m = len(starts)
        kind = np.full(m, LINE_BLANK, dtype=np.int8)
        if m:
            nonempty = ends > starts
            first = buf[np.minimum(starts, n - 1)]
            indented = nonempty & WS[first]
            kind[nonempty & ~indented] = LINE_RECORD
            if indented.any():
                # dump lines laid out the canonical way by fixed columns, the others by RE2
                ind = np.flatnonzero(indented)
                dump = np.zeros(m, dtype=bool)
                dump[ind] = canonical_dumps(buf, starts[ind], ends[ind] - starts[ind])
                other = ind[~dump[ind]]
                dump[other] = _matches(self, other, DUMP_LINE)
                kind[indented & dump] = LINE_DUMP
                rest = np.flatnonzero(indented & ~dump)
                blank = _matches(self, rest, _BLANK_LINE)
                head = _matches(self, rest, _HEADER_LINE)
                kind[rest[head]] = LINE_HEADER
                kind[rest[~blank & ~head]] = LINE_INDENTED
            # header lines: a first token starting with "addr" (any case) is not hex
            cand = np.flatnonzero(kind == LINE_RECORD)
            cand = cand[(first[cand] | 0x20) == 0x61]  # "a" or "A" first: read its word
            near = starts[cand] + 8 > n              # too close to the end for a word
            head4 = np.zeros(len(cand), np.uint64)
            if (~near).any():
                head4[~near] = F.words(buf)[starts[cand[~near]]] | F.BLANKS
            if near.any():
                g = gather_left_safe(buf, starts[cand[near]], ends[cand[near]], 8) | 0x20
                head4[near] = np.ascontiguousarray(g).view("<u8").reshape(-1)
            maybe = cand[(head4 & F.U64(0xFFFFFFFF)) == _ADDR_WORD]
            kind[maybe[_matches(self, maybe, _HEADER_LINE)]] = LINE_HEADER
        self.kind = kind

    @property
    def array(self) -> pa.Array | None:
        """Every line (with its line end) as one zero-copy Arrow array (built on first use)."""
        if self._array is None and self.n_lines:
            data = self._data
            self._array = _lines_array(data if isinstance(data, (bytes, bytearray))
                                       else self.buf.tobytes(), self.starts, self.size)
        return self._array

    def lines_array(self, rows: np.ndarray) -> pa.Array:
        """The lines ``rows`` (with their line ends) as Arrow large binary: ``array``'s rows,
        copied one by one when they are few (no array over every line built for them)."""
        rows = np.asarray(rows, np.int64)
        if self._array is not None or len(rows) > _FEW_LINES:
            return pc.take(self.array, pa.array(rows))
        last = self.n_lines - 1
        nxt = np.where(rows < last, self.starts[np.minimum(rows + 1, last)], self.size)
        buf = self.buf
        return pa.array([buf[a:b].tobytes() for a, b in zip(self.starts[rows].tolist(),
                                                           nxt.tolist())], pa.large_binary())

    def _init_native(self, nat, buf: np.ndarray, scratch=None) -> None:
        """Lines, kinds and the record lines' fixed columns from the compiled pass
        (``native.scan``, into ``scratch``'s arrays when given: the text must then not be
        used after ``scratch`` is released); the lines it leaves to the regular expressions
        are classified here as in ``__init__``."""
        r = nat.read(buf, _native_tables(), scratch)
        self.scratch = scratch
        kind = r.kind
        m = len(r.starts)
        self.starts, self.ends, self.n_lines, self.cr = r.starts, r.ends, m, r.cr
        self.complete = np.ones(m, dtype=bool)
        if m and buf[-1] != 0x0A:
            self.complete[-1] = False
        exact = True                  # the scan's record lines are the record lines
        if r.pending:
            pend = np.flatnonzero(kind == nat.PENDING_INDENT)
            # the unit of the record line before such a line is joined line by line
            # (``decoder._RecordsMode.raw``): the line may end it, or belong to it
            before = np.searchsorted(r.rline, pend) - 1
            r.usimple[before[before >= 0]] = False
            dump = _matches(self, pend, DUMP_LINE)
            kind[pend[dump]] = LINE_DUMP
            rest = pend[~dump]
            blank = _matches(self, rest, _BLANK_LINE)
            head = _matches(self, rest, _HEADER_LINE)
            kind[rest] = LINE_BLANK
            kind[rest[head]] = LINE_HEADER
            kind[rest[~blank & ~head]] = LINE_INDENTED
            exact &= not (~blank & ~head).any()
        if r.heads:
            pend = np.flatnonzero(kind == nat.PENDING_HEAD)
            kind[pend] = LINE_RECORD
            head = _matches(self, pend, _HEADER_LINE)
            kind[pend[head]] = LINE_HEADER
            exact &= not head.any()
        self.kind = kind
        self.native = r
        self._record_lines = r.rline if exact else None

    def line(self, i: int) -> bytes:
        return bytes(self.buf[self.starts[i]:self.ends[i]])

    def record_lines(self) -> np.ndarray:
        """Lines that are records: record lines and indented lines that are not dumps."""
        if self._record_lines is not None:           # the compiled pass's, as they are
            return self._record_lines
        return np.flatnonzero((self.kind == LINE_RECORD) | (self.kind == LINE_INDENTED))

    def records(self) -> "Records":
        return Records(self, self.record_lines())

    def token_records(self) -> "TokenRecords":
        """The record lines read by the token reader only (tests: the reference of ``Records``)."""
        return TokenRecords(self, self.record_lines())


def is_header(line: bytes) -> bool:
    """Header line: the six column titles first (any case, any white space)."""
    return [t.lower() for t in line.split()[:L.N_HEADER]] == [h.encode() for h in L.HEADER]


def _counts(mask: np.ndarray) -> np.ndarray:
    """``out[i]``: how many of ``mask[:i]`` are true, modulo 256 (uint8, ``len(mask) + 1``
    values): exact for the difference over a span shorter than 256 bytes (every token
    ``all_digits`` compares is at most ``DEC_WIDTH`` bytes), and a quarter of int32's memory."""
    out = np.zeros(len(mask) + 1, dtype=np.uint8)
    np.cumsum(mask, dtype=np.uint8, out=out[1:])
    return out


def _is_digit(b: np.ndarray) -> np.ndarray:
    return (b - np.uint8(48)) < 10


def _is_hex(b: np.ndarray) -> np.ndarray:
    return _is_digit(b) | (((b | np.uint8(0x20)) - np.uint8(97)) < 6)


class TokenRecords:
    """The record lines of a ``Text``: tokens, header fields, typed columns (fast path).

    The record lines are first copied into one compact buffer (Arrow ``take`` over the
    lines), so that no byte of a dump line is touched again."""

    def __init__(self, text: Text, lines: np.ndarray) -> None:
        self.text = text
        self.lines = lines                       # line index of each record
        self.n = nrec = len(lines)
        if nrec:
            compact = text.lines_array(lines)
            off = np.frombuffer(compact.buffers()[1], np.int64)[compact.offset:compact.offset + nrec + 1]
            raw = np.frombuffer(compact.buffers()[2], np.uint8)
            buf = np.full(int(off[-1] - off[0]) + 2 * PAD, 0x20, dtype=np.uint8)
            buf[PAD:-PAD] = raw[off[0]:off[-1]]
            off = off - off[0] + PAD
        else:
            buf, off = np.full(2 * PAD, 0x20, np.uint8), np.full(1, PAD, np.int64)
        self.buf = buf
        s = off[:-1]
        e = s + (text.ends[lines] - text.starts[lines])
        buf[e[e < off[1:]]] = 0x20                # the line ends (\r, \n) become blanks
        cr = e + 1 < off[1:]
        buf[e[cr] + 1] = 0x20
        self.s, self.e = s, e
        fast = text.kind[lines] == LINE_RECORD
        odd = np.flatnonzero(((buf < 0x20) & (buf != 0x09)) | (buf > 0x7E))
        if len(odd):
            fast[np.searchsorted(s, odd, side="right") - 1] = False
        tb = buf > 0x20                          # the padding is blank: no token at the ends
        tok_s = np.flatnonzero(tb[1:] & ~tb[:-1]) + 1
        tok_e = np.flatnonzero(tb[:-1] & ~tb[1:]) + 1
        self.first = np.searchsorted(tok_s, s).astype(np.int64)
        self.ntok = np.diff(np.append(self.first, len(tok_s)))
        self.tok_s, self.tok_e = tok_s, tok_e
        self._tok: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        # bytes that are not hex / not decimal digits, counted up to every position
        self._nonhex = _counts(~_is_hex(buf))
        self._nondec = _counts(~_is_digit(buf))
        fast &= self.ntok >= L.N_HEADER
        # header fields
        self.addr, ok = self.number(0, 16, ADDR_WIDTH)
        fast &= ok
        fast &= self.all_digits(1)
        ts, te = self.token(2)
        self.tcode = _type_codes(gather_left(buf, ts, te, TYPE_WIDTH))
        self.tcode[(te - ts) > TYPE_WIDTH] = UNKNOWN_TYPE
        fast &= self.tcode != UNKNOWN_TYPE
        self.xid, ok = self.number(3, 10, HEAD_DEC_WIDTH)
        fast &= ok
        fast &= self.all_digits(4)
        self.link, ok = self.number(5, 16, ADDR_WIDTH)
        fast &= ok
        self.fast = fast
        self._check_columns()

    # -- tokens
    def token(self, j: int, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Start and end of token ``j`` of every record (of ``rows``); a record without it
        gets an empty span (at ``PAD``)."""
        got = self._tok.get(j)
        if got is None:
            has = self.ntok > j
            if len(self.tok_s) == 0:
                z = np.full(self.n, PAD, np.int64)
                got = (z, z.copy())
            else:
                idx = np.minimum(np.where(has, self.first + j, 0), len(self.tok_s) - 1)
                got = (np.where(has, self.tok_s[idx], PAD), np.where(has, self.tok_e[idx], PAD))
            self._tok[j] = got
        if rows is None:
            return got
        return got[0][rows], got[1][rows]

    def last_token_end(self, rows: np.ndarray) -> np.ndarray:
        idx = self.first[rows] + self.ntok[rows] - 1
        return self.tok_e[idx]

    def number(self, j: int, base: int, width: int, rows: np.ndarray | None = None):
        s, e = self.token(j, rows)
        return read_number(self.buf, s, e, base, width)

    def all_digits(self, j: int, rows: np.ndarray | None = None, base: int = 10,
                   signed: bool = False) -> np.ndarray:
        """Token j is a (non-empty) run of digits of ``base`` (a leading ``-`` if ``signed``)."""
        s, e = self.token(j, rows)
        if signed:
            s = s + ((e - s >= 2) & (self.buf[s] == 0x2D))
        count = self._nonhex if base == 16 else self._nondec
        width = HEX_WIDTH if base == 16 else DEC_WIDTH     # wider: the careful path decides
        return (e > s) & (e - s <= width) & (count[e] == count[s])

    # -- typed columns, per record type
    def _check_columns(self) -> None:
        buf = self.buf
        fast = self.fast
        for code in np.unique(self.tcode[fast]):
            rtype = TYPE_NAMES[code]
            cols = L.RECORD_TYPES[rtype]
            rows = np.flatnonzero(fast & (self.tcode == code))
            ok = self.ntok[rows] >= L.N_HEADER + len(cols)
            for k, (_name, kind, _label) in enumerate(cols):
                j = L.N_HEADER + k
                if kind == L.HEX:
                    ok &= self.all_digits(j, rows, 16)
                elif kind == L.DEC:
                    ok &= self.all_digits(j, rows, 10, signed=True)
                elif kind == L.USED_FREE:
                    s, e = self.token(j, rows)
                    four = gather_left(buf, s, e, 4)
                    word = np.ascontiguousarray(four).view(np.uint32).reshape(-1)
                    ok &= ((e - s) == 4) & ((word == _USED) | (word == _FREE))
                elif kind == L.DATE:
                    ok &= date_ok(buf, *self.token(j, rows))
                elif kind == L.TIME:
                    ok &= time_ok(buf, *self.token(j, rows))
                # ASCII: any token (the line is plain)
            fast[rows[~ok]] = False

    # -- values the decoder needs
    def hex_column(self, j: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, ok): hex token j of ``rows`` (not ok: longer than 16 digits)."""
        return self.number(j, 16, HEX_WIDTH, rows)

    def hex_text(self, j: int, rows: np.ndarray) -> pa.Array:
        """``format(v, "x")`` of hex column j of ``rows`` (read: ``hex_column``)."""
        return hex_text(self.hex_column(j, rows)[0])

    def rest_of_line(self, j: int, rows: np.ndarray) -> pa.Array:
        s, _ = self.token(j, rows)
        return substrings(self.buf, s, self.last_token_end(rows))

    def local_seconds(self, j: int, rows: np.ndarray) -> np.ndarray:
        """Seconds since 1970-01-01 of the (valid) date and time at tokens j, j+1 (naive)."""
        buf = self.buf
        ds, _ = self.token(j, rows)
        ts, _ = self.token(j + 1, rows)
        mm, dd, yy = (_two(buf, ds + k) for k in (0, 3, 6))
        year = np.where(yy >= L.YEAR_PIVOT, 1900 + yy, 2000 + yy)
        days = _days_from_civil(year, mm, dd)
        hh, mi, ss = (_two(buf, ts + k) for k in (0, 3, 6))
        return days * 86400 + hh * 3600 + mi * 60 + ss


_USED = np.frombuffer(b"USED", np.uint32)[0]
_FREE = np.frombuffer(b"FREE", np.uint32)[0]
_DIM = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)


def _two(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    return (buf[at].astype(np.int64) - 48) * 10 + (buf[at + 1].astype(np.int64) - 48)


def _pattern(buf, s, e, sep: int) -> np.ndarray:
    """Tokens of exactly ``dd<sep>dd<sep>dd``."""
    ok = (e - s) == 8
    m = gather_left(buf, s, e, 8)
    digit = (m >= 0x30) & (m <= 0x39)
    return ok & digit[:, [0, 1, 3, 4, 6, 7]].all(axis=1) & (m[:, 2] == sep) & (m[:, 5] == sep)


def date_ok(buf, s, e) -> np.ndarray:
    ok = _pattern(buf, s, e, 0x2F)
    mm, dd, yy = (_two(buf, s + k) for k in (0, 3, 6))
    year = np.where(yy >= L.YEAR_PIVOT, 1900 + yy, 2000 + yy)
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    month_ok = (mm >= 1) & (mm <= 12)
    dim = _DIM[np.where(month_ok, mm, 0)] + ((mm == 2) & leap)
    return ok & month_ok & (dd >= 1) & (dd <= dim)


def time_ok(buf, s, e) -> np.ndarray:
    ok = _pattern(buf, s, e, 0x3A)
    hh, mi, ss = (_two(buf, s + k) for k in (0, 3, 6))
    return ok & (hh < 24) & (mi < 60) & (ss < 60)


def _days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of proleptic Gregorian dates (H. Hinnant's algorithm)."""
    y = y - (m <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    mp = (m + 9) % 12
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


# ----------------------------------------------------------------- fixed columns (fixed.py)

_KEY_CODE = np.array([TYPE_CODE[t.encode()] for t in F.type_names_of_keys()], dtype=np.int16)
_HB = F._HIGH_BELOW
_PLAIN_REST = PLAIN.copy()


class Records:
    """The record lines of a ``Text``, read by fixed columns where they fit (``fixed.py``),
    by tokens (``TokenRecords``) where they do not: header fields, record types, the fast
    mask, and the columns the decoder needs (``hex_column``, ``hex_text``,
    ``rest_of_line``, ``local_seconds``), both kinds of lines merged in record order."""

    def __init__(self, text: Text, lines: np.ndarray) -> None:
        self.text = text
        self.lines = lines
        self.n = n = len(lines)
        self.addr = np.zeros(n, np.uint64)
        self.xid = np.zeros(n, np.uint64)
        self.link = np.zeros(n, np.uint64)
        self.tcode = np.full(n, UNKNOWN_TYPE, np.int16)
        self.fit = np.zeros(n, bool)
        # columns after the header of the lines read by fixed columns (j: column index)
        self.cs: dict[int, np.ndarray] = {}      # start in text.buf
        self.ce: dict[int, np.ndarray] = {}      # end
        self.cv: dict[int, np.ndarray] = {}      # the word of a hex, date or time column
        self._cols = None                        # compiled pass: (start, end) in the line
        if text.native is not None:
            self._from_native(text.native)
        else:
            s = text.starts[lines]
            e = text.ends[lines]
            cand = np.flatnonzero((text.kind[lines] == LINE_RECORD) & (e - s >= F.MIN_LEN)
                                  & (e - s <= F.WIN - F.SLACK) & (s + F.WIN <= text.size))
            if len(cand):
                self._fixed(cand, s[cand], e[cand])
        rest = np.flatnonzero(~self.fit)
        self.rest = rest
        self.tok_row = np.full(n, -1, np.int64)
        self.tok_row[rest] = np.arange(len(rest))
        tok = self.tok = TokenRecords(text, lines[rest])
        self.fast = self.fit.copy()
        if len(rest):
            self.fast[rest] = tok.fast
            self.addr[rest] = tok.addr
            self.xid[rest] = tok.xid
            self.link[rest] = tok.link
            self.tcode[rest] = tok.tcode

    def _from_native(self, r) -> None:
        """The fixed-column reading the compiled pass did (``native.scan``) for these lines:
        its rows are the lines it took for record lines (a line the regular expression
        found a header is dropped, an indented line is added: not fit)."""
        lines = self.lines
        if lines is r.rline or (len(r.rline) == len(lines) and (r.rline == lines).all()):
            self._nrow = None                    # the same rows
            self.fit = r.fit
            self.addr, self.xid, self.link, self.tcode = r.addr, r.xid, r.link, r.tcode
            self._cols, self._words = r.cols, r.words
            self._hval, self._hcanon = r.hval, r.hcanon
        else:
            idx = np.minimum(np.searchsorted(r.rline, lines), max(len(r.rline) - 1, 0))
            hit = r.rline[idx] == lines if len(r.rline) else np.zeros(len(lines), bool)
            self._nrow = np.where(hit, idx, -1)  # the scan's row of every record, -1: none
            if len(r.rline):
                f = self.fit = r.fit[idx] & hit
                self.addr = np.where(f, r.addr[idx], 0).astype(np.uint64)
                self.xid = np.where(f, r.xid[idx], 0).astype(np.uint64)
                self.link = np.where(f, r.link[idx], 0).astype(np.uint64)
                self.tcode = np.where(f, r.tcode[idx], UNKNOWN_TYPE).astype(np.int16)
                self._cols, self._words = r.cols[idx], r.words[idx]
                self._hval, self._hcanon = r.hval[idx], r.hcanon[idx]
            else:
                self._cols = np.zeros((len(lines), 2), np.uint8)
                self._words = np.zeros((len(lines), 2), np.uint64)
                self._hval = np.zeros((len(lines), 2), np.uint64)
                self._hcanon = np.zeros((len(lines), 2), bool)
        self._line_s = self.text.starts[lines]

    def native_rows(self) -> bool:
        """Whether the compiled pass read these records one for one (its rows are the
        records): ``decoder._RecordsMode.run_native`` then builds the rows."""
        return self._cols is not None and self._nrow is None and \
            _native_state["module"] is not None

    def units(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(end of the last dump line under the record line, whether the bytes up to there
        are the unit's lines whole) of records ``rows``, as the compiled pass found them; None
        without it, or when an indented line is a record (its unit is not the scan's)."""
        r = self.text.native
        if r is None:
            return None
        if self._nrow is None:
            return r.uend[rows], r.usimple[rows]
        k = self._nrow[rows]
        if (k < 0).any():
            return None
        return r.uend[k], r.usimple[k]

    def _cs(self, j: int, rows: np.ndarray) -> np.ndarray:
        """Start in ``text.buf`` of column j of ``rows`` (read by fixed columns)."""
        if self._cols is None:
            return self.cs[j][rows]
        return self._line_s[rows] + self._cols[rows, 2 * (j - L.N_HEADER)]

    def _ce(self, j: int, rows: np.ndarray) -> np.ndarray:
        if self._cols is None:
            return self.ce[j][rows]
        return self._line_s[rows] + self._cols[rows, 2 * (j - L.N_HEADER) + 1]

    def _cv(self, j: int, rows: np.ndarray) -> np.ndarray:
        """The 64-bit word at column j of ``rows`` (only its bytes up to the column's end
        are read by the callers)."""
        if self._cols is None:
            return self._col(self.cv, j, np.uint64)[rows]
        if j - L.N_HEADER < 2 and self._stamp(j, rows):       # kept by the scan
            return self._words[rows, j - L.N_HEADER]
        w = F.words(self.text.buf)
        return w[np.minimum(self._cs(j, rows), max(len(w) - 1, 0))] if len(w) else \
            np.zeros(len(rows), np.uint64)

    def _stamp(self, j: int, rows: np.ndarray) -> bool:
        """Whether column j of every one of ``rows`` is a date or time (the scan keeps
        their words)."""
        k = j - L.N_HEADER
        kinds = np.array([len(c) > k and c[k][1] in (L.DATE, L.TIME)
                          for c in (L.RECORD_TYPES[t] for t in TYPE_NAMES)] + [False], bool)
        return bool(kinds[self.tcode[rows]].all())

    def _has_ce(self, j: int) -> bool:
        return self._cols is not None or j in self.ce

    def _col(self, d: dict, j: int, dtype) -> np.ndarray:
        got = d.get(j)
        if got is None:
            got = d[j] = np.zeros(self.n, dtype)
        return got

    def _fixed(self, cand: np.ndarray, s: np.ndarray, e: np.ndarray) -> None:
        """Read lines ``cand`` (starts ``s``, ends ``e``, at most ``F.WIN - F.SLACK`` bytes) by
        fixed columns. The first ``F.WIN`` bytes of every line are copied once into a
        matrix (one pass over the text); the words are read from it."""
        buf = self.text.buf
        m = len(cand)
        # every word read starts at most WIN - 8 bytes into its line's row
        flat = np.lib.stride_tricks.sliding_window_view(buf, F.WIN)[s].reshape(-1)
        W = F.words(flat)
        base = np.arange(m, dtype=np.int64) * F.WIN
        length = e - s
        # the 16 bytes after every line's end become blanks: a word read at or before the
        # end sees blanks past it (lines end at most WIN - SLACK bytes into their row)
        W[base + length] = F.BLANKS
        W[base + length + 8] = F.BLANKS

        def at(o: int) -> np.ndarray:          # the word at column o of every line
            return W[o::F.WIN][:m].copy()

        # the type name and how far it pushes the columns after it
        c1 = at(F.TYPE[0])
        c2 = at(F.TYPE[0] + 8)
        nb1 = F.blank_flags(c1)
        tl = F.first_unset(~nb1 & F.HIGH)
        tl2 = F.first_unset(~F.blank_flags(c2) & F.HIGH)
        tl = np.where(tl == 8, 8 + tl2, tl)
        sh = np.maximum(tl - 8, 0)
        pad = _HB[8] & ~_HB[np.minimum(tl, 8)]             # blanks after a short name
        ok = (tl >= 1) & (tl < F.TYPE_MAX) & ((nb1 & pad) == pad)
        ok &= (tl > 8) | ((c2 & F.U64(0xFF)) == F.U64(0x20))    # column 22: blank
        ok &= length >= F.MIN_LEN + sh
        shifted = np.flatnonzero(sh)

        def at_sh(o: int) -> np.ndarray:       # the word at column o + shift of every line
            x = at(o)
            if len(shifted):
                x[shifted] = W[base[shifted] + o + sh[shifted]]
            return x

        # addr, len (and the blanks around it), xid, id, link
        good, _, addr = F.field(at(0), 8, True)
        ok &= good
        b = at(8)
        ok &= ((b & F.U64(0xFF)) == F.U64(0x20)) & (((b >> F.U64(40)) & F.U64(0xFF)) == F.U64(0x20))
        ok &= F.field(b >> F.U64(8), 4, False, value=False)[0]
        good, _, xid = F.field(at_sh(F.XID[0]), 8, False)
        ok &= good
        q = at_sh(31)
        ok &= ((q & F.U64(0xFF)) == F.U64(0x20)) & (((q >> F.U64(24)) & F.U64(0xFF)) == F.U64(0x20))
        ok &= F.field(q >> F.U64(8), 2, False, value=False)[0]
        good, _, link = F.field(at_sh(F.LINK[0]), 8, True)
        ok &= good
        # after the header: nothing, or one blank and the first column
        extra = length > F.EXTRA_AT - 1 + sh
        ok &= ~extra | ((flat[base + F.EXTRA_AT - 1 + sh] == 0x20) & (length > F.EXTRA_AT + sh))
        # record types
        tcode = np.full(m, UNKNOWN_TYPE, np.int16)
        short = ok & (tl <= 8)
        ki = F.short_type_index(c1[short])
        tcode[short] = np.where(ki >= 0, _KEY_CODE[np.maximum(ki, 0)], UNKNOWN_TYPE)
        long_ = np.flatnonzero(ok & (tl > 8))
        if len(long_):
            mat = np.stack([c1[long_], c2[long_] & F._BYTE[tl[long_] - 8]], axis=1)
            tcode[long_] = _type_codes(np.ascontiguousarray(mat).view(np.uint8).reshape(-1, 16))
        ok &= tcode != UNKNOWN_TYPE
        # the columns of every type
        pos = np.minimum(F.EXTRA_AT + sh, length)
        okr = np.flatnonzero(ok)
        order = okr[np.argsort(tcode[okr], kind="stable")]
        codes, first = np.unique(tcode[order], return_index=True)
        for code, a, b in zip(codes.tolist(), first.tolist(), first[1:].tolist() + [len(order)]):
            rows = order[a:b]
            good = self._columns(TYPE_NAMES[code], flat, W, rows, cand[rows], s[rows],
                                 pos[rows], length[rows], extra[rows])
            ok[rows[~good]] = False
        fit = cand[ok]
        self.fit[fit] = True
        self.addr[fit] = addr[ok]
        self.xid[fit] = xid[ok]
        self.link[fit] = link[ok]
        self.tcode[fit] = tcode[ok]

    def _columns(self, rtype: str, flat: np.ndarray, W: np.ndarray, rows: np.ndarray,
                 recs: np.ndarray, s: np.ndarray, p: np.ndarray, e: np.ndarray,
                 extra: np.ndarray) -> np.ndarray:
        """Read the columns of ``rtype`` of records ``recs`` (lines ``rows`` of the matrix
        ``flat``, ``W`` its words; line starts ``s`` in the text; first column at ``p``, line
        end ``e``, both from the line start): which lines they fit."""
        cols = L.RECORD_TYPES[rtype]
        if not cols:
            return ~extra
        base = rows * F.WIN
        ok = extra.copy()
        for k, (_name, kind, _label) in enumerate(cols):
            j = L.N_HEADER + k
            last = k == len(cols) - 1
            if last and rtype in L.REST_OF_LINE:       # the rest of the line, printable
                r = e - p
                ok &= (r >= 1) & (r <= F.REST_MAX)
                lo, hi = int(p.min()), int(min(e.max(), F.WIN))
                mat = flat.reshape(-1, F.WIN)[rows, lo:hi]
                col = np.arange(lo, hi)
                outside = (col < p[:, None]) | (col >= e[:, None])
                plain = ((mat - np.uint8(0x20)) < 0x5F) | (mat == 0x09)
                ok &= (plain | outside).all(axis=1)
                ok &= (flat[base + np.maximum(e - 1, 0)] > 0x20) & (flat[base + p] > 0x20)
                self._col(self.cs, j, np.int64)[recs] = s + p
                self._col(self.ce, j, np.int64)[recs] = s + e
                break
            w = W[base + p]
            tk = F.first_unset(~F.blank_flags(w) & F.HIGH)      # token length (8: or more)
            if kind == L.ASCII:                          # a name: up to 16 bytes
                w2 = W[base + p + 8]
                tk2 = np.where(tk == 8, F.first_unset(~F.blank_flags(w2) & F.HIGH), 0)
                hb2 = _HB[tk2]
                ok &= (F.printable_flags(w2) & hb2) == hb2
                tk = tk + tk2
            nxt = p + tk
            at_end = nxt == e
            if last:
                ok &= at_end
            else:
                ok &= ~at_end & (flat[base + nxt] == 0x20)
            hb = _HB[np.minimum(tk, 8)]
            if kind == L.HEX:                            # value: when asked for (_hex)
                ok &= (tk >= 1) & ((F.hex_flags(w) & hb) == hb)
                self._col(self.cv, j, np.uint64)[recs] = w
                self._col(self.cs, j, np.int64)[recs] = s + p
                self._col(self.ce, j, np.int64)[recs] = s + nxt
            elif kind == L.DEC:
                minus = ((w & F.U64(0xFF)) == F.U64(0x2D)) & (tk >= 2)
                fl = F.dec_flags(w) | np.where(minus, F.U64(0x80), F.U64(0))
                ok &= (tk >= 1) & ((fl & hb) == hb)
            elif kind in (L.DATE, L.TIME):
                ok &= (tk == 8) & _stamp_ok(w, kind == L.DATE)
                self._col(self.cv, j, np.uint64)[recs] = w
            elif kind == L.USED_FREE:
                word = (w & F.U64(0xFFFFFFFF)).astype(np.uint32)
                ok &= (tk == 4) & ((word == _USED) | (word == _FREE))
            else:                                       # ASCII: printable, no blank
                ok &= (tk >= 1) & ((F.printable_flags(w) & hb) == hb)
                self._col(self.cs, j, np.int64)[recs] = s + p
                self._col(self.ce, j, np.int64)[recs] = s + nxt
            p = np.minimum(nxt + 1, e)
        return ok

    # -- values the decoder needs (rows: record indices)
    def _split(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which of ``rows`` were read by fixed columns, and which by tokens."""
        f = self.fit[rows]
        return np.flatnonzero(f), np.flatnonzero(~f)

    def _hex(self, j: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, canonical) of hex column j of ``rows`` read by fixed columns (from its
        word and length); canonical: printed as ``format(v, "x")`` (lower case, no leading
        zero)."""
        w = self._cv(j, rows)
        tk = np.clip(self._ce(j, rows) - self._cs(j, rows), 1, 8) if self._has_ce(j) else \
            np.ones(len(rows), np.int64)
        hb = _HB[tk]
        upper = F.hex_flags(w) & ~F.dec_flags(w) & ~(w << F.U64(2)) & hb
        zero = (w & F.U64(0xFF)) == F.U64(0x30)
        return F.hex_value(w, tk), (upper == 0) & (~zero | (tk == 1))

    def hex_column(self, j: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, ok): hex column j of ``rows`` (not ok: longer than 16 digits)."""
        if self._cols is not None and j - L.N_HEADER < 2:     # read by the scan
            f = self.fit[rows]
            if f.all():
                return self._hval[rows, j - L.N_HEADER], f
        fi, ti = self._split(rows)
        out = np.zeros(len(rows), np.uint64)
        ok = np.zeros(len(rows), bool)
        if len(fi):
            out[fi] = self._hex(j, rows[fi])[0]
            ok[fi] = True
        if len(ti):
            out[ti], ok[ti] = self.tok.hex_column(j, self.tok_row[rows[ti]])
        return out, ok

    def hex_text(self, j: int, rows: np.ndarray) -> pa.Array:
        """``format(v, "x")`` of hex column j of ``rows``: the printed text where it is
        printed that way (lower case, no leading zeros), else the value rendered."""
        canon = np.zeros(len(rows), bool)
        fi, _ = self._split(rows)
        if len(fi):
            canon[fi] = self._hex(j, rows[fi])[1]
        return self._merge_mask(
            rows, canon, lambda r: word_strings(self._cv(j, r), self._ce(j, r) - self._cs(j, r)),
            lambda r: hex_text(self.hex_column(j, r)[0]))

    def hex_strings(self, j: int, rows: np.ndarray, valid: np.ndarray) -> pa.Array | None:
        """``hex_text`` of column j (one of the first two after the header) of ``rows`` where
        ``valid``, null elsewhere, in one pass (compiled pass only, every valid row read by
        fixed columns; None otherwise)."""
        nat = _native_state["module"]
        k = j - L.N_HEADER
        if self._cols is None or nat is None or not 0 <= k < 2:
            return None
        other = rows[valid]
        other = other[~self.fit[other]]
        if len(other):                 # read by tokens: their values, rendered
            v, ok = self.tok.hex_column(j, self.tok_row[other])
            if not ok.all():
                return None
            self._hval[other, k] = v
            self._hcanon[other, k] = False
        n = len(rows)
        off = nat.empty(n + 1, np.int32)
        bitmap = np.zeros((n + 7) // 8, np.uint8)
        data = pa.allocate_buffer(16 * n + 8)
        total, nulls = nat.hex_strings(self.text.buf, self._line_s, rows, valid, self._hcanon,
                                       self._cols, 2 * k, self._hval, off, bitmap,
                                       np.frombuffer(data, np.uint8))
        return _string_array(n, off, data.slice(0, max(total, 1)), bitmap, nulls)

    def column_strings(self, j: int, rows: np.ndarray, valid: np.ndarray) -> pa.Array | None:
        """The text of column j of ``rows`` where ``valid`` (``rest_of_line`` for a last
        column), null elsewhere, in one pass (compiled pass only, every valid row read by
        fixed columns; None otherwise)."""
        nat = _native_state["module"]
        if self._cols is None or nat is None or not self.fit[rows[valid]].all():
            return None
        n = len(rows)
        c = 2 * (j - L.N_HEADER)
        off = nat.empty(n + 1, np.int32)
        bitmap = np.zeros((n + 7) // 8, np.uint8)
        total, nulls = nat.span_offsets(self._line_s, rows, valid, self._cols, c, off, bitmap)
        data = pa.allocate_buffer(total + 8)
        nat.span_fill(self.text.buf, self._line_s, rows, valid, self._cols, c, off,
                      np.frombuffer(data, np.uint8))
        return _string_array(n, off, data, bitmap, nulls)

    @staticmethod
    def _merge_mask(rows: np.ndarray, first: np.ndarray, first_fn, other_fn) -> pa.Array:
        """Strings of ``rows``: ``first_fn`` of the rows where ``first``, ``other_fn`` of the
        others, in the order of ``rows``."""
        fi, oi = np.flatnonzero(first), np.flatnonzero(~first)
        if not len(oi):
            return first_fn(rows)
        if not len(fi):
            return other_fn(rows)
        both = pa.concat_arrays([first_fn(rows[fi]).cast(pa.string()),
                                 other_fn(rows[oi]).cast(pa.string())])
        order = np.empty(len(rows), np.int64)
        order[np.concatenate((fi, oi))] = np.arange(len(rows))
        return both.take(pa.array(order))

    def _merge(self, rows: np.ndarray, fixed_fn, token_fn) -> pa.Array:
        fi, ti = self._split(rows)
        if not len(ti):
            return fixed_fn(rows)
        if not len(fi):
            return token_fn(self.tok_row[rows])
        both = pa.concat_arrays([fixed_fn(rows[fi]).cast(pa.string()),
                                 token_fn(self.tok_row[rows[ti]]).cast(pa.string())])
        order = np.empty(len(rows), np.int64)
        order[np.concatenate((fi, ti))] = np.arange(len(rows))
        return both.take(pa.array(order))

    def columns_text(self, rows: np.ndarray) -> pa.Array:
        """The text after the header (from the first column to the line end) of ``rows``,
        lines read by fixed columns whose type has columns."""
        return substrings(self.text.buf, self._cs(L.N_HEADER, rows),
                          self.text.ends[self.lines[rows]])

    def rest_of_line(self, j: int, rows: np.ndarray) -> pa.Array:
        return self._merge_mask(
            rows, self.fit[rows],
            lambda r: substrings(self.text.buf, self._cs(j, r), self._ce(j, r)),
            lambda r: self.tok.rest_of_line(j, self.tok_row[r]))

    def local_seconds(self, j: int, rows: np.ndarray) -> np.ndarray:
        """Seconds since 1970-01-01 of the (valid) date and time at columns j, j+1 (naive)."""
        fi, ti = self._split(rows)
        out = np.zeros(len(rows), np.int64)
        if len(fi):
            dw, tw = self._cv(j, rows[fi]), self._cv(j + 1, rows[fi])
            mm, dd, yy = (_two_of(dw, k) for k in (0, 3, 6))
            year = np.where(yy >= L.YEAR_PIVOT, 1900 + yy, 2000 + yy)
            days = _days_from_civil(year, mm, dd)
            hh, mi, ss = (_two_of(tw, k) for k in (0, 3, 6))
            out[fi] = days * 86400 + hh * 3600 + mi * 60 + ss
        if len(ti):
            out[ti] = self.tok.local_seconds(j, self.tok_row[rows[ti]])
        return out


_STAMP_DIGITS = F.U64(0x8080008080008080)          # bytes 0, 1, 3, 4, 6, 7


def _two_of(w: np.ndarray, k: int) -> np.ndarray:
    """The two decimal digits at bytes k, k+1 of the words ``w`` as a number."""
    hi = ((w >> F.U64(8 * k)) & F.U64(0xFF)).astype(np.int64) - 48
    lo = ((w >> F.U64(8 * k + 8)) & F.U64(0xFF)).astype(np.int64) - 48
    return hi * 10 + lo


def _stamp_ok(w: np.ndarray, date: bool) -> np.ndarray:
    """Words that are a valid ``MM/DD/YY`` (date) or ``HH:MM:SS``: like ``date_ok`` and
    ``time_ok``."""
    sep = F.U64(0x2F if date else 0x3A)
    ok = ((F.dec_flags(w) & _STAMP_DIGITS) == _STAMP_DIGITS)
    ok &= (((w >> F.U64(16)) & F.U64(0xFF)) == sep) & (((w >> F.U64(40)) & F.U64(0xFF)) == sep)
    a, b, c = (np.where(ok, _two_of(w, k), 0) for k in (0, 3, 6))
    if not date:
        return ok & (a < 24) & (b < 60) & (c < 60)
    year = np.where(c >= L.YEAR_PIVOT, 1900 + c, 2000 + c)
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    month_ok = (a >= 1) & (a <= 12)
    dim = _DIM[np.where(month_ok, a, 0)] + ((a == 2) & leap)
    return ok & month_ok & (b >= 1) & (b <= dim)
