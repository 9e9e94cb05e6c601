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
    if len(raw):
        bad_bytes = np.add.reduceat((~ok_byte).astype(np.int64), np.minimum(offsets[:-1], len(raw) - 1))
        bad_bytes = np.where(lengths > 0, bad_bytes, 0)
    else:
        bad_bytes = np.zeros(n, dtype=np.int64)
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
