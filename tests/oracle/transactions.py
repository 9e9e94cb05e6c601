"""The ordering's transactions in Spark SQL: the definition ``dblog.ordering.transactions``
replaced by Arrow aggregations in Python workers (``transaction_counts``), kept as the
reference its tests compare with. Not used by the product."""

from __future__ import annotations

from dblog.ordering.transactions import TRX_COLUMNS


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


def change_counts(changes, events):
    """(source, trx_id, n_changes, n_compensated) per transaction: its ``changes`` (rows with
    source, trx_id, position) and how many of them an ``undo`` row of ``events`` in the same
    transaction undoes."""
    from pyspark.sql import functions as F

    keyed = changes.filter(F.col("trx_id").isNotNull()).select(
        "source", "trx_id", F.col("position").alias("_k"), F.lit(1).alias("_c"), F.lit(0).alias("_u"))
    undos = events.filter((F.col("kind") == "undo") & F.col("trx_id").isNotNull()
                          & F.col("undo_of").isNotNull()).select(
        "source", "trx_id", F.col("undo_of").alias("_k"), F.lit(0).alias("_c"), F.lit(1).alias("_u"))
    per_key = keyed.unionByName(undos).groupBy("source", "trx_id", "_k").agg(
        F.sum("_c").alias("_n"), F.max("_u").alias("_u"))
    undone = F.col("_k").isNotNull() & (F.col("_u") == 1)
    return per_key.groupBy("source", "trx_id").agg(
        F.sum("_n").cast("long").alias("n_changes"),
        F.sum(F.when(undone, F.col("_n")).otherwise(0)).cast("long").alias("n_compensated"))


def transaction_counts(events, reassembled=None):
    """``transactions`` with ``event_count``: the published changes of a committed
    transaction without ``capture_off`` that no undo row undoes, 0 for the others."""
    from pyspark.sql import functions as F

    changes = events.filter(F.col("kind") == "change").select("source", "trx_id", "position")
    if reassembled is not None:
        changes = changes.unionByName(reassembled.select("source", "trx_id", "position"))
    counts = change_counts(changes, events)
    published = F.when((F.col("status") == "committed") & ~F.coalesce(F.col("capture_off"), F.lit(False)),
                       F.coalesce(F.col("n_changes"), F.lit(0)) - F.coalesce(F.col("n_compensated"), F.lit(0))) \
        .otherwise(F.lit(0)).cast("long")
    return transactions(events).join(counts, ["source", "trx_id"], "left") \
        .withColumn("event_count", published).drop("n_changes", "n_compensated")
