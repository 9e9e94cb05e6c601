"""Validation gate (write-audit-publish): Great Expectations over the staged outputs.

Checks that need context (the catalog, the night's window, the source's sequence, its
quarantine threshold) are computed by Spark into boolean columns of small *check
datasets* under ``staging/<run_id>/checks/``; the suites in ``expectations/`` (data, not
code) then run in **one** Checkpoint over those datasets, whose Data Docs go to
``reports/<date>/data_docs/``. A failed expectation means: publish nothing.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .order import AUDIT, CHANGES, QUARANTINE, TRANSACTIONS, read_staged
from .paths import DataRoot

EXPECTATIONS_DIR = Path(__file__).resolve().parent.parent / "expectations"
CHECKS = "checks"
SUITES = ("changes", "transactions", "audit", "quarantine")
NO_IMAGES = ("informix",)   # formats whose log carries no row images
log = logging.getLogger("dblog.validate")


@dataclass
class ValidationResult:
    success: bool
    report: str | None
    failures: list[str] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)


# ----------------------------------------------------------------- check datasets

def prepare_changes(spark, manifest: dict, run_dir: Path):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ch = read_staged(spark, run_dir, CHANGES)
    date = _dt.date.fromisoformat(manifest["date"])
    lo = _dt.datetime.combine(date - _dt.timedelta(days=1), _dt.time(), _dt.timezone.utc)
    hi = _dt.datetime.combine(date + _dt.timedelta(days=2), _dt.time(), _dt.timezone.utc)
    known = spark.createDataFrame(
        [(s["name"], t["id"]) for s in manifest["sources"] for t in s["catalog"]["tables"]],
        "source STRING, table_id STRING").withColumn("in_catalog", F.lit(True))
    base = spark.createDataFrame([(s["name"], int(s["seq_base"])) for s in manifest["sources"]],
                                 "source STRING, seq_base LONG")
    w = Window.partitionBy("source").orderBy("commit_position", "trx_id", "event_seq")
    prev_seq, prev_trx = F.lag("commit_seq").over(w), F.lag("trx_id").over(w)
    images = (F.col("format").isin(*NO_IMAGES)
              | (F.col("op").isin("c", "m", "u") & F.col("after").isNotNull())
              | ((F.col("op") == "d") & F.col("before").isNotNull())
              | F.col("op").isin("t", "ddl"))
    return ch.join(known, ["source", "table_id"], "left").join(base, "source", "left") \
        .withColumn("prev_seq", prev_seq).withColumn("prev_trx", prev_trx) \
        .select(
            "source", "commit_seq", "event_seq", "op", "trx_id",
            F.when(F.col("prev_seq").isNull(), F.col("commit_seq") == F.col("seq_base") + 1)
             .when(F.col("prev_trx") == F.col("trx_id"), F.col("commit_seq") == F.col("prev_seq"))
             .otherwise(F.col("commit_seq") == F.col("prev_seq") + 1)
             .alias("seq_follows_commit_order"),
            F.coalesce(images, F.lit(False)).alias("images_present"),
            (F.col("commit_ts").isNull() | ((F.col("commit_ts") >= F.lit(lo))
                                            & (F.col("commit_ts") < F.lit(hi))))
            .alias("commit_ts_in_window"),
            ((F.col("op") == "ddl") | F.coalesce("in_catalog", F.lit(False))).alias("table_known"),
        )


def prepare_transactions(spark, manifest: dict, run_dir: Path):
    from pyspark.sql import functions as F

    tx = read_staged(spark, run_dir, TRANSACTIONS)
    consistent = F.when(F.col("status") == "committed",
                        F.col("commit_position").isNotNull()
                        & (F.col("commit_seq").isNull() == (F.col("event_count") == 0))) \
        .otherwise(F.col("commit_seq").isNull() & (F.col("event_count") == 0))
    return tx.select("source", "trx_id", "status", F.coalesce(consistent, F.lit(False)).alias("consistent"))


def prepare_audit(spark, manifest: dict, run_dir: Path):
    from pyspark.sql import functions as F

    au = read_staged(spark, run_dir, AUDIT)
    return au.select("source", "archive_file", "records_read", "published", "control", "skipped",
                     "held_open", "quarantined",
                     (F.col("records_read") - F.col("published") - F.col("control") - F.col("skipped")
                      - F.col("held_open") - F.col("quarantined")).alias("unaccounted"))


def prepare_quarantine(spark, manifest: dict, run_dir: Path):
    from pyspark.sql import functions as F

    au = read_staged(spark, run_dir, AUDIT).groupBy("source").agg(
        F.sum("records_read").alias("records_read"), F.sum("quarantined").alias("quarantined"))
    q = read_staged(spark, run_dir, QUARANTINE).groupBy("source").agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.when(F.col("archive_file").isNotNull() & F.col("record_offset").isNotNull()
                     & F.col("error_class").isNotNull(), 1).otherwise(0)).alias("located"))
    thr = spark.createDataFrame(
        [(s["name"], float(s["quarantine_threshold"])) for s in manifest["sources"]],
        "source STRING, threshold DOUBLE")
    share = F.when(F.col("records_read") > 0, F.col("quarantined") / F.col("records_read")) \
        .otherwise(F.lit(0.0))
    return thr.join(au, "source", "left").join(q, "source", "left").na.fill(0) \
        .select("source", "threshold", "records_read", "quarantined", share.alias("share"),
                (share <= F.col("threshold")).alias("under_threshold"),
                (F.col("rows") == F.col("located")).alias("rows_located"))


PREPARE = {"changes": prepare_changes, "transactions": prepare_transactions,
           "audit": prepare_audit, "quarantine": prepare_quarantine}


def write_checks(spark, manifest: dict, run_dir: Path) -> Path:
    checks = Path(run_dir) / CHECKS
    for name, prepare in PREPARE.items():
        prepare(spark, manifest, run_dir).coalesce(1).write.mode("overwrite").parquet(str(checks / name))
    return checks


# ----------------------------------------------------------------- Great Expectations

def load_suite(name: str, directory: Path = EXPECTATIONS_DIR):
    import great_expectations as gx
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    doc = json.loads((directory / f"{name}.json").read_text())
    suite = gx.ExpectationSuite(name=doc["name"], meta=doc.get("meta") or {})
    for e in doc["expectations"]:
        suite.add_expectation_configuration(ExpectationConfiguration(
            type=e["type"], kwargs=e["kwargs"], meta=e.get("meta") or {}))
    return suite


def run_checkpoint(checks_dir: Path, docs_dir: Path, project_dir: Path, run_name: str,
                   suites: tuple[str, ...] = SUITES, expectations_dir: Path = EXPECTATIONS_DIR):
    """One Checkpoint over the check datasets; Data Docs written to ``docs_dir``."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("TQDM_DISABLE", "1")
    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    import great_expectations as gx
    from great_expectations.checkpoint import UpdateDataDocsAction
    from great_expectations.core.run_identifier import RunIdentifier

    project_dir.mkdir(parents=True, exist_ok=True)
    ctx = gx.get_context(mode="file", project_root_dir=str(project_dir))
    for site in list(ctx.get_site_names()):
        ctx.delete_data_docs_site(site)
    ctx.add_data_docs_site(site_name="dblog", site_config={
        "class_name": "SiteBuilder",
        "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                          "base_directory": str(docs_dir)},
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
    })
    ds = ctx.data_sources.add_or_update_spark_filesystem(name="staged_checks",
                                                         base_directory=checks_dir)
    vds = []
    for name in suites:
        asset = ds.add_directory_parquet_asset(name=name, data_directory=Path(name))
        bd = asset.add_batch_definition_whole_directory(f"{name}_all")
        suite = ctx.suites.add_or_update(load_suite(name, expectations_dir))
        vds.append(ctx.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=f"{name}_vd", data=bd, suite=suite)))
    cp = ctx.checkpoints.add_or_update(gx.Checkpoint(
        name="dblog_nightly", validation_definitions=vds,
        actions=[UpdateDataDocsAction(name="data_docs", site_names=["dblog"])],
        result_format="SUMMARY"))
    return cp.run(run_id=RunIdentifier(run_name=run_name))


def summarize(result) -> tuple[bool, list[str], list[dict]]:
    failures, rows = [], []
    for vr in result.run_results.values():
        suite = vr.suite_name
        for r in vr.results:
            cfg = r.expectation_config
            column = cfg.kwargs.get("column") or cfg.kwargs.get("column_list")
            unexpected = (r.result or {}).get("unexpected_count")
            rows.append({"suite": suite, "expectation": cfg.type, "column": column,
                         "success": bool(r.success), "unexpected_count": unexpected,
                         "why": (cfg.meta or {}).get("why")})
            if not r.success:
                failures.append(f"{suite}: {cfg.type} on {column}"
                                + (f" ({unexpected} unexpected)" if unexpected else ""))
    return bool(result.success), failures, rows


def validate_stage(spark, manifest: dict, run_dir: Path, root: DataRoot) -> ValidationResult:
    run_dir = Path(run_dir)
    checks = write_checks(spark, manifest, run_dir)
    report_dir = root.reports(manifest["date"])
    docs = report_dir / "data_docs"
    if docs.exists():
        shutil.rmtree(docs)
    result = run_checkpoint(checks, docs, run_dir / "gx", manifest["run_id"])
    success, failures, rows = summarize(result)
    (run_dir / "validation.json").write_text(json.dumps(
        {"success": success, "failures": failures, "results": rows}, indent=1))
    from .report import write_report

    report = write_report(spark, manifest, run_dir, root, success, failures, rows)
    return ValidationResult(success, str(report), failures, rows)
