"""Stage: find the night's archives and freeze everything the run needs into its manifest.

The manifest (``staging/<run_id>/manifest.json``) holds, per source: its configuration,
its catalog, the archives of the night, the state left by the latest earlier night (held
transactions, decoder carry, last ``commit_seq``). Every later stage reads only the
manifest and the data root, so the stages can run in different processes and machines.
"""

from __future__ import annotations

import json
from pathlib import Path

from decoders import get as get_format

from .config import Config, Source
from .paths import DataRoot, check_date

MANIFEST = "manifest.json"
SEQ_FILE = "seq.json"
CARRY_DIR = "carry"
HELD_DIR = "held"


def state_dates(root: DataRoot, source: str) -> list[str]:
    base = root.state(source)
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if p.is_dir() and (p / SEQ_FILE).is_file())


def previous_state(root: DataRoot, source: str, date: str) -> Path | None:
    """State left by the latest night before ``date`` (so a rerun reads what the first run
    read); from the published per-source index, at a cost that does not grow with history."""
    from .paths import previous_state as published_previous_state

    return published_previous_state(root, source, date)


def read_seq(state_dir: Path | None) -> int:
    if state_dir is None:
        return 0
    return int(json.loads((state_dir / SEQ_FILE).read_text())["last_commit_seq"])


def read_carry(state_dir: Path | None) -> dict | None:
    """The decoder carry left by the previous night (sequential formats)."""
    if state_dir is None or not (state_dir / CARRY_DIR).is_dir():
        return None
    import pyarrow.parquet as pq

    files = sorted((state_dir / CARRY_DIR).rglob("*.parquet"))
    for f in files:
        table = pq.read_table(f, columns=["message"])
        for msg in table.column("message").to_pylist():
            if msg:
                return json.loads(msg)
    return None


def list_archives(root: DataRoot, source: str, date: str) -> list[dict]:
    night = root.landing_night(source, date)
    if not night.is_dir():
        return []
    out = []
    for p in sorted(night.rglob("*")):
        if p.is_file() and not p.name.startswith("."):
            out.append({"file": str(p.relative_to(root.landing)), "path": str(p),
                        "size": p.stat().st_size})
    return out


def stage(config: Config, sources: list[Source], root: DataRoot, date: str, run_id: str) -> dict:
    check_date(date)
    run_dir = root.staging(run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for src in sources:
        catalog = src.catalog()
        fmt = get_format(src.format)
        archives = list_archives(root, src.name, date)
        archives.sort(key=lambda a: fmt.archive_sort_key(Path(a["file"]).name))
        prev = previous_state(root, src.name, date)
        entries.append({
            **src.to_json(),
            "catalog": catalog.to_json(),
            "archives": archives,
            "prev_state": str(prev) if prev else None,
            "prev_held": str(prev / HELD_DIR) if prev and (prev / HELD_DIR).is_dir() else None,
            "seq_base": read_seq(prev),
            "carry": read_carry(prev),
        })
    manifest = {"run_id": run_id, "date": date, "data_root": str(root.root),
                "config": str(config.path), "sources": entries}
    tmp = run_dir / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1))
    tmp.replace(run_dir / MANIFEST)
    return manifest


def load_manifest(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / MANIFEST).read_text())
