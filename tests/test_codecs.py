"""Shared type codecs: decode/encode pairs, checked both ways, and the JSON rendering."""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
from decimal import Context, Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decoders import codecs as C
from decoders.catalog import Column
from decoders.errors import BadValue, NeedData

settings.register_profile("dblog", max_examples=200, deadline=None)
settings.load_profile("dblog")


@given(st.integers(1, 31).flatmap(lambda p: st.tuples(
    st.just(p), st.integers(0, p), st.integers(-(10**p - 1), 10**p - 1))))
def test_packed_decimal_round_trip(args):
    precision, scale, unscaled = args
    value = Decimal(unscaled).scaleb(-scale, Context(prec=80))
    raw = C.encode_packed(value, precision, scale)
    assert len(raw) == C.packed_len(precision)
    assert C.decode_packed(raw, scale) == value


def test_packed_decimal_known_bytes():
    assert C.encode_packed(Decimal("-12.30"), 5, 2) == bytes.fromhex("01230D")
    assert C.decode_packed(bytes.fromhex("01230D"), 2) == Decimal("-12.30")
    assert C.decode_packed(bytes.fromhex("12345F"), 0) == 12345  # F is positive too
    assert C.decode_packed(bytes.fromhex("00012B"), 1) == Decimal("-1.2")


def test_packed_decimal_bad_sign_says_where():
    with pytest.raises(BadValue) as e:
        C.decode_packed(bytes.fromhex("01234A"[:-1] + "7"), 0)
    assert e.value.offset == 2 and "sign" in str(e.value)


def test_packed_decimal_bad_digit():
    with pytest.raises(BadValue) as e:
        C.decode_packed(bytes.fromhex("0A2C"), 0)
    assert e.value.offset == 0


@given(st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)))
def test_db2_date_round_trip(d):
    assert C.decode_db2_date(C.encode_db2_date(d)) == d


def test_db2_packed_date_layout():
    assert C.encode_db2_date(dt.date(1996, 4, 3)) == bytes.fromhex("19960403")
    assert C.encode_db2_time(dt.time(13, 32)) == bytes.fromhex("133200")


@given(st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)))
def test_db2_timestamp_round_trip(ts):
    raw = C.encode_db2_timestamp(ts)
    assert len(raw) == 10
    assert C.decode_db2_timestamp(raw) == ts


def test_db2_date_invalid_is_bad_value():
    with pytest.raises(BadValue):
        C.decode_db2_date(bytes.fromhex("19961340"))


@given(st.datetimes(dt.datetime(1858, 11, 17), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)),
       st.integers(0, 9))
def test_vms_time_round_trip_truncates_ticks(ts, extra):
    ticks = C.encode_vms_time(ts, extra)
    assert C.decode_vms_time(ticks) == ts


def test_vms_time_edges():
    assert C.decode_vms_time(0) == dt.datetime(1858, 11, 17)
    assert C.decode_vms_time(C.VMS_UNIX_EPOCH_TICKS) == dt.datetime(1970, 1, 1)
    assert C.decode_vms_time(C.VMS_UNIX_EPOCH_TICKS + 15) == dt.datetime(1970, 1, 1, 0, 0, 0, 1)
    with pytest.raises(BadValue):
        C.decode_vms_time(-1)
    with pytest.raises(BadValue):
        C.decode_vms_time(2**63 - 1)


def test_ibm_float_known_values():
    assert C.encode_ibm_float(1.0) == bytes.fromhex("4110000000000000")
    assert C.decode_ibm_float(bytes.fromhex("4110000000000000")) == 1.0
    assert C.decode_ibm_float(bytes.fromhex("C276A000")) == -118.625
    assert C.encode_ibm_float(-118.625, 4) == bytes.fromhex("C276A000")
    assert C.decode_ibm_float(bytes(8)) == 0.0


@given(st.integers(-(2**52), 2**52), st.integers(-60, 60))
def test_ibm_float8_round_trip_exact_binary_values(mant, exp):
    value = math.ldexp(mant, exp)
    assert C.decode_ibm_float(C.encode_ibm_float(value, 8)) == value


@given(st.integers(-(2**20), 2**20), st.integers(-40, 40))
def test_ibm_float4_round_trip_exact_binary_values(mant, exp):
    value = math.ldexp(mant, exp)
    assert C.decode_ibm_float(C.encode_ibm_float(value, 4)) == value


@given(st.text(alphabet=st.characters(codec="cp037"), max_size=40))
def test_ebcdic_round_trip(text):
    assert C.ebcdic(C.to_ebcdic(text)) == text


def test_ebcdic_known():
    assert C.to_ebcdic("UB") == bytes.fromhex("E4C2")
    assert C.ebcdic(bytes.fromhex("C9 40".replace(" ", ""))) == "I "


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float4_text_reads_back_to_same_single(value):
    text = C.float4_text(value)
    assert np.float32(float(text)) == np.float32(value)
    json.loads(text)  # valid JSON number


def test_float4_text_is_shortest():
    assert C.float4_text(struct.unpack(">f", struct.pack(">f", 1.1))[0]) == "1.1"
    assert C.float4_text(0.5) == "0.5"
    assert C.float4_text(3e38) == "3e38"


def test_decimal_text_exact_scale():
    assert C.decimal_text(Decimal("-12.3"), 2) == "-12.30"
    assert C.decimal_text("5", 3) == "5.000"
    assert C.decimal_text("1E+2", 0) == "100"
    assert C.decimal_text("-0.00", 2) == "0.00"


def test_row_renderer_canonical_json():
    cols = [Column("I", "INTEGER"), Column("D", "DECIMAL", precision=5, scale=2),
            Column("R", "REAL"), Column("F", "DOUBLE"), Column("C", "CHAR", length=4),
            Column("B", "BINARY", length=2), Column("DT", "DATE"), Column("T", "TIME"),
            Column("TS", "TIMESTAMP"), Column("L", "BLOB"), Column("N", "VARCHAR", length=3)]
    r = C.RowRenderer(cols)
    text = r([7, Decimal("-12.3"), C.Float4(1.100000023841858), 2.5, "ab  ", b"\x0a\xff",
              dt.date(2026, 1, 2), dt.time(3, 4, 5), dt.datetime(2026, 1, 2, 3, 4, 5, 6),
              C.BlobRef(99), None])
    assert text == ('{"I": 7, "D": "-12.30", "R": 1.1, "F": 2.5, "C": "ab  ", "B": "0aff", '
                    '"DT": "2026-01-02", "T": "03:04:05", "TS": "2026-01-02T03:04:05.000006", '
                    '"L": {"blob_id": 99}, "N": null}')
    assert json.loads(text)["D"] == "-12.30"


def test_non_finite_floats_render_as_strings():
    r = C.RowRenderer([Column("F", "DOUBLE"), Column("R", "REAL")])
    assert json.loads(r([float("nan"), float("-inf")])) == {"F": "NaN", "R": "-Infinity"}


def test_take_checks_bounds_before_slicing():
    with pytest.raises(NeedData) as e:
        C.take(b"abc", 1, 10)
    assert e.value.offset == 1 and e.value.expected == 10 and e.value.actual == 2
    with pytest.raises(BadValue):
        C.take(b"abc", 0, -1)
    with pytest.raises(NeedData):
        C.read(C.u4be, b"\x00\x01", 0)
