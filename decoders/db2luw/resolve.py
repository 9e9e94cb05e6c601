"""``resolve_transactions``: the ordering job's hook for Db2 LUW (contract 3 of the team brief).

In the v10 layout undo and compensation are last in, first out within a transaction; the
decoder resolves them within an archive, and writes an undo whose change lies in an earlier
archive (or night) with ``undo_of`` null. Here, over the night's events and the rows held
from earlier nights, each such undo gets the change it undoes: per transaction, the changes
not yet undone and the pending undos in log order (``position``: LFS then LSN) are matched
like parentheses (a change opens, an undo closes the latest open one). Version 7 rows (and
v10 rows without pending undos) pass unchanged; an undo with no change left stays null.

Pure DataFrame functions, no ``collect``: the pending undos are few (rollbacks that span
archives); the rows that can be matched are joined to their transactions, and everything
else passes through a narrow filter.
"""

from __future__ import annotations

V10_POSITION_DIGITS = 32          # LFS then LSN (Version 7 LSNs have 12)


def resolve_scope():
    """The rows ``resolve_transactions`` may change, as a predicate on columns it never
    changes: the v10 undo rows. Every other row passes the hook unchanged, so the ordering
    job keeps reading those from the decoded events instead of writing them again
    (``dblog.ordering.hooks``)."""
    from pyspark.sql import functions as F

    return (F.col("kind") == "undo") & (F.length("position") == V10_POSITION_DIGITS)


def resolve_scope_table(table):
    """``resolve_scope`` on an Arrow table or record batch (a boolean array, null where
    Spark's predicate is null): the ordering's passes in Python tasks leave out the rows of
    the scope as the DataFrame steps do (``dblog.ordering.hooks``)."""
    import pyarrow.compute as pc

    return pc.and_(pc.equal(table.column("kind"), "undo"),
                   pc.equal(pc.utf8_length(table.column("position")), V10_POSITION_DIGITS))


def resolve_transactions(events):
    """events -> events, with the pending v10 undo rows' ``undo_of`` filled in."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = ["source", "trx_id"]
    undo = F.col("kind") == "undo"
    pending = undo & F.col("undo_of").isNull() & (F.length("position") == V10_POSITION_DIGITS)
    pending_rows = events.filter(pending)
    trx = pending_rows.select(*keys).distinct()
    involved = events.filter(~pending).join(trx, keys, "left_semi")
    undone = involved.filter(undo & F.col("undo_of").isNotNull()) \
        .select(*keys, F.col("undo_of").alias("position"))
    # what the decoder keeps on its stack: the changes, and row records that were not
    # formatted user data (they are inserts/deletes/updates too)
    opens = involved.filter((F.col("kind") == "change") | (
        (F.col("kind") == "control") & (F.col("rule") == "internal_control_record"))) \
        .select(*keys, "position").join(undone, keys + ["position"], "left_anti") \
        .withColumn("delta", F.lit(1))
    closes = pending_rows.select(*keys, "position").withColumn("delta", F.lit(-1))
    order = Window.partitionBy(*keys).orderBy("position") \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    items = opens.unionByName(closes).withColumn("depth", F.sum("delta").over(order))
    items = items.withColumn("level", F.when(F.col("delta") == 1, F.col("depth"))
                             .otherwise(F.col("depth") + 1))
    before = Window.partitionBy(*keys, "level").orderBy("position") \
        .rowsBetween(Window.unboundedPreceding, -1)
    matched = items.withColumn(
        "matched", F.last(F.when(F.col("delta") == 1, F.col("position")), ignorenulls=True)
        .over(before)).filter(F.col("delta") == -1).select(*keys, "position", "matched")
    resolved = pending_rows.join(matched, keys + ["position"], "left") \
        .withColumn("undo_of", F.col("matched")).select(*events.columns)
    return events.filter(~pending).unionByName(resolved)
