"""One way to build the SparkSession, shared by ``dblog run``, the jobs and the tests.

Memory and shuffle defaults (docs/ARCHITECTURE.md, "Memory"):

* **Shuffle partitions follow the data**: adaptive query execution is on, shuffles start
  from ``INITIAL_PARTITIONS`` partitions and are coalesced to about
  ``ADVISORY_PARTITION_SIZE`` each (``parallelismFirst`` off, so the advisory size, not the
  core count, decides), skewed partitions of joins and rebalances are split.
  ``DBLOG_SHUFFLE_PARTITIONS`` still fixes the initial number.
* **The local JVM is sized from the machine**: when this process starts the JVM itself in
  local mode (``dblog run``, the tests, the benchmark), ``spark.driver.memory`` (the heap of
  the one JVM that is driver and executor at once) defaults to ``DRIVER_MEMORY_FRACTION`` of
  the physical memory (or of the cgroup limit when lower), at least ``MIN_DRIVER_MEMORY_MB``.
  ``DBLOG_DRIVER_MEMORY`` (e.g. ``6g``) overrides it. It must be set before the JVM starts,
  so it is only applied when no JVM runs yet: under ``spark-submit`` (the Airflow DAG, a
  cluster) the JVM is already up and the cluster's own settings (``--driver-memory``,
  ``spark-defaults.conf``, executor memory) are never overridden; neither is a
  ``spark.driver.memory`` that ``PYSPARK_SUBMIT_ARGS`` or ``spark-defaults.conf`` sets.
* **The JIT compiles for the run's length**: a local JVM that will work on a small night
  (``night_bytes`` at most ``SMALL_NIGHT_BYTES``: ``dblog run`` knows it from the staged
  archives before it starts the JVM; the tests' shared session says so) raises HotSpot's
  thresholds for its optimising compiler (C2, ``SMALL_NIGHT_JIT``). On the ``make run`` night
  the C2 compiler threads took 47 of the 121 CPU seconds of the whole run, compiling Spark's
  own code paths that a small night runs a few thousand times; with the raised thresholds
  such code stays with the quick compiler (C1) and the hot loops of a bigger input still
  reach C2. ``DBLOG_JIT`` = ``small`` / ``default`` forces one or the other; nothing is set
  under ``spark-submit``, for a non-local master, or when ``spark.driver.extraJavaOptions``
  is configured elsewhere.
* **A small night runs without code generation**: the same small local JVM (``night_bytes``
  at most ``SMALL_NIGHT_BYTES``) gets ``SMALL_NIGHT_SQL``: no whole-stage code generation and
  interpreted expressions, so the night's queries do not compile generated Java for a few
  thousand rows. ``DBLOG_CODEGEN`` = ``small`` / ``default`` forces one or the other; the
  same rules as for the JIT otherwise.
* **Python workers start with the decoders loaded**: Spark forks every Python worker from one
  daemon per executor; ``spark.python.daemon.module`` is set to ``DAEMON_MODULE``
  (``dblog/pydaemon.py``: pyspark's daemon after importing pyarrow, pandas, the decoders and
  ``dblog.decode`` once), so no worker's first task pays those imports. Set only where the
  workers can import it (``daemon_settings``: for a local master the workers' interpreter is
  asked; elsewhere, where the driver can, as the executors already import ``dblog`` to
  decode), since Spark has no fallback: a daemon that does not start fails every Python
  task. ``DBLOG_PYTHON_DAEMON`` names another module, or ``pyspark`` for Spark's own; a
  ``spark.python.daemon.module`` set by ``PYSPARK_SUBMIT_ARGS`` or ``spark-defaults.conf``
  is kept.
* **The JVM maps the classes it loads from an archive** when ``dblog jvm-cache`` built one
  for this Java runtime and Spark (``dblog.jvmcache``; ``class_archive_options``): a local
  JVM this process starts gets ``-XX:SharedArchiveFile`` beside the JIT's options, under
  the same rules (nothing under spark-submit, for a non-local master, or when
  ``spark.driver.extraJavaOptions`` is configured elsewhere); ``DBLOG_JVM_CACHE=off`` turns
  it off.
* ``DBLOG_SPARK_EVENT_LOG=DIR`` writes Spark's event log there (``python -m bench.eventlog
  DIR`` says which queries, jobs and tasks a run spent its time on).
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

log = logging.getLogger(__name__)

DRIVER_MEMORY_FRACTION = 0.25      # of physical memory, for the local JVM's heap
MIN_DRIVER_MEMORY_MB = 1024        # Spark's own default
INITIAL_PARTITIONS = 64            # shuffle partitions before AQE coalesces them
ADVISORY_PARTITION_SIZE = "64m"    # target size of a shuffle partition after coalescing
SMALL_NIGHT_BYTES = 64 * 1024 * 1024   # archives of a night up to which the JIT is set for short work
# HotSpot's defaults are 5000 / 600 / 15000 / 40000 (docs/BENCHMARK.md, "The JIT on a small night")
SMALL_NIGHT_JIT = ("-XX:Tier4InvocationThreshold=200000 -XX:Tier4MinInvocationThreshold=100000 "
                   "-XX:Tier4CompileThreshold=300000 -XX:Tier4BackEdgeThreshold=400000")

# Spark SQL for a small night: no code generation, whole-stage or per expression (docs/BENCHMARK.md,
# "make run, ninth session"): a small night's ~40 queries each compiled their generated Java
# (Janino, then the JIT) for a few thousand rows; interpreted, the same plans give the same
# rows (Spark runs its expression tests both ways) for less CPU.
SMALL_NIGHT_SQL = {"spark.sql.codegen.wholeStage": "false",
                   "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
CODEGEN_ENV = "DBLOG_CODEGEN"

DAEMON_MODULE = "dblog.pydaemon"   # Spark's Python daemon with the decoders preloaded
DAEMON_ENV = "DBLOG_PYTHON_DAEMON"

DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.parquet.compression.codec": "zstd",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": ADVISORY_PARTITION_SIZE,
    "spark.sql.adaptive.skewJoin.enabled": "true",
    "spark.sql.adaptive.optimizeSkewsInRebalancePartitions.enabled": "true",
    # a persisted intermediate (ordering's events, the mirror's key events) is coalesced
    # like any shuffle, not kept at the initial partition count
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
}


def physical_memory_bytes() -> int | None:
    """Physical memory of the machine, or the cgroup (v2 or v1) limit of this process when lower."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) > 0:
            limit = int(text)
            total = limit if total is None else min(total, limit)
    return total


def default_driver_memory(total: int | None = None) -> str:
    """``spark.driver.memory`` for a local JVM: a fraction of the machine's memory, in MiB."""
    total = physical_memory_bytes() if total is None else total
    if not total:
        return f"{MIN_DRIVER_MEMORY_MB}m"
    mb = int(total * DRIVER_MEMORY_FRACTION) // (1024 * 1024)
    return f"{max(MIN_DRIVER_MEMORY_MB, mb)}m"


def jvm_running() -> bool:
    """True under spark-submit (the JVM started this Python process) or with a live gateway."""
    from pyspark import SparkContext

    return bool(os.environ.get("PYSPARK_GATEWAY_PORT")) or SparkContext._gateway is not None


def _driver_memory_configured_elsewhere() -> bool:
    return _configured_elsewhere("spark.driver.memory", "--driver-memory")


def _configured_elsewhere(key: str, flag: str) -> bool:
    """``key`` (or the spark-submit ``flag``) set by ``PYSPARK_SUBMIT_ARGS`` or a
    ``spark-defaults.conf`` of ``SPARK_CONF_DIR`` / ``SPARK_HOME``."""
    if re.search(re.escape(flag) + "|" + re.escape(key), os.environ.get("PYSPARK_SUBMIT_ARGS", "")):
        return True
    dirs = [os.environ.get("SPARK_CONF_DIR")]
    if os.environ.get("SPARK_HOME"):
        dirs.append(os.path.join(os.environ["SPARK_HOME"], "conf"))
    for d in filter(None, dirs):
        try:
            text = Path(d, "spark-defaults.conf").read_text()
        except OSError:
            continue
        if re.search(r"^\s*" + re.escape(key) + r"\b", text, re.M):
            return True
    return False


def memory_settings(master: str | None) -> dict[str, str]:
    """The JVM memory settings this process applies when it starts a Spark JVM for ``master``."""
    if jvm_running():         # too late, and under spark-submit not ours to set
        return {}
    if os.environ.get("DBLOG_DRIVER_MEMORY"):
        return {"spark.driver.memory": os.environ["DBLOG_DRIVER_MEMORY"]}
    local = master is None or master.startswith("local")
    if not local or _driver_memory_configured_elsewhere():
        return {}
    return {"spark.driver.memory": default_driver_memory()}


def jit_settings(master: str | None, night_bytes: int | None = None) -> dict[str, str]:
    """The JVM options this process gives a local Spark JVM it starts for a night of
    ``night_bytes`` archive bytes: ``SMALL_NIGHT_JIT`` for a small night, nothing (HotSpot's
    defaults) for a big one or when the size is not known (None), nothing when the JVM is
    not ours to configure."""
    if jvm_running():
        return {}
    local = master is None or master.startswith("local")
    if not local or _configured_elsewhere("spark.driver.extraJavaOptions", "--driver-java-options"):
        return {}
    mode = os.environ.get("DBLOG_JIT", "").strip().lower()
    if mode not in ("", "small", "default"):
        raise ValueError(f"DBLOG_JIT={mode!r}: expected 'small' or 'default'")
    if mode == "default" or (not mode and (night_bytes is None or night_bytes > SMALL_NIGHT_BYTES)):
        return {}
    return {"spark.driver.extraJavaOptions": SMALL_NIGHT_JIT}


def class_archive_options(master: str | None) -> list[str]:
    """The JVM options that map the class archive ``dblog jvm-cache`` built
    (``dblog.jvmcache``) into a local JVM this process starts: none when there is no
    archive, when the JVM runs already, for a non-local master, or when
    ``spark.driver.extraJavaOptions`` is configured elsewhere."""
    from .jvmcache import java_options

    if jvm_running():
        return []
    local = master is None or master.startswith("local")
    if not local or _configured_elsewhere("spark.driver.extraJavaOptions", "--driver-java-options"):
        return []
    return java_options()


def java_settings(master: str | None, night_bytes: int | None = None) -> dict[str, str]:
    """``spark.driver.extraJavaOptions`` of a local JVM this process starts: the JIT's
    (``jit_settings``) and the class archive's (``class_archive_options``), or nothing."""
    options = [o for o in (jit_settings(master, night_bytes).get("spark.driver.extraJavaOptions"),) if o]
    options += class_archive_options(master)
    return {"spark.driver.extraJavaOptions": " ".join(options)} if options else {}


def codegen_settings(master: str | None, night_bytes: int | None = None) -> dict[str, str]:
    """``SMALL_NIGHT_SQL`` for a local session of a small night (the rules of ``jit_settings``:
    at most ``SMALL_NIGHT_BYTES``, local master, a JVM this process starts), nothing (Spark's
    code generation) otherwise. ``DBLOG_CODEGEN`` = ``small`` / ``default`` forces one or the
    other; a key set elsewhere (``PYSPARK_SUBMIT_ARGS``, ``spark-defaults.conf``) is kept."""
    mode = os.environ.get(CODEGEN_ENV, "").strip().lower()
    if mode not in ("", "small", "default"):
        raise ValueError(f"{CODEGEN_ENV}={mode!r}: expected 'small' or 'default'")
    if jvm_running() or mode == "default":
        return {}
    local = master is None or master.startswith("local")
    if not local or (not mode and (night_bytes is None or night_bytes > SMALL_NIGHT_BYTES)):
        return {}
    return {k: v for k, v in SMALL_NIGHT_SQL.items() if not _configured_elsewhere(k, k)}


def _workers_can_import(module: str, python: str) -> bool:
    """Whether ``python`` (the workers' interpreter), started as Spark starts a local
    executor's daemon (this process's environment and working directory), finds ``module``."""
    code = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 3)"
    try:
        done = subprocess.run([python, "-c", code, module], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _driver_can_import(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def daemon_settings(master: str | None) -> dict[str, str]:
    """``spark.python.daemon.module`` for a session on ``master``: ``DAEMON_MODULE`` (or the
    module ``DBLOG_PYTHON_DAEMON`` names; ``pyspark`` / ``off``: Spark's own daemon) when the
    Python workers can import it, else nothing (Spark's own daemon, with a warning). Nothing
    when ``spark.python.daemon.module`` is configured elsewhere."""
    module = os.environ.get(DAEMON_ENV, "").strip() or DAEMON_MODULE
    if module.lower() in ("pyspark", "pyspark.daemon", "off", "0", "none"):
        return {}
    if _configured_elsewhere("spark.python.daemon.module", "spark.python.daemon.module"):
        return {}
    local = master is None or master.startswith("local")
    python = os.environ.get("PYSPARK_PYTHON") or sys.executable
    ok = _workers_can_import(module, python) if local else _driver_can_import(module)
    if not ok:
        log.warning("the Python workers cannot import %s (%s); Spark's own daemon is used, "
                    "so each worker imports the decoders on its first task", module,
                    python if local else "not importable in the driver")
        return {}
    return {"spark.python.daemon.module": module}


def get_session(master: str | None = None, app: str = "dblog", conf: dict | None = None,
                night_bytes: int | None = None):
    """The active session, or a new one. ``master`` is only used when no session exists
    (under spark-submit the master comes from the Spark connection); ``night_bytes``, the
    archive bytes of the night it will run, sets the JIT of a local JVM (``jit_settings``)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app)
    master = master or os.environ.get("DBLOG_SPARK_MASTER")
    if master:
        builder = builder.master(master)
    settings = dict(DEFAULT_CONF)
    settings["spark.sql.shuffle.partitions"] = os.environ.get("DBLOG_SHUFFLE_PARTITIONS",
                                                              str(INITIAL_PARTITIONS))
    settings.update(memory_settings(master))
    settings.update(java_settings(master, night_bytes))
    settings.update(codegen_settings(master, night_bytes))
    settings.update(daemon_settings(master))
    if os.environ.get("DBLOG_SPARK_EVENT_LOG"):     # for `python -m bench.eventlog DIR`
        settings.update({"spark.eventLog.enabled": "true", "spark.eventLog.compress": "false",
                         "spark.eventLog.dir": Path(os.environ["DBLOG_SPARK_EVENT_LOG"]).resolve().as_uri()})
        Path(os.environ["DBLOG_SPARK_EVENT_LOG"]).mkdir(parents=True, exist_ok=True)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("DBLOG_SPARK_LOG_LEVEL", "WARN"))
    return spark
