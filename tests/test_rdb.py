"""Oracle Rdb LogMiner binary output (SPEC section 3, rdb): layouts, round trips, VMS times,
corrupt inputs, golden files and a whole generated night."""

from __future__ import annotations

import datetime as _dt
import json
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import decoders
from decoders import rdb
from decoders.base import DecodeContext
from decoders.catalog import Catalog, Column, Table, load_catalog
from decoders.codecs import Float4, RowRenderer
from decoders.events import EventSink
from decoders.rdb import encoder as E
from decoders.rdb import layout as L
from decoders.synth import FormatSynth

from .golden import GOLDEN, check_golden

ROOT = Path(__file__).resolve().parent.parent
UTC = _dt.timezone.utc
UNIX_EPOCH_TICKS = 35067168000000000          # public sample value (NOTES.md section 3)
CATALOG = rdb.Synth("fin_rdb").catalog
ACCOUNTS, LEDGER, RATES = CATALOG.tables


def decode(data: bytes, catalog: Catalog = CATALOG, timezone: str = "Europe/Berlin",
           archive: str = "fin_rdb/2024-03-31/a.rdb") -> list[dict]:
    sink = EventSink("fin_rdb", "rdb", archive)
    ctx = DecodeContext("fin_rdb", "rdb", catalog, archive, timezone=timezone)
    assert rdb.decode(data, ctx, sink) is None
    rows = sink.rows()
    # every byte of the input is accounted for, once, in archive order
    assert sum(r["n_bytes"] for r in rows) == len(data)
    assert all(a["record_offset"] + a["n_bytes"] == b["record_offset"] for a, b in zip(rows, rows[1:]))
    assert all(r["n_records"] == 1 for r in rows)
    assert [r["record_index"] for r in rows] == list(range(len(rows)))
    return rows


def ticks(*args) -> int:
    """VMS ticks of a naive datetime, computed here from the definition, not by the codec."""
    delta = _dt.datetime(*args) - _dt.datetime(1858, 11, 17)
    return (delta.days * 86_400 + delta.seconds) * 10_000_000 + delta.microseconds * 10


def record(table: Table, values, *, action=b"M", tsn=1001, commit=None, start=None, dbk=None,
           record_type=None, relation=None, **kw) -> bytes:
    commit = ticks(2024, 1, 15, 10, 30) if commit is None else commit
    data, nbv = E.RowEncoder(table).encode(values)
    return E.row_record(action, table.name if relation is None else relation,
                        int(table.id) if record_type is None else record_type,
                        L.dbk_value(2, 77, 3) if dbk is None else dbk,
                        commit if start is None else start, commit, tsn, data, nbv,
                        nbv_bits=kw.pop("nbv_bits", len(table.columns)), **kw)


def rate_row(ccy="EUR", factor=1.5, mid=1.0875, as_of=_dt.date(2024, 1, 15), src=7, note="ecb"):
    return [ccy, Float4(factor) if factor is not None else None, mid, as_of, src, note]


# --------------------------------------------------------------------------- the package face

def test_package_face():
    mod = decoders.get("rdb")
    assert mod is rdb
    assert mod.FORMAT == "rdb" and mod.SEQUENTIAL is False
    assert issubclass(mod.Synth, FormatSynth)
    names = ["logminer_20240101_02.rdb", "logminer_20240101_01.rdb"]
    assert sorted(names, key=mod.archive_sort_key) == sorted(names)


def test_layout_offsets_match_notes():
    """Offsets of NOTES.md section 3 (written out here, not computed by the layout)."""
    def offsets(layout):
        return {f.vendor: f.offset for f in layout.fields}, layout.size

    row, size = offsets(L.ROW)
    assert size == 74 == L.ROW_HEADER.size
    assert row == {"ACTION": 0, "RELATION_NAME": 1, "RECORD_TYPE": 32, "DATA_LEN": 36,
                   "NBV_LEN": 38, "DBK": 40, "START_TAD": 48, "COMMIT_TAD": 56, "TSN": 64,
                   "RECORD_VERSION": 72}
    com, size = offsets(L.COMMIT)
    assert size == 72 == L.COMMIT_HEADER.size
    assert com == {"ACTION": 0, "RELATION_NAME": 1, "RECORD_TYPE": 32, "DATA_LEN": 36,
                   "NBV_LEN": 38, "TID": 40, "PID": 44, "START_TAD": 48, "COMMIT_TAD": 56,
                   "TSN": 64}


def test_hand_built_record():
    """A record written byte by byte from the SPEC, without the encoder."""
    table = Table("12", "FIN", "T", (Column("ID", "INTEGER", False), Column("C", "CHAR", length=2),
                                     Column("V", "VARCHAR", length=3), Column("D", "DATE"),
                                     Column("X", "TINYINT")))
    cat = Catalog("fin_rdb", "rdb", (table,))
    day = ticks(2000, 2, 29, 13, 14, 15, 123456) + 7        # DATE keeps the day only
    data = ((-2).to_bytes(4, "little", signed=True) + b"ab" + (2).to_bytes(2, "little")
            + b"xy\x00" + day.to_bytes(8, "little") + b"\xee")            # X is NULL: garbage
    nbv = bytes([0b10000])                                              # bit 4 = column X
    commit = ticks(2024, 7, 1, 12, 0, 0, 5) + 3
    header = (b"M" + b"T".ljust(31, b" ") + (12).to_bytes(4, "little") + len(data).to_bytes(2, "little")
              + (5).to_bytes(2, "little") + ((9 << 48) | (4242 << 16) | 17).to_bytes(8, "little")
              + (commit - 10**9).to_bytes(8, "little") + commit.to_bytes(8, "little")
              + (0x1234).to_bytes(8, "little") + (1).to_bytes(2, "little"))
    raw = header + data + nbv
    assert len(header) == 74
    # the encoder writes the same bytes
    enc_data, enc_nbv = E.RowEncoder(table).encode([-2, "ab", "xy", _dt.date(2000, 2, 29), None],
                                                   null_fill=b"\xee")
    assert enc_data == data[:11] + ticks(2000, 2, 29).to_bytes(8, "little") + b"\xee"
    assert enc_nbv == nbv
    [row] = decode(raw, cat)
    assert row["kind"] == "change" and row["op"] == "m" and row["before"] is None
    assert json.loads(row["after"]) == {"ID": -2, "C": "ab", "V": "xy", "D": "2000-02-29",
                                        "X": None}
    assert row["table_id"] == "12" and row["table_name"] == "T" and row["schema_name"] == "FIN"
    assert row["trx_id"] == str(0x1234)
    assert row["row_id"] == "9:4242:17"
    assert row["commit_position"] == f"{commit:016X}" + "0000000000001234"
    assert row["position"] == row["commit_position"] + "00000000" == row["trx_order"]
    assert row["trx_end"] == "commit"
    # 2024-07-01 12:00:00.000005 Berlin summer time (+2) = 10:00:00.000005 UTC
    assert row["commit_ts"] == _dt.datetime(2024, 7, 1, 10, 0, 0, 5, tzinfo=UTC)


def test_delete_and_commit_record():
    commit = ticks(2024, 1, 15, 10, 30)
    data = record(RATES, rate_row(), action=b"D", tsn=77) + \
        E.commit_record(commit, commit, 77, tid=5, pid=0x20201234, rm_tid=b"g" * 16, aercp=b"x")
    d, c = decode(data)
    assert d["op"] == "d" and d["after"] is None
    assert json.loads(d["before"]) == {"CCY": "EUR", "FACTOR": 1.5, "MID": 1.0875,
                                       "AS_OF": "2024-01-15", "SOURCE_ID": 7, "NOTE": "ecb"}
    assert c["kind"] == "commit" and c["trx_end"] == "commit" and c["trx_id"] == "77"
    assert c["commit_position"] == d["commit_position"]
    assert c["position"] > d["position"]
    assert c["record_offset"] == len(data) - 72 - 8 - 17
    # 10:30 Berlin winter time (+1)
    assert c["commit_ts"] == d["commit_ts"] == _dt.datetime(2024, 1, 15, 9, 30, tzinfo=UTC)


def test_record_type_unknown_then_relation_name():
    rows = decode(record(ACCOUNTS, [1, None, None, None, None, None, None, None, None],
                         record_type=4711, relation="ACCOUNTS")
                  + record(ACCOUNTS, [2] + [None] * 8, record_type=4711, relation="accounts"))
    assert [r["table_id"] for r in rows] == ["41", "41"]
    assert [r["kind"] for r in rows] == ["change", "change"]


def test_record_type_wins_over_relation_name():
    [row] = decode(record(RATES, rate_row(), relation="ACCOUNTS"))
    assert row["table_id"] == "47"


def test_nulls_across_two_bytes_of_the_bit_vector():
    values = [5, None, 3, None, Float4(0.25), "Anna", None, _dt.date(1999, 12, 31), None]
    data, nbv = E.RowEncoder(ACCOUNTS).encode(values)
    assert nbv == bytes([0b01001010, 0b00000001])          # columns 1, 3, 6, 8
    [row] = decode(record(ACCOUNTS, values))
    assert json.loads(row["after"]) == {"ACCOUNT_ID": 5, "BRANCH": None, "STATUS": 3,
                                        "BALANCE": None, "RATE": 0.25, "HOLDER": "Anna",
                                        "CURRENCY": None, "OPENED": "1999-12-31",
                                        "UPDATED": None}


# --------------------------------------------------------------------------- round trips

_TYPES = {
    "TINYINT": lambda c: st.integers(-128, 127),
    "SMALLINT": lambda c: st.integers(-2**15, 2**15 - 1),
    "INTEGER": lambda c: st.integers(-2**31, 2**31 - 1),
    "BIGINT": lambda c: st.integers(-2**63, 2**63 - 1),
    "REAL": lambda c: st.floats(width=32, allow_nan=False).map(Float4),
    "DOUBLE": lambda c: st.floats(allow_nan=False),
    "CHAR": lambda c: st.text(st.characters(min_codepoint=32, max_codepoint=255),
                              min_size=c.length, max_size=c.length),
    "VARCHAR": lambda c: st.text(st.characters(min_codepoint=1, max_codepoint=255),
                                 max_size=c.length),
    "DATE": lambda c: st.dates(min_value=_dt.date(1858, 11, 17)),
    "TIMESTAMP": lambda c: st.datetimes(min_value=_dt.datetime(1858, 11, 17)),
}


@st.composite
def tables(draw):
    n = draw(st.integers(1, 20))
    cols = []
    for i in range(n):
        t = draw(st.sampled_from(sorted(_TYPES)))
        length = draw(st.integers(1, 12)) if t in ("CHAR", "VARCHAR") else None
        cols.append(Column(f"C{i}", t, draw(st.booleans()), length))
    return Table(str(draw(st.integers(1, 2**31))), "S", "T" + str(n), tuple(cols))


@st.composite
def table_and_rows(draw):
    table = draw(tables())
    rows = []
    for _ in range(draw(st.integers(1, 3))):
        row = []
        for c in table.columns:
            value = draw(_TYPES[c.type](c))
            row.append(None if c.nullable and draw(st.booleans()) else value)
        rows.append(row)
    return table, rows


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_and_rows(), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1),
       st.datetimes(min_value=_dt.datetime(1900, 1, 1), max_value=_dt.datetime(2200, 1, 1)),
       st.integers(0, 9), st.sampled_from([None, b"\xff", b"\x01\x80"]), st.booleans())
def test_round_trip(tr, tsn, dbk, commit_local, sub_us, fill, with_commit):
    table, rows = tr
    cat = Catalog("fin_rdb", "rdb", (table,))
    enc = E.RowEncoder(table)
    commit = ticks(*commit_local.timetuple()[:6], commit_local.microsecond) + sub_us
    data = b""
    for i, values in enumerate(rows):
        raw, nbv = enc.encode(values, null_fill=fill)
        assert len(raw) == enc.width and len(nbv) == (len(table.columns) + 7) // 8
        data += E.row_record(b"M" if i % 2 == 0 else b"D", table.name, int(table.id), dbk,
                             commit, commit, tsn, raw, nbv, nbv_bits=len(table.columns))
    if with_commit:
        data += E.commit_record(commit, commit, tsn)
    out = decode(data, cat, timezone="UTC")
    assert len(out) == len(rows) + with_commit
    render = RowRenderer(table.columns)
    cpos = f"{commit:016X}{tsn:016X}"
    for i, (values, row) in enumerate(zip(rows, out)):
        assert row["kind"] == "change", row["message"]
        image = row["after"] if i % 2 == 0 else row["before"]
        assert image == render(values)
        assert row["op"] == ("m" if i % 2 == 0 else "d")
        assert row["row_id"] == f"{dbk >> 48}:{(dbk >> 16) & 0xFFFFFFFF}:{dbk & 0xFFFF}"
        assert row["commit_position"] == cpos and row["position"] == cpos + f"{i:08X}"
        assert row["commit_ts"] == commit_local.replace(tzinfo=UTC)
        assert row["trx_id"] == str(tsn)
    if with_commit:
        assert out[-1]["kind"] == "commit" and out[-1]["commit_position"] == cpos


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 2000), st.binary(min_size=1, max_size=8))
def test_never_crashes_on_damaged_input(noise, where, patch):
    good = record(RATES, rate_row()) + E.commit_record(0, ticks(2024, 1, 1), 1) + \
        record(ACCOUNTS, [1] + [None] * 8)
    where %= len(good)
    damaged = good[:where] + patch + good[where + len(patch):] + noise
    rows = decode(damaged)
    assert rows
    offsets = [r["record_offset"] for r in rows]
    assert offsets == sorted(offsets) and all(0 <= o < len(damaged) for o in offsets)


# --------------------------------------------------------------------------- VMS times

@pytest.mark.parametrize("tick, text", [
    (0, "1858-11-17T00:00:00.000000"),                                   # the VMS epoch
    (UNIX_EPOCH_TICKS, "1970-01-01T00:00:00.000000"),                    # the Unix epoch
    (UNIX_EPOCH_TICKS + 9, "1970-01-01T00:00:00.000000"),               # < 1 us: truncated
    (UNIX_EPOCH_TICKS + 10, "1970-01-01T00:00:00.000001"),
    (UNIX_EPOCH_TICKS + 12_345_679, "1970-01-01T00:00:01.234567"),      # fractional ticks
    (UNIX_EPOCH_TICKS - 1, "1969-12-31T23:59:59.999999"),
    (ticks(9999, 12, 31, 23, 59, 59, 999999) + 9, "9999-12-31T23:59:59.999999"),  # far future
])
def test_vms_time_columns(tick, text):
    table = Table("5", "S", "TIMES", (Column("TS", "TIMESTAMP"), Column("D", "DATE")))
    data = struct.pack("<qq", tick, tick)
    raw = E.row_record(b"M", "TIMES", 5, 0, 0, UNIX_EPOCH_TICKS, 1, data, b"\x00", nbv_bits=2)
    [row] = decode(raw, Catalog("x", "rdb", (table,)))
    assert json.loads(row["after"]) == {"TS": text, "D": text[:10]}


@pytest.mark.parametrize("tick", [-1, ticks(9999, 12, 31, 23, 59, 59, 999999) + 10, 2**63 - 1])
def test_vms_time_out_of_range_is_quarantined(tick):
    table = Table("5", "S", "TIMES", (Column("TS", "TIMESTAMP"),))
    raw = E.row_record(b"M", "TIMES", 5, 0, 0, UNIX_EPOCH_TICKS, 1, struct.pack("<q", tick),
                       b"\x00", nbv_bits=1)
    [row] = decode(raw, Catalog("x", "rdb", (table,)))
    assert row["kind"] == "quarantine" and row["error_class"] == "bad_value"
    assert "TS" in row["message"] and row["record_offset"] == 0


@pytest.mark.parametrize("tz, local, utc", [
    ("UTC", (1858, 11, 17), (1858, 11, 17)),                          # VMS epoch
    ("UTC", (1970, 1, 1), (1970, 1, 1)),
    ("Europe/Berlin", (1970, 1, 1), (1969, 12, 31, 23)),
    ("Europe/Berlin", (2024, 3, 31, 1, 59, 59), (2024, 3, 31, 0, 59, 59)),   # before DST
    ("Europe/Berlin", (2024, 3, 31, 3, 0, 0), (2024, 3, 31, 1, 0, 0)),       # after DST
    ("Europe/Berlin", (2024, 10, 27, 2, 30), (2024, 10, 27, 0, 30)),         # ambiguous: 1st
    ("Europe/Berlin", (9999, 12, 31, 23, 59, 59), (9999, 12, 31, 22, 59, 59)),
    ("America/Chicago", (2024, 1, 15, 18, 0, 0, 1), (2024, 1, 16, 0, 0, 0, 1)),
])
def test_commit_tad_is_local_time_of_the_source(tz, local, utc):
    commit = ticks(*local) + 7                      # sub-microsecond ticks are dropped
    [row] = decode(record(RATES, rate_row(), commit=commit), timezone=tz)
    assert row["commit_ts"] == _dt.datetime(*utc, tzinfo=UTC)
    assert row["commit_position"].startswith(f"{commit:016X}")


@pytest.mark.parametrize("tz", ["Europe/Berlin", "America/St_Johns", "Australia/Lord_Howe",
                                "Pacific/Apia", "Asia/Kathmandu", "America/Chicago"])
def test_commit_times_by_span_equal_the_clock_per_value(tz):
    """The fast path's commit times (the UTC offset read per 15-minute span of local time)
    are ``CommitClock``'s, value by value: across DST transitions (gaps, folds, 30-minute
    and 45-minute offsets, a skipped day), local mean times and the calendar's bounds."""
    import numpy as np
    from zoneinfo import ZoneInfo

    from decoders.rdb.decoder import local_to_utc, local_to_utc_us

    us = lambda *a: int((_dt.datetime(*a) - _dt.datetime(1970, 1, 1)) // _dt.timedelta(microseconds=1))
    step = 7 * 60 * 1_000_000 + 13                    # every 7 minutes, never on a span's edge
    local = np.unique(np.concatenate([
        np.arange(us(2011, 12, 28), us(2012, 1, 2), step),        # Apia skips 2011-12-30
        np.arange(us(2024, 3, 9), us(2024, 4, 8), step),          # spring transitions
        np.arange(us(2024, 10, 1), us(2024, 11, 5), step),        # autumn transitions
        np.arange(us(1890, 1, 1), us(1893, 1, 1), 97 * step),     # local mean time ends
        np.arange(us(1, 1, 1), us(1, 1, 2), step),                # the calendar's bounds
        np.arange(us(9999, 12, 30, 23), us(9999, 12, 31, 23, 59), step)]))
    got, bad = local_to_utc_us(local, ZoneInfo(tz))
    epoch = _dt.datetime(1970, 1, 1, tzinfo=UTC)
    for v, g, b in zip(local.tolist(), got.tolist(), bad.tolist()):
        try:        # what CommitClock.utc does with the local time
            want = (local_to_utc(_dt.datetime(1970, 1, 1) + _dt.timedelta(microseconds=v), tz)
                    - epoch) // _dt.timedelta(microseconds=1)
        except (OverflowError, ValueError):
            assert b, v
            continue
        assert not b and g == want, (tz, v)


@pytest.mark.parametrize("tz, commit", [
    ("UTC", -5),                                                    # a delta time
    ("America/Chicago", ticks(9999, 12, 31, 23, 0)),                # UTC is past year 9999
])
def test_bad_commit_tad_is_quarantined(tz, commit):
    [row] = decode(record(RATES, rate_row(), commit=commit), timezone=tz)
    assert row["kind"] == "quarantine" and row["error_class"] == "bad_value"
    assert "COMMIT_TAD" in row["message"]


# --------------------------------------------------------------------------- corrupt inputs

GOOD = record(RATES, rate_row())        # 74 + 39 + 1 bytes


def kinds(rows):
    return [(r["kind"], r["error_class"], r["record_offset"]) for r in rows]


def test_data_len_past_end_of_file():
    bad = record(RATES, rate_row(), len_data=5000)
    rows = decode(GOOD + bad + GOOD)       # the damaged record costs only its own bytes
    assert kinds(rows) == [("change", None, 0), ("quarantine", "truncated", len(GOOD)),
                           ("change", None, len(GOOD) + len(bad))]
    assert "DATA_LEN" in rows[1]["message"] and "0x72" in rows[1]["message"]
    assert rows[1]["raw_hex"] == bad.hex() and rows[1]["n_bytes"] == len(bad)


def test_null_bit_vector_past_end_of_file():
    rows = decode(GOOD + GOOD[:-1])
    assert kinds(rows) == [("change", None, 0), ("quarantine", "truncated", len(GOOD))]


@pytest.mark.parametrize("cut", [1, 30, 73])
def test_truncated_header(cut):
    rows = decode(GOOD + GOOD[:cut])
    assert kinds(rows) == [("change", None, 0), ("quarantine", "truncated", len(GOOD))]
    assert "header" in rows[1]["message"]


def test_truncated_commit_header():
    rows = decode(GOOD + E.commit_record(1, 2, 3)[:50])
    assert kinds(rows) == [("change", None, 0), ("quarantine", "truncated", len(GOOD))]


@pytest.mark.parametrize("nbv_bits", [0, 5, 7, 8, 200])
def test_nbv_len_not_matching_the_table(nbv_bits):
    data, nbv = E.RowEncoder(RATES).encode(rate_row())
    bad = E.row_record(b"M", "FX_RATES", 47, 0, 0, 1, 9, data, b"\x00" * ((nbv_bits + 7) // 8),
                       nbv_bits=nbv_bits)
    rows = decode(GOOD + bad + GOOD)
    assert kinds(rows) == [("change", None, 0), ("quarantine", "corrupt", len(GOOD)),
                           ("change", None, len(GOOD) + len(bad))]
    assert "NBV_LEN" in rows[1]["message"] and rows[1]["trx_id"] == "9"


def test_data_len_not_matching_the_table():
    bad = record(RATES, rate_row())
    bad = bad[:36] + (38).to_bytes(2, "little") + bad[38:-2] + bad[-1:]     # one byte less
    rows = decode(GOOD + bad + GOOD)
    assert kinds(rows) == [("change", None, 0), ("quarantine", "corrupt", len(GOOD)),
                           ("change", None, len(GOOD) + len(bad))]
    assert "DATA_LEN" in rows[1]["message"] and "expected 39, got 38" in rows[1]["message"]


def test_unknown_relation():
    bad = record(RATES, rate_row(), record_type=999, relation="NO_SUCH_TABLE")
    rows = decode(GOOD + bad + GOOD)
    assert kinds(rows) == [("change", None, 0), ("quarantine", "unknown_table", len(GOOD)),
                           ("change", None, len(GOOD) + len(bad))]
    assert "NO_SUCH_TABLE" in rows[1]["message"] and "999" in rows[1]["message"]


def test_unknown_action_resyncs_at_the_next_record():
    rows = decode(GOOD + b"E" + GOOD[1:] + GOOD)
    assert kinds(rows) == [("change", None, 0),
                           ("quarantine", "unknown_record_type", len(GOOD)),
                           ("change", None, 2 * len(GOOD))]
    assert rows[1]["n_bytes"] == len(GOOD) and rows[1]["record_index"] == 1


def test_null_in_not_null_column():
    data, nbv = E.RowEncoder(RATES).encode(rate_row())
    bad = E.row_record(b"M", "FX_RATES", 47, 0, 0, 1, 9, data, b"\x01", nbv_bits=6)
    rows = decode(bad + GOOD)
    assert kinds(rows) == [("quarantine", "bad_value", 0), ("change", None, len(bad))]
    assert "CCY" in rows[0]["message"]


def test_varchar_length_beyond_the_column():
    bad = bytearray(GOOD)
    note = 74 + 3 + 4 + 8 + 8 + 2                        # NOTE's 2-byte length
    bad[note:note + 2] = (13).to_bytes(2, "little")
    rows = decode(bytes(bad))
    assert kinds(rows) == [("quarantine", "bad_value", 0)]
    assert "NOTE" in rows[0]["message"]


def test_bad_commit_record_lengths():
    bad = bytearray(E.commit_record(1, ticks(2024, 1, 1), 3, rm_tid=b"x" * 4))
    bad[72:76] = (5).to_bytes(4, "little")               # RM_TID_LEN 5, DATA_LEN says 4
    rows = decode(bytes(bad) + GOOD)
    assert kinds(rows) == [("quarantine", "corrupt", 0), ("change", None, len(bad))]


def test_empty_archive():
    assert decode(b"") == []


def test_catalog_type_lldf_only_is_unknown_table():
    table = Table("47", "FIN", "FX_RATES", (Column("X", "DECIMAL", precision=5, scale=2),))
    [row] = decode(GOOD, Catalog("x", "rdb", (table,)))
    assert row["kind"] == "quarantine" and row["error_class"] == "unknown_table"


# --------------------------------------------------------------------------- golden files

def _golden_archive() -> bytes:
    c1 = ticks(2024, 3, 31, 1, 59, 59, 999999) + 3        # last second of winter time
    c2 = ticks(2024, 3, 31, 3, 0, 0, 1)                   # first second of summer time
    return b"".join([
        record(ACCOUNTS, [100, 12, 1, 2500.5, Float4(0.015), "Müller", "EUR",
                          _dt.date(2001, 5, 1), _dt.datetime(2024, 3, 30, 23, 59, 59, 123456)],
               tsn=90001, commit=c1, start=c1 - 40_000_000, dbk=L.dbk_value(2, 1000, 1)),
        record(LEDGER, [7_000_000_000, 100, -17.25, None, _dt.date(2024, 3, 31), None, -3],
               tsn=90001, commit=c1, dbk=L.dbk_value(3, 1000, 1)),
        E.commit_record(c1 - 40_000_000, c1, 90001, tid=12, pid=0x20200415),
        record(RATES, rate_row("CHF", None, 0.9512, None, None, "snb"), action=b"D",
               tsn=90000, commit=c2, dbk=L.dbk_value(4, 1002, 40), record_type=147,
               relation="FX_RATES"),
        record(ACCOUNTS, [101] + [None] * 8, tsn=90000, commit=c2, dbk=L.dbk_value(2, 1000, 2)),
    ])


def _golden_corrupt() -> bytes:
    return b"".join([
        GOOD,
        record(RATES, rate_row(), record_type=999, relation="GONE"),
        E.row_record(b"M", "FX_RATES", 47, 0, 0, 1, 9, GOOD[74:-1], b"\x00\x00", nbv_bits=9),
        record(RATES, rate_row(), commit=-1),
        record(RATES, rate_row(), len_data=999),
    ])


@pytest.mark.parametrize("name, build", [("night", _golden_archive),
                                         ("corrupt", _golden_corrupt)])
def test_golden(name, build):
    rows = decode(build(), archive=f"fin_rdb/2024-03-31/{name}.rdb")
    check_golden(rows, GOLDEN / "rdb" / f"{name}.jsonl")


# --------------------------------------------------------------------------- a whole night

def resolve(rows: list[dict]) -> list[dict]:
    """What the ordering job does (docs/ARCHITECTURE.md), in plain Python."""
    trxs: dict[str, dict] = {}
    for r in rows:
        if r["kind"] == "quarantine":
            continue
        t = trxs.setdefault(r["trx_id"], {"changes": [], "commit": set()})
        if r["trx_end"] == "commit":
            t["commit"].add((r["commit_position"], r["commit_ts"]))
        if r["kind"] == "change":
            t["changes"].append(r)
    out = []
    for trx_id, t in sorted(trxs.items(), key=lambda kv: (min(kv[1]["commit"])[0], kv[0])):
        assert len(t["commit"]) == 1, trx_id                  # one commit position per trx
        [(cpos, cts)] = t["commit"]
        for r in sorted(t["changes"], key=lambda r: (r["trx_order"], r["position"],
                                                      r["archive_file"], r["record_index"])):
            out.append({"trx_id": trx_id, "commit_position": cpos, "commit_ts": cts,
                        "op": r["op"], "table_id": r["table_id"],
                        "schema_name": r["schema_name"], "table_name": r["table_name"],
                        "before": r["before"], "after": r["after"], "ddl": r["ddl"],
                        "row_id": r["row_id"]})
    return out


@pytest.mark.parametrize("seed, commit_records", [(1, None), (2, True), (3, False), (4, None)])
def test_generated_nights_publish_exactly(seed, commit_records):
    synth = rdb.Synth("fin_rdb", options={"commit_records": commit_records}, seed=seed)
    assert synth.timezone == "Europe/Berlin"
    kinds_seen: set = set()
    live_rows: set = set()
    for night in synth.nights(_dt.date(2024, 10, 26), 3, 60):     # a DST change inside
        assert len(night.archives) == 2
        rows = []
        for name in sorted(night.archives, key=rdb.archive_sort_key):
            got = decode(night.archives[name], synth.catalog,
                         archive=f"fin_rdb/{night.date}/{name}")
            # accounting: every record written is one row, none quarantined
            assert sum(r["n_records"] for r in got) == synth.records_written[name]
            assert not [r for r in got if r["kind"] == "quarantine"]
            kinds_seen |= {r["kind"] for r in got}
            rows += got
        published = resolve(rows)
        expected = [e.as_dict() for e in night.expected]
        assert published == expected
        # commit order is file order, and commit_ts follows it
        positions = [e["commit_position"] for e in expected]
        assert positions == sorted(positions)
        stamps = [e["commit_ts"] for e in expected]
        assert stamps == sorted(stamps) and all(s.tzinfo is not None for s in stamps)
        assert {e["op"] for e in expected} == {"m", "d"}
        # LogMiner gives only the final image of a row per transaction
        per_trx = [(e["trx_id"], e["row_id"]) for e in expected]
        assert len(per_trx) == len(set(per_trx))
        for e in expected:                 # a delete removes a row an earlier change wrote
            if e["op"] == "d":
                live_rows.remove(e["row_id"])
            else:
                live_rows.add(e["row_id"])
        assert any("null" in (e["after"] or e["before"]) for e in expected)
    if commit_records is False:
        assert "commit" not in kinds_seen
    elif commit_records:
        assert "commit" in kinds_seen


def test_generated_night_covers_every_rdb_type_and_the_name_fallback():
    synth = rdb.Synth("fin_rdb", seed=9)
    types = {c.type for t in synth.catalog.tables for c in t.columns}
    assert types == set(L.RDB_TYPES)
    night = synth.night(_dt.date(2024, 6, 1), 200)
    record_types = set()
    for data in night.archives.values():
        off = 0
        while off < len(data):
            size = 74 if data[off:off + 1] != b"C" else 72
            rtype, dlen, nbits = struct.unpack_from("<IHH", data, off + 32)
            record_types.add(rtype)
            off += size + dlen + (nbits + 7) // 8
    assert {41, 42, 47} < record_types and record_types - {0, 41, 42, 47}   # 0 = commit


def test_sample_catalog_file():
    path = ROOT / "include" / "catalogs" / "fin_rdb.json"
    assert load_catalog(path) == rdb.Synth("fin_rdb").catalog
    assert path.read_text(encoding="utf-8").strip() == rdb.Synth("fin_rdb").catalog.dumps()
