"""Nights for the benchmark: N changes per format, written with the project's encoders,
cached under ``bench/cache/`` (keyed by format, N, seed and a hash of the generator code).

Each format gets one source of ``include/sources.yaml`` (its sample catalog, options and
time zone); the cached night is a data root with ``landing/<source>/<date>/`` plus a
``sources.yaml`` for that one source and ``night.json`` (what was written).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import yaml

from decoders import FORMATS  # the registry (format -> package)

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / "bench" / "cache"
DATE = "2026-11-01"


def sample_sources() -> dict[str, dict]:
    """format -> the sample source of include/sources.yaml (catalog path made absolute)."""
    path = REPO / "include" / "sources.yaml"
    out = {}
    for s in yaml.safe_load(path.read_text())["sources"]:
        s = dict(s)
        s["catalog"] = str((path.parent / s["catalog"]).resolve())
        out.setdefault(s["format"], s)
    return out


def _code_hash(fmt: str) -> str:
    h = hashlib.sha1()
    for p in sorted((REPO / "decoders" / fmt).glob("*.py")) + [REPO / "decoders" / "synth.py"]:
        if p.name in ("encoder.py", "synth.py", "layout.py"):
            h.update(p.read_bytes())
    return h.hexdigest()[:10]


def mean_changes(fmt: str) -> float:
    """Mean changes per planned transaction (Planner: 1..max_changes, uniform)."""
    from decoders import get
    from decoders.synth import Planner

    opts = getattr(get(fmt).Synth, "planner_options", {})
    mx = opts.get("max_changes", Planner.__init__.__kwdefaults__["max_changes"])
    return (1 + mx) / 2


def _cached(root: Path, fmt: str) -> dict:
    """A cached night's info, its ``sources.yaml`` pointed at this checkout's catalog: the
    night may have been generated from another worktree, since removed or changed (the
    catalog is not part of the code hash)."""
    info = json.loads((root / "night.json").read_text())
    text = yaml.safe_dump({"sources": [sample_sources()[fmt]]})
    cfg = root / "sources.yaml"
    if not cfg.is_file() or cfg.read_text() != text:
        tmp = cfg.with_name(f".sources.yaml.{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, cfg)     # atomic: a concurrent bench reads the old or the new file
    info["root"] = str(root)
    return info


def night_dir(fmt: str, n: int, seed: int = 0, cache: Path = CACHE) -> Path:
    return Path(cache) / f"{fmt}-n{n}-s{seed}-{_code_hash(fmt)}"


def ensure_night(fmt: str, n: int, seed: int = 0, cache: Path = CACHE, log=print) -> dict:
    """The cached night of ``fmt`` with about ``n`` changes (generated when missing)."""
    root = night_dir(fmt, n, seed, cache)
    info_path = root / "night.json"
    if info_path.is_file():
        return _cached(root, fmt)
    from decoders import get
    from decoders.catalog import parse_catalog  # noqa: F401  (import check)

    from dblog.config import load_config

    src = sample_sources()[fmt]
    tmp = root.with_name(root.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    cfg_path = tmp / "sources.yaml"
    cfg_path.write_text(yaml.safe_dump({"sources": [src]}))
    source = load_config(cfg_path).source(src["name"])
    trx = max(1, round(n / mean_changes(fmt)))
    log(f"bench: generating {fmt}: {trx} transactions (~{n} changes) ...")
    t0 = time.monotonic()
    gen = get(fmt).Synth(source.name, catalog=source.catalog(), options=source.options,
                         seed=seed, timezone=source.timezone)
    xids = getattr(gen, "free_xids", None)
    if isinstance(xids, list) and len(xids) < trx + 1000:
        # informix: the generator has 999 xids and an open transaction keeps its xid all
        # night, so nights beyond ~30,000 transactions run out; widen the pool (a sorted list
        # is a valid heap). Only the benchmark's big nights need this.
        gen.free_xids = list(range(1, trx + 1000))
    night = gen.night(_dt.date.fromisoformat(DATE), trx)
    land = tmp / "landing" / source.name / DATE
    land.mkdir(parents=True)
    for name, data in night.archives.items():
        (land / name).write_bytes(data)
    changes = sum(len(t.changes) for t in night.trxs)
    info = {"format": fmt, "source": source.name, "date": DATE, "n": n, "seed": seed,
            "transactions": trx, "changes_written": changes,
            "changes_expected": len(night.expected),
            "archives": {k: len(v) for k, v in night.archives.items()},
            "bytes": sum(len(v) for v in night.archives.values()),
            "generate_seconds": round(time.monotonic() - t0, 2)}
    del night, gen
    # the config must point at the final directory: rewrite after the rename
    if root.exists():
        shutil.rmtree(root)
    tmp.rename(root)
    (root / "sources.yaml").write_text(yaml.safe_dump({"sources": [src]}))
    info["root"] = str(root)
    info_path.write_text(json.dumps(info, indent=1))
    log(f"bench: {fmt}: {info['bytes']:,} bytes in {len(info['archives'])} archives, "
        f"{changes:,} changes, {info['generate_seconds']}s")
    return info


def archives(info: dict) -> list[Path]:
    """The night's archive paths, in the format's archive order."""
    from decoders import get

    fmt = get(info["format"])
    land = Path(info["root"]) / "landing" / info["source"] / info["date"]
    return sorted((p for p in land.iterdir() if p.is_file()),
                  key=lambda p: fmt.archive_sort_key(p.name))


def ensure_big_night(fmt: str, n: int, parts: int, seed: int = 0, cache: Path = CACHE,
                     log=print) -> dict:
    """A night of about ``n`` changes written as ``parts`` consecutive generator nights of
    ``n / parts`` each, all dated ``DATE`` and put into one landing night (archive names
    prefixed ``pNN_`` so that name order is write order). One generator writes every part, so
    transaction ids continue and transactions open at the end of a part commit in the next;
    memory stays that of one part (a 10M-change night in one piece would not fit).
    Only for formats whose archives sort by name (not informix)."""
    if fmt == "informix":
        raise ValueError("informix archives sort by uniqid, not by name: use ensure_night")
    if parts <= 1:
        return ensure_night(fmt, n, seed, cache, log)
    root = Path(cache) / f"{fmt}-n{n}-p{parts}-s{seed}-{_code_hash(fmt)}"
    info_path = root / "night.json"
    if info_path.is_file():
        return _cached(root, fmt)
    from decoders import get

    from dblog.config import load_config

    src = sample_sources()[fmt]
    tmp = root.with_name(root.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    (tmp / "sources.yaml").write_text(yaml.safe_dump({"sources": [src]}))
    source = load_config(tmp / "sources.yaml").source(src["name"])
    trx = max(1, round(n / parts / mean_changes(fmt)))
    gen = get(fmt).Synth(source.name, catalog=source.catalog(), options=source.options,
                         seed=seed, timezone=source.timezone)
    land = tmp / "landing" / source.name / DATE
    land.mkdir(parents=True)
    t0 = time.monotonic()
    archives, changes, expected = {}, 0, 0
    for p in range(parts):
        log(f"bench: generating {fmt} part {p + 1}/{parts}: {trx} transactions ...")
        night = gen.night(_dt.date.fromisoformat(DATE), trx)
        for name, data in night.archives.items():
            (land / f"p{p:02d}_{name}").write_bytes(data)
            archives[f"p{p:02d}_{name}"] = len(data)
        changes += sum(len(t.changes) for t in night.trxs)
        expected += len(night.expected)
        del night
    info = {"format": fmt, "source": source.name, "date": DATE, "n": n, "parts": parts,
            "seed": seed, "transactions": trx * parts, "changes_written": changes,
            "changes_expected": expected, "archives": archives,
            "bytes": sum(archives.values()), "generate_seconds": round(time.monotonic() - t0, 2)}
    del gen
    if root.exists():
        shutil.rmtree(root)
    tmp.rename(root)
    (root / "sources.yaml").write_text(yaml.safe_dump({"sources": [src]}))
    info["root"] = str(root)
    info_path.write_text(json.dumps(info, indent=1))
    log(f"bench: {fmt}: {info['bytes']:,} bytes in {len(archives)} archives, {changes:,} changes, "
        f"{info['generate_seconds']}s")
    return info
