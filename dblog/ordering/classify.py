"""Step ``classify``: the bucket of each change, and of each segment piece.

A change of a committed transaction is ``published`` unless its transaction's ``begin`` has
``flag = capture_off`` (``skipped:capture_off``) or its ``position`` is undone by an ``undo``
row of the transaction (``skipped:compensated``); changes of rolled-back transactions are
``skipped:rolled_back``, of open ones ``held_open``; a change without a transaction id is
``quarantined``.
"""

from __future__ import annotations

PUBLISHED, HELD, QUARANTINED = "published", "held_open", "quarantined"


def hash_side(trx, broadcast: bool = False):
    """``trx`` (one row per transaction, narrow) as the build side of a shuffled hash join
    with rows of many per transaction: both sides are shuffled by (source, trx_id) as for a
    sort-merge join, but the rows' side is not sorted (a sort-merge join sorted the night's
    rows by transaction, and the ``event_seq`` window after it sorted the wide rows again).
    A partition of the transactions is held in memory without spilling: one narrow row per
    transaction, about 7 MB a partition at 10M changes (docs/ARCHITECTURE.md, "Memory").

    ``broadcast``: the caller knows the transactions are few (``stage.TRX_BROADCAST_MAX``):
    they are broadcast instead, and the rows are not shuffled for the join (on a small
    night, one job instead of two shuffle stages per join)."""
    from pyspark.sql import functions as F

    return F.broadcast(trx) if broadcast else trx.hint("shuffle_hash")


def with_transaction(rows, trx, columns, broadcast: bool = False):
    """``rows`` plus the given ``columns`` of their transaction (``trx``: one row per
    (source, trx_id)); null for rows without a ``trx_id``. Columns of ``rows`` with the same
    names are replaced. Rows without a ``trx_id`` are kept out of the join (they would all
    meet in one shuffle partition), except with ``broadcast`` (``hash_side``), where nothing
    is shuffled."""
    from pyspark.sql import functions as F

    columns = list(columns)
    types = dict(trx.dtypes)
    rows = rows.drop(*[c for c in columns if c in rows.columns])
    side = hash_side(trx.select("source", "trx_id", *columns), broadcast)
    if broadcast:
        # nothing is shuffled, so the rows without a ``trx_id`` need not be kept apart: they
        # match no transaction (null keys) and get nulls, as below; half the plan
        return rows.join(side, ["source", "trx_id"], "left")
    keyed = rows.filter(F.col("trx_id").isNotNull()) \
        .join(side, ["source", "trx_id"], "left")
    unkeyed = rows.filter(F.col("trx_id").isNull()) \
        .withColumns({c: F.lit(None).cast(types[c]) for c in columns})
    return keyed.unionByName(unkeyed)


def change_bucket(trx_id, status, capture_off, undone, position):
    """The bucket of a change, from its transaction's columns (Column arguments)."""
    from pyspark.sql import functions as F

    return F.when(trx_id.isNull(), QUARANTINED) \
        .when(status == "open", HELD) \
        .when(status == "rolled_back", "skipped:rolled_back") \
        .when(F.coalesce(capture_off, F.lit(False)), "skipped:capture_off") \
        .when(F.coalesce(F.array_contains(undone, position), F.lit(False)), "skipped:compensated") \
        .otherwise(PUBLISHED)


def classify(changes, trx, extra=(), broadcast: bool = False):
    """changes -> changes + ``status``, ``capture_off``, the ``extra`` columns of their
    transaction, and ``bucket``."""
    from pyspark.sql import functions as F

    rows = with_transaction(changes, trx, ["status", "capture_off", "undone", *extra], broadcast)
    return rows.withColumn("bucket", change_bucket(F.col("trx_id"), F.col("status"), F.col("capture_off"),
                                                   F.col("undone"), F.col("position"))) \
        .drop("undone")


def published_changes(changes, trx, extra=(), broadcast: bool = False):
    """changes -> the ``published`` ones, with ``bucket`` and the ``extra`` columns of their
    transaction: the same rows as ``classify(...)`` filtered on ``published``, by an inner
    join on (source, trx_id) with the transactions that publish (``trx`` filtered by the
    caller, e.g. on ``commit_seq``). No union after the join (``with_transaction`` keeps the
    rows without a transaction that way), so a window by transaction on the result reuses
    the join's partitioning: the wide rows are shuffled once, not twice."""
    from pyspark.sql import functions as F

    columns = ["status", "capture_off", "undone", *extra]
    rows = changes.drop(*[c for c in columns if c in changes.columns]) \
        .join(hash_side(trx.select("source", "trx_id", *columns), broadcast), ["source", "trx_id"])
    bucket = change_bucket(F.col("trx_id"), F.col("status"), F.col("capture_off"),
                           F.col("undone"), F.col("position"))
    return rows.withColumn("bucket", bucket).filter(F.col("bucket") == PUBLISHED).drop("undone")


def other_bucket(kind, rule, status):
    """The bucket of a row that is neither a change nor a segment piece."""
    from pyspark.sql import functions as F

    return F.when(kind == "quarantine", QUARANTINED) \
        .when(kind == "skip", F.concat(F.lit("skipped:"), rule)) \
        .when(status == "open", HELD) \
        .otherwise("control")


def segment_buckets(pieces, groups, trx, broadcast: bool = False):
    """``segment`` rows -> + ``bucket``, ``q_class``, ``r_class``, ``r_message``.

    A piece of a group that decoded into a change shares that change's bucket; otherwise it
    is held with its open transaction, skipped with its rolled-back one, else quarantined
    (``q_class``: ``incomplete_segments``, or ``bad_segments`` for a complete group whose
    decoding failed, then with the decoder's ``r_class`` and ``r_message``)."""
    from pyspark.sql import functions as F

    g = groups.select("source", "seg_key", "complete", F.col("kind").alias("r_kind"),
                      F.col("trx_id").alias("r_trx_id"), F.col("position").alias("r_position"),
                      F.when(F.col("kind") == "quarantine", F.col("error_class")).alias("r_class"),
                      F.when(F.col("kind") == "quarantine", F.col("message")).alias("r_message"))
    t = trx.select("source", F.col("trx_id").alias("r_trx_id"), F.col("status").alias("r_status"),
                   F.col("capture_off").alias("r_capture_off"), F.col("undone").alias("r_undone"))
    rows = pieces.join(g, ["source", "seg_key"], "left")
    rows = rows.join(hash_side(t, broadcast), ["source", "r_trx_id"], "left")
    rows = with_transaction(rows, trx, ["status"], broadcast)
    reassembled = change_bucket(F.col("r_trx_id"), F.col("r_status"), F.col("r_capture_off"),
                                F.col("r_undone"), F.col("r_position"))
    bucket = F.when(F.col("r_kind") == "change", reassembled) \
        .when(F.col("status") == "open", HELD) \
        .when(F.col("status") == "rolled_back", "skipped:rolled_back") \
        .otherwise(QUARANTINED)
    return rows.withColumn("bucket", bucket) \
        .withColumn("q_class", F.when(F.col("complete"), F.lit("bad_segments"))
                    .otherwise(F.lit("incomplete_segments"))) \
        .drop("r_status", "r_capture_off", "r_undone", "r_trx_id", "r_position", "r_kind")
