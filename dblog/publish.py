"""Publish: move a validated run from staging into the data root, atomically.

``published/`` is a symbolic link to one immutable snapshot ``.published/<version>/``
holding ``changes/``, ``transactions/`` and ``tables/``. A publish builds the next snapshot
(hard links to every file of the current one except the partitions this run replaces,
plus the run's staged partitions), then swaps the link with one ``rename()``: a reader
sees the old night or the new night, never a mix, even when the process is killed
half-way (the half-built snapshot is simply never linked, and is removed later).

``quarantine/``, ``audit/`` and ``state/<source>/<date>/`` are replaced partition by
partition (directory renames) before the swap; a rerun of the date replaces them again.
Publishes are serialised by a lock file (and by an Airflow pool in the DAG).

Nothing is moved out of the run's staging directory: every published file is a hard link
to the staged one (a copy across file systems). So a publish that was killed half-way can
simply be run again on the same run (it rebuilds the snapshot from scratch); until then,
``published/`` shows the previous night, while ``quarantine/``, ``audit/`` and ``state/`` may
already show the new one (they are written before the swap, never after it, so that a
published night always has its state).

``DBLOG_PUBLISH_FAILPOINT=<step>`` makes the process kill itself (SIGKILL) at that step;
the tests use it to prove the above. Steps: see ``FAILPOINTS``.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import json
import errno
import os
import shutil
import signal
import uuid
from contextlib import contextmanager
from pathlib import Path

from .mirror import MIRROR, NET_CHANGES, mirror_nights, retained
from .order import AUDIT, CHANGES, QUARANTINE, STATE, TRANSACTIONS
from .paths import DataRoot
from .stage import CARRY_DIR, HELD_DIR, SEQ_FILE, state_dates

TABLES = "tables"
KEEP_VERSIONS = 3
PUBLISHED_MARKER = "_PUBLISHED.json"
LINK_PREFIX = ".published-link-"
FAILPOINT_ENV = "DBLOG_PUBLISH_FAILPOINT"
FAILPOINTS = ("quarantine_audit", "state", "snapshot_previous", "snapshot_changes",
              "snapshot_tables", "marker", "link", "swapped")


class PublishError(RuntimeError):
    pass


@contextmanager
def publish_lock(root: DataRoot):
    root.versions.mkdir(parents=True, exist_ok=True)
    with open(root.versions / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def current_version(root: DataRoot) -> Path | None:
    link = root.published
    if link.is_symlink():
        return (link.parent / os.readlink(link)).resolve()
    if link.exists():
        raise PublishError(f"{link} exists but is not the link that dblog manages; move it away")
    return None


def _replaced(rel: Path, sources: set[str], date: str) -> bool:
    """Is the file at ``rel`` (relative to a snapshot) in a partition this run replaces?"""
    parts = rel.parts
    if f"date={date}" not in parts:
        return False
    if parts[0] in (CHANGES, TRANSACTIONS, NET_CHANGES):
        return any(p in {f"source={s}" for s in sources} for p in parts)
    if parts[0] in (TABLES, MIRROR):
        return len(parts) > 1 and parts[1] in sources
    return False


def _failpoint(step: str) -> None:
    """Die here, as if killed, when ``$DBLOG_PUBLISH_FAILPOINT`` names this step (tests)."""
    if os.environ.get(FAILPOINT_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        shutil.copy2(src, dst)


def _link_tree(src: Path, dst: Path) -> None:
    """Hard-link every file under ``src`` to the same place under ``dst`` (``src`` untouched)."""
    for dirpath, _dirs, files in os.walk(src):
        target = dst / Path(dirpath).relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        for f in files:
            _link(Path(dirpath) / f, target / f)


def _fresh(path: Path) -> Path:
    """``path``, emptied of what a killed earlier attempt may have left there."""
    if path.exists():
        shutil.rmtree(path)
    return path


def _replace_dir(new: Path, target: Path) -> None:
    """Put directory ``new`` at ``target``, replacing what was there."""
    target.parent.mkdir(parents=True, exist_ok=True)
    trash = None
    if target.exists():
        trash = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
        os.rename(target, trash)
    os.rename(new, target)
    if trash is not None:
        shutil.rmtree(trash, ignore_errors=True)


def _partitions(base: Path):
    """(source, date, dir) of ``source=S/date=D`` partitions staged under ``base``."""
    if not base.is_dir():
        return
    for sdir in sorted(base.glob("source=*")):
        for ddir in sorted(sdir.glob("date=*")):
            yield sdir.name.split("=", 1)[1], ddir.name.split("=", 1)[1], ddir


def check_renumbering(root: DataRoot, manifest: dict, summary: dict, sources: set[str]) -> None:
    """A rerun of an earlier night must not change the numbering later nights continue."""
    date = manifest["date"]
    for name in sorted(sources):
        later = [d for d in state_dates(root, name) if d > date]
        own = root.state(name) / date / SEQ_FILE
        if later and own.is_file():
            before = json.loads(own.read_text())["last_commit_seq"]
            after = summary[name]["last_commit_seq"]
            if before != after:
                raise PublishError(
                    f"{name}: rerunning {date} would end its commit_seq at {after}, but it ended at "
                    f"{before} and later nights ({', '.join(later)}) continue from there; rerun "
                    f"{date} and every later night together (a backfill from {date})")


def publish(root: DataRoot, manifest: dict, run_dir: Path, summary: dict,
            only_sources: list[str] | None = None) -> Path:
    """Publish the run (or only ``only_sources`` of it: the DAG publishes per source)."""
    run_dir = Path(run_dir)
    date = manifest["date"]
    sources = {s["name"] for s in manifest["sources"]}
    if only_sources:
        unknown = set(only_sources) - sources
        if unknown:
            raise PublishError(f"sources {sorted(unknown)} are not part of run {manifest['run_id']}")
        sources = set(only_sources)
    with publish_lock(root):
        check_renumbering(root, manifest, summary, sources)
        # 1. quarantine and audit partitions
        for dataset, target in ((QUARANTINE, root.quarantine), (AUDIT, root.audit)):
            staged = {(s, d): p for s, d, p in _partitions(run_dir / dataset)}
            for s in sorted(sources):
                dest = target / f"source={s}" / f"date={date}"
                if (s, date) in staged:
                    tmp = _fresh(dest.parent / f".date={date}.new")
                    _link_tree(staged[(s, date)], tmp)
                    _replace_dir(tmp, dest)
                elif dest.exists():
                    shutil.rmtree(dest)
        _failpoint("quarantine_audit")
        # 2. state for the next night
        for s in sorted(sources):
            new_state = _fresh(run_dir / STATE / "publish" / s)
            new_state.mkdir(parents=True)
            for sub in (HELD_DIR, CARRY_DIR):
                staged = run_dir / STATE / sub / f"source={s}"
                if staged.is_dir():
                    _link_tree(staged, new_state / sub)
            shutil.copy2(run_dir / STATE / "seq" / s / SEQ_FILE, new_state / SEQ_FILE)
            _replace_dir(new_state, root.state(s) / date)
        _failpoint("state")
        # 3. the next snapshot of published/, then the atomic swap
        current = current_version(root)
        version = root.versions / (
            _dt.datetime.now(_dt.timezone.utc).strftime("v%Y%m%dT%H%M%S%f") + "_" + uuid.uuid4().hex[:6])
        version.mkdir(parents=True)
        expired = _expired_mirrors(current, manifest, run_dir, sources)
        if current is not None:
            for dirpath, _dirs, files in os.walk(current):
                rel_dir = Path(dirpath).relative_to(current)
                for f in files:
                    rel = rel_dir / f
                    if rel.parts and rel.parts[0] in (CHANGES, TRANSACTIONS, TABLES, MIRROR,
                                                      NET_CHANGES) \
                            and not _replaced(rel, sources, date) and not expired(rel):
                        (version / rel_dir).mkdir(parents=True, exist_ok=True)
                        os.link(Path(dirpath) / f, version / rel)
        _failpoint("snapshot_previous")
        for dataset in (CHANGES, TRANSACTIONS, NET_CHANGES):
            for s, d, p in _partitions(run_dir / dataset):
                if s in sources:
                    _link_tree(p, version / dataset / f"source={s}" / f"date={d}")
            _failpoint("snapshot_changes")
        for dataset in (TABLES, MIRROR):
            tables = run_dir / dataset
            for s in sorted(sources):
                for tdir in sorted((tables / s).glob("*/date=*")):
                    if not expired(Path(dataset) / tdir.relative_to(tables)):
                        _link_tree(tdir, version / dataset / tdir.relative_to(tables))
        _failpoint("snapshot_tables")
        for dataset in (CHANGES, TRANSACTIONS, TABLES):
            (version / dataset).mkdir(exist_ok=True)
        (version / PUBLISHED_MARKER).write_text(json.dumps(
            {"run_id": manifest["run_id"], "date": date, "sources": sorted(sources),
             "previous": current.name if current else None}))
        _fsync_tree(version)
        _failpoint("marker")
        tmp = root.root / f"{LINK_PREFIX}{uuid.uuid4().hex[:8]}"
        os.symlink(os.path.relpath(version, root.root), tmp)
        _failpoint("link")
        os.replace(tmp, root.published)  # the atomic moment
        _fsync_dir(root.root)
        _failpoint("swapped")
        _collect_garbage(root, version)
    return version


def _expired_mirrors(current: Path | None, manifest: dict, run_dir: Path, sources: set[str]):
    """A predicate on snapshot-relative paths: a mirror folder of a night past its source's
    ``mirror_retention`` (the last N nights that built a mirror are kept)."""
    keep: dict[str, set[str]] = {}
    for s in manifest["sources"]:
        if s["name"] not in sources:
            continue
        nights = set(mirror_nights(current, s["name"])) if current is not None else set()
        if (Path(run_dir) / NET_CHANGES / f"source={s['name']}" / f"date={manifest['date']}").is_dir():
            nights.add(manifest["date"])
        keep[s["name"]] = set(retained(sorted(nights), int(s.get("mirror_retention") or 7)))

    def expired(rel: Path) -> bool:
        parts = rel.parts
        if len(parts) < 4 or parts[0] != MIRROR or parts[1] not in keep:
            return False
        return parts[3].startswith("date=") and parts[3][5:] not in keep[parts[1]]
    return expired


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(path: Path) -> None:
    """Make the snapshot's directory entries durable before the link points at it."""
    for dirpath, _dirs, _files in os.walk(path):
        _fsync_dir(Path(dirpath))


def _collect_garbage(root: DataRoot, keep: Path) -> None:
    """Keep the current snapshot and the ones it replaced (readers that resolved an older
    link keep working a while), up to ``KEEP_VERSIONS`` in all; drop every other snapshot,
    i.e. older ones and half-built ones left by a killed publish, and stray temporary links."""
    chain, v = [], keep
    while v is not None and len(chain) < KEEP_VERSIONS and (v / PUBLISHED_MARKER).is_file():
        chain.append(v.name)
        try:
            prev = json.loads((v / PUBLISHED_MARKER).read_text()).get("previous")
        except (OSError, ValueError):
            prev = None
        v = root.versions / prev if prev else None
    for p in root.versions.iterdir():
        if p.is_dir() and p.name.startswith("v") and p.name not in chain and p != keep:
            shutil.rmtree(p, ignore_errors=True)
    for p in root.root.glob(LINK_PREFIX + "*"):
        if p.is_symlink():
            p.unlink()
