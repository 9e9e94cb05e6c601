"""Publish: make a validated run visible, every dataset and the state together, atomically.

Layout (SPEC section 5, "Publishing"): ``published`` is a symbolic link to one version
``.published/v<seq>/``, a plain directory tree (real directories, hard-linked files) that
holds every registered dataset (``dblog/datasets.py``: changes, transactions, tables,
quarantine, audit, and whatever other slices register) and ``state/``::

    published -> .published/v00000042/
        changes/source=S/date=D/...     transactions/...   quarantine/...   audit/...
        tables/S/SCHEMA.TABLE/date=D/...                   (every registered dataset)
        state/S/D/{held,carry,...}/ seq.json night.json    state/S/_index.json
        _PUBLISHED.json                                    (seq, run, date, sources)

One publish = one ``rename()`` of a new link over ``published``: a reader that resolves the
link sees the old version or the new one, whole; a publish killed at any point leaves the
current version untouched and can be run again on the same run.

**Cost O(night).** Readers may hold the current version and the ``KEEP_VERSIONS - 1``
before it; a fourth tree, ``.published/next``, is the current version again, caught up by
``tidy`` after the previous publish. A publish renames ``next`` to ``.published/building``
and adds its run's partitions (and takes out what it replaces); it touches the paths of
one night. Without a ``next`` (tidy did not run, or was killed) it builds in the oldest
version no reader holds and first re-links, from the current version, the paths the
publishes it missed changed (their change lists are kept in ``.published/log/<seq>.json``):
the paths of at most ``KEEP_VERSIONS`` nights. Nothing lists a directory whose size grows
with the number of nights. Readers see plain directories (no symbolic links inside a
version), so every reader's hive partition discovery works as on any Parquet folder.

**A publish deletes no folder; tidy does, after the swap** (as Delta's VACUUM or Iceberg's
expire_snapshots run after their commits). Paths a publish takes out of the version it
builds (a rerun's leftovers, nights past a dataset's retention, paths it replaces) are
renamed into ``.published/trash/`` (one ``rename`` each). ``tidy`` (see there) then
deletes the trash, catches the oldest version no reader holds up into ``next``, and drops
old change lists. Readers that resolved an older version keep it, unchanged, for the next
``KEEP_VERSIONS - 1`` publishes; then it is renamed away for rebuilding (such a reader
gets "no such file", never a changed tree). Files are hard links: nothing a version still
names is ever freed. If tidy never runs, publishes stay correct and cost the catch-up of
``KEEP_VERSIONS`` nights, and the trash keeps every removed folder (the disk a dataset's
retention would free is not freed).

**Kill safety.** Before it changes anything in ``building``, a publish records there
(``_BUILDING.json``) every path it is about to touch; a later attempt (the same run again,
or another run) re-syncs those paths from the current version first. The version counter,
the log entry and the ring slot are all derived from the current version at the start of
each attempt, so a killed attempt leaves nothing that a later one trusts.

**State and the per-source index.** ``state/<S>/<D>/`` is what night D leaves for the next
night (held transactions, decoder carry, ``seq.json``) plus ``night.json``: the run, the
night whose state it read (``prev``, kept from its first run so that a rerun reads the
same), the published night just before it in date order (``before``), and the paths it
published (so that a rerun removes what it no longer publishes). ``state/<S>/_index.json``
holds the latest night and, for datasets with a ``retention``, the nights kept. Finding
"the state of the latest earlier night" reads one or two of these small files
(``previous_state``), whatever the history.

**Durability, cheaply.** Everything the new version names is made durable before the swap
with one ``syncfs()`` of the data root's file system (Linux; elsewhere one ``fsync`` per
new file and per changed directory): one journal commit instead of one per file and
directory. A ``syncfs`` also writes out whatever else is dirty on that file system (e.g.
Spark's local directories when they share it); ``DBLOG_PUBLISH_SYNC=fsync`` makes the
publish fsync path by path instead.

Publishes are serialised by a lock file (and by an Airflow pool in the DAG).
``DBLOG_PUBLISH_FAILPOINT=<step>`` makes the process kill itself (SIGKILL) at that step;
the tests use it to prove the above. Steps: see ``FAILPOINTS`` and ``TIDY_FAILPOINTS``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import datetime as _dt
import errno
import fcntl
import functools
import json
import os
import re
import shutil
import signal
import uuid
from contextlib import contextmanager
from pathlib import Path

from . import datasets as D
from .paths import (INDEX_FILE, NIGHT_FILE, DataRoot, night_record, published_dates,
                    read_index)
from .stage import SEQ_FILE

KEEP_VERSIONS = 3          # version directories in the ring (current + 2 older ones)
LOG_KEEP = 32              # change lists kept in .published/log/
DEFAULT_RETENTION = 7      # nights kept of a dataset with a retention, when the source says nothing
PUBLISHED_MARKER = "_PUBLISHED.json"
BUILDING_FILE = "_BUILDING.json"
BUILDING = "building"
STATE = "state"
LINK_PREFIX = ".published-link-"
TRASH = "trash"
NEXT = "next"              # .published/next: caught up with the current version by tidy
LEGACY_TOP = ("quarantine", "audit", "state")     # top-level folders of an older layout
FAILPOINT_ENV = "DBLOG_PUBLISH_FAILPOINT"
FAILPOINTS = ("slot", "intent", "catch_up", "datasets", "state", "index", "marker", "fsync",
              "log", "renamed", "link", "swapped")
TIDY_FAILPOINTS = ("tidy_slot", "tidy_intent", "tidy_catch_up", "tidy_synced", "tidy_next",
                   "tidy_trash", "tidy_log")
VERSION_RE = re.compile(r"^v(\d{8})$")


class PublishError(RuntimeError):
    pass


def version_name(seq: int) -> str:
    return f"v{seq:08d}"


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
    """The version directory ``published`` points at (None before the first publish)."""
    link = root.published
    if link.is_symlink():
        return (link.parent / os.readlink(link)).resolve()
    if link.exists():
        raise PublishError(f"{link} exists but is not the link that dblog manages; move it away")
    return None


def _version_seq(version: Path | None) -> int | None:
    """The version number of a version directory (None: not one, e.g. an older layout)."""
    if version is None:
        return 0
    m = VERSION_RE.match(version.name)
    if not m or not (version / PUBLISHED_MARKER).is_file():
        return None
    return int(m.group(1))


def _failpoint(step: str) -> None:
    """Die here, as if killed, when ``$DBLOG_PUBLISH_FAILPOINT`` names this step (tests)."""
    if os.environ.get(FAILPOINT_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)


# ----------------------------------------------------------------- file system helpers

class _Writer:
    """Changes inside the version being built; remembers what must be made durable."""

    def __init__(self, top: Path, trash: Path | None = None):
        self.top = top
        self.trash = trash           # removed trees go here (deleted after the swap)
        self.dirs: set[Path] = set()
        self.files: list[Path] = []

    def mkdirs(self, path: Path) -> None:
        missing = []
        p = path
        while not p.exists():
            missing.append(p)
            p = p.parent
        for p in reversed(missing):
            p.mkdir()
            self.dirs.add(p.parent)
        self.dirs.add(path)

    def remove(self, rel: str) -> None:
        """Remove ``rel`` (file or tree) and the directories it leaves empty (up to a dataset)."""
        path = self.top / rel
        if path.is_dir() and not path.is_symlink():
            if self.trash is not None:       # one rename; the files go after the swap
                if not self.trash.is_dir():
                    self.trash.mkdir(parents=True)
                os.rename(path, self.trash / uuid.uuid4().hex)
            else:
                shutil.rmtree(path)
        elif os.path.lexists(path):
            path.unlink()
        else:
            return
        self.dirs.add(path.parent)
        parent = path.parent
        while parent != self.top and parent.parent != self.top:
            try:
                parent.rmdir()
            except OSError:
                break
            self.dirs.add(parent.parent)
            parent = parent.parent

    def link_tree(self, src: Path, rel: str, durable_files: bool) -> None:
        """``rel`` := a copy of file or directory ``src`` (the files of a directory are hard
        links: Spark never rewrites a Parquet file in place; a single file is copied)."""
        self.remove(rel)
        dst = self.top / rel
        if src.is_file():       # small documents (seq.json, indexes): copied, never shared
            self.mkdirs(dst.parent)
            shutil.copy2(src, dst)
            self.files.append(dst)
            return
        for dirpath, _dirs, files in os.walk(src):
            target = dst / Path(dirpath).relative_to(src)
            self.mkdirs(target)
            for f in files:
                _link(Path(dirpath) / f, target / f)
                if durable_files:
                    self.files.append(target / f)

    def write_json(self, rel: str, doc: dict) -> None:
        dst = self.top / rel
        self.mkdirs(dst.parent)
        tmp = dst.parent / f".{dst.name}.{uuid.uuid4().hex[:8]}"
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True))
        os.replace(tmp, dst)   # never modify a (possibly hard-linked) file in place
        self.files.append(dst)

    def sync(self) -> None:
        """Make every change durable: one ``syncfs`` of the file system when the platform
        has it, else an ``fsync`` per new file and changed directory."""
        if _syncfs(self.top):
            return
        for f in self.files:
            _fsync_path(f)
        for d in sorted(self.dirs, key=lambda p: -len(p.parts)):
            if d.is_dir():
                _fsync_path(d)


@functools.cache
def _syncfs_call():
    """libc's ``syncfs`` (None when this platform has none)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True) if name else None
    except OSError:
        return None
    return getattr(libc, "syncfs", None)


def _syncfs(path: Path) -> bool:
    """``syncfs(2)`` on the file system holding ``path``: True when done, False when this
    platform has no ``syncfs`` (the caller then fsyncs file by file). An error of the call
    itself (e.g. EIO: data could not be written) is raised, never ignored."""
    if os.environ.get("DBLOG_PUBLISH_SYNC") == "fsync":     # path by path (module docstring)
        return False
    fn = _syncfs_call()
    if fn is None:
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        if fn(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs({path}): {os.strerror(err)}")
    finally:
        os.close(fd)
    return True


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
            raise
        shutil.copy2(src, dst)


def _fsync_path(path: Path) -> None:
    """fsync a file or a directory."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# ----------------------------------------------------------------- what a run publishes

def _retention(dataset: D.Dataset, entry: dict) -> int:
    value = entry.get(dataset.retention)
    if value is None:
        value = (entry.get("options") or {}).get(dataset.retention)
    return int(value) if value is not None else DEFAULT_RETENTION


def _staged_paths(run_dir: Path, source: str, date: str) -> dict[str, Path]:
    """{path in a version: staged file or folder} of every registered dataset, for one source."""
    out: dict[str, Path] = {}
    for ds in D.published():
        base = run_dir / ds.name
        if ds.layout == D.NIGHT:
            p = base / f"source={source}" / f"date={date}"
            if p.is_dir():
                out[f"{ds.name}/source={source}/date={date}"] = p
        else:
            for p in sorted((base / source).glob(f"*/date={date}")):
                if p.is_dir():
                    out[f"{ds.name}/{source}/{p.parent.name}/date={date}"] = p
    return out


def _dataset_of(rel: str) -> str:
    return rel.split("/", 1)[0]


class _Plan:
    """Everything one publish changes in the version: {rel: source path or None (remove)}
    for the data, plus JSON documents to write."""

    def __init__(self):
        self.links: dict[str, Path | None] = {}
        self.docs: dict[str, dict] = {}

    @property
    def paths(self) -> set[str]:
        return set(self.links) | set(self.docs)


def _plan(current: Path | None, manifest: dict, run_dir: Path, sources: list[str],
          seq: int) -> _Plan:
    date, run_id = manifest["date"], manifest["run_id"]
    entries = {e["name"]: e for e in manifest["sources"]}
    plan = _Plan()
    for s in sources:
        staged = _staged_paths(run_dir, s, date)
        old = night_record(current, s, date) if current is not None else None
        for rel in (old or {}).get("paths", []):
            plan.links.setdefault(rel, None)         # a rerun: what it no longer publishes goes
        for rel, src in staged.items():
            plan.links[rel] = src
        # the night's state
        sdir = f"{STATE}/{s}/{date}"
        plan.links[sdir] = None
        st = run_dir / STATE
        subs = sorted(p.name for p in st.iterdir() if p.is_dir()) if st.is_dir() else []
        for sub in subs:
            if sub in ("seq", "publish"):
                continue
            part = st / sub / f"source={s}"
            if part.is_dir():
                plan.links[f"{sdir}/{sub}"] = part
        seq_file = st / "seq" / s / SEQ_FILE
        if not seq_file.is_file():
            raise PublishError(f"{seq_file} is missing: run {run_id} was not ordered")
        plan.links[f"{sdir}/{SEQ_FILE}"] = seq_file
        # where the night sits among the published nights of the source
        index = (read_index(current, s) if current is not None else None) or {}
        latest = index.get("latest")
        before, after = _neighbours(current, s, date, latest)
        prev = old["prev"] if old else before
        plan.docs[f"{sdir}/{NIGHT_FILE}"] = {
            "date": date, "run_id": run_id, "version": seq, "prev": prev, "before": before,
            "paths": sorted(staged)}
        if after is not None:                        # a night filled in before a later one
            rec = night_record(current, s, after) or {"date": after}
            if rec.get("before") != date:
                plan.docs[f"{STATE}/{s}/{after}/{NIGHT_FILE}"] = {**rec, "before": date}
        # retention
        retained = dict(index.get("retained") or {})
        for ds in D.published():
            if ds.retention is None:
                continue
            keep = _retention(ds, entries[s])
            dates = set(retained.get(ds.name) or [])
            if any(_dataset_of(rel) == ds.name for rel in staged):
                dates.add(date)
            else:
                dates.discard(date)
            ordered = sorted(dates)
            for gone in ordered[:-keep] if keep > 0 else ordered:
                rec = night_record(current, s, gone) if gone != date else {"paths": list(staged)}
                for rel in (rec or {}).get("paths", []):
                    if _dataset_of(rel) == ds.name:
                        plan.links[rel] = None
            retained[ds.name] = ordered[-keep:] if keep > 0 else []
        plan.docs[f"{STATE}/{s}/{INDEX_FILE}"] = {
            "source": s, "latest": max(filter(None, [latest, date])), "version": seq,
            "retained": retained}
    return plan


def _neighbours(current: Path | None, source: str, date: str, latest: str | None):
    """(the published night just before ``date``, the one just after it), walking back from
    the latest night: one step for a new night, a few for a night filled in behind."""
    if current is None or latest is None:
        return None, None
    after, d, seen = None, latest, 0
    while d is not None and d >= date:
        if d == date:
            rec = night_record(current, source, d) or {}
            return rec.get("before"), after
        after = d
        d = (night_record(current, source, d) or {}).get("before")
        seen += 1
        if seen > 100_000:
            raise PublishError(f"{source}: the chain of published nights loops at {d}")
    return d, after


def check_renumbering(root: DataRoot, manifest: dict, summary: dict, sources) -> None:
    """A rerun of an earlier night must not change the numbering later nights continue."""
    date = manifest["date"]
    for name in sorted(sources):
        later = sorted(published_dates(root, name, after=date))
        own = root.state(name) / date / SEQ_FILE
        if later and own.is_file():
            before = json.loads(own.read_text())["last_commit_seq"]
            after = summary[name]["last_commit_seq"]
            if before != after:
                raise PublishError(
                    f"{name}: rerunning {date} would end its commit_seq at {after}, but it ended at "
                    f"{before} and later nights ({', '.join(later)}) continue from there; rerun "
                    f"{date} and every later night together (a backfill from {date})")


# ----------------------------------------------------------------- the ring of versions

def _take_slot(root: DataRoot, current: Path | None, seq: int) -> Path:
    """The directory the next version is built in, named ``building`` (never the current one):
    a killed attempt's ``building``, else the ``next`` that tidy caught up, else (tidy did
    not run) the oldest version readers no longer hold, else (ring not full) a new one."""
    vdir = root.versions
    building = vdir / BUILDING
    if building.is_dir():
        return building                               # a killed attempt: its intent is inside
    if (vdir / NEXT).is_dir():
        os.rename(vdir / NEXT, building)
        _fsync_path(vdir)
        return building
    candidates = []
    for p in vdir.iterdir():
        m = VERSION_RE.match(p.name)
        if m and p.is_dir() and (current is None or p.resolve() != current):
            candidates.append((int(m.group(1)), p))
    leftovers = [p for n, p in candidates if n >= seq]     # renamed but never linked
    versions = sorted(candidates)
    if leftovers:
        pick = leftovers[0]
    elif len(versions) + (current is not None) >= KEEP_VERSIONS and versions:
        pick = versions[0][1]                          # the oldest version
    else:
        building.mkdir()
        _fsync_path(vdir)
        return building
    os.rename(pick, building)
    _fsync_path(vdir)
    return building


def _outermost(paths: set[str], covered: set[str]) -> list[str]:
    """``paths`` without those inside another one of them or inside a ``covered`` path."""
    out: list[str] = []
    taken = set(covered)
    for rel in sorted(paths, key=lambda r: r.count("/")):      # parents first
        parts = rel.split("/")
        if any("/".join(parts[:i]) in taken for i in range(1, len(parts) + 1)):
            continue
        out.append(rel)
        taken.add(rel)
    return sorted(out)


def _log_paths(root: DataRoot, base: int, upto: int) -> set[str] | None:
    """Paths changed by the publishes ``base+1 .. upto`` (None: some change list is gone)."""
    out: set[str] = set()
    for n in range(base + 1, upto + 1):
        doc = _read_json(root.versions / "log" / f"{n:08d}.json")
        if doc is None or doc.get("seq") != n or doc.get("full"):
            return None                              # gone, or a version rebuilt whole
        out.update(doc["paths"])
    return out


def _base_of(slot: Path) -> int:
    """The version a slot holds when none of its paths were touched (0: empty or unknown)."""
    intent = _read_json(slot / BUILDING_FILE)
    if intent is not None:
        return int(intent["base"])
    marker = _read_json(slot / PUBLISHED_MARKER)
    return int(marker["seq"]) if marker and "seq" in marker else 0


def _legacy_parts(root: DataRoot, current: Path | None) -> list[tuple[str, Path]]:
    """An older layout's data (a snapshot without version number, top-level quarantine/,
    audit/ and state/): (where it goes in a version, where it is). The current version's
    folders come last: when a migration was killed after its swap, they hold what it
    published on top of the old folders and win."""
    parts = []
    for name in LEGACY_TOP:
        old = root.root / name
        if old.is_dir() and not old.is_symlink():
            parts.append((name, old))
    if current is not None:
        parts += [(p.name, p) for p in sorted(current.iterdir())
                  if p.is_dir() and not p.name.startswith((".", "_"))]
    return parts


def _catch_up(root: DataRoot, w: _Writer, current: Path | None, cur_seq: int,
              touching: set[str], step: str) -> None:
    """Make the slot ``w.top`` equal to ``current`` (version ``cur_seq``), except for the
    paths in ``touching``, which the caller writes next (they go into the intent).

    The slot's intent (``_BUILDING.json``, else its marker) says which version it holds
    and which paths a killed attempt may have left half-done; the change lists of the
    publishes since then say what else differs. When a change list is gone (or the slot
    is new and the ring short of it), the slot is rebuilt whole from ``current``."""
    slot = w.top
    intent = _read_json(slot / BUILDING_FILE) or {}
    base = _base_of(slot)
    missed = _log_paths(root, base, cur_seq)
    pending = set(intent.get("paths", []))
    if missed is None:
        for p in list(slot.iterdir()):
            w.remove(p.name)
        w.write_json(BUILDING_FILE, {"base": 0, "paths": [], "full": True})
        _failpoint(step)
        if current is not None:
            for p in sorted(current.iterdir()):
                if p.name not in (PUBLISHED_MARKER, BUILDING_FILE):
                    w.link_tree(p, p.name, durable_files=False)
        w.write_json(BUILDING_FILE, {"base": cur_seq, "paths": sorted(touching)})
        return
    w.write_json(BUILDING_FILE, {"base": base, "paths": sorted(pending | missed | touching)})
    _failpoint(step)
    for rel in _outermost(pending | missed, covered=touching):
        src = current / rel if current is not None else None
        if src is not None and os.path.lexists(src):
            w.link_tree(src, rel, durable_files=False)
        else:
            w.remove(rel)


def publish(root: DataRoot, manifest: dict, run_dir: Path, summary: dict,
            only_sources: list[str] | None = None) -> Path:
    """Publish the run: every registered dataset and the state of its sources, at once.

    ``only_sources``: publish just these sources of the run (the others stay as they are).
    Returns the new version's directory."""
    run_dir = Path(run_dir)
    date = manifest["date"]
    sources = [s["name"] for s in manifest["sources"]]
    if only_sources:
        unknown = set(only_sources) - set(sources)
        if unknown:
            raise PublishError(f"sources {sorted(unknown)} are not part of run {manifest['run_id']}")
        sources = [s for s in sources if s in set(only_sources)]
    with publish_lock(root):
        check_renumbering(root, manifest, summary, sources)
        current = current_version(root)
        cur_seq = _version_seq(current)
        legacy = cur_seq is None or any(
            (root.root / n).is_dir() and not (root.root / n).is_symlink()
            for n in LEGACY_TOP)
        seq = (cur_seq or 0) + 1
        slot = _take_slot(root, current, seq)
        _failpoint("slot")
        w = _Writer(slot, trash=root.versions / TRASH)
        if legacy:                                # an older layout: rebuilt whole, once
            for p in list(slot.iterdir()):
                w.remove(p.name)
            w.write_json(BUILDING_FILE, {"base": 0, "paths": [], "full": True})
            _failpoint("intent")
            for rel, src in _legacy_parts(root, current):
                w.link_tree(src, rel, durable_files=False)
            _index_legacy_state(w)
            plan = _plan(slot, manifest, run_dir, sources, seq)
            w.write_json(BUILDING_FILE, {"base": seq - 1, "paths": sorted(plan.paths)})
        else:                                     # usually nothing: tidy caught ``next`` up
            plan = _plan(current, manifest, run_dir, sources, seq)
            _catch_up(root, w, current, cur_seq, plan.paths, "intent")
        _failpoint("catch_up")
        # the run's partitions, dataset by dataset, then the state
        by_dataset: dict[str, list[str]] = {}
        for rel in plan.links:
            by_dataset.setdefault(_dataset_of(rel), []).append(rel)
        for name in [d.name for d in D.published()] + sorted(set(by_dataset) - set(D.REGISTRY)):
            for rel in sorted(by_dataset.get(name, [])):
                src = plan.links[rel]
                if src is None:
                    w.remove(rel)
                else:
                    w.link_tree(src, rel, durable_files=True)
            _failpoint("datasets")
        _failpoint("state")
        for rel, doc in sorted(plan.docs.items()):
            w.write_json(rel, doc)
        for name in [d.name for d in D.published()] + [STATE]:
            w.mkdirs(slot / name)                     # every dataset has its folder, even empty
        _failpoint("index")
        w.write_json(PUBLISHED_MARKER, {
            "seq": seq, "run_id": manifest["run_id"], "date": date, "sources": sources,
            "datasets": [d.name for d in D.published()],
            "published_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "previous": current.name if current is not None else None})
        _failpoint("marker")
        w.sync()
        _failpoint("fsync")
        logdir = root.versions / "log"
        logdir.mkdir(exist_ok=True)
        tmp = logdir / f".{seq:08d}.{uuid.uuid4().hex[:6]}"
        tmp.write_text(json.dumps({"seq": seq, "run_id": manifest["run_id"], "date": date,
                                   "full": legacy, "paths": sorted(plan.paths | {PUBLISHED_MARKER})}))
        with open(tmp) as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, logdir / f"{seq:08d}.json")
        _fsync_path(logdir)
        _failpoint("log")
        version = root.versions / version_name(seq)
        os.rename(slot, version)
        _fsync_path(root.versions)
        _failpoint("renamed")
        link = root.root / f"{LINK_PREFIX}{uuid.uuid4().hex[:8]}"
        os.symlink(os.path.relpath(version, root.root), link)
        _failpoint("link")
        os.replace(link, root.published)  # the atomic moment
        _fsync_path(root.root)
        _failpoint("swapped")
        try:                              # the version is whole without it; tidy retries
            (version / BUILDING_FILE).unlink()
        except FileNotFoundError:
            pass
        if legacy:                        # the new version holds them: never taken in again
            _discard_legacy_top(root)
    return version


# ----------------------------------------------------------------- tidy (after the swap)

def _discard_legacy_top(root: DataRoot) -> int:
    """Top-level quarantine/, audit/, state/ of an older layout, once a version holds them:
    renamed into the trash (deleted by tidy)."""
    n = 0
    for name in LEGACY_TOP:
        old = root.root / name
        if old.is_dir() and not old.is_symlink():
            trash = root.versions / TRASH
            trash.mkdir(exist_ok=True)
            os.rename(old, trash / f"legacy-{name}-{uuid.uuid4().hex[:8]}")
            n += 1
    return n


def _slot_for_next(root: DataRoot, cur_seq: int, trash: Path) -> tuple[Path, str] | None:
    """The folder tidy catches up as ``next`` (renamed ``building`` while it works), or None
    when ``next`` is already the current version. Never a version a reader may hold: those
    are the current one and the ``KEEP_VERSIONS - 1`` before it."""
    vdir = root.versions
    building, nxt = vdir / BUILDING, vdir / NEXT
    if building.is_dir():                  # a killed publish or tidy: its intent is inside
        if nxt.is_dir():                   # (never both, by construction; a stale one goes)
            os.rename(nxt, trash / f"next-{uuid.uuid4().hex[:8]}")
        return building, "killed attempt"
    if nxt.is_dir():
        intent = _read_json(nxt / BUILDING_FILE) or {}
        if intent.get("base") == cur_seq and not intent.get("paths") and not intent.get("full"):
            return None
        os.rename(nxt, building)
        return building, "stale next"
    versions = sorted((int(m.group(1)), p) for p in vdir.iterdir()
                      if (m := VERSION_RE.match(p.name)) and p.is_dir())
    leftovers = [p for n, p in versions if n > cur_seq]          # renamed, never linked
    unheld = [p for n, p in versions if n <= cur_seq - KEEP_VERSIONS]
    take = (leftovers + unheld)[:1]
    for p in (leftovers + unheld)[1:]:     # more than one no reader holds (e.g. a smaller ring)
        os.rename(p, trash / f"{p.name}-{uuid.uuid4().hex[:8]}")
    if take:
        os.rename(take[0], building)
        return building, f"{take[0].name}"
    building.mkdir()
    return building, "new (ring not yet full)"


def tidy(root: DataRoot) -> dict:
    """The step after a publish (Delta's VACUUM, Iceberg's expire_snapshots): everything the
    publish left for later, none of it needed by the published version.

    1. what a publish killed after its swap left: its intent file, its unused link;
    2. ``next``: the oldest version no reader may still hold (older than the current one and
       the ``KEEP_VERSIONS - 1`` before it) is caught up with the current version (the paths
       of the publishes it missed, from their change lists), made durable and renamed
       ``.published/next``: the next publish only adds its own night;
    3. the trash: folders the publishes and step 2 took out of a version (nights past a
       dataset's retention, a rerun's leftovers, replaced paths) are deleted; no version
       names them;
    4. change lists older than ``LOG_KEEP`` publishes; an older layout's leftovers.

    Under the publish lock. Killed at any step it leaves every version as it was (step 2
    works in ``building`` with an intent, like a publish), and the next tidy, or publish,
    finishes it. Returns what it did (for logs and the benchmark)."""
    out = {"next_from": None, "dirs_touched": 0, "trash_removed": 0, "logs_removed": 0}
    vdir = root.versions
    if not vdir.is_dir():
        return out
    with publish_lock(root):
        current = current_version(root)
        cur_seq = _version_seq(current)
        trash = vdir / TRASH
        trash.mkdir(exist_ok=True)
        if current is not None and cur_seq is not None:
            try:
                (current / BUILDING_FILE).unlink()
            except FileNotFoundError:
                pass
        for p in root.root.glob(LINK_PREFIX + "*"):
            if p.is_symlink():
                p.unlink()
        if cur_seq is not None and current is not None:
            _discard_legacy_top(root)
            previous = (_read_json(current / PUBLISHED_MARKER) or {}).get("previous")
            for p in vdir.iterdir():       # snapshots of the earlier layout, once not the previous
                if p.is_dir() and p.name.startswith("v") and not VERSION_RE.match(p.name) \
                        and p.name != previous:
                    os.rename(p, trash / f"{p.name}-{uuid.uuid4().hex[:8]}")
            taken = _slot_for_next(root, cur_seq, trash)
            _failpoint("tidy_slot")
            if taken is not None:
                slot, out["next_from"] = taken
                _fsync_path(vdir)
                w = _Writer(slot, trash=trash)
                _catch_up(root, w, current, cur_seq, set(), "tidy_intent")
                out["dirs_touched"] = len(w.dirs)
                _failpoint("tidy_catch_up")
                w.sync()                   # the caught-up tree durable before it says so
                _failpoint("tidy_synced")
                w.write_json(BUILDING_FILE, {"base": cur_seq, "paths": []})
                _fsync_path(slot / BUILDING_FILE)
                _fsync_path(slot)
                os.rename(slot, vdir / NEXT)
                _fsync_path(vdir)
                _failpoint("tidy_next")
        for entry in sorted(os.scandir(trash), key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            out["trash_removed"] += 1
            _failpoint("tidy_trash")
        trash.rmdir()
        logdir = vdir / "log"
        if logdir.is_dir() and cur_seq:
            for entry in os.scandir(logdir):
                m = re.match(r"^(\d{8})\.json$", entry.name)
                if (m and int(m.group(1)) <= cur_seq - LOG_KEEP) or entry.name.startswith("."):
                    os.unlink(entry.path)       # old change lists; a killed publish's temporary
                    out["logs_removed"] += 1
        _failpoint("tidy_log")
    return out


def _index_legacy_state(w: _Writer) -> None:
    """Night records and indexes for what was copied from an older layout (once, O(history))."""
    base = w.top / STATE
    if not base.is_dir():
        return
    paths: dict[tuple[str, str], list[str]] = {}
    for ds in D.published():
        top = w.top / ds.name
        pattern = "source=*/date=*" if ds.layout == D.NIGHT else "*/*/date=*"
        for p in sorted(top.glob(pattern)) if top.is_dir() else []:
            rel = p.relative_to(w.top).as_posix()
            source = p.parts[-2 if ds.layout == D.NIGHT else -3].removeprefix("source=")
            paths.setdefault((source, p.name.removeprefix("date=")), []).append(rel)
    for sdir in sorted(p for p in base.iterdir() if p.is_dir()):
        dates = sorted(p.name for p in sdir.iterdir() if (p / SEQ_FILE).is_file())
        before = None
        for d in dates:
            w.write_json(f"{STATE}/{sdir.name}/{d}/{NIGHT_FILE}", {
                "date": d, "run_id": None, "version": 0, "prev": before, "before": before,
                "paths": paths.get((sdir.name, d), [])})
            before = d
        if dates:
            w.write_json(f"{STATE}/{sdir.name}/{INDEX_FILE}",
                         {"source": sdir.name, "latest": dates[-1], "version": 0, "retained": {}})
