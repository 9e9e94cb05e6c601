"""``decoders.db2luw.resolve_transactions`` (the ordering job's hook): v10 undo records whose
change is in an earlier archive or night are matched last in, first out, in Spark."""

from __future__ import annotations

import pytest

from decoders import get
from decoders.base import DecodeContext
from decoders.events import EventSink

from .test_db2luw import CAT, NOTES, ORDERS
from .test_db2luw_v10 import ORDERS_V, Log10

pytestmark = pytest.mark.spark
db2 = get("db2luw")


def rows_of(data: bytes, name: str, byte_order: str = "little") -> list[dict]:
    sink = EventSink("hr", "db2luw", name)
    db2.decode(data, DecodeContext("hr", "db2luw", CAT, name, {"layout": "v10",
                                                                "byte_order": byte_order}), sink)
    return sink.rows()


def frame(spark, rows: list[dict], from_state: bool = False):
    from pyspark.sql import functions as F

    from dblog.decode import spark_event_schema

    return spark.createDataFrame(rows, schema=spark_event_schema()) \
        .withColumn("from_state", F.lit(from_state))


def test_undo_records_of_earlier_archives_and_nights_are_matched(spark):
    log = Log10()
    e = log.enc
    a = log.add(1, 0x4E, e.insert(ORDERS, 5, ORDERS_V))               # archive 1 (held night)
    b = log.add(1, 0x4E, e.delete(NOTES, 6, ["x", 1]))
    c = log.add(1, 0x4E, e.insert(NOTES, 7, ["y", 2]))
    c_undo = log.add(1, 0x43, e.undo_insert("3.9", 7))                 # resolved in archive 1
    d = log.add(2, 0x4E, e.insert(ORDERS, 8, ORDERS_V))               # another transaction
    cut1 = len(log.recs)
    f = log.add(1, 0x4E, e.update(ORDERS, 5, ORDERS_V, [1, "z", None, 2]))  # archive 2
    u1 = log.add(1, 0x43, e.undo_update(ORDERS, 5, ORDERS_V), flags=0)      # in archive 2
    cut2 = len(log.recs)
    u2 = log.add(1, 0x43, e.undo_delete(NOTES, 6, ["x", 1]))          # archive 3: earlier ones
    u3 = log.add(1, 0x4E, e.undo_insert("2.5", 5))
    u4 = log.add(1, 0x43, e.undo_insert("2.5", 5))                     # nothing left
    log.add(1, 0x41, e.abort())
    arch = [b"".join(log.recs[:cut1]), b"".join(log.recs[cut1:cut2]), b"".join(log.recs[cut2:])]
    held = rows_of(arch[0], "S1")
    night = rows_of(arch[1], "S2") + rows_of(arch[2], "S3")
    assert [r["undo_of"] for r in held if r["kind"] == "undo"] == [log.position(c)]
    events = frame(spark, held, True).unionByName(frame(spark, night))
    out = db2.resolve_transactions(events)
    assert out.columns == events.columns
    got = {r["position"]: r for r in out.collect()}
    assert len(got) == len(held) + len(night)
    assert got[log.position(c_undo)]["undo_of"] == log.position(c)
    assert got[log.position(u1)]["undo_of"] == log.position(f)
    assert got[log.position(u2)]["undo_of"] == log.position(b)
    assert got[log.position(u3)]["undo_of"] == log.position(a)
    assert got[log.position(u4)]["undo_of"] is None
    assert got[log.position(d)]["kind"] == "change" and got[log.position(d)]["from_state"]


def test_ordering_rewrites_only_the_rows_in_the_hooks_scope(spark, tmp_path):
    """``dblog.ordering.stage.resolve`` writes only the v10 undo rows (``resolve_scope``) and
    reads the others as decoded: the same rows as the whole hook's output."""
    from dblog.ordering.stage import resolve

    log = Log10()
    e = log.enc
    a = log.add(1, 0x4E, e.insert(ORDERS, 5, ORDERS_V))
    log.add(2, 0x4E, e.insert(NOTES, 7, ["y", 2]))
    cut = len(log.recs)
    u = log.add(1, 0x43, e.undo_insert("2.5", 5))                      # undoes a, archive 1
    log.add(1, 0x41, e.abort())
    events = frame(spark, rows_of(b"".join(log.recs[:cut]), "S1")) \
        .unionByName(frame(spark, rows_of(b"".join(log.recs[cut:]), "S2")))
    manifest = {"sources": [{"name": "hr", "format": "db2luw"}]}
    got = resolve(spark, events, manifest, tmp_path)
    key = lambda r: (r["archive_file"], r["record_index"])   # noqa: E731
    assert sorted(got.collect(), key=key) == sorted(db2.resolve_transactions(events).collect(), key=key)
    assert {r["position"]: r["undo_of"] for r in got.collect()}[log.position(u)] == log.position(a)
    written = spark.read.parquet(str(tmp_path / "resolved")).collect()
    assert [(r["kind"], r["position"]) for r in written] == [("undo", log.position(u))]


def test_the_ordering_skips_the_hook_on_a_night_without_rows_in_its_scope(spark, tmp_path,
                                                                          monkeypatch):
    """A version 7 night has no v10 undo row: ``resolve`` looks (one scan) and runs no hook,
    the rows as decoded; a v10 night runs it."""
    from dblog.ordering import stage

    from .test_db2luw import golden_log

    calls = []
    real = db2.resolve_transactions
    monkeypatch.setattr(db2, "resolve_transactions", lambda ev: calls.append(1) or real(ev))
    sink = EventSink("erp", "db2luw", "S1")
    db2.decode(golden_log("little"), DecodeContext("erp", "db2luw", CAT, "S1", {}), sink)
    events = frame(spark, sink.rows())
    manifest = {"sources": [{"name": "erp", "format": "db2luw"}]}
    key = lambda r: r["record_index"]   # noqa: E731
    got = stage.resolve(spark, events, manifest, tmp_path / "v7")
    assert calls == [] and got is events            # nothing written, nothing read back
    log = Log10()
    a = log.add(1, 0x4E, log.enc.insert(ORDERS, 5, ORDERS_V))
    u = log.add(1, 0x43, log.enc.undo_insert("2.5", 5))
    log.add(1, 0x41, log.enc.abort())
    events = frame(spark, rows_of(b"".join(log.recs), "S1"))
    got = stage.resolve(spark, events, {"sources": [{"name": "hr", "format": "db2luw"}]},
                        tmp_path / "v10")
    assert calls == [1]
    assert {r["position"]: r["undo_of"] for r in got.collect()}[log.position(u)] == log.position(a)


def test_version_7_rows_pass_unchanged(spark):
    from .test_db2luw import golden_log

    sink = EventSink("erp", "db2luw", "S1")
    db2.decode(golden_log("little"), DecodeContext("erp", "db2luw", CAT, "S1", {}), sink)
    events = frame(spark, sink.rows())
    out = db2.resolve_transactions(events)
    key = lambda r: r["record_index"]   # noqa: E731
    assert sorted(out.collect(), key=key) == sorted(events.collect(), key=key)
