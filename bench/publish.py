"""``python -m bench publish``: the cost of one publish, and of the tidy after it, after 1
and after N published nights.

Issue 14: "publish after 100 published nights (50 tables each) <= 1.5x publish after 1
night". The staged outputs of a night are made synthetically and cheaply (no Spark): for
every registered dataset (``dblog/datasets.py``) small Parquet files in the dataset's layout
(``night``: one partition per source; ``table``: one partition per table), the state of the
source (held, carry, ``seq.json``), the manifest and the summary, exactly where a run
writes them under ``staging/<run_id>/``. Then it times ``dblog.publish.publish`` (until the
new version is visible and durable) and ``dblog.publish.tidy`` (the step after it: deletes
what the publish took out, prepares the next version) separately:

* base A: 1 night published; base B: N nights published (built once, not timed; each
  night published then tidied, as ``dblog run`` and the DAG do);
* each trial copies both bases (hard links, as the data root keeps them), publishes the
  next night on each copy and tidies, interleaved (same machine state for both);
* it reports the medians per side, the ratio of the publishes (the issue's) and of the
  tidies, and writes ``bench/results/publish-<stamp>.json``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

RESULTS = Path(__file__).resolve().parent / "results"
SOURCE = "bench_src"
TARGET_RATIO = 1.5


def _template(directory: Path) -> Path:
    """One small Parquet file (a few rows) that every staged partition gets a copy of."""
    path = directory / "template.parquet"
    if not path.exists():
        pq.write_table(pa.table({"commit_seq": pa.array(range(20), pa.int64()),
                                 "op": pa.array(["c"] * 20),
                                 "after": pa.array(['{"ID": 1}'] * 20)}), path)
    return path


def night_date(n: int) -> str:
    return (_dt.date(2026, 1, 1) + _dt.timedelta(days=n - 1)).isoformat()


def stage_night(root: Path, n: int, tables: int, template: Path, files: int = 1,
                sources: tuple[str, ...] = (SOURCE,), run_id: str | None = None,
                options: dict | None = None) -> Path:
    """The staged outputs of night ``n`` for ``sources`` (run id ``bench_<date>`` unless
    given), as a run leaves them under ``staging/<run_id>/``. ``options``: extra keys of
    each source's manifest entry (e.g. ``mirror_retention``)."""
    from dblog import datasets as D
    from dblog.order import SUMMARY

    date = night_date(n)
    run_id = run_id or f"bench_{date}"
    run = root / "staging" / run_id
    if run.exists():
        shutil.rmtree(run)

    def put(folder: Path) -> None:
        folder.mkdir(parents=True)
        for i in range(files):
            shutil.copyfile(template, folder / f"part-{i:05d}-{run_id}.c000.snappy.parquet")

    summary = {}
    for source in sources:
        for ds in D.published():
            if ds.layout == D.NIGHT:
                put(run / ds.name / f"source={source}" / f"date={date}")
            else:
                for t in range(tables):
                    put(run / ds.name / source / f"BENCH.T{t:04d}" / f"date={date}")
        for sub in ("held", "carry"):
            put(run / "state" / sub / f"source={source}")
        seq = {"seq_base": 100 * (n - 1), "last_commit_seq": 100 * n, "published_transactions": 100}
        (run / "state" / "seq" / source).mkdir(parents=True)
        (run / "state" / "seq" / source / "seq.json").write_text(
            json.dumps({**seq, "date": date, "run_id": run_id}))
        summary[source] = seq
    (run / SUMMARY).write_text(json.dumps(summary))
    manifest = {"run_id": run_id, "date": date, "data_root": str(root), "config": "bench",
                "sources": [{"name": s, "format": "soliddb", "archives": [], **(options or {})}
                            for s in sources]}
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def publish_run(root: Path, run: Path) -> float:
    from dblog.order import load_summary
    from dblog.paths import DataRoot
    from dblog.publish import publish
    from dblog.stage import load_manifest

    manifest = load_manifest(run)
    manifest["data_root"] = str(root)
    summary = load_summary(run)
    t0 = time.perf_counter()
    publish(DataRoot(root), manifest, run, summary)
    return time.perf_counter() - t0


def tidy_run(root: Path) -> tuple[float, dict]:
    """Seconds of ``dblog.publish.tidy`` on the data root, and what it did."""
    from dblog.paths import DataRoot
    from dblog.publish import tidy

    t0 = time.perf_counter()
    done = tidy(DataRoot(root))
    return time.perf_counter() - t0, done


def build_base(root: Path, nights: int, tables: int, template: Path) -> None:
    for n in range(1, nights + 1):
        publish_run(root, stage_night(root, n, tables, template))
        tidy_run(root)
        shutil.rmtree(root / "staging" / f"bench_{night_date(n)}")


def _copy(src: Path, dst: Path) -> None:
    """A copy of a data root that shares the files (hard links) and keeps the links."""
    subprocess.run(["cp", "-al", str(src), str(dst)], check=True)


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def measure(nights: int = 100, tables: int = 50, trials: int = 5, work: Path | None = None) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="bench-publish-", dir=work))
    try:
        template = _template(tmp)
        base = {}
        t0 = time.perf_counter()
        for label, n in (("after_1", 1), (f"after_{nights}", nights)):
            root = tmp / f"base_{n}"
            build_base(root, n, tables, template)
            base[label] = (root, n)
        build_s = time.perf_counter() - t0
        load_before = _uptime()
        times: dict[str, list[float]] = {k: [] for k in base}
        tidies: dict[str, list[float]] = {k: [] for k in base}
        tidy_did: dict[str, dict] = {}
        for trial in range(trials):
            for label, (root, n) in base.items():
                copy = tmp / f"{label}_trial{trial}"
                _copy(root, copy)
                run = stage_night(copy, n + 1, tables, template)
                os.sync()
                times[label].append(publish_run(copy, run))
                seconds, tidy_did[label] = tidy_run(copy)
                tidies[label].append(seconds)
                shutil.rmtree(copy)
        labels = list(base)
        med = {k: statistics.median(v) for k, v in times.items()}
        tidy_med = {k: statistics.median(v) for k, v in tidies.items()}
        ratio = med[labels[1]] / med[labels[0]]
        return {"nights": nights, "tables": tables, "trials": trials,
                "seconds": times, "median_seconds": med, "ratio": round(ratio, 3),
                "tidy_seconds": tidies, "tidy_median_seconds": tidy_med,
                "tidy_ratio": round(tidy_med[labels[1]] / tidy_med[labels[0]], 3),
                "tidy_did": tidy_did,
                "target": TARGET_RATIO, "met": ratio <= TARGET_RATIO,
                "build_seconds": round(build_s, 1), "uptime_before": load_before,
                "uptime_after": _uptime()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench publish", description=__doc__.split("\n\n")[0])
    p.add_argument("--nights", type=int, default=100, help="nights published before the measured one")
    p.add_argument("--tables", type=int, default=50, help="tables touched per night")
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--work", type=Path, default=None, help="where the temporary data roots go")
    args = p.parse_args(argv)
    result = measure(args.nights, args.tables, args.trials, args.work)
    RESULTS.mkdir(exist_ok=True)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"publish-{stamp}.json").write_text(json.dumps(result, indent=1))
    labels = list(result["median_seconds"])
    print(f"publish, {result['tables']} tables a night, median of {result['trials']} trials:")
    for k in labels:
        print(f"  {k:>10} published nights: {result['median_seconds'][k] * 1000:8.1f} ms   "
              f"({', '.join(f'{s * 1000:.0f}' for s in result['seconds'][k])})")
    print(f"  publish ratio {result['ratio']} (target <= {TARGET_RATIO}: "
          f"{'met' if result['met'] else 'MISSED'})")
    print("tidy after that publish (deletes what it took out, prepares the next version):")
    for k in labels:
        did = result["tidy_did"][k]
        print(f"  {k:>10} published nights: {result['tidy_median_seconds'][k] * 1000:8.1f} ms   "
              f"({', '.join(f'{s * 1000:.0f}' for s in result['tidy_seconds'][k])}; "
              f"{did['trash_removed']} trash folders, next from {did['next_from']})")
    print(f"  tidy ratio {result['tidy_ratio']} (no target: after the swap, off the publish's path)")
    print(f"  load: {result['uptime_before']}  ->  {result['uptime_after']}")
    return 0 if result["met"] else 1
