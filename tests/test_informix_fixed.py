"""The fixed-column reader of Informix record lines (``decoders/informix/fixed.py``,
``columns.Records``) against the token reader (``columns.TokenRecords``): lines laid out the
way ``onlog`` prints them are read by fixed columns (``fit``), every other line falls back to
the token reader, and either way the header fields, record types, the fast mask and the
column values the decoder reads are the token reader's. Damaged lines keep their error class
and offset (the careful path names them)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from decoders.base import DecodeContext
from decoders.events import EventSink, accounts_bytes
from decoders.informix import columns as COL
from decoders.informix import decoder as D
from decoders.informix import fixed as F
from decoders.informix import layout as L
from decoders.informix.synth import Synth
from tests.test_informix_oracle import every_type_log

SOURCE = "wms_informix"
CATALOG = Synth(SOURCE).catalog
FAST = accounts_bytes(D.decode_records, lines=True)
HEAD = "addr     len  type     xid      id link"


def text_of(lines: list[str], tail: int = 3) -> bytes:
    """The lines, then ``tail`` dump-free filler lines so none is near the buffer end."""
    filler = [HEAD] * tail
    return ("\n".join([HEAD, *lines, *filler]) + "\n").encode("utf-8")


def both(data: bytes) -> tuple[COL.Records, COL.TokenRecords]:
    text = COL.Text(data)
    return text.records(), text.token_records()


def assert_same(data: bytes) -> COL.Records:
    """Fixed + token reader == token reader, for every record and every value read."""
    rec, tok = both(data)
    assert rec.n == tok.n
    assert (rec.fast == tok.fast).all()
    f = np.flatnonzero(rec.fast)
    for name in ("addr", "xid", "link", "tcode"):
        assert (getattr(rec, name)[f] == getattr(tok, name)[f]).all(), name
    for code in np.unique(rec.tcode[f]).tolist():
        rows = f[rec.tcode[f] == code]
        rtype = COL.TYPE_NAMES[code]
        cols = L.RECORD_TYPES[rtype]
        for k, (_n, kind, _l) in enumerate(cols):
            j = L.N_HEADER + k
            if kind == L.HEX:
                got, ok = rec.hex_column(j, rows)
                want, wok = tok.hex_column(j, rows)
                assert (ok == wok).all() and (got[ok] == want[ok]).all(), (rtype, j)
                assert rec.hex_text(j, rows[ok]).to_pylist() == \
                    [format(int(v), "x") for v in want[ok]]
            elif kind == L.DATE:
                assert (rec.local_seconds(j, rows) == tok.local_seconds(j, rows)).all()
        if rtype in L.REST_OF_LINE:
            j = L.N_HEADER + len(cols) - 1
            assert rec.rest_of_line(j, rows).to_pylist() == \
                tok.rest_of_line(j, rows).cast("string").to_pylist()
    return rec


def fit_of(line: str) -> bool:
    rec = assert_same(text_of([line]))
    return bool(rec.fit[0])


def test_swar_fields_read_every_width_and_digit():
    rng = random.Random(3)
    for hexa in (True, False):
        digits = "0123456789abcdefABCDEF" if hexa else "0123456789"
        for width in (2, 4, 8):
            toks = ["".join(rng.choice(digits) for _ in range(rng.randint(1, width))).ljust(8, "#")
                    for _ in range(500)]
            x = np.frombuffer("".join(toks).encode(), "<u8").copy()
            ok, k, value = F.field(x, width, hexa)
            for t, o, kk, v in zip(toks, ok, k, value):
                tok = t.rstrip("#")
                # '#' inside the width is not a blank; past it, it is not looked at
                assert bool(o) == (len(tok) == width)
                xb = np.frombuffer((tok.ljust(width) + "#" * 8)[:8].encode(), "<u8")
                o2, k2, v2 = F.field(xb, width, hexa)
                assert o2[0] and int(k2[0]) == len(tok)
                assert int(v2[0]) == int(tok, 16 if hexa else 10)


def test_byte_classes_are_exact_for_every_byte():
    b = np.arange(256, dtype=np.uint8)
    w = np.repeat(b, 8).view("<u8")
    assert ((F.blank_flags(w) != 0) == (b == 0x20)).all()
    assert ((F.dec_flags(w) == F.HIGH) == ((b >= 0x30) & (b <= 0x39))).all()
    hexd = np.isin(b, list(b"0123456789abcdefABCDEF"))
    assert ((F.hex_flags(w) == F.HIGH) == hexd).all()
    assert ((F.printable_flags(w) == F.HIGH) == ((b >= 0x21) & (b <= 0x7E))).all()


@pytest.mark.parametrize("line", [
    "18       40   BEGIN    5        3  0        07/13/98 10:23:04 34 informix",
    "40       76   HINSERT  5        0  18       100123 101 40",
    "1c4      24   CLR      1319     0  11b626c",
    "1dc      36   ROLLBACK 1319     0  1c4      11/01/26 09:39:39",
    "ffffffff 9999 HUPDATE  99999999 99 ffffffff 100123 2e12 0 -17 30 1",
    "2c2c0    76   PTRENAME 1        0  2c2a8    300003 wms.tmp_load_2 wms.tmp_load_2_r7",
    "3a0      40   LG_PTRUNCATE 12       0  388      100123",          # a long type name
    "3a0      40   LG_ENDTRUNCATE 12       0  388      100123",
    "44       48   BFRMAP   7        0  18       100123 2f USED 3 1a",
    "60       40   BLDCL    7        0  44       100123 16 16 120 4 wms.orders",
    "60       40   BEGIN    7        0  0        02/29/24 23:59:59 1 user name with blanks",
    # ids not printed as format(v, "x"): read, rendered from the value (assert_same)
    "40       76   HINSERT  5        0  18       0100123 101 40",
    "40       76   HINSERT  5        0  18       100123A 1F0 40",
])
def test_lines_laid_out_by_onlog_fit(line):
    assert fit_of(line)


@pytest.mark.parametrize("line", [
    "40  76 HINSERT 5 0 18 100123 101 40",                    # not at the fixed columns
    "40\t76\tHINSERT\t5\t0\t18\t100123 101 40",                # tabs
    "40       76   HINSERT  5        0  18       100123  101 40",   # two blanks between columns
    "40       76   HINSERT  5        0  18       100123 101 40 ",   # trailing blank
    "40       76   HINSERT  5        0  18       100123 101 40 7",  # a column beyond the table
    "40       76   HINSERT  5        0  18       123456789abc 101 40",   # 12 hex digits
    "40       76   HINSERT  123456789 0  18      100123 101 40",    # xid wider than its column
    "40       76   HINSERT  5        0  18       100123 101 123456789",  # long decimal
    "18       40   BEGIN    5        3  0        07/13/98 10:23:04 34 " + "x" * 70,
    "18       40   BEGIN    5        3  0        07/13/98 10:23:04 34 jos\u00e9",
    "40       76   SOMETYPE 5        0  18       100123 101 40",
    "60       40   PTRENAME 7        0  44       100123 wms.a_name_longer_than_16 wms.b",
])
def test_other_lines_fall_back_to_the_token_reader(line):
    assert not fit_of(line)


def test_lines_at_the_window_bound():
    """Lines up to ``WIN - SLACK`` bytes are read by fixed columns, longer ones by tokens."""
    head = "18       40   BEGIN    5        3  0        07/13/98 10:23:04 34 "
    limit = F.WIN - F.SLACK
    for n, fits in ((limit - 1, True), (limit, True), (limit + 1, False)):
        line = head + "u" * (n - len(head))
        assert len(line) == n and fit_of(line) == fits, n


def test_a_line_at_the_end_of_the_buffer_is_read_by_tokens():
    data = (HEAD + "\n40       76   HINSERT  5        0  18       100123 101 40\n").encode()
    rec, tok = both(data)
    assert not rec.fit.any() and rec.fast.all() and (rec.addr == tok.addr).all()


def test_generated_nights_fit_and_read_as_the_token_reader_does():
    synth = Synth(SOURCE, seed=5)
    import datetime as _dt
    fit = total = 0
    for night in synth.nights(_dt.date(2024, 3, 9), 2, 80):
        for name, data in night.archives.items():
            rec = assert_same(data)
            fit += int(rec.fit.sum())
            total += rec.n
    assert total and fit >= 0.98 * total


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_record_type(seed):
    rec = assert_same(every_type_log(seed))
    assert rec.fit.sum() > 0.5 * rec.n


def test_damaged_lines_read_as_the_token_reader_does():
    """One byte of a fitting line changed (every column, many bytes): the fixed reader
    never takes a line the token reader rejects and reads the same values otherwise."""
    rng = random.Random(11)
    base = [
        "18       40   BEGIN    5        3  0        07/13/98 10:23:04 34 informix",
        "40       76   HINSERT  5        0  18       100123 101 40",
        "8c       36   COMMIT   5        0  40       07/13/98 10:23:05",
        "b0       48   BFRMAP   7        0  0        100123 2f FREE 3 1a",
        "e0       24   CLR      1319     0  11b626c",
    ]
    for _ in range(300):
        lines = list(base)
        i = rng.randrange(len(lines))
        ln = bytearray(lines[i].encode())
        ln[rng.randrange(len(ln))] = rng.choice(b" \t0aZg:/-\x0b\x7f.9fF")
        lines[i] = ln.decode("latin-1")
        assert_same(text_of(lines))


def decode_rows(data: bytes, name: str = "onlog_7.txt") -> list[dict]:
    sink = EventSink(SOURCE, "informix", name)
    FAST(data, DecodeContext(SOURCE, "informix", CATALOG, name, {}, "UTC", None), sink)
    return sink.rows()


@pytest.mark.parametrize("line, error_class, message", [
    ("40       76   HINSERT  5        0  18       10g123 101 40", "corrupt",
     "tblspace_id is not hex"),
    ("4g       76   HINSERT  5        0  18       100123 101 40", "corrupt", "addr is not hex"),
    ("40       76   HINSERT  5x       0  18       100123 101 40", "corrupt", "xid is not decimal"),
    ("8c       36   COMMIT   5        0  40       13/13/98 10:23:05", "bad_value", "date"),
    ("8c       36   COMMIT   5        0  40       07/13/98 24:23:05", "bad_value", "time"),
    ("b0       48   BFRMAP   5        0  40       100123 2f FRE 3 1a", "bad_value", "USED/FREE"),
    ("40       76   HINSERT  5        0  18       100123", "corrupt", "too few columns"),
])
def test_damaged_fixed_lines_keep_error_class_and_offset(line, error_class, message):
    lines = ["18       40   BEGIN    5        3  0        07/13/98 10:23:04 34 informix", line,
             "e0       24   CLR      5        0  40"]
    data = text_of(lines)
    rec, _ = both(data)
    assert rec.fit[0] and not rec.fit[1] and rec.fit[2]
    rows = decode_rows(data)
    bad = [r for r in rows if r["kind"] == "quarantine"]
    assert len(bad) == 1
    assert bad[0]["error_class"] == error_class
    assert bad[0]["record_offset"] == 3 and bad[0]["record_index"] == 1
    assert message in bad[0]["message"] and "line 3" in bad[0]["message"]
