"""Step ``quarantine``: the night's quarantine rows.

Decoder quarantines (``kind = quarantine``), segment pieces in the ``quarantined`` bucket
(incomplete groups of committed transactions, groups whose reassembly failed) and changes
without a transaction id (``no_transaction``)."""

from __future__ import annotations

from .classify import QUARANTINED

QUARANTINE_FIELDS = ["source", "format", "archive_file", "record_offset", "error_class", "message",
                     "raw_hex"]


def decoder_quarantine(events):
    from pyspark.sql import functions as F

    return events.filter((F.col("kind") == "quarantine") & ~F.col("from_state")) \
        .select(*QUARANTINE_FIELDS)


def segment_quarantine(bucketed_pieces):
    """``classify.segment_buckets`` rows (with record_offset, seg_num, seg_total, seg_data)."""
    from pyspark.sql import functions as F

    return bucketed_pieces.filter(F.col("bucket") == QUARANTINED).select(
        "source", "format", "archive_file", "record_offset",
        F.coalesce("r_class", "q_class").alias("error_class"),
        F.coalesce("r_message", F.concat(
            F.lit("segment "), F.col("seg_num").cast("string"), F.lit(" of "),
            F.col("seg_total").cast("string"), F.lit(" of record "), F.col("seg_key"),
            F.lit(": the group never completed (committed unit of recovery)"))).alias("message"),
        F.substring(F.hex("seg_data"), 1, 512).alias("raw_hex"))


def orphan_quarantine(changes):
    """Changes (read tonight) without a transaction id."""
    from pyspark.sql import functions as F

    return changes.filter(F.col("trx_id").isNull() & ~F.col("from_state")).select(
        "source", "format", "archive_file", "record_offset",
        F.lit("no_transaction").alias("error_class"),
        F.lit("change record without a transaction id").alias("message"),
        F.lit(None).cast("string").alias("raw_hex"))


def quarantine(*parts):
    """Union of quarantine parts, ``raw_hex`` in lower case."""
    from pyspark.sql import functions as F

    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out.withColumn("raw_hex", F.lower("raw_hex"))
