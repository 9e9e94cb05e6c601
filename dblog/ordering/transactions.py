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

The same step in Spark SQL (string minimums and maximums and ``collect_set`` make an object
hash aggregation, a second aggregation counted the changes, a join put them together) was
the ordering's costliest query (docs/BENCHMARK.md, "Ordering at 1M, twelfth session"); its
definition is kept as the tests' oracle (``tests/oracle/transactions.py``).
"""

from __future__ import annotations


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


def final(partials: pa.Table, whole: bool = False) -> pa.Table:
    """``PARTIAL_SCHEMA`` rows, every partial of a transaction among them -> one
    ``TRX_COUNTS_SCHEMA`` row per (source, trx_id) with a row of its own (``in_trx``).
    ``whole``: the partials are one per transaction already (``partial`` of every row of
    each: the pass on files' bucket), so ``merge`` would give them back unchanged."""
    g = partials if whole else merge(partials)
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
    return final(partial(rows), whole=True)


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


def stream_summarize(batches, chunk_rows: int = CHUNK_ROWS, buckets: bool = False):
    """Batches of rows sorted by (source, trx_id), undo rows first in a transaction -> record
    batches of ``TRX_COUNTS_SCHEMA`` (``summarize`` of all the rows), holding one chunk of
    about ``chunk_rows`` rows at a time (the module's docstring, step 2).

    ``buckets``: the rows also have ``AUDIT_COLUMNS``, and the output is ``PASS_SCHEMA``: the
    transactions (``_part`` = ``trx``) and the audit's records and bytes of tonight's rows of
    the transactions per (source, format, archive file, bucket) (``_part`` = ``audit``,
    ``audit_rows``). A row's category is decided in the chunk that reads it (its undo rows
    come before it), its bucket once its transaction ends: the categories of the carried
    transaction are carried with it, aggregated; its undo rows read again are marked
    ``_seen`` and not counted twice."""
    pending: list[pa.RecordBatch] = []
    size = 0
    carry: pa.Table | None = None          # the open transaction's partial row
    carry_undo: pa.Table | None = None     # its undo rows, read again with its next rows
    carry_cats: pa.Table | None = None     # its rows' categories so far (``buckets``)

    def flush(last: bool):
        nonlocal pending, size, carry, carry_undo, carry_cats
        rows = pa.Table.from_batches(pending)
        pending, size = [], 0
        cut = rows.num_rows if last else _carry_start(rows)
        head, tail = rows.slice(0, cut), rows.slice(cut)
        done: list[pa.Table] = []
        cats: list[pa.Table] = []          # categories of the transactions that end here
        earlier = earlier_cats = None      # the carried partial, when its rows go on in tail
        if carry is not None:
            if _key(carry, 0) == _key(rows, 0):     # the carried transaction goes on here
                if cut:
                    head = pa.concat_tables([carry_undo, head])
                    done.append(carry)
                    cats.append(carry_cats)
                else:
                    tail = pa.concat_tables([carry_undo, tail])
                    earlier, earlier_cats = carry, carry_cats
            else:
                done.append(carry)
                cats.append(carry_cats)
        carry = carry_undo = carry_cats = None
        if head.num_rows:
            done.append(partial(head))
            if buckets:
                cats.append(categories(head))
        if tail.num_rows:
            carry = partial(tail)
            if earlier is not None:
                carry = merge(pa.concat_tables([earlier, carry]))
            carry_undo = tail.filter(_undo_rows(tail))
            if buckets:
                carry_cats = categories(tail)
                if earlier_cats is not None:
                    carry_cats = _sum_categories(pa.concat_tables([earlier_cats, carry_cats]))
                carry_undo = carry_undo.set_column(
                    carry_undo.schema.get_field_index("_seen"), "_seen",
                    pa.repeat(pa.scalar(True), carry_undo.num_rows))
        if done:
            out = final(pa.concat_tables(done))
            yield from _emit(out, cats if buckets else None)

    for batch in batches:
        if batch.num_rows:
            if buckets:
                batch = batch.append_column("_seen", pa.repeat(pa.scalar(False), batch.num_rows))
            pending.append(batch)
            size += batch.num_rows
            if size >= chunk_rows:
                yield from flush(last=False)
    if pending:
        yield from flush(last=True)
    elif carry is not None:
        yield from _emit(final(carry), [carry_cats] if buckets else None)


# ---------------------------------------------------------------- the audit's buckets
# (``buckets``: the transactions pass also decides the audit's bucket of tonight's rows of
# the transactions, which then meet their transaction in no join; ``audit.row_buckets`` is
# the same rule on DataFrames, and buckets the rows without a transaction)

AUDIT_COLUMNS = ["archive_file", "n_records", "n_bytes", "rule", "seg_key", "from_state"]
CATEGORY_SCHEMA = pa.schema([("source", pa.string()), ("trx_id", pa.string()),
                             ("format", pa.string()), ("archive_file", pa.string()),
                             ("cat", pa.string()), ("n", pa.int64()), ("nb", pa.int64())])
PASS_SCHEMA = pa.schema([*TRX_COUNTS_SCHEMA, ("archive_file", pa.string()),
                         ("bucket", pa.string()), ("n_records", pa.int64()),
                         ("n_bytes", pa.int64()), ("_part", pa.string())])
PASS_DDL = (TRX_COUNTS_DDL + ", archive_file STRING, bucket STRING, n_records LONG, "
            "n_bytes LONG, _part STRING")
PASS_BUCKETS_DDL = ("source STRING, format STRING, archive_file STRING, bucket STRING, "
                    "n_records LONG, n_bytes LONG")
CHANGE, COMPENSATED, OTHER = "change", "compensated", "other"


def compensated(rows: pa.Table):
    """Mask of the changes of ``rows`` an undo row of their transaction in ``rows`` undoes
    (its ``undo_of`` is their ``position``)."""
    change = pc.fill_null(pc.equal(rows.column("kind"), "change"), False)
    targets = _distinct_targets(rows.filter(_undo_rows(rows)))
    index = pa.table({**{k: rows.column(k) for k in KEYS}, "position": rows.column("position"),
                      "_i": pa.array(np.arange(rows.num_rows, dtype=np.int64))})
    hit = index.filter(change).join(targets, [*KEYS, "position"], [*KEYS, "undo_of"],
                                    join_type="left semi", use_threads=False).column("_i")
    out = np.zeros(rows.num_rows, dtype=bool)
    out[hit.to_numpy()] = True
    return pa.array(out)


def categories(rows: pa.Table, undone=None) -> pa.Table:
    """The rows the audit counts (tonight's rows of a transaction, not a segment piece; a
    change only when it is one record's, not reassembled: ``audit.row_buckets``), not read
    before (``_seen``) -> ``CATEGORY_SCHEMA``: records and bytes per (source, trx_id,
    format, archive_file, category). Categories: ``quarantined``, ``skipped:<rule>``, a
    change ``compensated`` by an undo row of its transaction in ``rows`` or not
    (``change``), ``other``; the bucket follows from the transaction's outcome
    (``_buckets``). ``undone``: ``compensated(rows)``, when the caller has it."""
    kind = rows.column("kind")
    change = pc.fill_null(pc.equal(kind, "change"), False)
    counted = pc.and_(pc.and_(pc.fill_null(rows.column("_in_trx"), False),
                              pc.invert(pc.fill_null(rows.column("from_state"), False))),
                      pc.invert(rows.column("_seen")))
    counted = pc.and_(counted, pc.invert(pc.fill_null(pc.is_in(kind, pa.array(["segment", "carry"])),
                                                      False)))
    one_record = pc.and_(pc.is_null(rows.column("seg_key")),
                         pc.fill_null(pc.greater(rows.column("n_records"), 0), False))
    counted = pc.fill_null(pc.and_(counted, pc.or_(pc.invert(change), one_record)), False)
    undone = compensated(rows) if undone is None else undone
    cat = pc.if_else(pc.equal(kind, "quarantine"), "quarantined",
          pc.if_else(pc.equal(kind, "skip"), pc.binary_join_element_wise("skipped:", rows.column("rule"), ""),
          pc.if_else(change, pc.if_else(undone, COMPENSATED, CHANGE), OTHER)))
    t = pa.table({"source": rows.column("source"), "trx_id": rows.column("trx_id"),
                  "format": rows.column("format"), "archive_file": rows.column("archive_file"),
                  "cat": cat, "n": pc.cast(rows.column("n_records"), pa.int64()),
                  "nb": pc.cast(rows.column("n_bytes"), pa.int64())}).filter(counted)
    return _sum_categories(t)


def _sum_categories(t: pa.Table) -> pa.Table:
    """``CATEGORY_SCHEMA`` rows summed per (source, trx_id, format, archive_file, cat); a sum
    of nulls only is null, as Spark's ``sum``."""
    keys = ["source", "trx_id", "format", "archive_file", "cat"]
    g = t.group_by(keys, use_threads=False).aggregate([("n", "sum"), ("nb", "sum")])
    return pa.table({**{k: g.column(k) for k in keys}, "n": g.column("n_sum"),
                     "nb": g.column("nb_sum")}, schema=CATEGORY_SCHEMA)


def _buckets(cats: pa.Table, trx: pa.Table) -> pa.Table:
    """Categories of the rows of ended transactions (``trx``: their ``TRX_COUNTS_SCHEMA``
    rows) -> (source, format, archive_file, bucket, n_records, n_bytes) summed: the rule of
    ``classify.change_bucket`` and ``classify.other_bucket``."""
    t = cats.join(trx.select([*KEYS, "status", "capture_off"]), KEYS, join_type="inner",
                  use_threads=False)
    cat, status = t.column("cat"), t.column("status")
    is_change = pc.is_in(cat, pa.array([CHANGE, COMPENSATED]))
    change = pc.if_else(pc.equal(status, "open"), "held_open",
             pc.if_else(pc.equal(status, "rolled_back"), "skipped:rolled_back",
             pc.if_else(pc.fill_null(t.column("capture_off"), False), "skipped:capture_off",
             pc.if_else(pc.equal(cat, COMPENSATED), "skipped:compensated", "published"))))
    other = pc.if_else(pc.fill_null(pc.equal(status, "open"), False), "held_open", "control")
    bucket = pc.if_else(is_change, change, pc.if_else(pc.equal(cat, OTHER), other, cat))
    keys = ["source", "format", "archive_file", "bucket"]
    g = pa.table({"source": t.column("source"), "format": t.column("format"),
                  "archive_file": t.column("archive_file"), "bucket": bucket,
                  "n": t.column("n"), "nb": t.column("nb")}) \
        .group_by(keys, use_threads=False).aggregate([("n", "sum"), ("nb", "sum")])
    return pa.table({**{k: g.column(k) for k in keys}, "n_records": g.column("n_sum"),
                     "n_bytes": g.column("nb_sum")})


def _emit(out: pa.Table, cats: list | None):
    """The transactions ``out`` (and with ``cats``, the buckets of their rows) as batches of
    ``TRX_COUNTS_SCHEMA`` (of ``PASS_SCHEMA``)."""
    if cats is None:
        if out.num_rows:
            yield from out.to_batches()
        return
    if out.num_rows:
        n = out.num_rows
        yield pa.RecordBatch.from_arrays(
            [*(out.column(f.name).combine_chunks() for f in TRX_COUNTS_SCHEMA),
             pa.nulls(n, pa.string()), pa.nulls(n, pa.string()), pa.nulls(n, pa.int64()),
             pa.nulls(n, pa.int64()), pa.repeat(pa.scalar("trx"), n)], schema=PASS_SCHEMA)
    present = [c for c in cats if c is not None and c.num_rows]
    if present and out.num_rows:
        b = _buckets(pa.concat_tables(present), out)
        n = b.num_rows
        if n:
            cols = {"source": b.column("source"), "format": b.column("format"),
                    "archive_file": b.column("archive_file"), "bucket": b.column("bucket"),
                    "n_records": b.column("n_records"), "n_bytes": b.column("n_bytes"),
                    "_part": pa.repeat(pa.scalar("audit"), n)}
            yield pa.RecordBatch.from_arrays(
                [cols[f.name].combine_chunks() if f.name in cols and f.name != "_part"
                 else cols[f.name] if f.name == "_part" else pa.nulls(n, f.type)
                 for f in PASS_SCHEMA], schema=PASS_SCHEMA)


def _stream(batches):
    """mapInArrow: ``stream_summarize``, cast to the declared schema."""
    for b in stream_summarize(batches):
        yield b.cast(TRX_COUNTS_SCHEMA) if b.schema != TRX_COUNTS_SCHEMA else b


def _stream_buckets(batches):
    """mapInArrow: ``stream_summarize(..., buckets=True)``."""
    for b in stream_summarize(batches, buckets=True):
        yield b.cast(PASS_SCHEMA) if b.schema != PASS_SCHEMA else b


def row_partitions(spark, rows: int | None) -> int:
    """Shuffle partitions for about ``rows`` narrow rows keyed by transaction: at most
    ``ROWS_PER_TASK`` each, one per core when each gets ``MIN_ROWS_PER_TASK``, else fewer;
    more than the cores, a multiple of them (``sparkio.task_count``); ``rows`` None: the
    session's shuffle partitions (AQE coalesces them). A count given to
    ``repartition`` is kept by AQE, which would coalesce tens of MB of narrow rows into one
    task and leave the other cores idle (docs/BENCHMARK.md, "Eighteenth session")."""
    if rows is None:
        return int(spark.conf.get("spark.sql.shuffle.partitions"))
    from ..sparkio import task_count

    return task_count(rows, int(spark.sparkContext.defaultParallelism), ROWS_PER_TASK,
                      MIN_ROWS_PER_TASK)


def transaction_counts(events, reassembled=None, rows: int | None = None,
                       buckets: bool = False):
    """events (EVENT_SCHEMA columns) -> one row per (source, trx_id): ``TRX_COLUMNS`` and
    ``event_count`` (``TRX_COUNTS_DDL``).

    Rows without a ``trx_id`` and ``carry`` rows belong to no transaction. ``reassembled``:
    the changes reassembled from segments (source, trx_id, position), counted as changes.
    ``rows``: about how many rows the events hold (sizes the partitions: at most
    ``ROWS_PER_TASK`` each, one per core when each gets ``MIN_ROWS_PER_TASK``, else fewer);
    without it, the session's shuffle partitions. ``buckets``: ``PASS_DDL`` rows, the
    transactions (``_part = 'trx'``) and the audit's buckets of their rows read tonight
    (``_part = 'audit'``, ``stream_summarize``)."""
    from pyspark.sql import functions as F

    kind = F.col("kind")
    extra = AUDIT_COLUMNS if buckets else []
    narrow = events.filter(F.col("trx_id").isNotNull() & (kind != "carry")) \
        .select(*NARROW_COLUMNS, *extra, F.lit(True).alias("_in_trx"))
    if reassembled is not None:
        narrow = narrow.unionByName(
            reassembled.filter(F.col("trx_id").isNotNull()).select(
                "source", "trx_id", F.lit("change").alias("kind"), "position",
                F.lit(False).alias("_in_trx")),
            allowMissingColumns=True)
    parts = row_partitions(events.sparkSession, rows)
    undo_first = F.when(F.col("_in_trx") & (kind == "undo"), F.lit(0)).otherwise(F.lit(1))
    ordered = narrow.repartition(parts, "source", "trx_id") \
        .sortWithinPartitions("source", "trx_id", undo_first)
    if buckets:
        return ordered.mapInArrow(_stream_buckets, PASS_DDL)
    return ordered.mapInArrow(_stream, TRX_COUNTS_DDL)

__all__ = ["PASS_BUCKETS_DDL", "PASS_DDL", "TRX_COLUMNS", "TRX_COUNTS_DDL", "categories",
           "compensated", "final", "merge", "partial", "row_partitions",
           "stream_summarize", "summarize", "transaction_counts"]
