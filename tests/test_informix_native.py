"""The Informix decoder's compiled pass (``decoders/informix/native.py``, numba) against its
numpy path, row for row and field for field: ``decode_records`` and the sequential
``decode`` on generated nights (with and without ``-l`` dumps), every documented record type,
the golden archives, damaged nights and damaged dump lines, texts of unusual shape (blank
lines, CRLF, no final newline), byte ranges; and the lines, line kinds and fixed-column
reading of ``columns.Text`` / ``Records`` themselves. Also: small texts never import numba
(the size policy of ``columns.native_wanted``).

The numpy path is the reference the other informix tests check against the careful path and
the per-record oracle; so both paths giving the same rows keeps all of that for the compiled
one. Skipped where numba is not installed (the decoder then always takes the numpy path)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba")

from decoders.base import DecodeContext  # noqa: E402
from decoders.events import EventSink, accounts_bytes  # noqa: E402
from decoders.informix import columns as COL  # noqa: E402
from decoders.informix import decoder as D  # noqa: E402
from tests.golden import GOLDEN  # noqa: E402
from tests.test_informix_fastpath import CATALOG, SOURCE, night_archives  # noqa: E402
from tests.test_informix_oracle import CAREFUL_LINES, damaged, every_type_log  # noqa: E402

RECORDS = accounts_bytes(D.decode_records, lines=True)
SEQUENTIAL = D.decode


@pytest.fixture(autouse=True)
def _loaded():
    assert COL._native_module() is not None, "numba is installed but the compiled pass did not load"


def rows(fn, data: bytes, name: str, native: bool, tz: str = "America/Chicago", **ctx):
    old = os.environ.get("DBLOG_INFORMIX_NATIVE")
    os.environ["DBLOG_INFORMIX_NATIVE"] = "1" if native else "0"
    try:
        sink = EventSink(SOURCE, "informix", name)
        carry = fn(data, DecodeContext(SOURCE, "informix", CATALOG, name, {}, tz, None, **ctx),
                   sink)
        return sink.rows(), carry
    finally:
        if old is None:
            del os.environ["DBLOG_INFORMIX_NATIVE"]
        else:
            os.environ["DBLOG_INFORMIX_NATIVE"] = old


def same_text(data: bytes) -> None:
    """``Text`` and ``Records`` of both paths: lines, kinds, and what is read of every record."""
    a, b = COL.Text(data, native=False), COL.Text(data, native=True)
    assert b.native is not None
    for f in ("starts", "ends", "kind", "complete"):
        assert (getattr(a, f) == getattr(b, f)).all(), f
    assert (a.n_lines, a.cr) == (b.n_lines, b.cr)
    ra, rb = a.records(), b.records()
    assert (ra.lines == rb.lines).all()
    for f in ("fast", "addr", "xid", "link", "tcode"):
        assert (getattr(ra, f) == getattr(rb, f)).all(), f


def same(name: str, data: bytes, tz: str = "America/Chicago", sequential: bool = True) -> list:
    same_text(data)
    got, _ = rows(RECORDS, data, name, True, tz)
    want, _ = rows(RECORDS, data, name, False, tz)
    assert len(got) == len(want), name
    for g, w in zip(got, want):
        assert g == w, (name, g, w)
    if sequential:
        got, gc = rows(SEQUENTIAL, data, name, True, tz)
        want, wc = rows(SEQUENTIAL, data, name, False, tz)
        assert got == want and gc == wc, name
    return got


@pytest.mark.parametrize("seed", [1, 2, 3, 7])
def test_generated_nights(seed):
    kinds = set()
    for name, data in night_archives(seed):
        kinds |= {r["kind"] for r in same(name, data)}
    assert {"change", "begin", "commit", "control"} <= kinds


def test_other_timezone():
    for name, data in night_archives(4, 40, "Asia/Kolkata", days=1):
        same(name, data, "Asia/Kolkata")


def test_golden_archives():
    for name in ("onlog_42.txt", "onlog_43.txt", "onlog_44.txt"):
        same(name, (GOLDEN / "informix" / name).read_bytes())


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_every_record_type(seed):
    same("onlog_9.txt", every_type_log(seed))


@pytest.mark.parametrize("seed", range(10))
def test_damaged_nights(seed):
    rng = random.Random(seed)
    quarantined = 0
    for name, data in night_archives(seed, 30):
        got = same(name, damaged(data, rng), sequential=seed < 3)
        quarantined += sum(r["kind"] == "quarantine" for r in got)
    assert quarantined


def test_damaged_dump_lines():
    rng = random.Random(9)
    data = every_type_log(1)              # odd seeds write dumps
    lines = data.split(b"\n")
    dumps = [i for i, ln in enumerate(lines) if ln.startswith(b"        ")]
    assert dumps
    for _ in range(60):
        copy = list(lines)
        i = rng.choice(dumps)
        ln = bytearray(copy[i])
        j = rng.randrange(len(ln))
        ln[j] = rng.choice(b"g \t\x01\x7fZ:-\xff0A")
        copy[i] = bytes(ln[:rng.choice([len(ln), len(ln), j + 1])]) + \
            rng.choice([b"", b"", b" ", b"x", b"  ab", b"\r"])
        same("onlog_9.txt", b"\n".join(copy), sequential=False)


def test_lines_left_to_the_careful_path_and_odd_shapes():
    data = ("\n".join(CAREFUL_LINES) + "\n").encode("utf-8")
    same("onlog_12.txt", data)
    same("onlog_13.txt", b"4e8 36 COMMIT 7 0 43c 07/13/98 10:25:02")        # no newline at the end
    base = every_type_log(1)
    same("onlog_9.txt", base.replace(b"\n", b"\r\n"))                        # CRLF
    same("onlog_9.txt", base.replace(b"\naddr", b"\n\n\naddr"))             # blank lines
    same("onlog_9.txt", base.replace(b"\n        ", b"\n\n        ", 5))    # a blank in a unit
    same("onlog_9.txt", base.replace(b"HINSERT ", b"hinsert ", 3))          # unknown types
    same("onlog_9.txt", base.replace(b"addr     len", b"ADDR   len", 2))    # other headers
    same("onlog_9.txt", base[:-7])                                          # cut short


def test_ranges_of_a_file():
    name, data = next(night_archives(3, 40))
    parts = D.split(data, DecodeContext(SOURCE, "informix", CATALOG, name, {}, "UTC", None), 2000)
    assert len(parts) > 2
    for r in parts:
        kw = dict(offset=r["start"], index=r["index"], line=r["line"])
        chunk = data[r["start"]:r["end"]]
        assert rows(RECORDS, chunk, name, True, "UTC", **kw) == \
            rows(RECORDS, chunk, name, False, "UTC", **kw)


def test_generated_one_byte_damage_of_record_lines():
    """Every byte class at random places of record lines (what the fixed-column reader
    must accept or leave to the token reader exactly as numpy does)."""
    rng = random.Random(21)
    data = every_type_log(0)
    lines = data.split(b"\n")
    recs = [i for i, ln in enumerate(lines) if ln[:1].isalnum() and not ln.startswith(b"addr")]
    for _ in range(200):
        copy = list(lines)
        i = rng.choice(recs)
        ln = bytearray(copy[i])
        ln[rng.randrange(len(ln))] = rng.randrange(256)
        copy[i] = bytes(ln)
        blob = b"\n".join(copy)
        same_text(blob)
        assert rows(RECORDS, blob, "onlog_9.txt", True)[0] == \
            rows(RECORDS, blob, "onlog_9.txt", False)[0]


def test_size_policy():
    """A text below the thresholds is read by numpy; a process that has read enough by numpy
    loads the compiled pass; ``DBLOG_INFORMIX_NATIVE`` overrides."""
    st = COL._native_state
    saved = dict(st)
    env = os.environ.pop("DBLOG_INFORMIX_NATIVE", None)
    try:
        st.update(module=None, failed=False, numpy_bytes=0)
        assert not COL.native_wanted(1 << 20)
        assert st["numpy_bytes"] == 1 << 20
        assert COL.native_wanted(COL.NATIVE_MIN_BYTES)
        st.update(numpy_bytes=COL.NATIVE_AFTER_BYTES - (1 << 20))
        assert COL.native_wanted(2 << 20)
        st.update(module=saved["module"])
        assert COL.native_wanted(COL.NATIVE_LOADED_MIN_BYTES)
        assert not COL.native_wanted(COL.NATIVE_LOADED_MIN_BYTES - 1)
        os.environ["DBLOG_INFORMIX_NATIVE"] = "0"
        assert not COL.native_wanted(COL.NATIVE_MIN_BYTES)
        os.environ["DBLOG_INFORMIX_NATIVE"] = "1"
        assert COL.native_wanted(10)
    finally:
        st.clear()
        st.update(saved)
        os.environ.pop("DBLOG_INFORMIX_NATIVE", None)
        if env is not None:
            os.environ["DBLOG_INFORMIX_NATIVE"] = env


def test_a_small_night_never_imports_numba():
    code = (
        "import sys\n"
        "from decoders.base import DecodeContext\n"
        "from decoders.events import EventSink\n"
        "from decoders.informix import decode\n"
        "from tests.test_informix_fastpath import CATALOG, SOURCE, night_archives\n"
        "for name, data in night_archives(2, 200):\n"
        "    decode(data, DecodeContext(SOURCE, 'informix', CATALOG, name, {}, 'UTC', None),\n"
        "           EventSink(SOURCE, 'informix', name))\n"
        "print('numba' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k != "DBLOG_INFORMIX_NATIVE"}
    root = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=root, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_kernels_on_empty_and_tiny_texts():
    for data in (b"", b"\n", b"x", b"addr     len  type     xid      id link",
                 b"        00000028 000b0000", b"18 40 BEGIN 1 1 0 11/01/26 00:00:01 1 u\n"):
        same_text(data)
        assert rows(RECORDS, data, "onlog_5.txt", True)[0] == \
            rows(RECORDS, data, "onlog_5.txt", False)[0]
    assert np.array_equal(COL.Text(b"", native=True).starts, np.zeros(0, np.int64))


def test_outputs_do_not_share_the_working_arrays():
    """Texts decoded one after the other reuse the compiled pass's working arrays
    (``native.SCRATCH``): the events of the first text stay what they were."""
    archives = list(night_archives(5, 80))
    old = os.environ.get("DBLOG_INFORMIX_NATIVE")
    os.environ["DBLOG_INFORMIX_NATIVE"] = "1"
    try:
        kept = []
        for name, data in archives:
            sink = EventSink(SOURCE, "informix", name)
            RECORDS(data, DecodeContext(SOURCE, "informix", CATALOG, name, {}, "UTC", None), sink)
            kept.append((name, data, sink.batches()))
    finally:
        if old is None:
            del os.environ["DBLOG_INFORMIX_NATIVE"]
        else:
            os.environ["DBLOG_INFORMIX_NATIVE"] = old
    import pyarrow as pa
    for name, data, batches in kept:
        want, _ = rows(RECORDS, data, name, False, "UTC")
        got = pa.Table.from_batches(batches).to_pylist() if batches else []
        assert len(got) == len(want) and got == want, name


def test_the_compiled_loops_number_roles_as_the_layout_does():
    """``native.rows`` and ``native.seg_offsets`` compare record roles with numbers written
    out (a cached compiled loop does not see a changed global): they must be
    ``layout``'s."""
    import inspect

    from decoders.informix import layout as L
    from decoders.informix import native

    src = inspect.getsource(native)
    assert "r == 1 and link[i] != 0:               # R_BEGIN" in src and L.R_BEGIN == 1
    assert "(r == 0 or r == 8) else -1          # R_OTHER, R_SYSTEM" in src
    assert (L.R_OTHER, L.R_SYSTEM) == (0, 8)
    assert "if r == 5 else -1             # R_HOME" in src and L.R_HOME == 5
    assert "if r == 5 or r == 7:                                   # R_HOME, R_DDL" in src
    assert L.R_DDL == 7
    assert "if r == 2:                                             # R_COMMIT" in src
    assert L.R_COMMIT == 2
    assert "if role_f[j] == 8:" in src
    assert L.R_UNKNOWN not in range(9)
