"""The Informix transaction step by column (decoders/informix/resolve_columns.py) against the
per-row rules (``resolve.resolve_stream``, the reference): the same rows, every column, on
generated, damaged, golden and adversarial nights (broken chains, xid reuse, CLRs beyond the
stack, remainders with and without a change, HUPBEF/HUPAFT of the same and of other rows,
unknown tables, records outside transactions, state held from earlier nights, damaged state,
two sources), cut into Arrow batches and chunks of every size, so that transactions and xid
groups cross batch boundaries."""

from __future__ import annotations

import datetime as _dt
import json
import random

import pyarrow as pa
import pytest

from decoders.events import EVENT_SCHEMA
from decoders.informix import archive_sort_key
from decoders.informix import layout as OL
from decoders.informix import resolve as RS
from decoders.informix import resolve_columns as RC
from decoders.informix.encoder import OnlogWriter
from decoders.informix.synth import Synth
from tests.golden import GOLDEN
from tests.test_informix_oracle import damaged, every_type_log
from tests.test_informix_resolve import SOURCE, records

SCHEMA = EVENT_SCHEMA.append(pa.field("from_state", pa.bool_()))
CUTS = [(1, 1), (3, 2), (7, 50), (64, 16), (10_000, RC.CHUNK_ROWS)]   # (batch rows, chunk rows)


def stream(rows):
    """The sorted stream ``resolve_rows`` (and the Spark step) hands to the rules."""
    todo = [dict(r) for r in rows if RS.needs_resolving(r)]
    return sorted(todo, key=lambda r: (r["source"], r["xid"], RS.order_key(r)))


def _key(row):
    return tuple((v is None, "" if v is None else repr(v)) for v in row.values())


def columnar(todo, batch_rows, chunk_rows):
    table = pa.Table.from_pylist(todo, schema=SCHEMA)
    batches = table.to_batches(max_chunksize=batch_rows) if todo else []
    out = [r for b in RC.resolve_batches(iter(batches), chunk_rows) for r in b.to_pylist()]
    return out


def same(rows, cuts=CUTS):
    """Every column of every row, for every cut of the stream into batches and chunks."""
    todo = stream(rows)
    want = sorted((pa.Table.from_pylist(list(RS.resolve_stream([dict(r) for r in todo])),
                                        schema=SCHEMA).to_pylist()), key=_key)
    for batch_rows, chunk_rows in cuts:
        got = sorted(columnar(todo, batch_rows, chunk_rows), key=_key)
        assert len(got) == len(want), (batch_rows, chunk_rows)
        for g, w in zip(got, want):
            assert g == w, {k: (g[k], w[k]) for k in w if g[k] != w[k]}
    return want


def nights_same(nights, tz="America/Chicago", cuts=CUTS, damage_state=None):
    """Night after night, with the rows the held-state step keeps (reference output)."""
    held = []
    for i, archives in enumerate(nights):
        rows = held + records(archives, tz)
        if damage_state is not None and i:
            rows = [damage_state(r) if r.get("rule") == RS.STATE_RULE else r for r in rows]
        same(rows, cuts)
        held = RS.held_after(RS.resolve_rows(rows))


def synth_nights(seed, n_nights=3, n=60, start=_dt.date(2024, 3, 9)):
    synth = Synth(SOURCE, seed=seed)
    return [[(f"{SOURCE}/x/{a}", night.archives[a])
             for a in sorted(night.archives, key=archive_sort_key)]
            for night in synth.nights(start, n_nights, n)]


# ----------------------------------------------------------------- adversarial onlog text

KNOWN = [0x100123, 0x100124, 0x200045, 0x20004a]
UNKNOWN = 0x999999
TYPES = (["HINSERT"] * 6 + ["HDELETE"] * 3 + ["HUPDATE"] * 3 + ["HUPBEF"] * 5 + ["HUPAFT"] * 2
         + ["RINSERT", "RDELETE", "RUPBEF", "RUPAFT", "RUPDATE"] * 2 + ["CLR"] * 5
         + ["BLDCL", "PTRENAME", "CINDEX", "DINDEX", "ERASE", "LG_PTRUNCATE", "ADDITEM",
            "DELITEM", "LG_TRUNCATE", "CKPOINT", "BEGCOM"]
         + ["COMMIT"] * 4 + ["ROLLBACK"])


def _values(rng, rtype, ts):
    out = {}
    for name, kind, _ in OL.RECORD_TYPES[rtype]:
        if kind == OL.HEX:
            out[name] = rng.randrange(1 << 20)
        elif kind == OL.DEC:
            out[name] = rng.randrange(300)
        elif kind == OL.USED_FREE:
            out[name] = rng.choice(OL.USED_FREE_VALUES)
        elif kind == OL.DATE:
            out[name] = ts.date()
        elif kind == OL.TIME:
            out[name] = ts.time().replace(microsecond=0)
        else:
            out[name] = rng.choice(["wms.stock", "ix_a", "ann", "x"])
    if "tblspace_id" in out:
        out["tblspace_id"] = UNKNOWN if rng.random() < 0.03 else rng.choice(KNOWN)
    if "rowid" in out:
        out["rowid"] = rng.choice([0x101, 0x102, 0x103])
    return out


class Log:
    """Interleaved transactions of a few xids over many files and nights; mostly by the
    rules, sometimes not (a wrong link, a BEGIN that links, records after the end, xids
    BEGINning again while open, a line that does not read)."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.last: dict[int, int | None] = {}       # xid -> last address (None: no trx)
        self.uniqid = 10
        self.ts = _dt.datetime(2024, 3, 9, 1, 0, 0)

    def file(self, n):
        rng = self.rng
        w = OnlogWriter(self.uniqid, dumps=rng.random() < 0.3, header_every=rng.choice([0, 5, 18]))
        self.uniqid += 1
        for _ in range(n):
            self.ts += _dt.timedelta(seconds=1)
            xid = rng.randrange(1, 9)
            last = self.last.get(xid)
            if last is None or rng.random() < 0.04:
                if last is None and rng.random() < 0.05:     # outside any transaction
                    t = rng.choice(TYPES)
                    w.add(t, xid, rng.randrange(1 << 12), _values(rng, t, self.ts))
                    continue
                link = 0 if rng.random() > 0.02 else 0x40
                self.last[xid] = w.add("BEGIN", xid, link, {**_values(rng, "BEGIN", self.ts),
                                                             "user": rng.choice(["ann", "bob"])})
                continue
            t = rng.choice(TYPES)
            link = last if rng.random() > 0.03 else rng.randrange(1 << 12)
            if rng.random() < 0.01:
                w.add_line(f"{w.addr:x} 24 HINSERT {xid} 0 {link:x} zz 1 2")
                self.last[xid] = w.addr - 24
                continue
            addr = w.add(t, xid, link, _values(rng, t, self.ts))
            self.last[xid] = addr
            if t == "HUPBEF" and rng.random() < 0.8:     # its after image, maybe another row
                v = _values(rng, "HUPAFT", self.ts)
                self.last[xid] = w.add("HUPAFT", xid, addr, v)
            if t in ("COMMIT", "ROLLBACK") and rng.random() > 0.05:
                self.last[xid] = None
        return w.file_name(), w.data()

    def night(self, files, n):
        return [self.file(n) for _ in range(files)]


@pytest.mark.parametrize("seed", range(8))
def test_adversarial_nights(seed):
    log = Log(seed)
    nights_same([[(f"{SOURCE}/x/{name}", data) for name, data in log.night(2, 80)]
                 for _ in range(3)])


@pytest.mark.parametrize("seed", [1, 2, 3, 7])
def test_generated_nights(seed):
    nights_same(synth_nights(seed))


@pytest.mark.parametrize("seed", range(6))
def test_damaged_nights(seed):
    rng = random.Random(seed)
    nights_same([[(a, damaged(d, rng)) for a, d in night]
                  for night in synth_nights(seed, 2, 30, _dt.date(2024, 5, 1))])


def test_golden_and_every_record_type():
    nights_same([[(name, (GOLDEN / "informix" / name).read_bytes())]
                 for name in ("onlog_42.txt", "onlog_43.txt", "onlog_44.txt")])
    nights_same([[("onlog_9.txt", every_type_log(0))], [("onlog_10.txt", every_type_log(1))]])


def test_damaged_state_rows_and_two_sources():
    bad = iter(["{", '{"trx": 5}', '{"trx": "7:18", "last": "x"}', "[]", None] * 100)
    nights_same(synth_nights(5, 3, 40), damage_state=lambda r: {**r, "message": next(bad)}
                if random.Random(r["xid"]).random() < 0.5 else r)
    log = Log(99)
    one = records([(f"{SOURCE}/x/{n}", d) for n, d in log.night(2, 60)], "UTC")
    two = [{**r, "source": "other_informix"} for r in one]
    same(one + two)


def test_one_transaction_longer_than_many_chunks():
    w = OnlogWriter(5)
    last = w.add("BEGIN", 1, 0, _values(random.Random(0), "BEGIN", _dt.datetime(2024, 1, 1)))
    rng = random.Random(1)
    for i in range(400):
        t = ["HINSERT", "HUPBEF", "RUPBEF", "CLR", "ADDITEM"][i % 5]
        last = w.add(t, 1, last, _values(rng, t, _dt.datetime(2024, 1, 1)))
        w.add("HINSERT", 2 + i % 3, 0, _values(rng, "HINSERT", _dt.datetime(2024, 1, 1)))
    same(records([("onlog_5.txt", w.data())], "UTC"), cuts=[(1, 1), (16, 8), (100, 64)])


# ----------------------------------------------------------------- the fast path is taken

def clean_night():
    """Every rule the columns apply, with nothing for the per-row rules: folds of
    remainders and of HUPAFT, a second HUPAFT, CLRs (one beyond the stack), DDL, control
    records, a remainder into a change of the file before, a system record with an xid,
    a transaction left open, xid reuse after the end."""
    ts = _dt.datetime(2024, 1, 1, 2, 0, 0)
    rng = random.Random(3)

    def v(t, **kw):
        return {**_values(rng, t, ts), **kw}

    known = dict(tblspace_id=0x100123, rowid=0x101)
    a = OnlogWriter(40)
    b1 = a.add("BEGIN", 1, 0, v("BEGIN", user="ann"))
    b2 = a.add("BEGIN", 2, 0, v("BEGIN", user="bob"))
    x = a.add("HUPBEF", 1, b1, v("HUPBEF", **known))
    x = a.add("RUPBEF", 1, x, v("RUPBEF", **known))
    a.add("CKPOINT", 1, 0, v("CKPOINT"))
    x = a.add("HUPAFT", 1, x, v("HUPAFT", **known))
    x = a.add("HUPAFT", 1, x, v("HUPAFT", **known))
    y = a.add("HINSERT", 2, b2, v("HINSERT", **known))
    x = a.add("CLR", 1, x, {})
    x = a.add("ADDITEM", 1, x, v("ADDITEM", **known))
    x = a.add("BLDCL", 1, x, v("BLDCL", tblspace_id=0x100124))
    x = a.add("CLR", 1, x, {})
    x = a.add("CLR", 1, x, {})
    x = a.add("CLR", 1, x, {})
    x = a.add("CLR", 1, x, {})
    x = a.add("CLR", 1, x, {})
    x = a.add("CLR", 1, x, {})
    x = a.add("CLR", 1, x, {})
    x = a.add("HDELETE", 1, x, v("HDELETE", **known))
    a.add("COMMIT", 1, x, v("COMMIT"))
    c = OnlogWriter(41)
    y = c.add("RINSERT", 2, y, v("RINSERT", **known))
    b3 = c.add("BEGIN", 1, 0, v("BEGIN", user="cy"))
    y = c.add("LG_PTRUNCATE", 2, y, v("LG_PTRUNCATE", tblspace_id=0x200045))
    z = c.add("HUPBEF", 1, b3, v("HUPBEF", **known))
    y = c.add("ROLLBACK", 2, y, v("ROLLBACK"))
    c.add("HUPDATE", 1, z, v("HUPDATE", **known))     # left open
    return records([(f"{SOURCE}/x/onlog_40.txt", a.data()), (f"{SOURCE}/x/onlog_41.txt", c.data())],
                   "UTC")


def test_a_clean_night_takes_no_per_row_rule(monkeypatch):
    rows = clean_night()
    calls = []
    monkeypatch.setattr(RC._Chunk, "_slow", lambda self, *a: calls.append(a) or iter(()))
    monkeypatch.setattr(RS._Machine, "row", lambda *a: pytest.fail("per-row rule called"))
    got = columnar(stream(rows), 10_000, RC.CHUNK_ROWS)
    assert calls == []
    monkeypatch.undo()
    want = same(rows)
    assert sorted(map(_key, got)) == sorted(map(_key, want))
    kinds = sorted(r["kind"] for r in want)
    assert kinds.count("undo") == 6
    # two records folded into a change of their archive (an HUPAFT, a remainder): no row of
    # their own, their records and bytes counted in the change's row
    assert len(want) == len(stream(rows)) - 2 + 1         # (+ the open transaction's state)
    by_pos = {r["position"]: r for r in rows}
    multi = [r for r in want if r["kind"] == "change" and r["n_records"] > 1]
    assert sum(r["n_records"] - 1 for r in multi) == 2
    for r in multi:
        own = by_pos[r["position"]]["n_bytes"]
        assert r["n_bytes"] > own and r["n_bytes"] - own < 200
    for arch in {r["archive_file"] for r in rows}:
        assert sum(r["n_bytes"] for r in want if r["archive_file"] == arch) == \
            sum(r["n_bytes"] for r in rows if r["archive_file"] == arch)
    assert [r["rule"] for r in want if r["kind"] == "control" and r["n_records"]].count(
        "clr_without_work") == 2
    assert any(r["rule"] == "remainder_of_earlier_file" for r in want)
    state = [json.loads(r["message"]) for r in want if r["rule"] == RS.STATE_RULE]
    assert [s["user"] for s in state] == ["cy"] and state[0]["fold"]["owner"].startswith("00000029")


def test_quarantined_records_keep_archive_offset_and_class():
    rows = clean_night()
    # a broken link and an unknown table in transaction 1, through the per-row rules
    i = next(j for j, r in enumerate(rows) if r["record_type"] == "HDELETE")
    rows[i] = {**rows[i], "link": 5}
    k = next(j for j, r in enumerate(rows) if r["record_type"] == "HINSERT")
    rows[k] = {**rows[k], "flag": RS.UNKNOWN_TABLE_FLAG, "schema_name": None, "table_name": None}
    want = same(rows)
    q = sorted((r["archive_file"], r["record_offset"], r["error_class"]) for r in want
               if r["kind"] == "quarantine")
    assert q == sorted([(rows[i]["archive_file"], rows[i]["record_offset"], "broken_chain"),
                        (rows[k]["archive_file"], rows[k]["record_offset"], "unknown_table")])
    assert all(rows[i]["archive_file"] in r["message"] for r in want if r["kind"] == "quarantine")


# ----------------------------------------------------------------- on Spark

@pytest.mark.spark
def test_resolve_transactions_on_spark_equals_the_rows_on_adversarial_nights(spark):
    """The hook (repartition, sort, the columnar step) == ``resolve_rows``, night after
    night."""
    from dblog.decode import spark_event_schema

    schema = spark_event_schema().add("from_state", "boolean")
    log = Log(17)
    held = []
    for night in range(3):
        archives = [(f"{SOURCE}/x/{n}", d) for n, d in log.night(2, 150)]
        rows = held + records(archives, "UTC")
        rows += [{**r, "source": "other_informix"} for r in rows if night == 1]
        want = RS.resolve_rows(rows)
        df = spark.createDataFrame(pa.Table.from_pylist(rows, schema=SCHEMA).to_pandas(), schema)
        got = [r.asDict() for r in RS.resolve_transactions(df).collect()]

        def norm(r):
            return {k: (v.replace(tzinfo=None) if isinstance(v, _dt.datetime) else v)
                    for k, v in r.items()}
        got, want_n = sorted(map(norm, got), key=_key), sorted(map(norm, want), key=_key)
        assert len(got) == len(want_n)
        for g, w in zip(got, want_n):
            assert g == w, {k: (g[k], w[k]) for k in w if g.get(k) != w[k]}
        held = RS.held_after(want)


@pytest.mark.parametrize("from_files", [True, False])
@pytest.mark.spark
def test_the_hook_is_one_exchange_and_one_python_step_with_raw_hex(spark, tmp_path, from_files):
    """One exchange (by source and xid) and the Python step once: a folded record's bytes go
    to its change in the same partition. A quarantined record's raw_hex equals the per-row
    rules': events read from Parquet files leave ``seg_data`` out of the stream and the
    quarantined rows take it from the files; events made in memory carry it through."""
    import re

    import pyarrow.parquet as pq

    from dblog.decode import spark_event_schema

    schema = spark_event_schema().add("from_state", "boolean")
    rows = records([(f"{SOURCE}/x/{n}", d) for n, d in Log(5).night(2, 120)], "UTC")
    want = RS.resolve_rows(rows)
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    if from_files:
        # two files, small row groups: the lookup reads only the groups that may hold a key
        half = table.num_rows // 2
        for i, part in enumerate((table.slice(0, half), table.slice(half))):
            pq.write_table(part, tmp_path / f"part-{i}.parquet", row_group_size=50)
        (tmp_path / "notes.parquet").write_bytes(b"not parquet")    # unreadable: skipped
        df = spark.read.schema(schema).parquet(*[str(tmp_path / f"part-{i}.parquet")
                                                 for i in range(2)])
    else:
        df = spark.createDataFrame(table.to_pandas(), schema)
    out = RS.resolve_transactions(df)
    got = {(r["archive_file"], r["record_index"]): r["raw_hex"] for r in out.collect()
           if r["kind"] == "quarantine"}
    quarantined = {(r["archive_file"], r["record_index"]): r["raw_hex"] for r in want
                   if r["kind"] == "quarantine"}
    assert got == quarantined
    assert sum(1 for r in want if r["error_class"] in ("broken_chain", "unknown_table")
               and r["raw_hex"]) >= 2
    spark.conf.set("spark.sql.debug.maxToStringFields", "100")    # every column named
    try:
        ex = out._jdf.queryExecution().executedPlan()
        plan = (ex.executedPlan() if ex.nodeName() == "AdaptiveSparkPlan" else ex).toString()
    finally:
        spark.conf.unset("spark.sql.debug.maxToStringFields")
    assert plan.count("MapInArrow") == 1, plan
    assert plan.count("Exchange") == 1 and "ReusedExchange" not in plan, plan
    stream_in = re.search(r"MapInArrow .*?\[([^\]]*)\]", plan).group(1)
    assert ("seg_data" in stream_in) is not from_files, stream_in


def test_raw_hex_from_files_reads_only_the_groups_that_may_hold_a_key(tmp_path, monkeypatch):
    """The lookup of the quarantined records' raw bytes: by (archive_file, record_index),
    the first ``RAW_HEX_LIMIT`` bytes as hex; a key in no file keeps a null raw_hex; a row
    group whose statistics exclude every key is not read, nor a file that is not Parquet."""
    import pyarrow.parquet as pq

    from decoders.events import RAW_HEX_LIMIT

    n = 1000
    t = pa.table({"archive_file": ["a/x_40.txt"] * n, "record_index": list(range(n)),
                  "seg_data": [bytes([i % 256]) * (300 if i == 150 else 3) for i in range(n)],
                  "other": list(range(n))})
    pq.write_table(t, tmp_path / "e.parquet", row_group_size=100)
    pq.write_table(t.set_column(0, "archive_file", pa.array(["b/x_41.txt"] * n)),
                   tmp_path / "f.parquet", row_group_size=100)
    (tmp_path / "g.parquet").write_bytes(b"garbage")
    files = [str(tmp_path / n_) for n_ in ("e.parquet", "f.parquet", "g.parquet")]
    q = pa.table({"archive_file": ["a/x_40.txt", "b/x_41.txt", "a/x_40.txt", "c/x_42.txt"],
                  "record_index": [150, 160, 170, 155], "raw_hex": pa.nulls(4, pa.string())})
    read = []
    real = pq.ParquetFile.read_row_groups
    monkeypatch.setattr(pq.ParquetFile, "read_row_groups",
                        lambda self, groups, **kw: read.append(list(groups)) or real(self, groups, **kw))
    out = RS.raw_hex_from_files(q, files).column("raw_hex").to_pylist()
    assert out == [(bytes([150]) * RAW_HEX_LIMIT).hex(), (bytes([160]) * 3).hex(),
                   (bytes([170]) * 3).hex(), None]
    # keys 150..170: only group 1 (rows 100-199) of each of the two Parquet files
    assert read == [[1], [1]]
    # keys far apart: only the groups that hold one (not the range between them)
    read.clear()
    q2 = pa.table({"archive_file": ["a/x_40.txt", "a/x_40.txt"], "record_index": [5, 905],
                   "raw_hex": pa.nulls(2, pa.string())})
    out = RS.raw_hex_from_files(q2, files).column("raw_hex").to_pylist()
    assert out == [(bytes([5]) * 3).hex(), (bytes([905 % 256]) * 3).hex()]
    assert read == [[0], [9]]                  # (f holds other archives: not read)


@pytest.mark.parametrize("wait_rows", [1, 65536])
def test_the_python_step_attaches_raw_hex_from_files_in_bounded_lookups(tmp_path, monkeypatch,
                                                                        wait_rows):
    """The mapInArrow function on a stream without ``seg_data``: the quarantined rows get
    the per-row rules' raw_hex from the events' files, whether they are looked up once at
    the partition's end or every ``RAW_WAIT_ROWS``; the other rows are the columnar step's."""
    import pyarrow.parquet as pq

    rows = records([(f"{SOURCE}/x/{n}", d) for n, d in Log(5).night(2, 120)], "UTC")
    want = RS.resolve_rows(rows)
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    pq.write_table(table, tmp_path / "part-0.parquet", row_group_size=64)
    todo = pa.Table.from_pylist(stream(rows), schema=SCHEMA).drop_columns(["seg_data"])
    monkeypatch.setattr(RS, "RAW_WAIT_ROWS", wait_rows)
    out = [r for b in RS._resolve_partition(iter(todo.to_batches(max_chunksize=100)),
                                            files=(str(tmp_path / "part-0.parquet"),))
           for r in b.to_pylist()]
    q = {(r["archive_file"], r["record_index"]): r["raw_hex"] for r in out if r["kind"] == "quarantine"}
    assert q == {(r["archive_file"], r["record_index"]): r["raw_hex"] for r in want
                 if r["kind"] == "quarantine" and (r["archive_file"], r["record_index"]) in q}
    assert len(q) >= 2 and all(q.values())
    assert len(out) == len(list(RS.resolve_stream(stream(rows))))     # every row, once
