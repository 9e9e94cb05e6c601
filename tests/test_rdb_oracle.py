"""The columnar Rdb decoder against the per-record decoder it replaced (tests/oracle/rdb.py):
the same rows, every column, on generated nights (every type, DST changes, commit records
or not, the RELATION_NAME fallback) and on golden archives; after damage, the same rows up
to the damage and the same first error; and a split archive decodes to the same rows."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import random

import pytest

from decoders import rdb
from decoders.base import DecodeContext
from decoders.events import EventSink, accounts_bytes

from .oracle import rdb as oracle
from .test_rdb import CATALOG as CAT, _golden_archive, _golden_corrupt

ORACLE = accounts_bytes(oracle.decode)


def rows_of(decode, data: bytes, catalog, tz: str = "Europe/Berlin", **ctx_kw) -> list[dict]:
    sink = EventSink("fin_rdb", "rdb", "fin_rdb/2024-10-27/a.rdb")
    decode(data, DecodeContext("fin_rdb", "rdb", catalog, "fin_rdb/2024-10-27/a.rdb", {}, tz,
                               **ctx_kw), sink)
    return sink.rows()


def nights():
    for seed, commits in [(1, None), (2, True), (3, False), (5, None)]:
        synth = rdb.Synth("fin_rdb", options={"commit_records": commits}, seed=seed)
        for night in synth.nights(_dt.date(2024, 10, 26), 2, 80):
            for name, data in sorted(night.archives.items()):
                yield pytest.param(synth.catalog, data, id=f"s{seed}-{night.date}-{name}")


@pytest.mark.parametrize("catalog, data", list(nights()))
def test_generated_archives_decode_as_the_oracle_does(catalog, data):
    want = rows_of(ORACLE, data, catalog)
    got = rows_of(rdb.decode, data, catalog)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g == w
    assert sum(r["n_bytes"] for r in got) == len(data)


@pytest.mark.parametrize("tz", ["UTC", "Europe/Berlin", "America/New_York"])
def test_golden_archive_as_the_oracle(tz):
    data = _golden_archive()
    assert rows_of(rdb.decode, data, CAT, tz) == rows_of(ORACLE, data, CAT, tz)


def _first_damage(rows):
    for i, r in enumerate(rows):
        if r["kind"] == "quarantine":
            return i
    return len(rows)


def _same_until_damage(got, want):
    i, j = _first_damage(got), _first_damage(want)
    assert i == j and got[:i] == want[:i]
    if i < len(want):
        assert (got[i]["error_class"], got[i]["record_offset"]) == \
            (want[i]["error_class"], want[i]["record_offset"])
    return i


def test_corrupt_golden_archive_until_the_damage():
    data = _golden_corrupt()
    got, want = rows_of(rdb.decode, data, CAT), rows_of(ORACLE, data, CAT)
    _same_until_damage(got, want)
    # every record the oracle decoded is decoded too (resynchronisation only adds)
    assert [r for r in want if r["kind"] != "quarantine"] == \
        [r for r in got if r["kind"] != "quarantine"][:len([r for r in want if r["kind"] != "quarantine"])]


def test_single_byte_damage_against_the_oracle():
    synth = rdb.Synth("fin_rdb", seed=11)
    night = synth.night(_dt.date(2024, 6, 1), 40)
    rng = random.Random(3)
    for name, data in sorted(night.archives.items()):
        for _ in range(60):
            at = rng.randrange(len(data))
            bad = data[:at] + bytes([rng.randrange(256)]) + data[at + 1:]
            got = rows_of(rdb.decode, bad, synth.catalog)
            want = rows_of(ORACLE, bad, synth.catalog)
            _same_until_damage(got, want)
            assert sum(r["n_bytes"] for r in got) == len(bad)
            assert all(0 <= r["record_offset"] < len(bad) for r in got)


@pytest.mark.parametrize("target", [1, 300, 5000])
def test_split_archive_decodes_to_the_same_rows(target):
    synth = rdb.Synth("fin_rdb", options={"commit_records": True}, seed=4)
    night = synth.night(_dt.date(2024, 10, 27), 60)
    for name, data in sorted(night.archives.items()):
        whole = rows_of(rdb.decode, data, synth.catalog)
        ctx = DecodeContext("fin_rdb", "rdb", synth.catalog, "x", {}, "Europe/Berlin")
        ranges = rdb.split(data, ctx, target)
        assert ranges[0]["start"] == 0 and ranges[-1]["end"] == len(data)
        assert all(a["end"] == b["start"] for a, b in zip(ranges, ranges[1:]))
        if target == 1:
            assert len(ranges) > 10
        parts = []
        for r in ranges:
            parts += rows_of(rdb.decode, data[r["start"]:r["end"]], synth.catalog,
                             offset=r["start"], index=r["index"])
        assert parts == whole


def test_decode_context_fields_for_ranges_exist():
    names = {f.name for f in dataclasses.fields(DecodeContext)}
    assert {"offset", "index", "line", "split"} <= names
