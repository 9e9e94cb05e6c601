"""The benchmark CLI end to end on a tiny night (it must keep working; nothing is timed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.spark
def test_bench_cli_tiny_night(tmp_path):
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--n", "200", "--masters", "local[1]", "--shared",
         "--run-master", "", "--no-scale", "--cache", str(tmp_path / "cache"), "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "latest.json").read_text())
    formats = ("soliddb", "db2luw", "informix", "rdb", "lldf")
    stages = {(r["format"], r["stage"]) for r in report["rows"]}
    for fmt in formats:
        for stage in ("decode", "plain", "udf"):
            assert (fmt, stage) in stages, (fmt, stage)
    for r in report["rows"]:
        assert r["seconds"] > 0 and r["bytes"] > 0 and r["records"] > 0, r
        if r["stage"] in ("decode", "udf"):      # the job itself decoded the night's archives
            assert r["rows"] > 0, r
        assert r["memory_mb"]["tree"] > 0, r
    # with one master the targets (which compare local[2] runs) are not judged, but every
    # format has its ratios against both baselines
    from bench.report import ratios

    rat = ratios(report)
    for fmt in formats:
        assert {"decode vs plain (local[1])", "decode vs udf (local[1])"} <= set(rat[fmt]), rat[fmt]
        assert all(v > 0 for v in rat[fmt].values())
    md = (out / "latest.md").read_text()
    assert "| soliddb | decode | local[1] |" in md and "## Targets" in md


def test_eventlog_summary_per_query(tmp_path):
    """``python -m bench.eventlog``: jobs, tasks and times per SQL query of an event log."""
    from bench.eventlog import main, summarize

    events = [
        {"Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart",
         "executionId": 0, "time": 1000, "description": "write changes"},
        {"Event": "SparkListenerJobStart", "Job ID": 0, "Properties": {"spark.sql.execution.id": "0"},
         "Stage Infos": [{"Stage ID": 0}, {"Stage ID": 1}]},
        {"Event": "SparkListenerJobStart", "Job ID": 1, "Properties": {"spark.sql.execution.id": "0"},
         "Stage Infos": [{"Stage ID": 2}]},
        *[{"Event": "SparkListenerTaskEnd", "Stage ID": s,
           "Task Metrics": {"Executor Run Time": 500, "Executor CPU Time": 2e8}} for s in (0, 1, 2)],
        {"Event": "SparkListenerStageCompleted", "Stage Info": {"Stage ID": 2, "Accumulables": [
            {"Name": "sort time", "Value": "1500"}, {"Name": "shuffle write time", "Value": "2000000000"},
            {"Name": "internal.metrics.executorRunTime", "Value": "500"}]}},
        {"Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd",
         "executionId": 0, "time": 3500},
        {"Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart",
         "executionId": 1, "time": 4000, "description": "collect"},
    ]
    log = tmp_path / "events_1_local-1"
    log.write_text("\n".join(json.dumps(e) for e in events) + "\n")
    rows = summarize(log)
    assert [(r["what"], r["jobs"], r["tasks"]) for r in rows] == [("write changes", 2, 3), ("collect", 0, 0)]
    assert rows[0]["end"] - rows[0]["start"] == 2500 and rows[0]["run_s"] == 1.5
    assert abs(rows[0]["cpu_s"] - 0.6) < 1e-9
    assert main([str(tmp_path)]) == 0
    # --stages: each query's stages with the operators' metrics (ms and ns in seconds)
    stages = rows[0]["stages"]
    assert [(st["id"], st["tasks"]) for st in stages] == [(0, 1), (1, 1), (2, 1)]
    assert stages[2]["metrics"] == {"sort": 1.5, "shw": 2.0} and abs(stages[2]["cpu_s"] - 0.2) < 1e-9
    assert main([str(tmp_path), "--stages"]) == 0


def test_eventlog_busy_counts_running_tasks_per_interval(tmp_path, capsys):
    """``python -m bench.eventlog --busy``: the tasks running in each half second, and the
    seconds in which fewer tasks than cores ran."""
    from bench.eventlog import busy, main

    def task(stage, launch, finish):
        return {"Event": "SparkListenerTaskEnd", "Stage ID": stage,
                "Task Info": {"Launch Time": launch, "Finish Time": finish}, "Task Metrics": {}}

    # stage 1: two tasks side by side for 1 s; stage 2: one task alone for 1 s; then 0.5 s of
    # nothing; stage 3: one task of 0.25 s
    events = [task(1, 10_000, 11_000), task(1, 10_000, 11_000), task(2, 11_000, 12_000),
              task(3, 12_500, 12_750)]
    log = tmp_path / "events_1_local-1"
    log.write_text("\n".join(json.dumps(e) for e in events) + "\n")
    bins = busy(log)
    assert [(at, round(load, 2), st) for at, load, st in bins] == [
        (0.0, 2.0, [1]), (0.5, 2.0, [1]), (1.0, 1.0, [2]), (1.5, 1.0, [2]), (2.0, 0.0, []),
        (2.5, 0.5, [3])]
    assert main([str(log), "--busy"]) == 0
    out = capsys.readouterr().out
    assert "0.5 s with fewer than 1 task(s) running" in out
    assert "2.0 s with fewer than 2 task(s) running" in out
    assert main([str(log), "--busy", "--cores", "4"]) == 0
    assert "3.0 s with fewer than 4 task(s) running" in capsys.readouterr().out


def test_a_cached_night_points_at_this_checkouts_catalog(tmp_path):
    """A night cached by another worktree (since removed) still loads: its sources.yaml is
    pointed at this checkout's catalog on every cache hit."""
    from bench import gen

    from dblog.config import load_config

    info = gen.ensure_night("rdb", 20, cache=tmp_path, log=lambda *a: None)
    root = Path(info["root"])
    cfg = root / "sources.yaml"
    good = cfg.read_text()
    cfg.write_text(good.replace(str(gen.REPO), "/gone/worktree"))
    with pytest.raises(Exception, match="file not found"):
        load_config(cfg)
    again = gen.ensure_night("rdb", 20, cache=tmp_path, log=lambda *a: None)
    assert again["root"] == str(root) and cfg.read_text() == good
    assert load_config(cfg).source(info["source"]).catalog()


def test_reorder_links_what_the_ordering_reads_of_the_kept_run(tmp_path):
    """``bench.reorder`` reruns the ordering on a kept run: the events, the manifest and the
    decode's record of its units (without it the ordering searches for repeated positions,
    a job a real run skips), linked, never copied; a run without the units file still works."""
    from bench.reorder import prepare
    from dblog.decode import EVENTS_DIR, UNITS_FILE
    from dblog.stage import MANIFEST

    run = tmp_path / "run"
    (run / EVENTS_DIR).mkdir(parents=True)
    for name in (MANIFEST, UNITS_FILE):
        (run / name).write_text("{}")
    new = tmp_path / "new"
    (new / "old").mkdir(parents=True)
    prepare(run, new)
    assert sorted(p.name for p in new.iterdir()) == sorted([EVENTS_DIR, MANIFEST, UNITS_FILE])
    assert all((new / n).is_symlink() and (new / n).resolve() == (run / n).resolve()
               for n in (EVENTS_DIR, MANIFEST, UNITS_FILE))
    (run / UNITS_FILE).unlink()
    prepare(run, new)
    assert sorted(p.name for p in new.iterdir()) == sorted([EVENTS_DIR, MANIFEST])


def test_sampler_counts_a_process_own_memory_apart_from_its_mapped_files(tmp_path):
    """``anon_rss``: the pages a process owns (RssAnon + RssShmem), not the file pages it maps,
    which its RSS counts (the JVM maps shuffle blocks; page cache, not its memory)."""
    import mmap
    import os

    import psutil

    from bench.measure import Sampler, anon_rss

    me = os.getpid()
    big = tmp_path / "mapped.bin"
    big.write_bytes(os.urandom(1 << 20) * 64)               # 64 MB
    with open(big, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        before_rss, before_own = psutil.Process(me).memory_info().rss, anon_rss(me, -1)
        assert sum(m[i] for i in range(0, len(m), 4096)) >= 0      # touch every page
        after_rss, after_own = psutil.Process(me).memory_info().rss, anon_rss(me, -1)
    assert after_rss - before_rss > 48 << 20                 # the mapped pages count in the RSS
    assert abs(after_own - before_own) < 16 << 20            # not in the process's own pages
    assert 0 < after_own < after_rss
    assert anon_rss(2 ** 31 - 1, 7) == 7                     # no such process: the RSS given
    # peaks of samples without the key (an old sampler's) read 0 for it
    s = Sampler(me)
    s.samples = [(1.0, {"driver": 1 << 20, "jvm": 2 << 20, "workers": 0, "tree": 3 << 20})]
    assert s.peaks() == {"driver": 1.0, "jvm": 2.0, "workers": 0.0, "tree": 3.0, "jvm_anon": 0.0}
