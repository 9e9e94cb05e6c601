"""Progress of ``dblog run`` (a plain line per stage, a redrawn bar on a terminal, Spark's
task counts) and the DAG's deadline settings."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import logging
import re
import time

import pytest

from dblog import progress as P


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_one_per_stage():
    out = io.StringIO()
    p = P.Progress(out)
    assert not p.interactive
    p.begin("stage")
    p.end("stage", 0.25, "2 archives, 9,151 bytes, 1 source")
    p.begin("publish")
    p.end("publish", 0.1, "published")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in out.getvalue() and "\033" not in out.getvalue()
    assert re.fullmatch(r"\[dblog\] stage\s+done: 2 archives, 9,151 bytes, 1 source\s+0\.2 s", lines[0])
    assert lines[1].startswith("[dblog] publish   done: published")


def test_terminal_redraws_the_line_and_logs_clear_it(monkeypatch):
    monkeypatch.setattr(P, "TICK", 0.05)
    out = Tty()
    p = P.Progress(out)
    assert p.interactive
    handler = logging.StreamHandler(out)
    log = logging.getLogger("dblog.test_progress")
    log.addHandler(handler)
    log.propagate = False
    try:
        monkeypatch.setattr(logging.getLogger(), "handlers", [handler])
        P.show_progress_with_logs(p)
        assert isinstance(handler.stream, P.ClearingStream)
        p.begin("stage", total=3, unit="archives")
        time.sleep(0.3)
        log.warning("a log line while the bar is drawn")
        time.sleep(0.2)
        p.end("stage", 0.5)
    finally:
        log.removeHandler(handler)
    text = out.getvalue()
    assert "\r\033[K[dblog] stage     [" in text and "0/3 archives" in text
    # the log line starts on a cleared row, never after the bar's text
    assert "\r\033[Ka log line while the bar is drawn\n" in text
    assert re.search(r"\r\033\[K\[dblog\] stage\s+done: 3/3 archives\s+0\.5 s\n$", text), text[-200:]


@pytest.mark.spark
def test_spark_tasks_are_counted(spark):
    out = io.StringIO()
    p = P.Progress(out)
    p.attach_spark(spark)
    p.begin("order")
    spark.range(0, 1000, numPartitions=3).selectExpr("id % 5 AS k").groupBy("k").count().collect()
    p.end("order")
    m = re.search(r"done: (\d+)/(\d+) tasks", out.getvalue())
    assert m and int(m.group(1)) == int(m.group(2)) >= 3, out.getvalue()


def test_deadline_settings():
    assert P.deadline_interval({}) == dt.timedelta(hours=6)
    assert P.deadline_interval({"DBLOG_DEADLINE": "90m"}) == dt.timedelta(minutes=90)
    assert P.deadline_interval({"DBLOG_DEADLINE": "1.5"}) == dt.timedelta(hours=1.5)
    assert P.deadline_interval({"DBLOG_DEADLINE": "off"}) is None
    with pytest.raises(ValueError, match="DBLOG_DEADLINE"):
        P.deadline_interval({"DBLOG_DEADLINE": "six hours"})
    alert = P.deadline_alert({"DBLOG_DEADLINE": "2h"})
    assert alert.interval == dt.timedelta(hours=26)
    assert alert.callback.path == "dblog.progress.deadline_missed"
    assert P.deadline_alert({"DBLOG_DEADLINE": "off"}) is None


def test_no_deadline_under_airflow_dags_test(monkeypatch):
    monkeypatch.setattr(P.sys, "argv", ["airflow", "dags", "test", "dblog_nightly", "2026-11-01"])
    assert P.deadline_alert({}) is None


def test_deadline_missed_alerts_except_for_backfills(caplog):
    caplog.set_level(logging.INFO, logger="dblog.progress")
    ctx = {"dag_run": {"dag_run_id": "scheduled__2026-11-01T03:00:00+00:00", "run_type": "scheduled",
                       "logical_date": "2026-11-01T03:00:00Z", "state": "running"},
           "deadline": {"deadline_time": "2026-11-02T09:00:00Z"}}
    asyncio.run(P.deadline_missed(context=ctx))
    assert "DEADLINE MISSED" in caplog.text and "scheduled__2026-11-01" in caplog.text
    caplog.clear()
    asyncio.run(P.deadline_missed(context={**ctx, "dag_run": {**ctx["dag_run"], "run_type": "backfill"}}))
    assert "DEADLINE MISSED" not in caplog.text and "backfill" in caplog.text
