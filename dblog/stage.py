"""Stage: find the night's archives and freeze everything the run needs into its manifest.

The manifest (``staging/<run_id>/manifest.json``) holds, per source: its configuration,
its catalog, the archives of the night (and, under ``landing``, every other file of the
night's landing folder: ignored, refused, duplicate; see ``dblog/landing.py``), the state left by the latest earlier night (held
transactions, decoder carry, last ``commit_seq``). Every later stage reads only the
manifest and the data root, so the stages can run in different processes and machines.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from decoders import get as get_format

from .config import Config, Source
from .landing import (ARCHIVE, ArchiveIndex, Entry, accepted, find_duplicates, scan,
                      stage_night_archives)
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


def landing_entries(root: DataRoot, fmt, source: str, date: str, accept_loss=()) -> list[Entry]:
    """Every file of the source's night as an entry, archives in the format's order and
    told apart from duplicates (tonight's or of earlier published nights)."""
    entries = scan(root.root, source, date)
    archives = [e for e in entries if e.status == ARCHIVE]
    archives.sort(key=lambda e: fmt.archive_sort_key(PurePosixPath(e.file).name))
    others = [e for e in entries if e.status != ARCHIVE]
    index = ArchiveIndex(root.root, source, date)
    prev = previous_state(root, source, date)
    if prev is not None:
        index.heal(prev.name)
    find_duplicates(archives, index)
    for e in archives:
        e.accept_loss = e.status == ARCHIVE and accepted(e.file, accept_loss)
    return archives + others


def stage(config: Config, sources: list[Source], root: DataRoot, date: str, run_id: str,
          accept_loss: list[str] | tuple[str, ...] = ()) -> dict:
    """Write the run's manifest (and each source's list of archives into the run's state).
    ``accept_loss``: shell patterns of archive names whose loss (unreadable, decoder crash)
    the operator accepts."""
    check_date(date)
    run_dir = root.staging(run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    accept_loss = [str(p) for p in accept_loss]
    entries_out = []
    for src in sources:
        catalog = src.catalog()
        fmt = get_format(src.format)
        entries = landing_entries(root, fmt, src.name, date, accept_loss)
        archives = [e.to_json() for e in entries if e.status == ARCHIVE]
        stage_night_archives(run_dir, src.name, archives, root.root)
        prev = previous_state(root, src.name, date)
        entries_out.append({
            **src.to_json(),
            "catalog": catalog.to_json(),
            "archives": archives,
            "landing": [e.to_json() for e in entries if e.status != ARCHIVE],
            "prev_state": str(prev) if prev else None,
            "prev_held": str(prev / HELD_DIR) if prev and (prev / HELD_DIR).is_dir() else None,
            "seq_base": read_seq(prev),
            "carry": read_carry(prev),
        })
    manifest = {"run_id": run_id, "date": date, "data_root": str(root.root),
                "config": str(config.path), "accept_loss": accept_loss, "sources": entries_out}
    tmp = run_dir / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1))
    tmp.replace(run_dir / MANIFEST)
    return manifest


def load_manifest(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / MANIFEST).read_text())
