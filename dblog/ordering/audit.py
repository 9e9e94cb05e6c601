"""Step ``audit``: per archive, the records read and the bucket each was accounted to.

Buckets: ``published``, ``control`` (begin/commit/abort/undo/control rows),
``skipped:<rule>``, ``held_open``, ``quarantined``; they add up to the records read
(``n_records`` summed). Rows held from earlier nights were counted on their own night.
"""

from __future__ import annotations

from .classify import QUARANTINED, change_bucket, other_bucket, segment_buckets, with_transaction

BUCKET_COLUMNS = ["source", "format", "archive_file", "n_records", "n_bytes", "from_state", "bucket"]
NARROW = ["source", "format", "archive_file", "n_records", "n_bytes", "from_state", "kind", "rule",
          "trx_id", "position", "seg_key"]


def _counted(events):
    """The rows the audit counts: read tonight (not from state), not ``carry``; segment
    pieces apart; a change only when it is one record's (not a piece of a group)."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    return events.filter(~F.col("from_state") & ~kind.isin("segment", "carry")) \
        .filter((kind != "change") | (F.col("seg_key").isNull() & (F.col("n_records") > 0)))


def _pieces(events, groups, trx, broadcast: bool = False):
    """Tonight's segment pieces -> ``BUCKET_COLUMNS`` (``segment_buckets``)."""
    from pyspark.sql import functions as F

    pieces = events.filter(~F.col("from_state") & (F.col("kind") == "segment")).select(*NARROW)
    return segment_buckets(pieces, groups, trx, broadcast).select(*BUCKET_COLUMNS)


def row_buckets(events, trx, groups=None, broadcast: bool = False):
    """Every row read tonight (not from state, not ``carry``) -> ``BUCKET_COLUMNS``.

    Changes and the other rows meet their transaction in one join; segment pieces (only when
    ``groups``, the reassembly's outcome, is given) go through ``segment_buckets``. (The
    ordering takes the buckets of the rows of a transaction from the transactions pass,
    ``transactions.stream_summarize``, and this step's for the others: ``other_buckets``.)"""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    rows = with_transaction(_counted(events).select(*NARROW), trx,
                            ["status", "capture_off", "undone"], broadcast)
    bucket = F.when(kind == "change", change_bucket(F.col("trx_id"), F.col("status"),
                                                   F.col("capture_off"), F.col("undone"),
                                                   F.col("position"))) \
        .otherwise(other_bucket(kind, F.col("rule"), F.col("status")))
    out = rows.withColumn("bucket", bucket).select(*BUCKET_COLUMNS)
    if groups is not None:
        out = out.unionByName(_pieces(events, groups, trx, broadcast))
    return out


def other_buckets(events, pass_buckets, trx, groups=None, broadcast: bool = False,
                  pieces=None):
    """``row_buckets`` without the join of the rows with their transaction: the rows of a
    transaction as the transactions pass bucketed them (``pass_buckets``: ``BUCKET_COLUMNS``
    summed per bucket, ``transaction_counts(..., buckets=True)``), the rows without a
    ``trx_id`` by their own columns (a change: ``quarantined``), segment pieces as there
    (``pieces``: their ``segment_buckets`` already, every piece's, ``from_state`` too)."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    none = F.lit(None).cast("string")
    rows = _counted(events).filter(F.col("trx_id").isNull()).select(*NARROW)
    # (``change_bucket`` of a change without a transaction id)
    bucket = F.when(kind == "change", F.lit(QUARANTINED)) \
        .otherwise(other_bucket(kind, F.col("rule"), none))
    out = rows.withColumn("bucket", bucket).select(*BUCKET_COLUMNS) \
        .unionByName(pass_buckets.withColumn("from_state", F.lit(False)).select(*BUCKET_COLUMNS))
    if pieces is not None:
        out = out.unionByName(pieces.filter(~F.col("from_state")).select(*BUCKET_COLUMNS))
    elif groups is not None:
        out = out.unionByName(_pieces(events, groups, trx, broadcast))
    return out


def audit(buckets, listed):
    """``BUCKET_COLUMNS`` rows -> one row per archive (source, format, archive_file,
    records_read, published, control, skipped, held_open, quarantined, skipped_by_rule,
    bytes_decoded, bytes_quarantined: the bytes of the records in the buckets);
    ``listed`` (source, format, archive_file): every archive of the night, so that an
    archive without any record still gets its row."""
    from pyspark.sql import functions as F

    # every listed archive takes part in the aggregation as a row of no bucket and no
    # records, marked ``_listed``: the archives without records get their row, and those
    # not listed are left out, as a left join from ``listed`` would (without its shuffle
    # and sort of the listed archives: one job less)
    per_bucket = buckets.groupBy("source", "format", "archive_file", "bucket") \
        .agg(F.sum("n_records").cast("long").alias("n"), F.sum("n_bytes").cast("long").alias("nb"),
             F.lit(0).alias("_listed")) \
        .unionByName(listed.select("source", "format", "archive_file",
                                   F.lit(None).cast("string").alias("bucket"),
                                   F.lit(0).cast("long").alias("n"), F.lit(0).cast("long").alias("nb"),
                                   F.lit(1).alias("_listed")))

    def bucket_sum(cond):
        return F.coalesce(F.sum(F.when(cond, F.col("n"))), F.lit(0)).cast("long")

    b = F.col("bucket")
    per_archive = per_bucket.groupBy("source", "format", "archive_file").agg(
        F.sum("n").cast("long").alias("records_read"),
        bucket_sum(b == "published").alias("published"),
        bucket_sum(b == "control").alias("control"),
        bucket_sum(b.startswith("skipped:")).alias("skipped"),
        bucket_sum(b == "held_open").alias("held_open"),
        bucket_sum(b == "quarantined").alias("quarantined"),
        F.to_json(F.map_from_entries(F.sort_array(F.collect_list(
            F.when(b.startswith("skipped:"), F.struct(F.substring(b, 9, 200), F.col("n"))))))
        ).alias("skipped_by_rule"),
        F.coalesce(F.sum(F.when(b != "quarantined", F.col("nb"))), F.lit(0)).cast("long")
        .alias("bytes_decoded"),
        F.coalesce(F.sum(F.when(b == "quarantined", F.col("nb"))), F.lit(0)).cast("long")
        .alias("bytes_quarantined"),
        F.max("_listed").alias("_listed"),
    )
    return per_archive.filter(F.col("_listed") == 1).drop("_listed") \
        .na.fill(0, ["records_read", "published", "control", "skipped", "held_open", "quarantined",
                     "bytes_decoded", "bytes_quarantined"]) \
        .withColumn("skipped_by_rule", F.coalesce("skipped_by_rule", F.lit("{}")))
