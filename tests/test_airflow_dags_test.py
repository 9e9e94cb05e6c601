"""``airflow dags test dblog_nightly <date>``: one whole night through the real DAG (plan, gate,
stage, decode/order/validate via spark-submit on the local Spark connection, publish,
report) on a temporary AIRFLOW_HOME and data root; the published changes are checked
against what the generator wrote."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from .airflow_local import (BIN, REPO, airflow_env, check_night, chosen_sources, kill_leftovers,
                            prepare, run, synth, write_config)

pytestmark = pytest.mark.airflow
DATE = "2026-11-01"


def test_dags_test_runs_a_whole_night(tmp_path):
    sources = chosen_sources()
    data = tmp_path / "data"
    home = tmp_path / "airflow_home"
    env = airflow_env(home, data, write_config(tmp_path, sources), DBLOG_SHUFFLE_PARTITIONS=2)
    synth(env, DATE, 1)
    prepare(env)
    t0 = time.monotonic()
    log = tmp_path / "dags_test.log"
    try:
        proc = run(env, str(BIN / "airflow"), "dags", "test", "dblog_nightly", DATE,
                   timeout=float(os.environ.get("DBLOG_AIRFLOW_TEST_TIMEOUT", 1200)), log=log)
    finally:
        kill_leftovers(str(home))
    took = time.monotonic() - t0
    text = log.read_text(errors="replace")
    artifacts = REPO / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    (artifacts / "airflow_dags_test.log").write_text(text)
    assert proc.returncode == 0, text[-5000:]
    assert "state=success" in text and "DagRun Finished" in text, text[-3000:]
    for task in ("plan", "wait_for_previous_night", "stage", "merge_manifest", "decode", "order",
                 "validate", "publish", "report"):
        assert f"end task task_id={task} " in text, f"{task} did not run"
    assert text.count("Spark-Submit cmd: spark-submit --master local[2]") == 3
    for source in sources:
        check_night(data, source, DATE)
        assert (data / "published" / "state" / source / DATE / "seq.json").is_file()
    report = data / "reports" / DATE / "index.html"
    assert report.is_file()
    assert f"Data-quality report for {DATE} (VALID): {report}" in text
    assert f"/dblog-reports/{DATE}/index.html" in text
    summary = json.loads((data / "reports" / DATE / "summary.json").read_text())
    assert summary["success"] is True
    print(f"airflow dags test of one night ({', '.join(sources)}): {took:.0f} s")
