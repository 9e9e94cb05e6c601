"""The decode's work units as an Arrow frame, one partition per unit (dblog/decode.py
``units_frame``)."""

from __future__ import annotations

import json

import pytest

from dblog import decode

pytestmark = pytest.mark.spark


def test_work_units_are_one_partition_each_and_the_session_settings_are_put_back(spark):
    """``decode.units_frame``: the units shipped as Arrow, one task per unit (as the pickled
    Python RDD gave), read without a Python worker; the Arrow settings it uses for that are
    the session's again afterwards."""
    keys = list(decode.ONE_ROW_PER_PARTITION)
    before = {k: spark.conf.get(k) for k in keys}
    rows = [(i, json.dumps({"unit": i, "text": "é" * i})) for i in range(7)]
    df = decode.units_frame(spark, rows)
    assert {k: spark.conf.get(k) for k in keys} == before
    assert df.rdd.getNumPartitions() == 7
    per_part = df.rdd.glom().map(lambda part: [r["unit_id"] for r in part]).collect()
    assert sorted(per_part) == [[i] for i in range(7)]
    assert sorted((r["unit_id"], r["payload"]) for r in df.collect()) == rows
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "Python" not in plan and "LocalTableScan" not in plan, plan


def test_units_frames_built_from_several_threads_leave_the_sessions_settings(spark):
    """``units_frame`` sets one record per Arrow batch while it builds its frame; the
    ordering builds such frames from several threads at once (the held state beside the
    ranking). Interleaved, the restores left one row per batch as the session's setting
    (every later Arrow batch to Python held one row): under the lock they cannot."""
    from concurrent.futures import ThreadPoolExecutor

    keys = list(decode.ONE_ROW_PER_PARTITION)
    before = {k: spark.conf.get(k, None) for k in keys}

    def build(i: int) -> int:
        return decode.units_frame(spark, [(j, "{}") for j in range(3)]).rdd.getNumPartitions()

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(build, range(48))) == [3] * 48
    assert {k: spark.conf.get(k, None) for k in keys} == before
