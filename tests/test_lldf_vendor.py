"""BMC's published Log Master document as golden input (tests/vendor/lldf/PROVENANCE.md).

Every byte example and every code table of ``lldf-logmaster-db2.txt`` that the decoder or
its codecs can read, taken from the document's own text at the line named, decoded, and
compared with the output written here by hand from what the document says (never produced
by the decoder). A missing document fails. The examples are listed in docs/VENDOR_EXAMPLES.md.
"""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path

import pytest

from decoders.base import DecodeContext
from decoders.catalog import Catalog, Table
from decoders.events import EventSink
from decoders.lldf import decode, decode_reassembled
from decoders.lldf import encoder as E
from decoders.lldf import layout as L
from decoders.synth import col
from tests.test_lldf import hdr, rec

DOC = Path(__file__).resolve().parent / "vendor" / "lldf" / "lldf-logmaster-db2.txt"
UTC = _dt.timezone.utc

# "a five-character field": a VARCHAR(5), not nullable and nullable (tables are cp037)
FIVE = Table("300.1", "VENDOR", "FIVE", (col("V", "VARCHAR", False, length=5),))
FIVE_NULL = Table("300.2", "VENDOR", "FIVE_NULL", (col("V", "VARCHAR", True, length=5),))
CATALOG = Catalog("bmc", "lldf", (FIVE, FIVE_NULL))


@pytest.fixture(scope="module")
def doc() -> list[str]:
    assert DOC.is_file(), f"vendor document missing: {DOC} (see tests/vendor/lldf/PROVENANCE.md)"
    return DOC.read_text(encoding="utf-8").split("\n")


def line(doc: list[str], number: int, text: str) -> str:
    """Line ``number`` (1-based) of the document, which must hold ``text``."""
    got = doc[number - 1]
    assert text in got, f"{DOC.name} line {number} no longer says {text!r}: {got!r}"
    return got


def logical_log_bytes(example: str, encoding: str = "cp037") -> bytes:
    """The document's notation ``x'00'x'0005'ABCDE`` as bytes: hex groups, then characters
    (in the table's encoding)."""
    m = re.fullmatch(r"((?:x'[0-9A-Fa-f]*')+)([A-Z]*)", example)
    assert m, example
    hexes = re.findall(r"x'([0-9A-Fa-f]*)'", m.group(1))
    return bytes.fromhex("".join(hexes)) + m.group(2).encode(encoding)


def example_of(doc, number: int, prefix: str) -> str:
    """The notation after ``prefix`` on line ``number`` (e.g. ``Logical log: x'0005'ABCDE``)."""
    text = line(doc, number, prefix)
    return text.split(prefix, 1)[1].strip()


def run(data: bytes) -> list[dict]:
    sink = EventSink("bmc", "lldf", "vendor.dat")
    decode(data, DecodeContext("bmc", "lldf", CATALOG, "vendor.dat", {"codepage": "cp037"}), sink)
    rows = sink.rows()
    assert sum(r["n_bytes"] for r in rows) == len(data)
    return rows


def image(column_bytes: bytes) -> bytes:
    """A row image: its 2-byte length (not counting itself), then the columns."""
    return len(column_bytes).to_bytes(2, "big") + column_bytes


# ---------------------------------------------------------------- the header table

def _vendor_fields(doc: list[str]) -> list[tuple[str | None, int, str, int]]:
    """(name or None for the unnamed reserved field, offset, definition, line) of every row
    of the "Data change record (LLDF)" table: a name line, Dec, Hex, definition."""
    rows = []
    lines = [(i + 1, t.strip()) for i, t in enumerate(doc) if t.strip()]
    for k in range(1, len(lines) - 2):
        (_, dec), (_, hexa), (n, definition) = lines[k], lines[k + 1], lines[k + 2]
        if re.fullmatch(r"\d+", dec) and re.fullmatch(r"[0-9A-F]+", hexa) and \
                re.match(r"(BIN|CHAR)\(\s*\d+\)|Variable", definition):
            assert int(dec) == int(hexa, 16), (dec, hexa)
            name = lines[k - 1][1]
            rows.append((name if re.fullmatch(r"[A-Z][A-Z ]*", name) else None, int(dec),
                         definition, n))
    return rows


def test_header_layout_is_the_vendor_table(doc):
    fields = _vendor_fields(doc)
    by_offset = {off: (name, definition) for name, off, definition, _ in fields}
    # by hand from the table: the fields the decoder relies on
    assert by_offset[0] == ("LENGTH", "BIN(2)")
    assert by_offset[104] == ("CHANGE TYPE", "CHAR(2)")
    assert by_offset[107] == ("LOGRECDISP", "CHAR(1)")
    assert by_offset[161] == ("UORDISP", "CHAR(1)")
    assert by_offset[172][0] == "UORID" and by_offset[172][1].startswith("BIN(10)")
    assert (by_offset[182], by_offset[184], by_offset[186]) == (
        ("SEGLEN", "BIN(2)"), ("TOTALSEGS", "BIN(2)"), ("SEGNUM", "BIN(2)"))
    assert by_offset[188] == (None, "BIN(4)")                 # "Reserved": our ORDERVALUE
    assert by_offset[288] == ("DATA", "Variable")
    # and every field of the layout is the vendor's, at its offset, of its size
    ours = {f.offset: f for f in L.HEADER.fields}
    assert sorted(ours) == sorted(off for off in by_offset if off < 288)
    for off, (name, definition) in by_offset.items():
        if off == 288:
            assert L.MIN_HEADER == 288
            continue
        f = ours[off]
        size = int(re.match(r"(?:BIN|CHAR)\(\s*(\d+)\)", definition).group(1))
        assert f.size == size, (f.name, definition)
        assert f.vendor == (name or "ORDERVALUE (vendor: reserved)"), (f.vendor, name)
        assert (f.kind == "char") == definition.startswith("CHAR"), f.name


# ---------------------------------------------------------------- code tables

# by hand from "Type of update" (lines 263-283): code -> (row kind, op)
CHANGE_TYPES = {"UB": ("change", "u"), "I ": ("change", "c"), "D ": ("change", "d"),
                "DM": ("change", "t"), "DT": ("change", "t"), "DR": ("change", "t"),
                "IL": ("change", "c"), "CO": ("change", "ddl"), "E": ("change", "ddl"),
                "CM": ("control", None), "SC": ("control", None)}


def test_change_types_of_the_document(doc):
    codes = {}
    for number in range(263, 284):
        m = re.fullmatch(r"'([A-Z ]{1,2})' [–-] (.+)", doc[number - 1].strip())
        if m:
            codes[m.group(1)] = (number, m.group(2))
    assert set(codes) == set(CHANGE_TYPES), codes
    assert {c.ljust(2) for c in codes} == L.CHANGE_TYPES
    recs = []
    for code in CHANGE_TYPES:
        area = {"u": E.row_area(FIVE, ["ABCDE"], ["VWXYZ"]), "c": E.row_area(FIVE, None, ["ABCDE"]),
                "d": E.row_area(FIVE, ["ABCDE"], None), "t": b"", None: b"",
                "ddl": E.ddl_area("DROP INDEX X") if code == "CO" else E.exchange_area("VENDOR", "FIVE_CLONE")}
        ct = code.encode("cp037") + (b"\x40" if len(code) == 1 else b"")
        recs.append(rec(dict(hdr(FIVE), change_type=ct, uor_disp="C" if code not in ("CM", "SC") else " "),
                        area[CHANGE_TYPES[code][1]]))
    # 'E' as printed: one character, the second byte X'00'
    recs.append(rec(dict(hdr(FIVE), change_type="E".encode("cp037") + b"\x00"),
                    E.exchange_area("VENDOR", "FIVE_CLONE")))
    rows = run(b"".join(recs))
    assert [(r["kind"], r["op"]) for r in rows] == list(CHANGE_TYPES.values()) + [("change", "ddl")]
    by_code = dict(zip(list(CHANGE_TYPES) + ["E\x00"], rows))
    assert by_code["UB"]["before"] == '{"V": "ABCDE"}' and by_code["UB"]["after"] == '{"V": "VWXYZ"}'
    assert by_code["I "]["after"] == '{"V": "ABCDE"}' and by_code["I "]["before"] is None
    assert by_code["D "]["before"] == '{"V": "ABCDE"}' and by_code["D "]["after"] is None
    assert by_code["CO"]["ddl"] == "DROP INDEX X"
    exchange = "EXCHANGE DATA BETWEEN TABLE VENDOR.FIVE AND VENDOR.FIVE_CLONE"
    assert by_code["E"]["ddl"] == by_code["E\x00"]["ddl"] == exchange
    assert by_code["CM"]["rule"] == "lldf_command" and by_code["SC"]["rule"] == "lldf_status_change"


def test_dispositions_of_the_document(doc):
    # LOGRECDISP (lines 309-319) and UORDISP (lines 421-423), by hand: C is published,
    # the others are skipped under their rule; UORDISP A drops the unit of recovery
    for number, code in ((309, "C"), (311, "A"), (315, "S"), (319, "O")):
        line(doc, number, f"{code} – Record")
    line(doc, 421, "C – committed")
    line(doc, 423, "A – aborted")
    data = b"".join(rec(hdr(FIVE, lrd=lrd, disp=disp), E.row_area(FIVE, None, ["ABCDE"]))
                    for lrd, disp in (("C", "C"), ("A", "C"), ("S", "C"), ("O", "C"), ("C", "A")))
    rows = run(data)
    assert [(r["kind"], r["rule"], r["trx_end"]) for r in rows] == [
        ("change", None, "commit"), ("skip", "lldf_logrecdisp_A", "commit"),
        ("skip", "lldf_logrecdisp_S", "commit"), ("skip", "lldf_logrecdisp_O", "commit"),
        ("skip", "lldf_uor_aborted", "abort")]


# ---------------------------------------------------------------- row images

def test_five_character_field_examples(doc):
    """Lines 713-731: the same five-character field in the Db2 log and in the logical log,
    not nullable, nullable and set, nullable and NULL."""
    not_null = logical_log_bytes(example_of(doc, 719, "Logical log:"))
    nullable_set = logical_log_bytes(example_of(doc, 725, "Logical log:"))
    nullable_null = logical_log_bytes(example_of(doc, 731, "Logical log:"))
    # the bytes, by hand: length 5 then ABCDE in EBCDIC; null byte 00 / FF before the length
    assert not_null == bytes.fromhex("0005C1C2C3C4C5")
    assert nullable_set == bytes.fromhex("000005C1C2C3C4C5")
    assert nullable_null == bytes.fromhex("FF0000")
    data = (rec(hdr(FIVE, ct="I "), E.encode_area(image(not_null)))
            + rec(hdr(FIVE_NULL, ct="I "), E.encode_area(image(nullable_set)))
            + rec(hdr(FIVE_NULL, ct="I "), E.encode_area(image(nullable_null))))
    rows = run(data)
    assert [r["after"] for r in rows] == ['{"V": "ABCDE"}', '{"V": "ABCDE"}', '{"V": null}']
    # line 717: the Db2 log form of the not-nullable field is the same bytes
    assert logical_log_bytes(example_of(doc, 717, "DB2 log:")) == not_null


def test_db2_log_forms_are_not_the_logical_log(doc):
    """Lines 723 and 729: the Db2 log puts the length first and counts the null byte in it;
    read as a logical log row image that length (X'0600', X'01FF') exceeds the VARCHAR(5):
    the record is quarantined (bad_value), not decoded as something else."""
    db2_set = logical_log_bytes(example_of(doc, 723, "DB2 log:"))
    db2_null = logical_log_bytes(example_of(doc, 729, "DB2 log:"))
    rows = run(rec(hdr(FIVE_NULL, ct="I "), E.encode_area(image(db2_set)))
               + rec(hdr(FIVE_NULL, ct="I "), E.encode_area(image(db2_null))))
    assert [(r["kind"], r["error_class"]) for r in rows] == [("quarantine", "bad_value")] * 2
    assert all("VARCHAR longer than its declared length" in r["message"] for r in rows)


def test_update_before_image_first(doc):
    """Line 678: for UB the before image comes first, the after image next (both with their
    2-byte lengths, lines 25 and 37); also when the DATA area arrives in segments."""
    line(doc, 678, "before data is first; after data is next")
    before = logical_log_bytes(example_of(doc, 725, "Logical log:"))
    after = logical_log_bytes(example_of(doc, 731, "Logical log:"))
    area = E.encode_area(image(before) + image(after))
    rows = run(rec(hdr(FIVE_NULL, ct="UB"), area))
    assert (rows[0]["op"], rows[0]["before"], rows[0]["after"]) == ("u", '{"V": "ABCDE"}', '{"V": null}')
    pieces = E.encode_records(hdr(FIVE_NULL, ct="UB"), area, pieces=E.split_area(area, [3, 9]))
    segs = run(b"".join(pieces[::-1]))
    first = next(r for r in segs if r["seg_num"] == 1)
    data = b"".join(r["seg_data"] for r in sorted(segs, key=lambda r: r["seg_num"]))
    got = decode_reassembled(data, first, DecodeContext("bmc", "lldf", CATALOG, "vendor.dat", {}))
    assert got == {"before": '{"V": "ABCDE"}', "after": '{"V": null}', "ddl": None}


def test_data_length_includes_itself(doc):
    """Line 658: the DATA area's first halfword is its total length including itself; an
    area whose length leaves itself out does not frame its images (quarantined)."""
    line(doc, 658, "including 2-byte length")
    images = image(logical_log_bytes(example_of(doc, 719, "Logical log:")))
    good = rec(hdr(FIVE, ct="I "), (len(images) + 2).to_bytes(2, "big") + images)
    bad = rec(hdr(FIVE, ct="I "), len(images).to_bytes(2, "big") + images)
    rows = run(good + bad)
    assert rows[0]["after"] == '{"V": "ABCDE"}'
    assert (rows[1]["kind"], rows[1]["error_class"]) == ("quarantine", "corrupt")


def test_exchange_data_layout(doc):
    """Lines 668-676: exchange DATA = 2-byte length of the clone owner, the owner, 2-byte
    length of the clone name, the name."""
    for number, text in ((668, "For exchange, contains"), (670, "2-byte length of clone table owner"),
                         (672, "Owner of clone table"), (674, "2-byte length of clone table name"),
                         (676, "Name of clone table")):
        line(doc, number, text)
    body = b"\x00\x03" + "OWN".encode("cp037") + b"\x00\x05" + "CLONE".encode("cp037")
    rows = run(rec(hdr(FIVE, ct="E "), E.encode_area(body)))
    assert rows[0]["ddl"] == "EXCHANGE DATA BETWEEN TABLE VENDOR.FIVE AND OWN.CLONE"


# ---------------------------------------------------------------- header values

def test_lrsn_and_rba_examples(doc):
    """Lines 690-693: a non-extended 6-byte LRSN sits at offset 1 of the BIN(10) field, a
    6-byte RBA at offset 4; the decoder keeps the 10 bytes as 20 hex digits."""
    lrsn_text = line(doc, 691, "Non-extended format LRSN")
    rba_text = line(doc, 693, "Non-extended format RBA")
    short_lrsn, long_lrsn = re.findall(r"X'([0-9A-F]+)'", lrsn_text)
    short_rba, long_rba = re.findall(r"X'([0-9A-F]+)'", rba_text)
    assert bytes(1) + bytes.fromhex(short_lrsn) + bytes(3) == bytes.fromhex(long_lrsn)
    assert bytes(4) + bytes.fromhex(short_rba) == bytes.fromhex(long_rba)
    fields = dict(hdr(FIVE, ct="I "), log_lrsn=bytes.fromhex(long_lrsn), log_rba=bytes.fromhex(long_rba),
                  uor_id=bytes.fromhex(long_rba), uor_commit_lrsn=bytes.fromhex(long_lrsn), order_value=7)
    (row,) = run(rec(fields, E.row_area(FIVE, None, ["ABCDE"])))
    assert row["position"] == "00CA670FBBF3D3000000" + "00000000123456789ABC"
    assert row["trx_id"] == "00000000123456789ABC"
    assert row["commit_position"] == "00CA670FBBF3D3000000"
    assert row["trx_order"] == "00000007" + "00CA670FBBF3D3000000" + "00000000123456789ABC"


def test_bin17_timestamp_template(doc):
    """Line 682: BIN(17) timestamps are X'YYYYMMDDHHMMSSHHMMMMNNNPPPFFF00000': date, time,
    fraction digits, padding. An instance of the template (2024-03-01 13:14:15, fraction
    123456789012345) reads as that time, to the microsecond (UTC, docs/lldf.md)."""
    template = re.search(r"X'([A-Z0-9]+)'", line(doc, 682, "BIN(17) timestamps are of the format")).group(1)
    assert len(template) == 34 and template.startswith("YYYYMMDDHHMMSS") and template.endswith("00000")
    instance = "20240301" + "131415" + "123456789012345" + "00000"
    assert len(instance) == len(template)
    (row,) = run(rec(dict(hdr(FIVE, ct="I "), uor_commit_timestamp=bytes.fromhex(instance)),
                     E.row_area(FIVE, None, ["ABCDE"])))
    assert row["commit_ts"] == _dt.datetime(2024, 3, 1, 13, 14, 15, 123456, tzinfo=UTC)
    # all zero: no commit timestamp
    (row,) = run(rec(dict(hdr(FIVE, ct="I "), uor_commit_timestamp=bytes(17)),
                     E.row_area(FIVE, None, ["ABCDE"])))
    assert row["commit_ts"] is None
