"""Where a run's Spark time went, from Spark's event log (docs/BENCHMARK.md, "Small nights").

    DBLOG_SPARK_EVENT_LOG=/tmp/ev dblog run --date D --data-root R
    python -m bench.eventlog /tmp/ev            # the latest event log in the folder
    python -m bench.eventlog /tmp/ev --stages   # and, under each query, its stages
    python -m bench.eventlog /tmp/ev --busy     # running tasks per half second

Prints one line per SQL query (execution) in submission order: when it started (seconds
after the first), its wall seconds, its Spark jobs and tasks, the tasks' summed run time
and JVM CPU time, and what submitted it; then the totals. A query of many jobs is a query
of many adaptive stages (each shuffle is one); a task run time far above its CPU time is
time in Python workers or waiting for a core.

With ``--stages`` each query is followed by its stages (one line each: tasks, run and CPU
seconds, GC seconds, and the operators' summed metrics that say where the time went: sort,
aggregation build, scan, shuffle write time and bytes, spill), to tell which operator of a
query costs what.

With ``--busy`` it prints instead, per half second from the first task, how many tasks were
running (their summed share of the interval) and which stages, then the seconds in which
fewer tasks than cores ran (``--cores``, default 2): where a core had nothing to do (one
task alone: a stage AQE coalesced into one partition; no task: the driver planning).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def latest_log(folder: Path) -> Path:
    logs = [p for p in Path(folder).rglob("events_*") if p.is_file()] or \
        [p for p in Path(folder).iterdir() if p.is_file()]
    if not logs:
        raise SystemExit(f"no Spark event log in {folder}")
    return max(logs, key=lambda p: p.stat().st_mtime)


# operator metrics shown per stage (``--stages``): event-log name -> (label, unit)
STAGE_METRICS = {
    "sort time": ("sort", "ms"), "time in aggregation build": ("agg", "ms"),
    "scan time": ("scan", "ms"), "shuffle write time": ("shw", "ns"),
    "shuffle bytes written": ("shMB", "B"), "spill size": ("spillMB", "B"),
    "time to build hash map": ("hashbuild", "ms"), "task commit time": ("commit", "ms"),
    "number of output rows": None,
}


def _stage_metrics(accumulables: list) -> dict:
    out: dict[str, float] = {}
    for a in accumulables or []:
        spec = STAGE_METRICS.get(a.get("Name"))
        if spec is None:
            continue
        label, unit = spec
        try:
            v = float(a.get("Value") or 0)
        except (TypeError, ValueError):
            continue
        out[label] = out.get(label, 0.0) + (v / 1e9 if unit == "ns" else v / 1e3 if unit == "ms"
                                            else v / 1e6)
    return out


def summarize(path: Path) -> list[dict]:
    queries: dict[int, dict] = {}
    job_query: dict[int, int] = {}
    stage_job: dict[int, int] = {}
    tasks: dict[int, list] = defaultdict(lambda: [0, 0, 0.0])
    stages: dict[int, dict] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            e = json.loads(line)
            kind = e.get("Event", "")
            if kind.endswith("SQLExecutionStart"):
                queries[e["executionId"]] = {"id": e["executionId"], "start": e["time"],
                                             "end": e["time"], "what": e.get("description", ""),
                                             "jobs": 0}
            elif kind.endswith("SQLExecutionEnd") and e["executionId"] in queries:
                queries[e["executionId"]]["end"] = e["time"]
            elif kind == "SparkListenerJobStart":
                q = e.get("Properties", {}).get("spark.sql.execution.id")
                q = int(q) if q is not None else -1
                job_query[e["Job ID"]] = q
                if q in queries:
                    queries[q]["jobs"] += 1
                for s in e["Stage Infos"]:
                    stage_job[s["Stage ID"]] = e["Job ID"]
            elif kind == "SparkListenerTaskEnd":
                q = job_query.get(stage_job.get(e["Stage ID"]), -1)
                m = e.get("Task Metrics") or {}
                t = tasks[q]
                t[0] += 1
                t[1] += m.get("Executor Run Time", 0)
                t[2] += m.get("Executor CPU Time", 0) / 1e6
                st = stages.setdefault(e["Stage ID"], {"id": e["Stage ID"], "query": q, "tasks": 0,
                                                       "run_s": 0.0, "cpu_s": 0.0, "gc_s": 0.0})
                st["tasks"] += 1
                st["run_s"] += m.get("Executor Run Time", 0) / 1000
                st["cpu_s"] += m.get("Executor CPU Time", 0) / 1e9
                st["gc_s"] += m.get("JVM GC Time", 0) / 1000
            elif kind == "SparkListenerStageCompleted":
                info = e.get("Stage Info", {})
                st = stages.setdefault(info.get("Stage ID"), {
                    "id": info.get("Stage ID"), "query": job_query.get(stage_job.get(info.get("Stage ID")), -1),
                    "tasks": 0, "run_s": 0.0, "cpu_s": 0.0, "gc_s": 0.0})
                st["metrics"] = _stage_metrics(info.get("Accumulables"))
    out = []
    for q in sorted(queries.values(), key=lambda q: q["start"]):
        n, run_ms, cpu_ms = tasks.get(q["id"], [0, 0, 0.0])
        out.append({**q, "tasks": n, "run_s": run_ms / 1000, "cpu_s": cpu_ms / 1000,
                    "stages": sorted((s for s in stages.values() if s["query"] == q["id"]
                                      and s["tasks"]), key=lambda s: s["id"])})
    return out


def busy(path: Path, step_s: float = 0.5) -> list[tuple[float, float, list[int]]]:
    """(seconds after the first task's launch, running tasks averaged over the interval,
    the stages with a task in it) per ``step_s`` of the log's tasks."""
    spans: list[tuple[int, int, int]] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            e = json.loads(line)
            if e.get("Event") == "SparkListenerTaskEnd":
                ti = e.get("Task Info") or {}
                if "Launch Time" in ti and "Finish Time" in ti:
                    spans.append((ti["Launch Time"], ti["Finish Time"], e["Stage ID"]))
    if not spans:
        return []
    spans.sort()
    t0, end = spans[0][0], max(b for _, b, _ in spans)
    step = int(step_s * 1000)
    n = (end - t0) // step + 1
    load = [0.0] * n
    stages: list[set] = [set() for _ in range(n)]
    for a, b, stage in spans:
        for i in range((a - t0) // step, (max(b - 1, a) - t0) // step + 1):
            lo, hi = t0 + i * step, t0 + (i + 1) * step
            overlap = min(b, hi) - max(a, lo)
            if overlap > 0 or a == b:
                load[i] += max(overlap, 0) / step
                stages[i].add(stage)
    return [(i * step_s, load[i], sorted(stages[i])) for i in range(n)]


def _print_busy(path: Path, cores: int, step: float = 0.5) -> None:
    print(f"{path}\n{'at s':>7} {'tasks':>6}")
    short = {k: 0.0 for k in range(cores)}
    for at, load, stages in busy(path, step):
        print(f"{at:7.1f} {load:6.2f}  {'#' * int(round(load * 10)):<{cores * 10}}  {stages}")
        for k in short:
            if load < k + 0.5:
                short[k] += step
    print("; ".join(f"{sec:.1f} s with fewer than {k + 1} task(s) running (under {k + 0.5} "
                    "on average)" for k, sec in sorted(short.items())))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    show_stages = "--stages" in argv
    show_busy = "--busy" in argv
    cores = 2
    if "--cores" in argv:
        i = argv.index("--cores")
        cores = int(argv[i + 1])
        del argv[i:i + 2]
    argv = [a for a in argv if a not in ("--stages", "--busy")]
    if len(argv) != 1:
        print(__doc__)
        return 2
    target = Path(argv[0])
    path = target if target.is_file() else latest_log(target)
    if show_busy:
        _print_busy(path, cores)
        return 0
    rows = summarize(path)
    if not rows:
        print(f"{path}: no SQL queries")
        return 0
    t0 = rows[0]["start"]
    print(f"{path}\n{'at s':>7} {'wall s':>7} {'jobs':>5} {'tasks':>6} {'run s':>7} {'cpu s':>6}  query")
    for r in rows:
        print(f"{(r['start'] - t0) / 1000:7.1f} {(r['end'] - r['start']) / 1000:7.2f} {r['jobs']:5d} "
              f"{r['tasks']:6d} {r['run_s']:7.1f} {r['cpu_s']:6.1f}  {r['what'][:70]}")
        if show_stages:
            for st in r["stages"]:
                extra = " ".join(f"{k} {v:.1f}" for k, v in sorted(st.get("metrics", {}).items()) if v)
                print(f"{'':21}stage {st['id']:4d} {st['tasks']:6d} {st['run_s']:7.1f} {st['cpu_s']:6.1f}"
                      f"  gc {st['gc_s']:.1f} {extra}")
    print(f"{len(rows)} queries, {sum(r['jobs'] for r in rows)} jobs, {sum(r['tasks'] for r in rows)} "
          f"tasks, {(rows[-1]['end'] - t0) / 1000:.1f} s from the first query to the last's end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
