"""DAG integrity: dblog_nightly imports cleanly, does no work at parse time, and is wired as
documented. Fast: no Spark, no scheduler (the metadata database is never touched)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DAGS = REPO / "dags"

# Run in a child process so the parse happens in a clean interpreter with a throw-away
# AIRFLOW_HOME, and with every way of reaching the database, a connection or a Variable
# replaced by one that raises: any such access at parse time becomes an import error.
PARSE = textwrap.dedent("""
    import json, sys, time
    def forbid(what):
        def boom(*a, **k):
            raise RuntimeError(f"{what} at DAG parse time")
        return boom
    import airflow.settings as settings
    settings.Session = forbid("database session")
    import airflow.utils.session as us
    us.create_session = forbid("database session")
    from airflow.sdk import BaseHook, Connection, Variable
    BaseHook.get_connection = classmethod(forbid("connection lookup"))
    Connection.get = classmethod(forbid("connection lookup"))
    Variable.get = staticmethod(forbid("Variable.get"))
    from airflow.sdk.execution_time import context as ctx
    ctx._get_connection = forbid("connection lookup")
    ctx._get_variable = forbid("Variable lookup")
    # every function of dblog.airflow_tasks the DAG file calls while it is parsed is recorded:
    # the DAG may only read its schedule and the source names (and name the job files)
    import dblog.airflow_tasks as at
    called = []
    def recorder(name, fn):
        def wrapped(*a, **k):
            called.append(name)
            return fn(*a, **k)
        return wrapped
    for name, fn in list(vars(at).items()):
        if callable(fn) and getattr(fn, "__module__", None) == at.__name__ and not isinstance(fn, type):
            setattr(at, name, recorder(name, fn))
    heavy_before = {m for m in ("pyspark", "great_expectations", "pandas") if m in sys.modules}
    from airflow.dag_processing.dagbag import DagBag
    t0 = time.monotonic()
    bag = DagBag(dag_folder=sys.argv[1])
    took = time.monotonic() - t0
    out = {"errors": {k: str(v) for k, v in bag.import_errors.items()}, "seconds": took,
           "called_at_parse": sorted(set(called)),
           "heavy": sorted(m for m in ("pyspark.sql", "great_expectations", "pandas")
                           if m in sys.modules and m not in heavy_before)}
    dag = bag.dags.get("dblog_nightly")
    if dag is not None:
        out["dag"] = {
            "tasks": {t.task_id: {
                "retries": t.retries, "timeout": t.execution_timeout.total_seconds()
                if t.execution_timeout else None, "pool": t.pool,
                "trigger_rule": getattr(t.trigger_rule, "value", t.trigger_rule), "mapped": any(c.__name__ == "MappedOperator" for c in type(t).__mro__),
                "upstream": sorted(t.upstream_task_ids), "type": type(t).__name__,
                "bases": [c.__name__ for c in type(t).__mro__],
                "outlets": [getattr(o, "uri", None) for o in (getattr(t, "outlets", None) or [])],
                "conn_id": getattr(t, "_conn_id", None),
                "application": getattr(t, "application", None),
                } for t in dag.tasks},
            "tags": sorted(dag.tags), "max_active_runs": dag.max_active_runs, "catchup": dag.catchup,
            "schedule": str(dag.timetable), "doc_md": bool(dag.doc_md),
            "params": dag.params.dump(),
            "deadline": [{"reference": type(d.reference).__name__,
                          "interval": d.interval.total_seconds(), "callback": d.callback.path,
                          "callback_type": type(d.callback).__name__}
                         for d in (dag.deadline or [])],
            "param_schema": {k: dag.params.get_param(k).schema for k in dag.params},
        }
    print("RESULT " + json.dumps(out, default=str))
""")


def parse_dags(tmp_path: Path, folder: Path = DAGS, **env) -> dict:
    e = dict(os.environ)
    e.update({"AIRFLOW_HOME": str(tmp_path / "airflow_home"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
              "AIRFLOW__CORE__DAGS_FOLDER": str(folder),
              # a database that cannot be opened: any access fails loudly
              "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path}/missing/dir/airflow.db",
              "DBLOG_DATA_ROOT": str(tmp_path / "data-root-must-not-be-created")})
    e.update(env)
    e.pop("AIRFLOW_CONN_SPARK_LOCAL", None)
    proc = subprocess.run([sys.executable, "-c", PARSE, str(folder)], env=e, capture_output=True,
                          text=True, timeout=180)
    line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(line[-1][len("RESULT "):])
    assert not (tmp_path / "data-root-must-not-be-created").exists(), "data root touched at parse time"
    return result


@pytest.fixture(scope="module")
def parsed(tmp_path_factory) -> dict:
    return parse_dags(tmp_path_factory.mktemp("dagbag"))


def test_dag_imports_without_errors(parsed):
    assert parsed["errors"] == {}
    assert "dag" in parsed


def test_no_heavy_imports_at_parse_time(parsed):
    assert parsed["heavy"] == []


def test_nothing_computed_at_parse_time_but_schedule_and_source_names(parsed):
    """Of the task library, parsing calls only the cron, the source names and the job paths
    (a string join); the Spark environment, the plan, the publish... run when a task runs."""
    assert set(parsed["called_at_parse"]) <= {"schedule", "configured_source_names", "job_path"}
    assert {"schedule", "configured_source_names"} <= set(parsed["called_at_parse"])


def test_parse_time_recorder_sees_a_dag_that_computes_at_parse_time(tmp_path):
    """The recorder of the guard is real: a DAG calling spark_env() at parse time shows it."""
    bad = tmp_path / "env_dags"
    bad.mkdir()
    (bad / "env_at_parse.py").write_text(textwrap.dedent("""
        from airflow.sdk import DAG
        from dblog import airflow_tasks as at
        ENV = at.spark_env()
        with DAG("env_at_parse", schedule=None): pass
    """))
    assert parse_dags(tmp_path, bad)["called_at_parse"] == ["spark_env"]


def test_parse_time_guard_catches_database_and_connection_access(tmp_path):
    """The guard of the import test is real: a DAG that touches a connection or a Variable
    at parse time fails to import under it."""
    bad = tmp_path / "bad_dags"
    bad.mkdir()
    (bad / "conn_at_parse.py").write_text(textwrap.dedent("""
        from airflow.sdk import DAG, BaseHook
        BaseHook.get_connection("spark_local")
        with DAG("conn_at_parse", schedule=None): pass
    """))
    (bad / "var_at_parse.py").write_text(textwrap.dedent("""
        from airflow.sdk import DAG, Variable
        Variable.get("x")
        with DAG("var_at_parse", schedule=None): pass
    """))
    (bad / "db_at_parse.py").write_text(textwrap.dedent("""
        from airflow.sdk import DAG
        from airflow.utils.session import create_session
        with create_session() as s: pass
        with DAG("db_at_parse", schedule=None): pass
    """))
    errors = parse_dags(tmp_path, bad)["errors"]
    assert sorted(Path(k).name for k in errors) == ["conn_at_parse.py", "db_at_parse.py",
                                                     "var_at_parse.py"]
    assert all("at DAG parse time" in v for v in errors.values()), errors


def test_stages_in_order(parsed):
    t = parsed["dag"]["tasks"]
    assert t["wait_for_previous_night"]["upstream"] == ["plan"]
    assert t["stage"]["upstream"] == ["plan", "wait_for_previous_night"]
    assert t["merge_manifest"]["upstream"] == ["plan", "stage"]
    assert t["decode"]["upstream"] == ["merge_manifest"]
    assert t["order"]["upstream"] == ["decode"]
    assert t["validate"]["upstream"] == ["order"]
    assert t["publish"]["upstream"] == ["plan", "validate"]
    assert t["report"]["upstream"] == ["publish"]
    assert t["tidy"]["upstream"] == ["plan", "publish"]       # after the swap, off its path
    assert set(t["fail_if_any_task_failed"]["upstream"]) == set(t) - {"fail_if_any_task_failed"}


def test_spark_stages_use_spark_submit_on_the_local_connection(parsed):
    t = parsed["dag"]["tasks"]
    spark = {k for k, v in t.items() if "SparkSubmitOperator" in v["bases"]}
    assert spark == {"decode", "order", "validate"}  # three JVM starts per night, whatever the sources
    for name in spark:
        assert t[name]["conn_id"] == "spark_local"
        assert Path(t[name]["application"]) == REPO / "jobs" / f"{name}.py"
        assert Path(t[name]["application"]).is_file()


def test_stage_mapped_per_source_and_one_publish_serialised(parsed):
    t = parsed["dag"]["tasks"]
    assert t["stage"]["mapped"] and not t["publish"]["mapped"]   # one atomic publish per run
    assert t["publish"]["pool"] == "dblog_publish"
    assert t["tidy"]["pool"] == "dblog_publish" and not t["tidy"]["mapped"]
    assert sorted(t["publish"]["outlets"]) == ["dblog://published/changes", "dblog://published/tables",
                                               "dblog://published/transactions"]
    assert t["report"]["trigger_rule"] == "all_done"
    assert t["fail_if_any_task_failed"]["trigger_rule"] == "one_failed"


def test_retries_and_timeouts(parsed):
    for name, task in parsed["dag"]["tasks"].items():
        if name in ("report", "fail_if_any_task_failed", "wait_for_previous_night"):
            continue  # never retried: a report, a verdict, a sensor with its own timeout
        assert task["retries"] >= 1, name
        assert task["timeout"] and task["timeout"] <= 2 * 3600, name


def test_dag_settings(parsed):
    d = parsed["dag"]
    assert d["max_active_runs"] == 1
    assert d["catchup"] is False
    assert d["doc_md"]
    assert {"dblog", "nightly", "spark"} <= set(d["tags"])
    assert d["schedule"].startswith("CronDataIntervalTimetable(expression='0 3 * * *'")


def test_deadline_alert_after_the_night_ends(parsed, tmp_path):
    """DBLOG_DEADLINE (default 6 hours) after the night ends = logical date + 1 day + it."""
    assert parsed["dag"]["deadline"] == [{
        "reference": "DagRunLogicalDateDeadline", "interval": (24 + 6) * 3600.0,
        "callback": "dblog.progress.deadline_missed", "callback_type": "AsyncCallback"}]
    d = parse_dags(tmp_path / "a", DBLOG_DEADLINE="90m")["dag"]
    assert [x["interval"] for x in d["deadline"]] == [24 * 3600.0 + 90 * 60]
    assert parse_dags(tmp_path / "b", DBLOG_DEADLINE="off")["dag"]["deadline"] == []


def test_schedule_is_configurable(tmp_path):
    d = parse_dags(tmp_path, DBLOG_SCHEDULE="15 1 * * *")["dag"]
    assert "expression='15 1 * * *'" in d["schedule"]


def test_trigger_form_params(parsed):
    d = parsed["dag"]
    configured = ["pos_solid", "erp_db2", "hr_db2v10", "wms_informix", "fin_rdb", "core_zos"]
    assert d["params"] == {"sources": configured, "reprocess_date": None}
    sources = d["param_schema"]["sources"]
    assert sources["type"] == "array" and sources["examples"] == configured  # multi-select
    assert sources["items"]["enum"] == configured
    rd = d["param_schema"]["reprocess_date"]
    assert rd["type"] == ["null", "string"] and rd["format"] == "date"


def test_trigger_form_validates_params(parsed):
    """The DAG's own schemas (as parsed) accept a subset of sources and a date, reject the rest."""
    import jsonschema

    schema = parsed["dag"]["param_schema"]
    ok = jsonschema.Draft202012Validator(schema["sources"], format_checker=jsonschema.FormatChecker())
    ok.validate(["erp_db2", "pos_solid"])
    ok.validate([])
    for bad in (["nope"], ["pos_solid", "pos_solid"], "pos_solid"):
        with pytest.raises(jsonschema.ValidationError):
            ok.validate(bad)
    rd = jsonschema.Draft202012Validator(schema["reprocess_date"], format_checker=jsonschema.FormatChecker())
    rd.validate(None)
    rd.validate("2026-11-01")
    with pytest.raises(jsonschema.ValidationError):
        rd.validate("2026-13-45")
