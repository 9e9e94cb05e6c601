"""The local Spark JVM's class archive (HotSpot class data sharing).

A Spark JVM loads about 20,000 classes from Spark's 287 jars: reading, parsing and verifying
them costs seconds at every start and again in the first queries, which load the classes of
Spark SQL, Parquet and Arrow as they first need them. HotSpot (JDK 13 and later) can write
the classes a JVM loaded to an archive when it exits (``-XX:ArchiveClassesAtExit``) and map
them from it at the next start (``-XX:SharedArchiveFile``). Measured (docs/BENCHMARK.md,
"Sixteenth session: the JVM's class archive"): a session's start and first tiny query
7.3-10.1 s -> 4.3-5.1 s; a spark-submit of a trivial job 8.3 -> 4.6 s; ``make run``'s night
2-3 s shorter.

* ``dblog jvm-cache`` (run by the Makefile's set-up) builds it: one JVM runs a small sample
  night of every configured format twice (once as a small night runs, without code
  generation, once with it) and writes the classes it loaded as it exits, to a temporary
  name; the archive takes its name (an atomic rename, after an fsync) only after that JVM
  exited with 0. Builds are serialised by a lock file (a dead builder's lock is taken over);
  a build whose sample nights fail stops its JVM and leaves nothing behind.
* A local JVM this process starts (``dblog run``, the tests, the benchmark; the DAG's
  spark-submit on a local master) maps the archive when it exists (``java_options``);
  nothing changes when it does not.
* The archive's name carries a hash of the Java runtime and of Spark's jars (path, size,
  modification time), so another runtime or another Spark install gets its own; HotSpot
  checks the header and class path itself too. What a damaged archive does (both tried):
  HotSpot maps the file, so one shorter than it was written would crash the JVM (SIGBUS),
  and the name also carries the size: a file of another size is never offered. Damage
  inside a whole-length file fails HotSpot's region checksums (``-XX:+VerifySharedSpaces``):
  the JVM prints a warning and starts without it.
* ``DBLOG_JVM_CACHE``: the directory (default ``$XDG_CACHE_HOME/dblog`` or
  ``~/.cache/dblog``), or ``off``. Archives are ~150-200 MB; a build keeps the newest
  ``KEEP`` of them.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import shutil
import struct
import sys
import tempfile
import time
from pathlib import Path

ENV = "DBLOG_JVM_CACHE"
MAGIC = 0xF00BABA8          # HotSpot's CDS_DYNAMIC_ARCHIVE_MAGIC, the header's first u4
KEEP = 3                    # archives kept in the directory (other runtimes, other installs)
BUILD_TRANSACTIONS = 60     # per source and night of the build's sample nights
BUILD_TIMEOUT_S = 600       # for the JVM to write the archive and exit
# the archive's writing logs a line for every class it leaves out (e.g. from signed jars)
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")


class BuildError(RuntimeError):
    """The archive could not be built (the message says at which step)."""


def cache_dir() -> Path | None:
    """The archives' directory, or None when ``DBLOG_JVM_CACHE=off``."""
    value = os.environ.get(ENV, "").strip()
    if value.lower() in ("off", "0", "none", "no", "false"):
        return None
    if value:
        return Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dblog"


def java_binary() -> Path | None:
    """The ``java`` spark-submit runs (``$JAVA_HOME/bin/java``, else the one on PATH)."""
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not found or not os.path.exists(found):
        return None
    return Path(os.path.realpath(found))


def spark_jars() -> Path | None:
    """The jars directory of the Spark that pyspark starts."""
    try:
        from pyspark.find_spark_home import _find_spark_home

        jars = Path(_find_spark_home()) / "jars"
    except Exception:  # noqa: BLE001 - no Spark found: no archive
        return None
    return jars if jars.is_dir() else None


def archive_key() -> str | None:
    """A hash of what the archive depends on: the Java runtime and Spark's jars (path, size,
    modification time of each). None when either is missing."""
    java, jars = java_binary(), spark_jars()
    if java is None or jars is None:
        return None
    h = hashlib.sha256()
    for path in [java, *sorted(jars.iterdir())]:
        try:
            st = path.stat()
        except OSError:
            continue
        h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def archive_path() -> Path | None:
    """Where this runtime's and Spark's archive goes, with ``*`` for its size (the archive's
    name carries its size: ``spark-<key>.<bytes>.jsa``), or None when there can be none."""
    d, key = cache_dir(), archive_key()
    if d is None or key is None:
        return None
    return d / f"spark-{key}.*.jsa"


def _key(path: Path) -> str:
    """``spark-<key>`` of an archive's (or its lock's, its temporary file's) name."""
    return path.name.split(".")[0]


def _named_size(path: Path) -> int | None:
    parts = path.name.split(".")
    return int(parts[-2]) if len(parts) >= 3 and parts[-2].isdigit() else None


def is_archive(path: Path | None) -> bool:
    """``path`` is a whole class archive: HotSpot's magic number first, and as many bytes as
    its name says (HotSpot maps the file: a shorter one would crash the JVM, not fail it)."""
    if path is None:
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(4)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return False
    return len(head) == 4 and struct.unpack("<I", head)[0] == MAGIC and size == _named_size(path)


def find_archive() -> Path | None:
    """This runtime's and Spark's archive, if a whole one exists."""
    pattern = archive_path()
    if pattern is None:
        return None
    for path in sorted(pattern.parent.glob(pattern.name)):
        if is_archive(path):
            return path
    return None


def java_options() -> list[str]:
    """The options that make a JVM map the archive, when there is one (else none).
    ``VerifySharedSpaces``: HotSpot checks the regions' checksums and, where one does not
    match, starts without the archive (with a warning)."""
    path = find_archive()
    return ["-XX:+VerifySharedSpaces", f"-XX:SharedArchiveFile={path}"] if path else []


def mapped_archive(spark) -> str | None:
    """The class archive ``spark``'s JVM has mapped (from its ``/proc`` maps; Linux), if any:
    whether the JVM really uses one, as the benchmark reports it."""
    try:
        pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                name = line.rstrip("\n").split(maxsplit=5)[-1]
                if name.endswith(".jsa") and Path(name).name.startswith("spark-"):
                    return name
    except Exception:  # noqa: BLE001 - not Linux, or no JVM of ours: not known
        return None
    return None


# ----------------------------------------------------------------------------- build

def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lock(path: Path) -> bool:
    """Take ``path`` as a lock (O_EXCL); a lock left by a dead process is taken over."""
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                pid = int(path.read_text().strip() or "0")
            except (OSError, ValueError):
                pid = 0
            try:
                fresh = time.time() - path.stat().st_mtime < 60
            except OSError:
                fresh = False
            if (pid and _alive(pid)) or (not pid and fresh):   # no pid yet: just being taken
                return False
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True
    return False


def _prune(directory: Path, keep: Path) -> list[Path]:
    """Remove other archives of ``keep``'s key (earlier builds), all but the newest ``KEEP``
    archives overall (always keeping ``keep``), and temporary files of builders that are gone."""
    removed = []
    archives = sorted(directory.glob("spark-*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    others = [a for a in archives if a != keep]
    for p in [a for a in others if _key(a) == _key(keep)] + \
             [a for a in others if _key(a) != _key(keep)][KEEP - 1:]:
        p.unlink(missing_ok=True)
        removed.append(p)
    for tmp in directory.glob("spark-*.*.tmp"):
        try:
            pid = int(tmp.name.split(".")[-2])
        except ValueError:
            continue
        if not _alive(pid):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def _stop_and_wait(spark, timeout: float) -> int:
    """Stop ``spark`` and its JVM, and wait for the JVM to exit (it writes the archive as it
    exits); its exit code."""
    gateway = spark.sparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is None:
        raise BuildError("the Spark JVM was not started by this process; cannot wait for it")
    spark.stop()
    try:
        gateway.shutdown()
    except Exception:  # noqa: BLE001 - the JVM exits when its input closes anyway
        pass
    if proc.stdin is not None:
        proc.stdin.close()   # pyspark's gateway server exits when its input closes
    return proc.wait(timeout=timeout)


def _sample_nights(spark, workdir: Path, transactions: int, say) -> None:
    """The build's workload: the embedded sample configuration's sources, two nights, the
    first run as a small night runs (no code generation), the second with it."""
    from .config import DEFAULT_CONFIG, load_config
    from .paths import DataRoot
    from .pipeline import run_night
    from .spark import SMALL_NIGHT_SQL
    from .synthcmd import synth

    cfg = load_config(DEFAULT_CONFIG)
    root = DataRoot.of(str(workdir))
    first = _dt.date(2026, 1, 1)
    synth(cfg, cfg.select(None), root, first, 2, transactions, 0)
    for day, codegen in ((first, False), (first + _dt.timedelta(days=1), True)):
        for key, value in SMALL_NIGHT_SQL.items():
            if codegen:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
        t = time.monotonic()
        result = run_night(day.isoformat(), str(DEFAULT_CONFIG), str(workdir), spark=spark)
        say(f"  sample night {day} ({'code generation' if codegen else 'small night'}): "
            f"{'published' if result.published else 'not published'} in {time.monotonic() - t:.1f} s")


def build(force: bool = False, transactions: int = BUILD_TRANSACTIONS, say=print,
          workload=None) -> dict:
    """Build this runtime's archive if it is missing (or ``force``). Returns
    {"path", "status": "exists" | "built" | "busy" | "off", "bytes", "seconds"}; raises
    ``BuildError`` when a build fails (no archive is left behind then).
    ``workload(spark, workdir, transactions, say)``: what the building JVM runs (default
    ``_sample_nights``)."""
    from .spark import get_session, jvm_running

    pattern = archive_path()
    if pattern is None:
        why = f"{ENV}=off" if cache_dir() is None else "no java or no Spark jars found"
        return {"path": None, "status": "off", "why": why}
    found = find_archive()
    if found is not None and not force:
        return {"path": str(found), "status": "exists", "bytes": found.stat().st_size}
    if jvm_running():
        raise BuildError("a Spark JVM already runs in this process; build the archive in a new one")
    directory, key = pattern.parent, _key(pattern)
    directory.mkdir(parents=True, exist_ok=True)
    lock = directory / f"{key}.lock"
    if not _lock(lock):
        return {"path": None, "status": "busy", "why": f"another process builds it ({lock})"}
    tmp = directory / f"{key}.{os.getpid()}.tmp"
    t0 = time.monotonic()
    spark = None
    try:
        tmp.unlink(missing_ok=True)
        options = " ".join(["-XX:+VerifySharedSpaces", f"-XX:ArchiveClassesAtExit={tmp}", *QUIET])
        spark = get_session("local[2]", app="dblog-jvm-cache",
                            conf={"spark.driver.extraJavaOptions": options})
        spark.sparkContext.setLogLevel("ERROR")    # the sample nights' WARN lines are not news
        with tempfile.TemporaryDirectory(prefix="dblog-jvm-cache-") as work:
            (workload or _sample_nights)(spark, Path(work), transactions, say)
            t = time.monotonic()
            rc, spark = _stop_and_wait(spark, BUILD_TIMEOUT_S), None
        say(f"  the JVM wrote its classes and exited in {time.monotonic() - t:.1f} s (exit code {rc})")
        if rc != 0:
            raise BuildError(f"the JVM exited with {rc} while writing {tmp}")
        if not tmp.exists():
            raise BuildError(f"the JVM exited without writing a class archive to {tmp}")
        size = tmp.stat().st_size
        path = directory / f"{key}.{size}.jsa"
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())      # whole on disk before it takes its name
        os.replace(tmp, path)
        if not is_archive(path):
            path.unlink(missing_ok=True)
            raise BuildError(f"the JVM exited without writing a class archive to {tmp}")
        _prune(directory, path)
    except BaseException:
        if spark is not None:     # the workload failed: stop the JVM before its file goes
            try:
                _stop_and_wait(spark, 120)
            except Exception:  # noqa: BLE001 - the first failure is the one to report
                pass
        tmp.unlink(missing_ok=True)
        raise
    finally:
        lock.unlink(missing_ok=True)
    return {"path": str(path), "status": "built", "bytes": size,
            "seconds": round(time.monotonic() - t0, 1)}


def command(force: bool = False) -> int:
    """``dblog jvm-cache``: build the archive if missing; exit 0 unless a build failed."""
    if archive_path() is not None and (force or find_archive() is None):
        print(f"jvm-cache: building the Spark JVM's class archive in {archive_path().parent} "
              f"(one JVM runs two small sample nights, 1-2 minutes)", flush=True)
    try:
        done = build(force=force)
    except BuildError as exc:
        print(f"jvm-cache: not built: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - e.g. the directory not writable, a sample night failed
        print(f"jvm-cache: not built: {type(exc).__name__}: {exc}; Spark starts without it",
              file=sys.stderr)
        return 1
    if done["status"] == "built":
        print(f"jvm-cache: built {done['path']} ({done['bytes'] // 2**20} MB) in {done['seconds']} s")
    elif done["status"] == "exists":
        print(f"jvm-cache: up to date: {done['path']} ({done['bytes'] // 2**20} MB)")
    else:
        print(f"jvm-cache: not built ({done['why']}); Spark starts without it")
    return 0
