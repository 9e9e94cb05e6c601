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
import time
from dataclasses import dataclass, field
from pathlib import Path

from decoders import FORMATS, get as get_format
from decoders.events import KINDS

from .decode import EVENTS_DIR, spark_event_schema
from .mirror import prepare_missing_base, prepare_mirror, prepare_net_changes
from .order import AUDIT, CHANGES, QUARANTINE, TRANSACTIONS, read_staged
from .paths import DataRoot
from .sparkio import local_frame, run_concurrently, side_by_side, write_parquet

EXPECTATIONS_DIR = Path(__file__).resolve().parent.parent / "expectations"
CHECKS = "checks"
SUITES = ("events", "changes", "commit_order", "transactions", "audit", "quarantine", "mirror",
          "net_changes", "mirror_missing_base")
# Only what decides pass/fail is computed by GX (one bundled aggregate per level of the metric
# graph); counts and example rows of a *failed* expectation are computed afterwards by
# ``explain``, so a good night pays for none of them.
RESULT_FORMAT = "BOOLEAN_ONLY"
# A check dataset of at most this many rows (counted from its Parquet footers after its
# Spark write) is validated by Great Expectations' pandas engine from one Parquet file read
# with pyarrow: the same expectations, without the ~3 Spark queries per suite that GX's
# Spark engine runs one after another. ``DBLOG_GX_PANDAS_ROWS`` sets it (0: always Spark).
PANDAS_MAX_ROWS = 250_000
PANDAS_ROWS_ENV = "DBLOG_GX_PANDAS_ROWS"
PANDAS_DIR = "pandas_checks"  # under the GX project directory: the single-file copies
EXPLAIN_ROWS = 3            # rows of a check dataset quoted in the message of a failed expectation
log = logging.getLogger("dblog.validate")


@dataclass
class ValidationResult:
    success: bool
    report: str | None
    failures: list[str] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)
    checks: list = field(default_factory=list)      # dblog.checks.CheckResult of the night

    @property
    def warnings(self) -> list[str]:
        return [c.message for c in self.checks if c.flagged and not c.failed]


# ----------------------------------------------------------------- check datasets

def prepare_events(spark, manifest: dict, run_dir: Path):
    """One row per (source, archive) of the decoded events: counts of malformed rows.

    The decoded events are the largest dataset of the night, so they are reduced here in
    one aggregation and the suite looks at a handful of rows, not at every event."""
    from pyspark.sql import functions as F

    ev = spark.read.schema(spark_event_schema()).parquet(str(Path(run_dir) / EVENTS_DIR))
    listed = local_frame(spark,
        [(s["name"], a["file"]) for s in manifest["sources"] for a in s["archives"]],
        "source STRING, archive_file STRING").withColumn("listed", F.lit(True))

    def count(cond):
        return F.sum(F.when(cond, 1).otherwise(0)).cast("long")

    kind = F.col("kind")
    agg = ev.groupBy("source", "archive_file").agg(
        F.count(F.lit(1)).alias("rows"),
        F.coalesce(F.sum("n_records"), F.lit(0)).cast("long").alias("records"),
        count(kind.isNull() | ~kind.isin(*KINDS)).alias("unknown_kind"),
        count((kind == "quarantine") & (F.col("error_class").isNull() | F.col("message").isNull()))
        .alias("quarantine_unexplained"),
        count(F.col("n_records").isNull() | (F.col("n_records") < 0)).alias("bad_n_records"),
    )
    return agg.join(listed, ["source", "archive_file"], "left") \
        .select("source", "archive_file", "rows", "records", "unknown_kind",
                "quarantine_unexplained", "bad_n_records",
                F.coalesce("listed", F.lit(False)).alias("archive_listed"))


def commit_order(changes, transactions):
    """Changes (source, commit_seq, trx_id, commit_position) and the transactions that hold
    a commit_seq (source, commit_seq, trx_id, commit_position, event_count, seq_base) -> one
    row per (source, commit_seq) that either has: source, commit_seq, trx_id (its
    transaction), transactions and changes (how many hold it), seq_follows_commit_order,
    changes_match_transaction.

    The sequence is right when, per source, the transactions' ``commit_seq`` run from
    ``seq_base + 1`` without gap or repeat in the order of (``commit_position``,
    ``trx_id``), and the changes at each commit_seq are exactly those of the transaction
    holding it (its id, its commit position, as many as its ``event_count``). That is
    checked *locally*, without a window over a whole source (one task sorting the night):
    each commit_seq is held by one transaction, and the transaction holding ``commit_seq -
    1`` comes before it in commit order (or commit_seq is ``seq_base + 1``). Unique values
    that each have their predecessor form the run seq_base+1..seq_base+n, and each step
    increasing makes that run the commit order. The changes are reduced per commit_seq first
    (their count, and the lowest and highest 64-bit hash of their (trx_id, commit_position)):
    a hash aggregation, partial where they are read, so that only as many rows as
    transactions are shuffled and no task sorts the night."""
    from pyspark.sql import functions as F

    # (a hash skips nulls: the null flags keep (null, x) and (x, null) apart)
    h = F.xxhash64("trx_id", "commit_position", F.col("trx_id").isNull(),
                   F.col("commit_position").isNull())
    # (a change without a commit_seq fails the changes suite's not-null expectation)
    per_seq = changes.filter(F.col("commit_seq").isNotNull()).groupBy("commit_seq", "source").agg(
        F.count(F.lit(1)).alias("n"), F.min(h).alias("h_lo"), F.max(h).alias("h_hi"))
    types = {"commit_seq": "long", "key": "string", "event_count": "long", "seq_base": "long",
             "h": "long", "n": "long", "h_lo": "long", "h_hi": "long"}

    def rows(df, kind: int, **cols):
        return df.select("source", F.lit(kind).alias("kind"),
                         *[cols.get(c, F.lit(None)).cast(t).alias(c) for c, t in types.items()])

    # (commit_position, trx_id) as one string that sorts like the pair: positions are hex,
    # so NUL sorts below any of their characters
    key = F.concat("commit_position", F.lit("\0"), "trx_id")
    holds = rows(transactions, 0, commit_seq=F.col("commit_seq"), key=key,
                 event_count=F.col("event_count"), seq_base=F.col("seq_base"), h=h)
    # each transaction also stands at the next commit_seq, as the one before it there
    precedes = rows(transactions, 1, commit_seq=F.col("commit_seq") + 1, key=key)
    seen = rows(per_seq, 2, commit_seq=F.col("commit_seq"), n=F.col("n"), h_lo=F.col("h_lo"),
                h_hi=F.col("h_hi"))
    kind = F.col("kind")
    # grouped by commit_seq first: the aggregation sorts by it, and a long sorts by prefix;
    # the rows of a commit_seq come from different files, so they are exchanged first and
    # sorted once (a partial aggregation before the exchange would sort them for nothing)
    at = holds.unionByName(precedes).unionByName(seen).repartition("commit_seq", "source") \
        .groupBy("commit_seq", "source").agg(
        F.count(F.when(kind == 0, 1)).alias("transactions"),
        F.count(F.when(kind == 1, 1)).alias("n_before"),
        F.max(F.when(kind == 0, F.col("key"))).alias("key"),
        F.max(F.when(kind == 1, F.col("key"))).alias("key_before"),
        F.max("event_count").alias("event_count"), F.max("seq_base").alias("seq_base"),
        F.max("h").alias("h"), F.coalesce(F.sum("n"), F.lit(0)).alias("changes"),
        F.max("h_lo").alias("h_lo"), F.max("h_hi").alias("h_hi"))
    one = F.col("transactions") == 1
    follows = one & ((F.col("commit_seq") == F.col("seq_base") + 1)
                     | ((F.col("n_before") == 1) & (F.col("key_before") < F.col("key"))))
    match = (one & (F.col("changes") > 0) & (F.col("changes") == F.col("event_count"))
             & (F.col("h_lo") == F.col("h")) & (F.col("h_hi") == F.col("h")))
    return at.filter((F.col("transactions") > 0) | (F.col("changes") > 0)).select(
        "source", "commit_seq", F.substring_index("key", "\0", -1).alias("trx_id"),
        "transactions", "changes",
        F.coalesce(follows, F.lit(False)).alias("seq_follows_commit_order"),
        F.coalesce(match, F.lit(False)).alias("changes_match_transaction"))


def commit_order_summary(order):
    """``commit_order``'s rows -> one row per source: commit_seqs, transactions, changes,
    out_of_order and unmatched (how many commit_seqs fail each rule) and the first of each
    (``first_out_of_order``, ``first_unmatched``; null when none). The suite reads these few
    rows, not one row per transaction."""
    from pyspark.sql import functions as F

    def failing(col):
        return F.col(col).isNull() | ~F.col(col)

    def first(col):
        return F.min(F.when(failing(col), F.col("commit_seq")))

    return order.groupBy("source").agg(
        F.count(F.lit(1)).alias("commit_seqs"),
        F.sum("transactions").alias("transactions"), F.sum("changes").alias("changes"),
        F.count(F.when(failing("seq_follows_commit_order"), 1)).alias("out_of_order"),
        first("seq_follows_commit_order").alias("first_out_of_order"),
        F.count(F.when(failing("changes_match_transaction"), 1)).alias("unmatched"),
        first("changes_match_transaction").alias("first_unmatched"))


def prepare_commit_order(spark, manifest: dict, run_dir: Path):
    """``commit_order_summary`` of ``commit_order`` over the staged changes and the staged
    transactions that hold a commit_seq (with their source's ``seq_base`` from the manifest)."""
    from pyspark.sql import functions as F

    base = local_frame(spark, [(s["name"], int(s["seq_base"])) for s in manifest["sources"]],
                       "source STRING, seq_base LONG")
    ch = read_staged(spark, run_dir, CHANGES).select("source", "commit_seq", "trx_id",
                                                     "commit_position")
    tx = read_staged(spark, run_dir, TRANSACTIONS).filter(F.col("commit_seq").isNotNull()) \
        .join(base, "source", "left")
    return commit_order_summary(commit_order(ch, tx))


def prepare_changes(spark, manifest: dict, run_dir: Path):
    from pyspark.sql import functions as F

    ch = read_staged(spark, run_dir, CHANGES)
    date = _dt.date.fromisoformat(manifest["date"])
    lo = _dt.datetime.combine(date - _dt.timedelta(days=1), _dt.time(), _dt.timezone.utc)
    hi = _dt.datetime.combine(date + _dt.timedelta(days=2), _dt.time(), _dt.timezone.utc)
    known = local_frame(spark,
        [(s["name"], t["id"]) for s in manifest["sources"] for t in s["catalog"]["tables"]],
        "source STRING, table_id STRING").withColumn("in_catalog", F.lit(True))
    no_images = [f for f in FORMATS if not get_format(f).HAS_IMAGES]
    images = (F.col("format").isin(*no_images)
              | (F.col("op").isin("c", "m", "u") & F.col("after").isNotNull())
              | ((F.col("op") == "d") & F.col("before").isNotNull())
              | F.col("op").isin("t", "ddl"))
    # each row's own checks: nothing is shuffled (the commit order is ``commit_order``'s)
    return ch.join(known, ["source", "table_id"], "left").select(
        "source", "commit_seq", "event_seq", "op", "trx_id",
        F.coalesce(images, F.lit(False)).alias("images_present"),
        (F.col("commit_ts").isNull() | ((F.col("commit_ts") >= F.lit(lo))
                                        & (F.col("commit_ts") < F.lit(hi))))
        .alias("commit_ts_in_window"),
        ((F.col("op") == "ddl") | F.coalesce("in_catalog", F.lit(False))).alias("table_known"))


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
    return au.select("source", "archive_file", "entry", "records_read", "published", "control",
                     "skipped", "held_open", "quarantined", "bytes_read", "bytes_decoded",
                     "bytes_quarantined", "bytes_skipped", "reason",
                     # null anywhere counts as unaccounted (-1): GX passes nulls in value sets
                     F.coalesce(F.col("records_read") - F.col("published") - F.col("control")
                                - F.col("skipped") - F.col("held_open") - F.col("quarantined"),
                                F.lit(-1)).alias("unaccounted"),
                     F.coalesce(F.col("bytes_read") - F.col("bytes_decoded")
                                - F.col("bytes_quarantined") - F.col("bytes_skipped"),
                                F.lit(-1)).alias("bytes_unaccounted"),
                     F.coalesce(F.col("lost") & ~F.coalesce("accepted_loss", F.lit(False)),
                                F.lit(True)).alias("lost_not_accepted"))


def prepare_quarantine(spark, manifest: dict, run_dir: Path):
    """One row per source: quarantined shares of records and of bytes against its thresholds.

    Not counted in the shares (they are reported apart): records of tables the catalog does
    not know when the source says ``unknown_tables: quarantine`` (the default), and archives
    whose loss the operator accepted. With ``unknown_tables: fail`` every ``unknown_table``
    row fails the night."""
    from pyspark.sql import functions as F

    def total(cond, col):
        return F.coalesce(F.sum(F.when(cond, F.col(col))), F.lit(0)).cast("long")

    archive = F.coalesce(F.col("entry"), F.lit("archive")) == "archive"
    au = read_staged(spark, run_dir, AUDIT).groupBy("source").agg(
        total(archive, "records_read").alias("records_read"),
        total(archive, "quarantined").alias("quarantined"),
        total(archive, "bytes_read").alias("bytes_read"),
        total(archive, "bytes_quarantined").alias("bytes_quarantined"),
        total(archive & F.coalesce("accepted_loss", F.lit(False)), "bytes_quarantined")
        .alias("accepted_bytes"))
    unknown = F.col("error_class") == "unknown_table"
    q = read_staged(spark, run_dir, QUARANTINE).groupBy("source").agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.when(unknown, 1).otherwise(0)).alias("unknown_rows"),
        total(unknown, "n_records").alias("unknown_records"),
        total(unknown, "n_bytes").alias("unknown_bytes"),
        F.sum(F.when(F.col("archive_file").isNotNull() & F.col("record_offset").isNotNull()
                     & F.col("error_class").isNotNull(), 1).otherwise(0)).alias("located"))
    thr = local_frame(spark,
        [(s["name"], float(s["quarantine_threshold"]),
          float(s.get("quarantine_threshold_bytes", s["quarantine_threshold"])),
          s.get("unknown_tables") or "quarantine") for s in manifest["sources"]],
        "source STRING, threshold DOUBLE, threshold_bytes DOUBLE, unknown_tables STRING")
    tolerated = F.col("unknown_tables") == "quarantine"
    counted = F.col("quarantined") - F.when(tolerated, F.col("unknown_records")).otherwise(0)
    counted_bytes = F.col("bytes_quarantined") - F.col("accepted_bytes") \
        - F.when(tolerated, F.col("unknown_bytes")).otherwise(0)
    share = F.when(F.col("records_read") > 0, counted / F.col("records_read")).otherwise(F.lit(0.0))
    byte_share = F.when(F.col("bytes_read") > 0, counted_bytes / F.col("bytes_read")) \
        .otherwise(F.lit(0.0))
    return thr.join(au, "source", "left").join(q, "source", "left").na.fill(0) \
        .select("source", "threshold", "threshold_bytes", "unknown_tables", "records_read",
                "quarantined", share.alias("share"), (share <= F.col("threshold")).alias("under_threshold"),
                "bytes_read", "bytes_quarantined", byte_share.alias("byte_share"),
                (byte_share <= F.col("threshold_bytes")).alias("bytes_under_threshold"),
                (F.col("rows") == F.col("located")).alias("rows_located"),
                F.when(tolerated, F.lit(0)).otherwise(F.col("unknown_rows")).cast("long")
                .alias("unknown_table_rows"),
                F.col("unknown_rows").cast("long").alias("unknown_table_rows_quarantined"))


PREPARE = {"events": prepare_events, "changes": prepare_changes, "commit_order": prepare_commit_order,
           "transactions": prepare_transactions,
           "audit": prepare_audit, "quarantine": prepare_quarantine,
           # mirrors and net changes (dblog/mirror.py)
           "mirror": prepare_mirror, "net_changes": prepare_net_changes,
           "mirror_missing_base": prepare_missing_base}


def write_checks(spark, manifest: dict, run_dir: Path, suites: tuple[str, ...] = SUITES) -> Path:
    """Write the check dataset of each suite under ``<run_dir>/checks/<suite>/``.

    Written as the data partitions it (never through one task: a check dataset can be as
    large as the night, e.g. one row per change); adaptive execution coalesces the small ones
    into a file or a few. The suites' datasets are independent small jobs: they are written
    concurrently, so that they keep every core busy."""
    checks = Path(run_dir) / CHECKS

    def job(name: str):
        # the dataset is built in its thread too: reading the staged outputs' schemas and
        # analysing the plan are driver work that the threads overlap
        return lambda: write_parquet(PREPARE[name](spark, manifest, run_dir), str(checks / name))()

    run_concurrently([job(name) for name in suites])
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


def pandas_max_rows() -> int:
    text = os.environ.get(PANDAS_ROWS_ENV, "").strip()
    if not text:
        return PANDAS_MAX_ROWS
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{PANDAS_ROWS_ENV}={text!r}: expected a whole number of rows") from None
    if value < 0:
        raise ValueError(f"{PANDAS_ROWS_ENV}={text!r}: expected a number of rows >= 0")
    return value


def _parquet_rows(directory: Path) -> int | None:
    """Rows of the Parquet files of a Spark-written dataset, from their footers (None when
    the folder holds none or one cannot be read)."""
    import pyarrow.parquet as pq

    files = [f for f in Path(directory).glob("*.parquet") if not f.name.startswith((".", "_"))]
    if not files:
        return None
    try:
        return sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    except Exception:  # noqa: BLE001 - then GX reads it with Spark, as it always did
        return None


def small_check_copies(checks_dir: Path, suites: tuple[str, ...], max_rows: int,
                       into: Path) -> dict[str, Path]:
    """``{suite: file}``: a one-file copy (``into/gx-<suite>.parquet``, read and written
    with pyarrow) of each check dataset of at most ``max_rows`` rows, for GX's pandas engine."""
    import pyarrow.parquet as pq

    out: dict[str, Path] = {}
    if max_rows <= 0:
        return out
    for name in suites:
        directory = Path(checks_dir) / name
        rows = _parquet_rows(directory)
        if rows is None or rows > max_rows:
            continue
        files = sorted(f for f in directory.glob("*.parquet") if not f.name.startswith((".", "_")))
        table = pq.read_table(files[0]) if len(files) == 1 else pq.ParquetDataset(files).read()
        into.mkdir(parents=True, exist_ok=True)
        target = into / f"gx-{name}.parquet"
        pq.write_table(table, target)
        out[name] = target
    return out


def _no_config_variables(ctx) -> None:
    """Remove the config-variables file GX scaffolds in a new project. The project defines no
    variable: the file holds only an analytics instance id, and analytics are off. GX reads
    and parses the file again on every configuration access (343 YAML parses, 0.57 s of a
    1M night's checkpoint: docs/BENCHMARK.md, "Twenty-seventh session"); a missing file
    means no variables."""
    rel = ctx.config.config_variables_file_path
    if rel and ctx.root_directory:
        path = Path(ctx.root_directory) / rel
        if path.is_file():
            path.unlink()


def run_checkpoint(checks_dir: Path, docs_dir: Path, project_dir: Path, run_name: str,
                   suites: tuple[str, ...] = SUITES, expectations_dir: Path = EXPECTATIONS_DIR,
                   pandas_rows: int | None = None):
    """One Checkpoint over the check datasets; Data Docs written to ``docs_dir``.

    A check dataset of at most ``pandas_rows`` rows (default ``pandas_max_rows()``) is
    validated by GX's pandas engine (``small_check_copies``), a bigger one by its Spark
    engine; the suites, their expectations and the Checkpoint are the same either way."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("TQDM_DISABLE", "1")
    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    import great_expectations as gx
    from great_expectations.core.run_identifier import RunIdentifier

    from great_expectations.data_context.types.base import ProgressBarsConfig

    project_dir.mkdir(parents=True, exist_ok=True)
    ctx = gx.get_context(mode="file", project_root_dir=str(project_dir))
    _no_config_variables(ctx)
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    for site in list(ctx.get_site_names()):
        ctx.delete_data_docs_site(site)
    ctx.add_data_docs_site(site_name="dblog", site_config={
        "class_name": "SiteBuilder",
        "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                          "base_directory": str(docs_dir)},
        "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
    })
    small_dir = Path(project_dir) / PANDAS_DIR
    if small_dir.exists():
        shutil.rmtree(small_dir)
    small = small_check_copies(checks_dir, suites, pandas_max_rows() if pandas_rows is None
                               else pandas_rows, small_dir)
    ds = ctx.data_sources.add_or_update_spark_filesystem(name="staged_checks",
                                                         base_directory=checks_dir) \
        if len(small) < len(suites) else None
    pds = ctx.data_sources.add_or_update_pandas_filesystem(name="staged_checks_pandas",
                                                           base_directory=small_dir) \
        if small else None
    vds = []
    for name in suites:
        if name in small:
            asset = pds.add_parquet_asset(name=name)
            bd = asset.add_batch_definition_path(f"{name}_all", small[name].name)
        else:
            asset = ds.add_directory_parquet_asset(name=name, data_directory=Path(name))
            bd = asset.add_batch_definition_whole_directory(f"{name}_all")
        suite = ctx.suites.add_or_update(load_suite(name, expectations_dir))
        vds.append(ctx.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=f"{name}_vd", data=bd, suite=suite)))
    # Data Docs are built once for the whole run (the UpdateDataDocsAction would rebuild the
    # site once per validation definition)
    cp = ctx.checkpoints.add_or_update(gx.Checkpoint(
        name="dblog_nightly", validation_definitions=vds, actions=[], result_format=RESULT_FORMAT))
    result = cp.run(run_id=RunIdentifier(run_name=run_name))
    ctx.build_data_docs(site_names=["dblog"])
    return result


def _violations(df, kwargs: dict, etype: str):
    """The rows of a check dataset that break one expectation (for the failure message)."""
    from pyspark.sql import functions as F

    if "column_list" in kwargs:
        keys = list(kwargs["column_list"])
        dup = df.groupBy(*keys).count().filter(F.col("count") > 1).drop("count")
        return df.join(dup, keys, "left_semi"), keys
    column = kwargs.get("column")
    if column is None:
        return None, []
    if "value_set" in kwargs:
        bad = ~F.col(column).isin(*kwargs["value_set"]) | F.col(column).isNull()
    elif etype == "expect_column_values_to_not_be_null":
        bad = F.col(column).isNull()
    else:
        return None, []
    return df.filter(bad), [column]


def explain(spark, checks_dir: Path, suite: str, etype: str, kwargs: dict, show: list[str],
            limit: int = EXPLAIN_ROWS) -> tuple[int | None, int | None, list[str]]:
    """(offending rows, rows, a few offending rows as ``col=value`` text) of a failed
    expectation, from its check dataset (only run after a failure)."""
    try:
        df = spark.read.parquet(str(Path(checks_dir) / suite)).cache()
        bad, keys = _violations(df, kwargs, etype)
        if bad is None:
            return None, df.count(), []
        cols = [c for c in dict.fromkeys([*show, *keys]) if c in df.columns]
        examples = [", ".join(f"{c}={r[c]}" for c in cols) for r in bad.select(*cols).limit(limit).collect()]
        return bad.count(), df.count(), examples
    except Exception as exc:  # the message is a courtesy; never hide the failure behind it
        log.warning("could not explain %s %s: %s", suite, etype, exc)
        return None, None, []


def summarize(result, spark=None, checks_dir: Path | None = None) -> tuple[bool, list[str], list[dict]]:
    """(success, failure messages, one row per expectation) of a Checkpoint result.

    A failure message says what the expectation is for (its ``meta.why``), what broke it,
    and, when ``spark`` and ``checks_dir`` are given, quotes a few offending rows
    (columns listed in the expectation's ``meta.show``)."""
    failures, rows = [], []
    for vr in result.run_results.values():
        suite = vr.suite_name
        for r in vr.results:
            cfg = r.expectation_config
            meta = cfg.meta or {}
            column = cfg.kwargs.get("column") or cfg.kwargs.get("column_list")
            res = r.result or {}
            unexpected, elements, examples = res.get("unexpected_count"), res.get("element_count"), []
            if r.success and unexpected is None:
                unexpected = 0
            if not r.success and spark is not None and checks_dir is not None:
                unexpected, elements, examples = explain(
                    spark, checks_dir, suite, cfg.type, dict(cfg.kwargs), list(meta.get("show") or []))
            rows.append({"suite": suite, "expectation": cfg.type, "column": column,
                         "success": bool(r.success), "unexpected_count": unexpected,
                         "element_count": elements, "why": meta.get("why"), "examples": examples})
            if not r.success:
                info = r.exception_info or {}
                raised = [e for e in ([info] if "raised_exception" in info else info.values())
                          if isinstance(e, dict) and e.get("raised_exception")]
                if raised:
                    detail = f"error: {raised[0].get('exception_message')}"
                else:
                    detail = f"{unexpected} of {elements} rows unexpected" \
                        if unexpected is not None else "failed"
                msg = f"{suite}: {meta.get('why') or cfg.type} [{cfg.type} on {column}]: {detail}"
                if examples:
                    msg += "; e.g. " + " | ".join(examples)
                failures.append(msg)
    return bool(result.success), failures, rows


# the shuffle partition size adaptive execution aims at while the stage runs: its queries
# (the check datasets' aggregations, Great Expectations' metrics) cost much CPU per byte, and
# at the session's 64 MB their shuffles ran as one or two tasks (the five sources' 1M
# nights: 33.2-38.2 s against 29.0-31.0 s at 8 MB; docs/BENCHMARK.md, "Twenty-eighth session")
VALIDATE_PARTITION_SIZE = "8m"
PARTITION_SIZE_KEY = "spark.sql.adaptive.advisoryPartitionSizeInBytes"


def validate_stage(spark, manifest: dict, run_dir: Path, root: DataRoot) -> ValidationResult:
    """Check datasets, the night's metrics and history checks, the Great Expectations
    checkpoint and the report, with the stage's shuffle partition size
    (``VALIDATE_PARTITION_SIZE``; the session's is restored after)."""
    before = spark.conf.get(PARTITION_SIZE_KEY, None)
    spark.conf.set(PARTITION_SIZE_KEY, VALIDATE_PARTITION_SIZE)
    try:
        return _validate_stage(spark, manifest, run_dir, root)
    finally:
        if before is None:
            spark.conf.unset(PARTITION_SIZE_KEY)
        else:
            spark.conf.set(PARTITION_SIZE_KEY, before)


def _validate_stage(spark, manifest: dict, run_dir: Path, root: DataRoot) -> ValidationResult:
    from .checks import finish_night, history_stage

    run_dir = Path(run_dir)
    t0 = time.monotonic()
    report_dir = root.reports(manifest["date"])
    docs = report_dir / "data_docs"
    if docs.exists():
        shutil.rmtree(docs)
    marks: dict[str, float] = {}

    def timed(name, fn):
        def run():
            try:
                return fn()
            finally:
                marks[name] = time.monotonic()
        return run

    from .report import report_aggregates, write_report

    # the check datasets, the night's metrics (with the history checks) and the report's
    # numbers read only the staged outputs: computed side by side, their small jobs share
    # the cores
    done = side_by_side({
        "check datasets": timed("checks", lambda: write_checks(spark, manifest, run_dir)),
        "metrics": timed("history", lambda: history_stage(spark, manifest, run_dir, root)),
        "report": lambda: report_aggregates(spark, manifest, run_dir)})
    checks, night = done["check datasets"], done["metrics"]   # metrics/ and the history checks
    th = time.monotonic()
    result = run_checkpoint(checks, docs, run_dir / "gx", manifest["run_id"])
    success, failures, rows = summarize(result, spark, checks)
    success = success and not night.failures
    failures = failures + night.failures
    t2 = time.monotonic()
    timings = {"checks_s": round(marks["checks"] - t0, 2), "history_s": round(marks["history"] - t0, 2),
               "checkpoint_s": round(t2 - th, 2)}
    finish_night(run_dir, manifest, night, t2 - t0)
    (run_dir / "validation.json").write_text(json.dumps(
        {"success": success, "failures": failures, "results": rows, "timings": timings,
         "checks": [r.to_json() for r in night.results], "warnings": night.warnings}, indent=1))
    report = write_report(spark, manifest, run_dir, root, success, failures, rows,
                          checks=night.results, metrics=night.metrics, aggregates=done["report"])
    timings["report_s"] = round(time.monotonic() - t2, 2)
    log.info("validation %s: check datasets %.1fs, metrics and history checks %.1fs (side by "
             "side), checkpoint %.1fs, report %.1fs", "passed" if success else "FAILED",
             timings["checks_s"], timings["history_s"], timings["checkpoint_s"], timings["report_s"])
    for w in night.warnings:
        log.warning("%s", w)
    return ValidationResult(success, str(report), failures, rows, night.results)
