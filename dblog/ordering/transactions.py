"""Step ``transactions``: one row per (source, trx_id) of the events, with its outcome.

A transaction is ``committed`` when any of its rows has ``trx_end = commit`` (its
``commit_position``, ``commit_ts``, ``user`` come from those rows; ``user`` also from
``begin``), ``rolled_back`` when a row has ``trx_end = abort``, else ``open``. It also carries
``capture_off`` (its ``begin`` row has ``flag = capture_off``) and ``undone``: the positions
that ``undo`` rows of the transaction undo (null when none), so that classifying a change
needs one join on (source, trx_id) and nothing else.
"""

from __future__ import annotations


TRX_COLUMNS = ["source", "trx_id", "format", "status", "commit_position", "commit_ts", "user",
               "begin_position", "capture_off", "undone"]


def transactions(events):
    """events (EVENT_SCHEMA columns) -> one row per (source, trx_id): ``TRX_COLUMNS``.

    Rows without a ``trx_id`` and ``carry`` rows belong to no transaction."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    rows = events.filter(F.col("trx_id").isNotNull() & (kind != "carry"))
    return rows.groupBy("source", "trx_id").agg(
        F.first("format").alias("format"),
        F.max(F.when(F.col("trx_end") == "commit", F.col("commit_position"))).alias("commit_position"),
        F.max(F.when(F.col("trx_end") == "commit", F.col("commit_ts"))).alias("commit_ts"),
        F.max(F.when(F.col("trx_end") == "abort", F.lit(1))).alias("aborted"),
        F.coalesce(F.max(F.when((kind == "begin") & (F.col("flag") == "capture_off"), F.lit(True))),
                   F.lit(False)).alias("capture_off"),
        F.coalesce(F.max(F.when(kind == "commit", F.col("user"))),
                   F.max(F.when(kind == "begin", F.col("user"))),
                   F.max("user")).alias("user"),
        F.coalesce(F.min(F.when(kind == "begin", F.col("position"))), F.min("position"))
        .alias("begin_position"),
        F.collect_set(F.when(kind == "undo", F.col("undo_of"))).alias("undone"),
    ).withColumn(
        "status",
        F.when(F.col("commit_position").isNotNull(), "committed")
        .when(F.col("aborted") == 1, "rolled_back").otherwise("open"),
    ).withColumn(
        "undone", F.when(F.size("undone") > 0, F.array_sort("undone"))
    ).select(*TRX_COLUMNS)
