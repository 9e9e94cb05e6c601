"""Db2 LUW (SPEC section 3, db2luw): layouts, round trips, golden files, corrupt inputs and
a generated night resolved in plain Python against what the generator wrote."""

from __future__ import annotations

import datetime as _dt
import json
import string
from decimal import Decimal, localcontext
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decoders import get
from decoders.base import DecodeContext
from decoders.catalog import Catalog, Column, Table, load_catalog
from decoders.codecs import Float4, RowRenderer
from decoders.db2luw import layout as L
from decoders.db2luw.careful import RowCodec
from decoders.db2luw.encoder import Encoder, lsn, tid
from decoders.db2luw.synth import Synth
from decoders.events import EventSink

from .golden import GOLDEN, check_golden

db2 = get("db2luw")
ROOT = Path(__file__).resolve().parent.parent
BYTE_ORDERS = ("little", "big")
UTC = _dt.timezone.utc


def decode(data: bytes, catalog: Catalog, byte_order: str = "little", name: str = "S0000001.LOG",
           codepage: str = "utf-8") -> list[dict]:
    sink = EventSink(catalog.source, "db2luw", name)
    ctx = DecodeContext(catalog.source, "db2luw", catalog, name,
                        {"byte_order": byte_order, "codepage": codepage})
    assert db2.decode(data, ctx, sink) is None
    return sink.rows()


# ----------------------------------------------------------------- a small catalog

ORDERS = Table("2.5", "ERP", "ORDERS", (
    Column("ORDER_ID", "INTEGER", False), Column("NOTE", "VARCHAR", True, length=20),
    Column("AMOUNT", "DECIMAL", True, precision=7, scale=2), Column("QTY", "SMALLINT", False)))
NOTES = Table("3.9", "ERP", "NOTES", (
    Column("TEXT", "VARCHAR", False, length=30), Column("ID", "BIGINT", False)))
CAT = Catalog("t_db2", "db2luw", (ORDERS, NOTES))


class Log:
    """Writes a hand-made stream record by record and remembers each record's offset."""

    def __init__(self, byte_order: str = "little") -> None:
        self.enc = Encoder(byte_order)
        self.recs: list[bytes] = []
        self.offsets: list[int] = []
        self.n = 0x100
        self.last: dict[int, int] = {}
        self.lsns: list[int] = []

    def add(self, t: int, rtype: str, body: bytes, **kw) -> int:
        self.n += 0x40
        prev = self.last.get(t, 0)
        self.last[t] = self.n
        self.offsets.append(sum(map(len, self.recs)))
        self.lsns.append(self.n)
        self.recs.append(self.enc.record(lsn(self.n), rtype, body, tid_=tid(t), prev=lsn(prev),
                                         **kw))
        return len(self.recs) - 1

    def data(self) -> bytes:
        return b"".join(self.recs)


def pos(n: int) -> str:
    return format(n, "012X")


# ----------------------------------------------------------------- bytes written by hand

def test_hand_assembled_little_endian_insert_and_commit():
    """An insert and a commit assembled byte by byte from SPEC section 3 (not by the encoder)."""
    fixed = (b"\x07\x00\x00\x00"              # ORDER_ID INTEGER 7
             + b"\x10\x00\x02\x00" + b"\x00"  # NOTE: offset 16, length 2, not null
             + b"\x00\x12\x34\x5d" + b"\x00"  # AMOUNT DECIMAL(7,2) packed -123.45
             + b"\x03\x00")                   # QTY SMALLINT 3
    assert len(fixed) == 16
    fud = b"\x01\x00" + b"\x10\x00" + fixed + b"hi"
    image = b"\x00\x00" + (4 + len(fud)).to_bytes(2, "little") + fud
    body = (b"\x01\x76\x02\x00\x05\x00"               # DMS, 118, tablespace 2, table 5
            + b"\x00\x00" + b"\x03\x02\x01\x00"       # padding, RID 0x00010203
            + len(image).to_bytes(2, "little") + b"\x00\x00\x00\x00" + image)
    rec = (b"\x00\x00\x00\x00\x10\x00"                # LSN
           + (20 + len(body)).to_bytes(4, "little") + b"N\x00" + b"\x02\x00"
           + bytes(6) + b"\x00\x00\x00\x00\x00\x2a" + body)
    commit_body = (1_700_000_000).to_bytes(4, "little") + b"APPUSER "
    commit = (b"\x00\x00\x00\x00\x10\x80" + (20 + len(commit_body)).to_bytes(4, "little")
              + b"M\x00\x02\x00" + b"\x00\x00\x00\x00\x10\x00" + b"\x00\x00\x00\x00\x00\x2a"
              + commit_body)
    rows = decode(rec + commit, CAT)
    assert [r["kind"] for r in rows] == ["change", "commit"]
    ch, cm = rows
    assert ch["op"] == "c" and ch["table_id"] == "2.5" and ch["table_name"] == "ORDERS"
    assert ch["trx_id"] == "00000000002A" and ch["position"] == "000000001000"
    assert ch["row_id"] == "00010203" and ch["record_offset"] == 0
    assert json.loads(ch["after"]) == {"ORDER_ID": 7, "NOTE": "hi", "AMOUNT": "-123.45", "QTY": 3}
    assert cm["commit_position"] == "000000001080" and cm["trx_end"] == "commit"
    assert cm["commit_ts"] == _dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert cm["user"] == "APPUSER" and cm["record_offset"] == len(rec)
    # the encoder writes exactly these bytes
    enc = Encoder("little")
    assert enc.record(lsn(0x1000), "N", enc.insert(ORDERS, 0x10203, [7, "hi", Decimal("-123.45"), 3]),
                      tid_=tid(0x2A)) == rec


def test_hand_assembled_big_endian_update():
    def image(order_id: int, note: bytes) -> bytes:
        fixed = (order_id.to_bytes(4, "big") + b"\x00\x10" + len(note).to_bytes(2, "big") + b"\x00"
                 + bytes(4) + b"\x01" + b"\x00\x09")  # AMOUNT NULL, QTY 9
        fud = b"\x01\x00\x00\x10" + fixed + note
        return b"\x00\x00" + (4 + len(fud)).to_bytes(2, "big") + fud

    old, new = image(1, b"old"), image(1, b"newer")
    block = b"\x01\x78\x00\x02\x00\x05" + b"\x00\x00" + b"\x00\x00\x01\x07"
    body = (block + len(old).to_bytes(2, "big") + bytes(4) + old
            + block + len(new).to_bytes(2, "big") + bytes(4) + new)
    rec = b"\x00\x00\x00\x00\x20\x00" + (20 + len(body)).to_bytes(4, "big") + b"\x00N\x00\x02" \
        + bytes(6) + b"\x00\x00\x00\x00\x00\x01" + body
    (row,) = decode(rec, CAT, "big")
    assert row["op"] == "u" and row["row_id"] == "00000107"
    assert json.loads(row["before"]) == {"ORDER_ID": 1, "NOTE": "old", "AMOUNT": None, "QTY": 9}
    assert json.loads(row["after"]) == {"ORDER_ID": 1, "NOTE": "newer", "AMOUNT": None, "QTY": 9}
    enc = Encoder("big")
    assert enc.record(lsn(0x2000), "N", enc.update(ORDERS, 0x107, [1, "old", None, 9],
                                                  [1, "newer", None, 9]), tid_=tid(1)) == rec


def test_compensation_header_sizes():
    enc = Encoder("little")
    body = enc.undo_insert("2.5", 1)
    assert len(enc.record(lsn(1), "N", body, tid_=tid(1))) == 6 + 20 + len(body)
    assert len(enc.record(lsn(1), "C", body, tid_=tid(1), flags=0)) == 6 + 26 + len(body)
    assert len(enc.record(lsn(1), "C", body, tid_=tid(1))) == 6 + 32 + len(body)
    assert L.DOM_HEADER.size == 12 and L.DMS_HEADER.size == 6       # Tables 96, 97
    assert L.REORG.size == 268 and L.INIT_TABLE_V7.size == 88       # Tables 101, 98
    assert L.ROW_V7.size == 18 and L.UNDO_INSERT_V7.size == 16      # Tables 106, 100


# ----------------------------------------------------------------- hypothesis round trips

DB2_TYPES = ("SMALLINT", "INTEGER", "BIGINT", "REAL", "DOUBLE", "DECIMAL", "CHAR", "VARCHAR",
             "DATE", "TIME", "TIMESTAMP", "BINARY", "VARBINARY")
CHARS = string.ascii_letters + string.digits + " "


@st.composite
def tables(draw):
    cols = []
    for i in range(draw(st.integers(1, 8))):
        t = draw(st.sampled_from(DB2_TYPES))
        kw = {}
        if t in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
            kw["length"] = draw(st.integers(1, 24))
        if t == "DECIMAL":
            p = draw(st.integers(1, 31))
            kw.update(precision=p, scale=draw(st.integers(0, p)))
        cols.append(Column(f"C{i}", t, draw(st.booleans()), **kw))
    tid_ = f"{draw(st.integers(0, 65535))}.{draw(st.integers(0, 65535))}"
    return Table(tid_, "S", "T", tuple(cols))


def value(col: Column):
    t = col.type
    s = {
        "SMALLINT": st.integers(-2**15, 2**15 - 1), "INTEGER": st.integers(-2**31, 2**31 - 1),
        "BIGINT": st.integers(-2**63, 2**63 - 1),
        "REAL": st.floats(width=32, allow_nan=False, allow_infinity=False).map(Float4),
        "DOUBLE": st.floats(allow_nan=False, allow_infinity=False),   # Db2 stores no infinity
        "CHAR": st.text(CHARS, min_size=col.length or 1, max_size=col.length or 1),
        "VARCHAR": st.text(max_size=col.length or 1),
        "BINARY": st.binary(min_size=col.length or 1, max_size=col.length or 1),
        "VARBINARY": st.binary(max_size=col.length or 1),
        "DATE": st.dates(), "TIME": st.times().map(lambda v: v.replace(microsecond=0)),
        "TIMESTAMP": st.datetimes(),
    }.get(t)
    if t == "DECIMAL":
        p, sc = col.precision, col.scale
        s = st.integers(-(10**p - 1), 10**p - 1).map(lambda u: Decimal(f"{u}E-{sc}"))
    return st.one_of(st.none(), s) if col.nullable else s


@st.composite
def table_and_rows(draw):
    table = draw(tables())
    row = st.tuples(*[value(c) for c in table.columns]).map(list)
    ops = draw(st.lists(st.tuples(st.sampled_from("cdu"), row, row,
                                  st.integers(-2**31, 2**31 - 1)), min_size=1, max_size=6))
    return table, ops


def _same(a, b) -> bool:
    return a == b and type(a) is type(b) or (isinstance(a, float) and a == b)


@pytest.mark.parametrize("byte_order", BYTE_ORDERS)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=table_and_rows())
def test_round_trip_random_tables(byte_order, data):
    table, ops = data
    cat = Catalog("rt", "db2luw", (table,))
    log = Log(byte_order)
    enc = log.enc
    for op, a, b, rid in ops:
        body = {"c": lambda: enc.insert(table, rid, a), "d": lambda: enc.delete(table, rid, a),
                "u": lambda: enc.update(table, rid, a, b)}[op]()
        log.add(7, "N", body)
    log.add(7, "M", enc.commit(86400, "U"))
    rows = decode(log.data(), cat, byte_order)
    render = RowRenderer(table.columns)
    assert [r["kind"] for r in rows] == ["change"] * len(ops) + ["commit"]
    for (op, a, b, rid), r in zip(ops, rows):
        assert r["op"] == op and r["table_id"] == table.id
        assert r["row_id"] == format(rid & 0xFFFFFFFF, "08X")
        assert r["before"] == (render(a) if op in "du" else None)
        assert r["after"] == (render(a) if op == "c" else render(b) if op == "u" else None)
    # value level: the decoded values are the generated ones
    codec = RowCodec(table, byte_order, "utf-8")
    for op, a, b, rid in ops:
        img = enc.user_data(table, a)
        fixed_len = L.IMAGE_HEADER.with_byte_order(byte_order).unpack_dict(img)["len_fixed"]
        with localcontext() as dctx:         # as decode() runs it: exact DECIMAL(31)
            dctx.prec = 64
            got = codec.values(img, 8, fixed_len, len(img))
        assert len(got) == len(a)
        for g, v in zip(got, a):
            assert g == v or (g != g and v != v), (g, v)


# ----------------------------------------------------------------- golden files

def golden_log(byte_order: str) -> bytes:
    """One record of every kind the decoder knows, in three transactions."""
    log = Log(byte_order)
    enc = log.enc
    log.add(1, "N", enc.insert(ORDERS, 0x101, [1, "first", Decimal("10.50"), 2]))
    log.add(1, "N", enc.update(ORDERS, 0x101, [1, "first", Decimal("10.50"), 2],
                               [1, None, Decimal("-0.01"), 3]))
    log.add(1, "N", enc.insert(NOTES, 0x201, ["note", 2**40]))
    ins = log.add(1, "N", enc.insert(NOTES, 0x202, ["undone", 5]))
    log.add(1, "C", enc.undo_insert("3.9", 0x202), flags=0, undo_next=lsn(log.lsns[ins - 1]))
    add = log.add(1, "N", enc.add_columns("2.5", 4, 5))
    log.add(1, "C", enc.add_columns("2.5", 4, 5, undo=True),
            undo_next=lsn(log.lsns[add - 1]), compensated=lsn(log.lsns[add]))
    log.add(1, "N", enc.delete(ORDERS, 0x101, [1, None, Decimal("-0.01"), 3]))
    log.add(1, "N", enc.alter_column("3.9", 0, 30, 40))
    log.add(1, "N", enc.index("2.5", 3, 77))
    log.add(1, "N", enc.index("2.5", 3, 77, drop=True))
    log.add(1, "N", enc.create_table("2.44"))
    log.add(1, "N", enc.truncate("3.9", b"\x00\x01"))
    log.add(1, "N", enc.alter_attribute("2.5"))
    log.add(1, "N", enc.init_table("2.44", 2))
    log.add(1, "N", enc.reorg("2.5", 1))
    log.add(1, "N", enc.insert(ORDERS, 0x102, [2, "x", None, 1], formatted=2))
    log.add(9, "B", b"\x00\x01")
    log.add(1, "E", b"")
    log.add(1, "M", enc.commit(1_704_067_200, "APPUSER  "))
    log.add(2, "N", enc.delete(NOTES, 0x201, ["note", 2**40]))
    log.add(2, "N", enc.drop_table("2.5"))
    log.add(2, "N", enc.undo_delete(NOTES, 0x201, ["note", 2**40]))
    log.add(2, "A", b"")
    log.add(3, "N", enc.insert(ORDERS, 0x103, [3, "open", Decimal("1.00"), 1]))
    return log.data()


@pytest.mark.parametrize("byte_order", BYTE_ORDERS)
def test_golden(byte_order):
    rows = decode(golden_log(byte_order), CAT, byte_order)
    check_golden(rows, GOLDEN / "db2luw" / f"every_record_{byte_order}.jsonl")


def test_golden_byte_orders_agree():
    strip = ("record_offset",)
    a = [{k: v for k, v in r.items() if k not in strip} for r in decode(golden_log("little"), CAT)]
    b = [{k: v for k, v in r.items() if k not in strip}
         for r in decode(golden_log("big"), CAT, "big")]
    assert a == b


# ----------------------------------------------------------------- corrupt inputs

def three(byte_order="little") -> Log:
    log = Log(byte_order)
    enc = log.enc
    log.add(1, "N", enc.insert(ORDERS, 1, [1, "a", Decimal("1.00"), 1]))
    log.add(1, "N", enc.insert(NOTES, 2, ["b", 2]))
    log.add(1, "M", enc.commit(100, "U"))
    return log


def test_record_length_past_end_of_file():
    log = three()
    bad = bytearray(log.recs[1])
    bad[6:10] = (10_000_000).to_bytes(4, "little")
    log.recs[1] = bytes(bad)
    rows = decode(log.data(), CAT)
    # issue 15: the damaged record costs only itself; decoding resumes at the next record
    assert [r["kind"] for r in rows] == ["change", "quarantine", "commit"]
    q = rows[1]
    assert q["error_class"] == "truncated" and q["record_offset"] == log.offsets[1]
    assert q["n_bytes"] == len(log.recs[1]) and "resynchronised" in q["message"]
    assert rows[2]["record_offset"] == log.offsets[2]
    assert sum(r["n_records"] for r in rows) == 3 and sum(r["n_bytes"] for r in rows) == len(log.data())


def test_truncated_tail():
    log = three("big")
    data = log.data()[:-3]
    rows = decode(data, CAT, "big")
    assert [r["kind"] for r in rows] == ["change", "change", "quarantine"]
    assert rows[2]["error_class"] == "truncated" and rows[2]["record_offset"] == log.offsets[2]
    rows = decode(log.data() + b"\x00\x00\x00\x00\x09", CAT, "big")   # a stub after the last record
    assert rows[-1]["error_class"] == "truncated"
    assert rows[-1]["record_offset"] == len(log.data())
    assert [r["kind"] for r in rows[:3]] == ["change", "change", "commit"]


def test_length_smaller_than_header_resynchronises():
    log = three()
    bad = bytearray(log.recs[0])
    bad[6:10] = (7).to_bytes(4, "little")
    log.recs[0] = bytes(bad)
    rows = decode(log.data(), CAT)
    assert [r["kind"] for r in rows] == ["quarantine", "change", "commit"]
    assert rows[0]["error_class"] == "corrupt" and rows[0]["record_offset"] == 0
    assert rows[0]["n_records"] == 1 and rows[0]["n_bytes"] == len(log.recs[0])


def test_unknown_dms_function():
    log = three()
    bad = bytearray(log.recs[1])
    bad[6 + 20 + 1] = 99
    log.recs[1] = bytes(bad)
    rows = decode(log.data(), CAT)
    assert [r["kind"] for r in rows] == ["change", "quarantine", "commit"]
    assert rows[1]["error_class"] == "unknown_record_type"
    assert rows[1]["record_offset"] == log.offsets[1]
    assert "unknown DMS function" in rows[1]["message"]


def test_unknown_dom_function_and_component():
    log = three()
    enc = log.enc
    body = bytearray(enc.reorg("2.5"))
    body[1] = 77
    i = log.add(1, "N", bytes(body))
    j = log.add(1, "N", b"\x09\x01" + bytes(10))
    rows = decode(log.data(), CAT)
    assert [r["error_class"] for r in rows[3:]] == ["unknown_record_type"] * 2
    assert [r["record_offset"] for r in rows[3:]] == [log.offsets[i], log.offsets[j]]


def test_user_data_shorter_than_fixed_section():
    log = three()
    bad = bytearray(log.recs[0])
    fud = 6 + 20 + 6 + 12 + 4          # LSN, LM header, DMS header, row block, record header
    bad[fud + 2:fud + 4] = (200).to_bytes(2, "little")
    log.recs[0] = bytes(bad)
    rows = decode(log.data(), CAT)
    assert [r["kind"] for r in rows] == ["quarantine", "change", "commit"]
    assert rows[0]["error_class"] == "corrupt" and rows[0]["record_offset"] == 0
    assert "shorter than its fixed section" in rows[0]["message"]


def test_fixed_section_shorter_than_columns():
    log = three()
    bad = bytearray(log.recs[1])
    fud = 6 + 20 + 6 + 12 + 4
    bad[fud + 2:fud + 4] = (3).to_bytes(2, "little")
    log.recs[1] = bytes(bad)
    rows = decode(log.data(), CAT)
    assert rows[1]["error_class"] == "corrupt" and rows[1]["record_offset"] == log.offsets[1]


def test_column_offset_outside_record():
    log = three("big")
    bad = bytearray(log.recs[1])                 # NOTES: TEXT VARCHAR is the first column
    fixed = 6 + 20 + 6 + 12 + 4 + 4
    bad[fixed:fixed + 2] = (0x7FF0).to_bytes(2, "big")
    log.recs[1] = bytes(bad)
    rows = decode(log.data(), CAT, "big")
    assert [r["kind"] for r in rows] == ["change", "quarantine", "commit"]
    assert rows[1]["error_class"] == "corrupt" and rows[1]["record_offset"] == log.offsets[1]
    assert "offset outside the record" in rows[1]["message"] and "TEXT" in rows[1]["message"]


def test_bad_packed_decimal_and_null_flag():
    log = three()
    bad = bytearray(log.recs[0])
    fixed = 6 + 20 + 6 + 12 + 4 + 4
    amount = fixed + 4 + 4 + 1                   # ORDER_ID, NOTE ref + null flag
    bad[amount + 3] = 0x17                       # sign nibble 7
    log.recs[0] = bytes(bad)
    bad = bytearray(log.recs[1])
    log.recs[1] = bytes(bad)
    rows = decode(log.data(), CAT)
    assert rows[0]["error_class"] == "bad_value" and "AMOUNT" in rows[0]["message"]
    bad = bytearray(three().recs[0])
    bad[fixed + 8] = 5                           # NOTE null flag
    rows = decode(bytes(bad), CAT)
    assert rows[0]["error_class"] == "bad_value" and "NOTE" in rows[0]["message"]


def test_unknown_table_quarantined_ddl_published():
    log = three()
    enc = log.enc
    other = Table("7.7", "X", "Y", ORDERS.columns)
    i = log.add(1, "N", enc.insert(other, 1, [1, "a", None, 1]))
    log.add(1, "N", enc.drop_table("7.7"))
    rows = decode(log.data(), CAT)
    assert rows[i]["error_class"] == "unknown_table" and rows[i]["record_offset"] == log.offsets[i]
    assert rows[i + 1]["op"] == "ddl" and rows[i + 1]["table_id"] == "7.7"
    assert rows[i + 1]["table_name"] is None and rows[i + 1]["ddl"] == "DROP TABLE 7.7"


def test_undo_without_its_change_is_quarantined():
    log = three()
    i = log.add(1, "N", log.enc.undo_insert("2.5", 999))
    rows = decode(log.data(), CAT)
    assert rows[i]["error_class"] == "broken_chain" and rows[i]["record_offset"] == log.offsets[i]


def test_other_record_types_and_bad_type():
    log = three()
    i = log.add(5, "B", b"")
    j = log.add(5, "X", b"\x01")
    k = log.add(5, "N", b"")
    log.recs.append(log.enc.record(lsn(0xFFFF), "N", b"", tid_=tid(5)).replace(b"N\x00", b"\x01\x02", 1))
    rows = decode(log.data(), CAT)
    assert rows[i]["kind"] == "skip" and rows[i]["rule"] == "db2luw_record_type_B"
    assert rows[j]["rule"] == "db2luw_record_type_X"
    assert rows[k]["error_class"] == "corrupt"           # N record without a body
    assert rows[-1]["error_class"] == "unknown_record_type"
    assert len(rows) == 7


def test_undo_rules():
    """32-byte header, 26-byte chain, RID match, and undo of DDL."""
    log = Log()
    enc = log.enc
    a = log.add(1, "N", enc.insert(ORDERS, 5, [1, "a", None, 1]))
    b = log.add(1, "N", enc.insert(ORDERS, 5, [2, "b", None, 1]))     # same RID, later
    c = log.add(1, "N", enc.update(ORDERS, 6, [3, "c", None, 1], [3, "d", None, 1]))
    d = log.add(1, "N", enc.create_table("2.77"))
    u1 = log.add(1, "C", enc.undo_insert("2.5", 5), flags=0, undo_next=lsn(log.lsns[a - 1] if a else 0))
    u2 = log.add(1, "N", enc.undo_insert("2.5", 5))                    # RID: the other insert
    u3 = log.add(1, "C", enc.undo_update(ORDERS, 6, [3, "c", None, 1]),
                 undo_next=lsn(0x1234), compensated=lsn(log.lsns[c]))
    u4 = log.add(1, "N", enc.create_table("2.77", undo=True))
    rows = decode(log.data(), CAT)
    undo = {i: rows[i]["undo_of"] for i in (u1, u2, u3, u4)}
    assert undo == {u1: pos(log.lsns[a]), u2: pos(log.lsns[b]), u3: pos(log.lsns[c]),
                    u4: pos(log.lsns[d])}
    assert all(rows[i]["kind"] == "undo" for i in undo)


# ----------------------------------------------------------------- a generated night

EXPECTED_FIELDS = ("trx_id", "commit_position", "commit_ts", "op", "table_id", "schema_name",
                   "table_name", "before", "after", "ddl", "row_id")


def resolve(rows: list[dict]) -> list[dict]:
    """What the ordering job publishes, in plain Python: committed, not aborted, not undone,
    in commit order then log order."""
    commits = {r["trx_id"]: r for r in rows if r["trx_end"] == "commit"}
    aborted = {r["trx_id"] for r in rows if r["trx_end"] == "abort"}
    undone = {(r["trx_id"], r["undo_of"]) for r in rows if r["kind"] == "undo"}
    out = []
    for r in rows:
        c = commits.get(r["trx_id"])
        if r["kind"] != "change" or c is None or r["trx_id"] in aborted \
                or (r["trx_id"], r["position"]) in undone:
            continue
        row = {k: r[k] for k in EXPECTED_FIELDS}
        row.update(commit_position=c["commit_position"], commit_ts=c["commit_ts"])
        out.append(((c["commit_position"], r["trx_id"], r["trx_order"] or r["position"]), row))
    out.sort(key=lambda x: x[0])
    return [row for _, row in out]


def undo_forms(data: bytes, byte_order: str) -> set[str]:
    """Which undo forms an archive holds, read from the framing alone: C26/C32 compensation
    headers, N<function> undo records with a 20-byte header."""
    out, pos = set(), 0
    while pos < len(data):
        length = int.from_bytes(data[pos + 6:pos + 10], byte_order)
        rtype = chr(int.from_bytes(data[pos + 10:pos + 12], byte_order))
        flags = int.from_bytes(data[pos + 12:pos + 14], byte_order)
        if rtype == "C":
            out.add("C32" if flags & 2 else "C26")
        elif rtype == "N" and data[pos + 26 + 1] in (110, 111, 112):
            out.add(f"N{data[pos + 27]}")
        pos += 6 + length
    return out


@pytest.mark.parametrize("byte_order", BYTE_ORDERS)
def test_generated_nights_published_exactly(byte_order):
    synth = Synth("erp_db2", options={"byte_order": byte_order}, seed=11)
    rows: list[dict] = []
    expected = []
    kinds = set()
    forms: set[str] = set()
    for day in range(2):
        night = synth.night(_dt.date(2024, 3, 1) + _dt.timedelta(days=day), 150)
        assert len(night.archives) == 2
        for name, data in night.archives.items():
            got = decode(data, synth.catalog, byte_order, name)
            assert sum(r["n_records"] for r in got) == synth.record_counts[name]   # accounting
            assert [r for r in got if r["kind"] == "quarantine"] == []
            rows += got
            forms |= undo_forms(data, byte_order)
        expected += [e.as_dict() for e in night.expected]
        kinds |= {t.outcome for t in night.trxs}
    assert {"commit", "rollback", "open"} <= kinds
    assert {"C26", "C32", "N110", "N111", "N112"} <= forms
    got = resolve(rows)
    assert len(got) == len(expected) > 300
    for g, e in zip(got, expected):
        assert g == e
    # the night exercises what it should
    rules = {r["rule"] for r in rows}
    assert {"undo_insert_record", "undo_delete_record", "undo_update_record",
            "local_pending_list", "internal_control_record", "reorg_table"} <= rules
    assert any(r["kind"] == "skip" for r in rows)
    ops = {r["op"] for r in rows if r["kind"] == "change"}
    assert ops == {"c", "u", "d", "ddl", "t"}


def test_generated_night_users_and_commit_times():
    synth = Synth("erp_db2", seed=2)
    night = synth.night(_dt.date(2024, 5, 5), 40)
    rows = [r for name, data in night.archives.items() for r in decode(data, synth.catalog, name=name)]
    commits = {r["trx_id"]: r for r in rows if r["kind"] == "commit"}
    for t in night.trxs:
        if t.outcome == "commit":
            c = commits[t.trx_id]
            assert c["user"] == t.user and c["commit_position"] == t.commit_position
            assert c["commit_ts"] == t.commit_ts.replace(microsecond=0, tzinfo=UTC)


def test_committed_catalog_is_what_synth_builds():
    path = ROOT / "include" / "catalogs" / "erp_db2.json"
    built = Synth("erp_db2").catalog
    assert load_catalog(path) == built
    assert path.read_text(encoding="utf-8").rstrip("\n") == built.dumps()
    types = {c.type for t in built.tables for c in t.columns}
    assert set(DB2_TYPES) <= types


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=6),
       st.integers(0, 2000), st.sampled_from(BYTE_ORDERS))
def test_mutated_streams_never_crash(mutations, cut, byte_order):
    """Any damage: every record read still gives exactly one row, offsets increase, no raise."""
    data = bytearray(golden_log(byte_order))
    for at, byte in mutations:
        data[at % len(data)] = byte
    data = bytes(data[:len(data) - cut % len(data)])
    rows = decode(data, CAT, byte_order)
    assert all(r["n_records"] == 1 for r in rows)
    offsets = [r["record_offset"] for r in rows]
    assert offsets == sorted(set(offsets)) and [r["record_index"] for r in rows] == list(range(len(rows)))
    assert all(r["kind"] != "quarantine" or r["error_class"] for r in rows)


def test_synth_as_the_synth_command_builds_it():
    """``dblog synth`` passes the source's catalog, options and timezone."""
    cat = load_catalog(ROOT / "include" / "catalogs" / "erp_db2.json")
    gen = Synth("erp_db2", catalog=cat, options={"byte_order": "big", "codepage": "utf-8"},
                seed=1, timezone="Europe/Berlin")
    night = gen.night(_dt.date(2024, 6, 1), 30)
    rows = [r for name, data in night.archives.items()
            for r in decode(data, cat, "big", name)]
    assert resolve(rows) == [e.as_dict() for e in night.expected]


@pytest.mark.parametrize("byte_order", BYTE_ORDERS)
def test_decimal_31_digits_exact(byte_order):
    big = Table("1.1", "S", "BIG", (Column("D", "DECIMAL", False, precision=31, scale=5),))
    cat = Catalog("d", "db2luw", (big,))
    log = Log(byte_order)
    v = Decimal("-" + "9" * 26 + "." + "9" * 4 + "1")
    log.add(1, "N", log.enc.insert(big, 1, [v]))
    (row,) = decode(log.data(), cat, byte_order)
    assert json.loads(row["after"]) == {"D": "-" + "9" * 26 + "." + "9" * 4 + "1"}
