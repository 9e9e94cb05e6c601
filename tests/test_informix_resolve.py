"""Informix records mode + the transaction step (decoders/informix/resolve.py) against the
per-file decoder with its carry (itself checked against the oracle): the same rows, night
after night, with the open transactions held the way the generic held-state step holds
them (every row of a transaction without an end, quarantine rows excepted)."""

from __future__ import annotations

import datetime as _dt
import random

import pytest

from decoders.base import DecodeContext
from decoders.events import EventSink
from decoders.events import accounts_bytes
from decoders.informix import archive_sort_key
from decoders.informix import decoder as D
from decoders.informix import resolve as RS
from decoders.informix.decoder import decode_records
from decoders.informix.synth import Synth
from tests.golden import GOLDEN
from tests.test_informix_oracle import damaged, every_type_log

SOURCE = "wms_informix"
CATALOG = Synth(SOURCE).catalog


def _ctx(name, tz, carry=None):
    return DecodeContext(SOURCE, "informix", CATALOG, name, {}, tz, carry)


decode = accounts_bytes(D.decode, lines=True)   # the decoder with its carry, either mode


def legacy(archives, carry, tz):
    rows = []
    for name, data in archives:
        sink = EventSink(SOURCE, "informix", name)
        carry = decode(data, _ctx(name, tz, carry), sink)
        rows.extend(sink.rows())
    return rows, carry


def records(archives, tz):
    rows = []
    for name, data in archives:
        sink = EventSink(SOURCE, "informix", name)
        decode_records(data, _ctx(name, tz), sink)
        rows.extend({**r, "from_state": False} for r in sink.rows())
    return rows


def held_rows(rows):
    """The generic held-state step: rows of transactions with no end (no quarantine rows)."""
    ended = {r["trx_id"] for r in rows if r["trx_end"]}
    return [{**r, "from_state": True} for r in rows
            if r["trx_id"] and r["trx_id"] not in ended and r["kind"] not in ("quarantine", "carry")]


def visible(rows):
    """Tonight's rows without the state rows (no records, no bytes)."""
    return [{k: v for k, v in r.items() if k != "from_state"} for r in rows
            if not r.get("from_state") and r.get("rule") != RS.STATE_RULE]


def check_nights(nights, tz="America/Chicago"):
    carry, held = None, []
    for archives in nights:
        want, carry = legacy(archives, carry, tz)
        out = RS.resolve_rows(held + records(archives, tz))
        got = visible(out)
        assert sum(r["n_bytes"] for r in got) == sum(len(d) for _, d in archives)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g == w, (g, w)
        held = held_rows(out + held)
        # what is held for the next night is what the carry says is open
        states = {r["xid"]: r for r in out if r.get("rule") == RS.STATE_RULE}
        assert sorted(states) == sorted(int(x) for x in carry["open"])


@pytest.mark.parametrize("seed", [1, 2, 3, 7, 11])
def test_generated_nights(seed):
    synth = Synth(SOURCE, seed=seed)
    nights = synth.nights(_dt.date(2024, 3, 9), 3, 60)
    check_nights([[(f"{SOURCE}/x/{a}", n.archives[a]) for a in sorted(n.archives, key=archive_sort_key)]
                  for n in nights])


def test_golden_archives():
    check_nights([[(name, (GOLDEN / "informix" / name).read_bytes())]
                  for name in ("onlog_42.txt", "onlog_43.txt", "onlog_44.txt")])


def test_every_record_type():
    check_nights([[("onlog_9.txt", every_type_log(0))], [("onlog_10.txt", every_type_log(1))]])


@pytest.mark.parametrize("seed", range(10))
def test_damaged_nights(seed):
    rng = random.Random(seed)
    synth = Synth(SOURCE, seed=seed)
    nights = synth.nights(_dt.date(2024, 5, 1), 2, 30)
    check_nights([[(a, damaged(n.archives[a], rng)) for a in sorted(n.archives, key=archive_sort_key)]
                  for n in nights])


# ------------------------------------------------------------------ byte ranges

def test_split_at_every_record_start_decodes_to_the_rows_of_the_whole_file():
    synth = Synth(SOURCE, seed=3)
    night = synth.night(_dt.date(2024, 3, 10), 40)
    for name in sorted(night.archives, key=archive_sort_key):
        data = night.archives[name]
        whole = EventSink(SOURCE, "informix", name)
        decode_records(data, _ctx(name, "America/Chicago"), whole)
        want = whole.rows()
        ranges = split_ranges_of(data, name, 1)
        assert len(ranges) > len(want) / 2
        got = []
        for r in ranges:
            sink = EventSink(SOURCE, "informix", name)
            ctx = _ctx(name, "America/Chicago")
            ctx.offset, ctx.index, ctx.line = r["start"], r["index"], r["line"]
            decode_records(data[r["start"]:r["end"]], ctx, sink)
            got.extend(sink.rows())
        assert got == want
        # cuts only at record lines that are not remainder records
        for r in ranges[1:]:
            line = data[r["start"]:data.index(b"\n", r["start"])]
            assert not line[:1].isspace() and not line.lower().startswith(b"addr")
            assert line.split()[2] not in (b"RINSERT", b"RDELETE", b"RUPBEF", b"RUPAFT", b"RUPDATE")


def split_ranges_of(data, name, target):
    from decoders.informix.decoder import split

    ranges = split(data, _ctx(name, "UTC"), target)
    assert ranges[0]["start"] == 0 and ranges[-1]["end"] == len(data)
    assert all(a["end"] == b["start"] for a, b in zip(ranges, ranges[1:]))
    return ranges


# ------------------------------------------------------------------ on Spark

@pytest.mark.spark
def test_resolve_transactions_on_spark_equals_the_rows(spark):
    import pyarrow as pa

    from dblog.decode import spark_event_schema

    synth = Synth(SOURCE, seed=11)
    nights = synth.nights(_dt.date(2024, 11, 2), 2, 40)
    schema = spark_event_schema().add("from_state", "boolean")
    held = []
    for n in nights:
        archives = [(f"{SOURCE}/x/{a}", n.archives[a]) for a in sorted(n.archives, key=archive_sort_key)]
        rows = held + records(archives, "America/Chicago")
        want = RS.resolve_rows(rows)
        table = pa.Table.from_pylist(rows)
        df = spark.createDataFrame(table.to_pandas(), schema) if rows else None
        got = [r.asDict() for r in RS.resolve_transactions(df).collect()]
        key = lambda r: (r["archive_file"], r["record_index"], r["rule"] == RS.STATE_RULE)  # noqa: E731
        norm = lambda r: {k: (v.replace(tzinfo=None) if hasattr(v, "tzinfo") and v is not None  # noqa: E731
                              and not isinstance(v, (str, bytes)) else v) for k, v in r.items()}
        got, want = [norm(r) for r in sorted(got, key=key)], [norm(r) for r in sorted(want, key=key)]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g == w, {k: (g[k], w[k]) for k in w if g.get(k) != w[k]}
        held = held_rows(want + held)


def test_a_damaged_state_row_is_reported_and_never_stops_the_night():
    one = records([("onlog_7.txt", b"18 40 BEGIN 1 3 0 07/13/98 10:00:00 1 ann\n"
                                   b"40 76 HINSERT 1 0 18 100123 101 40\n")], "UTC")
    out = RS.resolve_rows(one)
    state = [r for r in out if r["rule"] == RS.STATE_RULE]
    assert len(state) == 1 and state[0]["xid"] == 1 and state[0]["n_records"] == 0
    two = records([("onlog_8.txt", b"a0 36 COMMIT 1 0 40 07/13/98 10:00:05\n")], "UTC")
    good = visible(RS.resolve_rows(held_rows(out) + two))
    assert [(r["kind"], r["trx_id"]) for r in good] == [("commit", "7:18")]
    for bad in ("{", '{"trx": 5}', '{"trx": "7:18", "last": "x"}', "[]"):
        damaged_state = [{**r, "message": bad} if r["rule"] == RS.STATE_RULE else r
                         for r in held_rows(out)]
        got = visible(RS.resolve_rows(damaged_state + two))
        assert [(r["kind"], r["n_records"]) for r in got] == [("quarantine", 0), ("control", 1)]
        assert "held state" in got[0]["message"] and got[1]["rule"] == "outside_transaction"
