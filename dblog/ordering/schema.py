"""Names, columns and schemas of what the ordering stage writes under the run's staging directory."""

from __future__ import annotations

from pathlib import Path

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
    "run_id", "date",
]
AUDIT_COLUMNS = [
    "run_id", "date", "source", "format", "archive_file", "records_read", "published", "control",
    "skipped", "held_open", "quarantined", "skipped_by_rule",
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
    "raw_hex STRING, run_id STRING, source STRING, date STRING")
AUDIT_DDL = (
    "run_id STRING, format STRING, archive_file STRING, records_read LONG, published LONG, "
    "control LONG, skipped LONG, held_open LONG, quarantined LONG, skipped_by_rule STRING, "
    "source STRING, date STRING")
DDL = {"changes": CHANGES_DDL, "transactions": TRANSACTIONS_DDL, "quarantine": QUARANTINE_DDL,
       "audit": AUDIT_DDL}


def read_staged(spark, run_dir: Path, dataset: str):
    """A staged dataset with its fixed schema (works for an empty night too)."""
    return spark.read.schema(DDL[dataset]).parquet(str(Path(run_dir) / dataset))
