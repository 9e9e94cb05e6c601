"""Small synthesized solidDB nights for the write-audit-publish tests (validation, publish,
report): one data root with night 1 published through ``dblog run``, copied per test.

Runs are cached per pytest process, so the test modules that need the same night share it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import io
import json
import os
import shutil
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
SOURCE = "pos_solid"
CATALOG = REPO / "include" / "catalogs" / "pos_solid.json"
DATE1, DATE2 = "2026-11-01", "2026-11-02"
TRANSACTIONS = 60
_CACHE: dict = {}


def write_sources(directory: Path, catalog: Path = CATALOG, **extra) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "sources.yaml"
    path.write_text(yaml.safe_dump({"sources": [
        {"name": SOURCE, "format": "soliddb", "catalog": str(catalog), **extra}]}))
    return path


def run_cli(*args: str) -> tuple[int, str]:
    """``dblog <args>`` in this process (the tests' SparkSession is the active one)."""
    from dblog.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(list(args))
    return rc, out.getvalue()


def run_night(root: Path, config: Path, date: str) -> tuple[int, str]:
    return run_cli("run", "--date", date, "--config", str(config), "--data-root", str(root))


def base_root(factory) -> dict:
    """Landing for nights 1 and 2, night 1 run (and published) with ``dblog run``."""
    if "base" not in _CACHE:
        from dblog.config import load_config
        from dblog.paths import DataRoot
        from dblog.synthcmd import synth

        top = factory.mktemp("wap_base")
        root = top / "data"
        config = write_sources(top)
        cfg = load_config(config)
        synth(cfg, cfg.sources, DataRoot(root), _dt.date.fromisoformat(DATE1), 2, TRANSACTIONS, seed=7)
        rc, out = run_night(root, config, DATE1)
        _CACHE["base"] = {"root": root, "config": config, "rc": rc, "out": out}
    return _CACHE["base"]


def copy_root(factory, name: str) -> Path:
    """A fresh copy of the base data root (night 1 published, night 2 landed)."""
    src = base_root(factory)["root"]
    dst = factory.mktemp(name) / "data"
    shutil.copytree(src, dst, symlinks=True)
    return dst


def tree(path: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under ``path`` (following the published link)."""
    path = Path(os.path.realpath(path))
    out = {}
    if not path.is_dir():
        return out
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(path))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def published_state(root: Path) -> dict:
    """What a reader of the data root sees: where published/ points and every file in it."""
    link = root / "published"
    return {"link": os.readlink(link) if link.is_symlink() else None, "files": tree(link)}


def expected_changes(root: Path, date: str) -> list[dict]:
    """The changes the generator wrote for the night (commit order, then order in the transaction)."""
    return [json.loads(line) for line in
            (root / "synth" / SOURCE / f"{date}.expected.jsonl").read_text().splitlines() if line]


def staged_run(root: Path) -> Path:
    runs = sorted((root / "staging").iterdir())
    assert len(runs) >= 1
    return runs[-1]


def corrupt_archives(night: Path, every: int = 3) -> int:
    """Break every ``every``-th CSV row of each archive (a field too many): quarantined."""
    broken = 0
    for archive in sorted(night.iterdir()):
        lines = archive.read_bytes().split(b"\n")
        for i in range(1, len(lines)):
            if lines[i] and i % every == 0:
                lines[i] += b",junk"
                broken += 1
        archive.write_bytes(b"\n".join(lines))
    return broken


def threshold_night(factory) -> dict:
    """Night 2 with corrupted archives, run with a 10% quarantine threshold (fails)."""
    if "threshold" not in _CACHE:
        root = copy_root(factory, "threshold")
        broken = corrupt_archives(root / "landing" / SOURCE / DATE2)
        before = {"published": published_state(root),
                  **{p: tree(root / "published" / p) for p in ("audit", "quarantine", "state")}}
        config = write_sources(root.parent, quarantine_threshold=0.1)
        rc, out = run_night(root, config, DATE2)
        _CACHE["threshold"] = {"root": root, "rc": rc, "out": out, "before": before, "broken": broken}
    return _CACHE["threshold"]
