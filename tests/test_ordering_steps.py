"""Each ordering step on its own (dblog/ordering/), on tiny hand-built DataFrames; the
expected frames are written out here, never computed by the step under test."""

from __future__ import annotations

import datetime as dt
import random

import pytest
from chispa import assert_df_equality

from decoders.events import EVENT_COLUMNS

pytestmark = pytest.mark.spark

TS = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.timezone.utc)


def events(spark, rows: list[dict]):
    """Event rows (EVENT_SCHEMA + from_state) from dicts naming only the fields they have."""
    from pyspark.sql.types import BooleanType, StructField, StructType

    from dblog.decode import spark_event_schema

    schema = StructType(spark_event_schema().fields + [StructField("from_state", BooleanType())])
    base = {"source": "s1", "format": "soliddb", "archive_file": "s1/2026-11-01/a.csv",
            "record_offset": 0, "record_index": 0, "n_records": 1, "from_state": False}
    full = []
    for i, r in enumerate(rows):
        d = {**base, "record_offset": i * 10, "record_index": i, **r}
        full.append(tuple(d.get(c) for c in EVENT_COLUMNS + ["from_state"]))
    return spark.createDataFrame(full, schema)


def same(got, want, cols=None):
    cols = cols or want.columns
    assert_df_equality(got.select(*cols), want.select(*cols), ignore_row_order=True,
                       ignore_nullable=True)


TRX_DDL = ("source STRING, trx_id STRING, status STRING, capture_off BOOLEAN, "
           "undone ARRAY<STRING>")


# ----------------------------------------------------------------- transactions

def test_transactions_one_row_per_transaction_with_its_outcome(spark):
    from dblog.ordering.transactions import transaction_counts

    ev = events(spark, [
        {"kind": "begin", "trx_id": "1", "position": "0010", "user": "BOB"},
        {"kind": "change", "trx_id": "1", "position": "0011", "op": "c"},
        {"kind": "change", "trx_id": "1", "position": "0012", "op": "c"},
        {"kind": "undo", "trx_id": "1", "position": "0013", "undo_of": "0012"},
        {"kind": "commit", "trx_id": "1", "position": "0014", "trx_end": "commit",
         "commit_position": "0014", "commit_ts": TS, "user": "ANN"},
        {"kind": "begin", "trx_id": "2", "position": "0020", "flag": "capture_off"},
        {"kind": "change", "trx_id": "2", "position": "0021", "op": "d",
         "trx_end": "commit", "commit_position": "0022", "commit_ts": TS},
        {"kind": "change", "trx_id": "3", "position": "0030", "op": "u"},
        {"kind": "abort", "trx_id": "3", "position": "0031", "trx_end": "abort"},
        {"kind": "change", "trx_id": "4", "position": "0040", "op": "c", "user": "EVE"},
        {"kind": "change", "trx_id": "1", "source": "s2", "position": "0050", "op": "c"},
        {"kind": "control", "position": "0060", "rule": "checkpoint"},
        {"kind": "carry", "trx_id": "9", "record_index": -1, "n_records": 0},
    ])
    want = spark.createDataFrame([
        ("s1", "1", "committed", "0014", TS, "ANN", "0010", False, ["0012"]),
        ("s1", "2", "committed", "0022", TS, None, "0020", True, None),
        ("s1", "3", "rolled_back", None, None, None, "0030", False, None),
        ("s1", "4", "open", None, None, "EVE", "0040", False, None),
        ("s2", "1", "open", None, None, None, "0050", False, None),
    ], "source STRING, trx_id STRING, status STRING, commit_position STRING, commit_ts TIMESTAMP, "
       "user STRING, begin_position STRING, capture_off BOOLEAN, undone ARRAY<STRING>")
    same(transaction_counts(ev), want)
    same(transaction_counts(ev, rows=13), want)     # sized partitions: one


# ----------------------------------------------------------------- classify

def test_classify_puts_each_change_in_its_bucket(spark):
    from dblog.ordering.classify import classify

    trx = spark.createDataFrame([
        ("s1", "1", "committed", False, ["0012"]),
        ("s1", "2", "committed", True, None),
        ("s1", "3", "rolled_back", False, None),
        ("s1", "4", "open", False, None),
    ], TRX_DDL)
    ch = events(spark, [
        {"kind": "change", "trx_id": "1", "position": "0011"},
        {"kind": "change", "trx_id": "1", "position": "0012"},
        {"kind": "change", "trx_id": "2", "position": "0021"},
        {"kind": "change", "trx_id": "3", "position": "0030"},
        {"kind": "change", "trx_id": "4", "position": "0040"},
        {"kind": "change", "trx_id": None, "position": "0050"},
    ])
    want = spark.createDataFrame([
        ("1", "0011", "published"), ("1", "0012", "skipped:compensated"),
        ("2", "0021", "skipped:capture_off"), ("3", "0030", "skipped:rolled_back"),
        ("4", "0040", "held_open"), (None, "0050", "quarantined"),
    ], "trx_id STRING, position STRING, bucket STRING")
    same(classify(ch, trx), want)


def test_classify_takes_the_transactions_columns_over_the_changes(spark):
    from dblog.ordering.classify import classify

    trx = spark.createDataFrame([("s1", "1", "committed", False, None, 7, "00FF")],
                                TRX_DDL + ", commit_seq LONG, commit_position STRING")
    ch = events(spark, [{"kind": "change", "trx_id": "1", "position": "0011", "commit_position": "X"}])
    want = spark.createDataFrame([("1", 7, "00FF", "published")],
                                 "trx_id STRING, commit_seq LONG, commit_position STRING, bucket STRING")
    same(classify(ch, trx, extra=["commit_seq", "commit_position"]), want)


def bucket_night(spark, more_trx=(), more_changes=()):
    """Transactions of every outcome (with ``commit_seq``) and their changes, one of them
    undone and one without a transaction, plus ``more_trx`` / ``more_changes``."""
    trx = spark.createDataFrame([
        ("s1", "1", "committed", False, ["0012"], 1), ("s1", "2", "committed", True, None, None),
        ("s1", "3", "rolled_back", False, None, None), ("s1", "4", "open", False, None, None),
        *more_trx,
    ], TRX_DDL + ", commit_seq LONG")
    ch = events(spark, [
        {"kind": "change", "trx_id": "1", "position": "0011"},
        {"kind": "change", "trx_id": "1", "position": "0012"},
        {"kind": "change", "trx_id": "2", "position": "0021"},
        {"kind": "change", "trx_id": "3", "position": "0030"},
        {"kind": "change", "trx_id": "4", "position": "0040"},
        {"kind": "change", "trx_id": None, "position": "0050"},
        *more_changes,
    ])
    return trx, ch


def test_published_changes_are_classify_filtered_on_published(spark):
    from pyspark.sql import functions as F

    from dblog.ordering.classify import classify, published_changes

    trx, ch = bucket_night(
        spark, [("s1", "5", "committed", False, None, 2), ("s2", "1", "committed", False, None, 1)],
        [{"kind": "change", "trx_id": "5", "position": "0051"},
         {"kind": "change", "trx_id": "5", "position": "0052"},
         {"kind": "change", "trx_id": "1", "source": "s2", "position": "0011"}])
    got = published_changes(ch, trx.filter(F.col("commit_seq").isNotNull()), extra=["commit_seq"])
    want = classify(ch, trx, extra=["commit_seq"]).filter(F.col("bucket") == "published")
    assert got.count() == 4
    same(got, want, ["source", "trx_id", "position", "commit_seq", "bucket"])


def test_event_counts_are_the_published_changes_of_each_transaction(spark):
    """``transaction_counts``' ``event_count`` equals ``published_counts(classify(...))`` (the
    changes joined to their transactions): compensated changes (a position undone twice, a
    change twice at one position, an undo of no change), capture_off, rolled back, open, a
    change without a position or a transaction."""
    from pyspark.sql import functions as F

    from dblog.ordering import sequence
    from dblog.ordering.classify import classify
    from dblog.ordering.transactions import transaction_counts

    ev = events(spark, [
        {"kind": "begin", "trx_id": "1", "position": "0010"},
        {"kind": "change", "trx_id": "1", "position": "0011"},
        {"kind": "change", "trx_id": "1", "position": "0012"},
        {"kind": "change", "trx_id": "1", "position": "0012", "archive_file": "s1/b.csv"},
        {"kind": "change", "trx_id": "1", "position": None},
        {"kind": "undo", "trx_id": "1", "position": "0013", "undo_of": "0012"},
        {"kind": "undo", "trx_id": "1", "position": "0014", "undo_of": "0012"},
        {"kind": "undo", "trx_id": "1", "position": "0015", "undo_of": "0099"},
        {"kind": "undo", "trx_id": "1", "position": "0016"},
        {"kind": "commit", "trx_id": "1", "position": "0017", "trx_end": "commit", "commit_position": "0017"},
        {"kind": "begin", "trx_id": "2", "position": "0020", "flag": "capture_off"},
        {"kind": "change", "trx_id": "2", "position": "0021", "trx_end": "commit", "commit_position": "0022"},
        {"kind": "change", "trx_id": "3", "position": "0030"},
        {"kind": "abort", "trx_id": "3", "position": "0031", "trx_end": "abort"},
        {"kind": "change", "trx_id": "4", "position": "0040"},
        {"kind": "change", "trx_id": "5", "position": "0050", "trx_end": "commit", "commit_position": "0051"},
        {"kind": "change", "trx_id": "5", "position": "0052", "trx_end": "commit", "commit_position": "0051"},
        {"kind": "undo", "trx_id": "6", "position": "0060", "undo_of": "0011"},
        {"kind": "commit", "trx_id": "6", "position": "0061", "trx_end": "commit", "commit_position": "0061"},
        {"kind": "change", "trx_id": None, "position": "0070"},
        {"kind": "change", "trx_id": "5", "source": "s2", "position": "0050", "trx_end": "commit",
         "commit_position": "0051"},
        {"kind": "undo", "trx_id": "5", "source": "s2", "position": "0052", "undo_of": "0050"},
    ])
    trx = transaction_counts(ev)
    want = spark.createDataFrame([
        ("s1", "1", 2), ("s1", "2", 0), ("s1", "3", 0), ("s1", "4", 0), ("s1", "5", 2),
        ("s1", "6", 0), ("s2", "5", 0)], "source STRING, trx_id STRING, event_count LONG")
    same(trx, want)
    changes = ev.filter(F.col("kind") == "change").select("source", "trx_id", "position")
    old = trx.drop("event_count").join(sequence.published_counts(classify(changes, trx)),
                                       ["source", "trx_id"], "left") \
        .select("source", "trx_id", F.coalesce("event_count", F.lit(0)).cast("long").alias("event_count"))
    same(old, want)

    # reassembled changes count as changes of their transaction, and only as changes
    reassembled = spark.createDataFrame(
        [("s1", "5", "0053"), ("s1", "1", "0012"), ("s1", "9", "0090")],
        "source STRING, trx_id STRING, position STRING")
    got = transaction_counts(ev, reassembled).select("source", "trx_id", "event_count")
    same(got, spark.createDataFrame([
        ("s1", "1", 2), ("s1", "2", 0), ("s1", "3", 0), ("s1", "4", 0), ("s1", "5", 3),
        ("s1", "6", 0), ("s2", "5", 0)], "source STRING, trx_id STRING, event_count LONG"))


def test_transaction_counts_agree_with_their_spark_sql_definition(spark):
    """Seeded random nights (every kind, repeated and missing positions, users, flags, undo
    targets that exist or not, reassembled changes, several sources) give the rows of the
    Spark SQL definition the step replaced (``tests/oracle/transactions.py``), in one
    partition or in many."""
    import random

    from tests.oracle.transactions import transaction_counts as oracle

    from dblog.ordering.transactions import transaction_counts

    rnd = random.Random(7)
    kinds = ["begin", "change", "change", "change", "undo", "commit", "abort", "control",
             "carry", "segment"]
    rows, reassembled = [], []
    for i in range(600):
        kind = rnd.choice(kinds)
        pos = rnd.choice([None, f"{rnd.randrange(90):04d}"])
        rows.append({
            "source": rnd.choice(["s1", "s2", "s3"]), "kind": kind,
            "trx_id": rnd.choice([None, *[str(t) for t in range(40)]]),
            "position": pos, "user": rnd.choice([None, "ANN", "BOB", "ÉVE"]),
            "flag": rnd.choice([None, "capture_off"]) if kind == "begin" else None,
            "trx_end": rnd.choice([None, None, "commit", "abort"]),
            "commit_position": rnd.choice([None, f"{rnd.randrange(90):04d}"]),
            "commit_ts": rnd.choice([None, TS, TS.replace(hour=13)]),
            "undo_of": rnd.choice([None, f"{rnd.randrange(90):04d}"]) if kind == "undo" else None,
        })
        if rnd.random() < 0.05:
            reassembled.append((rnd.choice(["s1", "s2"]), str(rnd.randrange(40)),
                                f"{rnd.randrange(90):04d}"))
    ev = events(spark, rows)
    re_df = spark.createDataFrame(reassembled, "source STRING, trx_id STRING, position STRING")
    want = oracle(ev, re_df)
    assert want.count() > 50
    same(transaction_counts(ev, re_df), want, want.columns)
    same(transaction_counts(ev, re_df, rows=10_000_000), want, want.columns)   # 10 partitions


def _random_audit_night(seed: int, n: int = 700):
    """Rows of every kind over several sources, archives and transactions, with repeated and
    missing positions, undo targets that exist or not, skip rules, rows held from earlier
    nights, changes of no record (``n_records`` 0) and segment-group changes."""
    rnd = random.Random(seed)
    kinds = ["begin", "change", "change", "change", "undo", "commit", "abort", "control",
             "carry", "segment", "skip", "quarantine"]
    rows = []
    for _ in range(n):
        kind = rnd.choice(kinds)
        rows.append({
            "source": rnd.choice(["s1", "s2", "s3"]), "kind": kind,
            "format": rnd.choice(["soliddb", "rdb"]),
            "archive_file": rnd.choice(["a.csv", "b.csv", "c.csv"]),
            "trx_id": rnd.choice([None, *[str(t) for t in range(30)]]),
            "position": rnd.choice([None, f"{rnd.randrange(12):04d}"]),
            "flag": rnd.choice([None, None, "capture_off"]) if kind == "begin" else None,
            "trx_end": rnd.choice([None, None, None, None, "commit", "commit", "abort"]),
            "commit_position": f"{rnd.randrange(90):04d}",
            "undo_of": rnd.choice([None, f"{rnd.randrange(12):04d}"]) if kind == "undo" else None,
            "rule": rnd.choice([None, "nop", "ddl"]) if kind == "skip" else None,
            "n_records": rnd.choice([0, 1, 1, 1, 2]), "n_bytes": rnd.randrange(1000),
            "seg_key": rnd.choice([None, None, None, "k1"]) if kind == "change" else None,
            "from_state": rnd.random() < 0.1,
        })
    # and one compensated change of a committed transaction for certain (placed at random)
    base = {"source": "s2", "format": "rdb", "archive_file": "b.csv", "trx_id": "c", "n_records": 1,
            "n_bytes": 10, "from_state": False, "commit_position": "0100"}
    for extra in ({"kind": "change", "position": "0003"}, {"kind": "undo", "undo_of": "0003"},
                  {"kind": "commit", "trx_end": "commit"}):
        rows.insert(rnd.randrange(len(rows) + 1), {**base, **extra})
    return rows


def test_the_transactions_pass_buckets_the_rows_as_the_join_does(spark):
    """The audit from the buckets the transactions pass decides (``transaction_counts(...,
    buckets=True)``, ``audit.other_buckets``) equals the audit from ``row_buckets`` (every
    row joined with its transaction), on seeded random nights, in one partition or many,
    with reassembled changes (counted as changes, never bucketed)."""
    from pyspark.sql import functions as F

    from dblog.ordering.audit import audit, other_buckets, row_buckets
    from dblog.ordering.transactions import TRX_COUNTS_DDL, transaction_counts

    listed = spark.createDataFrame([(s, f, a) for s in ("s1", "s2", "s3") for f in ("soliddb", "rdb")
                                    for a in ("a.csv", "b.csv", "c.csv", "d.csv")],
                                   "source STRING, format STRING, archive_file STRING")
    cols = [c for c, _ in (x.split(" ") for x in TRX_COUNTS_DDL.split(", "))]
    for seed in (3, 11):
        ev = events(spark, _random_audit_night(seed))
        re_df = spark.createDataFrame([("s1", "4", "0007"), ("s2", "5", "0011")],
                                      "source STRING, trx_id STRING, position STRING")
        for rows in (None, 10_000_000):
            out = transaction_counts(ev, re_df, rows, buckets=True).cache()
            trx = out.filter(F.col("_part") == "trx").select(*cols)
            same(trx, transaction_counts(ev, re_df, rows), cols)
            pass_buckets = out.filter(F.col("_part") == "audit")
            assert pass_buckets.count() > 5
            want = audit(row_buckets(ev, trx), listed)
            assert want.filter(F.col("records_read") > 0).count() >= 12
            seen = want.select(*[F.sum(c).alias(c) for c in (
                "published", "control", "held_open", "quarantined")],
                F.concat_ws(" ", F.collect_list("skipped_by_rule")).alias("rules")).first()
            assert min(seen["published"], seen["control"], seen["held_open"],
                       seen["quarantined"]) > 0, seen
            for rule in ("compensated", "rolled_back", "capture_off", "nop"):
                assert f'"{rule}"' in seen["rules"], (rule, seen["rules"])
            same(audit(other_buckets(ev, pass_buckets, trx), listed), want)
            out.unpersist()


def test_the_transactions_pass_buckets_the_same_in_chunks_of_any_size():
    """``stream_summarize(..., buckets=True)`` on the same sorted rows gives the same
    transactions and the same per-archive buckets whatever the chunk size: a transaction's
    categories carried across chunks, its undo rows read again and not counted twice."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from dblog.ordering.transactions import (AUDIT_COLUMNS, NARROW_COLUMNS, TRX_COUNTS_SCHEMA,
                                             stream_summarize)

    rows = [r for r in _random_audit_night(5, 900) if r["trx_id"] is not None and r["kind"] != "carry"]
    rows.sort(key=lambda r: (r["source"], r["trx_id"], 0 if r["kind"] == "undo" else 1))
    types = {"n_records": pa.int32(), "n_bytes": pa.int64(), "from_state": pa.bool_(),
             "commit_ts": pa.timestamp("us", tz="UTC")}
    table = pa.table({c: pa.array([r.get(c) for r in rows], types.get(c, pa.string()))
                      for c in [*NARROW_COLUMNS, *AUDIT_COLUMNS]})
    table = table.append_column("_in_trx", pa.repeat(pa.scalar(True), table.num_rows))

    def run(chunk):
        out = pa.Table.from_batches(list(stream_summarize(table.to_batches(max_chunksize=7),
                                                          chunk, buckets=True)))
        trx = out.filter(pc.equal(out["_part"], "trx")).select(TRX_COUNTS_SCHEMA.names)
        b = out.filter(pc.equal(out["_part"], "audit")) \
            .group_by(["source", "format", "archive_file", "bucket"]) \
            .aggregate([("n_records", "sum"), ("n_bytes", "sum")])
        return (sorted(map(str, trx.to_pylist())), sorted(map(str, b.to_pylist())))

    whole = run(10 ** 9)
    assert len(whole[0]) > 60 and len(whole[1]) > 20
    for chunk in (1, 2, 5, 13, 64):
        assert run(chunk) == whole, chunk


def test_joins_with_the_transactions_hash_them_and_leave_the_rows_unsorted(spark):
    """``with_transaction`` and ``published_changes`` build a hash table of the (narrow)
    transactions per partition: the night's rows are shuffled but not sorted for the join
    (a sort-merge join sorted them, then the ``event_seq`` window sorted the wide changes
    again: now one sort)."""
    from dblog.ordering.classify import published_changes, with_transaction
    from dblog.ordering.sequence import event_seq

    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        trx = spark.createDataFrame([("s1", "1", "committed", False, None, 1)], TRX_DDL + ", commit_seq LONG")
        ch = events(spark, [{"kind": "change", "trx_id": "1", "position": "0011", "after": "x"}])
        joined = with_transaction(ch, trx, ["status"])
        out = event_seq(published_changes(ch, trx, extra=["commit_seq"]))
        plans = [df._jdf.queryExecution().executedPlan().toString() for df in (joined, out)]
        assert joined.count() == 1 and out.count() == 1
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
    for plan in plans:
        assert "ShuffledHashJoin" in plan and "SortMergeJoin" not in plan, plan
    assert plans[0].count("Sort [") == 0, plans[0]
    assert plans[1].count("Sort [") == 1, plans[1]      # the window's


def test_event_seq_of_published_changes_shuffles_the_wide_rows_once(spark):
    """The window by transaction reuses the join's partitioning: one exchange of the change
    rows (``with_transaction``'s union after the join made it two: 0.9 GB each at 5 x 1M)."""
    from dblog.ordering.classify import published_changes
    from dblog.ordering.sequence import event_seq

    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    try:
        trx = spark.createDataFrame([("s1", "1", "committed", False, None, 1)], TRX_DDL + ", commit_seq LONG")
        ch = events(spark, [{"kind": "change", "trx_id": "1", "position": "0011", "after": "x"}])
        out = event_seq(published_changes(ch, trx, extra=["commit_seq"]))
        plan = out._jdf.queryExecution().executedPlan().toString()
        assert out.count() == 1
    finally:
        spark.conf.unset("spark.sql.autoBroadcastJoinThreshold")
    # AQE's initial plan: the change rows' side and the transactions' side, one exchange each
    assert plan.count("Exchange hashpartitioning") == 2, plan


def test_segment_pieces_follow_their_group(spark):
    from dblog.ordering.classify import segment_buckets

    trx = spark.createDataFrame([("s1", "1", "committed", False, None), ("s1", "2", "open", False, None),
                                 ("s1", "3", "committed", False, None)], TRX_DDL)
    groups = spark.createDataFrame([
        ("s1", "k1", True, "change", "1", "0010", None, None),
        ("s1", "k2", False, None, "2", "0020", None, None),
        ("s1", "k3", False, None, "3", "0030", None, None),
        ("s1", "k4", True, "quarantine", "3", "0040", "corrupt", "bad area"),
    ], "source STRING, seg_key STRING, complete BOOLEAN, kind STRING, trx_id STRING, "
       "position STRING, error_class STRING, message STRING")
    pieces = events(spark, [
        {"kind": "segment", "trx_id": "1", "seg_key": "k1", "seg_num": 1, "position": "0010"},
        {"kind": "segment", "trx_id": "1", "seg_key": "k1", "seg_num": 2, "position": "0010"},
        {"kind": "segment", "trx_id": "2", "seg_key": "k2", "seg_num": 1, "position": "0020"},
        {"kind": "segment", "trx_id": "3", "seg_key": "k3", "seg_num": 2, "position": "0030"},
        {"kind": "segment", "trx_id": "3", "seg_key": "k4", "seg_num": 1, "position": "0040"},
    ])
    want = spark.createDataFrame([
        ("k1", 1, "published", "bad_segments", None), ("k1", 2, "published", "bad_segments", None),
        ("k2", 1, "held_open", "incomplete_segments", None),
        ("k3", 2, "quarantined", "incomplete_segments", None),
        ("k4", 1, "quarantined", "bad_segments", "corrupt"),
    ], "seg_key STRING, seg_num INT, bucket STRING, q_class STRING, r_class STRING")
    same(segment_buckets(pieces, groups, trx), want)


# ----------------------------------------------------------------- sequence

def test_partition_offsets_continue_each_source_across_partitions():
    from dblog.ordering.sequence import last_sequences, partition_offsets

    # partition 0: s1 x3 (indexes 0-2); partition 1: s1 x2 (0-1), s2 x4 (2-5); partition 2: s2 x1
    counts = [(1, "s2", 4, 2), (0, "s1", 3, 0), (2, "s2", 1, 0), (1, "s1", 2, 0)]
    assert sorted(partition_offsets(counts, {"s1": 100, "s2": 0})) == [
        (0, "s1", 100), (1, "s1", 103), (1, "s2", -2), (2, "s2", 4)]
    assert last_sequences(counts, {"s1": 100}) == {"s1": (105, 5), "s2": (5, 5)}


@pytest.fixture()
def many_partitions(spark):
    """Keep AQE from coalescing tiny shuffles into one partition (the multi-partition path)."""
    key = "spark.sql.adaptive.coalescePartitions.enabled"
    old = spark.conf.get(key)
    spark.conf.set(key, "false")
    yield
    spark.conf.set(key, old)


def test_commit_seq_ranks_per_source_in_commit_order_across_partitions(spark, many_partitions):
    from pyspark.sql import functions as F

    from dblog.ordering import sequence

    rows = []
    for i in range(40):                       # s1: positions 1000.. ; s2 interleaved, reversed ids
        rows.append(("s1", f"t{i:02d}", f"{1000 + 7 * i:08X}"))
        rows.append(("s2", f"u{99 - i:02d}", f"{1003 + 7 * i:08X}"))
    rows.append(("s2", "a00", f"{1003:08X}"))  # same commit_position as u99: trx_id decides
    trx = spark.createDataFrame(rows, "source STRING, trx_id STRING, commit_position STRING")
    ranked = sequence.rank_in_partitions(trx).cache()
    counts = [tuple(r) for r in sequence.partition_counts(ranked).collect()]
    assert len({c[0] for c in counts}) > 1, "the test needs several range partitions"
    offsets = spark.createDataFrame(sequence.partition_offsets(counts, {"s1": 10, "s2": 0}),
                                    sequence.OFFSETS_DDL)
    got = sequence.assign_commit_seq(ranked, offsets).select("source", "trx_id", "commit_seq")
    want_rows = [("s1", f"t{i:02d}", 11 + i) for i in range(40)]
    want_rows += [("s2", "a00", 1), ("s2", "u99", 2)] + [("s2", f"u{99 - i:02d}", 2 + i) for i in range(1, 40)]
    want = spark.createDataFrame(want_rows, "source STRING, trx_id STRING, commit_seq LONG")
    same(got, want)
    assert sequence.last_sequences(counts, {"s1": 10}) == {"s1": (50, 40), "s2": (41, 41)}
    assert ranked.filter(F.col("seq_local") < 0).count() == 0
    ranked.unpersist()


def test_ranking_in_given_range_partitions_gives_the_same_commit_seq(spark, many_partitions):
    """``rank_partitions`` sizes the ranking from the transactions' count; one partition
    ranks without the range partitioner's sample job, and 1, 2 or 5 partitions give the same
    ``commit_seq``."""
    from dblog.ordering import sequence

    assert [sequence.rank_partitions(n) for n in (0, 1, sequence.RANK_ROWS_PER_TASK,
                                                  sequence.RANK_ROWS_PER_TASK + 1)] == [1, 1, 1, 2]
    rng = random.Random(7)
    rows = [(f"s{rng.randrange(3)}", f"t{i:04d}", f"{rng.randrange(500):08X}") for i in range(300)]
    trx = spark.createDataFrame(rows, "source STRING, trx_id STRING, commit_position STRING")
    sc = spark.sparkContext
    results, jobs = {}, {}
    for parts in (1, 2, 5):
        group = f"rank-{parts}-{id(trx)}"
        sc.setJobGroup(group, group)
        try:
            ranked = sequence.rank_in_partitions(trx, parts).cache()
            counts = [tuple(r) for r in sequence.partition_counts(ranked).collect()]
            offsets = sequence.partition_offsets(counts, {"s0": 5})
            results[parts] = sorted(tuple(r) for r in sequence.with_commit_seq(ranked, offsets)
                                    .select("source", "trx_id", "commit_seq").collect())
            ranked.unpersist()
        finally:
            sc.setJobGroup(None, None)
        jobs[parts] = len(sc.statusTracker().getJobIdsForGroup(group))
        assert len({c[0] for c in counts}) == parts
    assert results[1] == results[2] == results[5]
    want = {}
    for source, trx_id, pos in sorted(rows, key=lambda r: (r[0], r[2], r[1])):
        want[(source, trx_id)] = len([k for k in want if k[0] == source]) + (6 if source == "s0" else 1)
    assert {(s, t): n for s, t, n in results[1]} == want
    assert jobs[1] < jobs[2], jobs          # no sample job for one partition


def test_row_partitions_follow_the_rows_and_the_cores(spark):
    """The transactions pass and the ``seq`` rows are partitioned by ``row_partitions``: one
    partition per ``ROWS_PER_TASK`` rows, one per core once each gets ``MIN_ROWS_PER_TASK``,
    never fewer than one, a multiple of the cores past one round; without a count, the
    session's shuffle partitions."""
    from dblog.ordering.transactions import MIN_ROWS_PER_TASK, ROWS_PER_TASK, row_partitions

    cores = spark.sparkContext.defaultParallelism
    assert cores >= 2, "the test needs a session of two cores or more"
    assert row_partitions(spark, 0) == 1
    assert row_partitions(spark, MIN_ROWS_PER_TASK) == 1
    assert row_partitions(spark, MIN_ROWS_PER_TASK + 1) == 2
    assert row_partitions(spark, 1_144_953) == min(cores, 12)       # the 1M rdb night
    assert row_partitions(spark, 11_449_530) == max(min(cores, 115), 12)
    assert row_partitions(spark, 40 * ROWS_PER_TASK) == -(-max(cores, 40) // cores) * cores
    # past one round, a multiple of the cores: the 1M Informix night's 2,476,380 rows are 3
    # partitions of 1M at most, 4 on 2 cores (3 ran in two rounds, the second on one core)
    assert row_partitions(spark, 2_476_380) == -(-max(cores, 3) // cores) * cores
    assert row_partitions(spark, None) == int(spark.conf.get("spark.sql.shuffle.partitions"))


def test_event_seq_orders_changes_inside_their_transaction(spark):
    from dblog.ordering.sequence import event_seq

    ch = events(spark, [
        {"trx_id": "1", "position": "0003", "trx_order": "0001"},
        {"trx_id": "1", "position": "0001", "trx_order": "0002"},
        {"trx_id": "1", "position": "0002"},                      # trx_order defaults to position
        {"trx_id": "2", "position": "0009", "archive_file": "b"},
        {"trx_id": "2", "position": "0009", "archive_file": "a", "record_index": 5},
        {"trx_id": "2", "position": "0009", "archive_file": "a", "record_index": 3},
    ])
    want = spark.createDataFrame([
        ("1", "0003", "s1/2026-11-01/a.csv", 0, 1), ("1", "0001", "s1/2026-11-01/a.csv", 1, 2),
        ("1", "0002", "s1/2026-11-01/a.csv", 2, 3), ("2", "0009", "b", 3, 3),
        ("2", "0009", "a", 5, 2), ("2", "0009", "a", 3, 1),
    ], "trx_id STRING, position STRING, archive_file STRING, record_index LONG, event_seq INT")
    same(event_seq(ch), want)


# ----------------------------------------------------------------- audit

def test_row_buckets_and_audit_add_up_per_archive(spark):
    from dblog.ordering.audit import audit, row_buckets

    trx = spark.createDataFrame([("s1", "1", "committed", False, ["0012"]), ("s1", "2", "open", False, None)],
                                TRX_DDL)
    ev = events(spark, [
        {"kind": "begin", "trx_id": "1", "position": "0010"},
        {"kind": "change", "trx_id": "1", "position": "0011", "n_records": 2},
        {"kind": "change", "trx_id": "1", "position": "0012"},
        {"kind": "undo", "trx_id": "1", "position": "0013"},
        {"kind": "commit", "trx_id": "1", "position": "0014"},
        {"kind": "begin", "trx_id": "2", "position": "0020"},
        {"kind": "change", "trx_id": "2", "position": "0021"},
        {"kind": "skip", "rule": "soliddb_nop", "position": "0030", "n_records": 3},
        {"kind": "quarantine", "error_class": "corrupt"},
        {"kind": "change", "trx_id": "2", "position": "0001", "from_state": True},
        {"kind": "carry", "n_records": 0},
    ])
    listed = spark.createDataFrame([("s1", "soliddb", "s1/2026-11-01/a.csv"),
                                    ("s1", "soliddb", "s1/2026-11-01/empty.csv")],
                                   "source STRING, format STRING, archive_file STRING")
    got = audit(row_buckets(ev, trx), listed)
    want = spark.createDataFrame([
        ("s1", "soliddb", "s1/2026-11-01/a.csv", 12, 2, 3, 4, 2, 1, '{"compensated":1,"soliddb_nop":3}'),
        ("s1", "soliddb", "s1/2026-11-01/empty.csv", 0, 0, 0, 0, 0, 0, "{}"),
    ], "source STRING, format STRING, archive_file STRING, records_read LONG, published LONG, "
       "control LONG, skipped LONG, held_open LONG, quarantined LONG, skipped_by_rule STRING")
    same(got, want)


# ----------------------------------------------------------------- quarantine

def test_quarantine_rows_from_decoder_segments_and_orphans(spark):
    from dblog.ordering.quarantine import (decoder_quarantine, orphan_quarantine, quarantine,
                                           segment_quarantine)

    ev = events(spark, [
        {"kind": "quarantine", "error_class": "corrupt", "message": "odd hex", "raw_hex": "ABCD"},
        {"kind": "quarantine", "error_class": "old", "from_state": True},
        {"kind": "change", "trx_id": None, "position": "0002"},
        {"kind": "change", "trx_id": "1", "position": "0003"},
    ])
    pieces = events(spark, [{"kind": "segment", "seg_key": "k", "seg_num": 2, "seg_total": 3,
                             "seg_data": b"\x01\xff"}]) \
        .selectExpr("*", "'quarantined' AS bucket", "'incomplete_segments' AS q_class",
                    "CAST(NULL AS STRING) AS r_class", "CAST(NULL AS STRING) AS r_message")
    got = quarantine(decoder_quarantine(ev), segment_quarantine(pieces),
                     orphan_quarantine(ev.filter("kind = 'change'")))
    want = spark.createDataFrame([
        (0, "corrupt", "odd hex", "abcd"),
        (20, "no_transaction", "change record without a transaction id", None),
        (0, "incomplete_segments",
         "segment 2 of 3 of record k: the group never completed (committed unit of recovery)", "01ff"),
    ], "record_offset LONG, error_class STRING, message STRING, raw_hex STRING")
    same(got, want)


def test_quarantined_pieces_keep_only_the_bytes_they_show(spark):
    """``quarantine_pieces`` cuts ``seg_data`` to the ``RAW_BYTES`` that ``raw_hex`` shows
    before the joins that decide the pieces' buckets: the quarantine row is the one the
    whole piece gives."""
    from pyspark.sql import functions as F

    from dblog.ordering.quarantine import RAW_BYTES, quarantine_pieces, segment_quarantine

    data = bytes(range(256)) * 4
    ev = events(spark, [{"kind": "segment", "seg_key": "k", "seg_num": 1, "seg_total": 2,
                         "trx_id": "7", "seg_data": data, "after": "x" * 5000},
                        {"kind": "change", "trx_id": "7", "position": "1"}])
    pieces = quarantine_pieces(ev)
    assert "after" not in pieces.columns and "before" not in pieces.columns
    assert [len(r["seg_data"]) for r in pieces.collect()] == [RAW_BYTES]
    tag = ["'quarantined' AS bucket", "'incomplete_segments' AS q_class",
           "CAST(NULL AS STRING) AS r_class", "CAST(NULL AS STRING) AS r_message"]
    whole = ev.filter(F.col("kind") == "segment")
    got = segment_quarantine(pieces.selectExpr("*", *tag)).collect()
    want = segment_quarantine(whole.selectExpr("*", *tag)).collect()
    assert got == want and got[0]["raw_hex"] == data[:RAW_BYTES].hex().upper()


# ----------------------------------------------------------------- repeated positions

@pytest.mark.parametrize("path", ["broadcast", "shuffle"])
def test_repeated_positions_quarantined_after_their_first_reading(spark, monkeypatch, path):
    from dblog import accounting

    if path == "shuffle":       # more repeated positions than are broadcast
        monkeypatch.setattr(accounting, "DUPLICATE_BROADCAST_MAX", 0)
    a, b = "s1/2026-11-01/a.csv", "s1/2026-11-01/b.csv"
    manifest = {"sources": [{"name": "s1", "archives": [{"file": a}, {"file": b}]},
                            {"name": "s2", "archives": []}]}
    ev = events(spark, [
        {"kind": "change", "trx_id": "1", "position": "0010", "archive_file": b, "op": "c"},
        {"kind": "change", "trx_id": "1", "position": "0010", "archive_file": a, "op": "c"},
        {"kind": "change", "trx_id": "2", "position": "0020", "archive_file": a, "from_state": True},
        {"kind": "change", "trx_id": "2", "position": "0020", "archive_file": a},
        {"kind": "segment", "trx_id": "3", "position": "0030", "seg_num": 1, "seg_key": "k"},
        {"kind": "segment", "trx_id": "3", "position": "0030", "seg_num": 2, "seg_key": "k"},
        {"kind": "skip", "position": "0040"},
        {"kind": "skip", "position": "0040"},
        {"kind": "change", "trx_id": "1", "position": "0010", "source": "s2"},
    ])
    got = accounting.quarantine_duplicate_positions(spark, ev, manifest)
    assert got.columns == ev.columns
    rows = sorted((r["source"], r["position"], r["archive_file"][-5:], r["from_state"], r["kind"],
                   r["trx_id"], r["error_class"], r["message"]) for r in got.collect())
    assert rows == [
        ("s1", "0010", "a.csv", False, "change", "1", None, None),
        ("s1", "0010", "b.csv", False, "quarantine", None, "duplicate_position",
         f"position 0010 was already read at {a} offset 10: the record is not decoded twice"),
        ("s1", "0020", "a.csv", False, "quarantine", None, "duplicate_position",
         f"position 0020 was already read at {a} offset 20: the record is not decoded twice"),
        ("s1", "0020", "a.csv", True, "change", "2", None, None),
        ("s1", "0030", "a.csv", False, "segment", "3", None, None),
        ("s1", "0030", "a.csv", False, "segment", "3", None, None),
        ("s1", "0040", "a.csv", False, "skip", None, None, None),
        ("s1", "0040", "a.csv", False, "skip", None, None, None),
        ("s2", "0010", "a.csv", False, "change", "1", None, None),
    ]


def test_the_sources_the_decode_proved_are_not_searched(spark):
    """A repeat is one within a source's night: with s2 proved (``unique_sources``), only
    s1's rows are searched; all proved: the events as read."""
    from dblog.accounting import quarantine_duplicate_positions

    manifest = {"sources": [{"name": "s1", "archives": []}, {"name": "s2", "archives": []}]}
    ev = events(spark, [
        {"kind": "change", "trx_id": "1", "position": "0010", "record_offset": 1},
        {"kind": "change", "trx_id": "1", "position": "0010", "record_offset": 2},
        # (never so in a proved source: here to show that its rows are left alone)
        {"kind": "change", "trx_id": "1", "position": "0010", "source": "s2", "record_offset": 1},
        {"kind": "change", "trx_id": "1", "position": "0010", "source": "s2", "record_offset": 2},
    ])
    got = quarantine_duplicate_positions(spark, ev, manifest, {"s2"})
    assert sorted((r["source"], r["record_offset"], r["kind"]) for r in got.collect()) == [
        ("s1", 1, "change"), ("s1", 2, "quarantine"), ("s2", 1, "change"), ("s2", 2, "change")]
    assert quarantine_duplicate_positions(spark, ev, manifest, {"s1", "s2"}) is ev
    assert quarantine_duplicate_positions(spark, ev, manifest, True) is ev


def test_no_repeated_positions_returns_the_events_as_read(spark):
    from dblog.accounting import quarantine_duplicate_positions

    ev = events(spark, [{"kind": "change", "trx_id": "1", "position": f"{i:04d}"} for i in range(5)]
                + [{"kind": "skip", "position": "0001"}])
    got = quarantine_duplicate_positions(spark, ev, {"sources": [{"name": "s1", "archives": []}]})
    assert got is ev        # nothing joined, nothing shuffled


# ----------------------------------------------------------------- held state

def test_held_rows_are_every_row_of_open_transactions(spark):
    from dblog.ordering.state import carry_rows, held_rows

    ev = events(spark, [
        {"kind": "begin", "trx_id": "2", "position": "0020"},
        {"kind": "change", "trx_id": "2", "position": "0021", "after": '{"A":1}'},
        {"kind": "change", "trx_id": "2", "position": "0001", "from_state": True},
        {"kind": "quarantine", "trx_id": "2", "position": "0022"},
        {"kind": "change", "trx_id": "1", "position": "0011"},
        {"kind": "change", "trx_id": "2", "source": "s2", "position": "0030"},
        {"kind": "carry", "message": '{"open": []}', "n_records": 0},
        {"kind": "carry", "message": '{"old": 1}', "n_records": 0, "from_state": True},
    ])
    open_trx = spark.createDataFrame([("s1", "2")], "source STRING, trx_id STRING")
    for broadcast in (False, True):
        got = held_rows(ev, open_trx, broadcast)
        assert got.columns == EVENT_COLUMNS
        assert sorted((r["kind"], r["position"], r["after"]) for r in got.collect()) == \
            [("begin", "0020", None), ("change", "0001", None), ("change", "0021", '{"A":1}')]
    assert [r["message"] for r in carry_rows(ev).collect()] == ['{"open": []}']


# ----------------------------------------------------------------- segments

def test_segment_groups_concatenate_complete_groups_in_seg_num_order(spark):
    from dblog.ordering.segments import segment_groups

    pieces = events(spark, [
        {"kind": "segment", "trx_id": "1", "seg_key": "k1", "seg_num": 2, "seg_total": 2,
         "seg_data": b"CD", "position": "0002"},
        {"kind": "segment", "trx_id": "1", "seg_key": "k1", "seg_num": 1, "seg_total": 2,
         "seg_data": b"AB", "position": "0001", "op": "u"},
        {"kind": "segment", "trx_id": "1", "seg_key": "k2", "seg_num": 1, "seg_total": 3,
         "seg_data": b"X", "position": "0003"},
        {"kind": "segment", "trx_id": "1", "seg_key": "k3", "seg_num": 1, "seg_total": 2,
         "seg_data": b"Y", "position": "0004"},
        {"kind": "segment", "trx_id": "1", "seg_key": "k3", "seg_num": 1, "seg_total": 2,
         "seg_data": b"Y", "position": "0004"},
    ])
    want = spark.createDataFrame([
        ("k1", True, bytearray(b"ABCD"), "0001", "u"),
        ("k2", False, None, "0003", None),
        ("k3", False, None, "0004", None),
    ], "seg_key STRING, complete BOOLEAN, data BINARY, position STRING, op STRING")
    same(segment_groups(pieces), want)


# ----------------------------------------------------------------- hooks

def test_format_hooks_replace_only_their_formats_rows(spark):
    from pyspark.sql import functions as F

    from dblog.ordering.hooks import apply_hooks, format_hooks

    ev = events(spark, [
        {"format": "informix", "kind": "change", "position": "0001"},
        {"format": "soliddb", "kind": "change", "position": "0002"},
    ])
    hook = lambda df: df.withColumn("trx_id", F.concat(F.lit("x:"), "position")).withColumn("extra", F.lit(1))  # noqa: E731
    got = apply_hooks(ev, {"informix": hook})
    assert got.columns == ev.columns
    assert sorted((r["format"], r["trx_id"]) for r in got.collect()) == \
        [("informix", "x:0001"), ("soliddb", None)]
    with pytest.raises(ValueError, match="dropped columns"):
        apply_hooks(ev, {"informix": lambda df: df.drop("trx_id")})
    assert format_hooks(["soliddb", "rdb"]) == {}



def test_outputs_use_dictionary_encoding_only_for_columns_of_few_values(spark, tmp_path):
    """``parquet_options``: the ordering's writes reach parquet-mr with dictionary encoding off
    for wide or unique columns (row images, positions) and on for the few-valued ones; the
    values read back are the same."""
    import pyarrow.parquet as pq

    from dblog.ordering.schema import parquet_options
    from dblog.ordering.stage import _write

    # few distinct images and positions: parquet-mr's default would encode every column
    # with a dictionary here, so the test fails when the options do not reach it
    rows = [("s1", "u", f'{{"id": {i % 3}}}', f"{i % 5:040X}") for i in range(200)]
    df = spark.createDataFrame(rows, "source STRING, op STRING, after STRING, position STRING")
    assert parquet_options(df.columns) == {"parquet.enable.dictionary": "false",
                                           "parquet.enable.dictionary#source": "true",
                                           "parquet.enable.dictionary#op": "true"}
    _write(df.coalesce(1), str(tmp_path / "out"))
    (f,) = sorted((tmp_path / "out").glob("*.parquet"))
    meta = pq.ParquetFile(f).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: set(meta.column(i).encodings)
                 for i in range(meta.num_columns)}
    dictionary = {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}
    assert encodings["source"] & dictionary and encodings["op"] & dictionary, encodings
    assert not encodings["after"] & dictionary and not encodings["position"] & dictionary, encodings
    assert sorted(tuple(r.values()) for r in pq.read_table(f).to_pylist()) == sorted(rows)
