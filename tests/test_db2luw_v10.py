"""Db2 LUW ``layout: v10`` (SPEC section 3, Db2 10.1 to 12.1, db2ReadLog with FILTER_ON):
bytes assembled by hand from SPEC and formats/db2luw-v10-notes.md, both byte orders, commit
and local pending list, DML 161/162/163 and the empty-page variants, undo and compensation
last-in-first-out, the columnar path against the careful path, and generated nights
published exactly."""

from __future__ import annotations

import datetime as _dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest

from decoders import get
from decoders.base import DecodeContext
from decoders.catalog import Catalog
from decoders.db2luw import decoder as D
from decoders.db2luw import layout as L
from decoders.db2luw.encoder import Encoder, tid
from decoders.db2luw.synth import Synth
from decoders.events import EventSink

from .test_db2luw import CAT, NOTES, ORDERS, resolve

db2 = get("db2luw")
UTC = _dt.timezone.utc
ORDERS_V = [1, "first", Decimal("10.50"), 2]


def opts(byte_order: str) -> dict:
    return {"layout": "v10", "byte_order": byte_order}


def decode(data: bytes, catalog: Catalog = CAT, byte_order: str = "little", name: str = "S0000001.LOG",
           fast: bool = True) -> list[dict]:
    sink = EventSink(catalog.source, "db2luw", name)
    ctx = DecodeContext(catalog.source, "db2luw", catalog, name, opts(byte_order))
    if fast:
        db2.decode(data, ctx, sink)
    else:
        from decoders.events import accounts_bytes

        accounts_bytes(lambda d, c, s: D.Decoder(c, s, fast=False).run(d))(data, ctx, sink)
    return sink.rows()


def pos(lfs: int, lsn: int) -> str:
    return f"{lfs:016X}{lsn:016X}"


# ----------------------------------------------------------------- bytes written by hand

def _prefix(order: str, lfs: int, lsn: int, lso: int, length: int) -> bytes:
    u8 = lambda v: v.to_bytes(8, order)       # noqa: E731
    return (u8(1) + u8(lfs) + u8(lsn) + u8(2) + u8(lso) + u8(0)   # type-1 LRI, type-2 LRI
            + length.to_bytes(4, order) + (0).to_bytes(4, order))  # realLogRecLen, sqlcode


def _header(order: str, length: int, rtype: int, flags: int, lsn: int, lfs: int, lso_prev: int,
            tid_: bytes) -> bytes:
    return (length.to_bytes(4, order) + rtype.to_bytes(2, order) + flags.to_bytes(2, order)
            + lsn.to_bytes(8, order) + lfs.to_bytes(8, order) + lso_prev.to_bytes(8, order)
            + tid_ + (0).to_bytes(2, order))          # TID @32, log stream id @38


def test_hand_assembled_little_endian_insert_and_commit():
    """SPEC section 3 v10: 56-byte prefix, 40-byte header, insert 162 with the record @20,
    commit 0x0084 with time u64 @40, authid length u16 @48 and authid @50."""
    o = "little"
    fixed = (b"\x07\x00\x00\x00"                        # ORDER_ID INTEGER 7
             + b"\x10\x00\x02\x00" + b"\x00"            # NOTE: offset 16, length 2, not null
             + b"\x00\x12\x34\x5d" + b"\x00"            # AMOUNT DECIMAL(7,2) packed -123.45
             + b"\x03\x00")                             # QTY SMALLINT 3
    fud = b"\x01\x00" + b"\x10\x00" + fixed + b"hi"
    image = b"\x00\x00" + (4 + len(fud)).to_bytes(2, o) + fud
    body = (b"\x01\xa2\x02\x00\x05\x00"                 # DMS, 162, tablespace 2, table 5
            + b"\x00\x00" + len(image).to_bytes(2, o) + b"\x00\x00"   # flags, length @8, @10
            + bytes.fromhex("00000001a203")             # RID (6 bytes) @12
            + b"\x00\x00" + image)                      # record offset @18, record @20
    t = bytes.fromhex("00000000002a")
    ins = _header(o, 40 + len(body), 0x004E, 0x0002, 0x1000, 0x77, 0, t) + body
    ins = _prefix(o, 0x77, 0x1000, 0x5000, len(ins)) + ins
    cbody = (1_700_000_000).to_bytes(8, o) + (7).to_bytes(2, o) + b"APPUSER"
    com = _header(o, 40 + len(cbody), 0x0084, 0x0002, 0x1001, 0x78, 0x5000, t) + cbody
    com = _prefix(o, 0x78, 0x1001, 0x5100, len(com)) + com
    for fast in (True, False):
        rows = decode(ins + com, fast=fast)
        assert [r["kind"] for r in rows] == ["change", "commit"]
        ch, cm = rows
        assert ch["op"] == "c" and ch["table_id"] == "2.5" and ch["table_name"] == "ORDERS"
        assert ch["trx_id"] == "00000000002A" and ch["position"] == pos(0x77, 0x1000)
        assert ch["row_id"] == "00000001A203" and ch["record_offset"] == 0
        assert ch["n_bytes"] == len(ins)
        assert json.loads(ch["after"]) == {"ORDER_ID": 7, "NOTE": "hi", "AMOUNT": "-123.45", "QTY": 3}
        assert cm["commit_position"] == pos(0x78, 0x1001) and cm["trx_end"] == "commit"
        assert cm["commit_ts"] == _dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
        assert cm["user"] == "APPUSER" and cm["record_offset"] == len(ins)
    enc = Encoder("little", layout="v10")
    assert enc.record10(0x1000, 0x4E, enc.insert(ORDERS, 0x1A203, [7, "hi", Decimal("-123.45"), 3]),
                        tid_=t, lfs=0x77, lso=0x5000) == ins
    assert enc.record10(0x1001, 0x84, enc.commit(1_700_000_000, "APPUSER"), tid_=t, lfs=0x78,
                        lso=0x5100, lso_prev=0x5000) == com


def test_hand_assembled_big_endian_update_empty_page_and_pending_list():
    """Update 163 (DMS header, 14-byte block, old record, DMS header, 14-byte block, new
    record), delete to an empty page 164 (record @26), local pending list 0x008A ending the
    transaction as committed, a commit without the propagatable flag (no authid)."""
    o = "big"

    def image(order_id: int, note: bytes) -> bytes:
        fixed = (order_id.to_bytes(4, o) + b"\x00\x10" + len(note).to_bytes(2, o) + b"\x00"
                 + bytes(4) + b"\x01" + b"\x00\x09")    # AMOUNT NULL, QTY 9
        fud = b"\x01\x00\x00\x10" + fixed + note
        return b"\x00\x00" + (4 + len(fud)).to_bytes(2, o) + fud

    def block(func: int, img: bytes) -> bytes:
        return (b"\x01" + bytes([func]) + b"\x00\x02\x00\x05" + b"\x00\x00"
                + len(img).to_bytes(2, o) + b"\x00\x00" + bytes.fromhex("000000000107") + b"\x00\x00")

    old, new = image(1, b"old"), image(1, b"newer")
    upd = block(163, old) + old + block(163, new) + new
    dele = (b"\x01\xa4\x00\x02\x00\x05" + b"\x00\x00" + len(new).to_bytes(2, o) + b"\x00\x00"
            + bytes.fromhex("000000000107") + bytes(6) + b"\x00\x00" + new)   # record @26
    t1, t2 = bytes.fromhex("000000000001"), bytes.fromhex("000000000002")
    recs = []
    for lsn_, rtype, flags, t, body in ((0x20, 0x4E, 2, t1, upd), (0x21, 0x4E, 2, t2, dele),
                                        (0x22, 0x8A, 2, t1, (86400).to_bytes(8, o) + b"\x00\x03DBA"),
                                        (0x23, 0x84, 0, t2, (86401).to_bytes(8, o))):
        rec = _header(o, 40 + len(body), rtype, flags, lsn_, 9, 0, t) + body
        recs.append(_prefix(o, 9, lsn_, 0, len(rec)) + rec)
    for fast in (True, False):
        r_upd, r_del, r_pend, r_com = decode(b"".join(recs), byte_order="big", fast=fast)
        assert r_upd["op"] == "u" and r_upd["row_id"] == "000000000107"
        assert json.loads(r_upd["before"]) == {"ORDER_ID": 1, "NOTE": "old", "AMOUNT": None, "QTY": 9}
        assert json.loads(r_upd["after"]) == {"ORDER_ID": 1, "NOTE": "newer", "AMOUNT": None, "QTY": 9}
        assert r_del["op"] == "d" and json.loads(r_del["before"])["NOTE"] == "newer"
        assert r_pend["kind"] == "commit" and r_pend["rule"] == "local_pending_list"
        assert r_pend["trx_end"] == "commit" and r_pend["user"] == "DBA"
        assert r_pend["commit_ts"] == _dt.datetime(1970, 1, 2, tzinfo=UTC)
        assert r_com["kind"] == "commit" and r_com["user"] is None
    enc = Encoder("big", layout="v10")
    assert enc.update(ORDERS, 0x107, [1, "old", None, 9], [1, "newer", None, 9]) == upd
    assert enc.delete(ORDERS, 0x107, [1, "newer", None, 9], empty_page=True) == dele


def test_header_sizes_and_layouts():
    assert L.FILTER_DATA.size == 56 and L.LR_HEADER.size == 40
    assert (L.V10.header_size, L.V10.comp_size, L.V10.prop_comp_size) == (40, 56, 64)
    assert L.ROW_V10.size == 20 and L.ROW_EMPTY_PAGE_V10.size == 26 and L.UNDO_INSERT_V10.size == 18
    assert L.COMMIT_V10.offset("len_authid") + 40 == 48
    enc = Encoder("little", layout="v10")
    body = enc.undo_insert("2.5", 1)
    assert len(enc.record10(1, 0x4E, body, tid_=tid(1), lfs=1, lso=1)) == 56 + 40 + len(body)
    assert len(enc.record10(1, 0x43, body, tid_=tid(1), lfs=1, lso=1, flags=0)) == 56 + 56 + len(body)
    assert len(enc.record10(1, 0x43, body, tid_=tid(1), lfs=1, lso=1)) == 56 + 64 + len(body)


# ----------------------------------------------------------------- undo last in, first out

class Log10:
    def __init__(self, byte_order: str = "little") -> None:
        self.enc = Encoder(byte_order, layout="v10")
        self.recs: list[bytes] = []
        self.lsn = 0x100
        self.lso = 0x4000
        self.last: dict[int, int] = {}

    def add(self, t: int, rtype: int, body: bytes, **kw) -> int:
        self.lsn += 3
        rec = self.enc.record10(self.lsn, rtype, body, tid_=tid(t), lfs=7, lso=self.lso,
                                lso_prev=self.last.get(t, 0), **kw)
        self.last[t] = self.lso
        self.lso += len(rec) - 56
        self.recs.append(rec)
        return len(self.recs) - 1

    def position(self, i: int) -> str:
        return pos(7, 0x100 + 3 * (i + 1))

    def data(self) -> bytes:
        return b"".join(self.recs)


@pytest.mark.parametrize("byte_order", ["little", "big"])
def test_undo_is_last_in_first_out(byte_order):
    log = Log10(byte_order)
    e = log.enc
    a = log.add(1, 0x4E, e.insert(ORDERS, 5, ORDERS_V))
    b = log.add(1, 0x4E, e.insert(NOTES, 6, ["x", 1], empty_page=True))
    c = log.add(1, 0x4E, e.update(ORDERS, 5, ORDERS_V, [1, "second", None, 2]))
    ctl = log.add(1, 0x4E, e.reorg("2.5"))                                    # not undone
    u1 = log.add(1, 0x43, e.undo_update(ORDERS, 5, ORDERS_V), flags=0)        # 56-byte header
    u2 = log.add(1, 0x4E, e.undo_insert("3.9", 6, empty_page=True))           # normal, 131
    u3 = log.add(1, 0x43, e.row_body(161, "2.5", 5, e.user_data(ORDERS, ORDERS_V)))  # 64, inverse
    u4 = log.add(1, 0x43, e.undo_insert("2.5", 5))                            # nothing left
    log.add(1, 0x41, e.abort("U"))
    rows = decode(log.data(), byte_order=byte_order)
    assert rows[ctl]["kind"] == "control"
    assert [rows[i]["undo_of"] for i in (u1, u2, u3)] == [log.position(c), log.position(b),
                                                          log.position(a)]
    assert [rows[i]["rule"] for i in (u1, u2, u3)] == [
        "undo_update_record", "undo_insert_record_to_empty_page", "compensation_delete_record"]
    # an undo whose change is in an earlier archive: resolved by the ordering job
    assert rows[u4]["kind"] == "undo" and rows[u4]["undo_of"] is None
    assert rows[-1]["kind"] == "abort"
    assert decode(log.data(), byte_order=byte_order, fast=False) == rows


def test_undo_of_another_change_is_a_broken_chain():
    log = Log10()
    e = log.enc
    log.add(1, 0x4E, e.insert(ORDERS, 5, ORDERS_V))
    log.add(1, 0x4E, e.delete(NOTES, 6, ["x", 1]))
    bad = log.add(1, 0x43, e.undo_insert("2.5", 5))     # the latest change is the delete
    after = log.add(1, 0x43, e.undo_insert("2.5", 5))   # the insert, which is next
    rows = decode(log.data())
    assert rows[bad]["error_class"] == "broken_chain" and "delete" not in rows[bad]["message"]
    assert "function 161" in rows[bad]["message"] and "3.9" in rows[bad]["message"]
    assert rows[after]["undo_of"] == log.position(0)


def test_commit_checks():
    log = Log10()
    e = log.enc
    log.add(1, 0x84, (2 ** 63).to_bytes(8, "little") + b"\x00\x00")          # past 9999
    log.add(2, 0x84, e.commit(10, "ABC")[:-1])                                 # authid cut
    log.add(3, 0x84, e.commit(10, "ABC")[:5])                                  # time cut
    log.add(4, 0x84, e.commit(10, "LONGER", propagatable=False), flags=0)      # no authid
    rows = decode(log.data())
    assert [r["error_class"] for r in rows[:3]] == ["bad_value", "corrupt", "corrupt"]
    assert "commit time out of range" in rows[0]["message"]
    assert "authid longer than the commit record" in rows[1]["message"]
    assert rows[3]["kind"] == "commit" and rows[3]["user"] is None
    assert decode(log.data(), fast=False) == rows


def test_other_record_types_are_skipped_by_name():
    log = Log10()
    log.add(1, 0x0087, b"\x00" * 10, flags=0)
    log.add(1, 0x00A1, b"", flags=0)
    log.add(1, 0x8A, log.enc.commit(5, "X"))
    rows = decode(log.data())
    assert [r["rule"] for r in rows] == ["db2luw_record_type_heuristic_commit",
                                         "db2luw_record_type_0x00A1", "local_pending_list"]


# ----------------------------------------------------------------- generated nights

def forms(data: bytes, byte_order: str) -> set[str]:
    """What an archive holds, read from the framing alone (not the decoder)."""
    out, p = set(), 0
    while p < len(data):
        length = int.from_bytes(data[p + 56:p + 60], byte_order)
        rtype = int.from_bytes(data[p + 60:p + 62], byte_order)
        flags = int.from_bytes(data[p + 62:p + 64], byte_order)
        if rtype == 0x43:
            out.add("C64" if flags & 2 else "C56")
            out.add(f"C{data[p + 56 + (64 if flags & 2 else 56) + 1]}")
        elif rtype == 0x4E:
            out.add(f"N{data[p + 96 + 1]}")
        else:
            out.add(f"0x{rtype:04X}" + ("" if rtype != 0x84 or flags & 2 else "-basic"))
        p += 56 + length
    return out


@pytest.mark.parametrize("byte_order", ["little", "big"])
def test_generated_nights_published_exactly(byte_order):
    synth = Synth("hr_db2v10", options=opts(byte_order), seed=12)
    rows, expected, seen = [], [], set()
    for day in range(2):
        night = synth.night(_dt.date(2024, 3, 1) + _dt.timedelta(days=day), 160)
        for name, data in night.archives.items():
            got = decode(data, synth.catalog, byte_order, name)
            assert len(got) == synth.record_counts[name]
            assert sum(r["n_bytes"] for r in got) == len(data)
            assert [r for r in got if r["kind"] == "quarantine"] == []
            rows += got
            seen |= forms(data, byte_order)
        expected += [e.as_dict() for e in night.expected]
    assert {"C56", "C64", "N110", "N111", "N112", "N131", "N166", "N161", "N162", "N163", "N164",
            "N165", "0x0084", "0x0084-basic", "0x008A", "0x0041", "0x0069"} <= seen, seen
    got = resolve(rows)
    assert len(got) == len(expected) > 300
    for g, e in zip(got, expected):
        assert g == e
    assert {r["op"] for r in rows if r["kind"] == "change"} == {"c", "u", "d", "ddl", "t"}


@pytest.mark.parametrize("byte_order", ["little", "big"])
def test_columnar_path_equals_the_careful_path(byte_order):
    synth = Synth("hr_db2v10", options=opts(byte_order), seed=13)
    night = synth.night(_dt.date(2024, 3, 1), 120)
    for name, data in night.archives.items():
        fast = decode(data, synth.catalog, byte_order, name)
        slow = decode(data, synth.catalog, byte_order, name, fast=False)
        assert pa.Table.from_pylist(fast).equals(pa.Table.from_pylist(slow))


def test_committed_catalog_is_what_synth_builds():
    from pathlib import Path

    from decoders.catalog import load_catalog

    path = Path(__file__).resolve().parent.parent / "include" / "catalogs" / "hr_db2v10.json"
    built = Synth("hr_db2v10", options={"layout": "v10"}).catalog
    assert load_catalog(path) == built
    assert path.read_text(encoding="utf-8").rstrip("\n") == built.dumps()
