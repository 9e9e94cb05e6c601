"""The Arrow kernel of the ordering's ``transactions`` step (dblog/ordering/transactions.py)
without Spark: ``summarize`` on edge inputs, and ``stream_summarize`` (one chunk at a time,
a transaction carried between chunks) equal to ``summarize`` of all the rows whatever the
chunk size. The step against its Spark SQL definition: tests/test_ordering_steps.py."""

from __future__ import annotations

import datetime as dt
import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dblog.ordering.transactions import (NARROW_COLUMNS, TRX_COUNTS_SCHEMA, stream_summarize,
                                         summarize)

TS = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.timezone.utc)
TYPES = {"commit_ts": pa.timestamp("us", tz="UTC")}


def table(rows: list[dict]) -> pa.Table:
    cols = {c: pa.array([r.get(c) for r in rows], TYPES.get(c, pa.string())) for c in NARROW_COLUMNS}
    cols["_in_trx"] = pa.array([r.get("_in_trx", True) for r in rows], pa.bool_())
    return pa.table(cols)


def sorted_for_stream(t: pa.Table) -> pa.Table:
    """As the step sorts a partition: (source, trx_id), a transaction's undo rows first."""
    undo_first = pc.if_else(pc.fill_null(pc.and_(pc.equal(t.column("kind"), "undo"),
                                                 t.column("_in_trx")), False), 0, 1)
    t = t.append_column("_o", undo_first)
    return t.sort_by([("source", "ascending"), ("trx_id", "ascending"), ("_o", "ascending")]).drop(["_o"])


def rows_of(batches) -> list[dict]:
    out = pa.Table.from_batches(list(batches), schema=TRX_COUNTS_SCHEMA) if batches else \
        TRX_COUNTS_SCHEMA.empty_table()
    return sorted(out.to_pylist(), key=lambda r: (r["source"], r["trx_id"]))


def random_rows(rnd: random.Random, n: int, trx: int) -> list[dict]:
    kinds = ["begin", "change", "change", "change", "undo", "commit", "abort", "segment"]
    rows = []
    for _ in range(n):
        kind = rnd.choice(kinds)
        rows.append({
            "source": rnd.choice(["s1", "s2"]), "trx_id": str(rnd.randrange(trx)), "kind": kind,
            "format": "db2luw", "position": rnd.choice([None, f"{rnd.randrange(60):04d}"]),
            "user": rnd.choice([None, "ANN", "BOB"]),
            "flag": rnd.choice([None, "capture_off"]) if kind == "begin" else None,
            "trx_end": rnd.choice([None, None, "commit", "abort"]),
            "commit_position": rnd.choice([None, f"{rnd.randrange(60):04d}"]),
            "commit_ts": rnd.choice([None, TS, TS.replace(hour=9)]),
            "undo_of": rnd.choice([None, f"{rnd.randrange(60):04d}"]) if kind == "undo" else None,
            "_in_trx": rnd.random() > 0.05,      # a few reassembled changes
        })
        if not rows[-1]["_in_trx"]:
            rows[-1].update(kind="change", format=None, user=None, trx_end=None,
                            commit_position=None, commit_ts=None, undo_of=None, flag=None)
    return rows


def test_summarize_of_no_rows_and_of_a_transaction_without_changes():
    assert summarize(table([])).schema == TRX_COUNTS_SCHEMA
    assert summarize(table([])).num_rows == 0
    got = summarize(table([{"source": "s1", "trx_id": "7", "kind": "begin"}])).to_pylist()
    assert got == [{"source": "s1", "trx_id": "7", "format": None, "status": "open",
                    "commit_position": None, "commit_ts": None, "user": None,
                    "begin_position": None, "capture_off": False, "undone": None,
                    "event_count": 0}]
    # only reassembled changes: no transaction row
    assert summarize(table([{"source": "s1", "trx_id": "8", "kind": "change", "position": "1",
                             "_in_trx": False}])).num_rows == 0


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("chunk", [1, 2, 5, 17, 100, 10_000])
def test_the_stream_gives_summarize_of_all_the_rows(seed, chunk):
    rnd = random.Random(seed)
    # few transactions: most span many chunks (a huge transaction in small); undo rows of
    # one transaction compensate changes in later chunks
    t = sorted_for_stream(table(random_rows(rnd, rnd.randrange(1, 400), rnd.choice([1, 3, 40]))))
    want = sorted(summarize(t).to_pylist(), key=lambda r: (r["source"], r["trx_id"]))
    batch = rnd.choice([1, 3, 64])
    got = rows_of(stream_summarize(t.to_batches(max_chunksize=batch), chunk_rows=chunk))
    assert got == want


def test_a_huge_transaction_is_never_held_whole():
    """One transaction of 200,000 rows (its undo rows first), in chunks of 1,000: every call
    of the kernel sees at most one chunk plus the transaction's undo rows."""
    import dblog.ordering.transactions as T

    n = 200_000
    # undo rows (sorted first) whose targets are in the first chunk, a middle one and the
    # last (in the chunk where the transaction ends)
    rows = [{"source": "s1", "trx_id": "1", "kind": "undo", "position": f"u{i}", "undo_of": target}
            for i, target in enumerate(["000007", "100500", f"{n - 1:06d}"])]
    rows.append({"source": "s1", "trx_id": "1", "kind": "begin", "position": "000000"})
    rows += [{"source": "s1", "trx_id": "1", "kind": "change", "position": f"{i:06d}"}
             for i in range(1, n)]
    rows.append({"source": "s1", "trx_id": "1", "kind": "commit", "position": "999999",
                 "trx_end": "commit", "commit_position": "999999"})
    t = sorted_for_stream(table(rows))
    seen = []
    real = T.partial

    def spy(r):
        seen.append(r.num_rows)
        return real(r)

    T.partial = spy
    try:
        got = rows_of(stream_summarize(t.to_batches(max_chunksize=500), chunk_rows=1_000))
    finally:
        T.partial = real
    assert got[0]["event_count"] == n - 1 - 3
    assert got[0]["undone"] == ["000007", "100500", f"{n - 1:06d}"]
    assert max(seen) <= 1_000 + 3 and len(seen) >= n // 1_000


@pytest.mark.parametrize("seed", range(4))
def test_final_of_whole_partials_skips_a_merge_that_changes_nothing(seed):
    """``partial`` of every row of each transaction gives one partial per transaction:
    ``final(..., whole=True)`` (no ``merge``) equals ``final`` with the merge."""
    from dblog.ordering.transactions import final, partial

    rnd = random.Random(seed)
    t = table(random_rows(rnd, rnd.randrange(1, 600), rnd.choice([1, 5, 60])))
    parts = partial(t)
    key = lambda r: (r["source"], r["trx_id"])  # noqa: E731
    got = sorted(final(parts, whole=True).to_pylist(), key=key)
    assert got == sorted(final(parts).to_pylist(), key=key) and got
