"""Step ``transactions``: one row per (source, trx_id) of the events, with its outcome and
its published change count.

A transaction is ``committed`` when any of its rows has ``trx_end = commit`` (its
``commit_position``, ``commit_ts``, ``user`` come from those rows; ``user`` also from
``begin``), ``rolled_back`` when a row has ``trx_end = abort``, else ``open``. It also carries
``capture_off`` (its ``begin`` row has ``flag = capture_off``) and ``undone``: the positions
that ``undo`` rows of the transaction undo (sorted, null when none), so that classifying a
change needs one join on (source, trx_id) and nothing else. ``event_count`` is the number of
its changes that are published: for a committed transaction without ``capture_off``, its
changes (``change`` rows and reassembled segment groups) but those an ``undo`` row of the
transaction undoes (``skipped:compensated``); 0 for every other transaction.

How, with memory bounded whatever the transactions' sizes (Arrow's hash aggregations in
the Python workers, no per-row Python):

1. the narrow columns of the rows are shuffled by (source, trx_id) into partitions of about
   ``ROWS_PER_TASK`` rows (one per core if each gets ``MIN_ROWS_PER_TASK``), each sorted by
   (source, trx_id) with a transaction's undo rows first (Spark's sort, which spills);
2. a Python task reads its partition as a stream (``stream_summarize``), in chunks of
   ``CHUNK_ROWS``: the transactions that end inside a chunk are summarised at once
   (``partial`` then ``final``); the one that goes on into the next chunk is carried as its
   *partial* row (minimums, maximums, flags, counts, undo targets) plus its undo rows, which
   the next chunk reads again before its changes. Every aggregate but the change counts is
   idempotent (minimum, maximum, any, distinct targets), and undo rows are not changes, so
   reading them twice changes nothing; a change is compensated when an undo row of its
   transaction targets its position, and those rows are always in its chunk. A task holds
   one chunk, one transaction's partial row and that transaction's undo rows.

**The audit's buckets in the same pass** (``audit_dir``): the rows the audit counts that
have a ``trx_id`` (``AUDITED``) also carry their archive, records, bytes and skip rule
through the shuffle, and each task sums them per (source, format, archive, bucket) once
their transaction's outcome is known (``audit_categories``: change, undone change,
quarantined, skipped:<rule> or other, per transaction and archive; ``audit_buckets``: the
bucket from the outcome, ``classify``'s rules); the transaction carried into the next chunk
carries its categories too (one row per archive and category), and the undo rows read again
are not counted again. Each task writes its sums (a few rows per archive) to
``<audit_dir>/part-<partition>.parquet``; the audit reads them instead of joining every row
with its transaction again (docs/BENCHMARK.md, "Fourteenth session").

The same step in Spark SQL (string minimums and maximums and ``collect_set`` make an object
hash aggregation, a second aggregation counted the changes, a join put them together) was
the ordering's costliest query (docs/BENCHMARK.md, "Ordering at 1M, twelfth session"); its
definition is kept as the tests' oracle (``tests/oracle/transactions.py``).
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

TRX_COLUMNS = ["source", "trx_id", "format", "status", "commit_position", "commit_ts", "user",
               "begin_position", "capture_off", "undone"]
# the rows' columns the step reads; ``_in_trx`` is false for reassembled changes, which count
# as changes but do not take part in the transaction's outcome (their segments do)
NARROW_COLUMNS = ["source", "trx_id", "format", "kind", "flag", "trx_end", "commit_position",
                  "commit_ts", "user", "position", "undo_of"]
TRX_COUNTS_SCHEMA = pa.schema([
    ("source", pa.string()), ("trx_id", pa.string()), ("format", pa.string()),
    ("status", pa.string()), ("commit_position", pa.string()),
    ("commit_ts", pa.timestamp("us", tz="UTC")), ("user", pa.string()),
    ("begin_position", pa.string()), ("capture_off", pa.bool_()),
    ("undone", pa.list_(pa.string())), ("event_count", pa.int64())])
TRX_COUNTS_DDL = ("source STRING, trx_id STRING, format STRING, status STRING, "
                  "commit_position STRING, commit_ts TIMESTAMP, user STRING, "
                  "begin_position STRING, capture_off BOOLEAN, undone ARRAY<STRING>, "
                  "event_count LONG")
ROWS_PER_TASK = 1_000_000  # rows of a partition at most (sized from the events' footers)
MIN_ROWS_PER_TASK = 100_000  # rows below which a night's partitions are fewer than the cores
CHUNK_ROWS = 131_072       # rows a task summarises at once (its memory: ~200 bytes a row)
KEYS = ["source", "trx_id"]
# the rows' columns the audit's sums need beside ``NARROW_COLUMNS`` (``_audit``: the row is
# one the audit counts, see ``AUDITED``)
AUDIT_INPUT_COLUMNS = ["archive_file", "n_records", "n_bytes", "rule"]
AUDIT_PARTIAL_SCHEMA = pa.schema([
    ("source", pa.string()), ("format", pa.string()), ("archive_file", pa.string()),
    ("bucket", pa.string()), ("n_records", pa.int64()), ("n_bytes", pa.int64())])
AUDIT_PARTIAL_DDL = ("source STRING, format STRING, archive_file STRING, bucket STRING, "
                     "n_records LONG, n_bytes LONG")
_CATS_KEYS = ["source", "trx_id", "format", "archive_file", "cat"]


def _when(mask, values):
    """``values`` where ``mask`` is true, else null (SQL ``CASE WHEN mask THEN values END``)."""
    return pc.if_else(mask, values, pa.scalar(None, values.type))


PARTIAL_SCHEMA = pa.schema([
    ("source", pa.string()), ("trx_id", pa.string()), ("in_trx", pa.bool_()),
    ("format", pa.string()), ("cp", pa.string()), ("cts", pa.timestamp("us", tz="UTC")),
    ("ab", pa.bool_()), ("cap", pa.bool_()), ("uc", pa.string()), ("ub", pa.string()),
    ("u", pa.string()), ("pb", pa.string()), ("p", pa.string()), ("n_changes", pa.int64()),
    ("n_comp", pa.int64()), ("undone", pa.list_(pa.string()))])
# how ``merge`` merges each partial column
MERGE = [("in_trx", "any"), ("format", "min"), ("cp", "max"), ("cts", "max"), ("ab", "any"),
         ("cap", "any"), ("uc", "max"), ("ub", "max"), ("u", "max"), ("pb", "min"), ("p", "min"),
         ("n_changes", "sum"), ("n_comp", "sum")]


def _aggregate(table: pa.Table, how: list[tuple[str, str]]) -> pa.Table:
    """``table`` grouped by (source, trx_id): the keys and each (column, aggregation) of
    ``how``, named as the column."""
    g = table.group_by(KEYS, use_threads=False).aggregate(how)
    return pa.table({**{k: g.column(k) for k in KEYS}, **{c: g.column(f"{c}_{h}") for c, h in how}})


def _lists(keys: pa.Table, values) -> tuple[pa.Array, pa.Table]:
    """``keys`` (source, trx_id) sorted with ``values`` beside them -> (one list of the values
    per run of equal keys, the runs' keys with ``_list``: the index of their list)."""
    n = keys.num_rows
    if n == 0:
        return (pa.array([], pa.list_(pa.string())),
                pa.table({"source": pa.array([], pa.string()), "trx_id": pa.array([], pa.string()),
                          "_list": pa.array([], pa.int64())}))
    src, trx = keys.column("source").combine_chunks(), keys.column("trx_id").combine_chunks()
    same = pc.and_(pc.equal(src.slice(1), src.slice(0, n - 1)),
                   pc.equal(trx.slice(1), trx.slice(0, n - 1)))
    first = pa.concat_arrays([pa.array([True]), pc.invert(same)])
    starts = pc.indices_nonzero(first)
    offsets = pa.concat_arrays([pc.cast(starts, pa.int32()), pa.array([n], pa.int32())])
    lists = pa.ListArray.from_arrays(offsets, values.combine_chunks()
                                     if isinstance(values, pa.ChunkedArray) else values)
    heads = keys.take(starts).select(KEYS).append_column(
        "_list", pa.array(range(len(starts)), pa.int64()))
    return lists, heads


def _distinct_targets(rows: pa.Table) -> pa.Table:
    """(source, trx_id, undo_of) of ``rows``, distinct, non-null targets, sorted."""
    rows = rows.filter(pc.is_valid(rows.column("undo_of"))).select([*KEYS, "undo_of"])
    return rows.group_by([*KEYS, "undo_of"], use_threads=False).aggregate([]) \
        .sort_by([("source", "ascending"), ("trx_id", "ascending"), ("undo_of", "ascending")])


def _undo_rows(rows: pa.Table):
    """Mask of the undo rows of the transactions (not of reassembled changes)."""
    return pc.fill_null(pc.and_(pc.fill_null(rows.column("_in_trx"), False),
                                pc.equal(rows.column("kind"), "undo")), False)


def partial(rows: pa.Table) -> pa.Table:
    """Rows (``NARROW_COLUMNS`` + ``_in_trx``; a change and the undo rows that undo it in the
    same ``rows``) -> one ``PARTIAL_SCHEMA`` row per (source, trx_id) in them."""
    in_trx = pc.fill_null(rows.column("_in_trx"), False)
    kind, end = rows.column("kind"), rows.column("trx_end")
    commit_end = pc.fill_null(pc.and_(in_trx, pc.equal(end, "commit")), False)
    begin = pc.fill_null(pc.and_(in_trx, pc.equal(kind, "begin")), False)
    change = pc.fill_null(pc.equal(kind, "change"), False)
    position = rows.column("position")
    parts = pa.table({
        "source": rows.column("source"), "trx_id": rows.column("trx_id"), "in_trx": in_trx,
        "format": _when(in_trx, rows.column("format")),
        "cp": _when(commit_end, rows.column("commit_position")),
        "cts": _when(commit_end, rows.column("commit_ts")),
        "ab": pc.fill_null(pc.and_(in_trx, pc.equal(end, "abort")), False),
        "cap": pc.fill_null(pc.and_(begin, pc.equal(rows.column("flag"), "capture_off")), False),
        "uc": _when(pc.fill_null(pc.and_(in_trx, pc.equal(kind, "commit")), False), rows.column("user")),
        "ub": _when(begin, rows.column("user")),
        "u": _when(in_trx, rows.column("user")),
        "pb": _when(begin, position),
        "p": _when(in_trx, position),
        "n_changes": pc.cast(change, pa.int64()),
    })
    g = _aggregate(parts, [(c, "sum" if c == "n_changes" else how) for c, how in MERGE
                           if c != "n_comp"])

    # the changes an undo row of their transaction undoes (they are in these rows with it)
    targets = _distinct_targets(rows.filter(_undo_rows(rows)))
    changes = rows.filter(change).select([*KEYS, "position"])
    comp = changes.join(targets, [*KEYS, "position"], [*KEYS, "undo_of"], join_type="left semi",
                        use_threads=False) \
        .group_by(KEYS, use_threads=False).aggregate([([], "count_all")])
    comp = pa.table({"source": comp.column("source"), "trx_id": comp.column("trx_id"),
                     "n_comp": comp.column("count_all")})
    lists, heads = _lists(targets.select(KEYS), targets.column("undo_of"))
    g = g.join(comp, KEYS, join_type="left outer", use_threads=False) \
        .join(heads, KEYS, join_type="left outer", use_threads=False)
    return pa.table([*(g.column(c) for c in KEYS), *(g.column(c) for c, _ in MERGE[:-1]),
                     pc.fill_null(g.column("n_comp"), 0), pc.take(lists, g.column("_list"))],
                    schema=PARTIAL_SCHEMA)


def merge(partials: pa.Table) -> pa.Table:
    """``PARTIAL_SCHEMA`` rows -> one ``PARTIAL_SCHEMA`` row per (source, trx_id): the
    partials of a transaction merged (``MERGE``; undo targets distinct and sorted)."""
    g = _aggregate(partials, MERGE)
    flat = partials.filter(pc.is_valid(partials.column("undone")))
    lists_col = flat.column("undone")
    if flat.num_rows and pc.sum(pc.list_value_length(lists_col)).as_py():
        parent = pc.list_parent_indices(lists_col)
        targets = pa.table({"source": pc.take(flat.column("source"), parent),
                            "trx_id": pc.take(flat.column("trx_id"), parent),
                            "undo_of": pc.list_flatten(lists_col)})
    else:
        targets = pa.table({"source": pa.array([], pa.string()), "trx_id": pa.array([], pa.string()),
                            "undo_of": pa.array([], pa.string())})
    targets = _distinct_targets(targets)
    lists, heads = _lists(targets.select(KEYS), targets.column("undo_of"))
    g = g.join(heads, KEYS, join_type="left outer", use_threads=False)
    return pa.table([*(g.column(c) for c in KEYS), *(g.column(c) for c, _ in MERGE),
                     pc.take(lists, g.column("_list"))], schema=PARTIAL_SCHEMA)


def final(partials: pa.Table) -> pa.Table:
    """``PARTIAL_SCHEMA`` rows, every partial of a transaction among them -> one
    ``TRX_COUNTS_SCHEMA`` row per (source, trx_id) with a row of its own (``in_trx``)."""
    g = merge(partials)
    g = g.filter(g.column("in_trx"))
    committed = pc.is_valid(g.column("cp"))
    capture_off = g.column("cap")
    status = pc.if_else(committed, "committed", pc.if_else(g.column("ab"), "rolled_back", "open"))
    published = pc.subtract(g.column("n_changes"), g.column("n_comp"))
    event_count = pc.if_else(pc.and_(committed, pc.invert(capture_off)), published, 0)
    return pa.table([
        g.column("source"), g.column("trx_id"), g.column("format"), status, g.column("cp"),
        g.column("cts"), pc.coalesce(g.column("uc"), g.column("ub"), g.column("u")),
        pc.coalesce(g.column("pb"), g.column("p")), capture_off, g.column("undone"),
        pc.cast(event_count, pa.int64())], schema=TRX_COUNTS_SCHEMA)


def summarize(rows: pa.Table) -> pa.Table:
    """``final(partial(rows))``: every row of a transaction in ``rows``."""
    return final(partial(rows))


def audit_categories(rows: pa.Table) -> pa.Table:
    """The rows the audit counts (``_audit``) -> records and bytes per (source, trx_id,
    format, archive_file, ``cat``): ``change``, ``undone`` (a change an undo row of its
    transaction undoes; those rows are in ``rows`` with it, as for ``partial``),
    ``quarantined``, ``skipped:<rule>`` or ``other``; the bucket follows from ``cat`` and
    the transaction's outcome (``audit_buckets``)."""
    audited = pc.fill_null(rows.column("_audit"), False) if "_audit" in rows.column_names else None
    if audited is None or not pc.any(audited).as_py():
        return _empty_categories()
    targets = _distinct_targets(rows.filter(_undo_rows(rows)))
    r = rows.filter(audited)
    kind = pc.fill_null(r.column("kind"), "")
    change = pc.equal(kind, "change")
    index = pa.array(np.arange(r.num_rows, dtype=np.int64))
    keyed = pa.table({"source": r.column("source"), "trx_id": r.column("trx_id"),
                      "position": r.column("position"), "_i": index}).filter(change)
    undone_rows = keyed.join(targets, [*KEYS, "position"], [*KEYS, "undo_of"],
                             join_type="left semi", use_threads=False).column("_i")
    undone = pc.is_in(index, value_set=undone_rows.combine_chunks()
                      if isinstance(undone_rows, pa.ChunkedArray) else undone_rows)
    skipped = pc.binary_join_element_wise("skipped:", r.column("rule"), "")
    cat = pc.if_else(change, pc.if_else(undone, "undone", "change"),
                     pc.if_else(pc.equal(kind, "quarantine"), "quarantined",
                                pc.if_else(pc.equal(kind, "skip"), skipped, "other")))
    t = pa.table({"source": r.column("source"), "trx_id": r.column("trx_id"),
                  "format": r.column("format"), "archive_file": r.column("archive_file"),
                  "cat": cat, "n": pc.cast(r.column("n_records"), pa.int64()),
                  "nb": pc.cast(r.column("n_bytes"), pa.int64())})
    return _sum_categories(t)


def _empty_categories() -> pa.Table:
    return pa.table({**{c: pa.array([], pa.string()) for c in _CATS_KEYS},
                     "n": pa.array([], pa.int64()), "nb": pa.array([], pa.int64())})


def _sum_categories(t: pa.Table) -> pa.Table:
    """Category rows summed per ``_CATS_KEYS`` (a transaction carried over several chunks)."""
    if t.num_rows == 0:
        return _empty_categories()
    g = t.group_by(_CATS_KEYS, use_threads=False).aggregate([("n", "sum"), ("nb", "sum")])
    return pa.table({**{c: g.column(c) for c in _CATS_KEYS},
                     "n": g.column("n_sum"), "nb": g.column("nb_sum")})


def audit_buckets(cats: pa.Table, trx: pa.Table) -> pa.Table:
    """``audit_categories`` rows of transactions summarised in ``trx`` (``TRX_COUNTS_SCHEMA``)
    -> records and bytes per (source, format, archive_file, bucket) (``AUDIT_PARTIAL_SCHEMA``),
    the bucket as ``classify.change_bucket`` and ``classify.other_bucket`` give it."""
    if cats.num_rows == 0:
        return AUDIT_PARTIAL_SCHEMA.empty_table()
    j = cats.join(trx.select([*KEYS, "status", "capture_off"]), KEYS, join_type="left outer",
                  use_threads=False)
    cat, status = j.column("cat"), j.column("status")
    is_open = pc.fill_null(pc.equal(status, "open"), False)
    change_like = pc.is_in(cat, value_set=pa.array(["change", "undone"]))
    change = pc.if_else(is_open, "held_open", pc.if_else(
        pc.fill_null(pc.equal(status, "rolled_back"), False), "skipped:rolled_back", pc.if_else(
            pc.fill_null(j.column("capture_off"), False), "skipped:capture_off", pc.if_else(
                pc.equal(cat, "undone"), "skipped:compensated", "published"))))
    other = pc.if_else(is_open, "held_open", "control")
    bucket = pc.if_else(change_like, change, pc.if_else(pc.equal(cat, "other"), other, cat))
    t = pa.table({"source": j.column("source"), "format": j.column("format"),
                  "archive_file": j.column("archive_file"), "bucket": bucket,
                  "n_records": j.column("n"), "n_bytes": j.column("nb")})
    return sum_buckets(t)


def sum_buckets(t: pa.Table) -> pa.Table:
    """``AUDIT_PARTIAL_SCHEMA`` rows summed per (source, format, archive_file, bucket)."""
    keys = ["source", "format", "archive_file", "bucket"]
    if t.num_rows == 0:
        return AUDIT_PARTIAL_SCHEMA.empty_table()
    g = t.group_by(keys, use_threads=False).aggregate([("n_records", "sum"), ("n_bytes", "sum")])
    return pa.table([*(g.column(c) for c in keys), g.column("n_records_sum"),
                     g.column("n_bytes_sum")], schema=AUDIT_PARTIAL_SCHEMA)


def _carry_start(table: pa.Table) -> int:
    """Index of the first row of the last (source, trx_id) run of ``table`` (sorted by them)."""
    n = table.num_rows
    src, trx = table.column("source"), table.column("trx_id")
    last_src, last_trx = src[n - 1], trx[n - 1]
    other = pc.invert(pc.fill_null(pc.and_(pc.equal(src, last_src), pc.equal(trx, last_trx)), False))
    idx = pc.indices_nonzero(other)
    return int(idx[-1].as_py()) + 1 if len(idx) else 0


def _key(table: pa.Table, i: int) -> tuple:
    return table.column("source")[i].as_py(), table.column("trx_id")[i].as_py()


def stream_summarize(batches, chunk_rows: int = CHUNK_ROWS, audit: list | None = None):
    """Batches of rows sorted by (source, trx_id), undo rows first in a transaction -> record
    batches of ``TRX_COUNTS_SCHEMA`` (``summarize`` of all the rows), holding one chunk of
    about ``chunk_rows`` rows at a time (the module's docstring, step 2).

    ``audit``: a list to which the audit's sums (``AUDIT_PARTIAL_SCHEMA`` tables) of the
    rows marked ``_audit`` are appended as their transactions end."""
    pending: list[pa.RecordBatch] = []
    size = 0
    carry: pa.Table | None = None          # the open transaction's partial row
    carry_undo: pa.Table | None = None     # its undo rows, read again with its next rows
    carry_cats: pa.Table | None = None     # its audit categories so far

    def flush(last: bool):
        nonlocal pending, size, carry, carry_undo, carry_cats
        rows = pa.Table.from_batches(pending)
        pending, size = [], 0
        cut = rows.num_rows if last else _carry_start(rows)
        head, tail = rows.slice(0, cut), rows.slice(cut)
        done: list[pa.Table] = []
        done_cats: list[pa.Table] = []
        earlier = earlier_cats = None      # the carried partial, when its rows go on in tail
        if carry is not None:
            if _key(carry, 0) == _key(rows, 0):     # the carried transaction goes on here
                if cut:
                    head = pa.concat_tables([carry_undo, head])
                    done.append(carry)
                    done_cats.append(carry_cats)
                else:
                    tail = pa.concat_tables([carry_undo, tail])
                    earlier, earlier_cats = carry, carry_cats
            else:
                done.append(carry)
                done_cats.append(carry_cats)
        carry = carry_undo = carry_cats = None
        if head.num_rows:
            done.append(partial(head))
            if audit is not None:
                done_cats.append(audit_categories(head))
        if tail.num_rows:
            carry = partial(tail)
            if earlier is not None:
                carry = merge(pa.concat_tables([earlier, carry]))
            carry_undo = _not_audited(tail.filter(_undo_rows(tail)))
            if audit is not None:
                cats = audit_categories(tail)
                carry_cats = cats if earlier_cats is None else \
                    _sum_categories(pa.concat_tables([earlier_cats, cats]))
        if done:
            out = final(pa.concat_tables(done))
            if audit is not None and done_cats:
                audit.append(audit_buckets(pa.concat_tables(done_cats), out))
            if out.num_rows:
                yield from out.to_batches()

    for batch in batches:
        if batch.num_rows:
            pending.append(batch)
            size += batch.num_rows
            if size >= chunk_rows:
                yield from flush(last=False)
    if pending:
        yield from flush(last=True)
    elif carry is not None:
        out = final(carry)
        if audit is not None:
            audit.append(audit_buckets(carry_cats, out))
        if out.num_rows:
            yield from out.to_batches()


def _not_audited(rows: pa.Table) -> pa.Table:
    """``rows`` with ``_audit`` false: undo rows carried into the next chunk are read again
    there, but were counted where they were first read."""
    if "_audit" not in rows.column_names:
        return rows
    i = rows.column_names.index("_audit")
    return rows.set_column(i, rows.schema.field(i),
                           pa.array(np.zeros(rows.num_rows, dtype=bool), pa.bool_()))


def _stream(batches):
    """mapInArrow: ``stream_summarize``, cast to the declared schema."""
    for b in stream_summarize(batches):
        yield b.cast(TRX_COUNTS_SCHEMA) if b.schema != TRX_COUNTS_SCHEMA else b


def write_audit_partial(folder: str, name: str, parts: list[pa.Table]) -> None:
    """The audit's sums of one task, summed again, as ``<folder>/<name>``: written under a
    hidden name and renamed when whole, so that a retried attempt replaces the file with the
    same sums and a killed one leaves nothing a reader sees."""
    import os

    import pyarrow.parquet as pq

    table = sum_buckets(pa.concat_tables(parts)) if parts else AUDIT_PARTIAL_SCHEMA.empty_table()
    final_path = os.path.join(folder, name)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, final_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _stream_with_audit(folder: str):
    """mapInArrow: ``_stream``, and the audit's sums of the task's rows written to ``folder``
    (one file per partition) once its last row is read."""
    def run(batches):
        from pyspark import TaskContext

        sums: list[pa.Table] = []
        for b in stream_summarize(batches, audit=sums):
            yield b.cast(TRX_COUNTS_SCHEMA) if b.schema != TRX_COUNTS_SCHEMA else b
        write_audit_partial(folder, f"part-{TaskContext.get().partitionId():05d}.parquet", sums)
    return run


def audited(kind, from_state, seg_key, n_records):
    """Column: the row is one the audit counts (``audit.row_buckets``' rows): read tonight
    (not held from an earlier night), not a segment piece or ``carry`` row, and, for a
    change, not reassembled from segments and standing for records."""
    from pyspark.sql import functions as F

    return (~from_state & ~kind.isin("segment", "carry")
            & ((kind != "change") | (seg_key.isNull() & (n_records > 0))))


def transaction_counts(events, reassembled=None, rows: int | None = None,
                       audit_dir: str | None = None):
    """events (EVENT_SCHEMA columns) -> one row per (source, trx_id): ``TRX_COLUMNS`` and
    ``event_count`` (``TRX_COUNTS_DDL``).

    Rows without a ``trx_id`` and ``carry`` rows belong to no transaction. ``reassembled``:
    the changes reassembled from segments (source, trx_id, position), counted as changes.
    ``rows``: about how many rows the events hold (sizes the partitions: at most
    ``ROWS_PER_TASK`` each, one per core when each gets ``MIN_ROWS_PER_TASK``, else fewer);
    without it, the session's shuffle partitions.

    ``audit_dir``: the tasks also write the audit's sums of the rows with a ``trx_id``
    there (the module's docstring; ``events`` then needs ``from_state``). The folder must
    exist and hold nothing else: each partition writes one file, so a rerun that makes
    fewer partitions would leave another run's files behind."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    extra = [] if audit_dir is None else [
        *AUDIT_INPUT_COLUMNS, audited(kind, F.col("from_state"), F.col("seg_key"),
                                      F.col("n_records")).alias("_audit")]
    narrow = events.filter(F.col("trx_id").isNotNull() & (kind != "carry")) \
        .select(*NARROW_COLUMNS, F.lit(True).alias("_in_trx"), *extra)
    if reassembled is not None:
        narrow = narrow.unionByName(
            reassembled.filter(F.col("trx_id").isNotNull()).select(
                "source", "trx_id", F.lit("change").alias("kind"), "position",
                F.lit(False).alias("_in_trx")),
            allowMissingColumns=True)
    spark = events.sparkSession
    if rows is None:
        parts = int(spark.conf.get("spark.sql.shuffle.partitions"))
    else:
        cores = int(spark.sparkContext.defaultParallelism)
        parts = max(1, min(cores, math.ceil(rows / MIN_ROWS_PER_TASK)), math.ceil(rows / ROWS_PER_TASK))
    undo_first = F.when(F.col("_in_trx") & (kind == "undo"), F.lit(0)).otherwise(F.lit(1))
    return narrow.repartition(parts, "source", "trx_id") \
        .sortWithinPartitions("source", "trx_id", undo_first) \
        .mapInArrow(_stream if audit_dir is None else _stream_with_audit(str(audit_dir)),
                    TRX_COUNTS_DDL)

__all__ = ["AUDIT_PARTIAL_DDL", "AUDIT_PARTIAL_SCHEMA", "TRX_COLUMNS", "TRX_COUNTS_DDL",
           "audit_buckets", "audit_categories", "audited", "final", "merge", "partial",
           "stream_summarize", "summarize", "transaction_counts", "write_audit_partial"]
