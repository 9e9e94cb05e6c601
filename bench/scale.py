"""Scale measurements of issue 14 (docs/BENCHMARK.md, "Scale (issue 14)"), one command each:

    python -m bench run    --n 1000000 --formats rdb                 # the 1M Rdb night, defaults
    python -m bench run    --n 1000000 --formats all --master local[2]   # five sources x 1M, one run
    python -m bench run    --n 10000000 --parts 10 --formats rdb     # one source, 10M changes
    python -m bench tables --n 200000 --tables 5,500                 # tables stage vs tables touched

``run`` measures one whole ``dblog run`` (``pipeline.run_night``) of the given nights together
(one source per night, all in one run), in its own subprocess with **no memory setting**
(``DBLOG_DRIVER_MEMORY`` is removed from its environment: the defaults of ``dblog/spark.py``
decide; ``--driver-memory 2g`` sets a heap instead, to show what a night needs within a
small one), stage by stage (``order`` split into ``ordering``, ``tables`` and ``mirror``), with the peak
memory of the JVM and the Python processes per stage and the 1-minute load average ("JVM own":
the JVM's anonymous pages, ``measure.anon_rss``; its RSS also counts the shuffle blocks it
maps from files, page cache the kernel can take back).

``tables`` writes one Rdb night per table count with the same number of changes, the
catalog cloned to that many tables (the sample tables, renamed), orders each once and then
times the typed-tables stage twice per night in one JVM (the second, warm, time counts).

Results: ``bench/results/scale-<stamp>.{json,md}`` / ``tables-<stamp>.{json,md}`` (and
``*-latest``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import sys
import time
from pathlib import Path

from . import gen
from .measure import run_job

RESULTS = gen.REPO / "bench" / "results"


def _log(msg: str) -> None:
    print(msg, flush=True)


def _write(out: Path, name: str, stamp: str, report: dict, md: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for tag in (stamp, "latest"):
        (out / f"{name}-{tag}.json").write_text(json.dumps(report, indent=1, default=str))
        (out / f"{name}-{tag}.md").write_text(md)
    print(md)
    print(f"bench: results in {out / f'{name}-{stamp}.json'} and .md")


# ----------------------------------------------------------------- run

def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench run", description="one whole dblog run "
                                "of one or more cached nights, defaults only, per-stage memory")
    p.add_argument("--n", type=int, default=1_000_000, help="changes per source (default 1M)")
    p.add_argument("--formats", default="rdb", help="comma-separated, or 'all' (one source each)")
    p.add_argument("--parts", type=int, default=1,
                   help="generate each night as this many generator nights (needed for 10M)")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", default=str(gen.CACHE))
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--keep-work", action="store_true")
    p.add_argument("--driver-memory", default=None, metavar="SIZE",
                   help="run with this JVM heap (DBLOG_DRIVER_MEMORY, e.g. 2g) instead of the "
                        "defaults: shows what the night needs, not what the defaults allow")
    return p


def main_run(argv: list[str]) -> int:
    args = _run_parser().parse_args(argv)
    formats = list(gen.FORMATS) if args.formats == "all" else \
        [f.strip() for f in args.formats.split(",") if f.strip()]
    bad = [f for f in formats if f not in gen.FORMATS]
    if bad or not formats:
        print(f"bench: unknown formats {bad}", file=sys.stderr)
        return 2
    cache = Path(args.cache)
    nights = [gen.ensure_big_night(f, args.n, args.parts, args.seed, cache, _log)
              if args.parts > 1 else gen.ensure_night(f, args.n, args.seed, cache, _log)
              for f in formats]
    stamp = _dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    work = Path(args.out) / "work" / f"scale-{stamp}"
    spec = {"repo": str(gen.REPO), "work": str(work / "data"), "master": args.master,
            "nights": nights}
    load = [round(x, 2) for x in os.getloadavg()]
    _log(f"bench: run of {len(nights)} night(s) x {args.n:,} changes on {args.master} "
         f"(load {load[0]}) ...")
    env_memory = os.environ.pop("DBLOG_DRIVER_MEMORY", None)
    if args.driver_memory:
        os.environ["DBLOG_DRIVER_MEMORY"] = args.driver_memory
    try:
        result, sampler, wall = run_job("multirun", spec, work, "multirun", _log)
    finally:
        os.environ.pop("DBLOG_DRIVER_MEMORY", None)
        if env_memory is not None:
            os.environ["DBLOG_DRIVER_MEMORY"] = env_memory
    records = result["records"]
    rows = []
    for phase, (t0, t1) in result["phases"].items():
        s = max(t1 - t0, 1e-9)
        rows.append({"stage": phase, "seconds": round(t1 - t0, 2), "records": records,
                     "records_per_s": round(records / s), "memory_mb": sampler.peaks(t0, t1)})
    report = {"meta": {"stamp": stamp, "n": args.n, "formats": formats, "parts": args.parts,
                       "master": args.master, "load_start": load,
                       "load_end": [round(x, 2) for x in os.getloadavg()],
                       "driver_memory": result.get("driver_memory"),
                       "driver_memory_set": bool(args.driver_memory), "commit": _commit()},
              "nights": nights, "published": result["published"], "failures": result["failures"],
              "changes": result.get("changes"), "rows": rows, "job_seconds": round(wall, 1)}
    _write(Path(args.out), "scale", stamp, report, _run_md(report))
    if not args.keep_work:
        shutil.rmtree(work / "data", ignore_errors=True)
    return 0 if result["published"] else 1


def _run_md(r: dict) -> str:
    m = r["meta"]
    out = [f"## dblog run: {len(m['formats'])} source(s) ({', '.join(m['formats'])}) x {m['n']:,} "
           f"changes, {m['master']}", "",
           f"spark.driver.memory {m['driver_memory']} "
           f"({'set: --driver-memory' if m.get('driver_memory_set') else 'defaults, no setting'}); load average "
           f"{m['load_start'][0]} at the start, {m['load_end'][0]} at the end; published: "
           f"{r['published']}; records read {r['rows'][0]['records']:,}; changes published "
           f"{r.get('changes')}", "",
           "| stage | seconds | records/s | JVM peak MB | JVM own MB | driver py MB | workers MB | tree MB |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in r["rows"]:
        mem = row["memory_mb"]
        out.append(f"| {row['stage']} | {row['seconds']:.1f} | {row['records_per_s']:,} | "
                   f"{mem['jvm']:,.0f} | {mem.get('jvm_anon', 0):,.0f} | {mem['driver']:,.0f} | "
                   f"{mem['workers']:,.0f} | {mem['tree']:,.0f} |")
    return "\n".join(out) + "\n"


def _commit() -> str:
    import subprocess

    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=gen.REPO,
                              capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


# ----------------------------------------------------------------- tables

def wide_catalog(base: dict, n_tables: int) -> dict:
    """``base`` (an Rdb catalog) cloned to ``n_tables`` tables: the sample tables in turn,
    each copy with its own RECORD_TYPE id and name."""
    tables = []
    for i in range(n_tables):
        t = dict(base["tables"][i % len(base["tables"])])
        t["id"] = str(1000 + i)
        t["name"] = f"{t['name'][:24]}_{i:04d}"
        t.pop("initial_snapshot", None)
        tables.append(t)
    return {**base, "tables": tables}


def ensure_tables_night(n: int, n_tables: int, seed: int, cache: Path) -> dict:
    """An Rdb night of about ``n`` changes over a catalog of ``n_tables`` tables (cached)."""
    import yaml

    from decoders import get
    from decoders.catalog import parse_catalog

    root = Path(cache) / f"rdb-tables{n_tables}-n{n}-s{seed}-{gen._code_hash('rdb')}"
    info_path = root / "night.json"
    if info_path.is_file():
        return json.loads(info_path.read_text())
    src = gen.sample_sources()["rdb"]
    catalog = wide_catalog(json.loads(Path(src["catalog"]).read_text()), n_tables)
    tmp = root.with_name(root.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "catalog.json").write_text(json.dumps(catalog, indent=1))
    src = {**src, "catalog": str(root / "catalog.json")}
    trx = max(1, round(n / gen.mean_changes("rdb")))
    _log(f"bench: generating rdb over {n_tables} tables: {trx} transactions ...")
    t0 = time.monotonic()
    synth = get("rdb").Synth(src["name"], catalog=parse_catalog(catalog, "<wide catalog>"),
                             options=src.get("options") or {}, seed=seed,
                             timezone=src.get("timezone", "UTC"))
    night = synth.night(_dt.date.fromisoformat(gen.DATE), trx)
    land = tmp / "landing" / src["name"] / gen.DATE
    land.mkdir(parents=True)
    for name, data in night.archives.items():
        (land / name).write_bytes(data)
    touched = {e.table_id for e in night.expected}
    info = {"format": "rdb", "source": src["name"], "date": gen.DATE, "n": n, "tables": n_tables,
            "tables_touched": len(touched),
            "changes_written": sum(len(t.changes) for t in night.trxs),
            "bytes": sum(len(v) for v in night.archives.values()),
            "generate_seconds": round(time.monotonic() - t0, 2)}
    del night, synth
    shutil.rmtree(root, ignore_errors=True)
    tmp.rename(root)
    (root / "sources.yaml").write_text(yaml.safe_dump({"sources": [src]}))
    info["root"] = str(root)
    info_path.write_text(json.dumps(info, indent=1))
    return info


def _tables_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench tables",
                                description="typed-tables stage time vs number of tables touched")
    p.add_argument("--n", type=int, default=200_000, help="changes per night (default 200,000)")
    p.add_argument("--tables", default="5,500", help="table counts, comma-separated (default 5,500)")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", default=str(gen.CACHE))
    p.add_argument("--out", default=str(RESULTS))
    return p


def main_tables(argv: list[str]) -> int:
    args = _tables_parser().parse_args(argv)
    counts = [int(x) for x in args.tables.split(",") if x.strip()]
    nights = [ensure_tables_night(args.n, k, args.seed, Path(args.cache)) for k in counts]
    stamp = _dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    work = Path(args.out) / "work" / f"tables-{stamp}"
    spec = {"repo": str(gen.REPO), "work": str(work / "data"), "master": args.master,
            "nights": nights}
    load = [round(x, 2) for x in os.getloadavg()]
    _log(f"bench: tables stage for {counts} tables, {args.n:,} changes each (load {load[0]}) ...")
    result, sampler, wall = run_job("tables", spec, work, "tables", _log)
    rows = []
    for info, res in zip(nights, result["nights"]):
        rows.append({"tables": info["tables"], "tables_written": res["tables_written"],
                     "changes": res["changes"], "seconds": [round(s, 2) for s in res["seconds"]],
                     "files": res["files"]})
    base = rows[0]["seconds"][-1]
    for row in rows:
        row["ratio"] = round(row["seconds"][-1] / base, 2) if base else None
    report = {"meta": {"stamp": stamp, "n": args.n, "master": args.master, "load_start": load,
                       "load_end": [round(x, 2) for x in os.getloadavg()], "commit": _commit()},
              "rows": rows, "job_seconds": round(wall, 1)}
    md = [f"## Typed tables stage, {args.n:,} changes per night, {args.master}", "",
          f"load average {load[0]} at the start, {report['meta']['load_end'][0]} at the end", "",
          "| tables in catalog | tables written | changes | seconds (cold, warm) | files | warm vs first |",
          "|---:|---:|---:|---|---:|---:|"]
    for row in rows:
        md.append(f"| {row['tables']} | {row['tables_written']} | {row['changes']:,} | "
                  f"{', '.join(str(s) for s in row['seconds'])} | {row['files']} | {row['ratio']} |")
    shutil.rmtree(work / "data", ignore_errors=True)
    _write(Path(args.out), "tables", stamp, report, "\n".join(md) + "\n")
    return 0
