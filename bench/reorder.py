"""Rerun only the ordering stage (``dblog.ordering.order_stage``) on a kept run directory.

    python -m bench run --n 200000 --formats all --keep-work --out OUT
    # the run dir: OUT/work/scale-<stamp>/data/multirun/staging/bench
    python -m bench.reorder RUN_DIR NEW_DIR [--repeat 2] [--master local[2]]

``RUN_DIR`` is a run's ``staging/<run_id>`` (its decoded ``events``, ``manifest.json`` and
``decode_units.json``);
``NEW_DIR`` gets links to them and the ordering's outputs (changes, transactions, audit,
quarantine, state, ordering/), so the kept run is left as it is. Each repeat prints the
stage's wall seconds and the JVM's CPU seconds; the first repeat pays the JVM's warm-up. With
``DBLOG_SPARK_EVENT_LOG=DIR`` the per-query task times are in ``python -m bench.eventlog DIR``.
Compare two versions of the code within one machine state (A, B, A), with the load printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

CLK = os.sysconf("SC_CLK_TCK")


def jvm_cpu(pid: int) -> float:
    """user + system CPU seconds of the JVM (every thread: tasks, GC, JIT; not the Python
    workers, whose time is in the tasks' run time of the event log)."""
    f = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / CLK


def prepare(run_dir: Path, new_dir: Path) -> None:
    from dblog.decode import EVENTS_DIR, UNITS_FILE
    from dblog.stage import MANIFEST

    if new_dir.exists():
        shutil.rmtree(new_dir)
    new_dir.mkdir(parents=True)
    # (the decode's record of its units too: without it the ordering cannot tell that no
    # position repeats, and runs the search a real run skips)
    for name in (EVENTS_DIR, MANIFEST, UNITS_FILE):
        if (run_dir / name).exists():
            (new_dir / name).symlink_to((run_dir / name).resolve())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.reorder", description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir")
    p.add_argument("new_dir")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--master", default="local[2]")
    args = p.parse_args(argv)

    from dblog.ordering import order_stage
    from dblog.spark import get_session
    from dblog.stage import load_manifest

    run_dir, new_dir = Path(args.run_dir), Path(args.new_dir)
    prepare(run_dir, new_dir)
    manifest = load_manifest(new_dir)
    spark = get_session(args.master, app="reorder")
    jvm_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    for i in range(args.repeat):
        load = os.getloadavg()[0]
        c0 = jvm_cpu(jvm_pid)
        t0 = time.time()
        order_stage(spark, manifest, new_dir)
        wall = time.time() - t0
        print(f"reorder {i + 1}: wall {wall:.1f} s, JVM CPU {jvm_cpu(jvm_pid) - c0:.1f} s "
              f"(load {load:.2f} -> {os.getloadavg()[0]:.2f})", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
