"""One test over every registered format: the package face (SPEC section 3 / ARCHITECTURE.md
"The decoder contract") and a generated night decoded with records and bytes accounted."""

from __future__ import annotations

import datetime as _dt
import subprocess
import sys

import pytest

import decoders
from decoders.base import DecodeContext
from decoders.catalog import Catalog
from decoders.events import EVENT_COLUMNS, KINDS, EventSink

FORMATS = list(decoders.FORMATS)


def test_registry_is_the_five_formats_and_refuses_others():
    assert FORMATS == ["soliddb", "db2luw", "informix", "rdb", "lldf"]
    for bad in ("oracle", "", None, "SOLIDDB"):
        with pytest.raises(decoders.UnknownFormat):
            decoders.get(bad)


@pytest.mark.parametrize("fmt", FORMATS)
def test_package_face(fmt):
    mod = decoders.get(fmt)
    assert mod.FORMAT == fmt
    assert isinstance(mod.SEQUENTIAL, bool) and isinstance(mod.HAS_IMAGES, bool)
    for name, (default, check) in mod.OPTIONS.items():
        assert check == "codec" or check is bool or (isinstance(check, tuple) and default in check)
    assert callable(mod.archive_sort_key) and callable(mod.check_column)
    assert callable(mod.decode) and isinstance(mod.Synth, type)
    if hasattr(mod, "split"):
        assert callable(mod.split) and not mod.SEQUENTIAL


def test_cheap_names_do_not_import_the_decoders():
    code = ("import sys, decoders\n"
            "for f in decoders.FORMATS:\n"
            "    m = decoders.get(f); m.OPTIONS, m.HAS_IMAGES, m.archive_sort_key('x_1.txt')\n"
            "heavy = [m for m in sys.modules if m.endswith('.decoder') or m in ('pyarrow', 'numpy')]\n"
            "print(heavy)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.parametrize("fmt", FORMATS)
def test_generated_night_is_accounted_record_by_record_and_byte_by_byte(fmt):
    mod = decoders.get(fmt)
    synth = mod.Synth(f"test_{fmt}", seed=3)
    assert isinstance(synth.catalog, Catalog)
    night = synth.night(_dt.date(2026, 11, 1), 40)
    carry = None
    names = sorted(night.archives, key=mod.archive_sort_key)
    for name in names:
        data = night.archives[name]
        sink = EventSink(synth.source, fmt, name)
        ctx = DecodeContext(synth.source, fmt, synth.catalog, name, dict(synth.options),
                            synth.timezone, carry)
        out = mod.decode(data, ctx, sink)
        carry = out if mod.SEQUENTIAL else None
        rows = sink.rows()
        assert rows and set(rows[0]) == set(EVENT_COLUMNS)
        assert {r["kind"] for r in rows} <= set(KINDS)
        assert not [r for r in rows if r["kind"] == "quarantine"], name
        assert sum(r["n_bytes"] for r in rows) == len(data), name
        assert all(r["n_bytes"] >= 0 and r["n_records"] >= 0 for r in rows)
        idx = [r["record_index"] for r in rows if r["kind"] != "carry"]
        assert idx == sorted(idx)


@pytest.mark.parametrize("fmt", sorted(decoders.FORMATS))
@pytest.mark.parametrize("cut", [1, 39])
def test_a_cut_short_archive_still_accounts_every_byte(fmt, cut):
    """The first bytes of an archive only (fuzz case informix 4129: a header line cut at
    39 bytes gave no row at all, so its bytes were accounted nowhere)."""
    mod = decoders.get(fmt)
    synth = mod.Synth(f"test_{fmt}", seed=3)
    night = synth.night(_dt.date(2026, 11, 1), 5)
    name = sorted(night.archives, key=mod.archive_sort_key)[0]
    data = night.archives[name][:cut]
    sink = EventSink(synth.source, fmt, name)
    ctx = DecodeContext(synth.source, fmt, synth.catalog, name, dict(synth.options),
                        synth.timezone, None)
    mod.decode(data, ctx, sink)
    rows = sink.rows()
    assert rows and sum(r["n_bytes"] for r in rows) == cut, rows
