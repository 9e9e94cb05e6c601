"""Column-at-a-time JSON rendering (decoders/render.py) against the per-value reference
(codecs.RowRenderer): same text for every value, including the edge cases of each type."""

from __future__ import annotations

import datetime as _dt
import json
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decoders.catalog import Column
from decoders.codecs import BlobRef, Float4, RowRenderer
from decoders.render import column_type, render_rows, render_values


def _arrow(col: Column, values: list) -> pa.Array:
    typ = column_type(col)
    if col.type == "BLOB":
        return pa.array([None if v is None else int(v) for v in values], typ)
    return pa.array(values, typ)


def _check(cols: list[Column], rows: list[list]) -> None:
    ref = RowRenderer(cols)
    arrays = [_arrow(c, [r[i] for r in rows]) for i, c in enumerate(cols)]
    got = render_rows(cols, arrays, n=len(rows)).to_pylist()
    want = [ref(r) for r in rows]
    for g, w, r in zip(got, want, rows):
        assert g == w, f"row {r!r}: column rendering {g!r} != reference {w!r}"


def test_every_type_edge_values():
    cols = [Column("I", "INTEGER"), Column("T", "TINYINT"), Column("BI", "BIGINT"),
            Column("D", "DECIMAL", precision=31, scale=2), Column("R", "REAL"),
            Column("F", "DOUBLE"), Column("F4", "FLOAT", length=4), Column("S", "VARCHAR", length=10),
            Column("C", "CHAR", length=3), Column("B", "BINARY", length=3), Column("DT", "DATE"),
            Column("TM", "TIME"), Column("TS", "TIMESTAMP"), Column("BL", "BLOB"),
            Column("CL", "CLOB"), Column("K\"ey", "INTEGER")]
    rows = [
        [1, 0, -2**63, Decimal("-1.50"), Float4(1.1), 1e-5, Float4(0.5), 'a"b\\c\n\x01',
         "   ", b"\x00\xff\x10", _dt.date(2024, 1, 2), _dt.time(3, 4, 5),
         _dt.datetime(2024, 1, 2, 3, 4, 5, 6), BlobRef(7), "é\u2028", 3],
        [None] * 16,
        [-5, -128, 2**63 - 1, Decimal("9" * 29 + ".99"), Float4(16777216.0), 100.0,
         Float4(float("nan")), "", "abc", b"", _dt.date(1, 1, 1), _dt.time(0, 0, 0),
         _dt.datetime(999, 1, 1), BlobRef(2**40), "", -1],
        [7, 127, 0, Decimal("0.00"), Float4(1e-5), float("inf"), Float4(float("-inf")), "\x1f",
         "x\ty", b"ab", _dt.date(9999, 12, 31), _dt.time(23, 59, 59),
         _dt.datetime(9999, 12, 31, 23, 59, 59, 999999), None, "\\", 0],
        [0, 1, 1, Decimal("-0.01"), Float4(3.4028234663852886e38), 1e16, Float4(1e16), "ü\"",
         "\x7f", b"\x7f", _dt.date(1970, 1, 1), _dt.time(12, 0, 0),
         _dt.datetime(1970, 1, 1), BlobRef(1), None, 2],
        [2, 2, 2, Decimal("1.00"), Float4(1.401298464324817e-45), 1e15, Float4(1e15), "x",
         "a\"b", b"\x01", _dt.date(2000, 2, 29), _dt.time(1, 2, 3),
         _dt.datetime(2000, 2, 29, 0, 0, 0, 1), BlobRef(3), "y", 4],
        [3, 3, 3, Decimal("0.10"), Float4(-0.0), -0.0, Float4(0.0), "y", "b\nc", b"\x02",
         _dt.date(2000, 3, 1), _dt.time(1, 2, 4), _dt.datetime(2000, 3, 1), BlobRef(4), "z", 5],
        [4, 4, 4, Decimal("123.45"), Float4(9.999999747378752e-06), 1.2345678901234567e-05,
         Float4(1.0000000116860974e-07), "z", "c", b"\x03", _dt.date(2000, 3, 2),
         _dt.time(1, 2, 5), _dt.datetime(2000, 3, 2), BlobRef(5), "w", 6],
    ]
    _check(cols, rows)


def test_no_columns():
    assert render_rows([], [], n=2).to_pylist() == ["{}", "{}"]


def test_floats_against_reference_on_random_bit_patterns():
    """Random doubles and singles over the whole range (every exponent), many at once."""
    rng = np.random.default_rng(7)
    d = rng.integers(0, 2**64, size=40000, dtype=np.uint64).view(np.float64)
    s = rng.integers(0, 2**32, size=40000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    ref_d = RowRenderer([Column("F", "DOUBLE")])
    ref_s = RowRenderer([Column("R", "REAL")])
    got_d = render_values(Column("F", "DOUBLE"), pa.array(d)).to_pylist()
    got_s = render_values(Column("R", "REAL"), pa.array(s)).to_pylist()
    bad_d = [(float(v), g) for v, g in zip(d, got_d) if ref_d([float(v)]) != '{"F": ' + g + "}"]
    bad_s = [(float(v), g) for v, g in zip(s, got_s) if ref_s([Float4(float(v))]) != '{"R": ' + g + "}"]
    assert not bad_d[:5] and not bad_s[:5]


def test_singles_laid_out_the_other_way_than_arrow_are_relaid_without_python_per_value(monkeypatch):
    """Arrow writes singles from 1e10 in scientific form and from 1e-6 positionally; numpy's
    layout (``codecs.float4_text``) switches at 1e16 and 1e-5. Those values are laid out
    again from Arrow's digits with Arrow compute: the same text as the reference, and the
    per-value path only for powers of two, zero and non-finite values."""
    from decoders import codecs as C

    rng = np.random.default_rng(11)
    big = 10.0 ** rng.uniform(10, 16, 20000)
    small = 10.0 ** rng.uniform(-6, -5, 20000)
    edges = [1e10, 9.999999e15, 1e16, 1e-6, 9.99999e-6, 1e-5, 2.0 ** 40, 2.0 ** -18, 0.0, -0.0,
             float("inf"), float("nan"), 123456789.0, 3.4028235e38, 1.4e-45]
    vals = np.concatenate([big, -big[:5000], small, -small[:5000], edges]).astype(np.float32)
    nulls = rng.random(len(vals)) < 0.05
    calls = []
    real = C._r_float4
    monkeypatch.setattr(C, "_r_float4", lambda v: calls.append(v) or real(v))
    got = render_values(Column("R", "REAL"), pa.array(vals, mask=nulls)).to_pylist()
    want = ["null" if m else real(float(v)) for v, m in zip(vals, nulls)]
    assert [(float(v), g, w) for v, g, w in zip(vals, got, want) if g != w][:5] == []
    bits = vals.view(np.uint32)
    per_value = (~nulls & (((bits & 0x7FFFFF) == 0) | ~np.isfinite(vals))).sum()
    assert len(calls) == per_value


def test_a_control_character_or_quote_anywhere():
    col = Column("S", "VARCHAR", length=100)
    texts = ["plain", 'q"uote', "back\\slash", "nl\n", "\x00", "tab\t", "\u0085", "\ud7ff", "😀"]
    got = render_values(col, pa.array(texts)).to_pylist()
    assert got == [json.dumps(t, ensure_ascii=False) for t in texts]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_rows_match_reference(data):
    cols = [Column("I", "INTEGER"), Column("D", "DECIMAL", precision=12, scale=3),
            Column("R", "REAL"), Column("F", "DOUBLE"), Column("S", "VARCHAR", length=30),
            Column("B", "VARBINARY", length=8), Column("DT", "DATE"), Column("TS", "TIMESTAMP")]
    n = data.draw(st.integers(1, 12))
    rows = []
    for _ in range(n):
        rows.append([
            data.draw(st.none() | st.integers(-2**31, 2**31 - 1)),
            data.draw(st.none() | st.decimals(min_value=-10**9 + 1, max_value=10**9 - 1, places=3,
                                              allow_nan=False, allow_infinity=False)),
            data.draw(st.none() | st.floats(width=32).map(Float4)),
            data.draw(st.none() | st.floats()),
            data.draw(st.none() | st.text(max_size=30)),
            data.draw(st.none() | st.binary(max_size=8)),
            data.draw(st.none() | st.dates()),
            data.draw(st.none() | st.datetimes()),
        ])
    _check(cols, rows)


def test_decimal_column_needs_its_scale():
    with pytest.raises(TypeError, match="scale 2"):
        render_values(Column("D", "DECIMAL", precision=9, scale=2),
                      pa.array([Decimal("1.5")], pa.decimal128(9, 1)))
