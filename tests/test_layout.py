"""The layout engine (decoders/layout.py), framing helpers (decoders/framing.py) and the
vectorised value codecs (decoders/vectors.py)."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decoders import codecs as C
from decoders.errors import Corrupt, UnknownRecordType
from decoders.framing import Damage, Frames, frame_chain, hex_bytes, hex_ints, resync, split_ranges
from decoders.layout import Field, Layout, gather
from decoders.vectors import text, text_fixed, vms_times

REC = Layout("test record", [
    Field("len_record", 0, "u2", "LENGTH"),
    Field("kind", 2, "b1", "TYPE"),
    Field("num", 4, "s4", "NUMBER"),          # 1 pad byte at 3
    Field("lsn", 8, "b6", "LSN"),
    Field("value", 14, "f8", "VALUE"),
], size=24)


def test_offsets_check_themselves():
    with pytest.raises(ValueError, match="overlaps"):
        Layout("bad", [Field("a", 0, "u4"), Field("b", 2, "u2")])
    with pytest.raises(ValueError, match="declared twice"):
        Layout("bad", [Field("a", 0, "u1"), Field("a", 1, "u1")])
    with pytest.raises(ValueError, match="past the size"):
        Layout("bad", [Field("a", 0, "u4")], size=2)
    with pytest.raises(ValueError, match="unknown type"):
        Layout("bad", [Field("a", 0, "x9")])


@pytest.mark.parametrize("order", ["big", "little"])
def test_struct_and_dtype_read_the_same(order):
    lay = REC.with_byte_order(order)
    assert lay.with_byte_order("big") is REC and lay.struct.size == 24
    recs = [lay.pack(24, b"A", -5, bytes(range(6)), 1.5), lay.pack(len_record=24, num=7)]
    buf = b"xx" + b"".join(recs)
    arr = lay.gather(buf, [2, 26])
    for i, r in enumerate(recs):
        want = lay.unpack_from(buf, 2 + 24 * i)
        assert int(arr["len_record"][i]) == want[0]
        assert bytes(arr["kind"][i]) == want[1]
        assert int(arr["num"][i]) == want[2]
        assert bytes(arr["lsn"][i]) == want[3]
        assert float(arr["value"][i]) == want[4]
    # byte order really differs
    assert recs[0][:2] == (struct.pack(">H" if order == "big" else "<H", 24))


def test_reader_reads_only_named_fields():
    rd = REC.reader(["num", "value"])
    buf = REC.pack(24, b"A", -5, b"\0" * 6, 2.5)
    assert rd.unpack_from(buf, 0) == (-5, 2.5)


def test_gather_refuses_records_past_the_end():
    with pytest.raises(ValueError, match="runs past the end"):
        gather(b"\0" * 30, [10], REC.dtype)


def test_gather_in_chunks_equals_one_shot():
    buf = np.random.default_rng(1).integers(0, 256, 5000, dtype=np.uint8).tobytes()
    starts = np.arange(0, 4900, 7)
    one = gather(buf, starts, REC.dtype)
    many = gather(buf, starts, REC.dtype, chunk=13)
    assert one.tobytes() == many.tobytes()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 2**63 - 1), max_size=20), st.integers(16, 16))
def test_hex_ints(values, width):
    got = hex_ints(np.array(values, dtype=np.uint64), width).to_pylist()
    assert got == [format(v, "X").rjust(width, "0") for v in values]


def test_hex_ints_narrow_and_bytes():
    assert hex_ints(np.array([1, 255]), 4).to_pylist() == ["0001", "00FF"]
    with pytest.raises(ValueError):
        hex_ints(np.array([0x10000]), 4)
    assert hex_bytes(np.array([[0, 255, 16], [1, 2, 3]], dtype=np.uint8)).to_pylist() == \
        ["00FF10", "010203"]


# ----------------------------------------------------------------- framing

def _archive() -> bytes:
    """Records: 2-byte big-endian length (including itself), then a type byte 'R', then data."""
    recs = [b"\x00\x05R" + b"ab", b"\x00\x04R" + b"c", b"\x00\x06R" + b"def"]
    return b"".join(recs)


def _step(data):
    def step(pos):
        if data[pos + 2:pos + 3] != b"R":
            raise UnknownRecordType("not R", path="type", expected="R", actual=data[pos + 2:pos + 3])
        return int.from_bytes(data[pos:pos + 2], "big")
    return step


def _plausible(buf, cand):
    ok = cand + 3 <= len(buf)
    c = np.minimum(cand, len(buf) - 3)
    return ok & (buf[c + 2] == ord("R")) & (buf[c] == 0)


def test_frame_chain_clean():
    data = _archive()
    fr = frame_chain(data, _step(data), lambda p, e: resync(data, p, len(data), _plausible))
    assert fr.starts.tolist() == [0, 5, 9] and fr.lengths.tolist() == [5, 4, 6]
    assert fr.covered() == len(data) and not fr.damaged


def test_frame_chain_resyncs_after_damage():
    good = _archive()
    data = good[:5] + b"\x00\x04X" + b"c" + good[9:]          # type byte of record 2 damaged
    fr = frame_chain(data, _step(data), lambda p, e: resync(data, p, len(data), _plausible))
    assert fr.starts.tolist() == [0, 9]
    assert [(d.start, d.end, d.error.error_class) for d in fr.damaged] == \
        [(5, 9, "unknown_record_type")]
    assert fr.covered() == len(data)
    rec_idx, dmg_idx = fr.record_indexes()
    assert rec_idx.tolist() == [0, 2] and dmg_idx == [1]


def test_frame_chain_length_past_the_end_is_damage():
    data = _archive()[:-1]
    fr = frame_chain(data, _step(data), lambda p, e: resync(data, p, len(data), _plausible))
    assert fr.starts.tolist() == [0, 5]
    assert [(d.start, d.end, d.error.error_class) for d in fr.damaged] == [(9, 14, "truncated")]


def test_frames_record_indexes_with_damage_first():
    fr = Frames(np.array([10, 20]), np.array([10, 5]),
                [Damage(0, 10, Corrupt("x"), records=2), Damage(25, 30, Corrupt("y"))])
    rec_idx, dmg_idx = fr.record_indexes(first=100)
    assert rec_idx.tolist() == [102, 103] and dmg_idx == [100, 104]


def test_split_ranges_cover_the_archive_at_record_starts():
    starts = np.arange(0, 1000, 10)
    ranges = split_ranges(starts, 1000, 95)
    assert ranges[0][0] == 0 and ranges[-1][1] == 1000
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert all(r[0] % 10 == 0 and r[2] == r[0] // 10 for r in ranges)
    allowed = (starts % 50) == 0
    assert all(r[0] % 50 == 0 for r in split_ranges(starts, 1000, 95, allowed))
    assert split_ranges(starts, 1000, 5000) == [(0, 1000, 0)]


# ----------------------------------------------------------------- vectorised codecs

def test_text_fast_and_slow_rows_equal_the_codec():
    buf = b"hello\xe9world\xffABC" + "ÄÖ".encode("utf-8")
    starts, lengths = [0, 5, 11, 15], [5, 6, 3, 4]
    for enc in ("utf-8", "latin-1", "cp1252", "cp037", "cp500", "ascii"):
        arr, bad = text(buf, starts, lengths, enc)
        for s, n, got, b in zip(starts, lengths, arr.to_pylist(), bad):
            try:
                want = buf[s:s + n].decode(enc)
            except UnicodeDecodeError:
                want = None
            assert (got, bool(b)) == (want, want is None), (enc, s)


def test_text_rows_of_any_length_mix():
    """Empty rows next to non-ASCII rows (a per-row sum that depended on clamped indexes)."""
    buf = b"XX0\x80YY"
    arr, bad = text(buf, [2, 4, 0, 4], [2, 0, 0, 2], "latin-1")
    assert arr.to_pylist() == ["0\x80", "", "", "YY"] and not bad.any()
    arr, bad = text(buf, [2, 4], [2, 0], "utf-8")
    assert arr.to_pylist() == [None, ""] and bad.tolist() == [True, False]


def test_text_fixed_keeps_padding():
    rows = np.frombuffer(b"ab  \x00d  ", np.uint8).reshape(2, 4)
    assert text_fixed(rows, "latin-1")[0].to_pylist() == ["ab  ", "\x00d  "]


def test_vms_times_equal_the_codec():
    ticks = np.array([0, 35067168000000000, 35067168000000009, -1, 2**62, 1234567890123456789])
    got, bad = vms_times(ticks)
    for t, g, b in zip(ticks.tolist(), got, bad):
        try:
            want = C.decode_vms_time(t)
        except Exception:
            want = None
        assert (None if b else g.astype("datetime64[us]").item()) == want


def test_byte_runs_equals_the_ranges_concatenated():
    import random

    from decoders.layout import byte_runs

    rng = random.Random(7)
    buf = bytes(rng.randrange(256) for _ in range(5000))
    for _ in range(200):
        cuts = sorted(rng.sample(range(len(buf) + 1), rng.randrange(2, 40)))
        ranges = [(a, b) for a, b in zip(cuts, cuts[1:]) if rng.random() < 0.7]
        want = b"".join(buf[a:b] for a, b in ranges)
        starts = np.array([a for a, _ in ranges], dtype=np.int64)
        ends = np.array([b for _, b in ranges], dtype=np.int64)
        assert byte_runs(buf, starts, ends) == want
        assert byte_runs(np.frombuffer(buf, np.uint8), starts, ends) == want
    assert byte_runs(buf, [], []) == b""
