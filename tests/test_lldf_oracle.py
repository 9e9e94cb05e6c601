"""The lldf decoder against its oracle (tests/oracle/lldf.py, the per-record decoder it
replaced): the same rows, every column, on sample nights of every seed and framing, on the
golden archives and on archives that hold every change type, disposition, held unit of
recovery, segmented record and value that quarantines only its own record.

On damaged framing the decoder resynchronises where the oracle gave up: there the rows
before the damaged record are equal and the first quarantine row names the same record
(offset) with the same error class."""

from __future__ import annotations

import datetime as _dt
import random
from decimal import Decimal

import pytest

from decoders import codecs as C
from decoders.base import DecodeContext
from decoders.catalog import Catalog, Table
from decoders.events import EventSink
from decoders.lldf import decode
from decoders.lldf import encoder as E
from decoders.lldf.synth import Synth
from decoders.synth import col
from tests.oracle import lldf as O
from tests.test_lldf import CATALOG, GOOD, ROW1, ROW1B, ROW2, T1, T2, _golden_archive, hdr, rec

DAY = _dt.date(2024, 3, 1)


def _ctx(catalog, rdw, archive, codepage="cp037") -> DecodeContext:
    return DecodeContext("core_zos", "lldf", catalog, archive,
                         options={"rdw": rdw, "codepage": codepage})


def _rows(fn, data: bytes, catalog, rdw: bool, archive: str, codepage: str) -> list[dict]:
    sink = EventSink("core_zos", "lldf", archive)
    fn(data, _ctx(catalog, rdw, archive, codepage), sink)
    return sink.rows()


def both(data: bytes, catalog=CATALOG, rdw=False, archive="a.dat", codepage="cp037"):
    return (_rows(decode, data, catalog, rdw, archive, codepage),
            _rows(O.decode, data, catalog, rdw, archive, codepage))


def assert_same(data: bytes, **kw) -> list[dict]:
    new, old = both(data, **kw)
    assert len(new) == len(old)
    for a, b in zip(new, old):
        assert a == b, _diff(a, b)
    return new


def _diff(a: dict, b: dict) -> str:
    return "; ".join(f"{k}: new {a.get(k)!r} != oracle {b.get(k)!r}"
                     for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))


def frame(data: bytes) -> list[bytes]:
    return [data[a:b] for a, b in zip(_offsets(data), _offsets(data)[1:] + [len(data)])]


def _offsets(data: bytes) -> list[int]:
    """Record starts of an archive without RDWs, walked with the encoder's own lengths."""
    out, pos = [], 0
    while pos < len(data):
        out.append(pos)
        pos += int.from_bytes(data[pos:pos + 2], "big") + int.from_bytes(data[pos + 182:pos + 184], "big")
    return out


# ---------------------------------------------------------------- sample nights

@pytest.mark.parametrize("seed", [1, 2, 7])
@pytest.mark.parametrize("rdw", [False, True])
def test_sample_nights_equal_oracle(seed, rdw):
    synth = Synth("core_zos", options={"rdw": rdw, "codepage": "cp037"}, seed=seed)
    kinds = set()
    for night in synth.nights(DAY, 3, 70):
        for name, data in sorted(night.archives.items()):
            rows = assert_same(data, catalog=synth.catalog, rdw=rdw, archive=name)
            kinds |= {(r["kind"], r["op"], r["rule"]) for r in rows}
    assert {k for k, _, _ in kinds} >= {"change", "skip", "control", "segment"}
    assert {o for _, o, _ in kinds} >= {"c", "u", "d", "t", "ddl"}


def test_sample_night_other_header_codepage_equal_oracle():
    synth = Synth("core_zos", options={"rdw": True, "codepage": "cp1140"}, seed=11)
    for night in synth.nights(DAY, 2, 60):
        for name, data in sorted(night.archives.items()):
            assert_same(data, catalog=synth.catalog, rdw=True, archive=name, codepage="cp1140")


@pytest.mark.parametrize("rdw", [False, True])
def test_golden_archive_equal_oracle(rdw):
    data = _golden_archive()
    if rdw:
        data = E.write_file(frame(data), rdw=True)
    assert_same(data, rdw=rdw, archive="golden.dat")


# ---------------------------------------------------------------- every kind of record

ODD = Table("262.1", "ODD", "VALUES", (
    col("ID", "SMALLINT", False), col("BIGDEC", "DECIMAL", precision=31, scale=5),
    col("EVEN", "DECIMAL", precision=4, scale=4), col("F4", "FLOAT", length=4),
    col("F8", "FLOAT", False, length=8), col("R", "REAL"), col("D", "DOUBLE"),
    col("BIN", "BINARY", length=3), col("VB", "VARBINARY", length=5),
    col("VC", "VARCHAR", length=8), col("CH", "CHAR", False, length=2)), encoding="cp273")
NOLAYOUT = Table("262.2", "ODD", "TINY", (col("T", "TINYINT", False),))
UTF = Table("262.3", "ODD", "UTF", (col("U", "VARCHAR", length=20), col("DT", "DATE"),
                                    col("TM", "TIME"), col("TS", "TIMESTAMP")), encoding="utf-8")
CAT2 = Catalog("core_zos", "lldf", (T1, T2, ODD, NOLAYOUT, UTF))
ODD_ROWS = [
    [1, Decimal("-1234567890123456789012345.67890"), Decimal("0.1234"), C.Float4(1.5), -0.0,
     C.Float4(-2.0), 1e70, b"\x00\xff\x10", b"\x01\x02", "a\tb\"c\\", "ÄÖ"],
    [2, Decimal("0.00000"), Decimal("-0.0001"), None, 0.0, None, None, None, b"", "", "  "],
    [3, None, None, C.Float4(3.4028234663852886e38), 5e-79, C.Float4(1.1754943508222875e-38),
     -7.2e75, b"abc", None, None, "ab"],
]
UTF_ROWS = [["Grüße 😀", _dt.date(1, 1, 1), _dt.time(0, 0, 0), _dt.datetime(9999, 12, 31, 23, 59, 59, 999999)],
            [None, None, None, None]]


def _odd_area(values_before, values_after, table=ODD) -> bytes:
    return E.row_area(table, values_before, values_after)


def _every_kind_records() -> list[bytes]:
    h = lambda **kw: hdr(**kw)  # noqa: E731
    recs = [
        rec(h(ct="UB", ov=1), E.row_area(T1, ROW1, ROW1B)),
        rec(h(ct="I ", ov=2, lrsn=0x1001), E.row_area(T1, None, ROW1)),
        rec(h(ct="IL", ov=3, lrsn=0x1002), E.row_area(T1, None, ROW1B)),
        rec(h(ct="D ", ov=4, lrsn=0x1003), E.row_area(T1, ROW1, None)),
        rec(h(table=T2, ct="I ", ov=5), E.row_area(T2, None, ROW2)),
        rec(h(ct="DM", ov=6), b""),
        rec(h(ct="DM", ov=7), E.encode_area(b"\x01\x02\x03")),
        rec(h(ct="DT", ov=8), b""),
        rec(h(ct="DR", ov=9, disp=" "), b""),
        rec(h(ct="CO", ov=10), E.ddl_area("ALTER TABLE CORE.ACCOUNTS ADD X INT  \x00")),
        rec(h(ct="CO", ov=11), E.encode_area(b"")),
        rec(h(ct="CO", ov=12), b""),
        rec(h(ct="CO", dbid=999, tbobid=1, owner="NEWOWNER", name="A_VERY_LONG_TABLE_",
              len_owner=12, len_name=25), E.ddl_area("CREATE TABLE X (A INT)")),
        rec(h(ct="E ", ov=13), E.exchange_area("CORE", "ACCOUNTS_CLONE")),
        rec(h(ct="E ", dbid=999, tbobid=2, owner="OWN", name="T", len_owner=3, len_name=1),
            E.exchange_area("OWN", "T_CLONE")),
        rec(dict(h(ct="E "), change_type=b"\xc5\x00"), E.exchange_area("CORE", "C2")),
        rec(h(ct="CM", disp=" "), E.encode_area("-STOP DB".encode("cp037"))),
        rec(h(ct="SC", disp=" "), b""),
        rec(h(ct="SC", disp="C"), b""),
        # dispositions
        rec(h(disp="A", lrd="A"), E.row_area(T1, None, ROW1)),
        rec(h(disp="A", lrd="C", ct="ZZ"), b""),
        rec(h(lrd="S"), E.row_area(T1, None, ROW1)),
        rec(h(lrd="O", disp=" "), E.row_area(T1, None, ROW1)),
        rec(h(lrd=" "), E.row_area(T1, None, ROW1)),
        rec(dict(h(), log_rec_disp=b"\x00"), E.row_area(T1, None, ROW1)),
        rec(dict(h(), log_rec_disp=b"\x4b"), E.row_area(T1, None, ROW1)),
        rec(h(disp=" ", uor=0x777), E.row_area(T1, None, ROW1)),
        rec(dict(h(disp=" ", uor=0x778), uor_disp=b"\x00"), E.row_area(T1, None, ROW1B)),
        rec(h(disp="C", uor_commit_timestamp=bytes(17)), E.row_area(T2, None, ROW2)),
        rec(h(disp="C", auth_id=""), E.row_area(T2, None, ROW2)),
        # odd values, other encodings, longer headers
        rec(h(table=ODD, ct="UB"), _odd_area(ODD_ROWS[0], ODD_ROWS[1])),
        rec(h(table=ODD, ct="I "), _odd_area(None, ODD_ROWS[2])),
        rec(h(table=ODD, ct="D "), _odd_area(ODD_ROWS[1], None), header_len=300),
        rec(h(table=UTF, ct="UB"), E.row_area(UTF, UTF_ROWS[0], UTF_ROWS[1]), header_len=4096),
        # quarantined, each costing only its record
        rec(h(table=NOLAYOUT), E.encode_area(b"\x00\x01\x07")),
        rec(h(table=T2, dbid=7, tbobid=7), E.row_area(T2, None, ROW2)),
        rec(h(ct="DT", dbid=7, tbobid=8), b""),
        rec(h(ct="UB"), b""),
        rec(h(ct="UB"), E.encode_area(b"")),
        rec(h(ct="UB"), E.encode_area(b"\x00")),
        rec(h(ct="E "), E.encode_area(b"\x00\x09AB")),
        rec(dict(h(), uor_disp=b"\x5c"), E.row_area(T1, None, ROW1)),
        rec(dict(h(), uor_commit_timestamp=b"\x20\x24\x0a" + bytes(14)), E.row_area(T1, None, ROW1)),
        rec(dict(h(), uor_commit_timestamp=bytes.fromhex("20240230") + bytes(13)), E.row_area(T1, None, ROW1)),
    ]
    # segmented records of every kind, in reverse order
    for ct, area in (("UB", E.row_area(T1, ROW1, ROW1B)), ("I ", E.row_area(T2, None, ROW2)),
                     ("D ", E.row_area(T1, ROW1B, None)), ("CO", E.ddl_area("DROP TABLE Q")),
                     ("E ", E.exchange_area("CORE", "X")), ("DM", E.encode_area(b"\x01\x02\x03\x04"))):
        table = T2 if ct == "I " else T1
        recs += E.encode_records(hdr(table=table, ct=ct, lrsn=0x5000), area,
                                 pieces=E.split_area(area, [1, len(area) // 2]))[::-1]
    recs += E.encode_records(hdr(table=T2, ct="I ", dbid=5, tbobid=5), E.row_area(T2, None, ROW2),
                             pieces=E.split_area(E.row_area(T2, None, ROW2), [3]))
    recs += E.encode_records(hdr(disp=" ", ct="UB"), E.row_area(T1, ROW1, ROW1),
                             pieces=E.split_area(E.row_area(T1, ROW1, ROW1), [7]))
    return recs


@pytest.mark.parametrize("rdw", [False, True])
def test_every_kind_equal_oracle(rdw):
    recs = _every_kind_records()
    rows = assert_same(E.write_file(recs, rdw=rdw), catalog=CAT2, rdw=rdw)
    assert len(rows) == len(recs)
    kinds = {(r["kind"], r["op"], r["rule"], r["error_class"]) for r in rows}
    for want in (("change", "u", None, None), ("change", "c", None, None),
                 ("change", "d", None, None), ("change", "t", None, None),
                 ("change", "ddl", None, None), ("skip", None, "lldf_uor_aborted", None),
                 ("skip", None, "lldf_logrecdisp_S", None), ("skip", None, "lldf_logrecdisp_blank", None),
                 ("control", None, "lldf_command", None), ("quarantine", None, None, "unknown_table"),
                 ("quarantine", None, None, "bad_value"), ("quarantine", None, None, "corrupt"),
                 ("segment", "u", "lldf_change_UB", None), ("segment", "t", "lldf_change_DM", None)):
        assert want in kinds, want
    held = [r for r in rows if r["trx_id"] in ("00000000000000000777", "00000000000000000778")]
    assert [r["trx_end"] for r in held] == [None, None]


def test_every_kind_shuffled_equal_oracle():
    recs = _every_kind_records()
    for seed in range(4):
        random.Random(seed).shuffle(recs)
        assert_same(E.write_file(recs, rdw=seed % 2 == 1), catalog=CAT2, rdw=seed % 2 == 1)


def test_value_damage_costs_one_record_like_oracle():
    """Damage inside row images (not framing): every single-byte change of a record's DATA
    area gives the oracle's rows exactly (the same values, or the same quarantine)."""
    good = rec(hdr(ct="UB"), E.row_area(T1, ROW1, ROW1B))
    odd = rec(hdr(table=ODD, ct="UB"), _odd_area(ODD_ROWS[0], ODD_ROWS[2]))
    rng = random.Random(5)
    for base in (good, odd):
        for at in range(288 + 2, len(base)):
            for value in (0x00, 0xFF, rng.randrange(256), base[at] ^ 0x40):
                bad = base[:at] + bytes([value]) + base[at + 1:]
                assert_same(GOOD + bad + GOOD, catalog=CAT2)


def test_empty_and_tiny_archives_equal_oracle():
    for data in (b"", b"\x00", GOOD[:3], GOOD[:287], GOOD[:-1]):
        for rdw in (False, True):
            assert_same(data, rdw=rdw)


# ---------------------------------------------------------------- damaged framing

def _first_quarantine(rows):
    return next((i for i, r in enumerate(rows) if r["kind"] == "quarantine"), None)


@pytest.mark.parametrize("rdw", [False, True])
def test_framing_damage_prefix_and_first_quarantine_equal_oracle(rdw):
    """Single-field damages of the framing fields (LENGTH, SEGLEN, TOTALSEGS, SEGNUM, the
    RDW): rows before the damaged record equal the oracle's; where the oracle quarantines
    the damaged record first, the decoder does too, with the same error class."""
    synth = Synth("core_zos", options={"rdw": False}, seed=4)
    night = synth.night(DAY, 40)
    recs = frame(next(iter(night.archives.values())))
    rng = random.Random(9)
    step = 4 if rdw else 0
    fields = [(0, 2), (182, 2), (184, 2), (186, 2)] + ([(-4, 2), (-2, 2)] if rdw else [])
    checked = 0
    for trial in range(120):
        k = rng.randrange(len(recs))
        off, width = rng.choice(fields)
        data = E.write_file(recs, rdw=rdw)
        start = sum(len(r) + step for r in recs[:k])
        at = start + step + off
        value = rng.choice([0, 0xFFFF, rng.randrange(1 << 16), int.from_bytes(data[at:at + 2], "big") ^ (1 << rng.randrange(16))])
        data = data[:at] + value.to_bytes(width, "big") + data[at + width:]
        new, old = both(data, catalog=synth.catalog, rdw=rdw)
        before = [r for r in old if r["record_offset"] < start]
        assert [r for r in new if r["record_offset"] < start] == before
        qo = _first_quarantine(old)
        if qo is not None and old[qo]["record_offset"] == start:
            qn = _first_quarantine(new)
            assert qn is not None
            assert (new[qn]["record_offset"], new[qn]["error_class"]) == (start, old[qo]["error_class"])
            checked += 1
        # whatever happened, the decoder accounts for every byte once
        assert sum(r["n_bytes"] for r in new) == len(data)
    assert checked > 30
