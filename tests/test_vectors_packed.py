"""Vectorised packed decimal and Db2 packed DATE/TIME/TIMESTAMP (decoders/vectors.py) against
their per-value twins in decoders/codecs.py: same values, same text, and a row is bad exactly
when the per-value codec raises ``BadValue``."""

from __future__ import annotations

import datetime as _dt

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from decoders import codecs as C
from decoders import vectors as V
from decoders.errors import BadValue


def per_value(fn, raw: bytes):
    try:
        return fn(raw)
    except BadValue:
        return BadValue


def rows_of(raws: list[bytes], width: int) -> np.ndarray:
    return np.frombuffer(b"".join(raws), dtype=np.uint8).reshape(len(raws), width)


# values near the valid ones (mostly decimal nibbles, some not)
def bcd_bytes(width: int):
    digit = st.integers(0, 9)
    nib = st.one_of(digit, digit, digit, digit, digit, st.integers(0, 15))
    return st.lists(st.tuples(nib, nib), min_size=width, max_size=width).map(
        lambda ps: bytes(h << 4 | lo for h, lo in ps))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 16).flatmap(lambda w: st.tuples(
    st.just(w), st.integers(0, 2 * w + 1), st.lists(bcd_bytes(w), min_size=1, max_size=20))))
def test_packed_decimal_equals_decode_packed_and_decimal_text(case):
    width, scale, raws = case
    text, bad = V.packed_decimal(rows_of(raws, width), scale)
    for raw, got, b in zip(raws, text.to_pylist(), bad.tolist()):
        want = per_value(lambda r: C.decode_packed(r, scale), raw)
        if want is BadValue:
            assert b and got is None, raw.hex()
        else:
            assert not b and got == C.decimal_text(want, scale), (raw.hex(), scale, got)


def test_packed_decimal_examples():
    rows = rows_of([bytes.fromhex(h) for h in ("12345C", "12345D", "00000D", "00001B", "99999F",
                                               "1234AC", "12345", "123450")[:6]], 3)
    text, bad = V.packed_decimal(rows, 2)
    assert text.to_pylist() == ["123.45", "-123.45", "0.00", "-0.01", "999.99", None]
    assert bad.tolist() == [False] * 5 + [True]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(bcd_bytes(4), st.dates().map(C.encode_db2_date)), min_size=1, max_size=30))
def test_db2_dates(raws):
    arr, bad = V.db2_dates(rows_of(raws, 4))
    for raw, got, b in zip(raws, arr.to_pylist(), bad.tolist()):
        want = per_value(C.decode_db2_date, raw)
        assert (b, got) == ((True, None) if want is BadValue else (False, want)), raw.hex()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(bcd_bytes(3), st.times().map(C.encode_db2_time)), min_size=1, max_size=30))
def test_db2_times(raws):
    arr, bad = V.db2_times(rows_of(raws, 3))
    for raw, got, b in zip(raws, arr.to_pylist(), bad.tolist()):
        want = per_value(C.decode_db2_time, raw)
        assert (b, got) == ((True, None) if want is BadValue else (False, want)), raw.hex()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(bcd_bytes(10), st.datetimes().map(C.encode_db2_timestamp)),
                min_size=1, max_size=30))
def test_db2_timestamps(raws):
    arr, bad = V.db2_timestamps(rows_of(raws, 10))
    for raw, got, b in zip(raws, arr.to_pylist(), bad.tolist()):
        want = per_value(C.decode_db2_timestamp, raw)
        assert (b, got) == ((True, None) if want is BadValue else (False, want)), raw.hex()


def test_db2_dates_edges():
    raws = [bytes.fromhex(h) for h in ("19960403", "20000229", "19000229", "00010101",
                                        "99991231", "00000101", "20241301", "2024A101")]
    arr, bad = V.db2_dates(rows_of(raws, 4))
    assert arr.to_pylist() == [_dt.date(1996, 4, 3), _dt.date(2000, 2, 29), None,
                               _dt.date(1, 1, 1), _dt.date(9999, 12, 31), None, None, None]
    assert bad.tolist() == [False, False, True, False, False, True, True, True]
