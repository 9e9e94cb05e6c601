"""Informix onlog text: parser, decoder, writer and sample-night generator."""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections import defaultdict
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from decoders import get as get_format
from decoders.base import DecodeContext
from decoders.catalog import Catalog
from decoders.events import EventSink
import decoders.informix as informix
from decoders.informix import archive_sort_key, layout as L
from decoders.informix import resolve as RS
from decoders.informix.decoder import parse_record, split_units
from decoders.informix.encoder import OnlogWriter, format_record, stamp
from decoders.informix.synth import Synth
from tests.golden import GOLDEN, check_golden

UTC = _dt.timezone.utc
ROOT = Path(__file__).resolve().parents[1]
SOURCE = "wms_informix"
CATALOG = Synth(SOURCE).catalog


def run(data: bytes | str, name: str = "onlog_7.txt", carry=None, tz: str = "America/Chicago",
        catalog: Catalog = CATALOG):
    """Decode one file as the pipeline does: by the decoder with its carry, or (RESOLVE =
    "ordering") in records mode then the ordering job's transaction step, the rows held
    from file to file; ``carry["open"]`` is the open transactions either way."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if informix.RESOLVE == "ordering":
        held = (carry or {}).get("held", [])
        ctx = DecodeContext(SOURCE, "informix", catalog, name, {}, tz)
        rows, held = RS.decode_file(data, ctx, SOURCE, held)
        out = {"version": 1, "uniqid": informix.uniqid_of(name),
               "open": RS.open_transactions(held), "held": held}
        json.dumps(out["open"])
        return rows, out
    return run_decoder(data, name, carry, tz, catalog)


def run_decoder(data: bytes, name: str = "onlog_7.txt", carry=None, tz: str = "America/Chicago",
                catalog: Catalog = CATALOG):
    """One file through the per-file decoder with its carry (decoder mode), whatever mode
    the pipeline uses: its carry handling is tested on its own."""
    from decoders.events import accounts_bytes
    from decoders.informix.decoder import decode as decode_with_carry

    sink = EventSink(SOURCE, "informix", name)
    ctx = DecodeContext(SOURCE, "informix", catalog, name, {}, tz, carry)
    out = accounts_bytes(decode_with_carry, lines=True)(data, ctx, sink)
    json.dumps(out)                       # the carry must be JSON-serialisable
    return sink.rows(), out


# SPEC section 3, written here independently of the decoder: a dump line is indented and
# holds hex byte groups, then optionally a character rendering
DUMP_LINE = re.compile(rb"[ \t]+(?:[0-9a-fA-F]{2}){1,8}(?:[ \t](?:[0-9a-fA-F]{2}){1,8})*"
                       rb"(?:[ \t]{2,}[ -~]{1,20})?[ \t]*")
TITLES = [b"addr", b"len", b"type", b"xid", b"id", b"link"]


def record_lines(data: bytes) -> int:
    """Records read, counted independently of the decoder: lines that are not blank, not
    dump lines (indented hex groups) and not headers (the six titles first); an indented
    line that is not a dump line counts (it is quarantined)."""
    n = 0
    for line in data.split(b"\n"):
        line = line[:-1] if line.endswith(b"\r") else line
        if not line.strip():
            continue
        if [t.lower() for t in line.split()[:6]] == TITLES:
            continue
        if line[:1] in (b" ", b"\t", b"\x0b", b"\x0c", b"\r") and DUMP_LINE.fullmatch(line):
            continue
        n += 1
    return n


class Log:
    """Writes one file with links filled in per xid (tests only)."""

    def __init__(self, uniqid: int = 7, last: dict | None = None, **kw) -> None:
        self.w = OnlogWriter(uniqid, **kw)
        self.last = dict(last or {})

    def add(self, rtype: str, xid: int, values: dict | None = None, *, link=None) -> int:
        if link is None:
            link = 0 if rtype == "BEGIN" or xid not in self.last else self.last[xid]
        addr = self.w.add(rtype, xid, link, values or {})
        self.last[xid] = addr
        return addr

    def begin(self, xid, when="07/13/98 10:00:00", user="informix"):
        ts = _dt.datetime.strptime(when, "%m/%d/%y %H:%M:%S")
        return self.add("BEGIN", xid, {**stamp(ts), "pid": 42, "user": user})

    def end(self, xid, rtype="COMMIT", when="07/13/98 10:00:05"):
        return self.add(rtype, xid, stamp(_dt.datetime.strptime(when, "%m/%d/%y %H:%M:%S")))

    def home(self, rtype, xid, tbl=0x100123, rowid=0x101, slotlen=40):
        return self.add(rtype, xid, {"tblspace_id": tbl, "rowid": rowid, "slotlen": slotlen})

    def line(self, text: str) -> None:
        self.w.add_line(text)

    @property
    def data(self) -> bytes:
        return self.w.data()


def kinds(rows):
    return [r["kind"] for r in rows]


# ------------------------------------------------------------------ package face

def test_package_face():
    mod = get_format("informix")
    assert mod.FORMAT == "informix" and mod.SEQUENTIAL is (mod.RESOLVE == "decoder")
    names = ["x/onlog_20240101_10.txt", "onlog_9.txt", "onlog_20231231_100.txt"]
    assert sorted(names, key=archive_sort_key) == [
        "onlog_9.txt", "x/onlog_20240101_10.txt", "onlog_20231231_100.txt"]


def test_catalog_file_is_the_synth_catalog():
    path = ROOT / "include" / "catalogs" / "wms_informix.json"
    assert path.read_text(encoding="utf-8") == Synth(SOURCE).catalog.dumps()
    assert Catalog.loads(path.read_text(encoding="utf-8")) == CATALOG


def test_every_documented_record_type_is_known():
    # the vendor document is part of the tests (tests/vendor/informix/PROVENANCE.md): a
    # missing document fails here, it is never skipped
    doc = ROOT / "tests" / "vendor" / "informix" / "informix-onlog-record-types.txt"
    documented = set(re.findall(r"^([A-Z][A-Z0-9_]+)\s", doc.read_text(), re.M)) \
        - {"Home", "Table", "Record", "In", "The", "ASCII", "PID"}   # words, not types
    assert len(documented) == 79                 # the rows of Table 3
    assert documented <= set(L.RECORD_TYPES), documented - set(L.RECORD_TYPES)
    # and every type beyond it names the document it comes from
    assert set(L.RECORD_TYPES) - documented == set(L.DOCUMENTED)


# ------------------------------------------------------------------ golden files

def test_golden_files():
    carry = None
    for name in ("onlog_42.txt", "onlog_43.txt", "onlog_44.txt"):
        data = (GOLDEN / "informix" / name).read_bytes()
        rows, carry = run(data, name, carry)
        assert sum(r["n_records"] for r in rows) == record_lines(data)
        check_golden(rows, GOLDEN / "informix" / name.replace(".txt", ".jsonl"))
    view = {k: carry[k] for k in ("version", "uniqid", "open")}
    check_golden([{"message": json.dumps(view, sort_keys=True)}],
                 GOLDEN / "informix" / "carry_after_44.jsonl")


# ------------------------------------------------------------------ lines

def test_headers_dumps_and_blank_lines_are_not_records():
    text = ("addr     len  type     xid      id link\n"
            "        00000000 00000000  ........\n"            # a dump line under a header
            "18       40   BEGIN    3        1  0        07/13/98 10:00:00 1 informix\n"
            "        00000028 00080000  ...(....\n"
            "\n"
            "addr     len  type     xid      id link\n"
            "40       40   HINSERT  3        0  18       100123 101 40\n"
            "\t00000028 00080000  ...(....\n"
            "        00000028 00080000  ...(....\n"
            "68       36   COMMIT   3        0  40       07/13/98 10:00:01\n")
    rows, carry = run(text)
    assert kinds(rows) == ["begin", "change", "commit"]
    assert [r["record_offset"] for r in rows] == [3, 7, 10]
    assert [r["record_index"] for r in rows] == [0, 1, 2]
    assert carry["open"] == {}
    units = split_units(text.encode())
    assert len(units[1].dump) == 2 and units[0].dump == [b"        00000028 00080000  ...(...."]


def test_header_in_the_middle_of_a_transaction():
    log = Log(header_every=2)
    log.begin(5)
    log.home("HINSERT", 5)
    log.home("HUPBEF", 5, rowid=0x102)
    log.home("HUPAFT", 5, rowid=0x102)
    log.end(5)
    assert log.data.decode().count("addr     len") == 3
    rows, _ = run(log.data)
    assert kinds(rows) == ["begin", "change", "change", "commit"]
    assert [r["op"] for r in rows[1:3]] == ["c", "u"]
    assert rows[2]["n_records"] == 2
    assert rows[2]["record_offset"] == 6       # line 6: after the second header


def test_crlf_lines():
    log = Log()
    log.begin(1)
    log.home("HINSERT", 1)
    log.end(1)
    rows, _ = run(log.data.replace(b"\n", b"\r\n"))
    assert kinds(rows) == ["begin", "change", "commit"]


@pytest.mark.parametrize("records_mode", [False, True])   # the pipeline's way, the file decoder
def test_a_quarantined_unit_shows_the_archives_own_bytes(records_mode):
    """raw_hex is the archive's bytes from the record line to the end of its last dump line,
    with the carriage returns and blank lines in between as they are (found by
    ``python -m tests.fuzz --target informix --seed 20261130``: a line damaged to end in
    \\r\\n had its raw bytes shown without the \\r, bytes the archive does not hold)."""
    text = (b"addr     len  type     xid      id link\r\n"
            b"18       40   BEGIN    3        1  0        07/13/98 10:00:00 1 informix\r\n"
            b"40       40   HINSERT  3        0  18       100123 101\r\n"      # a column short
            b"        00000028 00080000  ...(....\r\n"
            b"\r\n"
            b"        00000028 00080001  ...(....\r\n"
            b"68       36   COMMIT   3        0  40       07/13/98 10:00:01\r\n")
    rows, _ = run(text) if records_mode else run_decoder(text)
    q = [r for r in rows if r["kind"] == "quarantine"]
    assert [r["record_offset"] for r in q] == [3]
    start = text.index(b"40       40")
    end = text.index(b"68       36") - 2                    # the last dump line, without \r\n
    assert bytes.fromhex(q[0]["raw_hex"]) == text[start:end]


# ------------------------------------------------------------------ typed columns

def test_typed_columns():
    rec = parse_record("1a2b 60 BLDCL 9 0 1a00 300001 16 32 120 5 wms.tmp load")
    assert (rec.addr, rec.length, rec.type, rec.xid, rec.link) == (0x1a2b, 60, "BLDCL", 9, 0x1a00)
    assert rec.values == {"tblspace_id": 0x300001, "fextsize": 16, "nextsize": 32,
                          "row_size": 120, "ncolumns": 5, "table_name": "wms.tmp load"}
    rec = parse_record("18 40 BFRMAP 0 0 0 100123 2f FREE 3 1e")
    assert rec.values["status"] == "FREE" and rec.values["prev_page"] == 0x1e
    rec = parse_record("18 40 PTRENAME 4 0 10 100123 wms.a wms.b")
    assert rec.values == {"tblspace_id": 0x100123, "old_table_name": "wms.a",
                          "new_table_name": "wms.b"}


@pytest.mark.parametrize("text,year", [("12/31/99", 1999), ("01/01/00", 2000),
                                       ("06/30/69", 2069), ("01/01/70", 1970),
                                       ("07/13/98", 1998), ("03/09/24", 2024)])
def test_two_digit_years(text, year):
    rec = parse_record(f"18 36 COMMIT 1 0 0 {text} 10:00:00")
    assert rec.values["date"].year == year


@pytest.mark.parametrize("tz,when,utc", [
    ("America/Chicago", "07/13/98 10:23:05", _dt.datetime(1998, 7, 13, 15, 23, 5, tzinfo=UTC)),
    ("America/Chicago", "01/13/99 10:23:05", _dt.datetime(1999, 1, 13, 16, 23, 5, tzinfo=UTC)),
    ("Europe/Berlin", "07/13/98 10:23:05", _dt.datetime(1998, 7, 13, 8, 23, 5, tzinfo=UTC)),
    ("UTC", "02/29/24 23:59:59", _dt.datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC)),
])
def test_commit_time_is_read_in_the_source_timezone(tz, when, utc):
    log = Log()
    log.begin(1)
    log.home("HINSERT", 1)
    log.end(1, when=when)
    rows, _ = run(log.data, tz=tz)
    commit = rows[-1]
    assert commit["kind"] == "commit" and commit["trx_end"] == "commit"
    assert commit["commit_ts"] == utc
    assert commit["commit_position"] == commit["position"] == "000000070000008C"
    assert commit["user"] == "informix"


# ------------------------------------------------------------------ transactions

def test_xid_reuse_makes_distinct_transactions():
    log = Log()
    b1 = log.begin(4, user="alice")
    log.home("HINSERT", 4, rowid=0x201)
    log.end(4)
    b2 = log.begin(4, user="bob")
    log.home("HDELETE", 4, rowid=0x202)
    log.end(4, "ROLLBACK")
    b3 = log.begin(4, user="carol")
    log.home("HINSERT", 4, rowid=0x203)
    log.end(4)
    rows, carry = run(log.data)
    ids = [f"7:{b:x}" for b in (b1, b2, b3)]
    changes = [r for r in rows if r["kind"] == "change"]
    assert [(r["trx_id"], r["row_id"]) for r in changes] == [(ids[0], "201"), (ids[1], "202"),
                                                             (ids[2], "203")]
    ends = [(r["trx_id"], r["trx_end"]) for r in rows if r["trx_end"]]
    assert ends == [(ids[0], "commit"), (ids[1], "abort"), (ids[2], "commit")]
    assert [r["user"] for r in rows if r["kind"] == "commit"] == ["alice", "carol"]
    assert carry["open"] == {}


def test_interleaved_transactions():
    log = Log()
    a = log.begin(1)
    b = log.begin(2)
    log.home("HINSERT", 1, rowid=0x301)
    log.home("HUPBEF", 2, tbl=0x200045, rowid=0x302)
    log.home("HINSERT", 1, rowid=0x303)
    log.home("HUPAFT", 2, tbl=0x200045, rowid=0x302)
    log.end(2)
    log.home("RINSERT", 1, rowid=0x10303)
    log.end(1, when="07/13/98 10:00:09")
    rows, _ = run(log.data)
    assert not [r for r in rows if r["kind"] == "quarantine"]
    changes = [(r["trx_id"], r["op"], r["row_id"], r["n_records"]) for r in rows
               if r["kind"] == "change"]
    assert changes == [(f"7:{a:x}", "c", "301", 1), (f"7:{b:x}", "u", "302", 2),
                       (f"7:{a:x}", "c", "303", 2)]
    assert sum(r["n_records"] for r in rows) == record_lines(log.data) == 9


def test_remainder_records_fold_into_the_home_row_change():
    log = Log()
    log.begin(1)
    log.home("HUPBEF", 1)
    log.home("RUPBEF", 1, rowid=0x10101)
    log.add("ADDITEM", 1, {"tblspace_id": 0x100123, "rowid": 0x101, "logical_page": 1,
                           "key_number": 1, "key_length": 4})
    log.home("HUPAFT", 1)
    log.home("RUPAFT", 1, rowid=0x10101)
    log.home("HDELETE", 1, rowid=0x102)
    log.home("RDELETE", 1, rowid=0x10102)
    log.end(1)
    rows, _ = run(log.data)
    assert kinds(rows) == ["begin", "change", "control", "change", "commit"]
    assert [(r["op"], r["n_records"], r["record_offset"]) for r in rows
            if r["kind"] == "change"] == [("u", 4, 3), ("d", 2, 8)]
    assert rows[2]["rule"] == "additem"


def test_remainder_of_a_change_in_an_earlier_file():
    one = Log(7)
    one.begin(1)
    one.home("HINSERT", 1)
    rows1, carry = run(one.data, "onlog_7.txt")
    two = Log(8, last=one.last)
    two.home("RINSERT", 1, rowid=0x10101)
    two.end(1)
    rows2, carry = run(two.data, "onlog_8.txt", carry)
    assert kinds(rows2) == ["control", "commit"]
    assert rows2[0]["rule"] == "remainder_of_earlier_file"
    assert rows2[1]["trx_id"] == rows1[0]["trx_id"] == "7:18"
    assert carry["open"] == {}


def test_hupbef_without_hupaft_and_hupaft_alone_are_updates():
    log = Log()
    log.begin(1)
    log.home("HUPBEF", 1, rowid=0x101)
    log.home("HUPAFT", 1, rowid=0x999)      # another row: not the pair
    log.end(1)
    rows, _ = run(log.data)
    assert [(r["op"], r["row_id"], r["n_records"]) for r in rows if r["kind"] == "change"] == \
        [("u", "101", 1), ("u", "999", 1)]


def test_ddl_and_truncate():
    log = Log()
    log.begin(1)
    log.add("BLDCL", 1, {"tblspace_id": 0x300002, "fextsize": 8, "nextsize": 8, "row_size": 30,
                         "ncolumns": 2, "table_name": "wms:ops.scratch"})
    log.add("PTRENAME", 1, {"tblspace_id": 0x300002, "old_table_name": "ops.scratch",
                            "new_table_name": "ops.scratch2"})
    log.add("CINDEX", 1, {"tblspace_id": 0x100124, "low_rowid": 0, "high_rowid": 9,
                          "index_descriptor": "ix_loc"})
    log.add("DINDEX", 1, {"tblspace_id": 0x100124, "key_number": 2})
    log.add("ERASE", 1, {"tblspace_id": 0x300002})
    log.add("LG_PTRUNCATE", 1, {"tblspace_id": 0x200045})
    log.add("LG_TRUNCATE", 1, {"tblspace_id": 0x200045})
    log.add("LG_ENDTRUNCATE", 1, {"tblspace_id": 0x200045})
    log.add("LG_PTRUNCATE", 1, {"tblspace_id": 0x777777})
    log.end(1)
    rows, _ = run(log.data)
    got = [(r["kind"], r["op"], r["table_id"], r["schema_name"], r["table_name"], r["ddl"],
            r["rule"] or r["error_class"]) for r in rows[1:-1]]
    assert got == [
        ("change", "ddl", "300002", "ops", "scratch", "BLDCL create table wms:ops.scratch "
         "(tblspace 300002, 2 columns, row size 30)", None),
        ("change", "ddl", "300002", "ops", "scratch2",
         "PTRENAME rename table ops.scratch to ops.scratch2", None),
        ("change", "ddl", "100124", "wms", "locations", "CINDEX create index ix_loc", None),
        ("change", "ddl", "100124", "wms", "locations", "DINDEX drop index key 2", None),
        ("change", "ddl", "300002", None, None, "ERASE drop tblspace 300002", None),
        ("change", "t", "200045", "wms", "shipments", None, None),
        ("control", None, None, None, None, None, "lg_truncate"),
        ("control", None, None, None, None, None, "lg_endtruncate"),
        ("quarantine", None, "777777", None, None, None, "unknown_table"),
    ]


def test_unknown_table_row_change_is_quarantined_with_its_remainders():
    log = Log()
    log.begin(1)
    log.home("HINSERT", 1, tbl=0xabcdef)
    log.home("RINSERT", 1, tbl=0xabcdef, rowid=0x10101)
    log.end(1)
    rows, _ = run(log.data)
    q = rows[1]
    assert (q["kind"], q["error_class"], q["record_offset"], q["n_records"]) == \
        ("quarantine", "unknown_table", 3, 2)


def test_clr_compensates_the_latest_uncompensated_record():
    log = Log()
    log.begin(1)
    c1 = log.home("HINSERT", 1, rowid=0x101)
    u = log.home("HUPBEF", 1, rowid=0x102)
    log.home("HUPAFT", 1, rowid=0x102)
    log.add("CLR", 1)                        # undoes HUPAFT -> the update
    log.add("CLR", 1)                        # undoes HUPBEF -> the update
    c2 = log.home("HINSERT", 1, rowid=0x103)
    log.add("CLR", 1)                        # undoes the second insert
    log.add("CLR", 1)                        # undoes the first insert
    log.add("CLR", 1)                        # nothing left
    log.end(1)
    rows, _ = run(log.data)
    pos = lambda a: f"00000007{a:08X}"      # noqa: E731
    undo = [(r["kind"], r["undo_of"] or r["rule"]) for r in rows if r["kind"] in ("undo", "control")]
    assert undo == [("undo", pos(u)), ("undo", pos(u)), ("undo", pos(c2)), ("undo", pos(c1)),
                    ("control", "clr_without_work")]


def test_records_outside_transactions_are_control():
    log = Log()
    dpt = log.add("DPT", 0, {"number_of_dirty_pages": 3})
    log.add("CKPOINT", 0, {"max_users": 4, "number_of_active_transactions": 0}, link=dpt)
    log.home("HINSERT", 9)                   # xid 9 has no BEGIN
    log.add("ADDLOG", 3, {"log_number": 3, "log_size_pages": 500, "pageno": 0x40})
    rows, carry = run(log.data)
    assert [(r["kind"], r["rule"]) for r in rows] == [
        ("control", "dpt"), ("control", "ckpoint"), ("control", "outside_transaction"),
        ("control", "addlog")]
    assert carry["open"] == {}


# ------------------------------------------------------------------ corrupt input

def corrupt_log():
    log = Log()
    log.begin(8)                                                        # line 2
    log.line("40       56   HINSERT  8        0  18       100123")      # line 3: too few
    log.last[8] = 0x40
    log.home("HINSERT", 8, rowid=0x120)                                 # line 4, links to 40
    log.line("b0g      56   HINSERT  8        0  78       100123 121 20")  # line 5: bad addr
    log.add("HDELETE", 8, {"tblspace_id": 0x100123, "rowid": 0x122, "slotlen": 20},
            link=0x1234)                                                # line 6: accepted
    log.line(f"{log.w.addr:<8x} 40   FROBNIC  8        0  {log.last[8]:<8x} 1 2 3")  # line 7
    log.last[8] = log.w.addr - 24
    log.home("HINSERT", 8, rowid=0x123)                                 # line 8
    log.add("HINSERT", 8, {"tblspace_id": 0x100123, "rowid": 0x124, "slotlen": 20},
            link=0x18)                                                  # line 9: broken link
    log.home("HDELETE", 8, rowid=0x125)                                 # line 10: fine again
    log.end(8)                                                          # line 11
    return log


def test_corrupt_lines_are_quarantined_with_their_line_numbers():
    log = corrupt_log()
    rows, carry = run(log.data)
    q = [(r["record_offset"], r["error_class"]) for r in rows if r["kind"] == "quarantine"]
    assert q == [(3, "corrupt"), (5, "corrupt"), (7, "unknown_record_type"), (9, "broken_chain")]
    for r in rows:
        if r["kind"] == "quarantine":
            assert f"line {r['record_offset']}" in r["message"]
            assert r["trx_id"] == "7:18"
    changes = [r["row_id"] for r in rows if r["kind"] == "change"]
    assert changes == ["120", "122", "123", "125"]
    assert rows[-1]["kind"] == "commit" and carry["open"] == {}
    assert sum(r["n_records"] for r in rows) == record_lines(log.data) == 10


def test_broken_link_then_chain_goes_on_from_the_bad_record():
    log = Log()
    log.begin(2)
    log.home("HINSERT", 2)
    bad = log.add("HINSERT", 2, {"tblspace_id": 0x100123, "rowid": 0x2, "slotlen": 9}, link=0x99)
    log.end(2)                                 # links to the quarantined record
    rows, _ = run(log.data)
    assert [(r["kind"], r["error_class"]) for r in rows] == [
        ("begin", None), ("change", None), ("quarantine", "broken_chain"), ("commit", None)]
    assert rows[2]["position"] == f"00000007{bad:08X}"


def test_bad_values_and_truncated_tail():
    text = ("18 40 BEGIN 1 1 0 13/45/98 10:00:00 1 informix\n"
            "40 40 HINSERT 1 0 18 100123 101 40\n"
            "68 36 COMMIT 1 0 40 07/13/98 25:00:00\n"
            "8c 36 CKPOINT 0 0 0 4")
    rows, carry = run(text)
    assert [(r["kind"], r["error_class"], r["record_offset"]) for r in rows] == [
        ("quarantine", "bad_value", 1), ("change", None, 2), ("quarantine", "bad_value", 3),
        ("quarantine", "truncated", 4)]
    assert rows[1]["trx_id"] == "7:18"          # the bad BEGIN still opened the transaction
    assert carry["open"] == {}                 # the bad COMMIT still ended it


def test_garbage_never_crashes():
    data = b"\x00\xff garbage\n\n  \n" + bytes(range(256)) + b"\naddr len\nzz\n"
    rows, _ = run(data)
    assert all(r["kind"] == "quarantine" for r in rows)
    assert sum(r["n_records"] for r in rows) == record_lines(data)


def test_archive_without_uniqid_is_one_quarantine_row():
    """Decoder mode: a file whose name has no uniqid cannot continue the carry."""
    log = Log()
    log.begin(1)
    log.end(1)
    carry_in = {"version": 1, "uniqid": 6, "open": {}}
    rows, carry = run_decoder(log.data, "onlog.txt", carry_in)
    assert [(r["kind"], r["error_class"], r["n_records"]) for r in rows] == \
        [("quarantine", "corrupt", 2)]
    assert carry == carry_in


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_onlog_bytes_are_decoded_without_crash(data):
    log = corrupt_log()
    raw = bytearray(log.data)
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.sampled_from(b" \nx0f\t:/-"))
    cut = data.draw(st.integers(1, len(raw)))
    raw = bytes(raw[:cut])
    rows, _ = run(raw)
    assert sum(r["n_records"] for r in rows) == record_lines(raw)


# ------------------------------------------------------------------ round trips

TOKEN = st.text("abcdefghijklmnopqrstuvwxyz0123456789_.:", min_size=1, max_size=12)


def value_for(kind: str):
    return {
        L.HEX: st.integers(0, 0xFFFFFFFF),
        L.DEC: st.integers(0, 10**9),
        L.ASCII: TOKEN,
        L.USED_FREE: st.sampled_from(L.USED_FREE_VALUES),
        L.DATE: st.dates(_dt.date(1970, 1, 1), _dt.date(2069, 12, 31)),
        L.TIME: st.times().map(lambda t: t.replace(microsecond=0)),
    }[kind]


@st.composite
def records(draw):
    rtype = draw(st.sampled_from(sorted(L.RECORD_TYPES)))
    values = {name: draw(value_for(kind)) for name, kind, _ in L.RECORD_TYPES[rtype]}
    head = [draw(st.integers(0, 0xFFFFFFFF)), draw(st.integers(0, 65535)),
            draw(st.integers(0, 2**31)), draw(st.integers(0, 99)), draw(st.integers(0, 0xFFFFFFFF))]
    return rtype, values, head


@settings(max_examples=300, deadline=None)
@given(records())
def test_record_line_round_trip(rec):
    rtype, values, (addr, length, xid, id_, link) = rec
    line = format_record(addr, length, rtype, xid, id_, link, values)
    got = parse_record(line)
    assert (got.addr, got.length, got.type, got.xid, got.id, got.link) == \
        (addr, length, rtype, xid, id_, link)
    assert got.values == values


@st.composite
def workloads(draw):
    """Transactions as (xid, [(op, rowid)], outcome) written interleaved."""
    n = draw(st.integers(1, 6))
    trxs = []
    for i in range(n):
        ops = draw(st.lists(st.tuples(st.sampled_from(["c", "d", "u", "U", "r"]),
                                      st.integers(1, 0xFFFF)), min_size=0, max_size=5))
        trxs.append((draw(st.integers(1, 3)), ops, draw(st.sampled_from(["COMMIT", "ROLLBACK"]))))
    order = draw(st.randoms(use_true_random=False))
    return trxs, order, draw(st.booleans()), draw(st.integers(0, 20))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_writer_round_trip(work):
    trxs, rng, dumps, header_every = work
    log = Log(dumps=dumps, header_every=header_every)
    expected = []
    busy: dict[int, list] = {}
    pending = list(enumerate(trxs))
    while pending or busy:
        free = [p for p in pending if p[1][0] not in busy]
        if free and (not busy or rng.random() < 0.4):
            i, t = free[0]
            pending.remove(free[0])
            xid = t[0]
            begin = log.begin(xid)
            busy[xid] = [f"7:{begin:x}", list(t[1]), t[2]]
            continue
        xid = rng.choice(sorted(busy))
        trx_id, ops, outcome = busy[xid]
        if not ops:
            log.end(xid, outcome)
            del busy[xid]
            continue
        op, rowid = ops.pop(0)
        if op == "c":
            log.home("HINSERT", xid, rowid=rowid)
        elif op == "d":
            log.home("HDELETE", xid, rowid=rowid)
            log.home("RDELETE", xid, rowid=rowid + 1)
        elif op == "u":
            log.add("HUPDATE", xid, {"tblspace_id": 0x20004a, "rowid": rowid,
                                     "forward_ptr_rowid": 0, "old_slotlen": 1,
                                     "new_slotlen": 2, "no_of_pieces": 1})
        elif op == "U":
            log.home("HUPBEF", xid, tbl=0x20004a, rowid=rowid)
            log.home("HUPAFT", xid, tbl=0x20004a, rowid=rowid)
        if op != "r":
            expected.append((trx_id, {"U": "u"}.get(op, op), format(rowid, "x")))
        else:
            log.add("CLR", xid)
    rows, carry = run(log.data)
    assert not [r for r in rows if r["kind"] == "quarantine"]
    got = [(r["trx_id"], r["op"], r["row_id"]) for r in rows if r["kind"] == "change"]
    assert got == expected
    assert sum(r["n_records"] for r in rows) == record_lines(log.data)
    assert carry["open"] == {}


# ------------------------------------------------------------------ generated nights

def resolve(nights: list[list[dict]]) -> list[list[dict]]:
    """What the ordering job publishes, night by night, in plain Python (ARCHITECTURE.md)."""
    held: list[dict] = []
    out = []
    for rows in nights:
        rows = held + rows
        by_trx: dict[str, list[dict]] = defaultdict(list)
        for r in rows:
            if r["trx_id"] is not None:
                by_trx[r["trx_id"]].append(r)
        committed, held = [], []
        for trx, trows in by_trx.items():
            end = {r["trx_end"] for r in trows} - {None}
            if "commit" in end:
                c = next(r for r in trows if r["trx_end"] == "commit")
                committed.append((c["commit_position"], trx, c, trows))
            elif not end:
                held.extend(trows)
        night = []
        for cpos, trx, c, trows in sorted(committed, key=lambda x: (x[0], x[1])):
            undone = {r["undo_of"] for r in trows if r["kind"] == "undo"}
            changes = sorted((r for r in trows if r["kind"] == "change"
                              and r["position"] not in undone),
                             key=lambda r: (r["trx_order"], r["position"], r["archive_file"],
                                            r["record_index"]))
            for r in changes:
                night.append({"trx_id": trx, "commit_position": cpos,
                              "commit_ts": c["commit_ts"], "op": r["op"],
                              "table_id": r["table_id"], "schema_name": r["schema_name"],
                              "table_name": r["table_name"], "before": r["before"],
                              "after": r["after"], "ddl": r["ddl"], "row_id": r["row_id"]})
        out.append(night)
    return out


def decode_night(archives: dict[str, bytes], carry, tz="America/Chicago"):
    rows = []
    for name in sorted(archives, key=archive_sort_key):
        r, carry = run(archives[name], f"{SOURCE}/2024/{name}", carry, tz=tz)
        assert sum(x["n_records"] for x in r) == record_lines(archives[name]), name
        assert not [x for x in r if x["kind"] == "quarantine"], name
        rows.extend(r)
    return rows, carry


def test_generated_night_is_published_exactly():
    synth = Synth(SOURCE, seed=3)
    night = synth.night(_dt.date(2024, 3, 10), 60)     # the night clocks spring forward
    assert len(night.archives) >= 2
    text = b"".join(night.archives.values()).decode()
    assert "ROLLBACK" in text and "CLR" in text and "\n        " in text
    rows, carry = decode_night(night.archives, None)
    published = resolve([rows])[0]
    expected = [e.as_dict() for e in night.expected]
    assert published == expected
    assert len(expected) > 30
    assert all(e["commit_ts"].tzinfo is not None for e in expected)
    assert len(json.dumps(carry["open"])) < 20_000


def test_generated_nights_with_carry_are_published_exactly():
    synth = Synth(SOURCE, seed=11)
    nights = synth.nights(_dt.date(2024, 11, 2), 3, 50)     # across the fall-back night
    carry = None
    decoded = []
    for n in nights:
        rows, carry = decode_night(n.archives, carry)
        decoded.append(rows)
    published = resolve(decoded)
    for n, got in zip(nights, published):
        assert got == [e.as_dict() for e in n.expected], n.date
    # some transaction began on one night and committed on the next
    first_ids = {r["trx_id"] for r in decoded[0] if r["kind"] == "begin"}
    later_commits = {r["trx_id"] for rows in decoded[1:] for r in rows if r["kind"] == "commit"}
    assert first_ids & later_commits
    uniqids = [archive_sort_key(a)[0] for n in nights for a in sorted(n.archives, key=archive_sort_key)]
    assert uniqids == sorted(set(uniqids))


def test_generated_xids_are_reused():
    synth = Synth(SOURCE, seed=5)
    night = synth.night(_dt.date(2024, 6, 1), 40)
    xids = []
    for name in sorted(night.archives, key=archive_sort_key):
        for u in split_units(night.archives[name]):
            rec = parse_record(u.line.decode())
            if rec.type == "BEGIN":
                xids.append(rec.xid)
    assert len(xids) == 40 and len(set(xids)) < len(xids)


def test_synth_writes_local_time_of_its_timezone():
    for tz in ("UTC", "Asia/Kolkata"):
        synth = Synth(SOURCE, seed=4, timezone=tz)
        night = synth.night(_dt.date(2024, 1, 15), 15)
        rows, _ = decode_night(night.archives, None, tz=tz)
        assert resolve([rows])[0] == [e.as_dict() for e in night.expected]
        t = next(t for t in night.trxs if t.outcome == "commit" and t.commit_position)
        local = t.commit_ts.replace(tzinfo=ZoneInfo(tz))
        assert t.extra["published_commit_ts"] == local and \
            t.extra["published_commit_ts"].utcoffset() == _dt.timedelta(0)


# ------------------------------------------------------------------ robustness (issue 15)

HUGE = "9" * 5000                     # Python's int() refuses more than 4,300 digits
HUGE_HEX = "f" * 5000


@pytest.mark.parametrize("line,error", [
    (f"40 76 HINSERT 1 0 18 100123 101 {HUGE}", "bad_value"),           # slotlen
    (f"40 76 HINSERT 1 0 18 {HUGE_HEX} 101 40", "bad_value"),           # tblspace
    (f"40 76 HINSERT 1 0 18 100123 {HUGE_HEX} 40", "bad_value"),        # rowid
    (f"40 {HUGE} HINSERT 1 0 18 100123 101 40", "bad_value"),           # len
    (f"40 76 HINSERT 1 {HUGE} 18 100123 101 40", "bad_value"),          # id
    (f"40 76 HINSERT {HUGE} 0 18 100123 101 40", "bad_value"),          # xid
    (f"{HUGE_HEX} 76 HINSERT 1 0 18 100123 101 40", "bad_value"),       # addr
    (f"40 76 HINSERT 1 0 {HUGE_HEX} 100123 101 40", "bad_value"),       # link
    (f"40 76 HINSERT 1 0 18 100123 101 -{HUGE}", "bad_value"),
    (f"40 60 BLDCL 1 0 18 300001 16 16 24 {HUGE} wms.t", "bad_value"),  # ncolumns
])
def test_numbers_beyond_4300_digits_are_quarantined(line, error):
    text = ("18 40 BEGIN 1 3 0 07/13/98 10:00:00 1 informix\n" + line + "\n"
            "a0 76 HINSERT 1 0 40 100123 102 40\n")         # the transaction stays open
    rows, carry = run(text)
    assert rows[1]["error_class"] == error and "line 2" in rows[1]["message"]
    if f"HINSERT {HUGE}" in line:
        # without its xid the record cannot be placed: the next one's link points to it,
        # a broken chain (quarantined); the chain goes on from there
        assert [r["kind"] for r in rows] == ["begin", "quarantine", "quarantine"]
        assert rows[2]["error_class"] == "broken_chain"
    else:
        assert [r["kind"] for r in rows] == ["begin", "quarantine", "change"]
        assert rows[2]["row_id"] == "102"                     # the damage cost one record
    json.dumps(carry["open"])                                 # the carry stays serialisable
    assert len(json.dumps(carry["open"])) < 1000


def test_a_file_with_every_line_indented_gives_quarantine_rows():
    log = Log(dumps=True)
    log.begin(1)
    log.home("HINSERT", 1)
    log.end(1)
    indented = b"".join(b"  " + ln + b"\n" for ln in log.data.split(b"\n") if ln)
    rows, _ = run(indented)
    assert len(rows) == 3 == record_lines(indented)
    assert {(r["kind"], r["error_class"]) for r in rows} == {("quarantine", "corrupt")}
    assert all("indented line is not an onlog -l dump line" in r["message"] for r in rows)
    assert sum(r["n_bytes"] for r in rows) == len(indented)


def test_an_indented_record_line_costs_only_itself():
    log = Log(dumps=True)
    log.begin(1)
    log.home("HINSERT", 1, rowid=0x101)
    log.home("HINSERT", 1, rowid=0x102)
    log.home("HDELETE", 1, rowid=0x103)
    log.end(1)
    clean, _ = run(log.data)
    lines = log.data.split(b"\n")
    for target in ("BEGIN", "HINSERT  1        0  40", "HDELETE", "COMMIT"):
        i = next(k for k, ln in enumerate(lines) if target.encode() in ln)
        damaged = b"\n".join(lines[:i] + [b"   " + lines[i]] + lines[i + 1:])
        rows, carry = run(damaged)
        assert len(rows) == len(clean) == record_lines(damaged), target
        for got, want in zip(rows, clean):
            if got["record_offset"] == i + 1:
                assert (got["kind"], got["error_class"]) == ("quarantine", "corrupt")
                assert got["trx_id"] == want["trx_id"] == "7:18"     # still placed
            else:
                assert {**got, "n_bytes": 0, "user": None} == {**want, "n_bytes": 0, "user": None}
        assert carry["open"] == {}


def test_a_damaged_carry_never_crashes_the_night():
    """Decoder mode: a damaged carry is one quarantine row, never a crash."""
    log = Log(uniqid=8)
    log.home("HINSERT", 1)
    log.end(1)
    good = {"trx": "7:18", "user": "ann", "last": 0x40 - 0x28, "undo": [], "fold": None}
    for bad in ({"open": {"1": {**good, "last": 10 ** 30}}},
                {"open": {"1": {**good, "undo": 5}}},
                {"open": {"x1": good}},
                {"open": {"1": {**good, "fold": {"owner": "a", "tbl": -1}}}},
                {"open": [1, 2]}, {"open": {"1": "?"}}, 17):
        rows, carry = run_decoder(log.data, "onlog_8.txt", carry=bad)
        q = [r for r in rows if r["kind"] == "quarantine"]
        assert len(q) == 1 and q[0]["n_records"] == 0 and "carry" in q[0]["message"]
        assert sum(r["n_records"] for r in rows) == record_lines(log.data)
        json.dumps(carry)
