"""The DAG's callables (``dblog.airflow_tasks``) without Airflow running: fast, no Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException

from dblog import airflow_tasks as at
from dblog.paths import DataRoot

from .airflow_local import REPO, write_config

RUN_ID = "scheduled__2026-11-01T03:00:00+00:00"


@pytest.fixture
def two_sources(tmp_path, monkeypatch) -> Path:
    cfg = write_config(tmp_path, ["pos_solid", "erp_db2"])
    monkeypatch.setenv("DBLOG_CONFIG", str(cfg))
    monkeypatch.setenv("DBLOG_DATA_ROOT", str(tmp_path / "data"))
    return cfg


def test_plan_defaults_to_all_sources_and_the_logical_date(two_sources, tmp_path):
    out = at.plan({"sources": [], "reprocess_date": None}, "2026-11-01", RUN_ID)
    assert out["date"] == "2026-11-01" and out["reprocess"] is False
    assert out["sources"] == ["pos_solid", "erp_db2"]
    assert out["run_dir"] == str(tmp_path / "data" / "staging" / "scheduled__2026-11-01T03_00_00_00_00")
    assert Path(out["run_dir"]).is_dir()
    assert out["config"] == str(two_sources)


def test_plan_subset_reprocess_date_and_fresh_run_dir(two_sources):
    first = at.plan({"sources": ["erp_db2"]}, "2026-11-09", RUN_ID)
    (Path(first["run_dir"]) / "leftover").write_text("x")
    out = at.plan({"sources": ["erp_db2", "erp_db2"], "reprocess_date": "2026-10-30"}, "2026-11-09",
                  RUN_ID)
    assert out["sources"] == ["erp_db2"]
    assert out["date"] == "2026-10-30" and out["reprocess"] is True
    assert not (Path(out["run_dir"]) / "leftover").exists()


@pytest.mark.parametrize("params,match", [
    ({"sources": ["nope"]}, "no source named 'nope'"),
    ({"reprocess_date": "2026-13-01"}, "reprocess_date"),
    ({"reprocess_date": "yesterday"}, "reprocess_date"),
])
def test_plan_rejects_bad_parameters(two_sources, params, match):
    with pytest.raises(at.PlanError, match=match):
        at.plan(params, "2026-11-01", RUN_ID)


def test_data_root_is_read_when_the_task_runs(two_sources, tmp_path, monkeypatch):
    monkeypatch.setenv("DBLOG_DATA_ROOT", str(tmp_path / "elsewhere"))
    out = at.plan({}, "2026-11-01", RUN_ID)
    assert out["data_root"] == str(tmp_path / "elsewhere")


@pytest.mark.parametrize("state,ready", [(None, True), ("success", True), ("running", False),
                                         ("queued", False)])
def test_previous_night_gate(state, ready):
    assert at.previous_night_ready(state, "2026-10-31") is ready


def test_previous_night_gate_refuses_a_failed_night_unless_reprocessing():
    with pytest.raises(AirflowFailException, match="previous night .*2026-10-31.* failed"):
        at.previous_night_ready("failed", "2026-10-31")
    assert at.previous_night_ready("failed", "2026-10-31", reprocess=True) is True


def test_stage_per_source_then_merge(two_sources, tmp_path):
    from dblog.cli import main

    assert main(["synth", "--date", "2026-11-01", "--transactions", "3"]) == 0
    out = at.plan({}, "2026-11-01", RUN_ID)
    staged = [at.stage_source(out, s) for s in reversed(out["sources"])]  # any order
    assert {s["source"] for s in staged} == {"pos_solid", "erp_db2"}
    landing = DataRoot(tmp_path / "data").landing
    for s in staged:
        assert s["archives"] == len(list((landing / s["source"] / "2026-11-01").iterdir()))
        assert s["seq_base"] == 0 and s["prev_state"] is None
    manifest = json.loads(Path(at.merge_manifest(out)).read_text())
    assert manifest["run_id"] == Path(out["run_dir"]).name
    assert manifest["date"] == "2026-11-01"
    assert [s["name"] for s in manifest["sources"]] == ["pos_solid", "erp_db2"]  # plan's order
    assert manifest["data_root"] == str(tmp_path / "data")


def test_publish_refuses_failed_or_missing_validation(two_sources):
    out = at.plan({}, "2026-11-01", RUN_ID)
    with pytest.raises(AirflowFailException, match="no validation result"):
        at.publish_run(out)
    (Path(out["run_dir"]) / "validation.json").write_text(json.dumps(
        {"success": False, "failures": ["changes: expect_column_values_to_be_unique on event_id"],
         "results": []}))
    with pytest.raises(AirflowFailException) as err:
        at.publish_run(out)
    assert "nothing published" in str(err.value)
    assert "expect_column_values_to_be_unique on event_id" in str(err.value)
    assert "reports/2026-11-01/index.html" in str(err.value)
    assert not (Path(out["data_root"]) / "published").exists()


def test_report_description_and_url(two_sources, monkeypatch):
    out = at.plan({}, "2026-11-01", RUN_ID)
    info = at.describe_report(out)
    assert info["exists"] is False and info["valid"] is None
    assert info["url"] == "/dblog-reports/2026-11-01/index.html"
    assert at.report_url("2026-11-01", "http://h:8080/") == "http://h:8080/dblog-reports/2026-11-01/index.html"


def test_configured_source_names_is_forgiving(tmp_path):
    assert at.configured_source_names(REPO / "include" / "sources.yaml")[0] == "pos_solid"
    (tmp_path / "broken.yaml").write_text("sources: [")
    assert at.configured_source_names(tmp_path / "broken.yaml") == []
    assert at.configured_source_names(tmp_path / "missing.yaml") == []


def test_jobs_exist_and_spark_env_uses_this_python():
    import sys

    for name in ("decode", "order", "validate"):
        assert Path(at.job_path(name)).is_file()
    env = at.spark_env()
    assert env["PYSPARK_PYTHON"] in (sys.executable, __import__("os").environ.get("PYSPARK_PYTHON"))


def test_job_rejects_a_run_dir_without_manifest(tmp_path, capsys):
    from jobs.decode import main

    with pytest.raises(SystemExit) as exit_:
        main(["--run-dir", str(tmp_path)])
    assert exit_.value.code == 2
    assert "manifest.json not found" in capsys.readouterr().err
