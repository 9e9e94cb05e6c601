"""Row images as JSON, a column at a time (the fast path of every columnar decoder).

``render_rows(columns, arrays)`` gives, for each row, exactly the text that
``codecs.RowRenderer(columns)(values)`` gives for the same values (the per-value reference;
``tests/test_render.py`` checks the two against each other with Hypothesis): the keys as
constants, each value rendered for its whole column with Arrow compute, the pieces joined
with one ``binary_join_element_wise``. Values that Arrow cannot render the canonical way
(a string with a control character, a float whose shortest text Arrow lays out differently)
go through the per-value reference renderer, for those rows only.

What each catalog type expects as its Arrow column (``column_type`` gives it):

==========================  =====================================================
SMALLINT INTEGER BIGINT     any integer type
TINYINT
DECIMAL                     decimal128(p, s) (rendered with exactly s decimals), or a
                            string column already holding that text
REAL, FLOAT(4)              float32 (or float64 holding float32 values)
DOUBLE, FLOAT(8)            float64
CHAR VARCHAR CLOB           string
BINARY VARBINARY            binary (rendered as lower-case hex)
DATE                        date32
TIME                        time64('us') or time32 (rendered HH:MM:SS)
TIMESTAMP                   timestamp('us') (rendered YYYY-MM-DDTHH:MM:SS.ffffff)
BLOB                        int64 (a BLOB id: {"blob_id": n}) or binary (hex)
==========================  =====================================================
"""

from __future__ import annotations

import json
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import codecs as C

NULL = pa.scalar("null", pa.string())
_QUOTE = pa.scalar('"', pa.string())
_EMPTY = pa.scalar("", pa.string())
_NONFINITE = {"nan": '"NaN"', "inf": '"Infinity"', "-inf": '"-Infinity"'}


def column_type(col) -> pa.DataType:
    """The Arrow type ``render_values`` expects for a catalog column."""
    t = col.type
    if t in ("SMALLINT", "INTEGER", "BIGINT", "TINYINT"):
        return pa.int64()
    if t == "DECIMAL":
        return pa.decimal128(col.precision or 31, col.scale or 0)
    if t == "REAL" or (t == "FLOAT" and col.length == 4):
        return pa.float32()
    if t in ("DOUBLE", "FLOAT"):
        return pa.float64()
    if t in ("CHAR", "VARCHAR", "CLOB"):
        return pa.string()
    if t in ("BINARY", "VARBINARY"):
        return pa.binary()
    if t == "DATE":
        return pa.date32()
    if t == "TIME":
        return pa.time64("us")
    if t == "TIMESTAMP":
        return pa.timestamp("us")
    if t == "BLOB":
        return pa.int64()
    raise ValueError(f"no Arrow type for column type {t}")


# ----------------------------------------------------------------- per type

def _ints(arr: pa.Array) -> pa.Array:
    return pc.cast(arr, pa.string())


def _quoted(text: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(_QUOTE, text, _QUOTE, _EMPTY)


def _strings(arr: pa.Array) -> pa.Array:
    """JSON strings as ``json.dumps(s, ensure_ascii=False)`` writes them."""
    arr = pc.cast(arr, pa.string()) if not pa.types.is_string(arr.type) else arr
    # which escapes can occur at all: one scan of the characters (of the whole buffer: a byte
    # outside the array's values only costs the general path)
    data = arr.buffers()[2]
    chars = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
    text = arr
    if (chars == 0x5C).any():
        text = pc.replace_substring(text, "\\", "\\\\")
    if (chars == 0x22).any():
        text = pc.replace_substring(text, '"', '\\"')
    out = _quoted(text)
    if not (chars < 0x20).any():
        return out
    special = pc.match_substring_regex(arr, "[\\x00-\\x1f]")
    if pc.any(special).as_py():
        rows = np.flatnonzero(special.fill_null(False).to_numpy(zero_copy_only=False))
        enc = json.encoder.encode_basestring
        fixed = [enc(s) for s in arr.take(pa.array(rows)).to_pylist()]
        out = _patch(out, rows, fixed)
    return out


def _hex(arr: pa.Array) -> pa.Array:
    """Binary values as quoted lower-case hex (no per-value Python)."""
    arr = arr.cast(pa.binary()) if not pa.types.is_binary(arr.type) else arr
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=n + 1, offset=arr.offset * 4)
    data = arr.buffers()[2]
    raw = (np.frombuffer(data, dtype=np.uint8)[offsets[0]:offsets[-1]] if data is not None
           else np.empty(0, np.uint8))
    digits = _HEX_LOWER[raw].reshape(-1)                # two characters per byte
    new_offsets = ((offsets - offsets[0]) * 2).astype(np.int32)
    text = pa.StringArray.from_buffers(n, pa.py_buffer(new_offsets), pa.py_buffer(digits.tobytes()),
                                       arr.buffers()[0], arr.null_count, 0)
    return _quoted(text)


_HEX_LOWER = np.frombuffer(b"".join(b"%02x" % i for i in range(256)), dtype=np.uint8).reshape(256, 2)


def _decimals(arr: pa.Array, scale: int) -> pa.Array:
    if pa.types.is_string(arr.type):
        return _quoted(arr)
    if not pa.types.is_decimal(arr.type) or arr.type.scale != scale:
        raise TypeError(f"DECIMAL column with scale {scale} needs decimal128(p, {scale}), "
                        f"got {arr.type}")
    return _quoted(pc.cast(arr, pa.string()))


def _date(arr: pa.Array) -> pa.Array:
    return _quoted(pc.cast(arr, pa.string()))


def _time(arr: pa.Array) -> pa.Array:
    text = pc.cast(pc.cast(arr, pa.time64("us")), pa.string())
    return _quoted(pc.utf8_slice_codeunits(text, 0, 8))


def _timestamp(arr: pa.Array) -> pa.Array:
    ts = arr if arr.type == pa.timestamp("us") else pc.cast(arr, pa.timestamp("us"))
    # Arrow's cast to text gives ``YYYY-MM-DD HH:MM:SS.ffffff`` (26 characters for years
    # 1-9999, the same digits as strftime's, at a tenth of its cost): the blank becomes "T".
    # Any other width (a year beyond 9999) keeps strftime for the whole column.
    text = pc.cast(ts, pa.string())
    widths = pc.min_max(pc.utf8_length(text)).as_py()
    if widths["min"] not in (None, 26) or widths["max"] not in (None, 26):
        return _quoted(pc.strftime(ts, format="%Y-%m-%dT%H:%M:%S"))
    return _quoted(pc.utf8_replace_slice(text, 10, 11, "T"))


def _blob(arr: pa.Array) -> pa.Array:
    if pa.types.is_integer(arr.type):
        return pc.binary_join_element_wise(pa.scalar('{"blob_id": '), pc.cast(arr, pa.string()),
                                           pa.scalar("}"), _EMPTY)
    if pa.types.is_binary(arr.type):
        return _hex(arr)
    return _strings(arr)


def _floats(arr: pa.Array, single: bool) -> pa.Array:
    """Shortest round-trip text laid out as Python's ``repr`` (double) or as
    ``codecs.float4_text`` (single), non-finite values as JSON strings. Arrow's cast finds the
    shortest digits; its layout differs from Python's in the exponent's form and in where it
    switches between positional and scientific notation: the first is fixed with regular
    expressions, rows of the second kind are rendered per value."""
    typ = pa.float32() if single else pa.float64()
    vals = arr if arr.type == typ else pc.cast(arr, typ, safe=False)
    text = pc.cast(vals, pa.string())
    v = vals.to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore"):
        mag = np.abs(v.astype(np.float64))
    finite = np.isfinite(mag)
    nonzero = mag != 0
    # the exponent's layout is fixed only where there is one (most columns have none)
    has_e = pc.match_substring(text, "e").fill_null(False).to_numpy(zero_copy_only=False)
    any_e = bool(has_e.any())
    if single:
        want_sci = finite & nonzero & ((mag < 1e-5) | (mag >= 1e16))
        if any_e:
            # exponent: at least two digits, no '+' (numpy's layout)
            text = pc.replace_substring_regex(text, r"e\+", "e")
            text = pc.replace_substring_regex(text, r"e(-?)([0-9])$", "e\\10\\2")
        bits = np.ascontiguousarray(v, dtype=np.float32).view(np.uint32)
        odd = (bits & 0x7FFFFF) == 0                 # powers of two and zero: numpy decides
    else:
        want_sci = finite & nonzero & ((mag < 1e-4) | (mag >= 1e16))
        if any_e:
            text = pc.replace_substring_regex(text, r"e([0-9])", "e+\\1")
            text = pc.replace_substring_regex(text, r"e([+-])([0-9])$", "e\\10\\2")
        # an integral value keeps Python's ".0" (a finite value's text without "." or "e")
        has_dot = pc.match_substring(text, ".").fill_null(True).to_numpy(zero_copy_only=False)
        plain = finite & ~has_dot & ~has_e
        if plain.any():
            text = pc.if_else(pa.array(plain),
                              pc.binary_join_element_wise(text, pa.scalar(".0"), _EMPTY), text)
        odd = np.zeros(len(v), dtype=bool)
    valid = ~np.asarray(vals.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    redo = valid & (~finite | (has_e != want_sci) | odd)
    if single and redo.any():
        # Arrow's shortest digits laid out the other way (no Python per value): scientific
        # from 1e10 where numpy is positional below 1e16, positional from 1e-6 where numpy
        # is scientific below 1e-5; powers of two, zero and non-finite values stay below
        text, redo = _single_layout(text, redo & finite & ~odd & has_e & ~want_sci,
                                    redo & finite & ~odd & ~has_e & want_sci, redo)
    if redo.any():
        rows = np.flatnonzero(redo)
        ref = C._r_float4 if single else C._r_float
        fixed = [ref(x) for x in vals.take(pa.array(rows)).to_pylist()]
        text = _patch(text, rows, fixed)
    return text


_SCI = r"^(?P<sign>-?)(?P<lead>[0-9])(?:\.(?P<frac>[0-9]+))?e(?P<exp>[0-9]{2})$"
_SMALL = r"^(?P<sign>-?)0\.(?P<zeros>0+)(?P<digits>[1-9][0-9]*)$"


def _single_layout(text: pa.Array, to_positional: np.ndarray, to_scientific: np.ndarray,
                   redo: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """``text`` (Arrow's shortest digits of singles, exponents laid out as numpy's) with the
    rows of ``to_positional`` (``d.ddde15``: digits, then zeros up to the exponent) and of
    ``to_scientific`` (``0.00000ddd``: ``d.dde-06``) laid out as ``codecs.float4_text`` does;
    returns it and ``redo`` without the rows done (a text of neither form stays to redo)."""
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    done_rows, done_text = [], []

    def matched(mask: np.ndarray, pattern: str):
        """The rows of ``mask`` whose text matches ``pattern``, and its groups there (one
        regular-expression pass: a row that does not match is a null struct)."""
        rows = np.flatnonzero(mask)
        m = pc.extract_regex(text.take(pa.array(rows)), pattern)
        ok = m.is_valid()
        return rows[ok.to_numpy(zero_copy_only=False)], m.filter(ok)

    rows, m = matched(to_positional, _SCI)
    if len(rows):
        frac = pc.fill_null(m.field("frac"), "")
        # only where the digits end before the point (exponent >= digits after the point)
        pad = pc.subtract(pc.cast(m.field("exp"), pa.int64()),
                          pc.utf8_length(frac).cast(pa.int64())).to_numpy(zero_copy_only=False)
        ok = pad >= 0
        if ok.any():
            zeros = pc.binary_repeat(pa.scalar("0"), pa.array(np.maximum(pad, 0)))
            laid = pc.binary_join_element_wise(m.field("sign"), m.field("lead"), frac, zeros, _EMPTY)
            done_rows.append(rows[ok])
            done_text.append(laid.filter(pa.array(ok)))
    rows, m = matched(to_scientific, _SMALL)
    if len(rows):
        digits = m.field("digits")
        rest = pc.utf8_slice_codeunits(digits, 1)
        dot_rest = pc.if_else(pc.greater(pc.utf8_length(rest), 0),
                              pc.binary_join_element_wise(pa.scalar("."), rest, _EMPTY), _EMPTY)
        exp = pc.utf8_lpad(pc.cast(pc.add(pc.utf8_length(m.field("zeros")), 1), pa.string()),
                           width=2, padding="0")
        laid = pc.binary_join_element_wise(m.field("sign"), pc.utf8_slice_codeunits(digits, 0, 1),
                                           dot_rest, pa.scalar("e-"), exp, _EMPTY)
        done_rows.append(rows)
        done_text.append(laid)
    if not done_rows:
        return text, redo
    order = np.concatenate(done_rows)
    values = pa.concat_arrays([a.cast(pa.string()) for a in done_text]).take(pa.array(np.argsort(order, kind="stable")))
    mask = np.zeros(len(text), dtype=bool)
    mask[order] = True
    redo = redo & ~mask
    return pc.replace_with_mask(text, pa.array(mask), values), redo


def _patch(text: pa.Array, rows: np.ndarray, values: list[str]) -> pa.Array:
    """``text`` with the rows at ``rows`` replaced by ``values``."""
    mask = np.zeros(len(text), dtype=bool)
    mask[rows] = True
    full = [None] * len(text)
    for r, val in zip(rows.tolist(), values):
        full[r] = val
    return pc.if_else(pa.array(mask), pa.array(full, pa.string()), text)


def render_values(col, arr: pa.Array) -> pa.Array:
    """The JSON text of every value of one column (``null`` for nulls)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = col.type
    if t in ("SMALLINT", "INTEGER", "BIGINT", "TINYINT"):
        text = _ints(arr)
    elif t == "DECIMAL":
        text = _decimals(arr, col.scale or 0)
    elif t == "REAL" or (t == "FLOAT" and col.length == 4):
        text = _floats(arr, single=True)
    elif t in ("DOUBLE", "FLOAT"):
        text = _floats(arr, single=False)
    elif t in ("CHAR", "VARCHAR", "CLOB"):
        text = _strings(arr)
    elif t in ("BINARY", "VARBINARY"):
        text = _hex(arr)
    elif t == "DATE":
        text = _date(arr)
    elif t == "TIME":
        text = _time(arr)
    elif t == "TIMESTAMP":
        text = _timestamp(arr)
    elif t == "BLOB":
        text = _blob(arr)
    else:
        raise ValueError(f"no renderer for column type {t}")
    return pc.fill_null(text, NULL) if text.null_count else text


def render_rows(columns: Sequence, arrays: Sequence[pa.Array], n: int | None = None) -> pa.Array:
    """One JSON object per row: ``{"A": 1, "B": "x"}`` (keys in catalog order)."""
    if len(columns) != len(arrays):
        raise ValueError(f"{len(arrays)} arrays for {len(columns)} columns")
    return join_rows(columns, [render_values(col, arr) for col, arr in zip(columns, arrays)], n)


def join_rows(columns: Sequence, texts: Sequence[pa.Array], n: int | None = None) -> pa.Array:
    """One JSON object per row from the JSON text of each column's values (what
    ``render_values`` gives, ``null`` for nulls): for decoders that render a column in parts
    (e.g. a 4-byte float column whose values are singles in some rows, doubles in others)."""
    if len(columns) != len(texts):
        raise ValueError(f"{len(texts)} texts for {len(columns)} columns")
    if not columns:
        return pa.repeat(pa.scalar("{}"), n or 0)
    pieces = []
    for i, (col, text) in enumerate(zip(columns, texts)):
        pieces.append(pa.scalar(("{" if i == 0 else ", ") + json.dumps(col.name) + ": "))
        pieces.append(text)
    pieces.append(pa.scalar("}"))
    return pc.binary_join_element_wise(*pieces, _EMPTY)

