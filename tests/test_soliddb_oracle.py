"""The columnar solidDB decoder against the per-record decoder it replaced
(tests/oracle/soliddb.py): the same rows, every column, on generated nights and the golden
archive; after damage, the same rows up to it and the same first error; a stray quote costs
its own line (not the rest of the file) in linear time; a split archive decodes the same."""

from __future__ import annotations

import datetime as _dt
import random
import time

import pytest

from decoders import get
from decoders.base import DecodeContext
from decoders.events import EventSink, accounts_bytes
from decoders.soliddb import encoder as E
from decoders.soliddb import layout as L

from .oracle import soliddb as oracle
from .test_soliddb import CATALOG, TABLE, addr, capture_and_pairs_archive

solid = get("soliddb")
ORACLE = accounts_bytes(oracle.decode)


def rows_of(decode, data: bytes, catalog, **ctx_kw) -> list[dict]:
    sink = EventSink("s", "soliddb", "pos_solid/2026-11-01/a.csv")
    decode(data, DecodeContext("s", "soliddb", catalog, "pos_solid/2026-11-01/a.csv", **ctx_kw), sink)
    return sink.rows()


def nights():
    for seed in (1, 2, 3, 11):
        gen = solid.Synth("pos_solid", seed=seed)
        for night in gen.nights(_dt.date(2026, 11, 1), 2, 120):
            for name, data in sorted(night.archives.items()):
                yield pytest.param(gen.catalog, data, id=f"s{seed}-{night.date}-{name}")


@pytest.mark.parametrize("catalog, data", list(nights()))
def test_generated_archives_decode_as_the_oracle_does(catalog, data):
    got, want = rows_of(solid.decode, data, catalog), rows_of(ORACLE, data, catalog)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g == w
    assert sum(r["n_bytes"] for r in got) == len(data)


def test_golden_archive_as_the_oracle():
    data = capture_and_pairs_archive()
    assert rows_of(solid.decode, data, CATALOG) == rows_of(ORACLE, data, CATALOG)


def _first_damage(rows):
    return next((i for i, r in enumerate(rows) if r["kind"] == "quarantine"), len(rows))


def test_single_byte_damage_against_the_oracle():
    gen = solid.Synth("pos_solid", seed=5)
    night = gen.night(_dt.date(2026, 11, 1), 40)
    rng = random.Random(7)
    for name, data in sorted(night.archives.items()):
        for _ in range(80):
            at = rng.randrange(len(data))
            bad = data[:at] + bytes([rng.choice(b'"\n,0Fz\x00\xff')]) + data[at + 1:]
            got, want = rows_of(solid.decode, bad, gen.catalog), rows_of(ORACLE, bad, gen.catalog)
            assert sum(r["n_bytes"] for r in got) == len(bad)
            # same rows before the first damage of either (pairing may hold a row back)
            i = min(_first_damage(got), _first_damage(want))
            key = lambda r: (r["record_index"], r["kind"])    # noqa: E731
            assert sorted(got[:i], key=key)[:i // 2] == sorted(want[:i], key=key)[:i // 2]


def test_a_stray_quote_costs_its_line_in_linear_time():
    good = E.encode_row(TABLE, [1] + [None] * 16)
    rows = [E.csv_row(L.TRX_START, 1, 1, None, 0, addr(1), None)]
    rows += [E.csv_row(L.INSERT, 1, 1, 77, 1, addr(2 + i), good) for i in range(20000)]
    rows += [E.csv_row(L.COMMIT, 1, 1, None, 0, addr(30000), None)]
    data = E.write_archive(rows)
    at = data.index(b"\n", len(data) // 3) + 1
    bad = data[:at] + b'"' + data[at:]
    t0 = time.process_time()
    out = rows_of(solid.decode, bad, CATALOG)
    seconds = time.process_time() - t0
    q = [r for r in out if r["kind"] == "quarantine"]
    assert len(q) == 1 and q[0]["record_offset"] == at and q[0]["error_class"] == "corrupt"
    assert sum(1 for r in out if r["kind"] == "change") == 20000 - 1
    t0 = time.process_time()
    rows_of(solid.decode, data, CATALOG)
    clean = time.process_time() - t0
    assert seconds < 5 * clean + 1.0        # linear: the damage costs no rescans


@pytest.mark.parametrize("target", [1, 2000])
def test_split_archive_decodes_to_the_same_rows(target):
    gen = solid.Synth("pos_solid", seed=4)
    night = gen.night(_dt.date(2026, 11, 1), 80)
    for name, data in sorted(night.archives.items()):
        whole = rows_of(solid.decode, data, gen.catalog)
        ranges = solid.split(data, DecodeContext("s", "soliddb", gen.catalog, "x"), target)
        assert ranges[0]["start"] == 0 and ranges[-1]["end"] == len(data)
        assert all(a["end"] == b["start"] for a, b in zip(ranges, ranges[1:]))
        parts = []
        for r in ranges:
            parts += rows_of(solid.decode, data[r["start"]:r["end"]], gen.catalog,
                             offset=r["start"], index=r["index"], split=r.get("split"))
        assert parts == whole
