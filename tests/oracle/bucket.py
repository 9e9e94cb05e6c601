"""The summary of a bucket of the transactions pass on files as the chunked rules give it
(``transactions.partial`` / ``final``, ``categories`` / ``_buckets``, joins on (source,
trx_id)): what ``trxfiles.summarize_bucket`` ran before ``dblog.ordering.bucketsum``, kept
as the reference its tests compare with. Not used by the product."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dblog.ordering.transactions import (KEYS, TRX_COUNTS_SCHEMA, _buckets, categories,
                                         compensated, final, partial)
from dblog.ordering.trxfiles import BUCKETS_SCHEMA, PUB_SCHEMA
from dblog.ordering.wide import FID, ROW


def published(rows: pa.Table, trx: pa.Table, undone) -> pa.Table:
    """The changes a bucket publishes, ``PUB_SCHEMA``: those of a transaction with published
    changes (``event_count`` > 0: committed, not ``capture_off``) that no undo row of it
    undoes (``undone``: a mask over ``rows``), each with its ``event_seq``: its rank among
    them by (``coalesce(trx_order, position)``, ``position``, ``archive_file``,
    ``record_index``), nulls first (``sequence.event_seq``)."""
    change = pc.fill_null(pc.equal(rows.column("kind"), "change"), False)
    cand = rows.filter(pc.and_(change, pc.invert(undone))).select(
        [*KEYS, "trx_order", "position", "archive_file", "record_index", FID, ROW])
    with_changes = trx.filter(pc.greater(trx.column("event_count"), 0)).select(KEYS)
    cand = cand.join(with_changes, KEYS, join_type="left semi", use_threads=False)
    n = cand.num_rows
    if n == 0:
        return PUB_SCHEMA.empty_table()
    cand = cand.append_column("_k", pc.coalesce(cand.column("trx_order"), cand.column("position")))
    order = pc.sort_indices(cand, sort_keys=[(c, "ascending", "at_start") for c in (
        "source", "trx_id", "_k", "position", "archive_file", "record_index")])
    cand = cand.take(order)
    src, trx_id = cand.column("source").combine_chunks(), cand.column("trx_id").combine_chunks()
    same = pc.and_(pc.equal(src.slice(1), src.slice(0, n - 1)),
                   pc.equal(trx_id.slice(1), trx_id.slice(0, n - 1)))
    first = np.concatenate([[True], ~pc.fill_null(same, False).to_numpy(zero_copy_only=False)])
    starts = np.flatnonzero(first)
    run_start = np.repeat(starts, np.diff(np.append(starts, n)))
    seq = (np.arange(n) - run_start + 1).astype(np.int32)
    return pa.table([cand.column(FID), cand.column(ROW), src, trx_id, pa.array(seq)],
                    schema=PUB_SCHEMA)


def summary(rows: pa.Table) -> dict[str, pa.Table]:
    """A bucket's rows (``SPLIT_SCHEMA`` + ``_seen``) -> its transactions, audit buckets,
    published changes and held rows."""
    trx = final(partial(rows), whole=True).cast(TRX_COUNTS_SCHEMA)
    undone = compensated(rows)
    kept = pc.fill_null(pc.and_(rows.column("_in_trx"),
                                pc.not_equal(rows.column("kind"), "quarantine")), False)
    held = rows.filter(kept).select([FID, ROW, *KEYS]).join(
        trx.filter(pc.equal(trx.column("status"), "open")).select(KEYS), KEYS,
        join_type="left semi", use_threads=False)
    return {"trx": trx, "buckets": _buckets(categories(rows, undone), trx).cast(BUCKETS_SCHEMA),
            "pub": published(rows, trx, undone), "held": held.select([FID, ROW])}
