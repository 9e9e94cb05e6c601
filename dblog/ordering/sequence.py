"""Step ``sequence``: ``commit_seq`` per transaction and ``event_seq`` per change.

``commit_seq`` ranks, per source, the committed transactions with at least one published
change by (``commit_position``, ``trx_id``), continuing the source's sequence
(``seq_base``). Without a window over a whole source (one task holding the night):

1. ``rank_in_partitions``: range-partition the numbered transactions by (source,
   commit_position, trx_id) and sort each partition; every row gets its partition
   (``seq_part``) and its index in the sorted partition (``seq_local``);
2. ``partition_counts``: rows and first index per (partition, source): a table as large as
   the number of partitions (plus sources), never as the night;
3. ``partition_offsets`` (on that small table): per (partition, source) the rows of the
   same source in earlier partitions, plus ``seq_base``;
4. ``assign_commit_seq``: commit_seq = offset + index inside the partition + 1
   (``with_commit_seq``: the same with the small table as a constant of the query, so
   that reading the transactions needs no join and no job to broadcast that table).

``event_seq`` ranks the published changes of one transaction by (``trx_order``, ``position``,
``archive_file``, ``record_index``): a window per transaction.
"""

from __future__ import annotations

from typing import Iterable

OFFSETS_DDL = "seq_part INT, source STRING, seq_offset LONG"
SEQ_KEYS = ("source", "commit_position", "trx_id")


def published_counts(classified):
    """classified changes -> (source, trx_id, event_count): published changes per transaction."""
    from pyspark.sql import functions as F

    return classified.filter(F.col("bucket") == "published") \
        .groupBy("source", "trx_id").agg(F.count(F.lit(1)).alias("event_count"))


def numbered(trx):
    """The transactions that get a ``commit_seq``: committed, with a published change."""
    from pyspark.sql import functions as F

    return (F.col("status") == "committed") & (F.coalesce(F.col("event_count"), F.lit(0)) > 0)


RANK_ROWS_PER_TASK = 2_000_000   # transactions a range partition of the ranking holds at most


def rank_partitions(transactions: int) -> int:
    """Range partitions for ranking about ``transactions`` rows: one per
    ``RANK_ROWS_PER_TASK`` (narrow rows, sorted with spilling). One partition needs no
    sample of the keys: Spark's range partitioner samples only for more, a job of its own
    on the ordering's critical path (docs/BENCHMARK.md, "Seventeenth session")."""
    return max(1, -(-int(transactions) // RANK_ROWS_PER_TASK))


def rank_in_partitions(candidates, partitions: int | None = None):
    """-> + ``seq_part`` (int) and ``seq_local`` (long, 0-based index in the sorted partition).
    ``partitions``: range partitions (``rank_partitions``); None: the session's shuffle
    partitions, coalesced by AQE.

    ``monotonically_increasing_id`` holds the partition in its upper 31 bits and the row's
    index within the partition in its lower 33; taken right after the sort, the index is the
    rank inside the partition."""
    from pyspark.sql import functions as F

    by_range = candidates.repartitionByRange(*SEQ_KEYS) if partitions is None \
        else candidates.repartitionByRange(int(partitions), *SEQ_KEYS)
    ranked = by_range.sortWithinPartitions(*SEQ_KEYS)
    part = F.spark_partition_id()
    return ranked.withColumn("seq_part", part) \
        .withColumn("seq_local", F.monotonically_increasing_id()
                    - F.shiftleft(part.cast("long"), 33))


def partition_counts(ranked):
    """-> (seq_part, source, n, first_local): one row per partition and source in it."""
    from pyspark.sql import functions as F

    return ranked.filter(F.col("seq_part").isNotNull()).groupBy("seq_part", "source").agg(
        F.count(F.lit(1)).alias("n"), F.min("seq_local").alias("first_local"))


def partition_offsets(counts: Iterable, seq_base: dict[str, int]) -> list[tuple[int, str, int]]:
    """(seq_part, source, n, first_local) rows -> (seq_part, source, seq_offset) such that
    commit_seq = seq_offset + seq_local + 1. Plain Python over the small table."""
    rows = sorted((int(p), s, int(n), int(first)) for p, s, n, first in counts)
    before: dict[str, int] = {}
    out = []
    for part, source, n, first in rows:
        done = before.get(source, 0)
        out.append((part, source, int(seq_base.get(source, 0)) + done - first))
        before[source] = done + n
    return out


def last_sequences(counts: Iterable, seq_base: dict[str, int]) -> dict[str, tuple[int, int]]:
    """source -> (last commit_seq, transactions numbered tonight), from the small table."""
    n_by_source: dict[str, int] = {}
    for _, source, n, _ in counts:
        n_by_source[source] = n_by_source.get(source, 0) + int(n)
    return {s: (int(seq_base.get(s, 0)) + n, n) for s, n in n_by_source.items()}


def assign_commit_seq(trx, offsets):
    """trx (with ``seq_part``/``seq_local``, null when not numbered) + ``commit_seq``;
    ``offsets``: the small (seq_part, source, seq_offset) table (broadcast)."""
    from pyspark.sql import functions as F

    return trx.join(F.broadcast(offsets), ["seq_part", "source"], "left") \
        .withColumn("commit_seq", (F.col("seq_offset") + F.col("seq_local") + 1).cast("long")) \
        .drop("seq_offset")


def offsets_lookup(offsets: Iterable):
    """The ``partition_offsets`` rows as a constant map ``source -> seq_part -> seq_offset``
    (a literal of the query, folded once when it is optimised), null when there are none."""
    from pyspark.sql import functions as F

    by_source: dict[str, list[tuple[int, int]]] = {}
    for part, source, offset in offsets:
        by_source.setdefault(source, []).append((int(part), int(offset)))
    if not by_source:
        return None
    return F.create_map(*[x for source in sorted(by_source) for x in (
        F.lit(source), F.create_map(*[y for part, offset in sorted(by_source[source]) for y in (
            F.lit(part).cast("int"), F.lit(offset).cast("long"))]))])


def with_commit_seq(trx, offsets: Iterable):
    """``assign_commit_seq`` with ``offsets`` given as the (seq_part, source, seq_offset)
    rows of ``partition_offsets``: the offset is looked up in a constant map (a missing
    source or partition, or a null ``seq_part``, gives null as the left join did)."""
    from pyspark.sql import functions as F

    lookup = offsets_lookup(offsets)
    if lookup is None:
        offset = F.lit(None).cast("long")
    else:
        offset = lookup[F.col("source")][F.col("seq_part")]
    return trx.withColumn("commit_seq", (offset + F.col("seq_local") + 1).cast("long"))


def event_seq(published):
    """published changes of committed transactions -> + ``event_seq`` (int, 1-based)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("source", "trx_id").orderBy(
        F.coalesce("trx_order", "position"), "position", "archive_file", "record_index")
    return published.withColumn("event_seq", F.row_number().over(w).cast("int"))
