"""Ordering stage: decoded events -> transactions, ordered changes, quarantine, audit, state.

Spark-native: joins, aggregations and windows only (segment reassembly decodes the
reassembled DATA areas with ``mapInArrow``); nothing is collected to the driver but one
number per source (its last ``commit_seq``). See docs/ARCHITECTURE.md for the rules.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from decoders import get as get_format
from decoders.base import DecodeContext
from decoders.catalog import parse_catalog
from decoders.errors import DecodeError
from decoders.events import EVENT_COLUMNS, EVENT_SCHEMA

from .accounting import (AUDIT_EXTRA_COLUMNS, AUDIT_EXTRA_DDL, complete_audit,
                         quarantine_duplicate_positions)
from .decode import EVENTS_DIR, spark_event_schema
from .sparkio import run_concurrently, write_parquet
from .stage import CARRY_DIR, HELD_DIR, SEQ_FILE

CHANGES, TRANSACTIONS, QUARANTINE, AUDIT, STATE = "changes", "transactions", "quarantine", "audit", "state"
SUMMARY = "order_summary.json"
CONTROL_KINDS = ("begin", "commit", "abort", "undo", "control")
CHANGE_COLUMNS = [
    "source", "format", "commit_seq", "event_seq", "trx_id", "commit_position", "commit_ts", "op",
    "table_id", "schema_name", "table_name", "before", "after", "ddl", "row_id", "log_position",
    "archive_file", "record_offset", "run_id", "date",
]
TRANSACTION_COLUMNS = [
    "source", "trx_id", "commit_seq", "status", "begin_position", "commit_position", "commit_ts",
    "user", "event_count", "run_id", "date",
]
QUARANTINE_COLUMNS = [
    "source", "format", "archive_file", "record_offset", "error_class", "message", "raw_hex",
    "n_records", "n_bytes", "run_id", "date",
]
CHANGES_DDL = (
    "format STRING, commit_seq LONG, event_seq INT, trx_id STRING, commit_position STRING, "
    "commit_ts TIMESTAMP, op STRING, table_id STRING, schema_name STRING, table_name STRING, "
    "before STRING, after STRING, ddl STRING, row_id STRING, log_position STRING, "
    "archive_file STRING, record_offset LONG, run_id STRING, source STRING, date STRING")
TRANSACTIONS_DDL = (
    "trx_id STRING, commit_seq LONG, status STRING, begin_position STRING, commit_position STRING, "
    "commit_ts TIMESTAMP, user STRING, event_count LONG, run_id STRING, source STRING, date STRING")
QUARANTINE_DDL = (
    "format STRING, archive_file STRING, record_offset LONG, error_class STRING, message STRING, "
    "raw_hex STRING, n_records LONG, n_bytes LONG, run_id STRING, source STRING, date STRING")
AUDIT_DDL = (
    "run_id STRING, format STRING, archive_file STRING, records_read LONG, published LONG, "
    "control LONG, skipped LONG, held_open LONG, quarantined LONG, skipped_by_rule STRING, "
    + AUDIT_EXTRA_DDL + ", source STRING, date STRING")
DDL = {"changes": CHANGES_DDL, "transactions": TRANSACTIONS_DDL, "quarantine": QUARANTINE_DDL,
       "audit": AUDIT_DDL}


def read_staged(spark, run_dir: Path, dataset: str):
    """A staged dataset with its fixed schema (works for an empty night too)."""
    return spark.read.schema(DDL[dataset]).parquet(str(Path(run_dir) / dataset))


AUDIT_COLUMNS = [
    "run_id", "date", "source", "format", "archive_file", "records_read", "published", "control",
    "skipped", "held_open", "quarantined", "skipped_by_rule", *AUDIT_EXTRA_COLUMNS,
]


# ------------------------------------------------------------------ segment reassembly

def _reassemble_partition(catalogs: dict[str, dict], options: dict[str, tuple]):
    """mapInArrow function: complete segment groups -> change (or quarantine) events."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parsed: dict = {}
        for batch in batches:
            out = {name: [] for name in EVENT_COLUMNS}
            for row in batch.to_pylist():
                source = row["source"]
                cat = parsed.get(source)
                if cat is None:
                    cat = parsed[source] = parse_catalog(catalogs[source], f"<catalog of {source}>")
                opts, tz = options[source]
                ctx = DecodeContext(source, row["format"], cat, row["archive_file"], opts, tz)
                data = row.pop("data")
                result = dict(row)
                try:
                    decoded = get_format(row["format"]).decode_reassembled(data, row, ctx)
                    result.update(kind="change", seg_data=None, **decoded)
                except DecodeError as exc:
                    result.update(kind="quarantine", seg_data=None, error_class=exc.error_class,
                                  message=f"reassembled segments of {row['seg_key']}: {exc}",
                                  raw_hex=data[:256].hex())
                except Exception as exc:  # decoder bug: quarantine, never stop the night
                    result.update(kind="quarantine", seg_data=None, error_class="decoder_error",
                                  message=f"reassembled segments of {row['seg_key']}: {exc!r}",
                                  raw_hex=data[:256].hex())
                result["n_records"] = 0
                for name in EVENT_COLUMNS:
                    out[name].append(result.get(name))
            yield pa.RecordBatch.from_arrays(
                [pa.array(out[n], type=t) for n, t in zip(EVENT_SCHEMA.names, EVENT_SCHEMA.types)],
                schema=EVENT_SCHEMA)

    return run


def reassemble(spark, ev, manifest: dict):
    """(reassembled events, per-group outcome) from the ``segment`` rows of ``ev``."""
    from pyspark.sql import functions as F

    seg = ev.filter(F.col("kind") == "segment")
    first_cols = [c for c in EVENT_COLUMNS if c not in ("seg_data",)]
    groups = seg.groupBy("source", "seg_key").agg(
        F.count(F.lit(1)).alias("n_rows"),
        F.count_distinct("seg_num").alias("n_have"),
        F.max("seg_total").alias("seg_total_max"),
        F.min("seg_total").alias("seg_total_min"),
        F.min("seg_num").alias("seg_min"),
        F.max("seg_num").alias("seg_max"),
        F.sort_array(F.collect_list(F.struct("seg_num", "seg_data"))).alias("pieces"),
        F.min_by(F.struct(*first_cols), "seg_num").alias("first"),
    )
    complete = ((F.col("n_rows") == F.col("seg_total_max")) & (F.col("n_have") == F.col("seg_total_max"))
                & (F.col("seg_total_min") == F.col("seg_total_max")) & (F.col("seg_min") == 1)
                & (F.col("seg_max") == F.col("seg_total_max")))
    groups = groups.withColumn("complete", complete)
    ready = groups.filter("complete").select(
        *[F.col(f"first.{c}").alias(c) for c in first_cols],
        F.expr("aggregate(pieces, cast('' as binary), (acc, p) -> concat(acc, p.seg_data))").alias("data"),
    )
    catalogs = {s["name"]: s["catalog"] for s in manifest["sources"]}
    options = {s["name"]: (s["options"], s["timezone"]) for s in manifest["sources"]}
    from pyspark.sql.types import BinaryType, StructField, StructType

    in_schema = StructType([f for f in spark_event_schema().fields if f.name != "seg_data"]
                           + [StructField("data", BinaryType())])
    ready = ready.select(*[f.name for f in in_schema.fields])
    decoded = ready.mapInArrow(_reassemble_partition(catalogs, options), spark_event_schema())
    outcome = groups.select("source", "seg_key", "complete")
    return decoded, outcome


# ------------------------------------------------------------------ the stage

def read_events(spark, manifest: dict, run_dir: Path):
    from pyspark.sql import functions as F

    new = spark.read.schema(spark_event_schema()).parquet(str(Path(run_dir) / EVENTS_DIR)) \
        .withColumn("from_state", F.lit(False))
    schema = spark_event_schema()
    for s in manifest["sources"]:
        if s.get("prev_held"):
            # state/<source>/<date>/held holds the rows of one source (no partition column)
            old = spark.read.schema(schema).parquet(s["prev_held"]) \
                .withColumn("source", F.lit(s["name"])).withColumn("from_state", F.lit(True))
            new = new.unionByName(old)
    return quarantine_duplicate_positions(spark, new, manifest)


def order_stage(spark, manifest: dict, run_dir: Path) -> dict:
    """Write changes, transactions, quarantine, audit and next state under ``run_dir``.
    Returns per source: commit_seq range and counts (small)."""
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    run_dir = Path(run_dir)
    run_id, date = manifest["run_id"], manifest["date"]
    ev = read_events(spark, manifest, run_dir).persist(StorageLevel.MEMORY_AND_DISK)

    # --- transactions
    with_trx = ev.filter(F.col("trx_id").isNotNull() & (F.col("kind") != "carry"))
    trx = with_trx.groupBy("source", "trx_id").agg(
        F.first("format").alias("format"),
        F.max(F.when(F.col("trx_end") == "commit", F.col("commit_position"))).alias("commit_position"),
        F.max(F.when(F.col("trx_end") == "commit", F.col("commit_ts"))).alias("commit_ts"),
        F.max(F.when(F.col("trx_end") == "abort", F.lit(1))).alias("aborted"),
        F.max(F.when((F.col("kind") == "begin") & (F.col("flag") == "capture_off"), F.lit(1)))
        .alias("capture_off"),
        F.coalesce(F.max(F.when(F.col("kind") == "commit", F.col("user"))),
                   F.max(F.when(F.col("kind") == "begin", F.col("user"))),
                   F.max("user")).alias("user"),
        F.coalesce(F.min(F.when(F.col("kind") == "begin", F.col("position"))), F.min("position"))
        .alias("begin_position"),
    ).withColumn(
        "status",
        F.when(F.col("commit_position").isNotNull(), "committed")
        .when(F.col("aborted") == 1, "rolled_back").otherwise("open"),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    status = trx.select("source", "trx_id", "status", "capture_off")

    # --- changes (plain and reassembled from segments)
    reassembled, seg_outcome = reassemble(spark, ev, manifest)
    reassembled = reassembled.withColumn("from_state", F.lit(False)) \
        .persist(StorageLevel.MEMORY_AND_DISK)
    changes = ev.filter(F.col("kind") == "change").unionByName(
        reassembled.filter(F.col("kind") == "change"))
    undone = ev.filter((F.col("kind") == "undo") & F.col("undo_of").isNotNull()) \
        .select("source", "trx_id", F.col("undo_of").alias("position")).distinct() \
        .withColumn("undone", F.lit(1))
    chg = changes.join(status, ["source", "trx_id"], "left") \
        .join(undone, ["source", "trx_id", "position"], "left") \
        .withColumn("bucket",
                    F.when(F.col("trx_id").isNull(), "quarantined")
                    .when(F.col("status") == "open", "held_open")
                    .when(F.col("status") == "rolled_back", "skipped:rolled_back")
                    .when(F.col("capture_off") == 1, "skipped:capture_off")
                    .when(F.col("undone") == 1, "skipped:compensated")
                    .otherwise("published")) \
        .persist(StorageLevel.MEMORY_AND_DISK)

    # --- commit_seq and event_seq
    published = chg.filter(F.col("bucket") == "published")
    seq_base = spark.createDataFrame([(s["name"], int(s["seq_base"])) for s in manifest["sources"]],
                                     "source STRING, seq_base LONG")
    trx_events = published.groupBy("source", "trx_id").agg(F.count(F.lit(1)).alias("event_count"))
    seqd = trx.join(trx_events, ["source", "trx_id"], "inner").join(seq_base, "source", "left") \
        .withColumn("commit_seq",
                    F.coalesce(F.col("seq_base"), F.lit(0)) + F.row_number().over(
                        Window.partitionBy("source").orderBy("commit_position", "trx_id"))) \
        .select("source", "trx_id", "commit_seq", "event_count") \
        .persist(StorageLevel.MEMORY_AND_DISK)
    ev_window = Window.partitionBy("source", "trx_id").orderBy(
        F.coalesce("trx_order", "position"), "position", "archive_file", "record_index")
    out_changes = published.drop("commit_position", "commit_ts") \
        .join(trx.select("source", "trx_id", "commit_position", "commit_ts"), ["source", "trx_id"]) \
        .join(seqd.select("source", "trx_id", "commit_seq"), ["source", "trx_id"]) \
        .withColumn("event_seq", F.row_number().over(ev_window).cast("int")) \
        .withColumn("log_position", F.col("position")) \
        .withColumn("run_id", F.lit(run_id)).withColumn("date", F.lit(date)) \
        .select(*CHANGE_COLUMNS)

    out_trx = trx.filter(F.col("status") != "open") \
        .join(seqd, ["source", "trx_id"], "left") \
        .withColumn("event_count", F.coalesce("event_count", F.lit(0)).cast("long")) \
        .withColumn("run_id", F.lit(run_id)).withColumn("date", F.lit(date)) \
        .select(*TRANSACTION_COLUMNS)

    # --- buckets of every row read this night
    seg_bucket = ev.filter(F.col("kind") == "segment") \
        .join(seg_outcome, ["source", "seg_key"], "left") \
        .join(chg.filter(F.col("seg_key").isNotNull())
              .select("source", "seg_key", F.col("bucket").alias("change_bucket")),
              ["source", "seg_key"], "left") \
        .join(status, ["source", "trx_id"], "left") \
        .withColumn("bucket",
                    F.when(F.col("change_bucket").isNotNull(), F.col("change_bucket"))
                    .when(F.col("status") == "open", "held_open")
                    .when(F.col("status") == "rolled_back", "skipped:rolled_back")
                    .otherwise("quarantined")) \
        .withColumn("q_class", F.when(F.col("complete"), F.lit("bad_segments"))
                    .otherwise(F.lit("incomplete_segments")))
    plain_change_bucket = chg.filter(F.col("seg_key").isNull() & (F.col("n_records") > 0)) \
        .select("source", "format", "archive_file", "n_records", "n_bytes", "from_state", "bucket")
    other = ev.filter(~F.col("kind").isin("change", "segment", "carry")) \
        .join(status.select("source", "trx_id", "status"), ["source", "trx_id"], "left") \
        .withColumn("bucket",
                    F.when(F.col("kind") == "quarantine", "quarantined")
                    .when(F.col("kind") == "skip", F.concat(F.lit("skipped:"), F.col("rule")))
                    .when(F.col("status") == "open", "held_open")
                    .otherwise("control"))
    cols = ["source", "format", "archive_file", "n_records", "n_bytes", "from_state", "bucket"]
    buckets = plain_change_bucket.select(*cols) \
        .unionByName(seg_bucket.select(*cols)).unionByName(other.select(*cols)) \
        .filter(~F.col("from_state"))
    per_bucket = buckets.groupBy("source", "format", "archive_file", "bucket") \
        .agg(F.sum("n_records").cast("long").alias("n"))

    def bucket_sum(cond):
        return F.coalesce(F.sum(F.when(cond, F.col("n"))), F.lit(0)).cast("long")

    audit = per_bucket.groupBy("source", "format", "archive_file").agg(
        F.sum("n").cast("long").alias("records_read"),
        bucket_sum(F.col("bucket") == "published").alias("published"),
        bucket_sum(F.col("bucket") == "control").alias("control"),
        bucket_sum(F.col("bucket").startswith("skipped:")).alias("skipped"),
        bucket_sum(F.col("bucket") == "held_open").alias("held_open"),
        bucket_sum(F.col("bucket") == "quarantined").alias("quarantined"),
        F.to_json(F.map_from_entries(F.collect_list(
            F.when(F.col("bucket").startswith("skipped:"),
                   F.struct(F.substring("bucket", 9, 200), F.col("n")))))).alias("skipped_by_rule"),
    )
    # archives that held no record at all still get an audit row
    listed = spark.createDataFrame(
        [(s["name"], s["format"], a["file"]) for s in manifest["sources"] for a in s["archives"]],
        "source STRING, format STRING, archive_file STRING")
    audit = listed.join(audit, ["source", "format", "archive_file"], "left") \
        .na.fill(0, ["records_read", "published", "control", "skipped", "held_open", "quarantined"]) \
        .withColumn("skipped_by_rule", F.coalesce("skipped_by_rule", F.lit("{}"))) \
        .withColumn("run_id", F.lit(run_id)).withColumn("date", F.lit(date))
    audit = complete_audit(spark, manifest, audit, ev, buckets, AUDIT_COLUMNS)

    # --- quarantine rows: decoder quarantines, reassembly failures, orphan changes, bad segment groups
    n_bytes = F.col("n_bytes")
    q_decoded = ev.filter((F.col("kind") == "quarantine") & ~F.col("from_state")) \
        .select("source", "format", "archive_file", "record_offset", "error_class", "message", "raw_hex",
                "n_records", n_bytes.cast("long").alias("n_bytes"))
    q_reasm = reassembled.filter(F.col("kind") == "quarantine") \
        .select("source", "seg_key", F.col("error_class").alias("r_class"),
                F.col("message").alias("r_message"))
    q_segments = seg_bucket.filter(F.col("bucket") == "quarantined") \
        .join(q_reasm, ["source", "seg_key"], "left") \
        .select("source", "format", "archive_file", "record_offset",
                F.coalesce("r_class", "q_class").alias("error_class"),
                F.coalesce("r_message", F.concat(
                    F.lit("segment "), F.col("seg_num").cast("string"), F.lit(" of "),
                    F.col("seg_total").cast("string"), F.lit(" of record "), F.col("seg_key"),
                    F.lit(": the group never completed (committed unit of recovery)"))).alias("message"),
                F.substring(F.hex("seg_data"), 1, 512).alias("raw_hex"),
                "n_records", n_bytes.cast("long").alias("n_bytes"))
    q_orphans = chg.filter((F.col("bucket") == "quarantined") & ~F.col("from_state")) \
        .select("source", "format", "archive_file", "record_offset",
                F.lit("no_transaction").alias("error_class"),
                F.lit("change record without a transaction id").alias("message"),
                F.lit(None).cast("string").alias("raw_hex"),
                "n_records", n_bytes.cast("long").alias("n_bytes"))
    out_q = q_decoded.unionByName(q_segments).unionByName(q_orphans) \
        .withColumn("raw_hex", F.lower("raw_hex")) \
        .withColumn("n_records", F.col("n_records").cast("long")) \
        .withColumn("run_id", F.lit(run_id)).withColumn("date", F.lit(date)) \
        .select(*QUARANTINE_COLUMNS)

    # --- state for the next night: rows of open transactions, decoder carry, last commit_seq
    held = ev.join(status.filter(F.col("status") == "open").select("source", "trx_id"),
                   ["source", "trx_id"], "left_semi") \
        .filter(~F.col("kind").isin("quarantine", "carry")) \
        .select(*EVENT_COLUMNS)
    state_dir = run_dir / STATE
    carry = ev.filter((F.col("kind") == "carry") & ~F.col("from_state")).select(*EVENT_COLUMNS)
    by_night = ("source", "date")
    run_concurrently([
        write_parquet(out_changes, str(run_dir / CHANGES), by_night),
        write_parquet(out_trx, str(run_dir / TRANSACTIONS), by_night),
        write_parquet(audit, str(run_dir / AUDIT), by_night),
        write_parquet(out_q, str(run_dir / QUARANTINE), by_night),
        write_parquet(held, str(state_dir / HELD_DIR), ("source",)),
        write_parquet(carry, str(state_dir / CARRY_DIR), ("source",)),
    ])

    last = {r["source"]: (r["last_seq"], r["n_trx"]) for r in seqd.groupBy("source").agg(
        F.max("commit_seq").alias("last_seq"), F.count(F.lit(1)).alias("n_trx")).collect()}
    summary = {}
    for s in manifest["sources"]:
        base = int(s["seq_base"])
        last_seq, n_trx = last.get(s["name"], (None, 0))
        summary[s["name"]] = {"seq_base": base, "last_commit_seq": int(last_seq or base),
                              "published_transactions": int(n_trx)}
        sdir = state_dir / "seq" / s["name"]
        sdir.mkdir(parents=True, exist_ok=True)
        (sdir / SEQ_FILE).write_text(json.dumps({**summary[s["name"]], "date": date, "run_id": run_id}))
    (run_dir / SUMMARY).write_text(json.dumps(summary, indent=1))
    for df in (ev, trx, chg, seqd, reassembled):
        df.unpersist()
    return summary


def load_summary(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / SUMMARY).read_text())
