"""The ordering stage as named ``DataFrame -> DataFrame`` steps (docs/ARCHITECTURE.md).

| step | module | function |
|---|---|---|
| format hooks | ``hooks`` | ``apply_hooks`` (``resolve_transactions`` of a format package) |
| segment reassembly | ``segments`` | ``segment_groups``, ``reassemble``, ``reassembled_changes`` |
| transactions | ``transactions`` | ``transaction_counts`` (``stream_summarize``, ``partial``, ``merge``, ``final``, ``categories``: Arrow, in the Python workers; with ``buckets``, also the audit's buckets of the rows of the transactions) |
| transactions on files | ``trxfiles`` | ``run``: the same pass on the night's files in Python tasks, when they are as written |
| classify | ``classify`` | ``classify``, ``segment_buckets``, ``with_transaction`` |
| sequence | ``sequence`` | ``published_counts``, ``rank_in_partitions``, ``partition_counts``, ``partition_offsets``, ``assign_commit_seq``, ``with_commit_seq``, ``event_seq`` |
| audit | ``audit`` | ``row_buckets``, ``other_buckets``, ``audit`` |
| quarantine | ``quarantine`` | ``decoder_quarantine``, ``segment_quarantine``, ``orphan_quarantine``, ``quarantine`` |
| held state | ``state`` | ``held_rows``, ``carry_rows`` |

``stage.order_stage`` reads the events, applies the steps and writes the outputs.
"""

from .schema import (AUDIT, AUDIT_COLUMNS, AUDIT_DDL, CHANGE_COLUMNS, CHANGES, CHANGES_DDL,
                     CONTROL_KINDS, DDL, QUARANTINE, QUARANTINE_COLUMNS, QUARANTINE_DDL, STATE,
                     SUMMARY, TRANSACTION_COLUMNS, TRANSACTIONS, TRANSACTIONS_DDL, WORK, read_staged)
from .stage import load_summary, order_stage, read_events

__all__ = ["AUDIT", "AUDIT_COLUMNS", "AUDIT_DDL", "CHANGE_COLUMNS", "CHANGES", "CHANGES_DDL",
           "CONTROL_KINDS", "DDL", "QUARANTINE", "QUARANTINE_COLUMNS", "QUARANTINE_DDL", "STATE",
           "SUMMARY", "TRANSACTION_COLUMNS", "TRANSACTIONS", "TRANSACTIONS_DDL", "WORK",
           "load_summary", "order_stage", "read_events", "read_staged"]
