"""What the ``dblog_nightly`` DAG calls: plain functions, importable and tested without Airflow.

``dags/dblog_nightly.py`` only wires these together. This module imports nothing heavy at
import time (the DAG file imports it at parse time): the pipeline, Spark and Airflow
are imported inside the functions that need them, when a task runs.

The run directory of an Airflow run is ``<data root>/staging/<safe run_id>/``; every task
finds it in the ``plan`` task's output. The data root is ``$DBLOG_DATA_ROOT`` (default
``./data``) and the configuration ``$DBLOG_CONFIG`` (default ``include/sources.yaml``),
both resolved when a task runs, never when the DAG is parsed.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger("dblog.airflow")

DAG_ID = "dblog_nightly"
SPARK_CONN_ID = "spark_local"
PUBLISH_POOL = "dblog_publish"
DEFAULT_SCHEDULE = "0 3 * * *"
REPORTS_URL_PREFIX = "/dblog-reports"
REPO = Path(__file__).resolve().parent.parent
JOBS_DIR = REPO / "jobs"

# Published datasets as Airflow Assets (SPEC section 2). Their URIs name the datasets, not a
# path: the data root is only known when a task runs; each event's extra carries the path.
ASSET_URIS = {
    "changes": "dblog://published/changes",
    "transactions": "dblog://published/transactions",
    "tables": "dblog://published/tables",
}


class PlanError(ValueError):
    """Bad trigger parameters or configuration: the run cannot start."""


# ----------------------------------------------------------------- parse time (cheap)

def schedule() -> str:
    """The nightly cron (``$DBLOG_SCHEDULE``, default 03:00 UTC)."""
    return os.environ.get("DBLOG_SCHEDULE", "").strip() or DEFAULT_SCHEDULE


def configured_source_names(config: str | os.PathLike | None = None) -> list[str]:
    """Source names of the configuration, for the trigger form's choices.

    Reads one small YAML file and validates nothing (``plan`` validates at run time); any
    problem gives an empty list rather than a DAG import error.
    """
    import yaml

    path = Path(config or os.environ.get("DBLOG_CONFIG") or REPO / "include" / "sources.yaml")
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        return [str(s["name"]) for s in doc["sources"] if isinstance(s, dict) and "name" in s]
    except Exception:  # noqa: BLE001 - the form just offers no choices
        return []


# ----------------------------------------------------------------- plan

def plan(params: dict, ds: str, run_id: str, config: str | None = None,
         data_root: str | None = None) -> dict:
    """Resolve the run: logical date, sources, run directory. Starts the run directory afresh."""
    from decoders.errors import ConfigError

    from .config import load_config
    from .paths import DataRoot, check_date, safe_run_id

    date = params.get("reprocess_date") or ds
    try:
        check_date(str(date))
    except ValueError as exc:
        raise PlanError(f"reprocess_date: {exc}") from None
    wanted = params.get("sources") or []
    if isinstance(wanted, str):
        wanted = [w for w in wanted.replace(",", "\n").split() if w]
    wanted = list(dict.fromkeys(str(w).strip() for w in wanted if str(w).strip()))
    try:
        cfg = load_config(config)
        sources = cfg.select(wanted or None)
        for s in sources:
            s.catalog()
    except ConfigError as exc:
        raise PlanError(str(exc)) from exc
    root = DataRoot.of(data_root)
    run_dir = root.staging(safe_run_id(run_id))
    if run_dir.exists():  # a cleared run starts from scratch
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    out = {"date": date, "sources": [s.name for s in sources], "run_dir": str(run_dir),
           "data_root": str(root.root), "config": str(cfg.path),
           "reprocess": bool(params.get("reprocess_date"))}
    log.info("plan: %s", json.dumps(out))
    return out


# ----------------------------------------------------------------- the night gate

def previous_night_ready(prev_state: str | None, prev_date: str | None,
                         reprocess: bool = False) -> bool:
    """May this run start? Nights are built on each other (held transactions, commit_seq):
    a night waits for the run of the night before it, and refuses to start on a failed one.

    ``prev_state`` is the state of the DAG run with the latest earlier logical date (None:
    there is none). Explicit reprocessing (``reprocess_date``) does not wait.
    """
    if reprocess or prev_state is None or prev_state == "success":
        return True
    if prev_state == "failed":
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(
            f"the run of the previous night ({prev_date}) failed; this night continues from it. "
            f"Rerun that night first (clear it, or a backfill from {prev_date} with "
            f"'Missing and Errored Runs'), then clear this run.")
    log.info("waiting for the run of the previous night (%s) to finish: %s", prev_date, prev_state)
    return False


def wait_for_previous_night(context) -> bool:
    ti = context["ti"]
    reprocess = bool(context["params"].get("reprocess_date"))
    prev = None if reprocess else ti.get_previous_dagrun()
    state = None if prev is None else str(getattr(prev.state, "value", prev.state))
    when = None if prev is None else str(prev.logical_date)
    return previous_night_ready(state, when, reprocess)


# ----------------------------------------------------------------- stage

def stage_source(plan_out: dict, source: str) -> dict:
    import time

    from .metrics import record_seconds
    from .pipeline import stage_source_part
    from .stage import load_manifest

    t0 = time.monotonic()
    part = stage_source_part(plan_out["date"], source, Path(plan_out["run_dir"]), plan_out["config"])
    record_seconds(Path(plan_out["run_dir"]), f"stage.{source}", time.monotonic() - t0)
    entry = load_manifest(part)["sources"][0]
    size = sum(a["size"] for a in entry["archives"])
    log.info("%s %s: %d archives (%d bytes), continues from %s (commit_seq %d)", source,
             plan_out["date"], len(entry["archives"]), size, entry["prev_state"] or "nothing",
             entry["seq_base"])
    return {"source": source, "archives": len(entry["archives"]), "bytes": size,
            "prev_state": entry["prev_state"], "seq_base": entry["seq_base"]}


def merge_manifest(plan_out: dict) -> str:
    from .pipeline import merge_stage_parts

    from .lineage import emit_now

    manifest = merge_stage_parts(Path(plan_out["run_dir"]), plan_out["sources"])
    path = Path(plan_out["run_dir"]) / "manifest.json"
    emit_now("START", manifest)          # the run's OpenLineage START (never fails the task)
    log.info("manifest %s: %d sources, %d archives", path, len(manifest["sources"]),
             sum(len(s["archives"]) for s in manifest["sources"]))
    return str(path)


# ----------------------------------------------------------------- spark-submit

def job_path(name: str) -> str:
    return str(JOBS_DIR / f"{name}.py")


def spark_env(master: str | None = None) -> dict[str, str]:
    """Environment of the spark-submit processes: the venv's Python on both sides; on a
    local ``master`` (the connection's host), the driver JVM maps the class archive of
    ``dblog jvm-cache`` when there is one (``SPARK_SUBMIT_OPTS``, which spark-submit gives
    the driver JVM only). Called when a Spark task runs (never when the DAG is parsed)."""
    import sys

    from .jvmcache import java_options

    python = os.environ.get("PYSPARK_PYTHON") or sys.executable
    env = {"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python,
           "GX_ANALYTICS_ENABLED": "false", "TQDM_DISABLE": "1"}
    for key in ("DBLOG_DATA_ROOT", "DBLOG_CONFIG", "DBLOG_SHUFFLE_PARTITIONS", "JAVA_HOME"):
        if os.environ.get(key):
            env[key] = os.environ[key]
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    if (master or "").startswith("local") and "SharedArchiveFile" not in opts and "Xshare" not in opts:
        archive = java_options()
        if archive:
            env["SPARK_SUBMIT_OPTS"] = " ".join([opts, *archive]).strip()
    return env


# ----------------------------------------------------------------- publish

def publish_run(plan_out: dict) -> dict:
    """Publish the run, all its sources and datasets in one atomic step; refuse (no retry)
    when validation failed or the publish is refused (e.g. a rerun that would renumber)."""
    from airflow.sdk.exceptions import AirflowFailException

    from .pipeline import load_validation, publish_night
    from .publish import PublishError

    run_dir = Path(plan_out["run_dir"])
    verdict = load_validation(run_dir)
    report = report_path(plan_out)
    if verdict is None:
        raise AirflowFailException(f"no validation result in {run_dir}; nothing published")
    if not verdict["success"]:
        raise AirflowFailException(
            f"validation failed for {plan_out['date']}, nothing published:\n  "
            + "\n  ".join(verdict["failures"]) + f"\nreport: {report}")
    import time

    from .metrics import record_seconds

    t0 = time.monotonic()
    try:
        version = publish_night(run_dir)
    except PublishError as exc:
        raise AirflowFailException(str(exc)) from exc
    record_seconds(run_dir, "publish", time.monotonic() - t0)
    root = Path(plan_out["data_root"])
    out = {"sources": list(plan_out["sources"]), "date": plan_out["date"],
           "snapshot": Path(version).name, "published": str(root / "published")}
    log.info("published %s for %s as version %s", ", ".join(out["sources"]), plan_out["date"], version)
    return out


def tidy_run(plan_out: dict) -> dict:
    """After the publish: delete what the publishes took out of their versions, prepare the
    next one (``dblog.publish.tidy``). The published version never depends on it; a failed
    or killed tidy is finished by its retry, the next tidy or the next publish."""
    import time

    from .metrics import record_seconds
    from .paths import DataRoot
    from .publish import tidy

    t0 = time.monotonic()
    done = tidy(DataRoot(Path(plan_out["data_root"])))
    record_seconds(Path(plan_out["run_dir"]), "tidy", time.monotonic() - t0)
    log.info("tidy: %d folders of the trash deleted, next version from %s", done["trash_removed"],
             done["next_from"] or "as is")
    return done


def asset_extra(published: dict, dataset: str) -> dict:
    return {"source": ",".join(published["sources"]), "sources": published["sources"],
            "date": published["date"], "snapshot": published["snapshot"],
            "path": f"{published['published']}/{dataset}"}


# ----------------------------------------------------------------- report

def report_path(plan_out: dict) -> Path:
    return Path(plan_out["data_root"]) / "reports" / plan_out["date"] / "index.html"


def report_url(date: str, base_url: str | None = None) -> str:
    """Where the api-server shows the report (the ``dblog_reports`` plugin serves reports/)."""
    base = (base_url if base_url is not None else os.environ.get("AIRFLOW__API__BASE_URL", ""))
    return f"{base.rstrip('/')}{REPORTS_URL_PREFIX}/{date}/index.html"


def describe_report(plan_out: dict) -> dict:
    """The report of the run, for the log and the task's extra link."""
    path = report_path(plan_out)
    verdict = load_validation_safe(plan_out)
    summary_file = path.parent / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
    out = {"date": plan_out["date"], "report": str(path), "exists": path.is_file(),
           "url": report_url(plan_out["date"]),
           "valid": None if verdict is None else bool(verdict["success"]),
           "failures": [] if verdict is None else verdict["failures"],
           "run_id": summary.get("run_id")}
    return out


def lineage_end(plan_out: dict, published_sources: list[str]) -> bool:
    """The run's OpenLineage COMPLETE (every source published) or FAIL (why not), written by
    the report task. Never raises."""
    from .lineage import emit_now
    from .metrics import read_seconds
    from .stage import load_manifest

    try:
        run_dir = Path(plan_out["run_dir"])
        manifest = load_manifest(run_dir)
        verdict = load_validation_safe(plan_out) or {}
        seconds = read_seconds(run_dir)
        missing = sorted(set(plan_out["sources"]) - set(published_sources))
        if not missing:
            return emit_now("COMPLETE", manifest, run_dir=run_dir, published=True, seconds=seconds,
                            warnings=verdict.get("warnings"))
        failures = list(verdict.get("failures") or []) or [f"not published: {', '.join(missing)}"]
        return emit_now("FAIL", manifest, run_dir=run_dir, error="; ".join(failures)[:2000],
                        seconds=seconds, failures=failures, warnings=verdict.get("warnings"))
    except Exception as exc:  # noqa: BLE001 - lineage never fails the night
        log.warning("OpenLineage end event not written: %r", exc)
        return False


def load_validation_safe(plan_out: dict) -> dict | None:
    from .pipeline import load_validation

    try:
        return load_validation(Path(plan_out["run_dir"]))
    except (OSError, ValueError):
        return None
