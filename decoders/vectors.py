"""Value codecs for whole columns: the vectorised twins of ``codecs`` (numpy / Arrow in,
Arrow or numpy out, no per-value Python on the common path).

Each function returns the decoded column and a boolean mask ``bad`` of the rows it could
not decode; a decoder sends exactly those rows through its careful per-record path, which
raises the precise ``DecodeError`` (field, offset, expected vs actual) that ``codecs`` gives.
So the fast path never has to explain an error, and never hides one.

Text: bytes in an ASCII-compatible encoding (utf-8, latin-1, cp1252, ...) that are all ASCII
become the string column without decoding; any single-byte code page (cp037, cp500, ...) is
translated to ASCII through a 256-entry table first when every byte of the row maps to
ASCII. Rows with other bytes are decoded one by one with the Python codec (the reference).
"""

from __future__ import annotations

import codecs as _codecs
from functools import lru_cache

import numpy as np
import pyarrow as pa

from .layout import as_uint8

# --------------------------------------------------------------------------- text


@lru_cache(maxsize=64)
def _single_byte_table(encoding: str):
    """(to_ascii uint8[256], is_ascii bool[256]) for a single-byte code page, else None."""
    try:
        info = _codecs.lookup(encoding)
    except LookupError:
        return None
    points = np.zeros(256, dtype=np.int64)
    for b in range(256):
        try:
            ch = info.decode(bytes([b]))[0]
        except (UnicodeDecodeError, ValueError):
            return None
        if len(ch) != 1:
            return None
        points[b] = ord(ch)
    is_ascii = points < 0x80
    return np.where(is_ascii, points, 0).astype(np.uint8), is_ascii


@lru_cache(maxsize=64)
def _ascii_compatible(encoding: str) -> bool:
    """Do bytes 0x00-0x7F mean ASCII in this encoding (decoding them alone)?"""
    try:
        return bytes(range(128)).decode(encoding) == "".join(map(chr, range(128)))
    except (UnicodeDecodeError, LookupError, ValueError):
        return False


def _flat(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bytes of every ``[start, start + length)`` concatenated, and Arrow offsets."""
    lengths = np.asarray(lengths, dtype=np.int64)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total == 0:
        return np.empty(0, np.uint8), offsets
    idx = np.repeat(np.asarray(starts, dtype=np.int64) - offsets[:-1], lengths) + np.arange(total)
    return buf[idx], offsets


def text(buf, starts, lengths, encoding: str) -> tuple[pa.Array, np.ndarray]:
    """Strings at ``[starts, starts + lengths)`` of ``buf`` in ``encoding``: (string array,
    bad mask). Bad rows are null in the array."""
    data = as_uint8(buf)
    raw, offsets = _flat(data, starts, lengths)
    return text_from_flat(raw, offsets, encoding)


def text_fixed(rows: np.ndarray, encoding: str) -> tuple[pa.Array, np.ndarray]:
    """Strings of an ``(n, w)`` uint8 array (fixed-width CHAR columns)."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    n, w = rows.shape
    offsets = np.arange(n + 1, dtype=np.int64) * w
    return text_from_flat(rows.reshape(-1), offsets, encoding)


def text_from_flat(raw: np.ndarray, offsets: np.ndarray, encoding: str) -> tuple[pa.Array, np.ndarray]:
    n = len(offsets) - 1
    lengths = np.diff(offsets)
    table = None if _ascii_compatible(encoding) else _single_byte_table(encoding)
    if table is not None:
        to_ascii, is_ascii = table
        ok_byte = is_ascii[raw]
        out_bytes = to_ascii[raw]
    else:
        ok_byte = raw < 0x80
        out_bytes = raw
    # rows whose every byte maps to ASCII
    cum = np.zeros(len(raw) + 1, dtype=np.int64)
    np.cumsum(~ok_byte, out=cum[1:])
    bad_bytes = cum[offsets[1:]] - cum[offsets[:-1]]
    slow = bad_bytes > 0
    if not _ascii_compatible(encoding) and table is None:
        slow = lengths > 0                            # multi-byte, not ASCII-compatible: all slow
    body = pa.py_buffer(np.ascontiguousarray(out_bytes).tobytes())
    if offsets[-1] < 2**31:
        arr = pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32)), body)
    else:
        arr = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int64)), body)
    bad = np.zeros(n, dtype=bool)
    if slow.any():
        rows = np.flatnonzero(slow)
        values: list = []
        for r in rows.tolist():
            try:
                values.append(raw[offsets[r]:offsets[r + 1]].tobytes().decode(encoding))
            except (UnicodeDecodeError, LookupError, ValueError):
                values.append(None)
                bad[r] = True
        mask = np.zeros(n, dtype=bool)
        mask[rows] = True
        full = [None] * n
        for r, v in zip(rows.tolist(), values):
            full[r] = v
        import pyarrow.compute as pc

        arr = pc.if_else(pa.array(mask), pa.array(full, pa.string()), arr)
    return arr, bad


# --------------------------------------------------------------------------- VMS time

VMS_EPOCH_US = np.datetime64("1858-11-17T00:00:00", "us").astype(np.int64)
_MAX_US = np.datetime64("9999-12-31T23:59:59.999999", "us").astype(np.int64)


def vms_times(ticks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """VMS absolute times (signed 100 ns ticks since 1858-11-17, source-local) -> naive
    datetime64[us] truncated to microseconds, and the bad mask (negative: a delta time;
    beyond 9999-12-31: not a date), as ``codecs.decode_vms_time`` decides per value."""
    t = np.asarray(ticks, dtype=np.int64)
    us = t // 10
    bad = (t < 0) | (us > _MAX_US - VMS_EPOCH_US)
    out = np.where(bad, 0, us + VMS_EPOCH_US).astype("datetime64[us]")
    return out, bad


# --------------------------------------------------------------------------- packed decimal and
# Db2 packed DATE / TIME / TIMESTAMP (BCD), the twins of ``codecs.decode_packed`` rendered with
# ``codecs.decimal_text`` and of ``codecs.decode_db2_date`` / ``_time`` / ``_timestamp``

_DIGITS = np.frombuffer(b"0123456789??????", dtype=np.uint8)
_PACKED_SIGNS = np.zeros(16, dtype=bool)
_PACKED_SIGNS[[0xA, 0xB, 0xC, 0xD, 0xE, 0xF]] = True      # C/F/A/E positive, D/B negative


def nibbles(rows: np.ndarray) -> np.ndarray:
    """An ``(n, w)`` uint8 array as its ``(n, 2w)`` half-bytes, high nibble first."""
    rows = np.asarray(rows, dtype=np.uint8)
    out = np.empty((rows.shape[0], 2 * rows.shape[1]), dtype=np.uint8)
    out[:, 0::2] = rows >> 4
    out[:, 1::2] = rows & 0x0F
    return out


def _rows_text(chars: np.ndarray, start: np.ndarray) -> pa.Array:
    """Row ``i`` of the ``(n, w)`` ASCII array ``chars`` from column ``start[i]`` to its end."""
    n, w = chars.shape
    lengths = (w - start).astype(np.int64)
    raw, offsets = _flat(chars.reshape(-1), np.arange(n, dtype=np.int64) * w + start, lengths)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32)),
                                       pa.py_buffer(raw.tobytes()))


def packed_decimal(rows: np.ndarray, scale: int) -> tuple[pa.Array, np.ndarray]:
    """Packed decimals (``(n, w)`` uint8: digits in nibbles, sign in the last) as the exact text
    ``codecs.decimal_text(codecs.decode_packed(raw, scale), scale)`` gives (``-12.30``; no
    sign on zero), a string column ``render.render_values`` takes for DECIMAL; and the bad mask
    (a digit nibble above 9, or a sign nibble that is no sign). Bad rows are null."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    n = rows.shape[0]
    nib = nibbles(rows)
    digits, sign = nib[:, :-1], nib[:, -1]
    bad = (digits > 9).any(axis=1) | ~_PACKED_SIGNS[sign]
    digits = np.where(bad[:, None], 0, digits)
    nd = digits.shape[1]
    if nd < scale + 1:                                    # at least one integer digit
        digits = np.concatenate([np.zeros((n, scale + 1 - nd), np.uint8), digits], axis=1)
        nd = scale + 1
    ni = nd - scale
    width = 1 + ni + (1 + scale if scale else 0)
    chars = np.empty((n, width), dtype=np.uint8)
    chars[:, 0] = ord("0")
    chars[:, 1:1 + ni] = _DIGITS[digits[:, :ni]]
    if scale:
        chars[:, 1 + ni] = ord(".")
        chars[:, 2 + ni:] = _DIGITS[digits[:, ni:]]
    nonzero = digits[:, :ni] != 0
    start = 1 + np.where(nonzero.any(axis=1), nonzero.argmax(axis=1), ni - 1)
    negative = ((sign == 0xD) | (sign == 0xB)) & (digits != 0).any(axis=1) & ~bad
    start = start - negative
    chars[np.flatnonzero(negative), start[negative]] = ord("-")
    text = _rows_text(chars, start)
    if bad.any():
        text = pc_if_else(bad, text)
    return text, bad


def pc_if_else(null_mask: np.ndarray, arr: pa.Array) -> pa.Array:
    """``arr`` with the rows of ``null_mask`` made null."""
    import pyarrow.compute as pc

    return pc.if_else(pa.array(null_mask), pa.nulls(len(arr), arr.type), arr)


def _days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil)."""
    y = y - (m <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    doy = (153 * (m + np.where(m > 2, -3, 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


_MONTH_DAYS = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)


def _valid_date(y, m, d) -> np.ndarray:
    mm = np.clip(m, 0, 12)
    leap = ((y % 4 == 0) & (y % 100 != 0)) | (y % 400 == 0)
    mdays = _MONTH_DAYS[mm] + ((mm == 2) & leap)
    return (y >= 1) & (y <= 9999) & (m >= 1) & (m <= 12) & (d >= 1) & (d <= mdays)


# each byte as its two decimal digits' value, 255 when a nibble is above 9
_BCD_BYTE = np.array([(b >> 4) * 10 + (b & 15) if (b >> 4) < 10 and (b & 15) < 10 else 255
                      for b in range(256)], dtype=np.uint8)


def _bcd_bytes(rows: np.ndarray, width: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Unsigned BCD rows of ``width`` bytes: each byte's two-digit value (int64 columns) and
    the mask of rows holding a nibble above 9 (one table lookup a byte)."""
    rows = np.asarray(rows, dtype=np.uint8)
    if rows.ndim != 2 or rows.shape[1] != width:
        raise ValueError(f"expected ({width})-byte rows, got shape {rows.shape}")
    b = _BCD_BYTE[rows]
    bad = (b == 255).any(axis=1)
    return [b[:, k].astype(np.int64) for k in range(width)], bad


def db2_dates(rows: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """Db2 packed DATE (4 bytes ``yyyymmdd``) -> date32, bad mask (non-decimal nibble or no
    calendar date; bad rows null)."""
    b, bad = _bcd_bytes(rows, 4)
    y, m, dd = b[0] * 100 + b[1], b[2], b[3]
    bad |= ~_valid_date(y, m, dd)
    days = np.where(bad, 0, _days_from_civil(y, np.where(bad, 1, m), dd)).astype(np.int32)
    return pa.array(days, pa.date32(), mask=bad), bad


def db2_times(rows: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """Db2 packed TIME (3 bytes ``hhmmss``) -> time64('us'), bad mask."""
    (h, mi, s), bad = _bcd_bytes(rows, 3)
    bad |= (h > 23) | (mi > 59) | (s > 59)
    us = np.where(bad, 0, ((h * 60 + mi) * 60 + s) * 1_000_000)
    return pa.array(us, pa.time64("us"), mask=bad), bad


def db2_timestamps(rows: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """Db2 packed TIMESTAMP (10 bytes ``yyyymmddhhmmssuuuuuu``) -> timestamp('us'), bad mask."""
    b, bad = _bcd_bytes(rows, 10)
    y, m, dd = b[0] * 100 + b[1], b[2], b[3]
    h, mi, s, us = b[4], b[5], b[6], (b[7] * 100 + b[8]) * 100 + b[9]
    bad |= ~_valid_date(y, m, dd) | (h > 23) | (mi > 59) | (s > 59)
    days = _days_from_civil(y, np.where(bad, 1, m), dd)
    total = ((days * 24 + h) * 60 + mi) * 60 + s
    total = np.where(bad, 0, total * 1_000_000 + us)
    return pa.array(total, pa.timestamp("us"), mask=bad), bad
# --------------------------------------------------------------------------- single-byte code pages
# (EBCDIC and other code pages of one byte per character: every row translated at once)


@lru_cache(maxsize=64)
def sbcs_utf8(encoding: str):
    """(utf8 uint8[256, 4], utf8_len int64[256], decodable bool[256]) of a single-byte code
    page (every byte one character), else None: the UTF-8 bytes of each byte's character."""
    try:
        info = _codecs.lookup(encoding)
    except LookupError:
        return None
    out = np.zeros((256, 4), dtype=np.uint8)
    lens = np.zeros(256, dtype=np.int64)
    ok = np.zeros(256, dtype=bool)
    for b in range(256):
        try:
            ch = info.decode(bytes([b]))[0]
        except (UnicodeDecodeError, ValueError):
            if _lead_byte(info, b):
                return None                     # a multi-byte encoding (utf-8, shift_jis ...)
            continue
        if len(ch) != 1:
            return None
        u = ch.encode("utf-8")
        out[b, :len(u)] = np.frombuffer(u, dtype=np.uint8)
        lens[b] = len(u)
        ok[b] = True
    return out, lens, ok


def _lead_byte(info, b: int) -> bool:
    """Does byte ``b`` start a character of two or more bytes in this encoding?"""
    for x in range(256):
        try:
            if len(info.decode(bytes([b, x]))[0]) == 1:
                return True
        except (UnicodeDecodeError, ValueError):
            continue
    return False


def text_sbcs(raw: np.ndarray, offsets: np.ndarray, encoding: str) -> tuple[pa.Array, np.ndarray]:
    """Strings of a single-byte code page (``sbcs_utf8`` not None), whole rows translated to
    UTF-8 at once, whatever their characters: (string array, bad mask). A row holding a byte
    the code page does not define is bad (``codecs.decode_text`` raises there) and null."""
    table = sbcs_utf8(encoding)
    if table is None:
        raise ValueError(f"{encoding} is not a single-byte code page")
    utf8, ulen, ok = table
    raw = np.asarray(raw, dtype=np.uint8)
    offsets = np.asarray(offsets, dtype=np.int64)
    n = len(offsets) - 1
    bad = np.zeros(n, dtype=bool)
    if not len(raw):
        body, new_offsets = raw, np.zeros(n + 1, dtype=np.int64)
    else:
        if not ok.all():
            bad_cum = np.concatenate(([0], np.cumsum(~ok[raw])))
            bad = (bad_cum[offsets[1:]] - bad_cum[offsets[:-1]]) > 0
        width = int(ulen.max())
        if width == 1 or (ulen == 1)[raw].all():
            # (every byte a one-byte character: the usual text of a Latin code page)
            body, new_offsets = utf8[raw, 0], offsets
        elif width == 2 and not bad.any():
            # (Latin-1 range code pages, the EBCDIC ones: each character's first byte in
            # place, the second bytes of the few two-byte ones inserted after them)
            two = np.flatnonzero((ulen == 2)[raw])
            body = np.insert(utf8[raw, 0], two + 1, utf8[raw[two], 1])
            new_offsets = offsets + np.searchsorted(two, offsets)
        else:
            # (a row with an undefined byte, or characters of three or four UTF-8 bytes:
            # each byte's UTF-8 bytes, those it has)
            per_byte = ulen[raw]
            wide = utf8[raw]
            keep = np.arange(4)[None, :] < per_byte[:, None]
            body = wide[keep]
            new_offsets = np.concatenate(([0], np.cumsum(per_byte)))[offsets]
    validity = None
    if bad.any():
        validity = pa.py_buffer(np.packbits(~bad, bitorder="little").tobytes())
    body = pa.py_buffer(np.ascontiguousarray(body))
    if new_offsets[-1] < 2**31:
        arr = pa.StringArray.from_buffers(n, pa.py_buffer(new_offsets.astype(np.int32)), body, validity)
    else:
        arr = pa.LargeStringArray.from_buffers(n, pa.py_buffer(new_offsets), body, validity)
    return arr, bad


def flat(buf, starts, lengths) -> tuple[np.ndarray, np.ndarray]:
    """The bytes of every ``buf[start:start + length]`` concatenated, and their offsets."""
    return _flat(as_uint8(buf), starts, lengths)


def ascii_rows(rows: np.ndarray, encoding: str) -> np.ndarray | None:
    """Fixed-width rows of text in ``encoding`` as ASCII bytes (non-ASCII characters become
    0x00), for parsing digits and separators; None when the encoding is neither
    ASCII-compatible nor a single-byte code page."""
    rows = np.asarray(rows, dtype=np.uint8)
    if _ascii_compatible(encoding):
        return np.where(rows < 0x80, rows, 0).astype(np.uint8)
    table = _single_byte_table(encoding)
    if table is None:
        return None
    to_ascii, is_ascii = table
    return np.where(is_ascii[rows], to_ascii[rows], 0).astype(np.uint8)


# --------------------------------------------------------------------------- integers, IBM float

def ints_be(rows: np.ndarray, signed: bool = True) -> np.ndarray:
    """Big-endian integers of an ``(n, w)`` uint8 array (w = 1, 2, 4, 8) as int64 (uint64
    for unsigned 8-byte values)."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    n, w = rows.shape
    if w not in (1, 2, 4, 8):
        raise ValueError(f"no {w}-byte integers")
    kind = ("i" if signed else "u") + str(w)
    vals = rows.view(">" + kind if w > 1 else kind).reshape(n)
    return vals.astype(np.uint64 if (w == 8 and not signed) else np.int64)


def ibm_floats(rows: np.ndarray) -> np.ndarray:
    """IBM System/360 hexadecimal floats (4 or 8 bytes, big-endian) as float64, the value
    ``codecs.decode_ibm_float`` gives (the fraction rounded once to 53 bits, then scaled
    exactly: every IBM exponent lies inside the double's normal range)."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    n, w = rows.shape
    if w == 4:
        bits = rows.view(">u4").reshape(n).astype(np.uint64)
        frac_bits, frac_mask = 24, np.uint64(0xFFFFFF)
        sign = (bits >> np.uint64(31)) & np.uint64(1)
        exp = (bits >> np.uint64(24)) & np.uint64(0x7F)
    elif w == 8:
        bits = rows.view(">u8").reshape(n)
        frac_bits, frac_mask = 56, np.uint64(0xFFFFFFFFFFFFFF)
        sign = bits >> np.uint64(63)
        exp = (bits >> np.uint64(56)) & np.uint64(0x7F)
    else:
        raise ValueError("IBM hex float must be 4 or 8 bytes")
    frac = (bits & frac_mask).astype(np.int64).astype(np.float64)
    mag = np.ldexp(frac, (4 * (exp.astype(np.int64) - 64) - frac_bits).astype(np.int32))
    return np.where(sign.astype(bool), -mag, mag)


# --------------------------------------------------------------------------- dates and times

def _digits(rows: np.ndarray, cols) -> tuple[np.ndarray, np.ndarray]:
    """The number written by ASCII digits at ``cols`` of each row, and the not-digits mask."""
    sub = rows[:, list(cols)].astype(np.int64) - ord("0")
    bad = ((sub < 0) | (sub > 9)).any(axis=1)
    val = np.zeros(len(rows), dtype=np.int64)
    for k in range(sub.shape[1]):
        val = val * 10 + np.clip(sub[:, k], 0, 9)
    return val, bad


def _is(rows: np.ndarray, col: int, chars: bytes) -> np.ndarray:
    got = rows[:, col]
    ok = np.zeros(len(rows), dtype=bool)
    for c in chars:
        ok |= got == c
    return ok


def char_dates(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``YYYY-MM-DD`` (ASCII rows of 10 bytes) -> datetime64[D], bad mask; the per-value
    twin is ``codecs.char_date``."""
    rows = np.asarray(rows, dtype=np.uint8)
    y, b1 = _digits(rows, range(0, 4))
    m, b2 = _digits(rows, (5, 6))
    d, b3 = _digits(rows, (8, 9))
    bad = b1 | b2 | b3 | ~_is(rows, 4, b"-") | ~_is(rows, 7, b"-") | ~_valid_date(y, m, d)
    days = np.where(bad, 0, _days_from_civil(y, np.where(bad, 1, m), d))
    return days.astype("datetime64[D]"), bad


def _hms(rows, at: int, seps: bytes):
    h, b1 = _digits(rows, (at, at + 1))
    mi, b2 = _digits(rows, (at + 3, at + 4))
    s, b3 = _digits(rows, (at + 6, at + 7))
    bad = b1 | b2 | b3 | ~_is(rows, at + 2, seps) | ~_is(rows, at + 5, seps)
    bad |= (h > 23) | (mi > 59) | (s > 59)
    return (h * 3600 + mi * 60 + s) * 1_000_000, bad


def char_times(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``HH.MM.SS`` or ``HH:MM:SS`` (ASCII rows of 8 bytes) -> microseconds of the day (int64),
    bad mask; the per-value twin is ``codecs.char_time``."""
    rows = np.asarray(rows, dtype=np.uint8)
    us, bad = _hms(rows, 0, b".:")
    return np.where(bad, 0, us), bad


def char_timestamps(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``YYYY-MM-DD-HH.MM.SS.NNNNNN`` (also ``T`` or blank between date and time, ``:`` in the
    time; ASCII rows of 26 bytes) -> datetime64[us], bad mask; the per-value twin is
    ``codecs.char_timestamp``."""
    rows = np.asarray(rows, dtype=np.uint8)
    days, bad = char_dates(rows[:, :10])
    us, b2 = _hms(rows, 11, b".:")
    frac, b3 = _digits(rows, range(20, 26))
    bad = bad | b2 | b3 | ~_is(rows, 10, b"-T ") | ~_is(rows, 19, b".")
    total = days.astype(np.int64) * 86_400_000_000 + us + frac
    return np.where(bad, 0, total).astype("datetime64[us]"), bad


def bcd_timestamps(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Timestamps written as decimal digits in nibbles, ``YYYYMMDDHHMMSS`` then 6 or more
    fraction digits (Log Master's BIN(17): 34 digits): datetime64[us] (fraction digits beyond
    microseconds truncated), the bad mask (a nibble above 9 anywhere, not a date and time) and
    the all-zero mask (no timestamp, not bad). The first 10 bytes are ``db2_timestamps``."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    if rows.ndim != 2 or rows.shape[1] < 10:
        raise ValueError(f"a BCD timestamp needs at least 10 bytes, got shape {rows.shape}")
    ts, bad = db2_timestamps(rows[:, :10])
    if rows.shape[1] > 10:
        bad = bad | (nibbles(rows[:, 10:]) > 9).any(axis=1)
    zero = ~rows.any(axis=1)
    bad &= ~zero
    out = ts.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    return np.where(bad | zero, 0, out).astype("datetime64[us]"), bad, zero
