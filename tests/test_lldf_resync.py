"""Damage and ranges in Log Master files (issue 15, issue 14): a damaged length or type byte
costs only its record (RDWs on and off), every byte is accounted once, values out of range
are quarantined without a crash, and an archive split at any record boundary decodes to the
rows of the whole archive."""

from __future__ import annotations

import datetime as _dt
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decoders import get
from decoders.base import DecodeContext
from decoders.events import EventSink
from decoders.lldf import decode, split
from decoders.lldf import encoder as E
from decoders.lldf import layout as L
from decoders.lldf.synth import Synth
from tests.test_lldf import GOOD, ROW1, T1, hdr, rec

DAY = _dt.date(2024, 3, 1)


def night(rdw: bool, seed: int = 21, n: int = 50):
    synth = Synth("core_zos", options={"rdw": rdw, "codepage": "cp037"}, seed=seed)
    return synth, synth.night(DAY, n)


def framed(data: bytes, rdw: bool) -> list[tuple[int, int]]:
    """(start, length) of every record, walked with the lengths the encoder wrote (not with
    the decoder)."""
    out, pos, h = [], 0, 4 if rdw else 0
    while pos < len(data):
        n = h + int.from_bytes(data[pos + h:pos + h + 2], "big") + \
            int.from_bytes(data[pos + h + 182:pos + h + 184], "big")
        out.append((pos, n))
        pos += n
    return out


def rows_of(data: bytes, catalog, rdw: bool, archive="a.dat", **range_) -> list[dict]:
    sink = EventSink("core_zos", "lldf", archive)
    ctx = DecodeContext("core_zos", "lldf", catalog, archive, options={"rdw": rdw}, **range_)
    decode(data, ctx, sink)
    return sink.rows()


def check_accounting(rows: list[dict], size: int, base: int = 0, first: int = 0) -> None:
    assert sum(r["n_bytes"] for r in rows) == size
    offs = [r["record_offset"] for r in rows]
    assert offs == sorted(offs) and all(base <= o < base + size for o in offs)
    idx = [r["record_index"] for r in rows]
    assert idx == list(range(first, first + len(rows)))      # one row per record here
    assert all(r["n_records"] == 1 for r in rows)
    # contiguous: each row's bytes end where the next row starts
    for a, b in zip(rows, rows[1:]):
        assert a["record_offset"] + a["n_bytes"] == b["record_offset"]


# ---------------------------------------------------------------- one damaged field

FIELDS = [(f.name, f.offset, f.size) for f in L.HEADER.fields]


@pytest.mark.parametrize("rdw", [False, True])
def test_single_field_damage_costs_at_most_its_record(rdw):
    """Seeded single-field damages of every header field (and the RDW): never more than
    the damaged record quarantined (so never half an archive), every byte accounted, the
    same bytes give the same rows; the records before and after the damaged one decode as
    in the undamaged archive."""
    synth, out = night(rdw)
    rng = random.Random(7)
    fields = FIELDS + ([("rdw_length", -4, 2), ("rdw_flags", -2, 2)] if rdw else [])
    lost = Counter()
    trials = 0
    for name, data in sorted(out.archives.items()):
        recs = framed(data, rdw)
        clean = rows_of(data, synth.catalog, rdw, name)
        assert len(clean) == len(recs)
        for _ in range(90):
            k = rng.randrange(len(recs))
            start, length = recs[k]
            field, off, width = rng.choice(fields)
            at = start + (4 if rdw else 0) + off
            old = data[at:at + width]
            how = rng.randrange(3)
            new = (bytes(rng.randrange(256) for _ in range(width)) if how == 0 else
                   bytes([rng.choice([0, 0xFF])]) * width if how == 1 else
                   bytes(b ^ (1 << rng.randrange(8)) if i == rng.randrange(width) else b
                         for i, b in enumerate(old)))
            bad = data[:at] + new + data[at + width:]
            rows = rows_of(bad, synth.catalog, rdw, name)
            assert rows == rows_of(bad, synth.catalog, rdw, name)          # deterministic
            check_accounting(rows, len(bad))
            q = [r for r in rows if r["kind"] == "quarantine"]
            assert len(q) <= 1, (field, [r["message"] for r in q])
            lost[field] += sum(r["n_bytes"] for r in q) > len(bad) // 2
            assert all(r["n_bytes"] == length for r in q), (field, q[0]["message"])
            # the other records are untouched
            assert [r for r in rows if r["record_offset"] != start] == \
                [r for r in clean if r["record_offset"] != start]
            trials += 1
    assert trials == 180 and sum(lost.values()) == 0


@pytest.mark.parametrize("rdw", [False, True])
@pytest.mark.parametrize("field", ["len_header", "len_segment", "change_type", "num_segments",
                                   "segment_no"])
def test_every_value_of_a_length_or_type_byte(rdw, field):
    """Values of each byte of a length or type field of one record in the middle of an
    archive: at most that record is quarantined."""
    recs = [rec(hdr(ct="I ", ov=i, lrsn=0x1000 + i), E.row_area(T1, None, ROW1)) for i in range(5)]
    data = E.write_file(recs, rdw=rdw)
    step = len(recs[0]) + (4 if rdw else 0)
    f = L.HEADER.by_name[field]
    for byte in range(f.size):
        at = 2 * step + (4 if rdw else 0) + f.offset + byte
        for v in sorted(set(range(0, 256, 7)) | {0x01, 0x1F, 0x20, 0x21, 0xFE, 0xFF}):
            bad = data[:at] + bytes([v]) + data[at + 1:]
            rows = _rows_t1(bad, rdw)
            check_accounting(rows, len(bad))
            kinds = [r["kind"] for r in rows]
            assert kinds.count("quarantine") <= 1 and len(rows) == 5, (field, byte, v, kinds)
            assert all(r["kind"] == "change" for r in rows if r["record_offset"] != 2 * step)


def _rows_t1(data, rdw):
    from tests.test_lldf import CATALOG

    return rows_of(data, CATALOG, rdw)


def test_garbage_between_records_is_one_quarantine_row():
    from tests.test_lldf import CATALOG

    for rdw in (False, True):
        good = E.write_file([GOOD], rdw=rdw)
        for junk in (b"\x00" * 7, b"\xff" * 300, bytes(range(256)) * 3, good[:100]):
            data = good + junk + good + good
            rows = rows_of(data, CATALOG, rdw)
            assert [r["kind"] for r in rows] == ["change", "quarantine", "change", "change"]
            assert rows[1]["record_offset"] == len(good) and rows[1]["n_bytes"] == len(junk)
            check_accounting(rows, len(data))


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=600), st.booleans(), st.integers(0, 4), st.integers(0, 2**16))
def test_garbage_anywhere_never_raises_and_accounts(blob, rdw, where, seed):
    from tests.test_lldf import CATALOG

    recs = [E.write_file([GOOD], rdw=rdw)] * 4
    data = b"".join(recs[:where]) + blob + b"".join(recs[where:])
    rows = rows_of(data, CATALOG, rdw)
    check_accounting(rows, len(data))
    # the records before and after the garbage decode
    kinds = [r["kind"] for r in rows]
    assert kinds[:where] == ["change"] * where
    if where < 4:
        assert kinds[len(kinds) - (4 - where):] == ["change"] * (4 - where)


def test_values_out_of_range_are_quarantined_not_raised():
    from tests.test_lldf import CATALOG, _with

    good = rec(hdr(ct="I "), E.row_area(T1, None, ROW1))
    at = good.index("2024-03-01-12.00.00.123456".encode("cp037"))
    cases = [
        _with(at, "9999-12-31-24.00.00.000000".encode("cp037"), good),     # hour 24
        _with(at, "0000-01-01-00.00.00.000000".encode("cp037"), good),     # year 0
        _with(144, bytes.fromhex("99991231235960") + bytes(10), good),     # second 60
        _with(144, bytes.fromhex("FFFFFFFF") + bytes(13), good),           # not digits
        _with(161, b"\x00", good),                                         # UORDISP X'00' (open)
    ]
    rows = rows_of(b"".join(cases) + GOOD, CATALOG, False)
    assert [r["error_class"] for r in rows] == ["bad_value"] * 4 + [None, None]
    assert rows[4]["kind"] == "change" and rows[4]["trx_end"] is None


# ---------------------------------------------------------------- ranges

def _split_decode(data: bytes, catalog, rdw: bool, target: int):
    ctx = DecodeContext("core_zos", "lldf", catalog, "a.dat", options={"rdw": rdw})
    ranges = split(data, ctx, target)
    assert ranges[0]["start"] == 0 and ranges[-1]["end"] == len(data)
    assert all(a["end"] == b["start"] for a, b in zip(ranges, ranges[1:]))
    rows = []
    for r in ranges:
        rows += rows_of(data[r["start"]:r["end"]], catalog, rdw, offset=r["start"], index=r["index"])
    return ranges, rows


@pytest.mark.parametrize("rdw", [False, True])
def test_split_at_every_boundary_equals_whole(rdw):
    synth, out = night(rdw, seed=5, n=40)
    for name, data in sorted(out.archives.items()):
        whole = rows_of(data, synth.catalog, rdw)
        ranges, rows = _split_decode(data, synth.catalog, rdw, 1)
        assert len(ranges) == len(framed(data, rdw))             # a cut at every record
        assert rows == whole
        for target in (700, 5000, 10**9):
            assert _split_decode(data, synth.catalog, rdw, target)[1] == whole
        assert any(r["kind"] == "segment" for r in rows)


@pytest.mark.parametrize("rdw", [False, True])
def test_split_damaged_archive_equals_whole(rdw):
    """Damage (garbage, a damaged length) stays inside one range and decodes the same."""
    synth, out = night(rdw, seed=6, n=30)
    name, data = sorted(out.archives.items())[0]
    recs = framed(data, rdw)
    rng = random.Random(3)
    for _ in range(12):
        start, _n = recs[rng.randrange(1, len(recs) - 1)]
        at = start + (4 if rdw else 0) + rng.choice([0, 1, 182, 183, 104, 161])
        bad = data[:at] + bytes([rng.randrange(256)]) + data[at + 1:]
        bad = bad[:recs[3][0]] + rng.randbytes(rng.randrange(1, 400)) + bad[recs[3][0]:]
        whole = rows_of(bad, synth.catalog, rdw)
        for target in (1, 3000):
            assert _split_decode(bad, synth.catalog, rdw, target)[1] == whole


def test_split_is_exported_and_covers_tiny_archives():
    mod = get("lldf")
    ctx = DecodeContext("core_zos", "lldf", None, "a.dat", options={})
    assert mod.split is split
    assert split(b"", ctx, 10) == [{"start": 0, "end": 0, "index": 0}]
    assert split(GOOD[:100], ctx, 10) == [{"start": 0, "end": 100, "index": 0}]
    bad_cp = DecodeContext("core_zos", "lldf", None, "a.dat", options={"codepage": "no-such"})
    assert split(GOOD * 3, bad_cp, 10) == [{"start": 0, "end": 3 * len(GOOD), "index": 0}]
