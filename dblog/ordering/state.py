"""Step ``held state``: what the night leaves for the next one (docs/ARCHITECTURE.md)."""

from __future__ import annotations

from decoders.events import EVENT_COLUMNS


def held_rows(events, open_trx, broadcast: bool = False):
    """Every row (tonight's and those held before) of the transactions still open, except
    quarantine and carry rows. ``open_trx``: (source, trx_id) of the open transactions;
    ``broadcast`` when it is known to be small (then the events are not shuffled)."""
    from pyspark.sql import functions as F

    keys = open_trx.select("source", "trx_id")
    if broadcast:
        keys = F.broadcast(keys)
    return events.filter(~F.col("kind").isin("quarantine", "carry")) \
        .join(keys, ["source", "trx_id"], "left_semi") \
        .select(*EVENT_COLUMNS)


def carry_rows(events):
    """The decoder carry of sequential formats written tonight."""
    from pyspark.sql import functions as F

    return events.filter((F.col("kind") == "carry") & ~F.col("from_state")).select(*EVENT_COLUMNS)
