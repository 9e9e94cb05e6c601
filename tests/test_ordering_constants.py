"""The small driver-side tables the ordering reads as constants of its queries (no join,
no job to broadcast them): ``commit_seq`` offsets, the archives' facts in the audit, and
the listed archives in the audit's aggregation."""

from __future__ import annotations

import pytest

from tests.test_ordering_steps import TRX_DDL, bucket_night, events, same

pytestmark = pytest.mark.spark


def _joins(df) -> list[str]:
    plan = df._jdf.queryExecution().optimizedPlan().toString()
    return [line for line in plan.splitlines() if "Join" in line]


def test_with_commit_seq_is_assign_commit_seq_without_a_join(spark):
    from dblog.ordering import sequence

    trx = spark.createDataFrame([
        ("s1", "a", 0, 0), ("s1", "b", 0, 1), ("s1", "c", 1, 0), ("s2", "d", 1, 1),
        ("s2", "e", None, None),        # not numbered
        ("s3", "f", 0, 0),              # a source without offsets
        ("s1", "g", 7, 0),              # a partition without offsets
    ], "source STRING, trx_id STRING, seq_part INT, seq_local LONG")
    offsets = [(0, "s1", 100), (1, "s1", 102), (1, "s2", -1)]
    want = spark.createDataFrame([
        ("s1", "a", 101), ("s1", "b", 102), ("s1", "c", 103), ("s2", "d", 1),
        ("s2", "e", None), ("s3", "f", None), ("s1", "g", None),
    ], "source STRING, trx_id STRING, commit_seq LONG")
    got = sequence.with_commit_seq(trx, offsets)
    same(got, want)
    assert dict(got.dtypes)["commit_seq"] == "bigint"
    assert not _joins(got)
    joined = sequence.assign_commit_seq(trx, spark.createDataFrame(offsets, sequence.OFFSETS_DDL))
    same(joined, want)
    none = sequence.with_commit_seq(trx, [])
    assert none.filter("commit_seq is not null").count() == 0
    assert dict(none.dtypes)["commit_seq"] == "bigint"


def test_audit_rows_only_for_listed_archives_and_facts_from_the_manifest(spark):
    from dblog.accounting import complete_audit
    from dblog.ordering.audit import audit, row_buckets
    from dblog.ordering.schema import AUDIT_COLUMNS

    trx = spark.createDataFrame([("s1", "1", "committed", False, None)], TRX_DDL)
    ev = events(spark, [
        {"kind": "begin", "trx_id": "1", "position": "0010", "n_bytes": 5},
        {"kind": "change", "trx_id": "1", "position": "0011", "n_bytes": 7},
        {"kind": "commit", "trx_id": "1", "position": "0012", "n_bytes": 5},
        {"kind": "quarantine", "error_class": "unreadable", "message": "cannot read",
         "archive_file": "s1/2026-11-01/lost.csv", "n_records": 0, "n_bytes": 40},
        {"kind": "change", "trx_id": "1", "position": "0099", "archive_file": "elsewhere.csv"},
    ])
    manifest = {"run_id": "r1", "date": "2026-11-01", "sources": [
        {"name": "s1", "format": "soliddb", "landing": [], "archives": [
            {"file": "s1/2026-11-01/a.csv", "size": 17},
            {"file": "s1/2026-11-01/lost.csv", "size": 40, "accept_loss": True},
            {"file": "s1/2026-11-01/empty.csv", "size": 0}]}]}
    listed = spark.createDataFrame(
        [(s["name"], s["format"], a["file"]) for s in manifest["sources"] for a in s["archives"]],
        "source STRING, format STRING, archive_file STRING")
    per_archive = audit(row_buckets(ev, trx), listed)
    assert not [j for j in _joins(per_archive) if "LocalRelation" in j]
    got = complete_audit(spark, manifest, per_archive, ev, [c for c in AUDIT_COLUMNS
                                                            if c not in ("run_id", "date")])
    want = spark.createDataFrame([
        ("s1/2026-11-01/a.csv", 3, 1, 2, 0, 17, 17, 0, False, False, None),
        ("s1/2026-11-01/lost.csv", 0, 0, 0, 0, 40, 0, 40, True, True, "cannot read"),
        ("s1/2026-11-01/empty.csv", 0, 0, 0, 0, 0, 0, 0, False, False, None),
    ], "archive_file STRING, records_read LONG, published LONG, control LONG, quarantined LONG, "
       "bytes_read LONG, bytes_decoded LONG, bytes_quarantined LONG, lost BOOLEAN, "
       "accepted_loss BOOLEAN, reason STRING")
    same(got, want)


def test_few_transactions_are_broadcast_with_the_same_buckets(spark):
    """``broadcast=True`` (a night of few transactions): the rows meet their transaction in a
    broadcast join, not shuffled, and every bucket is the one of the shuffled hash join."""
    from pyspark.sql import functions as F

    from dblog.ordering.classify import classify, published_changes, segment_buckets

    trx, ch = bucket_night(spark)
    cols = ["source", "trx_id", "position", "bucket"]
    small = classify(ch, trx, broadcast=True)
    same(small, classify(ch, trx), cols)
    numbered = trx.filter(F.col("commit_seq").isNotNull())
    pub = published_changes(ch, numbered, extra=["commit_seq"], broadcast=True)
    same(pub, published_changes(ch, numbered, extra=["commit_seq"]), cols + ["commit_seq"])
    for df in (small, pub):
        plan = df._jdf.queryExecution().executedPlan().toString()
        assert "BroadcastHashJoin" in plan and "ShuffledHashJoin" not in plan, plan
    groups = spark.createDataFrame([("s1", "k1", True, "change", "1", "0012", None, None)],
                                   "source STRING, seg_key STRING, complete BOOLEAN, kind STRING, "
                                   "trx_id STRING, position STRING, error_class STRING, message STRING")
    pieces = events(spark, [{"kind": "segment", "trx_id": "1", "seg_key": "k1", "seg_num": 1,
                             "position": "0012"},
                            {"kind": "segment", "trx_id": "4", "seg_key": "k9", "seg_num": 1}])
    seg_cols = ["seg_key", "seg_num", "bucket", "q_class"]
    same(segment_buckets(pieces, groups, trx, broadcast=True), segment_buckets(pieces, groups, trx),
         seg_cols)
