"""Run one job in a subprocess and sample the memory of its process tree from /proc.

Every ``interval`` seconds the resident set size of each process of the tree is read
(psutil) and summed by role: ``driver`` (the job's own Python process), ``jvm`` (Spark's
JVM: in local mode it is driver and executor at once) and ``workers`` (the Python worker
processes that run the decoders: pyspark.daemon and its forks). ``peaks`` gives the peak
of each role, and of the whole tree, within a wall-clock window.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

MB = 1024 * 1024


def _role(p: psutil.Process, root_pid: int) -> str:
    if p.pid == root_pid:
        return "driver"
    try:
        name = p.name()
        cmd = " ".join(p.cmdline()[:4])
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "other"
    if "java" in name or "java" in cmd.split(" ", 1)[0]:
        return "jvm"
    if "pyspark" in cmd or "python" in name:
        return "workers"
    return "other"


def anon_rss(pid: int, rss: int) -> int:
    """A process's resident memory that is its own (``RssAnon`` + ``RssShmem`` of
    ``/proc/<pid>/status``), without the pages of files it maps: the JVM maps shuffle and
    cached blocks over ``spark.storage.memoryMapThreshold`` (2 MB), and those pages, page
    cache the kernel takes back at will, count in its RSS. ``rss`` where /proc says nothing."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            got = {k: int(v.split()[0]) * 1024 for k, v in
                   (line.decode().split(":", 1) for line in f if line.startswith((b"RssAnon", b"RssShmem")))}
    except (OSError, ValueError, IndexError):
        return rss
    return sum(got.values()) if got else rss


class Sampler(threading.Thread):
    def __init__(self, pid: int, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.samples: list[tuple[float, dict]] = []
        self.stop_flag = threading.Event()
        self.roles: dict[tuple, str] = {}

    def run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.NoSuchProcess:
            return
        while not self.stop_flag.is_set():
            sums = {"driver": 0, "jvm": 0, "workers": 0, "other": 0}
            jvm_anon = 0
            try:
                procs = [root] + root.children(recursive=True)
            except psutil.NoSuchProcess:
                break
            for p in procs:
                try:
                    rss = p.memory_info().rss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                try:
                    key = (p.pid, p.name())   # spark-submit (a shell script) execs into java
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                role = self.roles.get(key)
                if role is None:
                    role = self.roles[key] = _role(p, self.pid)
                sums[role] += rss
                if role == "jvm":
                    jvm_anon += anon_rss(p.pid, rss)
            sums["tree"] = sum(sums.values())
            sums["jvm_anon"] = jvm_anon
            self.samples.append((time.time(), sums))
            self.stop_flag.wait(self.interval)

    def peaks(self, t0: float | None = None, t1: float | None = None) -> dict:
        """Peak MB per role (and of the tree) within [t0, t1] (the whole run when None);
        ``jvm_anon``: the JVM's own pages (``anon_rss``), without the files it maps."""
        out = {"driver": 0.0, "jvm": 0.0, "workers": 0.0, "tree": 0.0, "jvm_anon": 0.0}
        for t, s in self.samples:
            if (t0 is None or t >= t0 - self.interval) and (t1 is None or t <= t1 + self.interval):
                for k in out:
                    out[k] = max(out[k], s.get(k, 0) / MB)
        return {k: round(v, 1) for k, v in out.items()}


def run_job(kind: str, spec: dict, work: Path, tag: str, log=print,
            timeout: float | None = None) -> tuple[dict, Sampler, float]:
    """Run ``python -m bench.jobs kind`` with ``spec``; returns (result, sampler, seconds)."""
    work.mkdir(parents=True, exist_ok=True)
    spec_path = work / f"{tag}.spec.json"
    spec_path.write_text(json.dumps(spec, indent=1))
    res_path = spec_path.with_suffix(".result.json")
    if res_path.exists():
        res_path.unlink()
    env = dict(os.environ)
    env["PYTHONPATH"] = spec["repo"] + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("DBLOG_SPARK_LOG_LEVEL", "ERROR")
    log_path = work / f"{tag}.log"
    t0 = time.time()
    with open(log_path, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "bench.jobs", kind, "--spec", str(spec_path)],
                                cwd=spec["repo"], env=env, stdout=fh, stderr=subprocess.STDOUT)
        sampler = Sampler(proc.pid)
        sampler.start()
        try:
            rc = proc.wait(timeout=timeout)
        finally:
            sampler.stop_flag.set()
            sampler.join()
    seconds = time.time() - t0
    if rc != 0 or not res_path.exists():
        tail = log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"bench job {tag} failed (exit {rc}); log {log_path}:\n{tail}")
    return json.loads(res_path.read_text()), sampler, seconds
