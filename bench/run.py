"""The benchmark CLI: ``python -m bench [--n N] [--formats ...] [--masters ...]``.

For each format: generate (or reuse from ``bench/cache/``) a night of about N changes with
the project's encoders, then measure, each in its own subprocess (clean JVM and master):

* ``decode``   the project's decode job (``dblog.pipeline.decode_night``) on each master;
* ``plain``    baseline (a), the hand-written single-process decoder (``bench/plain.py``);
* ``udf``      baseline (b), a row-at-a-time Python UDF in Spark (``bench/udf.py``), each master;
* ``run``      the whole ``dblog run`` (stage, decode, order, validate, publish) on one master;
* ``decode@N/10`` the decode job on a night ten times smaller (driver memory must stay flat).

Results: ``bench/results/<stamp>.json`` and ``.md`` (also ``latest.json``/``latest.md``);
``python -m bench compare A.json B.json`` compares two runs; ``python -m bench cpu`` measures
the in-process decode CPU rate per format against baseline (a) (``bench/cpu.py``). The scale
measurements of issue 14 are ``python -m bench run ...`` and ``python -m bench tables ...``
(``bench/scale.py``); ``python -m bench publish`` measures the publish after 1 and after
100 published nights (``bench/publish.py``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from . import gen
from .measure import run_job
from .report import compare, markdown, targets

REPO = gen.REPO
RESULTS = REPO / "bench" / "results"


def machine() -> dict:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = ""
    import pyspark

    from dblog.jvmcache import find_archive

    archive = find_archive()
    return {"jvm_class_archive": str(archive) if archive else None,
            "nproc": os.cpu_count(), "cpu": cpu, "memory": mem, "platform": platform.platform(),
            "python": platform.python_version(), "pyspark": pyspark.__version__,
            "commit": commit, "loadavg_start": [round(x, 2) for x in os.getloadavg()]}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1_000_000,
                   help="changes per format (default 1,000,000)")
    p.add_argument("--formats", default=",".join(gen.FORMATS),
                   help="comma-separated formats (default all five)")
    p.add_argument("--masters", default="local[1],local[2]",
                   help="Spark masters for the decode job and baseline (b)")
    p.add_argument("--run-master", default="local[2]",
                   help="master of the whole-run measurement ('' to skip it)")
    p.add_argument("--no-baselines", action="store_true", help="skip baselines (a) and (b)")
    p.add_argument("--no-scale", action="store_true", help="skip the N/10 driver-memory run")
    p.add_argument("--shared", action="store_true",
                   help="one subprocess per job and master for all formats (faster, less "
                        "clean per-format memory); default: one per format")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", default=str(gen.CACHE), help="night cache (default bench/cache)")
    p.add_argument("--out", default=str(RESULTS), help="results directory (default bench/results)")
    p.add_argument("--label", default="", help="a label stored with the results")
    p.add_argument("--keep-work", action="store_true", help="keep the jobs' output data")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "cpu":
        from . import cpu

        return cpu.main(argv[1:])
    if argv and argv[0] == "compare":
        print(compare(json.loads(Path(argv[1]).read_text()), json.loads(Path(argv[2]).read_text())))
        return 0
    if argv and argv[0] == "publish":
        from .publish import main as publish_main

        return publish_main(argv[1:])
    if argv and argv[0] in ("run", "tables"):
        from . import scale

        return scale.main_run(argv[1:]) if argv[0] == "run" else scale.main_tables(argv[1:])
    args = _parser().parse_args(argv)
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    bad = [f for f in formats if f not in gen.FORMATS]
    if bad or not formats:
        print(f"bench: unknown formats {bad}; known: {', '.join(gen.FORMATS)}", file=sys.stderr)
        return 2
    masters = [m.strip() for m in args.masters.split(",") if m.strip()]
    out = Path(args.out)
    stamp = _dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    work = out / "work" / stamp
    cache = Path(args.cache)

    def log(msg: str) -> None:
        print(msg, flush=True)

    meta = machine()
    meta.update({"n": args.n, "formats": formats, "masters": masters, "label": args.label,
                 "run_master": args.run_master, "shared": args.shared, "stamp": stamp})
    nights = {f: gen.ensure_night(f, args.n, args.seed, cache, log) for f in formats}
    small = {}
    if not args.no_scale and args.n >= 10:
        small = {f: gen.ensure_night(f, args.n // 10, args.seed, cache, log) for f in formats}

    jobs: list[tuple[str, str, str | None, dict]] = []   # (stage label, kind, master, nights)
    for m in masters:
        jobs.append(("decode", "decode", m, nights))
    if not args.no_baselines:
        jobs.append(("plain", "plain", None, nights))
        for m in masters:
            jobs.append(("udf", "udf", m, nights))
    if small:
        jobs.append(("decode@N/10", "decode", masters[-1], small))
    if args.run_master:
        jobs.append(("run", "pipeline", args.run_master, nights))

    rows: list[dict] = []
    for label, kind, master, ns in jobs:
        groups = [list(ns.values())] if args.shared else [[i] for i in ns.values()]
        for group in groups:
            tag = f"{label.replace('/', '_')}-{master or 'python'}-" + \
                  "+".join(i["format"] for i in group)
            tag = tag.replace("[", "").replace("]", "")
            spec = {"repo": str(REPO), "work": str(work / "data"), "master": master,
                    "nights": group}
            load = [round(x, 2) for x in os.getloadavg()]
            log(f"bench: {tag} (load {load[0]}) ...")
            result, sampler, wall = run_job(kind, spec, work, tag, log)
            for info in group:
                fmt = info["format"]
                res = result["formats"][fmt]
                for phase, (t0, t1) in res["phases"].items():
                    stage = label if kind != "pipeline" else \
                        ("run" if phase == "run" else f"run:{phase}")
                    row = {"format": fmt, "stage": stage, "master": master or "python",
                           "seconds": round(t1 - t0, 3), "bytes": info["bytes"],
                           "n": info["n"], "memory_mb": sampler.peaks(t0, t1),
                           "load1": load[0], "job_seconds": round(wall, 1)}
                    for k in ("records", "rows", "changes", "published"):
                        if k in res:
                            row[k] = res[k]
                    rows.append(row)
                log(f"bench:   {fmt}: " + ", ".join(
                    f"{p} {t1 - t0:.1f}s" for p, (t0, t1) in res["phases"].items()))
    meta["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    report = {"meta": meta, "nights": nights, "small_nights": small, "rows": rows}
    _fill_rates(report)
    report["targets"] = targets(report)
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(report, indent=1, default=str)
    md = markdown(report)
    for name in (stamp, "latest"):
        (out / f"{name}.json").write_text(text)
        (out / f"{name}.md").write_text(md)
    if not args.keep_work:
        shutil.rmtree(work / "data", ignore_errors=True)
    print(md)
    print(f"bench: results in {out / (stamp + '.json')} and .md")
    return 0


def _fill_rates(report: dict) -> None:
    """records/s and MB/s per row; the record count of a format is what the project's
    decode job read (sum of ``n_records``), for every row of that format and night size."""
    canon: dict[tuple, int] = {}
    for r in report["rows"]:
        if r["stage"] in ("decode", "decode@N/10", "run:decode") and r.get("records"):
            canon.setdefault((r["format"], r["n"]), r["records"])
    for r in report["rows"]:
        recs = canon.get((r["format"], r["n"])) or r.get("records") or 0
        r["records"] = recs
        s = max(r["seconds"], 1e-9)
        r["records_per_s"] = round(recs / s)
        r["mb_per_s"] = round(r["bytes"] / s / 1e6, 2)
