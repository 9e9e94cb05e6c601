"""``bucketsum.Summary`` (a bucket of the transactions pass summarised on integer group
numbers) against the chunked rules it replaced in the summarise task (``tests/oracle/bucket``:
``transactions.partial`` / ``final``, ``categories`` / ``_buckets``, joins on the string
keys), on generated buckets with every kind of row, and the vectorised CRC-32 of the split
against ``zlib``. The pass on files against the Spark pass, whole nights, is in
``test_ordering_trxfiles.py``."""

from __future__ import annotations

import random
import zlib
from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa
import pytest

from dblog.ordering.bucketsum import Summary, group_ids
from dblog.ordering.trxfiles import (BUCKETS_SCHEMA, PUB_SCHEMA, SPLIT_SCHEMA, _crc,
                                     crc32_strings)
from dblog.ordering.wide import FID, ROW
from tests.oracle.bucket import summary as oracle_summary

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def _bucket(seed: int, n_trx: int = 300) -> pa.Table:
    """Rows of ``n_trx`` transactions of two sources (trx ids shared between them): begin
    (or none; user or position sometimes null; ``capture_off``), changes (positions out of
    order, ``trx_order`` or not, ties), undo rows (of a change, of nothing, null), skip and
    quarantine rows, reassembled changes, rows held from an earlier night, a commit, an abort
    or nothing; in a shuffled order."""
    rnd = random.Random(seed)
    rows = []

    def row(src, trx, kind, **kw):
        r = {f.name: None for f in SPLIT_SCHEMA}
        r.update(source=src, trx_id=trx, format="fmt_" + src, kind=kind, _in_trx=True,
                 archive_file=f"{src}/a{rnd.randrange(3)}.log", n_records=rnd.choice([1, 1, 2, None]),
                 n_bytes=rnd.choice([40, 100, None]), from_state=rnd.random() < 0.1,
                 record_index=rnd.randrange(50), _fid=rnd.randrange(4), _row=len(rows))
        r.update(kw)
        rows.append(r)

    for i in range(n_trx):
        src = rnd.choice(["s1", "s2"])
        trx = f"T{rnd.randrange(n_trx // 2):05d}"
        user = rnd.choice(["alice", "bob", None])
        if rnd.random() < 0.8:
            row(src, trx, "begin", position=rnd.choice([f"{i:04d}000", None]),
                user=rnd.choice([user, None]),
                flag="capture_off" if rnd.random() < 0.1 else None)
        positions = [f"{i:04d}{rnd.randrange(1000):03d}" for _ in range(rnd.randrange(6))]
        for p in positions:
            row(src, trx, "change", position=p, user=user,
                trx_order=rnd.choice([None, None, f"{rnd.randrange(9)}"]),
                seg_key=rnd.choice([None, None, None, "k1"]))
        if positions and rnd.random() < 0.2:      # the same record twice: a tie
            row(src, trx, "change", position=positions[0], record_index=0, archive_file="x")
            row(src, trx, "change", position=positions[0], record_index=0, archive_file="x")
        for _ in range(rnd.choice([0, 0, 1, 2])):
            row(src, trx, "undo", position=f"{i:04d}9{rnd.randrange(99):02d}",
                undo_of=rnd.choice(positions + [None, "nowhere"]) if positions else None)
        if rnd.random() < 0.15:
            row(src, trx, "skip", rule=rnd.choice(["r1", "r2", None]), position=f"{i:04d}800")
        if rnd.random() < 0.1:
            row(src, trx, "quarantine", position=f"{i:04d}801")
        if rnd.random() < 0.15:      # a change reassembled from segments
            row(src, trx, "change", position=f"{i:04d}700", _in_trx=False, n_records=None)
        if rnd.random() < 0.05:
            row(src, trx, "segment", position=f"{i:04d}701")
        end = rnd.random()
        if end < 0.6:
            row(src, trx, "commit", trx_end="commit", user=rnd.choice([user, None]),
                commit_position=f"C{i:05d}", position=f"{i:04d}999",
                commit_ts=T0 + timedelta(seconds=i))
        elif end < 0.8:
            row(src, trx, "abort", trx_end="abort", position=f"{i:04d}998")
    rnd.shuffle(rows)
    for k, r in enumerate(rows):
        r["_row"] = k
    return pa.Table.from_pylist(rows, schema=SPLIT_SCHEMA).append_column(
        "_seen", pa.array([rnd.random() < 0.05 for _ in rows]))


def _canon(t: pa.Table) -> list:
    return sorted(t.to_pylist(), key=repr)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_the_summary_on_group_numbers_equals_the_chunked_rules(seed):
    rows = _bucket(seed)
    want = oracle_summary(rows)
    got = Summary(rows)
    assert got.trx.schema == want["trx"].schema
    assert _canon(got.trx) == _canon(want["trx"])
    assert _canon(got.audit_buckets().cast(BUCKETS_SCHEMA)) == _canon(want["buckets"])
    assert _canon(got.published(PUB_SCHEMA, FID, ROW)) == _canon(want["pub"])
    assert _canon(got.held(FID, ROW)) == _canon(want["held"])
    statuses = set(got.trx.column("status").to_pylist())
    assert statuses == {"committed", "rolled_back", "open"}


def test_changes_in_their_order_skip_the_sort_and_rank_the_same(monkeypatch):
    """Rows already in ``event_seq``'s order inside each transaction (the common case: no
    sort) and the same rows reversed (the sort) give the oracle's ranks."""
    import pyarrow.compute as pc

    from dblog.ordering import bucketsum

    rows = _bucket(7)
    rows = rows.append_column("_k", pc.coalesce(rows.column("trx_order"), rows.column("position"))) \
        .sort_by([(c, "ascending") for c in ("source", "trx_id", "_k", "position", "archive_file",
                                             "record_index")]).drop(["_k"])
    back = rows.take(pa.array(np.arange(rows.num_rows)[::-1]))
    seen = []
    check = bucketsum._in_order
    monkeypatch.setattr(bucketsum, "_in_order", lambda *a: seen.append(check(*a)) or seen[-1])
    for t in (rows, back):
        assert _canon(Summary(t).published(PUB_SCHEMA, FID, ROW)) == \
            _canon(oracle_summary(t)["pub"])
    assert seen == [True, False]


def test_an_empty_bucket_and_one_of_rows_outside_any_transaction():
    empty = SPLIT_SCHEMA.empty_table().append_column("_seen", pa.array([], pa.bool_()))
    s = Summary(empty)
    assert s.trx.num_rows == 0 and s.published(PUB_SCHEMA, FID, ROW).num_rows == 0
    assert s.audit_buckets().num_rows == 0 and s.held(FID, ROW).num_rows == 0
    rows = _bucket(8, n_trx=20)
    only = rows.filter(pa.array([k == "change" for k in rows.column("kind").to_pylist()]))
    only = only.set_column(only.schema.get_field_index("_in_trx"), "_in_trx",
                           pa.array([False] * only.num_rows))
    s, want = Summary(only), oracle_summary(only)
    assert s.trx.num_rows == 0 == want["trx"].num_rows
    assert _canon(s.audit_buckets().cast(BUCKETS_SCHEMA)) == _canon(want["buckets"])


def test_group_numbers_follow_first_appearance_and_keep_the_sources_apart():
    rows = pa.table({"source": ["a", "b", "a", "a", "b"], "trx_id": ["1", "1", "2", "1", "1"]})
    gid, first = group_ids(rows)
    assert gid.tolist() == [0, 1, 2, 0, 1] and first.tolist() == [0, 1, 2]


def test_the_vectorised_crc32_is_zlibs():
    rnd = random.Random(3)
    values = ["", "a", "é€", None, "x" * 300, "y" * 64, "é" * 40] + [
        "".join(rnd.choice("0123456789ABCDEFéz") for _ in range(rnd.randrange(25)))
        for _ in range(3000)]
    want = np.array([0 if v is None else zlib.crc32(v.encode("utf-8")) for v in values])
    arr = pa.array(values)
    assert (crc32_strings(arr) == want).all()
    assert (crc32_strings(arr.slice(4)) == want[4:]).all()
    assert (crc32_strings(pa.array(["z" * 100_000, "a"])) ==
            [zlib.crc32(b"z" * 100_000), zlib.crc32(b"a")]).all()
    assert (crc32_strings(pa.array(values, pa.large_string())) == want).all()
    assert (_crc(pa.chunked_array([arr.slice(0, 10), arr.slice(10)])) == want).all()
    assert len(crc32_strings(pa.array([], pa.string()))) == 0


def test_routed_pieces_by_group_number_equal_the_join_with_their_groups(tmp_path):
    """``segfiles.write_pieces`` given each sorted piece's group (``sorted_groups``) routes
    the same pieces with the same outcomes as its join on (source, seg_key); a piece of no
    key meets no group, as in the join."""
    import glob

    import pyarrow.parquet as pq

    from dblog.ordering import segfiles

    rnd = random.Random(11)
    rows = []
    for k in range(120):
        key = None if k % 17 == 0 else f"K{k % 40:03d}"
        rows.append({f.name: None for f in segfiles.PIECE_SCHEMA} | {
            "source": None if k % 29 == 0 else rnd.choice(["s1", "s2"]), "format": "lldf",
            "seg_key": key, "seg_num": rnd.randrange(1, 4), "seg_total": 3,
            "trx_id": rnd.choice([None, "T1", "T2"]), "kind": "segment",
            "archive_file": "a.log", "record_offset": k, "n_records": 1, "n_bytes": 9,
            "seg_data": bytes([k % 256]) * 300, "from_state": k % 5 == 0})
    pieces = pa.Table.from_pylist(rows, schema=segfiles.PIECE_SCHEMA)
    groups, ordered, gid = segfiles.sorted_groups(pieces)
    kinds = [rnd.choice(["change", "quarantine", None]) for _ in range(groups.num_rows)]
    outcomes = [pa.table({
        "source": groups.column("source"), "seg_key": groups.column("seg_key"),
        "kind": pa.array(kinds, pa.string()),
        "trx_id": pa.array([rnd.choice([None, "T3"]) for _ in kinds], pa.string()),
        "position": pa.array([f"P{i}" for i in range(len(kinds))], pa.string()),
        "error_class": pa.array(["bad_segments" if k == "quarantine" else None for k in kinds],
                                pa.string()),
        "message": pa.array(["m" if k == "quarantine" else None for k in kinds], pa.string()),
        "complete": groups.column("complete")})]
    got = {}
    for name, by in (("join", None), ("gid", gid)):
        out = tmp_path / name
        out.mkdir()
        segfiles.write_pieces(ordered, outcomes, {"pieces_out": str(out), "trx_buckets": 3,
                                                  "bucket": 0}, by)
        got[name] = {f.split("/")[-2]: _canon(pq.read_table(f))
                     for f in glob.glob(f"{out}/*/*.parquet")}
    assert got["gid"] == got["join"]
    assert sum(len(v) for v in got["gid"].values()) == pieces.num_rows
    flat = [r for v in got["gid"].values() for r in v]
    assert any(r["seg_key"] is None and r["r_position"] is None for r in flat)
    assert any(r["via_group"] for r in flat) and any(r["r_class"] for r in flat)


def test_header_rows_read_as_mappings_and_convert_only_the_columns_asked():
    """``segments.HeaderRows``: each group's header fields as a read-only mapping, a column
    turned into Python values the first time a decoder asks for it."""
    from dblog.ordering.segments import HeaderRows

    rows = HeaderRows(pa.table({"op": ["u", "d", None], "table_id": ["T1", "T2", "T1"],
                                "seg_key": ["k1", "k2", "k3"]}))
    assert len(rows) == 3
    r = rows[1]
    assert r["op"] == "d" and r.get("op") == "d" and r.get("table_id") == "T2"
    assert rows[2]["op"] is None and rows[2].get("op", "x") is None
    assert r.get("rule") is None and r.get("rule", "dflt") == "dflt"
    with pytest.raises(KeyError):
        r["rule"]
    assert dict(rows[0]) == {"op": "u", "table_id": "T1", "seg_key": "k1"}
    assert "op" in r and "rule" not in r and len(r) == 3
    lazy = HeaderRows(pa.table({"a": [1], "b": [2]}))
    assert lazy[0].get("a") == 1 and set(lazy._cols) == {"a"}
