"""Informix records mode: the columnar path (``decode_records``) against the careful
per-record path of the same mode (``decode_records_careful``: every record parsed on its own
by ``parse_record``, the reference), row for row, every column: generated nights (with and
without ``-l`` dumps, several seeds and time zones), the golden archives, every documented
record type, the lines the columnar path leaves to the careful one, and damaged input
(same rows, so the same error classes and offsets)."""

from __future__ import annotations

import datetime as _dt
import random

import pytest

from decoders.base import DecodeContext
from decoders.events import EventSink, accounts_bytes
from decoders.informix import archive_sort_key
from decoders.informix import decoder as D
from decoders.informix.synth import Synth
from tests.golden import GOLDEN
from tests.test_informix_oracle import CAREFUL_LINES, damaged, every_type_log

SOURCE = "wms_informix"
CATALOG = Synth(SOURCE).catalog
FAST = accounts_bytes(D.decode_records, lines=True)
CAREFUL = accounts_bytes(D.decode_records_careful, lines=True)


def rows(fn, data: bytes, name: str, tz: str, **ctx) -> list[dict]:
    sink = EventSink(SOURCE, "informix", name)
    fn(data, DecodeContext(SOURCE, "informix", CATALOG, name, {}, tz, None, **ctx), sink)
    return sink.rows()


def same(name: str, data: bytes, tz: str = "America/Chicago") -> list[dict]:
    got = rows(FAST, data, name, tz)
    want = rows(CAREFUL, data, name, tz)
    assert len(got) == len(want), name
    for g, w in zip(got, want):
        assert g == w, (name, g, w)
    assert sum(r["n_bytes"] for r in got) == len(data)
    return got


def night_archives(seed: int, n: int = 60, tz: str = "America/Chicago", days: int = 2):
    synth = Synth(SOURCE, seed=seed, timezone=tz)
    for night in synth.nights(_dt.date(2024, 3, 9), days, n):
        for a in sorted(night.archives, key=archive_sort_key):
            yield a, night.archives[a]


@pytest.mark.parametrize("seed", [1, 2, 3, 7, 11])
def test_generated_nights(seed):
    kinds = set()
    for name, data in night_archives(seed):
        kinds |= {r["kind"] for r in same(name, data)}
    assert {"change", "begin", "commit", "control"} <= kinds


@pytest.mark.parametrize("tz", ["UTC", "Asia/Kolkata", "Europe/Berlin"])
def test_other_timezones(tz):
    for name, data in night_archives(4, 40, tz, days=1):
        same(name, data, tz)


def test_golden_archives():
    for name in ("onlog_42.txt", "onlog_43.txt", "onlog_44.txt"):
        same(name, (GOLDEN / "informix" / name).read_bytes())


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_every_record_type(seed):
    same("onlog_9.txt", every_type_log(seed))


@pytest.mark.parametrize("seed", range(16))
def test_damaged_nights(seed):
    rng = random.Random(seed)
    quarantined = 0
    for name, data in night_archives(seed, 30):
        got = same(name, damaged(data, rng))
        quarantined += sum(r["kind"] == "quarantine" for r in got)
    assert quarantined


def test_damaged_every_type():
    rng = random.Random(5)
    data = every_type_log(3)
    for _ in range(30):
        same("onlog_9.txt", damaged(data, rng))


def test_damaged_dump_lines():
    """Damage inside ``-l`` dump lines: a byte that is not hex, a missing blank, a rendering
    byte that is not printable, a line cut short or made longer."""
    rng = random.Random(9)
    data = every_type_log(1)              # odd seeds write dumps
    lines = data.split(b"\n")
    dumps = [i for i, ln in enumerate(lines) if ln.startswith(b"        ")]
    assert dumps
    for _ in range(40):
        copy = list(lines)
        i = rng.choice(dumps)
        ln = bytearray(copy[i])
        j = rng.randrange(len(ln))
        ln[j] = rng.choice(b"g \t\x01\x7fZ:-\xff0")
        copy[i] = bytes(ln[:rng.choice([len(ln), len(ln), j + 1, len(ln) + 0])]) + \
            rng.choice([b"", b"", b" ", b"x", b"  ab"])
        same("onlog_9.txt", b"\n".join(copy))


def test_lines_the_fast_path_leaves_to_the_careful_one():
    data = ("\n".join(CAREFUL_LINES) + "\n").encode("utf-8")
    same("onlog_12.txt", data)
    same("onlog_12.txt", data.replace(b"COMMIT   7", b"HINSERT  7"))
    same("onlog_13.txt", b"4e8 36 COMMIT 7 0 43c 07/13/98 10:25:02\n")
    same("onlog_13.txt", b"4e8 36 COMMIT 7 0 43c 07/13/98 10:25:02")        # no newline at the end


def test_ranges_of_a_file():
    """A byte range decodes with the offsets of the whole file (ctx.offset/line/index)."""
    name, data = next(night_archives(3, 40))
    parts = D.split(data, DecodeContext(SOURCE, "informix", CATALOG, name, {}, "UTC", None), 2000)
    assert len(parts) > 2
    for r in parts:
        kw = dict(offset=r["start"], index=r["index"], line=r["line"])
        chunk = data[r["start"]:r["end"]]
        got = rows(FAST, chunk, name, "UTC", **kw)
        want = rows(CAREFUL, chunk, name, "UTC", **kw)
        assert got == want
