"""Spark's Python daemon for dblog: pyspark's own daemon, with the worker-side modules loaded once.

Spark starts one Python *daemon* per executor (``python -m <spark.python.daemon.module>
pyspark.worker``) and forks every Python worker from it. pyspark's daemon has imported only
``pyspark.worker``, so each forked worker's first task paid the imports of pyarrow, pandas
(pyspark's Arrow serializers), the decoders and ``dblog.decode`` again, and their first use.
This module (``dblog.spark`` sets ``spark.python.daemon.module`` to it) imports them once in
the daemon (``preload``), then runs pyspark's daemon manager unchanged: every forked worker
starts with them in memory (shared copy-on-write pages) and no task pays them.

What may not break a run:

* a module that fails to import here (a decoder broken, a package missing on an executor) is
  reported on stderr (Spark's executor log) and skipped: the daemon still starts, and the
  task that needs the module fails or quarantines exactly as it would have without this
  daemon;
* nothing here writes to the daemon's stdout, where Spark reads the port it listens on
  (``preload`` runs with file descriptor 1 pointed at stderr);
* no thread is left running before the fork (importing does not start any in these modules).

Before the imports it sets ``ALLOCATOR_ENV`` (unless the environment already sets those
keys): Arrow's default memory pool on Linux is mimalloc, which by default commits a fresh
arena eagerly; a worker's first large Arrow buffers (a resolve bucket's sort and take of
400,000 rows) then cost about 0.5 CPU s more than the same task run again (measured in
process: 1.11-1.26 s first, 0.60-0.69 s after; with ``MIMALLOC_ARENA_EAGER_COMMIT=0``
0.70 s first). On the kept 1M Informix night the ordering took 0.5-1.5 s less in five of
six alternated pairs (docs/BENCHMARK.md, "Twenty-fifth session").

It also keeps every task from re-reading zip directories (``lazy_zip_invalidation``):
pyspark's worker calls ``importlib.invalidate_caches()`` at the start of every task, and on
CPython 3.10-3.11 a ``zipimporter`` answers that by reading its archive's whole central
directory again (CPython gh-103200, found by a Spark developer, fixed in 3.12 by reading
lazily). The workers' path holds pyspark.zip, py4j's zip and Spark's core jar, 16 importers
in all: measured 0.09-0.39 s at the start of every Python task (1M rdb decode, six tasks).

And it imports pyspark and py4j from where the driver does when that is the same code
(``prefer_installed``): Spark puts its ``pyspark.zip`` and py4j's zip first on the workers'
path, and a zip holds sources only (``zipimport`` writes no bytecode cache), so the daemon
compiled every pyspark module it imported, at every start: preload 0.81-0.89 s from the
zips against 0.47-0.50 s from the installed packages (docs/BENCHMARK.md, "Twenty-sixth
session"). The zips move behind an installed package of the same ``__version__`` only; a
cluster whose Python has another pyspark, or none, keeps Spark's order.

``dblog.spark.daemon_settings`` sets the module only where the workers can import it; when
they cannot, Spark's own daemon is kept (Spark does not fall back itself: a daemon that does
not start fails every Python task).
"""

from __future__ import annotations

import os
import sys
import time

# the allocator's options every forked worker inherits (read when pyarrow loads mimalloc)
ALLOCATOR_ENV = {"MIMALLOC_ARENA_EAGER_COMMIT": "0"}

# imported in this order; each may fail on its own without stopping the daemon
PRELOAD = (
    "numpy",
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.fs",
    "pyarrow.parquet",
    "pyarrow.csv",
    "pandas",                          # pyspark's Arrow serializers import it
    "pyspark.sql.pandas.serializers",  # mapInArrow's stream (de)serializers
    "pyspark.sql.pandas.types",
    "pyspark.sql.pandas.utils",
    "pyspark.sql.types",
    "decoders",
    "decoders.events",
    "decoders.catalog",
    "dblog.landing",
    "dblog.decode",
    "dblog.ordering.transactions",     # the ordering's summarize (mapInArrow)
)


def _warm() -> None:
    """Per-process constants built on first use: every format's decoder (and ``split``,
    which the planning job's workers run) imported through the registry, so that their
    module-level tables are built here once."""
    import decoders

    for fmt in decoders.FORMATS:
        pkg = decoders.get(fmt)
        for name in ("decode", "split"):
            if name in getattr(pkg, "_LAZY", {}):
                getattr(pkg, name)


def preload(modules: tuple[str, ...] | None = None, log=None) -> dict[str, object]:
    """Import ``modules`` (``PRELOAD``) and warm the decoders; returns name -> seconds, or the exception
    that stopped it (reported on ``log``, stderr by default)."""
    import importlib

    log = sys.stderr if log is None else log
    modules = PRELOAD if modules is None else modules
    done: dict[str, object] = {}
    steps = [(m, lambda m=m: importlib.import_module(m)) for m in modules]
    steps.append(("decoders (warm)", _warm))
    for name, step in steps:
        t0 = time.perf_counter()
        try:
            step()
        except BaseException as exc:  # noqa: BLE001 - one failed import must not stop the daemon
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            done[name] = exc
            print(f"dblog.pydaemon: could not preload {name}: {type(exc).__name__}: {exc}; "
                  f"workers import it when a task needs it", file=log, flush=True)
        else:
            done[name] = time.perf_counter() - t0
    return done


def _archive_stamp(path: str) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def lazy_zip_invalidation(zipimport=None) -> bool:
    """On CPython < 3.12, make ``zipimporter.invalidate_caches`` re-read an archive's
    directory only when the archive changed (inode, size or modification time) since it was
    last read; an unchanged archive would be read back as the directory already held, which
    the importer then uses. Returns whether it was installed (``zipimport``: the module to
    patch, for the tests). Archives already read are stamped now: none of them is written
    while the daemon starts (Spark's own zips and jars, the job's ``--py-files``)."""
    if zipimport is None:
        import zipimport
    original = getattr(zipimport.zipimporter, "invalidate_caches", None)
    if sys.version_info >= (3, 12) or original is None or getattr(original, "_dblog_lazy", False):
        return False
    cache = zipimport._zip_directory_cache
    read_as: dict[str, tuple | None] = {a: _archive_stamp(a) for a in list(cache)}

    def invalidate_caches(self) -> None:
        now = _archive_stamp(self.archive)
        if now is not None and read_as.get(self.archive) == now and self.archive in cache:
            self._files = cache[self.archive]
            return
        original(self)
        read_as[self.archive] = now

    invalidate_caches._dblog_lazy = True
    invalidate_caches.__doc__ = original.__doc__
    zipimport.zipimporter.invalidate_caches = invalidate_caches
    return True


def _preload_with_stdout_on_stderr() -> None:
    """``preload`` with file descriptor 1 (and ``sys.stdout``) pointed at stderr: the JVM
    reads the daemon's port from its stdout, so no import may print there."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        preload()
    finally:
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001
            pass
        os.dup2(saved, 1)
        os.close(saved)


# (package, how the zip Spark ships it is named) for ``prefer_installed``
SHIPPED_ZIPS = (("pyspark", "pyspark.zip"), ("py4j", "py4j-*.zip"))


def _version_in(text: str) -> str | None:
    import re

    m = re.search(r"""^__version__\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""", text, re.M)
    return m.group(1) if m else None


def _zip_version(zip_path: str, package: str) -> str | None:
    import zipfile

    try:
        with zipfile.ZipFile(zip_path) as z:
            return _version_in(z.read(f"{package}/version.py").decode("utf-8", "replace"))
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


def _dir_version(folder: str, package: str) -> str | None:
    try:
        with open(os.path.join(folder, package, "version.py"), encoding="utf-8") as f:
            return _version_in(f.read())
    except OSError:
        return None


def prefer_installed(path: list[str] | None = None) -> list[str]:
    """Move each zip of ``SHIPPED_ZIPS`` on ``path`` (``sys.path``) behind the directories,
    when a directory on the path holds the same package with the same ``__version__``
    (``version.py``), so that the package is imported from there, with its bytecode cache.
    Returns the zips moved. Must run before the package is imported."""
    import fnmatch

    path = sys.path if path is None else path
    moved = []
    for package, pattern in SHIPPED_ZIPS:
        zips = [p for p in path if fnmatch.fnmatch(os.path.basename(p), pattern) and os.path.isfile(p)]
        if not zips or package in sys.modules:
            continue
        dirs = [p for p in path if p not in zips and os.path.isdir(os.path.join(p or ".", package))]
        shipped = _zip_version(zips[0], package)
        if shipped is None or not dirs or _dir_version(dirs[0], package) != shipped:
            continue
        for z in zips:
            path.remove(z)
            path.append(z)
            moved.append(z)
    return moved


def main() -> None:
    for key, value in ALLOCATOR_ENV.items():
        os.environ.setdefault(key, value)
    try:
        prefer_installed()
    except Exception as exc:  # noqa: BLE001 - the zips stay first, as Spark put them
        print(f"dblog.pydaemon: pyspark is imported from Spark's zip: {exc}", file=sys.stderr,
              flush=True)
    _preload_with_stdout_on_stderr()
    try:
        lazy_zip_invalidation()
    except Exception as exc:  # noqa: BLE001 - tasks then pay the re-reads, as without it
        print(f"dblog.pydaemon: zip directories will be re-read per task: {exc}", file=sys.stderr,
              flush=True)
    # pyspark.daemon reads the worker module from sys.argv[1] when imported, as it does
    # when Spark runs it with ``python -m pyspark.daemon pyspark.worker``
    from pyspark import daemon

    daemon.manager()


def probe(_=None) -> dict:
    """What a Python worker sees when its task starts (for the tests): its parent's command
    line (the daemon that forked it) and which of ``PRELOAD``'s modules are already loaded."""
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            parent = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        parent = ""
    import zipimport

    import pyspark

    return {"pid": os.getpid(), "parent": parent, "pyspark": pyspark.__file__,
            "env": {k: os.environ.get(k) for k in ALLOCATOR_ENV},
            "lazy_zip": getattr(zipimport.zipimporter.invalidate_caches, "_dblog_lazy", False),
            "loaded": sorted(m for m in PRELOAD + ("decoders.rdb.decoder", "decoders.informix.decoder")
                             if m in sys.modules)}


if __name__ == "__main__":
    main()
