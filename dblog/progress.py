"""What ``dblog run`` shows while it runs, and the Airflow deadline of a nightly run.

**Progress.** Each stage shows its name, what it has done of its total and the elapsed
time. The total is the archives for ``stage`` and Spark's tasks for the Spark stages: the
status tracker (``SparkContext.statusTracker()``, which works without the Spark UI) lists
the jobs started since the stage began and, per job, the tasks of its stages (a stage that
Spark skipped because its shuffle output was already there is left out once its job is
done). On a terminal the line is redrawn about twice a second; anywhere else (a log file,
Airflow, a pipe) each stage prints one plain line when it ends::

    [dblog] stage     done: 2 archives, 9151 bytes                       0.3 s
    [dblog] decode    done: 8/8 tasks                                     3.9 s

Progress goes to standard error: standard output keeps the run's result (``--json``).

**Deadline.** ``deadline_interval()`` reads ``DBLOG_DEADLINE`` (default ``6h``: the run of a
night must be done 6 hours after the night ends) for the DAG's ``DeadlineAlert``;
``deadline_missed`` is the alert's callback (it runs in Airflow's triggerer).
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
import re
import sys
import threading
import time
from typing import TextIO

log = logging.getLogger("dblog.progress")

TICK = 0.5          # seconds between redraws on a terminal
BAR = 24            # characters of the bar


def _elapsed(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:5.1f} s"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h:d}:{m:02d}:{s:02d}" if h else f"{m:d}:{s:02d}"


class SparkTasks:
    """Tasks done and in all of the Spark jobs started since ``start()``."""

    def __init__(self, spark):
        self.tracker = spark.sparkContext.statusTracker()
        self.before: set[int] = set()

    def start(self) -> None:
        self.before = set(self.tracker.getJobIdsForGroup(None))

    def counts(self) -> tuple[int, int]:
        done = total = 0
        for job_id in set(self.tracker.getJobIdsForGroup(None)) - self.before:
            job = self.tracker.getJobInfo(job_id)
            if job is None:
                continue
            finished = job.status == "SUCCEEDED"
            for sid in job.stageIds:
                st = self.tracker.getStageInfo(sid)
                if st is None or (finished and st.numCompletedTasks == 0):
                    continue      # evicted, or skipped (its shuffle output was reused)
                done += st.numCompletedTasks
                total += st.numTasks
        return done, total


class Progress:
    """Stage-by-stage progress of one run (see the module docstring)."""

    def __init__(self, stream: TextIO | None = None, interactive: bool | None = None,
                 enabled: bool = True):
        self.stream = stream if stream is not None else sys.stderr
        if interactive is None:
            interactive = bool(getattr(self.stream, "isatty", lambda: False)()) \
                and os.environ.get("TERM", "") != "dumb"
        self.interactive = interactive
        self.enabled = enabled
        self.spark_tasks: SparkTasks | None = None
        self._lock = threading.Lock()
        self._stage: str | None = None
        self._t0 = 0.0
        self._total: int | None = None
        self._unit = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._line_open = False

    # -- wiring
    def attach_spark(self, spark) -> None:
        try:
            self.spark_tasks = SparkTasks(spark)
        except Exception as exc:  # noqa: BLE001 - progress is a courtesy
            log.debug("no Spark status tracker: %s", exc)

    # -- a stage
    def begin(self, stage: str, total: int | None = None, unit: str = "tasks") -> None:
        if not self.enabled:
            return
        self.end_line()
        with self._lock:
            self._stage, self._t0, self._total, self._unit = stage, time.monotonic(), total, unit
        if self.spark_tasks is not None and total is None:
            try:
                self.spark_tasks.start()
            except Exception:  # noqa: BLE001
                self.spark_tasks = None
        if self.interactive:
            self._stop.clear()
            self._thread = threading.Thread(target=self._tick, name="dblog-progress", daemon=True)
            self._thread.start()

    def end(self, stage: str, seconds: float | None = None, detail: str | None = None) -> None:
        if not self.enabled:
            return
        self._halt()
        with self._lock:
            elapsed = seconds if seconds is not None else time.monotonic() - self._t0
            text = detail if detail is not None else self._counts_text(final=True)
            self._stage = None
        line = f"[dblog] {stage:<9} done: {text}"
        self._write(f"{line:<68}{_elapsed(elapsed):>9}\n", final=True)

    # -- drawing
    def _counts_text(self, final: bool = False) -> str:
        if self._total is not None:
            return f"{self._total}/{self._total} {self._unit}" if final else f"0/{self._total} {self._unit}"
        if self.spark_tasks is None:
            return ""
        try:
            done, total = self.spark_tasks.counts()
        except Exception:  # noqa: BLE001
            return ""
        if final:
            return f"{done}/{done} tasks" if done == total or total == 0 else f"{done}/{total} tasks"
        return f"{done}/{total} tasks"

    def _bar(self) -> str:
        done = total = 0
        if self._total is not None:
            total = self._total
        elif self.spark_tasks is not None:
            try:
                done, total = self.spark_tasks.counts()
            except Exception:  # noqa: BLE001
                pass
        filled = int(BAR * done / total) if total else 0
        bar = "#" * filled + "-" * (BAR - filled)
        count = f"{done}/{total} {self._unit}" if total else "starting"
        return f"[dblog] {self._stage:<9} [{bar}] {count:<16} {_elapsed(time.monotonic() - self._t0):>9}"

    def _tick(self) -> None:
        while not self._stop.wait(TICK):
            with self._lock:
                if self._stage is None:
                    return
                line = self._bar()
            self._write("\r\033[K" + line, final=False)

    def _halt(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=2)
            self._thread = None

    def _write(self, text: str, final: bool) -> None:
        try:
            if self.interactive and self._line_open:
                text = "\r\033[K" + text.lstrip("\r")
            self.stream.write(text)
            self.stream.flush()
            self._line_open = self.interactive and not final
        except (OSError, ValueError):
            pass

    def end_line(self) -> None:
        """Clear a half-drawn progress line (before other output goes to the terminal)."""
        if self._line_open:
            try:
                self.stream.write("\r\033[K")
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self._line_open = False

    def close(self) -> None:
        self._halt()
        self.end_line()


def staged_text(manifest: dict) -> str:
    """What the stage stage found: archives, bytes, sources."""
    n = sum(len(s["archives"]) for s in manifest["sources"])
    b = sum(int(a.get("size") or 0) for s in manifest["sources"] for a in s["archives"])
    k = len(manifest["sources"])
    return f"{n} archives, {b:,} bytes, {k} source{'s' if k != 1 else ''}"


class ClearingStream:
    """A stream for the log handler that clears a half-drawn progress line before each
    log line, so that log lines and the progress line never share a terminal row."""

    def __init__(self, progress: Progress, stream: TextIO):
        self.progress, self.stream = progress, stream

    def write(self, text: str) -> int:
        self.progress.end_line()
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return bool(getattr(self.stream, "isatty", lambda: False)())


def show_progress_with_logs(progress: Progress) -> Progress:
    """On a terminal, make the log handlers that write to standard error clear the
    progress line first (so that a log line never lands in the middle of the bar)."""
    if progress.interactive:
        for h in logging.getLogger().handlers:
            if isinstance(h, logging.StreamHandler) and getattr(h, "stream", None) is progress.stream:
                h.setStream(ClearingStream(progress, progress.stream))
    return progress


# ----------------------------------------------------------------- the deadline of a run

DEFAULT_DEADLINE = "6h"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")


def parse_duration(text: str) -> _dt.timedelta:
    """``90m``, ``6h``, ``1.5h``, ``3600s``, ``2d``; a bare number is hours."""
    m = _DURATION.match(text or "")
    if not m:
        raise ValueError(f"DBLOG_DEADLINE: expected a duration such as 6h, 90m or 3600s, got {text!r}")
    n, unit = float(m.group(1)), m.group(2) or "h"
    return _dt.timedelta(seconds=n * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit])


def deadline_interval(env: dict | None = None) -> _dt.timedelta | None:
    """How long after the night ends its run must be done (``$DBLOG_DEADLINE``, default 6
    hours; ``off`` switches the alert off: None)."""
    text = (env if env is not None else os.environ).get("DBLOG_DEADLINE", "").strip() or DEFAULT_DEADLINE
    if text.lower() in ("off", "none", "0"):
        return None
    return parse_duration(text)


def deadline_alert(env: dict | None = None):
    """The DAG's ``DeadlineAlert`` (Airflow 3.1+, experimental there): the run must be done
    ``DBLOG_DEADLINE`` after its night ends. A night ends one day after the run's logical
    date (the schedule's data interval is one day: the run of night D starts when D is over),
    so the deadline is the logical date + 1 day + ``DBLOG_DEADLINE``. None when switched off.
    Cheap: reads one environment variable (the DAG file calls it at parse time)."""
    interval = deadline_interval(env)
    if interval is None:
        return None
    if sys.argv[1:3] == ["dags", "test"]:
        # Airflow 3.3.2's `airflow dags test` runs the DAG un-serialized, and its
        # DagRun.update_state then looks the alert objects up as database ids (a crash); the
        # scheduler path serializes them first. So `dags test` runs without the alert.
        log.warning("deadline alert left out under `airflow dags test` (not supported there)")
        return None
    from airflow.sdk import AsyncCallback, DeadlineAlert, DeadlineReference

    return DeadlineAlert(reference=DeadlineReference.DAGRUN_LOGICAL_DATE,
                         interval=_dt.timedelta(days=1) + interval,
                         callback=AsyncCallback(deadline_missed), name="dblog_night_deadline")


async def deadline_missed(context: dict | None = None, **kwargs) -> None:
    """The callback of the DAG's deadline alert (runs in the triggerer): says which night's
    run is late. A backfill of old nights starts past its deadline by design: logged, not
    raised as an alert. Swap in an Airflow Notifier (Slack, e-mail, ...) to page someone."""
    ctx = context or {}
    run = ctx.get("dag_run") or {}
    deadline = (ctx.get("deadline") or {}).get("deadline_time")
    run_type = str(run.get("run_type", ""))
    what = (f"dblog_nightly run {run.get('dag_run_id') or run.get('run_id')} for the night of "
            f"{run.get('logical_date')} missed its deadline {deadline} (DBLOG_DEADLINE after the "
            f"night ended); state {run.get('state')}")
    if run_type == "backfill":
        log.info("%s: a backfill of an earlier night, no alert", what)
    else:
        log.error("DEADLINE MISSED: %s", what)
