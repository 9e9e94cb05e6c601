"""Names, columns and schemas of what the ordering stage writes under the run's staging directory."""

from __future__ import annotations

from pathlib import Path

from ..accounting import AUDIT_EXTRA_COLUMNS, AUDIT_EXTRA_DDL

CHANGES, TRANSACTIONS, QUARANTINE, AUDIT, STATE = "changes", "transactions", "quarantine", "audit", "state"
WORK = "ordering"        # the stage's own intermediate datasets (staging/<run_id>/ordering/...)
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
AUDIT_COLUMNS = [
    "run_id", "date", "source", "format", "archive_file", "records_read", "published", "control",
    "skipped", "held_open", "quarantined", "skipped_by_rule", *AUDIT_EXTRA_COLUMNS,
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
# Parquet dictionary encoding only for the columns of few distinct values. For the others
# (row images, positions, ids, offsets, sequence numbers) parquet-mr hashes every value into
# a dictionary until the page overflows and falls back to plain: on the 5 x 200k night's
# changes that was about 40 % of the write's CPU, for files of the same size once zstd has
# compressed them (docs/BENCHMARK.md, "Ordering ..., seventh session").
DICTIONARY_COLUMNS = frozenset((
    "source", "format", "archive_file", "op", "table_id", "schema_name", "table_name", "run_id",
    "date", "status", "kind", "rule", "flag", "trx_end", "error_class", "user", "bucket",
    "skipped_by_rule", "seg_total", "n_records"))


def parquet_options(columns) -> dict[str, str]:
    """Writer options for a dataset of these ``columns``: dictionary encoding off but for the
    ``DICTIONARY_COLUMNS`` among them. The values written are the same; only the encoding
    inside the files differs."""
    return {"parquet.enable.dictionary": "false",
            **{f"parquet.enable.dictionary#{c}": "true" for c in columns if c in DICTIONARY_COLUMNS}}


DDL = {"changes": CHANGES_DDL, "transactions": TRANSACTIONS_DDL, "quarantine": QUARANTINE_DDL,
       "audit": AUDIT_DDL}


def read_staged(spark, run_dir: Path, dataset: str):
    """A staged dataset with its fixed schema (works for an empty night too)."""
    return spark.read.schema(DDL[dataset]).parquet(str(Path(run_dir) / dataset))
