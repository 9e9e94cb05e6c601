"""Step ``quarantine``: the night's quarantine rows.

Decoder quarantines (``kind = quarantine``), segment pieces in the ``quarantined`` bucket
(incomplete groups of committed transactions, groups whose reassembly failed) and changes
without a transaction id (``no_transaction``)."""

from __future__ import annotations

from .classify import QUARANTINED

QUARANTINE_FIELDS = ["source", "format", "archive_file", "record_offset", "error_class", "message",
                     "raw_hex", "n_records", "n_bytes"]
RAW_BYTES = 256      # bytes of a quarantined segment piece shown in ``raw_hex`` (512 hex digits)
PIECE_COLUMNS = ["source", "format", "archive_file", "record_offset", "trx_id", "seg_key",
                 "seg_num", "seg_total", "n_records", "n_bytes"]


def quarantine_pieces(events, with_state: bool = False):
    """The night's segment pieces as ``segment_quarantine`` needs them: the columns it reads,
    ``seg_data`` cut to the ``RAW_BYTES`` it shows, so that the joins which decide the
    pieces' buckets shuffle at most that much of each piece, not whole segments;
    ``with_state``: and ``from_state`` (the audit counts tonight's pieces only)."""
    from pyspark.sql import functions as F

    return events.filter(F.col("kind") == "segment").select(
        *PIECE_COLUMNS, *(["from_state"] if with_state else []),
        F.substring("seg_data", 1, RAW_BYTES).alias("seg_data"))


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
        F.substring(F.hex("seg_data"), 1, 2 * RAW_BYTES).alias("raw_hex"), "n_records", "n_bytes")


def orphan_quarantine(changes):
    """Changes (read tonight) without a transaction id."""
    from pyspark.sql import functions as F

    return changes.filter(F.col("trx_id").isNull() & ~F.col("from_state")).select(
        "source", "format", "archive_file", "record_offset",
        F.lit("no_transaction").alias("error_class"),
        F.lit("change record without a transaction id").alias("message"),
        F.lit(None).cast("string").alias("raw_hex"), "n_records", "n_bytes")


def quarantine(*parts):
    """Union of quarantine parts, ``raw_hex`` in lower case."""
    from pyspark.sql import functions as F

    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out.withColumn("raw_hex", F.lower("raw_hex")) \
        .withColumn("n_records", F.col("n_records").cast("long")) \
        .withColumn("n_bytes", F.col("n_bytes").cast("long"))
