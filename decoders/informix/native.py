"""One compiled pass over an ``onlog`` text (numba): lines, line kinds, record lines by fixed
columns (issue 13).

``columns.Text`` and ``columns.Records`` find the lines with a newline scan, classify them with
masks, check ``-l`` dump lines on a byte matrix and read the record lines by fixed columns as
64-bit words: each of those is a pass over memory, and their sum is what the decode costs.
``scan`` does all of it in one loop over the text, line by line, with the same rules and the
same 64-bit word arithmetic (``fixed.py``: byte classes as the top bit of every byte), and
gives what those passes give:

* every line's start and end (a ``\\r`` before the newline cut) and its kind: blank, dump line
  laid out the canonical way (``columns.canonical_dumps``: the masks of every column class per
  rendering width, ``dump_masks``), the exact header line, record line; an indented line that
  is not a canonical dump line (``PENDING_INDENT``) and a record line starting with ``addr``
  that is not the exact header line (``PENDING_HEAD``) are left to the regular expressions of
  ``columns.Text``, as there;
* for every record line (``PENDING_HEAD`` lines too), the fixed-column reading of
  ``columns.Records._fixed`` / ``_columns``: whether the line fits, addr, xid, link, the
  record type, and where each column after the header starts and ends (offsets in the line,
  one byte each: a line read this way is at most ``fixed.WIN - fixed.SLACK`` bytes).

A line that does not fit goes to the token reader exactly as before, so what ``Records``
gives is the same either way (tests/test_informix_native.py compares both paths).

Words are read unaligned and little-endian (``_load64``; ``columns`` uses this module only on
a little-endian machine). numba compiles the functions on first use and caches the machine
code (``cache=True``: ``__pycache__`` beside this file, or numba's user-wide cache
directory); importing numba and loading the cached code costs ~0.55-0.6 s of CPU per process
(the first compile on a machine ~11-14 s), so ``columns`` uses this pass only for big texts
(``columns.native_wanted``) and falls back to numpy when numba is not installed or does not
load.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from llvmlite import ir
from numba import njit, types
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

# line kinds (columns.LINE_*), and the two left to the regular expressions
BLANK, DUMP, HEADER, RECORD, INDENTED = 0, 1, 2, 3, 4
PENDING_INDENT, PENDING_HEAD = 5, 6

# column kinds (per record type, ``kinds`` table)
K_HEX, K_DEC, K_ASCII, K_USED_FREE, K_DATE, K_TIME = 0, 1, 2, 3, 4, 5
# dump-line column classes (``dump_masks``)
D_BLANK, D_HEX, D_PRINT, D_NOT_FF = 0, 1, 2, 3

_OPTS = dict(cache=True, nogil=True, boundscheck=False)
# helpers are inlined into ``scan`` by numba (no call, no reference counting of the arrays
# passed per call: that cost ~100 ns a line)
_INL = dict(_OPTS, inline="always")

U = np.uint64
HIGH = U(0x8080808080808080)
LOW7 = U(0x7F7F7F7F7F7F7F7F)
ONES = U(0x0101010101010101)
BLANKS = U(0x2020202020202020)
NLS = U(0x0A0A0A0A0A0A0A0A)
FF = U(0xFF)
# _BYTE[k]: the low k bytes; _HB[k]: their top bits
_BYTE = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_HB = _BYTE & HIGH
_USED = U(int.from_bytes(b"USED", "little"))
_FREE = U(int.from_bytes(b"FREE", "little"))
_STAMP_DIGITS = U(0x8080008080008080)          # bytes 0, 1, 3, 4, 6, 7


@intrinsic
def _load64(typingctx, arr, idx):
    """The little-endian 64-bit word at byte ``idx`` of a uint8 array (unaligned load)."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.uint8):
        return None
    sig = types.uint64(arr, idx)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        i = context.cast(builder, args[1], signature.args[1], types.intp)
        ptr = builder.gep(ary.data, [i])
        return builder.load(builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)

    return sig, codegen


# -- byte classes of a word (fixed.py): the top bit of every byte that is in the class

def _ptr_intrinsic(bits: int, scale: int, store: bool, signed: bool = False):
    """An intrinsic loading (``f(p, i)``) or storing (``f(p, i, v)``) the ``bits``-bit integer
    at address ``p + scale * i`` (unaligned). The scan's helpers take addresses, not
    arrays: numba counts the references of every array passed to a function (two atomic
    operations per array and call), which cost half of the scan when they took arrays."""
    nb = {(8, False): types.uint8, (16, True): types.int16, (64, False): types.uint64,
          (64, True): types.int64}[(bits, signed)]
    lt = ir.IntType(bits)

    def typer(typingctx, p, i, v=None):
        if store:
            return types.void(p, i, v), codegen
        return nb(p, i), codegen

    def codegen(context, builder, signature, args):
        addr = builder.add(context.cast(builder, args[0], signature.args[0], types.int64),
                           builder.mul(context.cast(builder, args[1], signature.args[1],
                                                    types.int64),
                                       ir.Constant(ir.IntType(64), scale)))
        ptr = builder.inttoptr(addr, lt.as_pointer())
        if store:
            builder.store(context.cast(builder, args[2], signature.args[2], nb), ptr, align=1)
            return context.get_dummy_value()
        return builder.load(ptr, align=1)

    if store:
        def f(typingctx, p, i, v):
            return typer(typingctx, p, i, v)
    else:
        def f(typingctx, p, i):
            return typer(typingctx, p, i)
    return intrinsic(f)


_b = _ptr_intrinsic(8, 1, False)            # byte at p + i
_w = _ptr_intrinsic(64, 1, False)           # word at p + i (unaligned)
_u64 = _ptr_intrinsic(64, 8, False)         # uint64 element i
_i64 = _ptr_intrinsic(64, 8, False, True)   # int64 element i
_put8 = _ptr_intrinsic(8, 1, True)
_put64 = _ptr_intrinsic(64, 8, True)
_put16 = _ptr_intrinsic(16, 2, True, True)


@intrinsic
def _bswap(typingctx, x):
    """The bytes of a 64-bit word in reverse order."""
    if x != types.uint64:
        return None
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        fn = builder.module.declare_intrinsic("llvm.bswap", [ir.IntType(64)])
        return builder.call(fn, [args[0]])

    return sig, codegen


@njit(**_INL)
def _hex_value(x, k):
    """The first k (1..8) bytes of x, hex digits, as a number (``fixed.hex_value``)."""
    d = ((x & U(0x0F0F0F0F0F0F0F0F)) + U(9) * ((x >> U(6)) & ONES)) & _BYTE[k]
    d = _bswap(d << U(8 * (8 - k)))
    d = (d | (d >> U(4))) & U(0x00FF00FF00FF00FF)
    d = (d | (d >> U(8))) & U(0x0000FFFF0000FFFF)
    return (d | (d >> U(16))) & U(0xFFFFFFFF)


@njit(**_INL)
def _dec_value(x, k):
    """The first k (1..8) bytes of x, decimal digits, as a number (``fixed.dec_value``)."""
    d = (x ^ U(0x3030303030303030)) & _BYTE[k]
    d = d << U(8 * (8 - k))
    d = d * U(10) + (d >> U(8))
    return (((d & U(0x000000FF000000FF)) * U(100 + (1000000 << 32)))
            + (((d >> U(16)) & U(0x000000FF000000FF)) * U(1 + (10000 << 32)))) >> U(32)


@njit(**_INL)
def _eq_flags(x, pattern):
    z = x ^ pattern
    return ~(((z & LOW7) + LOW7) | z) & HIGH


@njit(**_INL)
def _range_flags(x, add_lo, add_hi):
    """Bytes in [lo, hi] (7-bit): add_lo = 0x80 - lo, add_hi = 0x7f - hi (per byte)."""
    y = x & LOW7
    return (y + add_lo) & ~(y + add_hi) & ~x & HIGH


@njit(**_INL)
def _blank(x):
    return _eq_flags(x, BLANKS)


@njit(**_INL)
def _dec(x):
    return _range_flags(x, U(0x5050505050505050), U(0x4646464646464646))


@njit(**_INL)
def _hex(x):
    y = (x | BLANKS) & LOW7
    letter = (y + U(0x1F1F1F1F1F1F1F1F)) & ~(y + U(0x1919191919191919))
    return _dec(x) | (letter & ~x & HIGH)


@njit(**_INL)
def _lower_hex(x):
    return _dec(x) | _range_flags(x, U(0x1F1F1F1F1F1F1F1F), U(0x1919191919191919))


@njit(**_INL)
def _printable(x):
    """0x21..0x7e."""
    return _range_flags(x, U(0x5F5F5F5F5F5F5F5F), ONES)


@njit(**_INL)
def _print_or_blank(x):
    """0x20..0x7e."""
    return _range_flags(x, U(0x6060606060606060), ONES)


@njit(**_INL)
def _first_unset(flags, width):
    """Index of the first byte (< width) whose top bit is not set (width if none)."""
    miss = ~flags & _HB[width]
    if miss == 0:
        return width
    return np.int64(trailing_zeros(miss) >> U(3))


@njit(**_INL)
def _byte_of(x, k):
    return np.int64((x >> U(8 * k)) & FF)


@njit(**_INL)
def _field(x, width, hexa):
    """A left-aligned number in the low ``width`` bytes of x: its digit count, or -1 when
    it is not one (no digit, or something but blanks after the digits)."""
    digit = _hex(x) if hexa else _dec(x)
    k = _first_unset(digit, width)
    rest = _HB[width] & ~_HB[k]
    if k < 1 or (_blank(x) & rest) != rest:
        return -1
    return k


@njit(**_INL)
def _value(x, k, hexa):
    v = U(0)
    for q in range(k):
        c = _byte_of(x, q)
        if hexa:
            d = c - 48 if c <= 57 else (c - 87 if c >= 97 else c - 55)
            v = (v << U(4)) | U(d)
        else:
            v = v * U(10) + U(c - 48)
    return v


@njit(**_INL)
def _two(x, k):
    return (_byte_of(x, k) - 48) * 10 + _byte_of(x, k + 1) - 48


@njit(**_INL)
def _stamp(x, date):
    """x is a valid MM/DD/YY (date) or HH:MM:SS (``columns._stamp_ok``)."""
    if (_dec(x) & _STAMP_DIGITS) != _STAMP_DIGITS:
        return False
    sep = 47 if date else 58
    if _byte_of(x, 2) != sep or _byte_of(x, 5) != sep:
        return False
    a = _two(x, 0)
    b = _two(x, 3)
    c = _two(x, 6)
    if not date:
        return a < 24 and b < 60 and c < 60
    if a < 1 or a > 12 or b < 1:
        return False
    year = 1900 + c if c >= 70 else 2000 + c
    dim = 31
    if a == 4 or a == 6 or a == 9 or a == 11:
        dim = 30
    elif a == 2:
        dim = 29 if (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)) else 28
    return b <= dim


@njit(**_INL)
def _at(bp, s, length, o):
    """The word at column o of the line at s (bytes past its end read as blanks); the
    caller makes sure that s + o + 8 is inside the buffer (``bp``: its address)."""
    v = length - o
    if v <= 0:
        return BLANKS
    w = _w(bp, s + o)
    if v >= 8:
        return w
    keep = _BYTE[v]
    return (w & keep) | (BLANKS & ~keep)


@njit(**_INL)
def _newline(bp, i, n):
    """Index of the first newline at or after i (n if none)."""
    while i + 8 <= n:
        w = _w(bp, i) ^ NLS
        t = (w - ONES) & ~w & HIGH
        if t != 0:
            return i + np.int64(trailing_zeros(t) >> U(3))
        i += 8
    while i < n and _b(bp, i) != 10:
        i += 1
    return i


@njit(**_INL)
def _dump(bp, s, c, mp):
    """The canonical dump line of c rendered bytes at s (64 bytes readable from s; ``mp``:
    the address of ``masks``, (17, 8, 4) uint64)."""
    for k in range(8):
        w = _w(bp, s + 8 * k)
        e = (c * 8 + k) * 4
        m = _u64(mp, e + D_BLANK)
        if m != 0 and (_blank(w) & m) != m:
            return False
        m = _u64(mp, e + D_HEX)
        if m != 0 and (_lower_hex(w) & m) != m:
            return False
        m = _u64(mp, e + D_PRINT)
        if m != 0 and (_print_or_blank(w) & m) != m:
            return False
        m = _u64(mp, e + D_NOT_FF)
        if m != 0 and (_eq_flags(w, ~U(0)) & m) != 0:
            return False
    return True


@njit(**_INL)
def _dump16(bp, s):
    """``_dump(bp, s, 16, masks)`` of the usual dump line, by its layout: 8 blanks, four
    groups of 8 lower-case hex digits one blank apart (words at 8, 17, 26, 35), 2 blanks,
    16 printable characters (words at 45 and 53), 3 bytes after the line that are not 0xff
    (64 bytes readable from s)."""
    if _w(bp, s) != BLANKS:
        return False
    for o in (8, 17, 26, 35):
        if _lower_hex(_w(bp, s + o)) != HIGH:
            return False
    if _b(bp, s + 16) != 32 or _b(bp, s + 25) != 32 or _b(bp, s + 34) != 32 \
            or _b(bp, s + 43) != 32 or _b(bp, s + 44) != 32:
        return False
    if (_print_or_blank(_w(bp, s + 45)) & _print_or_blank(_w(bp, s + 53))) != HIGH:
        return False
    return _b(bp, s + 61) != 255 and _b(bp, s + 62) != 255 and _b(bp, s + 63) != 255


@njit(**_INL)
def _record(bp, s, length, r, hmul, hshift, P):
    """The fixed-column reading of one record line (``columns.Records._fixed``, the same
    rules word for word): True if it fits; then its header fields go to row r, the
    columns' (start, end) offsets to ``cols[r]`` and the words of its first two columns (as
    ``Records.cv``: bytes past the line end blank) to ``words[r]``, and where those are hex
    their values and whether they are printed as ``format(v, "x")`` (lower case, no leading
    zero) to ``hval[r]``, ``hcanon[r]``. At least 112 bytes are readable from s (``bp``:
    the buffer's address). ``P``: the addresses of the tables (htable, hkeys, hcode, lkeys,
    lcode, ncols, kinds, rest), the number of long type names and the most columns of a
    type, the addresses of the outputs (addr, xid, link, tcode, cols, words, hval,
    hcanon)."""
    htable, hkeys, hcode, lkeys, lcode, ncols, kinds, rest, nlong, maxc = P[:10]
    addr, xid, link, tcode, cols, words, hval, hcanon = P[10:]
    if length < 36 or length > 96:
        return False
    w = _w(bp, s)                                     # addr (36 bytes or more: whole)
    k = _field(w, 8, True)
    if k < 0:
        return False
    a = _hex_value(w, k)
    b = _w(bp, s + 8)                                 # blank, len, blank
    if (b & FF) != U(0x20) or ((b >> U(40)) & FF) != U(0x20) or _field(b >> U(8), 4, False) < 0:
        return False
    c1 = _w(bp, s + 14)                               # the type name
    c2 = _w(bp, s + 22)
    nb1 = _blank(c1)
    tl = _first_unset(~nb1 & HIGH, 8)
    if tl == 8:
        tl = 8 + _first_unset(~_blank(c2) & HIGH, 8)
    if tl < 1 or tl >= 16:
        return False
    if tl <= 8:
        pad = _HB[8] & ~_HB[tl]
        if (nb1 & pad) != pad or (c2 & FF) != U(0x20):
            return False
    sh = tl - 8 if tl > 8 else 0
    if length < 36 + sh:
        return False
    w = _at(bp, s, length, 23 + sh)                        # xid
    k = _field(w, 8, False)
    if k < 0:
        return False
    x = _dec_value(w, k)
    q = _at(bp, s, length, 31 + sh)                        # blank, id, blank
    if (q & FF) != U(0x20) or ((q >> U(24)) & FF) != U(0x20) or _field(q >> U(8), 2, False) < 0:
        return False
    w = _at(bp, s, length, 35 + sh)                        # link
    k = _field(w, 8, True)
    if k < 0:
        return False
    ln = _hex_value(w, k)
    extra = length > 43 + sh
    if extra and (_b(bp, s + 43 + sh) != 32 or length <= 44 + sh):
        return False
    code = -1
    if tl <= 8:
        i = _i64(htable, (c1 * hmul) >> hshift)
        if i >= 0 and _u64(hkeys, i) == c1:
            code = _i64(hcode, i)
    else:
        k2 = c2 & _BYTE[tl - 8]
        for i in range(nlong):
            if _u64(lkeys, 2 * i) == c1 and _u64(lkeys, 2 * i + 1) == k2:
                code = _i64(lcode, i)
                break
    if code < 0:
        return False
    # the columns of the type, one blank apart
    nc = _i64(ncols, code)
    if (nc == 0) == extra:
        return False
    p = min(44 + sh, length)
    e = length
    for kk in range(nc):
        kind = _i64(kinds, code * maxc + kk)
        last = kk == nc - 1
        if last and _b(rest, code) != 0:
            if e - p < 1 or e - p > 64:
                return False
            o = p
            while o < e:                    # printable or tab
                v = min(e - o, 8)
                w = _w(bp, s + o)
                m = _HB[v]
                if ((_print_or_blank(w) | _eq_flags(w, U(0x0909090909090909))) & m) != m:
                    return False
                o += 8
            if _b(bp, s + e - 1) <= 32 or _b(bp, s + p) <= 32:
                return False
            _put8(cols, r * 2 * maxc + 2 * kk, p)
            _put8(cols, r * 2 * maxc + 2 * kk + 1, e)
            break
        w = _at(bp, s, length, p)
        tk = _first_unset(~_blank(w) & HIGH, 8)
        if kind == K_ASCII and tk == 8:
            w2 = _at(bp, s, length, p + 8)
            tk2 = _first_unset(~_blank(w2) & HIGH, 8)
            hb2 = _HB[tk2]
            if (_printable(w2) & hb2) != hb2:
                return False
            tk += tk2
        nxt = p + tk
        if last:
            if nxt != e:
                return False
        elif nxt == e or _b(bp, s + nxt) != 32:
            return False
        hb = _HB[min(tk, 8)]
        if kind == K_HEX:
            if tk < 1 or (_hex(w) & hb) != hb:
                return False
            if kk < 2:                      # the value, and whether printed as format(v, "x")
                _put64(hval, 2 * r + kk, _hex_value(w, tk))
                upper = _range_flags(w, U(0x3F3F3F3F3F3F3F3F), U(0x3939393939393939)) & hb
                _put8(hcanon, 2 * r + kk, upper == 0 and ((w & FF) != U(0x30) or tk == 1))
        elif kind == K_DEC:
            fl = _dec(w)
            if (w & FF) == U(0x2D) and tk >= 2:
                fl |= U(0x80)
            if tk < 1 or (fl & hb) != hb:
                return False
        elif kind == K_DATE or kind == K_TIME:
            if tk != 8 or not _stamp(w, kind == K_DATE):
                return False
        elif kind == K_USED_FREE:
            word = w & U(0xFFFFFFFF)
            if tk != 4 or (word != _USED and word != _FREE):
                return False
        else:
            if tk < 1 or (_printable(w) & hb) != hb:
                return False
        _put8(cols, r * 2 * maxc + 2 * kk, p)
        _put8(cols, r * 2 * maxc + 2 * kk + 1, nxt)
        if kk < 2 and (kind == K_DATE or kind == K_TIME):
            _put64(words, 2 * r + kk, w)
        p = min(nxt + 1, e)
    _put64(addr, r, a)
    _put64(xid, r, x)
    _put64(link, r, ln)
    _put16(tcode, r, code)
    return True


@njit(**_OPTS)
def scan(buf, starts, ends, kind, rline, fit, addr, xid, link, tcode, cols, words, hval, hcanon,
         uend, usimple, header, masks, hmul, hshift, htable, hkeys, hcode, lkeys, lcode, ncols,
         kinds, rest):
    """Lines and record lines of one onlog text (see the module's docstring) into the arrays
    given (``alloc``): every line's start, end and kind, and per record line (kinds RECORD
    and PENDING_HEAD, in order) its line, fit, header fields, type code, the (start, end) of
    every column in the line, the words of its first two columns, and its unit (the record
    line and the dump lines under it, up to the next record, header or other line, as
    ``decoder._RecordsMode.raw``): where its last dump line ends (``uend``) and whether its
    bytes up to there are its lines whole (``usimple``: no blank line and no cut \\r in
    between). Returns (lines, record lines, whether a \\r was cut, PENDING_INDENT lines,
    PENDING_HEAD lines); lines -1 when there were more lines than room (the arrays are not
    grown here: an array variable reassigned in the loop costs reference counting on every
    line)."""
    n = buf.shape[0]
    cap = starts.shape[0]
    hl = header.shape[0]
    bp = buf.ctypes.data
    mp = masks.ctypes.data
    P = (htable.ctypes.data, hkeys.ctypes.data, hcode.ctypes.data, lkeys.ctypes.data,
         lcode.ctypes.data, ncols.ctypes.data, kinds.ctypes.data, rest.ctypes.data,
         lkeys.shape[0], kinds.shape[1], addr.ctypes.data, xid.ctypes.data, link.ctypes.data,
         tcode.ctypes.data, cols.ctypes.data, words.ctypes.data, hval.ctypes.data,
         hcanon.ctypes.data)
    m = 0
    nr = 0
    cr = False
    pending = 0           # PENDING_INDENT lines
    heads = 0             # PENDING_HEAD lines
    cur = -1              # the record row whose unit is open
    gap = False           # a blank line since its last dump line
    i = 0
    while i < n:
        s = i
        if m == cap:
            return -1, nr, cr, pending, heads
        c = buf[s]
        # the usual dump line: 16 bytes rendered, 61 bytes and a newline
        if c == 32 and s + 64 <= n and buf[s + 61] == 10 and buf[s + 60] != 13 \
                and _dump16(bp, s):
            starts[m] = s
            ends[m] = s + 61
            kind[m] = DUMP
            m += 1
            i = s + 62
            if cur >= 0:
                uend[cur] = s + 61
                if gap:
                    usimple[cur] = False
                gap = False
            continue
        e = _newline(bp, s, n)
        i = e + 1
        cut = False
        if e > s and buf[e - 1] == 13:
            e -= 1
            cr = True
            cut = True
        starts[m] = s
        ends[m] = e
        length = e - s
        if length == 0:
            kind[m] = BLANK
            m += 1
            gap = True
            continue
        if c == 32 or (9 <= c <= 13):
            dc = length - 45
            if 1 <= dc <= 16 and s + 64 <= n and _dump(bp, s, dc, mp):
                kind[m] = DUMP
                if cur >= 0:
                    uend[cur] = e
                    if gap or cut:
                        usimple[cur] = False
                    gap = False
            else:                 # its unit is joined line by line (columns.Text)
                kind[m] = PENDING_INDENT
                pending += 1
            m += 1
            continue
        k = RECORD
        if (c | 32) == 97 and length >= 4 and (buf[s + 1] | 32) == 100 \
                and (buf[s + 2] | 32) == 100 and (buf[s + 3] | 32) == 114:
            k = PENDING_HEAD
            if length == hl:
                k = HEADER
                for q in range(hl):
                    if buf[s + q] != header[q]:
                        k = PENDING_HEAD
                        break
        kind[m] = k
        m += 1
        if k == HEADER:
            cur = -1
            continue
        if k == PENDING_HEAD:
            heads += 1
        rline[nr] = m - 1
        cur = nr
        gap = False
        uend[nr] = e
        usimple[nr] = not cut
        if s + 112 <= n and _record(bp, s, length, nr, hmul, hshift, P):
            fit[nr] = True
        else:
            fit[nr] = False
            addr[nr] = 0
            xid[nr] = 0
            link[nr] = 0
            tcode[nr] = -1
        nr += 1
    return m, nr, cr, pending, heads


def empty(shape, dtype) -> np.ndarray:
    """``np.empty`` in Arrow's memory pool: it keeps the pages it had (a big ``np.empty`` is
    a fresh ``mmap`` every time, and its pages fault in again: ~5 us each on a VM)."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape))
    buf = pa.allocate_buffer(max(count * dtype.itemsize, 1))
    return np.frombuffer(buf, dtype, count).reshape(shape)


def alloc(cap: int, maxc: int) -> tuple:
    """The output arrays of ``scan`` for ``cap`` lines (pages past what is written are never
    touched)."""
    hval = empty((cap, 2), np.uint64)          # also the words of dates and times: a column
    return (empty(cap, np.int64), empty(cap, np.int64), empty(cap, np.int8),  # is one kind
            empty(cap, np.int64), empty(cap, np.bool_), empty(cap, np.uint64),
            empty(cap, np.uint64), empty(cap, np.uint64), empty(cap, np.int16),
            empty((cap, 2 * maxc), np.uint8), hval, hval, empty((cap, 2), np.bool_),
            empty(cap, np.int64), empty(cap, np.bool_))


class Scan:
    """What ``scan`` found in one text (arrays cut to the lines and record lines)."""
    __slots__ = ("starts", "ends", "kind", "cr", "pending", "heads", "rline", "fit", "addr", "xid",
                 "link", "tcode", "cols", "words", "hval", "hcanon", "uend", "usimple")


class Scratch:
    """Working arrays kept between the texts of a process (the scan's outputs, the rows'
    codes): a big array is fresh memory on every allocation here (its pages fault in and are
    zeroed again: ~1-20 us a page on a VM), so the texts a process decodes one after the
    other reuse the same ones. Only ``decoder.decode_records`` takes them, for the time of
    one text (``take`` ... ``release``); nothing it returns points into them."""

    def __init__(self) -> None:
        self.busy = False
        self.arrays: dict = {}

    def take(self) -> bool:
        if self.busy:
            return False
        self.busy = True
        return True

    def release(self) -> None:
        self.busy = False

    def get(self, key: str, make, size: int):
        """The arrays ``key`` with room for ``size`` (``make(size)``: new ones)."""
        got = self.arrays.get(key)
        if got is None or got[0] < size:
            got = self.arrays[key] = (size, make(size))
        return got[1]


SCRATCH = Scratch()


def read(buf: np.ndarray, tables: tuple, scratch: Scratch | None = None) -> Scan:
    """``scan`` of ``buf`` (into ``scratch``'s arrays when given). ``tables``: the arguments
    after the output arrays, then the most columns of a type."""
    *args, maxc = tables
    n = len(buf)
    cap = n // 40 + 16
    out = scratch.get("scan", lambda c: alloc(c, maxc), cap) if scratch else alloc(cap, maxc)
    m, nr, cr, pending, heads = scan(buf, *out, *args)
    if m < 0:                         # short lines: room for every line
        cap = int(np.count_nonzero(buf == 10)) + 1
        out = scratch.get("scan", lambda c: alloc(c, maxc), cap) if scratch else \
            alloc(cap, maxc)
        m, nr, cr, pending, heads = scan(buf, *out, *args)
    r = Scan()
    r.starts, r.ends, r.kind = out[0][:m], out[1][:m], out[2][:m]
    (r.rline, r.fit, r.addr, r.xid, r.link, r.tcode, r.cols, r.words, r.hval, r.hcanon,
     r.uend, r.usimple) = (a[:nr] for a in out[3:])
    r.cr, r.pending, r.heads = bool(cr), int(pending), int(heads)
    return r


# ----------------------------------------------------------------- columns of the rows

@intrinsic
def _store64(typingctx, arr, idx, val):
    """Store a 64-bit word at byte ``idx`` of a uint8 array (unaligned, little-endian)."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.uint8):
        return None
    sig = types.void(arr, idx, val)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        i = context.cast(builder, args[1], signature.args[1], types.intp)
        v = context.cast(builder, args[2], signature.args[2], types.uint64)
        ptr = builder.gep(ary.data, [i])
        builder.store(v, builder.bitcast(ptr, ir.IntType(64).as_pointer()), align=1)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _memcpy(typingctx, dst, d, src, a, k):
    """``dst[d:d + k] = src[a:a + k]`` (uint8 arrays, no overlap) by ``llvm.memcpy``."""
    if not (isinstance(dst, types.Array) and isinstance(src, types.Array)):
        return None
    sig = types.void(dst, d, src, a, k)

    def codegen(context, builder, signature, args):
        from numba.core import cgutils

        dary = context.make_array(signature.args[0])(context, builder, args[0])
        sary = context.make_array(signature.args[2])(context, builder, args[2])
        di = context.cast(builder, args[1], signature.args[1], types.intp)
        si = context.cast(builder, args[3], signature.args[3], types.intp)
        ki = context.cast(builder, args[4], signature.args[4], types.intp)
        cgutils.raw_memcpy(builder, builder.gep(dary.data, [di]), builder.gep(sary.data, [si]),
                           ki, 1)
        return context.get_dummy_value()

    return sig, codegen


@njit(**_OPTS)
def copy_spans(buf, s, off, out):
    """The bytes ``buf[s[i]:s[i] + off[i + 1] - off[i]]`` of every row into ``out`` at
    ``off[i]``, 8 bytes at a time (``out`` has 8 bytes of room after the last row); a row
    with s < 0 is left to the caller."""
    n = buf.shape[0]
    for i in range(s.shape[0]):
        a = s[i]
        if a < 0:
            continue
        o = np.int64(off[i])
        k = np.int64(off[i + 1]) - o
        q = 0
        if a + k + 8 <= n:
            while q < k:
                _store64(out, o + q, _load64(buf, a + q))
                q += 8
        else:
            while q < k:
                out[o + q] = buf[a + q]
                q += 1


# -- string columns built straight into Arrow's buffers (offsets, bytes, validity bitmap)

@njit(**_OPTS)
def dict_offsets(doff, dvalid, codes, off, bitmap):
    """Offsets and validity bitmap of the strings ``dictionary[codes]`` (a code < 0, or an
    entry not ``dvalid``: null); ``bitmap`` zeroed. Returns (bytes, nulls)."""
    total = 0
    nulls = 0
    off[0] = 0
    for i in range(codes.shape[0]):
        c = codes[i]
        if c >= 0 and dvalid[c]:
            total += doff[c + 1] - doff[c]
            bitmap[i >> 3] |= np.uint8(1 << (i & 7))
        else:
            nulls += 1
        off[i + 1] = total
    return total, nulls


@njit(**_OPTS)
def dict_fill(doff, ddata, codes, off, out):
    """The bytes of ``dictionary[codes]`` at ``off`` (``ddata`` and ``out`` have 8 bytes of
    room at the end: copied a word at a time)."""
    for i in range(codes.shape[0]):
        o = np.int64(off[i])
        k = np.int64(off[i + 1]) - o
        if k > 0:
            a = np.int64(doff[codes[i]])
            q = 0
            while q < k:
                _store64(out, o + q, _load64(ddata, a + q))
                q += 8


@njit(**_OPTS)
def hex_strings(buf, line_s, rows, valid, canon, cols, c, val, off, bitmap, out):
    """``format(v, "x")`` of column k (``c`` = 2 k: where it starts in ``cols``) of records
    ``rows`` where ``valid``, in one pass: the printed text where ``canon[r, k]`` (at most 8
    digits, a line read by fixed columns: copied as one word), else the value ``val[r, k]``
    rendered; offsets, validity (``bitmap`` zeroed) and bytes (``out``: 16 bytes a row and
    8 more of room). Returns (bytes, nulls)."""
    total = 0
    nulls = 0
    off[0] = 0
    k = c // 2
    for i in range(rows.shape[0]):
        if valid[i]:
            r = rows[i]
            if canon[r, k]:
                a = np.int64(cols[r, c])
                n = np.int64(cols[r, c + 1]) - a
                _store64(out, total, _load64(buf, line_s[r] + a))
            else:
                v = val[r, k]
                n = 1
                while n < 16 and (v >> U(4 * n)) != U(0):
                    n += 1
                for q in range(n):
                    d = np.int64((v >> U(4 * (n - 1 - q))) & U(15))
                    out[total + q] = 48 + d if d < 10 else 87 + d
            total += n
            bitmap[i >> 3] |= np.uint8(1 << (i & 7))
        else:
            nulls += 1
        off[i + 1] = total
    return total, nulls


@njit(**_OPTS)
def span_offsets(line_s, rows, valid, cols, c, off, bitmap):
    """Offsets and validity of the text of column ``c // 2`` (``cols[r, c:c + 2]``) of records
    ``rows`` where ``valid``. Returns (bytes, nulls)."""
    total = 0
    nulls = 0
    off[0] = 0
    for i in range(rows.shape[0]):
        if valid[i]:
            r = rows[i]
            total += np.int64(cols[r, c + 1]) - np.int64(cols[r, c])
            bitmap[i >> 3] |= np.uint8(1 << (i & 7))
        else:
            nulls += 1
        off[i + 1] = total
    return total, nulls


@njit(**_OPTS)
def span_fill(buf, line_s, rows, valid, cols, c, off, out):
    for i in range(rows.shape[0]):
        if valid[i]:
            r = rows[i]
            o = np.int64(off[i])
            k = np.int64(off[i + 1]) - o
            a = line_s[r] + np.int64(cols[r, c])
            q = 0
            while q < k:
                _store64(out, o + q, _load64(buf, a + q))
                q += 8


@njit(**_OPTS)
def positions(head, addr, rows, out):
    """``<uniqid><addr>`` of records ``rows``: 8 + 8 upper-case hex digits (``head``: the
    first 8 as a word) into ``out`` (16 bytes a row)."""
    for i in range(rows.shape[0]):
        _store64(out, 16 * i, head)
        x = addr[rows[i]] & U(0xFFFFFFFF)
        w = U(0)
        for q in range(8):
            d = (x >> U(4 * (7 - q))) & U(15)
            w |= (d + (U(48) if d < U(10) else U(55))) << U(8 * q)
        _store64(out, 16 * i + 8, w)


# -- the records-mode rows of the records the columns read (decoder._RecordsMode.run_native)

@njit(**_OPTS)
def _two_of(w, k):
    return (np.int64((w >> U(8 * k)) & FF) - 48) * 10 + np.int64((w >> U(8 * k + 8)) & FF) - 48


@njit(**_OPTS)
def _days_from_civil(y, m, d):
    y -= 1 if m <= 2 else 0
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    mp = (m + 9) % 12
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


@njit(**_OPTS)
def rows(fast, tcode, link, hval, words, fit, role_of, kind_of, home_op, pivot,
         line_s, lines, size, line0, index0,
         fi, role_f, codes, tkeys, tslot, local, offs, idx, nbytes):
    """The rows of the records the columns read, in one pass over the records: which
    records are rows (``fast``, a known role, not a BEGIN that links somewhere: ``fi``), and
    per row its role, record offset (line number), record index, bytes (from its line's start
    to the next record's), codes (0 kind, 1 record type, 2 rule, 3 op of a home-row change,
    4 and 5 the table of a change: an index into the distinct tables, found by hashing into
    ``tkeys``/``tslot``; 6 flag and 7 ddl: -1, set by the caller) and, for a COMMIT read by
    fixed columns, its date and time as naive seconds (``local``; -1 for one read by
    tokens). Returns (rows, tables), tables -1 when the hash
    table is too small."""
    m = 0
    nt = 0
    n = fast.shape[0]
    hmask = tkeys.shape[0] - 1
    for i in range(n):
        if not fast[i]:
            continue
        t = tcode[i]
        if t < 0:
            continue
        r = role_of[t]
        if r == 1 and link[i] != 0:               # R_BEGIN that links somewhere
            continue
        fi[m] = i
        role_f[m] = r
        offs[m] = lines[i] + 1 + line0
        idx[m] = i + index0
        nb = (line_s[i + 1] if i + 1 < n else size) - line_s[i]
        nbytes[m] = nb + line_s[0] if i == 0 else nb
        codes[0, m] = kind_of[r]
        codes[1, m] = t
        codes[2, m] = t if (r == 0 or r == 8) else -1          # R_OTHER, R_SYSTEM
        codes[3, m] = home_op[t] if r == 5 else -1             # R_HOME
        codes[6, m] = -1
        codes[7, m] = -1
        if r == 5 or r == 7:                                   # R_HOME, R_DDL: its table
            key = hval[i, 0]
            h = np.int64((key * U(0x9E3779B97F4A7C15)) >> U(40)) & hmask
            while True:
                if tslot[h] < 0:
                    if 2 * (nt + 1) > tkeys.shape[0]:
                        return m, -1
                    tkeys[h] = key
                    tslot[h] = nt
                    nt += 1
                    break
                if tkeys[h] == key:
                    break
                h = (h + 1) & hmask
            codes[4, m] = tslot[h]
            codes[5, m] = tslot[h]
        else:
            codes[4, m] = -1
            codes[5, m] = -1
        if r == 2:                                             # R_COMMIT
            if fit[i]:
                dw = words[i, 0]
                tw = words[i, 1]
                mm = _two_of(dw, 0)
                dd = _two_of(dw, 3)
                yy = _two_of(dw, 6)
                year = 1900 + yy if yy >= pivot else 2000 + yy
                local[m] = (_days_from_civil(year, mm, dd) * 86400 + _two_of(tw, 0) * 3600
                            + _two_of(tw, 3) * 60 + _two_of(tw, 6))
            else:
                local[m] = -1
        m += 1
    return m, nt


@njit(**_OPTS)
def seg_offsets(fi, line_s, uend, usimple, role_f, limit, off, bitmap, bad):
    """``seg_data`` of the rows (records ``fi``): offsets and validity (null for a
    R_SYSTEM row) of the bytes from the record line's start to the end of its last dump
    line, at most ``limit``; a unit of another shape (not ``usimple``) goes to ``bad`` (its
    bytes joined by the caller, length 0 here). Returns (bytes, nulls, bad rows)."""
    total = 0
    nulls = 0
    nb = 0
    off[0] = 0
    for j in range(fi.shape[0]):
        if role_f[j] == 8:
            nulls += 1
        else:
            bitmap[j >> 3] |= np.uint8(1 << (j & 7))
            i = fi[j]
            if usimple[i]:
                total += min(uend[i] - line_s[i], limit)
            else:
                bad[nb] = j
                nb += 1
        off[j + 1] = total
    return total, nulls, nb


@njit(**_OPTS)
def seg_fill(buf, fi, line_s, off, out):
    n = buf.shape[0]
    for j in range(fi.shape[0]):
        o = np.int64(off[j])
        k = np.int64(off[j + 1]) - o
        if k <= 0:
            continue
        a = line_s[fi[j]]
        if a + k > n:                 # a unit joined by the caller: its bytes are not here
            continue
        _memcpy(out, o, buf, a, k)


@njit(**_OPTS)
def dict_columns(codes, src, doff, ddata, dvalid, base, off, bitmap, out, dstart):
    """Several string columns of dictionary codes in one pass over the rows: column c is
    ``dictionary_c[codes[src[c]]]`` (its entries ``base[c]``.. of ``doff``/``ddata``; a code
    < 0 or an entry not ``dvalid``: null), its offsets ``off[c]``, validity ``bitmap[c]``
    (zeroed) and bytes at ``out[dstart[c]:]`` (room for its longest entry on every row, and
    8 bytes: copied a word at a time). Returns (bytes, nulls) per column."""
    nc = src.shape[0]
    m = codes.shape[1]
    totals = np.zeros(nc, np.int64)
    nulls = np.zeros(nc, np.int64)
    for c in range(nc):
        off[c, 0] = 0
    for j in range(m):
        for c in range(nc):
            k = codes[src[c], j]
            e = base[c] + k
            if k >= 0 and dvalid[e]:
                a = doff[e]
                ln = doff[e + 1] - a
                o = dstart[c] + totals[c]
                q = 0
                while q < ln:
                    _store64(out, o + q, _load64(ddata, a + q))
                    q += 8
                totals[c] += ln
                bitmap[c, j >> 3] |= np.uint8(1 << (j & 7))
            else:
                nulls[c] += 1
            off[c, j + 1] = totals[c]
    return totals, nulls
