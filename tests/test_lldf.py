"""Log Master logical log data files (decoders/lldf): codecs, images, segments, framing,
corrupt inputs, golden files and whole generated nights."""

from __future__ import annotations

import datetime as _dt
import json
from collections import Counter, defaultdict
from decimal import Context, Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decoders import codecs as C
from decoders import get
from decoders.base import DecodeContext
from decoders.catalog import Catalog, Table, load_catalog
from decoders.errors import DecodeError, IncompleteSegments
from decoders.events import EventSink
from decoders.lldf import assemble_segments, decode, decode_reassembled
from decoders.lldf import decoder as D
from decoders.lldf import encoder as E
from decoders.lldf import layout as L
from decoders.lldf.synth import Synth
from decoders.synth import col, render
from tests.golden import GOLDEN, check_golden

ROOT = Path(__file__).resolve().parents[1]
UTC = _dt.timezone.utc

# ---------------------------------------------------------------- fixtures and helpers

T1 = Table("260.5", "CORE", "ACCOUNTS", (
    col("ACCT_ID", "INTEGER", False), col("BRANCH", "SMALLINT"),
    col("BALANCE", "DECIMAL", precision=15, scale=2), col("RATE", "FLOAT", length=8),
    col("FACTOR", "FLOAT", length=4), col("STATUS", "CHAR", length=3),
    col("HOLDER", "VARCHAR", length=40), col("OPENED", "DATE"), col("AT", "TIME"),
    col("UPDATED", "TIMESTAMP"), col("BIG", "BIGINT")), key=("ACCT_ID",))
T2 = Table("261.3", "CRM", "NAMES", (
    col("ID", "INTEGER", False), col("NAME", "VARCHAR", False, length=30),
    col("CITY", "CHAR", length=6)), encoding="cp500")
CATALOG = Catalog("core_zos", "lldf", (T1, T2))

ROW1 = [7, -3, Decimal("-12.30"), 0.15625, C.Float4(2.5), "AB!", "Müller [x]",
        _dt.date(2024, 2, 29), _dt.time(23, 59, 1), _dt.datetime(2024, 3, 1, 12, 0, 0, 123456),
        -2**63]
ROW1B = [7, None, Decimal("100.00"), -1e-30, C.Float4(-0.75), None, None, None, None, None, None]
ROW2 = [1, "a|b^c¬d", "Zürich"]

COMMIT_TS = _dt.datetime(2024, 3, 1, 13, 14, 15, 654321)


def ctx(catalog=CATALOG, rdw=False, archive="a.dat", codepage="cp037"):
    return DecodeContext("core_zos", "lldf", catalog, archive,
                         options={"rdw": rdw, "codepage": codepage})


def run(data: bytes, rdw=False, catalog=CATALOG, archive="a.dat", records: int | None = None
        ) -> list[dict]:
    """Decode; ``records``: how many records the test wrote (counted where it built the
    archive, not by the decoder): the rows must account for exactly those, and for every
    byte."""
    sink = EventSink("core_zos", "lldf", archive)
    decode(data, ctx(catalog, rdw, archive), sink)
    rows = sink.rows()
    assert sum(r["n_bytes"] for r in rows) == len(data)
    if records is not None:
        assert sum(r["n_records"] for r in rows) == records
    return rows


def hdr(table=T1, *, ct="I ", lrsn=0x1000, rba=0x2000, uor=0x500, ov=1, disp="C", lrd="C",
        commit_lrsn=0x9000, rid=b"\x00\x00\x01\x02\x03", **extra) -> dict:
    dbid, obid = (int(x) for x in table.id.split("."))
    f = {"dbid": dbid, "tbobid": obid, "psid": 2, "owner": table.schema, "name": table.name,
         "len_owner": len(table.schema), "len_name": len(table.name), "change_type": ct,
         "log_lrsn": E.bin10(lrsn), "log_rba": E.bin10(rba), "uor_id": E.bin10(uor),
         "order_value": ov, "uor_disp": disp, "log_rec_disp": lrd, "rid": rid,
         "auth_id": "APPUSER", "timestamp": E.ts17(COMMIT_TS)}
    if disp == "C":
        f.update(uor_commit_lrsn=E.bin10(commit_lrsn),
                 uor_commit_timestamp=E.ts17(COMMIT_TS, "789"))
    f.update(extra)
    return f


def rec(fields: dict, area: bytes, **kw) -> bytes:
    (one,) = E.encode_records(fields, area, **kw)
    return one


def quarantines(rows):
    return [r for r in rows if r["kind"] == "quarantine"]


# ---------------------------------------------------------------- layout

def test_layout_offsets_match_vendor_table():
    assert L.HEADER.size == 288
    for name, off in (("change_type", 104), ("uor_disp", 161), ("uor_id", 172),
                      ("len_segment", 182), ("num_segments", 184), ("segment_no", 186),
                      ("order_value", 188), ("uor_commit_lrsn", 192), ("pagenum_fmt", 287),
                      ("log_lrsn", 77), ("log_rba", 87), ("rid", 99), ("uor_commit_timestamp", 144)):
        assert L.HEADER.offset(name) == off
    h = E.encode_header(hdr(ct="UB", ov=0x01020304))
    assert h[104:106] == "UB".encode("cp037") == b"\xe4\xc2"
    assert h[188:192] == b"\x01\x02\x03\x04"
    assert h[0:2] == b"\x01\x20"


def test_registry_and_face():
    mod = get("lldf")
    assert mod.FORMAT == "lldf" and mod.SEQUENTIAL is False
    assert mod.archive_sort_key("b") > mod.archive_sort_key("a")
    assert callable(mod.decode_reassembled) and issubclass(mod.Synth, object)


def test_catalog_file_matches_synth():
    cat = Synth("core_zos", options={"rdw": True, "codepage": "cp037"}).catalog
    path = ROOT / "include" / "catalogs" / "core_zos.json"
    assert path.read_text(encoding="utf-8") == cat.dumps()
    assert load_catalog(path) == cat
    types = {(c.type, c.length if c.type == "FLOAT" else None) for t in cat.tables for c in t.columns}
    for need in ("SMALLINT", "INTEGER", "BIGINT", "DECIMAL", "CHAR", "VARCHAR", "DATE", "TIME",
                 "TIMESTAMP"):
        assert (need, None) in types
    assert ("FLOAT", 4) in types and ("FLOAT", 8) in types
    assert any(t.encoding == "cp500" for t in cat.tables)


# ---------------------------------------------------------------- codec round trips

@settings(max_examples=200, deadline=None)
@given(st.integers(-2**20, 2**20), st.integers(-60, 60))
def test_ibm_float4_round_trip(m, e):
    value = m * 2.0 ** e
    raw = E.encode_value(col("F", "FLOAT", False, length=4), value, "cp037")
    got = D._ibm4(raw)
    assert got == value and isinstance(got, C.Float4)
    assert C.float4_text(got) == C.float4_text(value)


@settings(max_examples=200, deadline=None)
@given(st.integers(-2**52 + 1, 2**52 - 1), st.integers(-200, 200))
def test_ibm_float8_round_trip(m, e):
    value = m * 2.0 ** e
    raw = C.encode_ibm_float(value, 8)
    assert C.decode_ibm_float(raw) == value
    assert json.loads(C.float8_text(value)) == value


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 1), st.integers(1, 0x7F), st.integers(0x100000, 0xFFFFFF))
def test_ibm_float4_normalised_bytes_round_trip(sign, exp, frac):
    raw = ((sign << 31) | (exp << 24) | frac).to_bytes(4, "big")
    assert C.encode_ibm_float(C.decode_ibm_float(raw), 4) == raw


def test_ibm_float_known_vectors():
    assert C.decode_ibm_float(bytes.fromhex("4110000000000000")) == 1.0
    assert C.decode_ibm_float(bytes.fromhex("C276A000")) == -118.625
    # outside the IEEE single range: kept exact as a double, not squeezed into a Float4
    big = D._ibm4(bytes.fromhex("7FFFFFFF"))
    assert not isinstance(big, C.Float4) and big > 1e75


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 31).flatmap(lambda p: st.tuples(
    st.just(p), st.integers(0, p), st.integers(-(10**p - 1), 10**p - 1), st.sampled_from([0xC, 0xF]))))
def test_packed_decimal_round_trip(args):
    p, s, unscaled, plus = args
    value = Decimal(unscaled).scaleb(-s, Context(prec=80))  # exact for 31 digits
    raw = C.encode_packed(value, p, s, positive_sign=plus)
    assert len(raw) == p // 2 + 1
    assert D._packed(p, s)(raw) == value


def test_packed_decimal_bad_sign_and_overflow():
    from decoders.errors import BadValue
    with pytest.raises(BadValue, match="sign"):
        D._packed(5, 2)(bytes.fromhex("12345A")[:2] + b"\x67")
    with pytest.raises(BadValue, match="precision"):
        D._packed(4, 0)(bytes.fromhex("12345C"))


EBCDIC_TEXT = st.text(alphabet=st.sampled_from(
    list("ABCXYZabcxyz0189 []!|^¬éÄß$#@{}\\~`'\"<>()+-*/.,;:=?%&_")), max_size=30)


@settings(max_examples=150, deadline=None)
@given(EBCDIC_TEXT, st.sampled_from(["cp037", "cp500", "cp273", "cp1140"]))
def test_ebcdic_text_round_trip(text, enc):
    tab = Table("1.1", "S", "T", (col("V", "VARCHAR", False, length=40),
                                  col("C", "CHAR", False, length=len(text.encode(enc)) or 1)),
                encoding=enc)
    values = [text, text.ljust(1)]
    img = E.encode_image(tab, values)
    got, end = D.TableCodec(tab).image(img, 0, len(img))
    assert end == len(img) and got == render(tab, values)
    assert C.ebcdic(C.to_ebcdic(text, enc), enc) == text


def _value_strategy(c):
    t = c.type
    if t == "SMALLINT":
        s = st.integers(-2**15, 2**15 - 1)
    elif t == "INTEGER":
        s = st.integers(-2**31, 2**31 - 1)
    elif t == "BIGINT":
        s = st.integers(-2**63, 2**63 - 1)
    elif t == "DECIMAL":
        s = st.integers(-(10**c.precision - 1), 10**c.precision - 1).map(
            lambda u, sc=c.scale: Decimal(u).scaleb(-sc))
    elif t == "FLOAT" and c.length == 4:
        s = st.builds(lambda m, e: C.Float4(m * 2.0 ** e), st.integers(-2**20, 2**20),
                      st.integers(-40, 40))
    elif t == "FLOAT":
        s = st.builds(lambda m, e: m * 2.0 ** e, st.integers(-2**52, 2**52), st.integers(-90, 90))
    elif t == "CHAR":
        s = EBCDIC_TEXT.map(lambda x, n=c.length: (x + " " * n)[:n])
    elif t == "VARCHAR":
        s = EBCDIC_TEXT.map(lambda x, n=c.length: x[:n])
    elif t == "DATE":
        s = st.dates()
    elif t == "TIME":
        s = st.times().map(lambda v: v.replace(microsecond=0, tzinfo=None))
    else:
        s = st.datetimes()
    return st.one_of(st.none(), s) if c.nullable else s


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_row_image_round_trip(data):
    for tab in (T1, T2):
        values = [data.draw(_value_strategy(c)) for c in tab.columns]
        img = E.encode_image(tab, values)
        got, end = D.TableCodec(tab).image(img + b"junk", 0, len(img))
        assert end == len(img)
        assert got == render(tab, values)


# ---------------------------------------------------------------- records and segments

def test_update_insert_delete_records():
    data = (rec(hdr(ct="UB", ov=2), E.row_area(T1, ROW1, ROW1B))
            + rec(hdr(T2, ct="I ", ov=1, lrsn=0x0900), E.row_area(T2, None, ROW2))
            + rec(hdr(ct="D ", ov=3, lrsn=0x1100), E.row_area(T1, ROW1B, None)))
    rows = run(data, records=3)
    assert [r["kind"] for r in rows] == ["change"] * 3
    u, i, d = rows
    assert (u["op"], i["op"], d["op"]) == ("u", "c", "d")
    assert u["before"] == render(T1, ROW1) and u["after"] == render(T1, ROW1B)
    assert json.loads(u["before"])["FACTOR"] == 2.5
    assert json.loads(u["before"])["BALANCE"] == "-12.30"
    assert json.loads(u["before"])["UPDATED"] == "2024-03-01T12:00:00.123456"
    assert i["after"] == render(T2, ROW2) and json.loads(i["after"])["NAME"] == "a|b^c¬d"
    assert d["before"] == render(T1, ROW1B) and d["after"] is None
    assert u["trx_id"] == "00000000000000000500"
    assert u["position"] == "00000000000000001000" + "00000000000000002000"
    assert u["trx_order"] == "00000002" + u["position"]
    assert u["trx_end"] == "commit" and u["commit_position"] == "00000000000000009000"
    assert u["commit_ts"] == COMMIT_TS.replace(tzinfo=UTC)
    assert u["user"] == "APPUSER" and u["row_id"] == "0000010203"
    assert (u["table_id"], u["schema_name"], u["table_name"]) == ("260.5", "CORE", "ACCOUNTS")
    first_len = len(rec(hdr(ct="UB", ov=2), E.row_area(T1, ROW1, ROW1B)))
    second_len = len(rec(hdr(T2, ct="I ", ov=1, lrsn=0x0900), E.row_area(T2, None, ROW2)))
    assert [r["record_offset"] for r in rows] == [0, first_len, first_len + second_len]
    assert [r["record_index"] for r in rows] == [0, 1, 2]


def test_dispositions_truncates_ddl_control():
    data = b"".join([
        rec(hdr(disp="A", lrd="A"), E.row_area(T1, None, ROW1)),
        rec(hdr(lrd="S"), E.row_area(T1, None, ROW1)),
        rec(hdr(lrd="O", disp=" "), E.row_area(T1, None, ROW1)),
        rec(hdr(disp=" "), E.row_area(T1, None, ROW1)),
        rec(hdr(ct="DT"), b""),
        rec(hdr(ct="DM"), E.encode_area(b"\x01\x02\x03")),
        rec(hdr(ct="CO"), E.ddl_area("ALTER TABLE CORE.ACCOUNTS ADD X INT")),
        rec(hdr(ct="CO", dbid=999, tbobid=1, owner="NEWOWN", name="NEWTAB", len_owner=6,
                len_name=6), E.ddl_area("CREATE TABLE NEWOWN.NEWTAB (A INT)")),
        rec(hdr(ct="CO"), E.encode_area(b"")),
        rec(hdr(ct="E "), E.exchange_area("CORE", "ACCOUNTS_CLONE")),
        rec(hdr(ct="CM", disp=" "), E.encode_area("-STOP DB".encode("cp037"))),
        rec(hdr(ct="SC", disp=" "), b""),
    ])
    rows = run(data, records=12)
    kinds = [(r["kind"], r["rule"], r["op"]) for r in rows]
    assert kinds == [("skip", "lldf_uor_aborted", None), ("skip", "lldf_logrecdisp_S", None),
                     ("skip", "lldf_logrecdisp_O", None), ("change", None, "c"),
                     ("change", None, "t"), ("change", None, "t"), ("change", None, "ddl"),
                     ("change", None, "ddl"), ("change", None, "ddl"), ("change", None, "ddl"),
                     ("control", "lldf_command", None), ("control", "lldf_status_change", None)]
    assert rows[0]["trx_end"] == "abort" and rows[0]["trx_id"] == "00000000000000000500"
    assert rows[1]["trx_end"] == "commit"
    assert rows[3]["trx_end"] is None and rows[3]["commit_position"] is None
    assert rows[4]["row_id"] is None and rows[4]["before"] is None
    assert rows[6]["ddl"] == "ALTER TABLE CORE.ACCOUNTS ADD X INT"
    assert (rows[7]["table_id"], rows[7]["schema_name"], rows[7]["table_name"], rows[7]["ddl"]) == \
        ("999.1", "NEWOWN", "NEWTAB", "CREATE TABLE NEWOWN.NEWTAB (A INT)")
    assert rows[8]["ddl"] == "CATALOG OBJECT CORE.ACCOUNTS"
    assert rows[9]["ddl"] == "EXCHANGE DATA BETWEEN TABLE CORE.ACCOUNTS AND CORE.ACCOUNTS_CLONE"
    assert rows[10]["trx_id"] is None


def _segmented(area: bytes, cuts, fields=None, archives=2, rdw=False):
    """Encode ``area`` split at ``cuts`` and spread the pieces, reversed, over archives."""
    recs = E.encode_records(fields or hdr(ct="UB"), area, pieces=E.split_area(area, cuts))
    recs.reverse()
    files = [E.write_file(recs[i::archives], rdw=rdw) for i in range(archives)]
    rows = []
    for i, f in enumerate(files):
        rows += run(f, rdw=rdw, archive=f"seg{i}.dat", records=len(recs[i::archives]))
    return rows


def test_segments_at_every_boundary():
    area = E.row_area(T1, ROW1, ROW1B)
    whole = run(rec(hdr(ct="UB"), area), records=1)[0]
    n = len(area)
    cut_sets = [[k] for k in range(1, n)] + [[1, n - 1], [2, n // 2, n - 2], list(range(1, n, 7))]
    for cuts in cut_sets:
        rows = _segmented(area, cuts, rdw=len(cuts) % 2 == 0)
        assert all(r["kind"] == "segment" for r in rows)
        assert len({r["seg_key"] for r in rows}) == 1
        assert {r["seg_total"] for r in rows} == {len(cuts) + 1}
        assert {r["archive_file"] for r in rows} == {"seg0.dat", "seg1.dat"}
        first = next(r for r in rows if r["seg_num"] == 1)
        got = decode_reassembled(assemble_segments(rows), first, ctx())
        assert got == {"before": whole["before"], "after": whole["after"], "ddl": None}
        for k in ("op", "table_id", "trx_id", "position", "trx_order", "commit_position",
                  "commit_ts", "row_id", "trx_end"):
            assert first[k] == whole[k]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_segment_split_round_trip_hypothesis(data):
    values = [data.draw(_value_strategy(c)) for c in T1.columns]
    ct = data.draw(st.sampled_from(["I ", "D ", "UB"]))
    area = E.row_area(T1, values if ct != "I " else None,
                      values if ct != "D " else None)
    cuts = data.draw(st.lists(st.integers(1, len(area) - 1), min_size=1, max_size=5, unique=True))
    rows = _segmented(area, cuts, fields=hdr(ct=ct), archives=data.draw(st.integers(1, 3)))
    first = next(r for r in rows if r["seg_num"] == 1)
    got = decode_reassembled(assemble_segments(rows), first, ctx())
    assert got["before"] == (render(T1, values) if ct != "I " else None)
    assert got["after"] == (render(T1, values) if ct != "D " else None)


def test_segmented_ddl_and_exchange_reassemble():
    for ct, area, text in (("CO", E.ddl_area("ALTER TABLE CORE.ACCOUNTS DROP COLUMN Q"),
                            "ALTER TABLE CORE.ACCOUNTS DROP COLUMN Q"),
                           ("E ", E.exchange_area("CORE", "ACC_CLONE"),
                            "EXCHANGE DATA BETWEEN TABLE CORE.ACCOUNTS AND CORE.ACC_CLONE")):
        rows = _segmented(area, [1, 5], fields=hdr(ct=ct))
        first = next(r for r in rows if r["seg_num"] == 1)
        assert first["op"] == "ddl"
        assert decode_reassembled(assemble_segments(rows), first, ctx())["ddl"] == text


def test_missing_segment_is_incomplete_with_offsets():
    area = E.row_area(T1, ROW1, ROW1B)
    recs = E.encode_records(hdr(ct="UB"), area, pieces=E.split_area(area, [10, 40]))
    data = recs[2] + recs[0]                        # segment 2 never arrives
    rows = run(data, archive="x.dat", records=2)
    with pytest.raises(IncompleteSegments) as ei:
        assemble_segments(rows)
    err = ei.value
    assert err.error_class == "incomplete_segments"
    assert err.offset == 0 and "missing [2]" in str(err)
    assert f"x.dat:{len(recs[2])}" in str(err) and "x.dat:0" in str(err)
    # the job concatenating an incomplete group anyway: decode_reassembled refuses it
    with pytest.raises(DecodeError):
        decode_reassembled(recs[0][288:] + recs[2][288:], rows[1], ctx())


# ---------------------------------------------------------------- corrupt inputs

GOOD = rec(hdr(T2, ct="I "), E.row_area(T2, None, ROW2))


def _with(field_off: int, raw: bytes, record: bytes = GOOD) -> bytes:
    return record[:field_off] + raw + record[field_off + len(raw):]


@pytest.mark.parametrize("rdw", [False, True])
def test_length_smaller_than_288(rdw):
    bad = _with(0, b"\x01\x1f")
    data = E.write_file([GOOD, bad, GOOD, GOOD], rdw=rdw)
    rows = run(data, rdw=rdw, records=4)
    step = len(GOOD) + (4 if rdw else 0)
    q = quarantines(rows)
    assert len(q) == 1 and q[0]["error_class"] == "corrupt" and q[0]["record_offset"] == step
    assert "LENGTH" in q[0]["message"]
    # the decoder resynchronises at the next plausible record: only the damaged one is lost
    assert [r["kind"] for r in rows] == ["change", "quarantine", "change", "change"]
    assert (q[0]["n_records"], q[0]["n_bytes"]) == (1, step)
    assert [r["record_offset"] for r in rows] == [0, step, 2 * step, 3 * step]


def test_longer_header_tolerated():
    long = rec(hdr(T2), E.row_area(T2, None, ROW2), header_len=300)
    rows = run(long + GOOD, records=2)
    assert [r["kind"] for r in rows] == ["change", "change"]
    assert rows[0]["after"] == rows[1]["after"] == render(T2, ROW2)
    assert rows[1]["record_offset"] == len(long)


def test_data_length_past_the_record():
    area = E.row_area(T2, None, ROW2)
    bad = _with(288, L.LEN2.pack(len(area) + 5))
    rows = run(GOOD + bad + GOOD, records=3)
    q = quarantines(rows)
    assert [r["kind"] for r in rows] == ["change", "quarantine", "change"]
    assert q[0]["error_class"] == "corrupt" and q[0]["record_offset"] == len(GOOD)
    assert "DATA length past the record" in q[0]["message"]
    # a row image whose own length runs past the area
    bad_img = _with(290, L.LEN2.pack(len(area)))
    q = quarantines(run(bad_img, records=1))
    assert q[0]["error_class"] == "corrupt" and "row image length past" in q[0]["message"]


def test_seglen_past_end_of_file_is_truncated():
    bad = _with(182, L.LEN2.pack(5000))
    rows = run(GOOD + bad, records=2)
    q = quarantines(rows)
    assert q[0]["error_class"] == "truncated" and q[0]["record_offset"] == len(GOOD)
    rows = run(GOOD + GOOD[:200], records=2)
    assert quarantines(rows)[0]["error_class"] == "truncated"
    assert quarantines(rows)[0]["record_offset"] == len(GOOD)


def test_bad_packed_decimal_sign():
    good = rec(hdr(ct="I "), E.row_area(T1, None, ROW1))
    # BALANCE is the third column: after the 2-byte area length, 2-byte image length,
    # INTEGER (4), null byte + SMALLINT (3), null byte (1): packed at +12, 8 bytes
    start = 288 + 2 + 2 + 4 + 3 + 1
    assert good[start:start + 8] == C.encode_packed(Decimal("-12.30"), 15, 2)
    bad = _with(start + 7, bytes([good[start + 7] & 0xF0 | 0x3]), good)
    rows = run(GOOD + bad + GOOD, records=3)
    q = quarantines(rows)
    assert [r["kind"] for r in rows] == ["change", "quarantine", "change"]
    assert q[0]["error_class"] == "bad_value" and q[0]["record_offset"] == len(GOOD)
    assert "BALANCE" in q[0]["message"] and "sign" in q[0]["message"]
    assert q[0]["trx_id"] == "00000000000000000500"
    assert q[0]["raw_hex"] == bad[:256].hex()


def test_bad_rdw():
    data = E.write_file([GOOD, GOOD, GOOD], rdw=True)
    step = len(GOOD) + 4
    bad = data[:step] + b"\x00\x10\x00\x00" + data[step + 4:]       # length 16
    rows = run(bad, rdw=True, records=3)
    assert [r["kind"] for r in rows] == ["change", "quarantine", "change"]   # resynchronised
    q = quarantines(rows)[0]
    assert q["error_class"] == "corrupt" and q["record_offset"] == step and "RDW" in q["message"]
    assert q["n_bytes"] == step and rows[2]["record_offset"] == 2 * step
    flags = data[:step + 2] + b"\x80\x00" + data[step + 4:]        # spanned-record flags set
    assert quarantines(run(flags, rdw=True, records=3))[0]["record_offset"] == step
    # an RDW that disagrees with LENGTH + SEGLEN, but frames soundly: only that record
    longer = data[:step] + L.RDW.pack(len(GOOD) + 4 + 3, 0) + GOOD + b"xyz" + data[2 * step:]
    rows = run(longer, rdw=True, records=3)
    assert [r["kind"] for r in rows] == ["change", "quarantine", "change"]
    assert rows[1]["record_offset"] == step and "RDW length disagrees" in rows[1]["message"]
    # a file without RDWs read as if it had them
    assert quarantines(run(E.write_file([GOOD]), rdw=True, records=1))[0]["record_offset"] == 0


def test_unknown_table_and_change_type_and_null_indicator():
    unknown = rec(hdr(T2, dbid=7, tbobid=7), E.row_area(T2, None, ROW2))
    odd_ct = _with(104, "ZZ".encode("cp037"))
    area = E.row_area(T2, None, ROW2)
    bad_null = _with(288 + 2 + 2 + 4 + 2 + len("a|b^c¬d"), b"\x07")   # CITY's null byte
    rows = run(unknown + odd_ct + bad_null + GOOD, records=4)
    assert [(r["kind"], r["error_class"]) for r in rows] == [
        ("quarantine", "unknown_table"), ("quarantine", "unknown_record_type"),
        ("quarantine", "bad_value"), ("change", None)]
    assert [r["record_offset"] for r in rows] == [0, len(unknown), len(unknown) + len(GOOD),
                                                  len(unknown) + 2 * len(GOOD)]
    assert "null indicator" in rows[2]["message"] and len(area) > 0


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=2000), st.booleans(), st.integers(0, 3))
def test_garbage_never_raises(blob, rdw, where):
    base = E.write_file([GOOD, GOOD], rdw=rdw)
    cut = len(base) * where // 3
    data = base[:cut] + blob + base[cut:]
    sink = EventSink("core_zos", "lldf", "g.dat")
    decode(data, ctx(rdw=rdw), sink)
    assert all(r["n_records"] == 1 for r in sink.rows())


# ---------------------------------------------------------------- golden files

def _golden_archive() -> bytes:
    return b"".join(_golden_records())


def _golden_records() -> list[bytes]:
    recs = [
        rec(hdr(ct="UB", ov=2), E.row_area(T1, ROW1, ROW1B)),
        rec(hdr(T2, ct="IL", ov=1, lrsn=0x0F00, rba=0x1F00), E.row_area(T2, None, ROW2)),
        rec(hdr(ct="DR", ov=3, lrsn=0x1100, rba=0x2100), b""),
        rec(hdr(ct="CO", ov=4, lrsn=0x1200, rba=0x2200, uor=0x600, disp=" "),
            E.ddl_area("ALTER TABLE CORE.ACCOUNTS ADD Y INT")),
        rec(hdr(ct="D ", uor=0x700, disp="A", lrd="A"), E.row_area(T1, ROW1, None)),
        rec(hdr(ct="I ", ov=5, lrd="S"), E.row_area(T1, None, ROW1B)),
        rec(hdr(ct="SC", disp=" "), b""),
        rec(hdr(T2, dbid=1, tbobid=1), E.row_area(T2, None, ROW2)),
    ]
    area = E.row_area(T2, ROW2, ROW2)
    recs += E.encode_records(hdr(T2, ct="UB", ov=6, lrsn=0x1300, rba=0x2300), area,
                             pieces=E.split_area(area, [1, 20]))[::-1]
    return recs


@pytest.mark.parametrize("rdw", [False, True])
def test_golden(rdw):
    recs = _golden_records()
    data = E.write_file(recs, rdw=rdw)         # the same records, with RDWs or without
    rows = run(data, rdw=rdw, archive="golden.dat", records=len(recs))
    check_golden(rows, GOLDEN / "lldf" / ("golden_rdw.jsonl" if rdw else "golden.jsonl"))


# ---------------------------------------------------------------- whole nights

def resolve(nights_rows: list[list[dict]], context: DecodeContext):
    """The ordering job's rules of ARCHITECTURE.md in plain Python: per night, the night's
    rows plus the rows held from earlier nights -> published changes in commit order and
    the audit buckets per archive."""
    held: list[dict] = []
    out = []
    for rows in nights_rows:
        rows = held + rows
        status, commit = {}, {}
        for r in rows:
            if r["trx_end"] == "commit":
                status[r["trx_id"]] = "commit"
                commit[r["trx_id"]] = (r["commit_position"], r["commit_ts"])
            elif r["trx_end"] == "abort":
                status[r["trx_id"]] = "abort"
        buckets: dict[str, Counter] = defaultdict(Counter)
        changes, held = [], []
        groups = defaultdict(list)
        for r in rows:
            if r["kind"] == "segment":
                groups[r["seg_key"]].append(r)
        done_groups = {}
        for key, pieces in groups.items():
            try:
                data = assemble_segments(pieces)
            except IncompleteSegments:
                continue
            first = min(pieces, key=lambda p: p["seg_num"])
            done_groups[key] = dict(first, **decode_reassembled(data, first, context))
        for r in rows:
            k, st_ = r["kind"], status.get(r["trx_id"])
            b = buckets[r["archive_file"]]
            if k in ("change", "segment"):
                if st_ is None:
                    held.append(r)
                    b["held_open"] += 1
                elif st_ == "abort":
                    b["skipped:rolled_back"] += 1
                elif k == "segment" and r["seg_key"] not in done_groups:
                    b["quarantined"] += 1
                else:
                    b["published"] += 1
                    if k == "change":
                        changes.append(r)
                    elif r["seg_num"] == 1:
                        changes.append(done_groups[r["seg_key"]])
            elif k == "skip":
                b[f"skipped:{r['rule']}"] += 1
            elif k == "control":
                b["control"] += 1
            else:
                b["quarantined"] += 1
        changes = [c for c in changes if status.get(c["trx_id"]) == "commit"]
        changes.sort(key=lambda c: (commit[c["trx_id"]][0], c["trx_id"], c["trx_order"],
                                    c["position"], c["archive_file"], c["record_index"]))
        out.append(([{"trx_id": c["trx_id"], "commit_position": commit[c["trx_id"]][0],
                      "commit_ts": commit[c["trx_id"]][1], "op": c["op"],
                      "table_id": c["table_id"], "schema_name": c["schema_name"],
                      "table_name": c["table_name"], "before": c["before"], "after": c["after"],
                      "ddl": c["ddl"], "row_id": c["row_id"]} for c in changes], buckets))
    return out


@pytest.mark.parametrize("rdw", [True, False])
def test_generated_nights_publish_exactly(rdw):
    synth = Synth("core_zos", options={"rdw": rdw, "codepage": "cp037"}, seed=3)
    context = ctx(synth.catalog, rdw)
    nights_rows, written, outs = [], [], []
    for i in range(3):
        night = synth.night(_dt.date(2024, 3, 1) + _dt.timedelta(days=i), 120)
        outs.append(night)
        written.append(dict(synth.records_written))
        assert len(night.archives) == 2
        rows = []
        for name, data in sorted(night.archives.items()):
            if rdw:
                assert data[2:4] == b"\x00\x00"
            rows += run(data, rdw=rdw, catalog=synth.catalog, archive=name,
                        records=synth.records_written[name])
        nights_rows.append(rows)
    results = resolve(nights_rows, context)
    for night, (published, buckets), counts, rows in zip(outs, results, written, nights_rows):
        assert not quarantines(rows)
        assert published == [e.as_dict() for e in night.expected]
        for name, n in counts.items():          # accounting per archive adds up
            assert sum(buckets[name].values()) == n
            assert sum(r["n_records"] for r in rows if r["archive_file"] == name) == n
    every = [r for rows in nights_rows for r in rows]
    rules = Counter(r["rule"] for r in every if r["kind"] == "skip")
    assert rules["lldf_uor_aborted"] and rules["lldf_logrecdisp_S"] and rules["lldf_logrecdisp_O"]
    ops = Counter(e.op for n in outs for e in n.expected)
    assert ops["t"] and ops["ddl"] and ops["u"] and ops["c"] and ops["d"]
    assert any(e.ddl and e.ddl.startswith("EXCHANGE") for n in outs for e in n.expected)
    # segments: some groups spread over both archives of a night
    by_key = defaultdict(set)
    for r in every:
        if r["kind"] == "segment":
            by_key[r["seg_key"]].add(r["archive_file"])
    assert any(len(v) == 2 for v in by_key.values())
    # open UORs: held on their first night, published on the next
    carried = {t.trx_id for n in outs[1:] for t in n.trxs if t.trx_id and t.outcome == "commit"
               and "written" in t.extra}
    assert carried
    first_night_ids = {r["trx_id"] for r in nights_rows[0]}
    assert carried & first_night_ids
    assert any(e.trx_id in carried for n in outs[1:] for e in n.expected)
    late = {t.trx_id for n in outs[1:] for t in n.trxs if t.extra.get("late_abort")}
    assert not late & {e.trx_id for n in outs for e in n.expected}
    assert all(e.commit_ts.tzinfo is not None for n in outs for e in n.expected)


def test_file_order_is_shuffled_and_headers_vary():
    synth = Synth("core_zos", options={"rdw": False}, seed=5)
    night = synth.night(_dt.date(2024, 3, 1), 80)
    lens = set()
    for name, data in night.archives.items():
        rows = run(data, catalog=synth.catalog, archive=name, records=synth.records_written[name])
        orders = [(r["commit_position"] or "", r["trx_order"] or "") for r in rows if r["kind"] == "change"]
        assert orders != sorted(orders)
        lens.add(int.from_bytes(data[0:2], "big"))
    assert lens == {288, 296}


def test_bad_date_characters_and_varchar_length():
    good = rec(hdr(ct="I "), E.row_area(T1, None, ROW1))
    at = good.index("2024-02-29".encode("cp037"))
    bad_date = _with(at, "2024-02-30".encode("cp037"), good)
    at = good.index("Müller".encode("cp037")) - 2
    bad_len = _with(at, L.LEN2.pack(41), good)
    rows = run(bad_date + bad_len + GOOD, records=3)
    assert [(r["kind"], r["error_class"]) for r in rows] == [
        ("quarantine", "bad_value"), ("quarantine", "bad_value"), ("change", None)]
    assert "OPENED" in rows[0]["message"] and "HOLDER" in rows[1]["message"]
    assert rows[1]["record_offset"] == len(bad_date)


def test_unknown_codepage_option_quarantines_the_file():
    sink = EventSink("core_zos", "lldf", "a.dat")
    decode(GOOD + GOOD, ctx(codepage="no-such-codepage"), sink)
    (row,) = sink.rows()
    assert row["kind"] == "quarantine" and row["record_offset"] == 0 and row["n_records"] == 1


def test_reassembled_without_rule_falls_back_on_op():
    area = E.row_area(T2, None, ROW2)
    row = {"op": "c", "table_id": "261.3", "rule": None, "archive_file": "a", "record_offset": 0}
    assert decode_reassembled(area, row, ctx())["after"] == render(T2, ROW2)
    with pytest.raises(DecodeError) as ei:
        decode_reassembled(area, dict(row, table_id="9.9"), ctx())
    assert ei.value.error_class == "unknown_table"
    with pytest.raises(DecodeError) as ei:
        decode_reassembled(area[:-1], row, ctx())
    assert ei.value.error_class == "corrupt" and "reassembled DATA area" in str(ei.value)


def _group_row(rows: list[dict], complete=True, data=None) -> dict:
    """A row of ``segment_groups`` (what the ordering job's ``mapInArrow`` gets)."""
    from dblog.ordering.segments import HEADER

    first = min(rows, key=lambda r: r["seg_num"])
    row = {c: first.get(c) for c in HEADER}
    row.update(complete=complete, data=(assemble_segments(rows) if data is None else data)
               if complete else None)
    return row


@pytest.mark.parametrize("batch_call", ["works", "raises", "absent"])
def test_ordering_decodes_segment_groups_in_batches_like_one_at_a_time(monkeypatch, batch_call):
    """The ordering job's reassembly (``dblog.ordering.segments``) decodes a batch's groups with
    ``decode_reassembled_many`` (row images per table in batches); the result equals
    ``decode_reassembled`` one group at a time: changes, a damaged group quarantined with its
    error, an incomplete group left for the quarantine of its pieces. When the batch call
    fails unexpectedly (a decoder bug) or the format has none, the groups go one at a time."""
    import pyarrow as pa

    from decoders import lldf
    from dblog.ordering.segments import GROUP_COLUMNS, _decode_groups

    groups = []
    for k in range(30):
        values = list(ROW1)
        values[0] = k
        area = E.row_area(T1, values, ROW1B if k % 3 else None)
        rows = _segmented(area, [1 + k, 60], fields=hdr(ct="UB" if k % 3 else "D ", uor=0x500 + k))
        groups.append(_group_row(rows))
    ddl = _segmented(E.ddl_area("ALTER TABLE CORE.ACCOUNTS ADD Z INT"), [3], fields=hdr(ct="CO", uor=0x901))
    groups.append(_group_row(ddl))
    names = _segmented(E.row_area(T2, None, ROW2), [4], fields=hdr(T2, ct="I ", uor=0x902))
    groups.append(_group_row(names))
    bad = _segmented(E.row_area(T1, ROW1, ROW1B), [10], fields=hdr(ct="UB", uor=0x903))
    groups.append(_group_row(bad, data=assemble_segments(bad)[:-7]))     # cut short
    groups.append(_group_row(_segmented(E.row_area(T1, ROW1, None), [5], fields=hdr(ct="D ", uor=0x904))[:1],
                             complete=False))
    want = []
    for g in groups:
        r = dict(g)
        data = r.pop("data")
        if not r["complete"]:
            r["kind"] = None
        else:
            try:
                r.update(kind="change", **decode_reassembled(data, g, ctx()))
            except DecodeError as exc:
                r.update(kind="quarantine", error_class=exc.error_class,
                         message=f"reassembled segments of {g['seg_key']}: {exc}", raw_hex=data[:256].hex())
        r["n_records"], r["n_bytes"] = 0, 0
        want.append({c: r.get(c) for c in GROUP_COLUMNS})

    if batch_call == "raises":
        def broken(*a, **k):
            raise RuntimeError("a decoder bug")
        # the format's batch entry point only (decode_reassembled still works)
        monkeypatch.setattr(lldf, "decode_reassembled_many", broken, raising=False)
    elif batch_call == "absent":
        monkeypatch.delattr(lldf, "decode_reassembled_many", raising=False)
        monkeypatch.setattr(lldf, "_LAZY", {k: v for k, v in lldf._LAZY.items()
                                            if k != "decode_reassembled_many"}, raising=False)
    many = getattr(get("lldf"), "decode_reassembled_many", None)
    assert (many is None) == (batch_call == "absent")
    assert (many is not None and many.__name__ == "broken") == (batch_call == "raises")
    run = _decode_groups({"core_zos": CATALOG.to_json()}, {"core_zos": ({"rdw": False}, "UTC")})
    batches = [pa.RecordBatch.from_pylist(groups[i:i + 13]) for i in range(0, len(groups), 13)]
    got = [r for b in run(iter(batches)) for r in b.to_pylist()]
    assert got == want
    kinds = Counter(r["kind"] for r in got)
    assert kinds == {"change": 32, "quarantine": 1, None: 1}
    assert next(r for r in got if r["kind"] == "quarantine")["error_class"] == \
        next(w for w in want if w["kind"] == "quarantine")["error_class"]
