"""The landing zone of one source's night (SPEC section 2): which files are archives, and how
every other file is accounted for.

Every file under ``landing/<source>/<date>/`` (subfolders included) becomes one *entry*:

``archive``    a regular file (or a symbolic link whose target lies inside the data root)
               that the night decodes
``ignored``    a file whose name (or a folder above it) starts with ``.``: tools write
               temporary files that way; listed, never read
``refused``    a symbolic link that leaves the data root (directly or through a linked
               folder), a dangling link, a link loop, anything that is not a regular file
               (FIFO, socket, device: reading one could block the night), or a file that
               cannot be examined; nothing of it is read or copied
``duplicate``  an archive whose bytes equal those of an earlier archive of the same source,
               tonight (earlier in archive order) or on an earlier published night: skipped
               whole (rule ``duplicate_archive``), ``duplicate_of`` names the archive it repeats

Names are bytes. ``display_name`` shows a name as text everywhere (manifest, events'
``archive_file``, audit, report): valid UTF-8 stays as it is; every byte of an invalid
sequence, a backslash, and control characters are written ``\\xNN``, so two different
names never show the same. The archive is read by its real bytes path (``path_hex``).

Duplicates of earlier nights are found through a content index per source whose lookups
do not grow with the nights published: ``archive_index/<source>/size=<n>/`` exists
once a published night had an archive of ``n`` bytes; only then is tonight's archive of
that size hashed (SHA-256) and looked up under ``size=<n>/sha256=<h>/``. Each night's
archive list goes into the night's own state (``state/<source>/<date>/archives/``,
published with it); after the publish it is entered into the index. Entries name the
night and the run, and count only while that run is the night's published run
(``state/<source>/<date>/seq.json``), so a replaced run's entries are inert; a publish that
ended before entering its night is entered by the next stage (``heal``). The first
archives of a size are entered unhashed (``size=<n>/first/``) and hashed the first time
another archive of that size appears.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

ARCHIVE, IGNORED, REFUSED, DUPLICATE = "archive", "ignored", "refused", "duplicate"
STATUSES = (ARCHIVE, IGNORED, REFUSED, DUPLICATE)
DUPLICATE_RULE = "duplicate_archive"
INDEX_DIR = "archive_index"
UNHASHED = "first"
HASH_CHUNK = 1 << 20
MAX_DEPTH = 64                       # folders below the night folder that are searched


# ----------------------------------------------------------------- names

def display_name(raw: bytes | str) -> str:
    """A file name (bytes) as text: UTF-8 where valid, ``\\xNN`` for every other byte, for a
    backslash and for control characters (so the text is unique and prints on one line)."""
    if isinstance(raw, str):
        raw = os.fsencode(raw)
    text = raw.decode("utf-8", "surrogateescape")
    if text.isprintable() and "\\" not in text:
        return text
    out = []
    for c in text:
        if "\udc80" <= c <= "\udcff":
            out.append(f"\\x{ord(c) - 0xDC00:02x}")
        elif c == "\\" or not c.isprintable():
            out.append("".join(f"\\x{b:02x}" for b in c.encode("utf-8")))
        else:
            out.append(c)
    return "".join(out)


def accepted(display: str, patterns: list[str] | tuple[str, ...]) -> bool:
    """Does the operator accept the loss of this archive (``--accept-loss PATTERN``)?
    Patterns are shell patterns matched against the archive's name as shown in the audit
    (``<source>/<date>/<file>``)."""
    return any(fnmatchcase(display, p) for p in patterns)


# ----------------------------------------------------------------- entries

@dataclass
class Entry:
    file: str                         # shown name, relative to the landing zone
    status: str
    size: int = 0                     # bytes of the file (0 for a refused entry: never looked at)
    path_hex: str | None = None       # the real path to read (bytes, hex), archives only
    path: str | None = None           # the same as text when the name is valid UTF-8
    reason: str | None = None
    duplicate_of: str | None = None
    sha256: str | None = None
    accept_loss: bool = False

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None and v is not False} \
            | {"file": self.file, "status": self.status, "size": self.size}


@dataclass
class _Walk:
    root_real: bytes
    landing: bytes
    out: list[Entry] = field(default_factory=list)
    seen_dirs: set[tuple[int, int]] = field(default_factory=set)

    def rel(self, path: bytes) -> str:
        return display_name(os.path.relpath(path, self.landing))

    def inside(self, real: bytes) -> bool:
        return real == self.root_real or real.startswith(self.root_real + b"/")


def _real(path: bytes) -> bytes:
    return os.path.realpath(path)


def scan(data_root: str | os.PathLike, source: str, date: str) -> list[Entry]:
    """Every file of ``landing/<source>/<date>/`` as an entry (archives not yet told apart
    from duplicates: see ``find_duplicates``), in name order."""
    root = os.fsencode(os.path.abspath(data_root))
    w = _Walk(_real(root), os.path.join(root, b"landing"))
    night = os.path.join(w.landing, os.fsencode(source), os.fsencode(date))
    # the night folder itself, or a folder above it inside landing/, may be a link
    for path in (os.path.join(w.landing, os.fsencode(source)), night):
        if os.path.islink(path) and not _check_link_dir(w, path):
            return w.out
    if not os.path.isdir(night):
        return w.out
    real = _real(night)
    if not w.inside(real):
        w.out.append(Entry(w.rel(night), REFUSED,
                           reason=f"the night folder resolves to {display_name(real)}, outside the data root"))
        return w.out
    _walk_dir(w, night, real, hidden_by=None, depth=0)
    return w.out


def _check_link_dir(w: _Walk, path: bytes) -> bool:
    """A linked folder above the night: follow it only when it stays inside the data root."""
    target = _real(path)
    if w.inside(target) and os.path.isdir(target):
        return True
    why = "dangling symbolic link" if not os.path.exists(path) else \
        f"symbolic link to {display_name(target)}, outside the data root"
    w.out.append(Entry(w.rel(path), REFUSED, reason=why))
    return False


def _walk_dir(w: _Walk, shown: bytes, folder: bytes, hidden_by: str | None, depth: int) -> None:
    """Walk ``folder`` (a real path inside the data root), naming entries by ``shown`` (the
    path as reached from the night folder, through links)."""
    try:
        st = os.stat(folder)
        key = (st.st_dev, st.st_ino)
        if key in w.seen_dirs:
            w.out.append(Entry(w.rel(shown), REFUSED, reason="folder reached twice (a link loop)"))
            return
        w.seen_dirs.add(key)
        names = sorted(os.listdir(folder))
    except OSError as exc:
        w.out.append(Entry(w.rel(shown), REFUSED, reason=f"cannot list the folder: {exc.strerror}"))
        return
    for name in names:
        path, name_shown = os.path.join(folder, name), os.path.join(shown, name)
        rel = w.rel(name_shown)
        hidden = hidden_by or (rel if name.startswith(b".") else None)
        try:
            lst = os.lstat(path)
        except OSError as exc:
            w.out.append(Entry(rel, REFUSED, reason=f"cannot examine: {exc.strerror}"))
            continue
        real, via = path, None
        if stat.S_ISLNK(lst.st_mode):
            target = _real(path)
            if not os.path.exists(path):
                w.out.append(Entry(rel, REFUSED,
                                   reason=f"dangling symbolic link (to {display_name(os.readlink(path))})"))
                continue
            if not w.inside(target):
                w.out.append(Entry(rel, REFUSED,
                                   reason=f"symbolic link to {display_name(target)}, outside the data root"))
                continue
            real, via = target, display_name(target)
            try:
                lst = os.stat(real)
            except OSError as exc:
                w.out.append(Entry(rel, REFUSED, reason=f"cannot examine the link's target: {exc.strerror}"))
                continue
        if stat.S_ISDIR(lst.st_mode):
            if depth >= MAX_DEPTH:
                w.out.append(Entry(rel, REFUSED, reason=f"folder nested deeper than {MAX_DEPTH}"))
            else:
                _walk_dir(w, name_shown, real, hidden, depth + 1)
            continue
        if not stat.S_ISREG(lst.st_mode):
            w.out.append(Entry(rel, REFUSED, reason="not a regular file (FIFO, socket or device): not read"))
            continue
        if hidden:
            why = "hidden file (name starts with '.')" if hidden == rel else f"inside hidden folder {hidden}"
            w.out.append(Entry(rel, IGNORED, size=lst.st_size, reason=why))
            continue
        text = None
        try:
            text = real.decode("utf-8")
        except UnicodeDecodeError:
            pass
        w.out.append(Entry(rel, ARCHIVE, size=lst.st_size, path_hex=real.hex(), path=text,
                           reason=f"symbolic link to {via}" if via else None))


# ----------------------------------------------------------------- reading an archive

class ArchiveChanged(OSError):
    """The file is no longer the one the stage found (size or content differ, or it now
    leads outside the data root)."""


def archive_path(archive: dict | str) -> bytes | str:
    """The path to read: bytes for a staged archive (``path_hex``), else what was given."""
    if isinstance(archive, dict):
        if archive.get("path_hex"):
            return bytes.fromhex(archive["path_hex"])
        return archive["path"]
    return archive


def read_archive(archive: dict | str, data_root: str | None = None, start: int = 0,
                 end: int | None = None) -> bytes:
    """The bytes of a staged archive (``[start, end)`` of them for a range), read by its real
    bytes path.

    With ``data_root``, the path must still resolve inside it, and it is opened without
    following a link on its last part (a link swapped in after the stage is not followed).
    The file's size (and, read whole, its SHA-256 when the stage computed one) must be the
    staged ones. Raises ``OSError`` (``ArchiveChanged`` for the checks) on anything else."""
    path = archive_path(archive)
    whole = start == 0 and end is None
    if isinstance(path, str) and "://" in path:
        from pyarrow import fs as pafs

        filesystem, inner = pafs.FileSystem.from_uri(path)
        with filesystem.open_input_file(inner) as f:
            size = f.size()
            stop = size if end is None else end
            got = f.read_at(stop - start, start)
            data = got if isinstance(got, bytes) else got.to_pybytes()
    else:
        path = os.fsencode(path)
        if data_root is not None:
            root = _real(os.fsencode(os.path.abspath(data_root)))
            real = _real(path)
            if not (real == root or real.startswith(root + b"/")):
                raise ArchiveChanged(f"{display_name(path)} now resolves to {display_name(real)}, "
                                     "outside the data root: not read")
            path = real
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise ArchiveChanged(f"{display_name(path)} is no longer a regular file: not read")
            size = st.st_size
            if whole:
                data = f.read()
                size = len(data)
            else:
                f.seek(start)
                data = f.read((size if end is None else end) - start)
    if isinstance(archive, dict):
        if "size" in archive and size != archive["size"]:
            raise ArchiveChanged(f"the archive changed after it was staged: {size} bytes, "
                                 f"staged {archive['size']}")
        if whole and archive.get("sha256") and hashlib.sha256(data).hexdigest() != archive["sha256"]:
            raise ArchiveChanged("the archive changed after it was staged: its SHA-256 differs")
    return data


def file_sha256(path: bytes) -> str:
    h = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{display_name(path)} is not a regular file")
        while chunk := f.read(HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


# ----------------------------------------------------------------- duplicates

ARCHIVES_DIR = "archives"             # state/<source>/<date>/archives/archives.json: the night's archives
ARCHIVES_FILE = "archives.json"


def index_dir(data_root: str | os.PathLike, source: str) -> Path:
    # outside published/ (not part of a version): an index of what published/ holds, entered
    # after each publish and healed by the next stage
    return Path(data_root) / INDEX_DIR / source


def published_run(data_root: str | os.PathLike, source: str, date: str) -> str | None:
    """The run whose state is published for ``source``'s night ``date`` (None: none)."""
    from .stage import SEQ_FILE

    try:
        from .paths import DataRoot

        return json.loads((DataRoot.of(data_root).state(source) / date / SEQ_FILE).read_text())["run_id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def night_archives(archives: list[dict], data_root: str | os.PathLike) -> list[dict]:
    """A night's archives as the index keeps them: shown name, size, SHA-256 if known, and
    the real path relative to the data root (so a moved or copied data root still works)."""
    root = _real(os.fsencode(os.path.abspath(data_root)))
    out = []
    for a in archives:
        real = bytes.fromhex(a["path_hex"]) if a.get("path_hex") else None
        rel = os.path.relpath(real, root).hex() if real is not None else None
        out.append({"file": a["file"], "size": int(a.get("size") or 0), "rel_hex": rel,
                    "sha256": a.get("sha256")})
    return out


class ArchiveIndex:
    """Content index of one source's archives on published nights, for ``find_duplicates``.

    Lookups by size, then SHA-256: the cost of one lookup does not grow with the nights
    published. Entries are written after a night is published (``record``, from the
    per-night list the publish put into the night's state) and count only while the run
    that wrote them is the night's published run."""

    def __init__(self, data_root: str | os.PathLike, source: str, date: str) -> None:
        self.root = Path(data_root)
        self.root_real = _real(os.fsencode(os.path.abspath(data_root)))
        self.source = source
        self.date = date
        self.base = index_dir(data_root, source)
        self._runs: dict[str, str | None] = {}

    def _valid(self, doc: dict) -> bool:
        d = doc.get("date")
        if not isinstance(d, str) or d >= self.date:
            return False
        if d not in self._runs:
            self._runs[d] = published_run(self.root, self.source, d)
        return self._runs[d] is not None and self._runs[d] == doc.get("run_id")

    def _entries(self, folder: Path):
        if not folder.is_dir():
            return
        for f in sorted(folder.glob("*.json")):
            try:
                doc = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(doc, dict) and self._valid(doc):
                yield from doc.get("archives") or []

    def _path(self, rel_hex: str) -> bytes | None:
        """The archive's path under this data root, if it stays inside it."""
        path = os.path.join(self.root_real, bytes.fromhex(rel_hex))
        real = _real(path)
        return real if real.startswith(self.root_real + b"/") else None

    def size_seen(self, size: int) -> bool:
        return (self.base / f"size={size}").is_dir()

    def find(self, size: int, sha: str) -> str | None:
        """The earlier published archive with these bytes, if any (its shown name)."""
        base = self.base / f"size={size}"
        for a in self._entries(base / f"sha256={sha}"):
            return a["file"]
        for a in self._entries(base / UNHASHED):
            try:
                path = self._path(a["rel_hex"])
                if path is not None and file_sha256(path) == sha:
                    return a["file"]
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return None

    def covered(self, date: str, run_id: str) -> bool:
        return (self.base / "nights" / f"{date}.{run_id}").exists()

    def record(self, date: str, run_id: str, archives: list[dict]) -> None:
        """Enter a published night's archives (``night_archives`` rows) under its run."""
        groups: dict[Path, list[dict]] = {}
        for a in archives:
            sub = f"sha256={a['sha256']}" if a.get("sha256") else UNHASHED
            groups.setdefault(self.base / f"size={a['size']}" / sub, []).append(
                {"file": a["file"], "rel_hex": a["rel_hex"]})
        for folder, items in groups.items():
            _write_json(folder / f"{date}.{run_id}.json", {"date": date, "run_id": run_id, "archives": items})
        marker = self.base / "nights" / f"{date}.{run_id}"
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()

    def heal(self, date: str) -> None:
        """Enter the published night ``date`` if a publish ended before it was entered."""
        run = published_run(self.root, self.source, date)
        if run is None or self.covered(date, run):
            return
        from .paths import DataRoot

        path = DataRoot.of(self.root).state(self.source) / date / ARCHIVES_DIR / ARCHIVES_FILE
        try:
            archives = json.loads(path.read_text())
        except (OSError, ValueError):
            return
        self.record(date, run, archives)


def _write_json(path: Path, doc) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp"
    tmp.write_text(json.dumps(doc))
    tmp.replace(path)


def stage_night_archives(run_dir: Path, source: str, archives: list[dict], data_root) -> None:
    """The night's archive list into the run's state (published with the night's state)."""
    _write_json(Path(run_dir) / "state" / ARCHIVES_DIR / f"source={source}" / ARCHIVES_FILE,
                night_archives(archives, data_root))


def record_published(data_root: str | os.PathLike, manifest: dict, sources: list[str] | None = None) -> None:
    """After a publish: enter the published nights' archives into their sources' indexes."""
    for s in manifest["sources"]:
        if sources and s["name"] not in sources:
            continue
        run = published_run(data_root, s["name"], manifest["date"])
        if run is None:
            continue
        ArchiveIndex(data_root, s["name"], manifest["date"]).record(
            manifest["date"], run, night_archives(s["archives"], data_root))


def find_duplicates(entries: list[Entry], index: ArchiveIndex | None) -> None:
    """Mark archives that repeat an earlier archive (in ``entries``' order, or on an earlier
    published night in ``index``) as duplicates. Hashes only archives whose size is shared
    with another archive of tonight or of the index."""
    archives = [e for e in entries if e.status == ARCHIVE]
    by_size: dict[int, list[Entry]] = {}
    for a in archives:
        by_size.setdefault(a.size, []).append(a)
    first_of: dict[tuple[int, str], Entry] = {}
    for a in archives:
        shared = len(by_size[a.size]) > 1 or (index is not None and index.size_seen(a.size))
        if not shared:
            continue
        try:
            a.sha256 = file_sha256(bytes.fromhex(a.path_hex))
        except OSError as exc:   # left an archive: the decode stage reports it lost
            a.reason = f"could not be hashed: {exc}"
            continue
        earlier = index.find(a.size, a.sha256) if index is not None else None
        if earlier is None and (a.size, a.sha256) in first_of:
            earlier = first_of[(a.size, a.sha256)].file
        if earlier is not None:
            a.status, a.duplicate_of = DUPLICATE, earlier
            a.reason = f"same bytes as {earlier} ({DUPLICATE_RULE})"
        else:
            first_of.setdefault((a.size, a.sha256), a)
