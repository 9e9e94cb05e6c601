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


# ----------------------------------------------------------------- the audit's sums in the pass

AUDIT_TYPES = {"n_records": pa.int32(), "n_bytes": pa.int64(), "_audit": pa.bool_(),
               "_in_trx": pa.bool_()}


def audit_table(rows: list[dict]) -> pa.Table:
    cols = {c: pa.array([r.get(c) for r in rows], TYPES.get(c, pa.string())) for c in NARROW_COLUMNS}
    for c in ["archive_file", "rule"]:
        cols[c] = pa.array([r.get(c) for r in rows], pa.string())
    for c, default in [("n_records", 1), ("n_bytes", 10), ("_audit", True), ("_in_trx", True)]:
        cols[c] = pa.array([r.get(c, default) for r in rows], AUDIT_TYPES[c])
    return pa.table(cols)


def audit_rows(rnd: random.Random, n: int, trx: int) -> list[dict]:
    """``random_rows`` with every kind the audit tells apart, archives, records, bytes, skip
    rules (some missing) and rows the audit does not count (``_audit`` false)."""
    rows = random_rows(rnd, n, trx)
    for r in rows:
        if r["_in_trx"] and rnd.random() < 0.25:
            r["kind"] = rnd.choice(["quarantine", "skip", "control"])
        r["archive_file"] = rnd.choice(["a.log", "b.log", None])
        r["n_records"] = rnd.choice([0, 1, 1, 2])
        r["n_bytes"] = rnd.choice([None, 7, 100, 4096])
        r["rule"] = rnd.choice([None, "nop", "ddl"]) if r["kind"] == "skip" else None
        r["_audit"] = r["_in_trx"] and rnd.random() > 0.1
    return rows


def buckets_by_rule(rows: list[dict]) -> dict:
    """The audit's sums computed row by row from the rules in ``classify`` (the transactions'
    outcome from ``summarize``, itself checked against Spark SQL)."""
    t = audit_table(rows)
    trx = {(r["source"], r["trx_id"]): r for r in summarize(t).to_pylist()}
    out: dict = {}
    for r in rows:
        if not r["_audit"]:
            continue
        x = trx[(r["source"], r["trx_id"])]
        status, kind = x["status"], r["kind"]
        if kind == "change":
            if status == "open":
                b = "held_open"
            elif status == "rolled_back":
                b = "skipped:rolled_back"
            elif x["capture_off"]:
                b = "skipped:capture_off"
            elif r["position"] is not None and r["position"] in (x["undone"] or []):
                b = "skipped:compensated"
            else:
                b = "published"
        elif kind == "quarantine":
            b = "quarantined"
        elif kind == "skip":
            b = None if r["rule"] is None else "skipped:" + r["rule"]
        else:
            b = "held_open" if status == "open" else "control"
        key = (r["source"], r["format"], r["archive_file"], b)
        n, nb = out.get(key, (0, None))
        out[key] = (n + r["n_records"], nb if r["n_bytes"] is None else (nb or 0) + r["n_bytes"])
    return out


def sums_of(tables: list[pa.Table]) -> dict:
    out: dict = {}
    for t in tables:
        for r in t.to_pylist():
            key = (r["source"], r["format"], r["archive_file"], r["bucket"])
            n, nb = out.get(key, (0, None))
            out[key] = (n + r["n_records"],
                        nb if r["n_bytes"] is None else (nb or 0) + r["n_bytes"])
    return {k: v for k, v in out.items() if v != (0, None) or k in out}


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("chunk", [1, 3, 17, 10_000])
def test_the_streams_audit_sums_follow_the_rules_whatever_the_chunks(seed, chunk):
    """Every audited row in the bucket ``classify``'s rules give it, counted once: undo rows
    read again with a carried transaction are not counted twice, a transaction's changes
    before and after a chunk boundary get its final outcome."""
    from dblog.ordering.transactions import AUDIT_PARTIAL_SCHEMA

    rnd = random.Random(100 + seed)
    rows = audit_rows(rnd, rnd.randrange(1, 400), rnd.choice([1, 3, 40]))
    t = sorted_for_stream(audit_table(rows))
    sums: list[pa.Table] = []
    got_trx = rows_of(stream_summarize(t.to_batches(max_chunksize=rnd.choice([1, 3, 64])),
                                       chunk_rows=chunk, audit=sums))
    assert got_trx == sorted(summarize(t).to_pylist(), key=lambda r: (r["source"], r["trx_id"]))
    assert all(s.schema == AUDIT_PARTIAL_SCHEMA for s in sums)
    want = buckets_by_rule(rows)
    assert sums_of(sums) == want
    assert sum(n for n, _ in want.values()) == sum(r["n_records"] for r in rows if r["_audit"])


def test_a_huge_transactions_audit_is_carried_as_sums():
    """One transaction of 50,000 changes in chunks of 1,000: the audit's carried state stays
    one row per archive and category, and its undone changes are found in every chunk."""
    import dblog.ordering.transactions as T

    n = 50_000
    rows = [{"source": "s1", "trx_id": "1", "kind": "undo", "position": "u0", "undo_of": "049999",
             "archive_file": "a.log"}]
    rows += [{"source": "s1", "trx_id": "1", "kind": "change", "position": f"{i:06d}",
              "archive_file": "ab"[i % 2] + ".log"} for i in range(n)]
    rows.append({"source": "s1", "trx_id": "1", "kind": "commit", "position": "999999",
                 "trx_end": "commit", "commit_position": "999999", "archive_file": "b.log"})
    t = sorted_for_stream(audit_table(rows))
    widest = []
    real = T._sum_categories

    def spy(x):
        out = real(x)
        widest.append(out.num_rows)
        return out

    T._sum_categories = spy
    try:
        sums: list[pa.Table] = []
        list(stream_summarize(t.to_batches(max_chunksize=500), chunk_rows=1_000, audit=sums))
    finally:
        T._sum_categories = real
    assert sums_of(sums) == {("s1", None, "a.log", "published"): (n // 2, 10 * n // 2),
                             ("s1", None, "b.log", "published"): (n // 2 - 1, 10 * (n // 2 - 1)),
                             ("s1", None, "b.log", "skipped:compensated"): (1, 10),
                             ("s1", None, "a.log", "control"): (1, 10),
                             ("s1", None, "b.log", "control"): (1, 10)}
    assert max(widest) <= 4


def test_the_audit_sums_of_a_task_are_written_whole(tmp_path):
    import pyarrow.parquet as pq

    from dblog.ordering.transactions import (AUDIT_PARTIAL_SCHEMA, audit_buckets,
                                             audit_categories, write_audit_partial)

    t = audit_table([{"source": "s1", "trx_id": "1", "kind": "change", "position": "1",
                      "archive_file": "a.log", "format": "rdb"},
                     {"source": "s1", "trx_id": "1", "kind": "commit", "trx_end": "commit",
                      "commit_position": "2", "archive_file": "a.log", "format": "rdb"}])
    part = audit_buckets(audit_categories(t), summarize(t))
    write_audit_partial(str(tmp_path), "part-00003.parquet", [part, part])
    write_audit_partial(str(tmp_path), "part-00004.parquet", [])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-00003.parquet", "part-00004.parquet"]
    got = pq.read_table(tmp_path / "part-00003.parquet")
    assert got.schema == AUDIT_PARTIAL_SCHEMA
    assert sorted(got.to_pylist(), key=lambda r: r["bucket"]) == [
        {"source": "s1", "format": "rdb", "archive_file": "a.log", "bucket": "control",
         "n_records": 2, "n_bytes": 20},
        {"source": "s1", "format": "rdb", "archive_file": "a.log", "bucket": "published",
         "n_records": 2, "n_bytes": 20}]
    assert pq.read_table(tmp_path / "part-00004.parquet").num_rows == 0
