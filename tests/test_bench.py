"""The benchmark CLI end to end on a tiny night (it must keep working; nothing is timed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.spark
def test_bench_cli_tiny_night(tmp_path):
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--n", "200", "--masters", "local[1]", "--shared",
         "--run-master", "", "--no-scale", "--cache", str(tmp_path / "cache"), "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "latest.json").read_text())
    formats = ("soliddb", "db2luw", "informix", "rdb", "lldf")
    stages = {(r["format"], r["stage"]) for r in report["rows"]}
    for fmt in formats:
        for stage in ("decode", "plain", "udf"):
            assert (fmt, stage) in stages, (fmt, stage)
    for r in report["rows"]:
        assert r["seconds"] > 0 and r["bytes"] > 0 and r["records"] > 0, r
        if r["stage"] in ("decode", "udf"):      # the job itself decoded the night's archives
            assert r["rows"] > 0, r
        assert r["memory_mb"]["tree"] > 0, r
    # with one master the targets (which compare local[2] runs) are not judged, but every
    # format has its ratios against both baselines
    from bench.report import ratios

    rat = ratios(report)
    for fmt in formats:
        assert {"decode vs plain (local[1])", "decode vs udf (local[1])"} <= set(rat[fmt]), rat[fmt]
        assert all(v > 0 for v in rat[fmt].values())
    md = (out / "latest.md").read_text()
    assert "| soliddb | decode | local[1] |" in md and "## Targets" in md
