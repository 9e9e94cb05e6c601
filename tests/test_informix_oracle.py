"""The Informix decoder against the oracle (tests/oracle/informix.py, the per-record decoder as it
was before the columnar rewrite): same rows, every column, and the same carry-out, on generated
nights (several seeds, carry across files and nights), the golden archives, every documented
record type, and damaged input (onlog text resynchronises at every line, so damaged input is
compared whole)."""

from __future__ import annotations

import datetime as _dt
import json
import random
import re

import pytest

from decoders.base import DecodeContext
from decoders.events import EventSink, line_starts
from decoders.informix import archive_sort_key
from decoders.informix.synth import Synth
from tests.golden import GOLDEN
from tests.test_informix import run as run_file
from tests.oracle import informix as oracle
from tests.oracle import informix_layout as OL

SOURCE = "wms_informix"
CATALOG = Synth(SOURCE).catalog


def _run(fn, data: bytes, name: str, carry, tz: str):
    sink = EventSink(SOURCE, "informix", name)
    ctx = DecodeContext(SOURCE, "informix", CATALOG, name, {}, tz, carry)
    out = fn(data, ctx, sink)
    return sink.rows(), out


def _run_oracle(data: bytes, name: str, carry, tz: str):
    """The oracle's rows, with ``n_bytes`` as the package counts bytes since session 19: a
    record's bytes run from its line to the next record's line (the first record's also
    what comes before it), and a row has the bytes of the records it counts; a record folded
    into a change of its file (HUPAFT, remainder) counts in that change's row. The oracle
    gave a folded record's bytes to the row before it in the file (its rows tiled the file);
    which record folds into which row is the oracle's own decision, recorded as it makes it."""
    folds: list[tuple[int, int]] = []          # (line of the change's row, folded line)
    fold_into = oracle._Decoder.fold_into

    def recording(self, unit, index, pos, trx, fold):
        if fold.row is not None:
            folds.append((fold.row.offset, unit.line_no))
        return fold_into(self, unit, index, pos, trx, fold)

    oracle._Decoder.fold_into = recording
    try:
        rows, out = _run(oracle.decode, data, name, carry, tz)
    finally:
        oracle._Decoder.fold_into = fold_into
    if not folds:
        return rows, out
    starts = line_starts(data)
    lines = sorted({r["record_offset"] for r in rows} | {f for _, f in folds})
    span = {}
    for ln, nxt in zip(lines, lines[1:] + [None]):
        span[ln] = (len(data) if nxt is None else int(starts[nxt - 1])) - int(starts[ln - 1])
    span[lines[0]] += int(starts[lines[0] - 1])
    extra: dict[int, int] = {}
    for owner, f in folds:
        extra[owner] = extra.get(owner, 0) + span[f]
    assert len({r["record_offset"] for r in rows}) == len(rows), "one row per line"
    return [{**r, "n_bytes": span[r["record_offset"]] + extra.get(r["record_offset"], 0)}
            for r in rows], out


# Lines the issue-15/16 rules read differently from the oracle (written here from SPEC
# section 3, not taken from the decoder): an indented line that is neither blank nor a dump
# line nor a header is quarantined (the oracle dropped it); a header may carry more column
# titles (the oracle quarantined it); numbers wider than 16 hex / 19 decimal digits are
# quarantined (the oracle converted them, or crashed).
DUMP = re.compile(rb"[ \t]+(?:[0-9a-fA-F]{2}){1,8}(?:[ \t](?:[0-9a-fA-F]{2}){1,8})*"
                  rb"(?:[ \t]{2,}[ -~]{1,20})?[ \t]*")
NUMBER = re.compile(rb"-?[0-9]+|[0-9a-fA-F]+")
TITLES = [b"addr", b"len", b"type", b"xid", b"id", b"link"]


def first_new_rule_line(data: bytes) -> int | None:
    for no, line in enumerate(data.split(b"\n"), 1):
        line = line[:-1] if line.endswith(b"\r") else line
        tokens = line.split()
        if not tokens:
            continue
        head = [t.lower() for t in tokens[:6]] == TITLES
        if head and len(tokens) > 6:
            return no
        if line[:1].isspace() and not head and not DUMP.fullmatch(line):
            return no
        if not line[:1].isspace() and not head and any(
                NUMBER.fullmatch(t) and len(t.lstrip(b"-").lstrip(b"0")) > 16 for t in tokens):
            return no
    return None


def same(archives: list[tuple[str, bytes]], carry=None, tz: str = "America/Chicago"):
    """Decode the archives in order with both decoders, passing each one's carry along;
    assert equal rows and carries; return the new decoder's carry. From the first line
    a new rule reads differently on, only the new decoder's quarantine row for it is
    checked (and the archives after it are not compared)."""
    mine = theirs = carry
    for name, data in archives:
        got, mine = run_file(data, name, mine, tz, CATALOG)    # either place of the rules
        want, theirs = _run_oracle(data, name, theirs, tz)
        cut = first_new_rule_line(data)
        if cut is not None:
            # (n_bytes and raw_hex of the row before the cut differ: the line at the cut was
            # a dump line of that row to the oracle)
            before = [{**r, "n_bytes": 0, "raw_hex": None} for r in got if r["record_offset"] < cut]
            assert before == [{**r, "n_bytes": 0, "raw_hex": None} for r in want
                              if r["record_offset"] < cut], name
            first = next(r for r in got if r["record_offset"] >= cut)
            assert (first["record_offset"], first["kind"]) == (cut, "quarantine"), (name, first)
            assert first["error_class"] in ("corrupt", "bad_value"), first
            return None
        assert len(got) == len(want), name
        for g, w in zip(got, want):
            assert g == w, (name, g, w)
        assert json.dumps(mine["open"], sort_keys=True) == json.dumps(theirs["open"], sort_keys=True), name
    return mine


@pytest.mark.parametrize("seed", [1, 2, 3, 7, 11])
def test_generated_nights(seed):
    synth = Synth(SOURCE, seed=seed)
    nights = synth.nights(_dt.date(2024, 3, 9), 3, 60)
    carry = None
    for n in nights:
        archives = [(f"{SOURCE}/x/{a}", n.archives[a]) for a in sorted(n.archives, key=archive_sort_key)]
        carry = same(archives, carry)


@pytest.mark.parametrize("tz", ["UTC", "Asia/Kolkata", "Europe/Berlin"])
def test_generated_night_other_timezones(tz):
    synth = Synth(SOURCE, seed=4, timezone=tz)
    night = synth.night(_dt.date(2024, 10, 27), 40)
    same([(a, night.archives[a]) for a in sorted(night.archives, key=archive_sort_key)], tz=tz)


def test_golden_archives():
    same([(name, (GOLDEN / "informix" / name).read_bytes())
          for name in ("onlog_42.txt", "onlog_43.txt", "onlog_44.txt")])


def every_type_log(seed: int) -> bytes:
    """Every record type of the (frozen) layout, with random values, inside a transaction
    and outside one."""
    from decoders.informix.encoder import OnlogWriter

    rng = random.Random(seed)

    def value(kind):
        if kind == OL.HEX:
            return rng.choice([0x100123, 0x200045, 0x20004a, 0x100124, rng.randrange(1 << 32)])
        if kind == OL.DEC:
            return rng.randrange(4000)
        if kind == OL.USED_FREE:
            return rng.choice(OL.USED_FREE_VALUES)
        if kind == OL.DATE:
            return _dt.date(rng.randrange(1970, 2069), rng.randrange(1, 13), rng.randrange(1, 29))
        if kind == OL.TIME:
            return _dt.time(rng.randrange(24), rng.randrange(60), rng.randrange(60))
        return rng.choice(["wms.stock", "ix_a", "rootdbs", "x"])

    w = OnlogWriter(9, dumps=bool(seed % 2), header_every=rng.choice([0, 5, 18]))
    last = w.add("BEGIN", 3, 0, {"date": _dt.date(2024, 1, 2), "time": _dt.time(3, 4, 5),
                                 "pid": 7, "user": "ann"})
    types = sorted(t for t in OL.RECORD_TYPES if t not in ("BEGIN", "COMMIT", "ROLLBACK"))
    rng.shuffle(types)
    for t in types:
        vals = {name: value(kind) for name, kind, _ in OL.RECORD_TYPES[t]}
        last = w.add(t, 3, last, vals)
        w.add(t, 0, 0, vals)
    w.add("COMMIT", 3, last, {"date": _dt.date(2024, 1, 2), "time": _dt.time(3, 4, 6)})
    return w.data()


@pytest.mark.parametrize("seed", [0, 1])
def test_every_record_type(seed):
    same([("onlog_9.txt", every_type_log(seed))])


def damaged(data: bytes, rng: random.Random) -> bytes:
    raw = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(raw))
        raw[i] = rng.choice(b" \nx0f\t:/-\r\xff")
    return bytes(raw[:rng.randint(1, len(raw))])


@pytest.mark.parametrize("seed", range(12))
def test_damaged_nights(seed):
    rng = random.Random(seed)
    synth = Synth(SOURCE, seed=seed)
    nights = synth.nights(_dt.date(2024, 5, 1), 2, 30)
    carry = None
    for n in nights:
        archives = [(a, damaged(n.archives[a], rng)) for a in sorted(n.archives, key=archive_sort_key)]
        carry = same(archives, carry)


def test_damaged_every_type():
    rng = random.Random(5)
    data = every_type_log(3)
    for _ in range(20):
        same([("onlog_9.txt", damaged(data, rng))])


# valid records the columnar path does not read itself (wide numbers, non-ASCII, odd white
# space, signed decimals) and damage in the middle of transactions
CAREFUL_LINES = [
    "addr     len  type     xid      id link",
    "18       40   BEGIN    5        3  0        07/13/98 10:23:04 34 josé",
    "40       76   HINSERT  5        0  18       100123 101 40",
    "8c       96   RINSERT  5        0  40       000000000000000000100123 10101 60",
    "ec       40   BEGIN    123456789012 3  0    07/13/98 10:23:06 35 jsmith",
    "114      68   HUPBEF   123456789012 0  ec   200045 203 30",
    "158      68   HUPAFT   123456789012 0  114  200045 203 -32",
    "19c\t44\tADDITEM\t5\t0\t8c\t100123 101 7 1 4",
    "1c8      36   COMMIT   123456789012 0  158  07/13/98 10:23:07",
    "ADDR LEN TYPE XID ID LINK",
    "1ec      28   DPT      0        0  0        1a\x0b",
    "208      32   CKPOINT  0        0  1ec      20 1   ",
    "228      40   BEGIN    6        3  0        07/13/98 10:24:00 36 a b  c",
    "250      68   HDELETE  6        0  228      100124 105 30",
    "294      24   CLR      6        0  250",
    "2ac      36   ROLLBACK 6        0  294      07/13/98 10:24:01\r",
    "2d0      36   COMMIT   5        0  19c      02/30/98 10:24:01",
    "2f4      40   BEGIN    7        3  0        07/13/98 10:25:00 37 batch",
    "31c      76   HINSERT  7        0  2f4      100123 102 40 extra columns here",
    "368      76   HINSERT  7        0  31c      100123 0001020000000000000 40",
    "3b4      76   HINSERT  7        0  368      100123 103",
    "3f0      76   HINSERT  7        0  3b4      abcdef 104 40",
    "43c      36   COMMIT   7        0  3f0      07/13/98 10:25:01",
]


def test_lines_the_fast_path_leaves_to_the_careful_one():
    """Valid records the columnar path does not read itself (wide numbers, non-ASCII, odd
    white space, signed decimals) and damage in the middle of transactions."""
    data = ("\n".join(CAREFUL_LINES) + "\n").encode("utf-8")
    same([("onlog_12.txt", data)])
    carry = same([("onlog_12.txt", data.replace(b"COMMIT   7", b"HINSERT  7"))])
    same([("onlog_13.txt", b"4e8 36 COMMIT 7 0 43c 07/13/98 10:25:02\n")], carry)
