"""
### dblog_nightly: archived transaction logs -> ordered, validated change stream

One run builds one **logical date** (`ds`, the day the run covers; the cron schedule has
data intervals, so the run for day D starts when D is over). Stages, with the library
function each task calls:

| task | what | runs |
|---|---|---|
| `plan` | resolve trigger parameters and sources; create `staging/<run_id>/` | python |
| `wait_for_previous_night` | nights build on each other: wait for the run of the night before; refuse to build on a failed one | sensor (reschedule) |
| `stage` | per source (mapped): list the night's archives, freeze catalog and previous state | python |
| `merge_manifest` | one manifest for the run | python |
| `decode` | all archives of all sources, one Spark job | spark-submit `jobs/decode.py` |
| `order` | transactions, commit_seq, changes, typed tables, audit, state | spark-submit `jobs/order.py` |
| `validate` | Great Expectations; writes `validation.json` and the report; never publishes | spark-submit `jobs/validate.py` |
| `publish` | once per run (pool `dblog_publish`): every dataset and the state of the run's sources in one atomic step; refuses a failed validation | python, emits Assets |
| `tidy` | after the publish (pool `dblog_publish`): deletes what publishes took out of their versions (nights past retention, replaced folders), prepares the next version; the published version never needs it | python |
| `report` | the data-quality report: path in the log, link in **Extra Links** | python, always runs |
| `fail_if_any_task_failed` | makes the run fail when any task failed (report always succeeds) | watcher |

Trigger parameters: **sources** (empty = all configured) and **reprocess_date** (rebuild
that date instead of the run's own). A rerun of a date replaces what it published.
Downstream DAGs can be scheduled on the Assets `dblog://published/changes`,
`dblog://published/transactions`, `dblog://published/tables`.

Configuration comes from the environment when a task runs: `DBLOG_DATA_ROOT`,
`DBLOG_CONFIG`, the Spark jobs' environment; Spark from the connection `spark_local`. At
parse time the file reads only the cron (`DBLOG_SCHEDULE`), the deadline alert
(`DBLOG_DEADLINE`, default `6h` after the night ends; `off`) and the source names.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import (
    DAG,
    Asset,
    BaseOperator,
    BaseOperatorLink,
    CronDataIntervalTimetable,
    Param,
    TriggerRule,
    task,
)

from dblog import airflow_tasks as at
from dblog.progress import deadline_alert

CHANGES = Asset(name="dblog_published_changes", uri=at.ASSET_URIS["changes"])
TRANSACTIONS = Asset(name="dblog_published_transactions", uri=at.ASSET_URIS["transactions"])
TABLES = Asset(name="dblog_published_tables", uri=at.ASSET_URIS["tables"])
PUBLISHED = {"changes": CHANGES, "transactions": TRANSACTIONS, "tables": TABLES}

SOURCES = at.configured_source_names()
RUN_DIR_ARGS = ["--run-dir", "{{ ti.xcom_pull(task_ids='plan')['run_dir'] }}"]


class DblogSparkSubmitOperator(SparkSubmitOperator):
    """spark-submit with the Spark jobs' environment computed when the task runs."""

    def execute(self, context):
        from airflow.sdk import BaseHook

        master = BaseHook.get_connection(self._conn_id).host or ""
        self.env_vars = {**at.spark_env(master), **(self.env_vars or {})}
        return super().execute(context)


class DataQualityReportLink(BaseOperatorLink):
    """The report of the run, served by the api-server (plugin ``dblog_reports``)."""

    name = "Data-quality report"

    def get_link(self, operator, *, ti_key) -> str:
        return getattr(operator, "report_url", "") or ""


class DataQualityReportOperator(BaseOperator):
    """Log where the night's data-quality report is and link it from the task."""

    operator_extra_links = (DataQualityReportLink(),)
    ui_color = "#e8f0fb"

    def execute(self, context):
        plan_out = context["ti"].xcom_pull(task_ids="plan")
        info = at.describe_report(plan_out)
        self.report_url = info["url"]
        verdict = {None: "not validated", True: "VALID", False: "VALIDATION FAILED"}[info["valid"]]
        self.log.info("Data-quality report for %s (%s): %s", info["date"], verdict, info["report"])
        self.log.info("In the Airflow UI: %s (Extra Links: %s)", info["url"], DataQualityReportLink.name)
        for f in info["failures"]:
            self.log.info("  failed: %s", f)
        try:
            published = (context["ti"].xcom_pull(task_ids="publish") or {}).get("sources", [])
        except Exception as exc:  # noqa: BLE001 - lineage never fails the report
            self.log.warning("could not read which sources were published: %r", exc)
            published = []
        at.lineage_end(plan_out, published)   # OpenLineage COMPLETE / FAIL of the run
        if not info["exists"]:
            from airflow.sdk.exceptions import AirflowFailException

            raise AirflowFailException(f"no report was written for {info['date']} (validate did not run)")
        return info


default_args = {
    "owner": "data-platform",
    "retries": 2,
    "retry_delay": timedelta(minutes=1),
    "retry_exponential_backoff": True,
    "max_retry_delay": timedelta(minutes=10),
    "execution_timeout": timedelta(minutes=15),
}
spark_args = {
    "conn_id": at.SPARK_CONN_ID,
    "conf": {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"},
    "application_args": RUN_DIR_ARGS,
    "execution_timeout": timedelta(hours=2),
}

with DAG(
    dag_id=at.DAG_ID,
    description="Archived DB transaction logs -> ordered, validated change stream (Parquet)",
    schedule=CronDataIntervalTimetable(at.schedule(), timezone="UTC"),
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=12),
    deadline=deadline_alert(),   # DBLOG_DEADLINE (default 6h) after the night ends; "off": none
    default_args=default_args,
    tags=["dblog", "cdc", "spark", "great-expectations", "nightly"],
    doc_md=__doc__,
    params={
        "sources": Param(
            SOURCES, type="array", title="Sources",
            items={"type": "string", **({"enum": SOURCES} if SOURCES else {})},
            uniqueItems=True, examples=SOURCES,
            description="Sources to run (default all configured; empty also means all)."),
        "reprocess_date": Param(
            None, type=["null", "string"], format="date", title="Reprocess date",
            description="Rebuild this date (YYYY-MM-DD) instead of the run's logical date; "
                        "what it published is replaced. Empty: the run's own date."),
    },
) as dag:

    @task(execution_timeout=timedelta(minutes=5))
    def plan(params=None, ds=None, run_id=None):
        """Resolve sources and date from the trigger parameters; create the run directory."""
        from airflow.sdk.exceptions import AirflowFailException

        try:
            return at.plan(params, ds, run_id)
        except at.PlanError as exc:
            raise AirflowFailException(str(exc)) from exc

    @task.sensor(poke_interval=15, timeout=timedelta(hours=12), mode="reschedule", retries=0,
                 execution_timeout=None)
    def wait_for_previous_night(plan_out: dict, **context):
        """Nights build on each other: wait for the previous night's run to succeed.
        When it may go, it hands on the night's sources (the stage task maps over them)."""
        from airflow.sdk import PokeReturnValue

        ready = at.wait_for_previous_night(context)
        return PokeReturnValue(is_done=ready, xcom_value=plan_out["sources"] if ready else None)

    @task(map_index_template="{{ task.op_kwargs['source'] }}",
          execution_timeout=timedelta(minutes=10))
    def stage(plan_out: dict, source: str):
        """Stage one source: the night's archives, its catalog, the state it continues from."""
        return at.stage_source(plan_out, source)

    @task(execution_timeout=timedelta(minutes=5))
    def merge_manifest(plan_out: dict, staged: list):
        return at.merge_manifest(plan_out)

    decode = DblogSparkSubmitOperator(task_id="decode", application=at.job_path("decode"),
                                      name="dblog-decode", **spark_args)
    order = DblogSparkSubmitOperator(task_id="order", application=at.job_path("order"),
                                     name="dblog-order", **spark_args)
    validate = DblogSparkSubmitOperator(task_id="validate", application=at.job_path("validate"),
                                        name="dblog-validate", **spark_args)

    @task(pool=at.PUBLISH_POOL, outlets=list(PUBLISHED.values()),
          execution_timeout=timedelta(minutes=30))
    def publish(plan_out: dict, outlet_events=None):
        """Publish the run once, atomically: every dataset and the state of its sources
        (nothing when validation failed)."""
        out = at.publish_run(plan_out)
        for dataset, asset in PUBLISHED.items():
            outlet_events[asset].extra = at.asset_extra(out, dataset)
        return out

    @task(pool=at.PUBLISH_POOL, execution_timeout=timedelta(minutes=30))
    def tidy(plan_out: dict):
        """After the publish: delete what the publishes took out of their versions and
        prepare the next version (the published one never needs this)."""
        return at.tidy_run(plan_out)

    report = DataQualityReportOperator(task_id="report", trigger_rule=TriggerRule.ALL_DONE,
                                       retries=0, execution_timeout=timedelta(minutes=5))

    @task(trigger_rule=TriggerRule.ONE_FAILED, retries=0)
    def fail_if_any_task_failed():
        """Runs only when a task failed: the report task always succeeds, this fails the run."""
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException("a task of this run failed; see the failed task's log")

    planned = plan()
    sources = wait_for_previous_night(planned)
    staged = stage.partial(plan_out=planned).expand(source=sources)
    manifest = merge_manifest(planned, staged)
    published = publish(planned)
    manifest >> decode >> order >> validate >> published >> report
    published >> tidy(planned)
    list(dag.tasks) >> fail_if_any_task_failed()
