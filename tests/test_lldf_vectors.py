"""The vectorised codecs the lldf decoder added to decoders/vectors.py, each against its
per-value twin in decoders/codecs.py (or the decoder's careful path): the same values, the
same text, and a row is bad exactly when the per-value codec raises; plus
``render.join_rows`` and ``framing.hex_bytes``."""

from __future__ import annotations

import datetime as _dt
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decoders import codecs as C
from decoders import vectors as V
from decoders.catalog import Column
from decoders.errors import BadValue, DecodeError
from decoders.framing import hex_bytes
from decoders.lldf.decoder import decode_ts17
from decoders.render import join_rows, render_rows, render_values


def rows_of(raws: list[bytes], width: int) -> np.ndarray:
    return np.frombuffer(b"".join(raws), dtype=np.uint8).reshape(len(raws), width)


def per_value(fn, raw):
    try:
        return fn(raw)
    except (BadValue, DecodeError):
        return BadValue


# ---------------------------------------------------------------- text in single-byte code pages

SBCS = ["cp037", "cp500", "cp273", "cp1140", "cp1026", "latin-1", "ascii", "cp1252", "koi8_r", "mac_roman",
        "cp437"]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SBCS), st.lists(st.binary(max_size=12), max_size=25))
def test_text_sbcs_equals_decode_text(encoding, raws):
    flat = b"".join(raws)
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in raws]))).astype(np.int64)
    arr, bad = V.text_sbcs(np.frombuffer(flat, dtype=np.uint8), offsets, encoding)
    assert len(arr) == len(raws)
    for raw, got, b in zip(raws, arr.to_pylist(), bad.tolist()):
        want = per_value(lambda r: C.decode_text(r, encoding), raw)
        if want is BadValue:
            assert b and got is None, (encoding, raw)
        else:
            assert not b and got == want, (encoding, raw)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(SBCS), st.lists(st.text(alphabet="ABCXYZ abc019.,-_/", max_size=12),
                                       max_size=25))
def test_text_sbcs_of_plain_text_equals_decode_text(encoding, texts):
    """Text of one-byte characters only (the usual row: no byte of two UTF-8 bytes, the
    gather without a mask) decodes as the per-value codec does."""
    raws = [t.encode(encoding) for t in texts]
    offsets = np.concatenate(([0], np.cumsum([len(r) for r in raws]))).astype(np.int64)
    arr, bad = V.text_sbcs(np.frombuffer(b"".join(raws), dtype=np.uint8), offsets, encoding)
    assert arr.to_pylist() == [C.decode_text(r, encoding) for r in raws] == texts
    assert not bad.any()


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["cp037", "cp500", "cp273", "cp1140", "latin-1", "cp1252"]),
       st.text(alphabet="AbZ09 .äöüÄÖÜß¬|éÑ", max_size=60), st.data())
def test_text_sbcs_of_rows_cut_anywhere_in_a_buffer(encoding, text, data):
    """Rows that are slices of a larger buffer (offsets not from 0, bytes after the last),
    one- and two-byte characters mixed: each row decodes as its bytes do."""
    raw = text.encode(encoding, errors="replace")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), min_size=1, max_size=6)))
    arr, bad = V.text_sbcs(np.frombuffer(raw, np.uint8), np.array(cuts, np.int64), encoding)
    assert arr.to_pylist() == [raw[a:b].decode(encoding) for a, b in zip(cuts, cuts[1:])]
    assert not bad.any()


def test_text_sbcs_known_values():
    raw = "Müller ¬|^ [x]".encode("cp037") + "ÄÖÜ".encode("cp273") + "™".encode("mac_roman")
    arr, bad = V.text_sbcs(np.frombuffer(raw, np.uint8), np.array([0, 14, 17], np.int64), "cp037")
    assert arr.to_pylist() == ["Müller ¬|^ [x]", "ÄÖÜ".encode("cp273").decode("cp037")]
    arr, _ = V.text_sbcs(np.frombuffer(raw[17:], np.uint8), np.array([0, 1], np.int64), "mac_roman")
    assert arr.to_pylist() == ["™"]
    for multi in ("utf-8", "shift_jis", "utf-16", "no-such-codec"):
        assert V.sbcs_utf8(multi) is None, multi
    with pytest.raises(ValueError):
        V.text_sbcs(np.zeros(0, np.uint8), np.zeros(1, np.int64), "utf-8")


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(SBCS + ["utf-8", "ascii"]), st.lists(st.binary(min_size=8, max_size=8), min_size=1,
                                                              max_size=10))
def test_ascii_rows_keep_exactly_the_ascii_characters(encoding, raws):
    got = V.ascii_rows(rows_of(raws, 8), encoding)
    for raw, row in zip(raws, got):
        for b, a in zip(raw, row.tolist()):
            try:
                ch = bytes([b]).decode(encoding)
            except UnicodeDecodeError:
                ch = ""
            assert a == (ord(ch) if len(ch) == 1 and ord(ch) < 128 else 0)


# ---------------------------------------------------------------- integers and IBM floats

@settings(max_examples=100, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.booleans(), st.lists(st.binary(min_size=8, max_size=8),
                                                              min_size=1, max_size=20))
def test_ints_be_equal_struct(width, signed, raws):
    raws = [r[:width] for r in raws]
    got = V.ints_be(rows_of(raws, width), signed)
    code = {1: "b", 2: "h", 4: "i", 8: "q"}[width]
    code = code if signed else code.upper()
    assert got.tolist() == [struct.unpack(">" + code, r)[0] for r in raws]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([4, 8]), st.lists(st.binary(min_size=8, max_size=8), min_size=1, max_size=30))
def test_ibm_floats_equal_decode_ibm_float(width, raws):
    raws = [r[:width] for r in raws]
    got = V.ibm_floats(rows_of(raws, width))
    for raw, v in zip(raws, got.tolist()):
        want = C.decode_ibm_float(raw)
        assert v == want and np.signbit(v) == np.signbit(want), raw.hex()


def test_ibm_floats_known_values():
    raws = [bytes.fromhex(h) for h in ("4110000000000000", "C276A00000000000", "0000000000000000",
                                       "8000000000000000", "7FFFFFFFFFFFFFFF", "0010000000000000")]
    got = V.ibm_floats(rows_of(raws, 8)).tolist()
    assert got[:3] == [1.0, -118.625, 0.0] and np.signbit(got[3])
    assert got[4] == C.decode_ibm_float(raws[4]) > 7.2e75
    assert got[5] == 16.0 ** -65 * 1 / 16 * 16   # smallest normalised: 16**-65


# ---------------------------------------------------------------- character dates and times

def _near(template: str, alphabet: str):
    """Strings shaped like ``template`` with some characters replaced."""
    return st.lists(st.sampled_from(alphabet), min_size=len(template), max_size=len(template)).flatmap(
        lambda noise: st.lists(st.booleans(), min_size=len(template), max_size=len(template)).map(
            lambda flips: "".join(n if f else t for t, n, f in zip(template, noise, flips))))


DIGITS = "0123456789"


def _iso(values, fmt):
    return st.one_of(values.map(fmt), values.map(fmt).flatmap(lambda s: _near(s, DIGITS + "-.:T 9/x")))


@settings(max_examples=200, deadline=None)
@given(st.lists(_iso(st.dates(), lambda d: f"{d.year:04d}-{d.month:02d}-{d.day:02d}"), min_size=1,
                max_size=20))
def test_char_dates_equal_codecs_char_date(texts):
    vals, bad = V.char_dates(rows_of([t.encode("ascii") for t in texts], 10))
    for t, v, b in zip(texts, vals.tolist(), bad.tolist()):
        want = per_value(C.char_date, t.encode("ascii"))
        assert b == (want is BadValue), t
        if not b:
            assert v == want


@settings(max_examples=200, deadline=None)
@given(st.lists(_iso(st.times(), lambda t: t.strftime("%H.%M.%S")), min_size=1, max_size=20))
def test_char_times_equal_codecs_char_time(texts):
    vals, bad = V.char_times(rows_of([t.encode("ascii") for t in texts], 8))
    for t, v, b in zip(texts, vals.tolist(), bad.tolist()):
        want = per_value(C.char_time, t.encode("ascii"))
        assert b == (want is BadValue), t
        if not b:
            assert v == ((want.hour * 60 + want.minute) * 60 + want.second) * 1_000_000


@settings(max_examples=200, deadline=None)
@given(st.lists(_iso(st.datetimes(), lambda v: f"{v.year:04d}-{v.month:02d}-{v.day:02d}-{v.hour:02d}."
                                            f"{v.minute:02d}.{v.second:02d}.{v.microsecond:06d}"),
                min_size=1, max_size=20))
def test_char_timestamps_equal_codecs_char_timestamp(texts):
    vals, bad = V.char_timestamps(rows_of([t.encode("ascii") for t in texts], 26))
    for t, v, b in zip(texts, vals.tolist(), bad.tolist()):
        want = per_value(C.char_timestamp, t.encode("ascii"))
        assert b == (want is BadValue), t
        if not b:
            assert v == want


# ---------------------------------------------------------------- BCD timestamps (BIN(17))

def _bcd17():
    digit = st.integers(0, 9)
    nib = st.one_of(digit, digit, digit, digit, digit, digit, st.integers(0, 15))
    noisy = st.lists(st.tuples(nib, nib), min_size=17, max_size=17).map(
        lambda ps: bytes(h << 4 | lo for h, lo in ps))
    valid = st.datetimes().map(lambda v: bytes.fromhex(
        f"{v.year:04d}{v.month:02d}{v.day:02d}{v.hour:02d}{v.minute:02d}{v.second:02d}"
        f"{v.microsecond:06d}12345678901234"))
    return st.one_of(noisy, valid, valid, st.just(bytes(17)))


@settings(max_examples=200, deadline=None)
@given(st.lists(_bcd17(), min_size=1, max_size=20))
def test_bcd_timestamps_equal_decode_ts17(raws):
    vals, bad, zero = V.bcd_timestamps(rows_of(raws, 17))
    for raw, v, b, z in zip(raws, vals.tolist(), bad.tolist(), zero.tolist()):
        want = per_value(decode_ts17, raw)
        if want is BadValue:
            assert b and not z, raw.hex()
        elif want is None:
            assert z and not b
        else:
            assert not b and not z and v == want.replace(tzinfo=None), raw.hex()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.binary(min_size=10, max_size=10),
                          st.datetimes().map(C.encode_db2_timestamp)), min_size=1, max_size=20))
def test_bcd_timestamps_of_10_bytes_equal_decode_db2_timestamp(raws):
    vals, bad, zero = V.bcd_timestamps(rows_of(raws, 10))
    for raw, v, b, z in zip(raws, vals.tolist(), bad.tolist(), zero.tolist()):
        want = per_value(C.decode_db2_timestamp, raw)
        if z:
            continue
        assert b == (want is BadValue)
        if not b:
            assert v == want


# ---------------------------------------------------------------- rendering and hex

def test_join_rows_equals_render_rows():
    cols = [Column("A", "INTEGER"), Column("B", "VARCHAR", length=5), Column("C", "DATE")]
    arrays = [pa.array([1, None]), pa.array(['x"y', None]), pa.array([_dt.date(2024, 1, 2), None])]
    texts = [render_values(c, a) for c, a in zip(cols, arrays)]
    assert join_rows(cols, texts).equals(render_rows(cols, arrays))
    assert join_rows([], [], 2).to_pylist() == ["{}", "{}"]
    with pytest.raises(ValueError):
        join_rows(cols, texts[:2])


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 12), st.lists(st.binary(min_size=12, max_size=12), max_size=20))
def test_hex_bytes_upper_case_hex(width, raws):
    raws = [r[:width] for r in raws]
    rows = rows_of(raws, width) if raws else np.zeros((0, width), np.uint8)
    assert hex_bytes(rows).to_pylist() == [r.hex().upper() for r in raws]
