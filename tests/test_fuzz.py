"""Fuzz suite (bounded for CI): seeded mutations of every format's sample archives.

Each target runs ``CASES`` cases of ``tests/fuzz.py`` (``make fuzz`` runs 5,000): no
exception escapes ``decode``, no case runs longer than ``TIMEOUT`` seconds, every row lies
inside its archive and explains itself, bytes add up (once events carry ``n_bytes``), the
same bytes give the same rows. The share of single-field damages that lose half an archive
is held at or under 2% (issue 15; docs/ROBUSTNESS.md).
"""

from __future__ import annotations

import pytest

from tests import fuzz as Z

CASES = 150
TIMEOUT = 10.0
# share of single-field damages that may lose half an archive or more: the goal of issue 15,
# met by every format since each resynchronises (docs/ROBUSTNESS.md: 0-0.25% over 1,000 cases)
CEILING = {"soliddb": 0.02, "db2luw": 0.02, "db2luw_big": 0.02, "informix": 0.02, "rdb": 0.02,
           "lldf": 0.02, "lldf_rdw": 0.02}


@pytest.mark.parametrize("target", sorted(Z.TARGETS))
def test_fuzz_target(target):
    s = Z.fuzz_target(target, CASES, seed=0, timeout=TIMEOUT)
    detail = "\n".join(f"case {r['case']} ({r.get('damage')}): "
                       f"{r.get('crash') or r.get('hang') or '; '.join(r['problems'])}"
                       f"  [python -m tests.fuzz --target {target} --case {r['case']} --show]"
                       for r in s["failing"])
    assert (s["crashes"], s["hangs"], s["violations"]) == (0, 0, 0), detail
    assert s["cases"] == CASES and s["field_cases"] > CASES // 5
    assert s["field_lose_half_share"] <= CEILING[target], Z.describe(s)


def test_cases_are_reproducible():
    prep = Z.prepare(Z.TARGETS["rdb"])
    a = [Z.make_case(prep, 0, c)[2] for c in range(20)]
    b = [Z.make_case(Z.prepare(Z.TARGETS["rdb"]), 0, c)[2] for c in range(20)]
    assert a == b and len(set(a)) == 20


def test_damage_kinds_are_all_drawn():
    prep = Z.prepare(Z.TARGETS["soliddb"])
    kinds = {Z.make_case(prep, 0, c)[1] for c in range(200)}
    assert kinds == set(Z.KINDS_OF_DAMAGE)


def test_checks_catch_bad_rows():
    """The checks are not vacuous: rows outside the archive, foreign raw bytes and a
    missing error class are reported."""
    prep = Z.prepare(Z.TARGETS["rdb"])
    data = prep.samples[0].data
    rows = [dict(r) for r in prep.samples[0].clean]
    assert Z.check_rows(prep, data, rows) == []
    rows[0]["record_offset"] = len(data) + 5
    rows.append({**rows[1], "kind": "quarantine", "error_class": None, "message": "x",
                 "raw_hex": b"not in the archive at all".hex()})
    problems = " | ".join(Z.check_rows(prep, data, rows))
    assert "outside the archive" in problems and "without error class" in problems
    assert "raw_hex is not the archive's bytes" in problems


def test_field_damage_is_measured_against_the_clean_decode():
    prep = Z.prepare(Z.TARGETS["rdb"])
    s = prep.samples[0]
    assert Z.loss(s, s.data, s.clean)[0] == 0.0
    assert Z.loss(s, s.data, [r for r in s.clean if r["record_offset"] < len(s.data) // 3])[0] > 0.5
