"""Step ``audit``: per archive, the records read and the bucket each was accounted to.

Buckets: ``published``, ``control`` (begin/commit/abort/undo/control rows),
``skipped:<rule>``, ``held_open``, ``quarantined``; they add up to the records read
(``n_records`` summed). Rows held from earlier nights were counted on their own night.
"""

from __future__ import annotations

from .classify import change_bucket, other_bucket, segment_buckets, with_transaction

BUCKET_COLUMNS = ["source", "format", "archive_file", "n_records", "from_state", "bucket"]
NARROW = ["source", "format", "archive_file", "n_records", "from_state", "kind", "rule", "trx_id",
          "position", "seg_key"]


def row_buckets(events, trx, groups=None):
    """Every row read tonight (not from state, not ``carry``) -> ``BUCKET_COLUMNS``.

    Changes and the other rows meet their transaction in one join; segment pieces (only when
    ``groups``, the reassembly's outcome, is given) go through ``segment_buckets``."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    rows = events.filter(~F.col("from_state") & ~kind.isin("segment", "carry")) \
        .filter((kind != "change") | (F.col("seg_key").isNull() & (F.col("n_records") > 0))) \
        .select(*NARROW)
    rows = with_transaction(rows, trx, ["status", "capture_off", "undone"])
    bucket = F.when(kind == "change", change_bucket(F.col("trx_id"), F.col("status"),
                                                   F.col("capture_off"), F.col("undone"),
                                                   F.col("position"))) \
        .otherwise(other_bucket(kind, F.col("rule"), F.col("status")))
    out = rows.withColumn("bucket", bucket).select(*BUCKET_COLUMNS)
    if groups is not None:
        pieces = events.filter(~F.col("from_state") & (kind == "segment")).select(*NARROW)
        out = out.unionByName(segment_buckets(pieces, groups, trx).select(*BUCKET_COLUMNS))
    return out


def audit(buckets, listed):
    """``BUCKET_COLUMNS`` rows -> one row per archive (source, format, archive_file,
    records_read, published, control, skipped, held_open, quarantined, skipped_by_rule);
    ``listed`` (source, format, archive_file): every archive of the night, so that an
    archive without any record still gets its row."""
    from pyspark.sql import functions as F

    per_bucket = buckets.groupBy("source", "format", "archive_file", "bucket") \
        .agg(F.sum("n_records").cast("long").alias("n"))

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
    )
    return listed.join(per_archive, ["source", "format", "archive_file"], "left") \
        .na.fill(0, ["records_read", "published", "control", "skipped", "held_open", "quarantined"]) \
        .withColumn("skipped_by_rule", F.coalesce("skipped_by_rule", F.lit("{}")))
