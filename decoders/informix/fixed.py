"""Fixed-column reading of ``onlog`` record lines (issue 13): no token scan.

``onlog`` (and ``encoder.format_record``) print the six header columns at fixed widths, left
aligned and padded with blanks, one blank between them::

    addr     len  type     xid      id link     <columns of the type, one blank apart>
    0        9    14       23       32 35       44

A type name longer than 8 characters (``LG_PTRUNCATE``) pushes the columns after it to the
right by the excess, one blank still follows it. Every field is read as a 64-bit word at its
column (an unaligned ``uint64`` view of the text, one gather per field for all lines),
checked and converted with SWAR arithmetic on the words:

* a byte class (blank, decimal digit, hex digit, printable) becomes the top bit of each of
  the 8 bytes (exact per byte, no carry between bytes: every byte is first cut to 7 bits and
  a byte with its top bit set never passes);
* a field is its leading digits (at least one) followed by blanks only up to its width; the
  digit count is the position of the first non-digit (``bitwise_count`` of the bits below it);
* digits become their value in a few multiply / shift / mask steps (decimal: the 8-digit
  SWAR conversion; hex: nibbles packed pairwise), the digits first shifted to the top so the
  missing ones read as leading zeros.

The columns after the header are read one after the other at the position the previous one
ended, one word each (a token of at most 8 bytes, then exactly one blank or the line end),
checked by the kind the record type gives them (hex, decimal, date, time, USED/FREE, ASCII);
a last ASCII column of a ``REST_OF_LINE`` type takes the rest of the line (printable,
at most ``REST_MAX`` bytes, no trailing white space).

A line is read here only if all of it fits these rules (``fit``); any other line (tabs or
more blanks between columns, a field wider than its column, a token longer than 8 bytes,
columns beyond the documented ones, a damaged byte, a line too close to the end of the
buffer) is left to the token reader (``columns.TokenRecords``), which also decides what is
wrong with it. A line read here reads the same with the token reader (tests/
test_informix_fixed.py): every byte of it was checked against its column's class.
"""

from __future__ import annotations

import numpy as np

from . import layout as L

U64 = np.uint64
HIGH = U64(0x8080808080808080)
LOW7 = U64(0x7F7F7F7F7F7F7F7F)
ONES = U64(0x0101010101010101)
BLANKS = U64(0x2020202020202020)
ALL = U64(0xFFFFFFFFFFFFFFFF)

# header columns: (start, width) of each field, for a type name of at most 8 characters
ADDR, LEN, TYPE, XID, ID, LINK = (0, 8), (9, 4), (14, 8), (23, 8), (32, 2), (35, 8)
SEPS = (8, 13, 22, 31, 34)          # blanks between the fields (22 and later: + shift)
EXTRA_AT = 44                       # the first column after the header (+ shift)
MIN_LEN = LINK[0] + 1               # a line ends at the earliest after one digit of link
TYPE_MAX = 16                       # longer type names: token reader
REST_MAX = 64                       # a rest-of-line column longer than this: token reader
WIN = 112                           # bytes of every line copied for reading (one pass)
SLACK = 16                          # bytes a word may read past the line end (then masked):
                                    # longer lines than WIN - SLACK go to the token reader

_BYTE = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_HIGH_BELOW = _BYTE & HIGH          # top bits of the bytes below k


def words(buf: np.ndarray) -> np.ndarray:
    """The little-endian 64-bit word starting at every byte of ``buf`` (a view, no copy)."""
    n = max(len(buf) - 7, 0)
    return np.ndarray((n,), dtype="<u8", buffer=buf, offset=0, strides=(1,)) if n else \
        np.zeros(0, np.uint64)


def blank_flags(x: np.ndarray) -> np.ndarray:
    z = x ^ BLANKS
    return ~(((z & LOW7) + LOW7) | z) & HIGH


def dec_flags(x: np.ndarray) -> np.ndarray:
    y = x & LOW7
    return (y + U64(0x5050505050505050)) & ~(y + U64(0x4646464646464646)) & ~x & HIGH


def hex_flags(x: np.ndarray) -> np.ndarray:
    y = (x | BLANKS) & LOW7
    letter = (y + U64(0x1F1F1F1F1F1F1F1F)) & ~(y + U64(0x1919191919191919))
    return dec_flags(x) | (letter & ~x & HIGH)


def printable_flags(x: np.ndarray) -> np.ndarray:
    """0x21..0x7e (printable, not blank)."""
    y = x & LOW7
    return (y + U64(0x5F5F5F5F5F5F5F5F)) & ~(y + ONES) & ~x & HIGH


def first_unset(flags: np.ndarray, width: int = 8) -> np.ndarray:
    """Index of the first byte (< width) whose top bit is not set in ``flags`` (width if
    none): the length of a run from byte 0."""
    miss = ~flags & _HIGH_BELOW[width]
    low = miss & (~miss + U64(1))                  # lowest missing flag
    k = (np.bitwise_count(low - U64(1)).astype(np.int64) - 7) >> 3
    return np.where(miss == 0, width, k)


def blank_after(x: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Bytes from ``valid`` on (past the line end) replaced by blanks."""
    v = np.clip(valid, 0, 8)
    keep = _BYTE[v]
    return (x & keep) | (BLANKS & ~keep)


def dec_value(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The first k (1..8) bytes of x, decimal digits, as a number."""
    d = (x ^ U64(0x3030303030303030)) & _BYTE[k]
    d = d << (U64(8) * (U64(8) - k.astype(np.uint64)))
    d = d * U64(10) + (d >> U64(8))
    return (((d & U64(0x000000FF000000FF)) * U64(100 + (1000000 << 32)))
            + (((d >> U64(16)) & U64(0x000000FF000000FF)) * U64(1 + (10000 << 32)))) >> U64(32)


def hex_value(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The first k (1..8) bytes of x, hex digits, as a number."""
    d = ((x & U64(0x0F0F0F0F0F0F0F0F)) + U64(9) * ((x >> U64(6)) & ONES)) & _BYTE[k]
    d = (d << (U64(8) * (U64(8) - k.astype(np.uint64)))).byteswap()
    d = (d | (d >> U64(4))) & U64(0x00FF00FF00FF00FF)
    d = (d | (d >> U64(8))) & U64(0x0000FFFF0000FFFF)
    return (d | (d >> U64(16))) & U64(0xFFFFFFFF)


def field(x: np.ndarray, width: int, hexa: bool, value: bool = True):
    """A left-aligned number in the low ``width`` bytes of x: (ok, digits, value or None).
    ok: at least one digit, then blanks only up to ``width``."""
    digit = (hex_flags if hexa else dec_flags)(x)
    k = first_unset(digit, width)
    rest = _HIGH_BELOW[width] & ~_HIGH_BELOW[k]
    ok = (k >= 1) & ((blank_flags(x) & rest) == rest)
    if not value:
        return ok, k, None
    return ok, k, (hex_value if hexa else dec_value)(x, np.maximum(k, 1))


_TYPE_KEY = {}
for _t in L.RECORD_TYPES:
    if len(_t) <= 8:
        _TYPE_KEY[int.from_bytes(_t.encode().ljust(8), "little")] = _t
_TYPE_KEYS = np.array(sorted(_TYPE_KEY), dtype=np.uint64)


def type_names_of_keys() -> list[str]:
    return [_TYPE_KEY[int(k)] for k in _TYPE_KEYS]


_HASH_BITS = 10                     # 1,024 slots for the ~80 short type names


def _perfect_hash(keys: np.ndarray, bits: int = _HASH_BITS) -> tuple[np.uint64, np.ndarray] | None:
    """A multiplier under which ``(key * mul) >> (64 - bits)`` differs for every key (found
    by trying odd multipliers from a fixed sequence), and the table from hash to key index
    (-1: no key). None if none is found (then ``searchsorted``)."""
    rng = np.random.default_rng(13)
    shift = U64(64 - bits)
    for mul in (rng.integers(1, 1 << 62, 2000, dtype=np.uint64) * U64(2) + U64(1)).tolist():
        h = (keys * U64(mul)) >> shift
        if len(np.unique(h)) == len(keys):
            table = np.full(1 << bits, -1, np.int64)
            table[h.astype(np.int64)] = np.arange(len(keys))
            return U64(mul), table
    return None


_TYPE_HASH = _perfect_hash(_TYPE_KEYS) if len(_TYPE_KEYS) else None


def short_type_index(key: np.ndarray) -> np.ndarray:
    """Index into ``_TYPE_KEYS`` of every 8-byte blank-padded type word (-1: unknown): one
    multiply and shift (a perfect hash of the known names), then the name compared."""
    if not len(_TYPE_KEYS):
        return np.full(len(key), -1, np.int64)
    if _TYPE_HASH is not None:
        mul, table = _TYPE_HASH
        i = table[(key * mul) >> U64(64 - _HASH_BITS)]
        return np.where(_TYPE_KEYS[np.maximum(i, 0)] == key, i, -1)
    i = np.minimum(np.searchsorted(_TYPE_KEYS, key), len(_TYPE_KEYS) - 1)
    return np.where(_TYPE_KEYS[i] == key, i, -1)
