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


def _bcd(rows: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Unsigned BCD rows of ``width`` bytes as their ``(n, 2*width)`` digits and the mask of
    rows holding a nibble above 9 (``codecs.decode_bcd_digits``)."""
    rows = np.asarray(rows, dtype=np.uint8)
    if rows.ndim != 2 or rows.shape[1] != width:
        raise ValueError(f"expected ({width})-byte rows, got shape {rows.shape}")
    d = nibbles(rows).astype(np.int64)
    return d, (d > 9).any(axis=1)


def _number(d: np.ndarray, lo: int, hi: int) -> np.ndarray:
    out = np.zeros(d.shape[0], dtype=np.int64)
    for i in range(lo, hi):
        out = out * 10 + d[:, i]
    return out


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


def db2_dates(rows: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """Db2 packed DATE (4 bytes ``yyyymmdd``) -> date32, bad mask (non-decimal nibble or no
    calendar date; bad rows null)."""
    d, bad = _bcd(rows, 4)
    y, m, dd = _number(d, 0, 4), _number(d, 4, 6), _number(d, 6, 8)
    bad |= ~_valid_date(y, m, dd)
    days = np.where(bad, 0, _days_from_civil(y, np.where(bad, 1, m), dd)).astype(np.int32)
    return pa.array(days, pa.date32(), mask=bad), bad


def db2_times(rows: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """Db2 packed TIME (3 bytes ``hhmmss``) -> time64('us'), bad mask."""
    d, bad = _bcd(rows, 3)
    h, mi, s = _number(d, 0, 2), _number(d, 2, 4), _number(d, 4, 6)
    bad |= (h > 23) | (mi > 59) | (s > 59)
    us = np.where(bad, 0, ((h * 60 + mi) * 60 + s) * 1_000_000)
    return pa.array(us, pa.time64("us"), mask=bad), bad


def db2_timestamps(rows: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """Db2 packed TIMESTAMP (10 bytes ``yyyymmddhhmmssuuuuuu``) -> timestamp('us'), bad mask."""
    d, bad = _bcd(rows, 10)
    y, m, dd = _number(d, 0, 4), _number(d, 4, 6), _number(d, 6, 8)
    h, mi, s, us = _number(d, 8, 10), _number(d, 10, 12), _number(d, 12, 14), _number(d, 14, 20)
    bad |= ~_valid_date(y, m, dd) | (h > 23) | (mi > 59) | (s > 59)
    days = _days_from_civil(y, np.where(bad, 1, m), dd)
    total = ((days * 24 + h) * 60 + mi) * 60 + s
    total = np.where(bad, 0, total * 1_000_000 + us)
    return pa.array(total, pa.timestamp("us"), mask=bad), bad
