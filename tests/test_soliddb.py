"""solidDB SYS_LOG: encoder/decoder round trips, golden files, corrupt inputs."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decoders import codecs as C
from decoders import get
from decoders.base import DecodeContext
from decoders.catalog import Catalog, Column, Table, load_catalog
from decoders.events import EventSink
from decoders.soliddb import encoder as E
from decoders.soliddb import layout as L
from decoders.synth import Planner, default_value, render

from .golden import GOLDEN, check_golden
from .conftest import REPO

solid = get("soliddb")


def decode(data: bytes, catalog: Catalog, name: str = "a.csv") -> list[dict]:
    sink = EventSink("s", "soliddb", name)
    solid.decode(data, DecodeContext("s", "soliddb", catalog, name), sink)
    rows = sink.rows()
    assert sum(r["n_records"] for r in rows) == sink.records_read
    return rows


TYPES = [Column("I", "INTEGER", False), Column("S", "SMALLINT"), Column("T", "TINYINT"),
         Column("B", "BIGINT"), Column("D", "DECIMAL", precision=9, scale=3), Column("R", "REAL"),
         Column("F", "DOUBLE"), Column("FL", "FLOAT"), Column("C", "CHAR", length=5),
         Column("V", "VARCHAR", length=20), Column("BI", "BINARY", length=3),
         Column("VB", "VARBINARY", length=8), Column("DA", "DATE"), Column("TI", "TIME"),
         Column("TS", "TIMESTAMP"), Column("BL", "BLOB"), Column("CL", "CLOB")]
TABLE = Table("77", "APP", "ALLTYPES", tuple(TYPES))
CATALOG = Catalog("s", "soliddb", (TABLE,))


def addr(n: int) -> bytes:
    return E.logaddr(n)


@st.composite
def rows(draw):
    seed = draw(st.integers(0, 2**32))
    import random
    rng = random.Random(seed)
    return [default_value(c, rng) for c in TYPES]


@settings(max_examples=150, deadline=None)
@given(rows(), st.sampled_from(["c", "d", "u"]), st.booleans())
def test_row_round_trip(values, op, upper):
    recs = [E.csv_row(L.TRX_START, 9, 9, None, 0, addr(1), None)]
    if op == "c":
        recs.append(E.csv_row(L.INSERT, 9, 10, 77, 1, addr(2), E.encode_row(TABLE, values), upper=upper))
    elif op == "d":
        recs.append(E.csv_row(L.DELETE_FULL, 9, 10, 77, 1, addr(2), E.encode_row(TABLE, values), upper=upper))
    else:
        recs.append(E.csv_row(L.UPDATE_BEFOREIMAGE, 9, 10, 77, 1, addr(2), E.encode_row(TABLE, values)))
        recs.append(E.csv_row(L.UPDATE, 9, 10, 77, 1, addr(3), E.encode_row(TABLE, values), upper=upper))
    recs.append(E.csv_row(L.COMMIT, 9, 9, None, 0, addr(4), None))
    out = decode(E.write_archive(recs), CATALOG)
    kinds = [r["kind"] for r in out]
    assert kinds == ["begin", "change", "commit"]
    change = out[1]
    expected = render(TABLE, values)
    assert change["op"] == op
    assert change["after" if op != "d" else "before"] == expected
    if op == "u":
        assert change["before"] == expected and change["n_records"] == 2
    assert out[2]["commit_position"] == addr(4).hex().upper()


def test_value_layouts_by_hand():
    """Bytes written by hand from the vendor document, not by the encoder."""
    tab = Table("5", "S", "T", (Column("A", "INTEGER"), Column("B", "VARCHAR", length=9),
                                Column("C", "TIMESTAMP"), Column("D", "DECIMAL", precision=5, scale=2),
                                Column("E", "BLOB"), Column("F", "DOUBLE")))
    data = (b"\x00\x00\x00\x04\x12\x34\x56\x78"              # INTEGER 0x12345678, MSB first
            b"\x00\x00\x00\x02hi"                              # VARCHAR 'hi'
            b"\x00\x00\x00\x0b\x07\xea\x0b\x16\x01\x02\x03\x00\x00\x03\xe8"  # 2026-11-22 01:02:03 + 1000 ns
            b"\x00\x00\x00\x04-1.5"                            # DECIMAL as a string
            b"\xff\xff\xff\xfe\x00\x00\x00\x00\x00\x00\x01\x00"  # BLOB id 256
            b"\xff\xff\xff\xff")                               # NULL
    from decoders.soliddb.decoder import RowCodec
    assert json.loads(RowCodec(tab).decode(data)) == {
        "A": 0x12345678, "B": "hi", "C": "2026-11-22T01:02:03.000001", "D": "-1.50",
        "E": {"blob_id": 256}, "F": None}


def capture_and_pairs_archive() -> bytes:
    v1 = [1, 2, 3, 4, Decimal("1.5"), C.Float4(0.5), 2.25, 1.0, "abcde", "x", b"\x01\x02\x03",
          b"", dt.date(2020, 1, 2), dt.time(1, 2, 3), dt.datetime(2020, 1, 2, 3, 4, 5, 6),
          C.BlobRef(5), "clob"]
    v2 = list(v1)
    v2[9] = "changed"
    recs = [
        E.csv_row(L.EMPTY, None, None, None, 0, None, None),
        E.csv_row(L.TRX_START, 1, 1, None, 0, addr(10), None),
        E.csv_row(L.TRX_START, 2, 2, None, L.FLAG_CAPTURE_OFF, addr(11), None),
        E.csv_row(L.INSERT, 1, 2, 77, 1, addr(12), E.encode_row(TABLE, v1)),
        E.csv_row(L.INSERT, 2, 3, 77, 1, addr(13), E.encode_row(TABLE, v1)),
        E.csv_row(L.UPDATE_BEFOREIMAGE, 1, 2, 77, 1, addr(14), E.encode_row(TABLE, v1)),
        E.csv_row(L.UPDATE, 1, 2, 77, 1, addr(15), E.encode_row(TABLE, v2)),
        E.csv_row(L.DDL, 1, 1, 77, 1, addr(16), E.encode_ddl(22, "APP.ALLTYPES")),
        E.csv_row(L.SQL, 1, 1, 77, 1, addr(17), E.encode_sql("ALTER TABLE APP.ALLTYPES ADD X INT")),
        E.csv_row(L.DDL, 2, 2, 77, 1, addr(18), E.encode_ddl(73, "APP.ALLTYPES")),
        E.csv_row(L.COMMIT, 2, 2, None, 0, addr(19), None),
        E.csv_row(L.DELETE_FULL, 1, 2, 77, 1, addr(20), E.encode_row(TABLE, v2)),
        E.csv_row(L.COMMIT, 1, 1, None, 0, addr(21), None),
        E.csv_row(L.TRX_START, 3, 3, None, 0, addr(22), None),
        E.csv_row(L.INSERT, 3, 4, 77, 1, addr(23), E.encode_row(TABLE, v1)),
    ]
    return E.write_archive(recs)


def test_golden_pairs_capture_off_ddl():
    check_golden(decode(capture_and_pairs_archive(), CATALOG, "night.csv"),
                 GOLDEN / "soliddb" / "pairs_capture_ddl.jsonl")


def test_pairing_and_ddl_semantics():
    out = decode(capture_and_pairs_archive(), CATALOG)
    kinds = Counter(r["kind"] for r in out)
    assert kinds == {"begin": 3, "change": 7, "commit": 2, "skip": 1}
    assert sum(r["n_records"] for r in out) == 15
    u = [r for r in out if r["op"] == "u"][0]
    assert u["n_records"] == 2 and json.loads(u["before"])["V"] == "x" \
        and json.loads(u["after"])["V"] == "changed"
    ddl = [r for r in out if r["op"] == "ddl"]
    assert [d["ddl"] for d in ddl] == ["ALTER TABLE APP.ALLTYPES ADD X INT", "Truncate table APP.ALLTYPES"]
    assert [r for r in out if r["kind"] == "begin" and r["flag"] == "capture_off"][0]["trx_id"] == "2"


CORRUPT_CASES = {
    # name: (row builder, error_class)
    "data_shorter_than_lengths": (
        lambda: E.csv_row(L.INSERT, 1, 1, 77, 1, addr(3), E.encode_row(TABLE, [1] + [None] * 16)[:-6]),
        "truncated"),
    "odd_length_hex": (lambda: E.csv_row(L.INSERT, 1, 1, 77, 1, addr(3), None)[:-2] + "ABC\r\n",
                       "corrupt"),
    "unknown_relid": (lambda: E.csv_row(L.INSERT, 1, 1, 999, 1, addr(3),
                                        E.encode_row(TABLE, [1] + [None] * 16)), "unknown_table"),
    "unknown_recid": (lambda: E.csv_row(42, 1, 1, 77, 1, addr(3), None), "unknown_record_type"),
    "too_few_fields": (lambda: "1,DBE_LOGREADER_LOG_REC_INSERT,1,1\r\n", "corrupt"),
}


@pytest.mark.parametrize("case", sorted(CORRUPT_CASES))
def test_corrupt_record_quarantined_with_offset_rest_decoded(case):
    build, error_class = CORRUPT_CASES[case]
    good = E.encode_row(TABLE, [1] + [None] * 16)
    head = (",".join(L.HEADER) + "\r\n").encode()
    r1 = E.csv_row(L.TRX_START, 1, 1, None, 0, addr(1), None).encode()
    r2 = E.csv_row(L.INSERT, 1, 1, 77, 1, addr(2), good).encode()
    bad = build().encode()
    r4 = E.csv_row(L.COMMIT, 1, 1, None, 0, addr(4), None).encode()
    data = head + r1 + r2 + bad + r4
    out = decode(data, CATALOG)
    q = [r for r in out if r["kind"] == "quarantine"]
    assert len(q) == 1
    assert q[0]["error_class"] == error_class
    assert q[0]["record_offset"] == len(head) + len(r1) + len(r2)
    assert q[0]["raw_hex"] == bad[:256].hex()
    assert [r["kind"] for r in out] == ["begin", "change", "quarantine", "commit"]


def test_truncated_tail_row():
    data = E.write_archive([E.csv_row(L.TRX_START, 1, 1, None, 0, addr(1), None),
                            E.csv_row(L.INSERT, 1, 1, 77, 1, addr(2),
                                      E.encode_row(TABLE, [1] + [None] * 16))])
    cut = data[:-21]
    out = decode(cut, CATALOG)
    assert out[-1]["kind"] == "quarantine" and out[-1]["error_class"] == "truncated"
    assert out[-1]["record_offset"] == data.index(b"1,DBE_LOGREADER_LOG_REC_INSERT")


def test_garbage_never_raises():
    import random
    rng = random.Random(3)
    base = capture_and_pairs_archive()
    for _ in range(300):
        b = bytearray(base)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        out = decode(bytes(b[: rng.randint(0, len(b))]), CATALOG)
        assert all(r["kind"] in {"begin", "commit", "change", "skip", "quarantine"} for r in out)


def test_synth_night_decodes_to_what_was_written():
    gen = solid.Synth("pos_solid", seed=11)
    night = gen.night(dt.date(2026, 11, 1), 300)
    events = []
    for name, data in night.archives.items():
        events += decode(data, gen.catalog, name)
    assert not [e for e in events if e["kind"] == "quarantine"]
    commits = {e["trx_id"]: e["commit_position"] for e in events if e["kind"] == "commit"}
    off = {e["trx_id"] for e in events if e["kind"] == "begin" and e["flag"] == "capture_off"}
    got = sorted((e for e in events if e["kind"] == "change" and e["trx_id"] in commits
                  and e["trx_id"] not in off),
                 key=lambda e: (commits[e["trx_id"]], e["trx_order"]))
    assert [(g["trx_id"], g["op"], g["before"], g["after"], g["ddl"]) for g in got] == \
        [(x.trx_id, x.op, x.before, x.after, x.ddl) for x in night.expected]


def test_sample_catalog_matches_generator():
    committed = load_catalog(REPO / "include" / "catalogs" / "pos_solid.json")
    assert committed == solid.Synth("pos_solid").catalog


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(alphabet="0123456789abcdefABCDEFgG xé\r", max_size=12)),
                max_size=30), st.integers(0, 5))
def test_hex_only_agrees_with_the_regex(texts, start):
    """The fast path's hex check (one table lookup over the column's bytes) says what the
    regular expression ``^[0-9A-Fa-f]*$`` says, on sliced arrays too; null is not hex."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from decoders.soliddb.decoder import _hex_only

    arr = pa.array(texts, pa.string()).slice(min(start, len(texts)))
    want = [bool(v) if v is not None else False
            for v in pc.match_substring_regex(arr, "^[0-9A-Fa-f]*$").to_pylist()]
    assert _hex_only(arr).tolist() == want


_ID = st.one_of(st.integers(0, 10**18 - 1).map(str), st.integers(-99, -1).map(str),
                st.just(""), st.just(" 7"), st.just("7 "), st.just("1" * 19), st.just("0x1f"))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_ID, _ID), min_size=1, max_size=25))
def test_split_ids_read_what_the_csv_reader_reads(ids):
    """``split`` reads RECID and TRXID between the commas of the simple rows by digit
    arithmetic: where it says ok the values are the fields' integers (-1 for an empty
    field), and it says ok exactly for empty or 1-18 plain digits (the rest are parsed
    carefully)."""
    import numpy as np

    from decoders.soliddb.decoder import _split_ids, frame_rows

    lines = [",".join(L.HEADER)] + [f"{r},X,{t},{t},1,0,00AB,DEAD" for r, t in ids]
    data = ("\n".join(lines) + "\n").encode()
    rows, header = frame_rows(data)
    assert header == 0 and rows.simple[1:].all()
    which = np.arange(1, len(rows.starts))
    rid, tid, ok = _split_ids(np.frombuffer(data, np.uint8), rows, which)

    def plain(text: str) -> int | None:       # None: not for the fast reading
        if text == "":
            return -1
        return int(text) if text.isdigit() and len(text) <= 18 else None

    for k, (r, t) in enumerate(ids):
        want = (plain(r), plain(t))
        assert bool(ok[k]) == (None not in want), (r, t)
        if ok[k]:
            assert (int(rid[k]), int(tid[k])) == want, (r, t)


def test_split_never_cuts_between_a_before_image_and_its_pair():
    """Every cut of ``split`` at a small target falls where no before image (or DDL row)
    waits for the next row of its transaction, checked row by row with the csv module;
    TRXIDs with blanks (the careful parse) count like the others."""
    import csv
    import io

    from decoders.soliddb.decoder import split

    lines, n = [",".join(L.HEADER)], 0
    for i in range(400):
        a, b = 10 + i % 7, 10 + (i + 3) % 7
        ta = f" {a}" if i % 11 == 0 else str(a)
        lines.append(f"{L.UPDATE_BEFOREIMAGE},X,{ta},{ta},1,0,{n:040X},00")
        lines.append(f"{L.INSERT},X,{b},{b},1,0,{n + 1:040X},00")
        lines.append(f"{L.UPDATE},X,{a},{a},1,0,{n + 2:040X},00")
        n += 3
    data = ("\n".join(lines) + "\n").encode()
    ctx = DecodeContext("s", "soliddb", Catalog("s", "soliddb", ()), "a.csv", {}, "UTC")
    ranges = split(data, ctx, 300)
    assert len(ranges) > 20 and ranges[0]["start"] == 0 and ranges[-1]["end"] == len(data)
    starts, pos = [], 0
    for line in data.splitlines(keepends=True):
        starts.append(pos)
        pos += len(line)
    parsed = list(csv.reader(io.StringIO(data.decode())))
    trx = [int(f[2]) if k else None for k, f in enumerate(parsed)]
    rec = [int(f[0]) if k else None for k, f in enumerate(parsed)]
    cut_rows = {starts.index(r["start"]) for r in ranges[1:]}
    for k in range(1, len(parsed)):
        if rec[k] != L.UPDATE_BEFOREIMAGE:
            continue
        nxt = next(j for j in range(k + 1, len(parsed)) if trx[j] == trx[k])
        assert not any(k < c <= nxt for c in cut_rows), (k, nxt)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300), st.integers(1, 40))
def test_byte_positions_scanned_a_chunk_at_a_time_are_those_of_the_whole(data, chunk):
    """``frame_rows`` finds newlines, quotes, commas and non-ASCII bytes a chunk at a time
    (no mask as large as the archive): the same offsets as one pass, whatever the chunk
    size and wherever the chunks cut."""
    import numpy as np

    from decoders.soliddb import decoder as D

    buf = np.frombuffer(b"\n,\"\x80" + data, np.uint8)
    want = [np.flatnonzero(buf == 0x0A), np.flatnonzero(buf == 0x22),
            np.flatnonzero(buf == 0x2C), np.flatnonzero(buf >= 0x80)]
    saved = D.SCAN_CHUNK
    try:
        D.SCAN_CHUNK = chunk
        got = D.byte_positions(buf)
    finally:
        D.SCAN_CHUNK = saved
    for g, w in zip(got, want):
        assert g.dtype == np.int64 and g.tolist() == w.tolist()
