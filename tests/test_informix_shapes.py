"""Informix records mode on texts of unusual shape (issue 13, seventh session): the shortcuts
of the columnar path (``_RecordsMode._raw_simple``: a record's raw bytes from its line to
its last dump line when blank lines stand only before header lines; ``Text``'s carriage
return handling, looked for only where the text holds one) against the careful per-record
path, row for row (``test_informix_fastpath.same``): blank lines anywhere, CRLF line ends,
a carriage return inside a line, no newline at the end."""

from __future__ import annotations

import random

import numpy as np
import pytest

from decoders.informix import columns as COL
from tests.test_informix_fastpath import night_archives, same
from tests.test_informix_oracle import every_type_log


def _with_dumps(seed: int) -> tuple[str, bytes]:
    for name, data in night_archives(seed, 30, days=1):
        if b"\n        " in data:
            return name, data
    raise AssertionError("no night with -l dumps")


def _blank_lines(data: bytes, rng: random.Random, k: int) -> bytes:
    lines = data.split(b"\n")
    for _ in range(k):
        lines.insert(rng.randrange(len(lines) + 1), rng.choice([b"", b"  ", b"\t"]))
    return b"\n".join(lines)


@pytest.mark.parametrize("seed", [1, 5])
def test_blank_lines_anywhere(seed):
    rng = random.Random(seed)
    name, data = _with_dumps(seed)
    same(name, data)                              # the simple shape
    for k in (1, 3, 20):
        same(name, _blank_lines(data, rng, k))
    same(name, b"\n" + data)                      # a blank first line
    same(name, data + b"\n\n")                    # blank last lines
    same(name, data.replace(b"\naddr", b"\n\n\naddr"))    # two blank lines before a header


def test_every_type_with_blank_lines_and_carriage_returns():
    rng = random.Random(3)
    data = every_type_log(1)                      # odd seeds write dumps
    same("onlog_9.txt", data)
    same("onlog_9.txt", data.replace(b"\n", b"\r\n"))
    same("onlog_9.txt", _blank_lines(data, rng, 5).replace(b"\n", b"\r\n", 40))
    lines = data.split(b"\n")
    for _ in range(10):                           # a \r inside a line, or at one line's end
        copy = list(lines)
        i = rng.randrange(len(copy))
        j = rng.randrange(len(copy[i]) + 1)
        copy[i] = copy[i][:j] + b"\r" + copy[i][j:]
        same("onlog_9.txt", b"\n".join(copy))
    same("onlog_9.txt", data.rstrip(b"\n"))       # no newline at the end


def test_text_lines_and_carriage_returns():
    """``Text``'s line bounds, against ``bytes.split`` (a \\r at a line's end cut)."""
    for data in (b"", b"\n", b"a", b"a\n", b"a\r\n", b"a\rb\n\r\n", b"\r", b"x\ny", b"x\r\ny\r"):
        t = COL.Text(data)
        parts = data.split(b"\n")
        if data.endswith(b"\n") or not data:
            parts = parts[:-1]
        want = [p[:-1] if p.endswith(b"\r") else p for p in parts]     # unterminated too
        assert [t.line(i) for i in range(t.n_lines)] == want, data
        assert t.complete.tolist() == [True] * (len(parts) - 1) + [data.endswith(b"\n")] \
            if parts else t.n_lines == 0
        assert t.cr == any(w != p for w, p in zip(want, parts)), data
        assert np.array_equal(t.starts, np.cumsum([0] + [len(p) + 1 for p in parts])[:-1])


def test_positions_every_nibble():
    """``positions``' SWAR hex (upper case) against ``%08X`` on edge and random values."""
    rng = np.random.default_rng(0)
    edge = [0, 1, 9, 10, 15, 16, 0x99999999, 0xAAAAAAAA, 0x9A9A9A9A, 0xFFFFFFFF, 0x80000000]
    nib = [d << (4 * k) for k in range(8) for d in range(16)]
    values = np.array(edge + nib + rng.integers(0, 1 << 32, 5000).tolist(), dtype=np.uint64)
    for uniqid in (0, 7, 0xABCDEF01):
        got = COL.positions(uniqid, values).to_pylist()
        assert got == ["%08X%08X" % (uniqid, v) for v in values.tolist()]


def test_short_type_index_hash_against_searchsorted():
    from decoders.informix import fixed as F

    assert F._TYPE_HASH is not None
    rng = np.random.default_rng(1)
    keys = np.concatenate([F._TYPE_KEYS, F._TYPE_KEYS ^ np.uint64(1), F._TYPE_KEYS << np.uint64(8),
                           rng.integers(0, 1 << 63, 20000, dtype=np.uint64),
                           np.array([0, 0x2020202020202020, (1 << 64) - 1], np.uint64)])
    i = np.minimum(np.searchsorted(F._TYPE_KEYS, keys), len(F._TYPE_KEYS) - 1)
    want = np.where(F._TYPE_KEYS[i] == keys, i, -1)
    assert np.array_equal(F.short_type_index(keys), want)
    assert (F.short_type_index(F._TYPE_KEYS) == np.arange(len(F._TYPE_KEYS))).all()


def test_strings_take_then_scatter():
    """``decoder._strings`` (valid rows taken, then placed) against a plain Python reference:
    some, all and no rows valid, values with a null, indices out of range where not valid."""
    from decoders.informix import decoder as D

    rng = np.random.default_rng(2)
    for values in (["c", "d", "u"], ["wms", None, "inventory", ""], []):
        for p in (0.0, 0.3, 1.0):
            n = 50
            valid = rng.random(n) < p
            idx = np.where(valid, rng.integers(0, max(len(values), 1), n), -7)
            if not values:
                valid[:] = False
            got = D._strings(values, idx, valid).to_pylist()
            assert got == [values[i] if v else None for i, v in zip(idx.tolist(), valid.tolist())]
