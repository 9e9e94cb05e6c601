"""The transactions pass on files (``dblog/ordering/trxfiles.py``) against the same pass in
Spark (``transactions.transaction_counts(..., buckets=True)``): on random nights written as
files of every role, and through ``dblog run`` on the sample night's six sources."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dblog.ordering import filehook, segfiles, trxfiles

from tests.test_ordering_steps import TS, _random_audit_night, events, same

TRX_COLS = ["source", "trx_id", "format", "status", "commit_position", "commit_ts", "user",
            "begin_position", "capture_off", "undone", "event_count"]


def _files(tmp, rows: list[dict]):
    """The random night as the pass's inputs: tonight's rows in two events files, the rows
    ``from_state`` as a held-state file of source s1 (no ``source`` column; the others'
    held rows stay in an events-like file read with ``from_state`` from its column)."""
    from decoders.events import EVENT_SCHEMA

    def table(rs, schema):
        return pa.table({f.name: pa.array([r.get(f.name) for r in rs], f.type) for f in schema})

    tmp.mkdir(parents=True)
    rows = [{"record_offset": 0, "record_index": 0, **r} for r in rows]
    tonight = [r for r in rows if not r["from_state"]]
    held_s1 = [r for r in rows if r["from_state"] and r["source"] == "s1"]
    held_other = [r for r in rows if r["from_state"] and r["source"] != "s1"]
    half = len(tonight) // 2
    pq.write_table(table(tonight[:half], EVENT_SCHEMA), tmp / "part-0.parquet")
    pq.write_table(table(tonight[half:], EVENT_SCHEMA), tmp / "part-1.parquet")
    held_schema = pa.schema([f for f in EVENT_SCHEMA if f.name != "source"])
    pq.write_table(table(held_s1, held_schema), tmp / "held-s1.parquet")
    with_state = EVENT_SCHEMA.append(pa.field("from_state", pa.bool_()))
    pq.write_table(table(held_other, with_state), tmp / "resolved.parquet")
    seg = pa.table({"source": ["s1", "s2", "s1"], "trx_id": ["4", "5", None],
                    "kind": ["change", "change", "change"], "position": ["0007", "0011", "0001"]})
    pq.write_table(seg, tmp / "segments.parquet")
    return [
        {"path": str(tmp / "part-0.parquet"), "role": "rows", "source": None, "from_state": False,
         "fid": 0},
        {"path": str(tmp / "part-1.parquet"), "role": "rows", "source": None, "from_state": False,
         "fid": 1},
        {"path": str(tmp / "held-s1.parquet"), "role": "rows", "source": "s1", "from_state": True,
         "fid": 2},
        {"path": str(tmp / "resolved.parquet"), "role": "rows", "source": None, "from_state": None,
         "fid": 3},
        {"path": str(tmp / "segments.parquet"), "role": "segments", "source": None,
         "from_state": False, "fid": 4},
    ]


def _published_in_order(inputs, out):
    """The pass's published changes (``_part=pub``) checked against the rows they name:
    per transaction, ``event_seq`` 1..n in the order of ``sequence.event_seq``'s keys
    (nulls first); returns {(source, trx_id): n}."""
    rows = {}
    for x in inputs:
        t = pq.read_table(x["path"]).to_pylist()
        for i, r in enumerate(t):
            rows[(x["fid"], i)] = r
    pub = pa.concat_tables([pq.read_table(f) for f in filehook.parquet_files(out / trxfiles.PUB_PART)])
    by_trx = {}
    for p in pub.to_pylist():
        r = rows[(p["_fid"], p["_row"])]
        assert r["kind"] == "change" and r["trx_id"] == p["trx_id"]
        by_trx.setdefault((p["source"], p["trx_id"]), []).append((p["event_seq"], r))

    def key(r):
        k = r.get("trx_order") if r.get("trx_order") is not None else r.get("position")
        return tuple((v is not None, v) for v in (k, r.get("position"), r.get("archive_file"),
                                                   r.get("record_index")))

    for changes in by_trx.values():
        changes.sort(key=lambda c: c[0])
        assert [c[0] for c in changes] == list(range(1, len(changes) + 1))
        keys = [key(c[1]) for c in changes]
        assert keys == sorted(keys)
    return {k: len(v) for k, v in by_trx.items()}


@pytest.mark.spark
def test_the_pass_on_files_equals_the_pass_in_spark(spark, tmp_path):
    """Random nights of every kind (held rows, reassembled changes, a compensated change,
    rows of no transaction): the transactions and the audit's buckets the pass on files
    writes equal those of the Spark pass over the same rows, in one bucket or many."""
    from pyspark.sql import functions as F

    from dblog.ordering.transactions import TRX_COUNTS_DDL, transaction_counts

    for seed in (4, 9):
        rows = [{**r, "commit_ts": TS if r.get("trx_end") == "commit" else None}
                for r in _random_audit_night(seed)]
        inputs = _files(tmp_path / f"in{seed}", rows)
        ev = events(spark, rows)
        re_df = spark.createDataFrame([("s1", "4", "0007"), ("s2", "5", "0011")],
                                      "source STRING, trx_id STRING, position STRING")
        want = transaction_counts(ev, re_df, buckets=True).cache()
        want_trx = want.filter(F.col("_part") == "trx").select(*TRX_COLS)
        want_b = want.filter(F.col("_part") == "audit") \
            .groupBy("source", "format", "archive_file", "bucket") \
            .agg(F.sum("n_records").alias("n"), F.sum("n_bytes").alias("nb"))
        for n_rows in (10, 10_000_000):        # one bucket; 20 buckets
            out = tmp_path / f"out{seed}-{n_rows}"
            _, n = trxfiles.run(spark, inputs, out, tmp_path / "work", n_rows)
            got_trx = spark.read.schema(TRX_COUNTS_DDL).parquet(str(out / trxfiles.TRX_PART))
            assert n == got_trx.count() == want_trx.count() > 60
            same(got_trx, want_trx, TRX_COLS)
            # the published changes: as many per transaction as its event_count, in order
            counts = {(r["source"], r["trx_id"]): r["event_count"]
                      for r in want_trx.collect() if r["event_count"]}
            assert _published_in_order(inputs, out) == counts and len(counts) > 10
            got_b = spark.read.parquet(str(out / trxfiles.AUDIT_PART)) \
                .groupBy("source", "format", "archive_file", "bucket") \
                .agg(F.sum("n_records").alias("n"), F.sum("n_bytes").alias("nb"))
            assert got_b.count() > 20
            same(got_b, want_b)
            assert not list((tmp_path / "work").iterdir())
        want.unpersist()


@pytest.mark.spark
def test_the_pass_on_files_leaves_out_the_rows_a_hook_replaced(spark, tmp_path):
    """``exclude`` leaves out a format's rows, ``scoped`` those in its hook's scope (the Db2
    LUW v10 undo rows: ``kind = undo`` and a 32-digit position), as ``hooks.hooked_rows``."""
    from dblog.ordering.transactions import TRX_COUNTS_DDL

    v10 = "0" * 31 + "9"
    rows = [
        {"source": "s1", "format": "db2luw", "trx_id": "1", "kind": "change", "position": "0" * 32},
        {"source": "s1", "format": "db2luw", "trx_id": "1", "kind": "undo", "position": v10,
         "undo_of": "0" * 32},
        {"source": "s1", "format": "db2luw", "trx_id": "1", "kind": "commit", "position": "1" * 32,
         "trx_end": "commit", "commit_position": "1" * 32},
        {"source": "s2", "format": "informix", "trx_id": "7", "kind": "change", "position": "5"},
        {"source": "s3", "format": "rdb", "trx_id": "8", "kind": "undo", "position": v10,
         "undo_of": "x"},
    ]
    tmp = tmp_path / "in"
    tmp.mkdir()
    from decoders.events import EVENT_SCHEMA
    pq.write_table(pa.table({f.name: pa.array([r.get(f.name) for r in rows], f.type)
                             for f in EVENT_SCHEMA}), tmp / "part-0.parquet")
    spec = {"path": str(tmp / "part-0.parquet"), "role": "rows", "source": None,
            "from_state": False, "exclude": ["informix"], "scoped": ["db2luw"], "fid": 0}
    trxfiles.run(spark, [spec], tmp_path / "out", tmp_path / "work", 5)
    got = {(r["source"], r["trx_id"]): (r["event_count"], r["undone"]) for r in
           spark.read.schema(TRX_COUNTS_DDL).parquet(str(tmp_path / "out" / trxfiles.TRX_PART))
           .collect()}
    # s1's undo row is the hook's (left out here): its change is published; s2 is gone; s3's
    # undo row is of another format, kept
    assert got == {("s1", "1"): (1, None), ("s3", "8"): (0, ["x"])}


@pytest.mark.spark
def test_a_transaction_too_big_stops_the_pass_on_files_before_it_writes(spark, tmp_path,
                                                                        monkeypatch):
    inputs = _files(tmp_path / "in", _random_audit_night(2))
    monkeypatch.setattr(filehook, "MAX_BUCKET_ROWS", 5)
    with pytest.raises(filehook.TooBig, match="one transaction has too many rows"):
        trxfiles.run(spark, inputs, tmp_path / "out", tmp_path / "work", 10)
    assert not filehook.parquet_files(tmp_path / "out")
    assert not list((tmp_path / "work").iterdir())


@pytest.mark.spark
def test_dblog_run_publishes_the_same_with_the_pass_on_files_and_in_spark(spark, tmp_path,
                                                                          monkeypatch):
    """The sample night's six sources (every format; Db2 LUW v10 with the scoped DataFrame
    hook, Informix with the hook on files, Log Master with segments), two nights with
    transactions open across them and a damaged archive: every published dataset and the
    held state are the same with the reassembly and the transactions pass on files and in
    Spark, which runs after the passes on files found a group or a transaction too big."""
    import shutil

    import yaml
    from chispa import assert_df_equality

    from dblog.ordering import stage
    from tests.test_pipeline import run, synth

    from tests.conftest import REPO, write_config

    doc = yaml.safe_load((REPO / "include" / "sources.yaml").read_text())
    config = write_config(tmp_path, [{k: v for k, v in s.items() if k != "catalog"}
                                     for s in doc["sources"]])
    dates = ["2026-11-05", "2026-11-06"]
    calls, hooked, in_spark = [], [], []
    real_run, real_inputs = trxfiles.run, stage.trx_inputs
    real_counts = stage.transaction_counts

    def counted(*a, **k):
        calls.append(1)
        return real_run(*a, **k)

    def inputs(manifest, run_dir, work, report, segments, files):
        hooked.append((dict(report), segments))
        return real_inputs(manifest, run_dir, work, report, segments, files)

    def spark_pass(*a, **k):
        in_spark.append(1)
        return real_counts(*a, **k)

    monkeypatch.setattr(trxfiles, "run", counted)
    monkeypatch.setattr(stage, "trx_inputs", inputs)
    monkeypatch.setattr(stage, "transaction_counts", spark_pass)
    segs = []
    real_seg = segfiles.run

    def seg_run(*a, **k):
        try:
            out = real_seg(*a, **k)
        except filehook.TooBig:
            segs.append(False)
            raise
        segs.append(True)
        return out

    monkeypatch.setattr(segfiles, "run", seg_run)
    roots = {"files": tmp_path / "files"}
    synth(config, roots["files"], dates[0], days=2, trx=40, seed=3)
    night = roots["files"] / "landing" / "pos_solid" / dates[1]
    archive = sorted(night.iterdir())[0]
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] = ord("#")
    archive.write_bytes(bytes(data))
    roots["too_big"] = tmp_path / "too_big"
    shutil.copytree(roots["files"], roots["too_big"])
    for how, root in roots.items():
        with monkeypatch.context() as m:
            if how == "too_big":        # the pass on files gives up: the Spark pass runs
                m.setattr(filehook, "MAX_BUCKET_ROWS", 30)
            before = len(calls), len(in_spark)
            for d in dates:
                assert run(config, root, d) == 0
            assert len(calls) - before[0] == 2, how
            assert len(in_spark) - before[1] == (0 if how == "files" else 2), how
    # the Informix hook ran on files, the Db2 LUW v10 hook on DataFrames (its scope's rows
    # left out of the files), the Log Master groups were reassembled
    # (each night: the inputs of the reassembly, then with the groups for the pass)
    assert [seg for _, seg in hooked[:4]] == [False, True, False, True], hooked
    assert all(h["on_files"] == ["informix"] and h["on_frames"] == ["db2luw"]
               for h, _ in hooked[:4]), hooked
    assert segs == [True, True, False, False]       # the reassembly on files, then in Spark
    for ds in ("changes", "transactions", "audit", "quarantine"):
        frames = {how: spark.read.parquet(str(root / "published" / ds)).drop("run_id")
                  for how, root in roots.items()}
        assert frames["files"].count() > 0
        assert_df_equality(frames["files"], frames["too_big"], ignore_row_order=True,
                           ignore_column_order=True)
    sources = [s["name"] for s in doc["sources"]]
    for d in dates:
        held = {}
        for how, root in roots.items():
            held[how] = {s: sorted(map(str, pq.ParquetDataset(
                str(root / "published" / "state" / s / d / "held")).read().to_pylist()))
                for s in sources if (root / "published" / "state" / s / d / "held").exists()}
        assert held["files"] == held["too_big"]
    assert any(held["files"].values()), "the generator leaves transactions open"


@pytest.mark.spark
def test_the_groups_on_files_are_those_of_segment_groups(spark):
    """``segfiles.groups`` against ``segments.segment_groups`` on pieces of every shape: a
    complete group given out of order, a missing piece, a piece twice, totals that
    disagree, a null total, a null ``seg_num``, a null piece of bytes, a null ``seg_key``,
    two sources with the same key."""
    from dblog.ordering.segments import HEADER, segment_groups

    def piece(key, num, total, data=b"x", source="s1", **kw):
        return {"source": source, "kind": "segment", "seg_key": key, "seg_num": num,
                "seg_total": total, "seg_data": data, "position": f"{key}-{num}", **kw}

    rows = [
        piece("a", 2, 3, b"BB"), piece("a", 1, 3, b"AA", trx_id="7"), piece("a", 3, 3, b"CC"),
        piece("b", 1, 2), piece("c", 1, 2), piece("c", 1, 2), piece("c", 2, 2),
        piece("d", 1, 2), piece("d", 2, 3), piece("e", 1, None), piece("f", None, 1),
        piece("g", 1, 2, None), piece("g", 2, 2), piece(None, 1, 1, b"N"),
        piece("a", 1, 1, b"Z", source="s2"),
    ]
    ev = events(spark, rows)
    want = {(r["source"], r["seg_key"]): r.asDict() for r in segment_groups(ev).collect()}
    from decoders.events import EVENT_SCHEMA
    types = {f.name: f.type for f in EVENT_SCHEMA}
    full = [{"record_offset": i * 10, "record_index": i, "n_records": 1, "format": "soliddb",
             "archive_file": "s1/2026-11-01/a.csv", **r} for i, r in enumerate(rows)]
    table = pa.table({c: pa.array([r.get(c) for r in full], t)
                      for c, t in [(c, types[c]) for c in HEADER] + [("seg_data", pa.binary())]})
    got = {(r["source"], r["seg_key"]): r for r in segfiles.groups(table).to_pylist()}
    assert set(got) == set(want) and len(got) == 9
    for k in want:
        assert got[k]["complete"] == want[k]["complete"], k
        assert got[k]["data"] == (None if want[k]["data"] is None else bytes(want[k]["data"])), k
        # (c has piece 1 twice: which of the two heads the group, min_by does not define)
        for c in ("position", "trx_id", "record_index", "seg_total") if k != ("s1", "c") else ():
            assert got[k][c] == want[k][c], (k, c)
    assert got[("s1", "a")]["data"] == b"AABBCC" and got[("s1", "a")]["trx_id"] == "7"


@pytest.mark.spark
def test_the_ranking_on_files_equals_spark_one_range_partition(spark, tmp_path):
    """``trxfiles.rank_file`` (one Python task) against ``sequence.rank_in_partitions`` with
    one range partition and the stage's small table: random transactions of three sources
    in five buckets (an empty one among them), every status, commit positions shared by
    several transactions, trx ids whose byte order differs from their numbers' and from
    their characters' (``é`` after ``z``): the same ``seq_part`` and ``seq_local`` per
    transaction, the same rows per (seq_part, source)."""
    import random

    from pyspark.sql import functions as F

    from dblog.ordering import sequence
    from dblog.ordering.transactions import TRX_COUNTS_SCHEMA

    rnd = random.Random(11)
    ids = ["9", "10", "z1", "é1", "Z", "a", "ab", "b"]
    rows = []
    for i in range(3000):
        status = rnd.choice(["committed", "committed", "committed", "rolled_back", "open"])
        rows.append({"source": rnd.choice(["s1", "s2", "ß3"]),
                     "trx_id": f"{rnd.choice(ids)}{i}",
                     "format": "rdb", "status": status,
                     "commit_position": f"{rnd.randrange(40):04d}" if status == "committed"
                     else None,
                     "commit_ts": None, "user": None, "begin_position": None,
                     "capture_off": False, "undone": [],
                     "event_count": rnd.choice([0, 1, 3]) if status == "committed" else 0})
    pass_dir = tmp_path / "pass" / trxfiles.TRX_PART
    pass_dir.mkdir(parents=True)
    for b in range(5):
        mine = [r for i, r in enumerate(rows) if i % 4 == b] if b < 4 else []
        if b == 2:
            continue                    # a bucket without transactions writes no file
        pq.write_table(pa.Table.from_pylist(mine, schema=TRX_COUNTS_SCHEMA),
                       pass_dir / f"part-{b:05d}.parquet")
    small = trxfiles.rank(spark, tmp_path / "pass", 5, tmp_path / "trx")
    got = spark.read.schema(trxfiles.RANKED_DDL).parquet(str(tmp_path / "trx"))
    assert got.count() == 3000 - len([i for i in range(3000) if i % 4 == 2])
    trx = spark.createDataFrame([r for i, r in enumerate(rows) if i % 4 != 2],
                                schema=got.drop("seq_part", "seq_local", "_bucket").schema)
    ranked = sequence.rank_in_partitions(trx.filter(sequence.numbered(trx)), 1)
    rest = trx.filter(~sequence.numbered(trx)).withColumn("seq_part", F.lit(None).cast("int")) \
        .withColumn("seq_local", F.lit(None).cast("long"))
    want = ranked.unionByName(rest)
    same(got.drop("_bucket"), want, [*TRX_COLS, "seq_part", "seq_local"])
    assert got.filter(F.col("seq_part") == 0).count() > 700
    # every transaction in its pass's bucket
    assert {(r["trx_id"], r["_bucket"]) for r in got.select("trx_id", "_bucket").collect()} \
        == {(r["trx_id"], i % 4) for i, r in enumerate(rows) if i % 4 != 2}
    want_small = want.groupBy("seq_part", "source").agg(
        F.count(F.lit(1)).alias("n"), F.min("seq_local").alias("first_local"),
        F.sum(F.when(F.col("seq_part").isNotNull(), F.col("event_count")).otherwise(0))
        .alias("n_changes"),
        F.sum(F.when(F.col("status") == "open", 1).otherwise(0)).alias("n_open")).collect()
    key = lambda r: (r["seq_part"] is None, r["seq_part"] or 0, r["source"])  # noqa: E731
    assert sorted(small, key=key) == sorted([r.asDict() for r in want_small], key=key)


@pytest.mark.spark
def test_the_split_takes_the_audits_other_rows_the_lost_archives_and_the_quarantine(spark,
                                                                                   tmp_path):
    """``trxfiles.Side``: what the split tasks take beside the pass equals what the Spark
    steps scan the night for: the audit's buckets of the rows read tonight without a
    transaction (``audit.other_buckets``'s rows, summed), the lost archives (the first
    message of a ``LOST_CLASSES`` quarantine row, ``complete_audit``) and the quarantine
    rows (``decoder_quarantine`` and ``orphan_quarantine``); random nights with held rows,
    rows a hook replaced left out."""
    import random

    from pyspark.sql import functions as F

    from dblog.decode import LOST_CLASSES
    from dblog.ordering.audit import BUCKET_COLUMNS, NARROW, _counted
    from dblog.ordering.classify import QUARANTINED, other_bucket
    from dblog.ordering.quarantine import decoder_quarantine, orphan_quarantine, quarantine

    for seed in (5, 13):
        rnd = random.Random(seed)
        rows = []
        for i, r in enumerate(_random_audit_night(seed)):
            r = {**r, "record_offset": 7 * i, "record_index": i}
            if r["kind"] == "quarantine":
                r = {**r, "error_class": rnd.choice([*LOST_CLASSES, "bad_record", None]),
                     "message": rnd.choice([f"m{rnd.randrange(9)}", None]),
                     "raw_hex": rnd.choice(["0A1B", None])}
            rows.append({**r, "commit_ts": TS if r.get("trx_end") == "commit" else None})
        inputs = _files(tmp_path / f"in{seed}", rows)
        # the rdb rows of the first file replaced by a hook (left out, as in the pass)
        inputs[0] = {**inputs[0], "exclude": ["rdb"]}
        # (``_files``: the first file holds the first half of tonight's rows)
        tonight = [i for i, r in enumerate(rows) if not r["from_state"]]
        first_half = set(tonight[:len(tonight) // 2])
        kept = [r for i, r in enumerate(rows) if i not in first_half or r["format"] != "rdb"]
        ev = events(spark, kept)
        side = tmp_path / f"side{seed}"
        trxfiles.run(spark, inputs, tmp_path / f"out{seed}", tmp_path / "work", 10, side)

        def read(part):
            folder = side / part
            files = filehook.parquet_files(folder) if folder.is_dir() else []
            return spark.read.schema(trxfiles.SIDE_DDL[part]).parquet(*files) if files \
                else spark.createDataFrame([], trxfiles.SIDE_DDL[part])

        kind = F.col("kind")
        want_other = _counted(ev).filter(F.col("trx_id").isNull()).select(*NARROW) \
            .withColumn("bucket", F.when(kind == "change", F.lit(QUARANTINED)).otherwise(
                other_bucket(kind, F.col("rule"), F.lit(None).cast("string")))) \
            .select(*BUCKET_COLUMNS)
        agg = [F.sum("n_records").alias("n"), F.sum("n_bytes").alias("nb")]
        keys = ["source", "format", "archive_file", "bucket"]
        want = want_other.groupBy(*keys).agg(*agg)
        assert want.count() > 10
        same(read("other").groupBy(*keys).agg(*agg), want)
        want_q = quarantine(decoder_quarantine(ev), orphan_quarantine(ev.filter(kind == "change")))
        assert want_q.count() > 20
        same(read("quarantine"), want_q)
        lost = ev.filter(~F.col("from_state") & (kind == "quarantine")
                         & F.col("error_class").isin(*LOST_CLASSES))
        got_lost = {(r["source"], r["archive_file"]): r["message"] for r in read("lost").collect()}
        want_lost: dict = {}
        for r in lost.collect():
            want_lost.setdefault((r["source"], r["archive_file"]), set()).add(r["message"])
        assert set(got_lost) == set(want_lost) and len(got_lost) > 3
        assert all(got_lost[k] in want_lost[k] for k in got_lost)


@pytest.mark.spark
def test_the_audit_in_the_driver_equals_the_spark_audit(spark):
    """``nightfiles.audit_rows`` against ``audit.audit`` then ``accounting.complete_audit``:
    random buckets (skip rules, a null rule's null bucket, null counts, archives the
    manifest does not list, listed archives without rows), lost archives with their loss
    accepted or not, and the landing zone's ignored, refused and duplicate files."""
    import random

    from pyspark.sql import functions as F

    from dblog.accounting import complete_audit
    from dblog.ordering import nightfiles
    from dblog.ordering.audit import audit
    from dblog.ordering.schema import AUDIT_COLUMNS, AUDIT_DDL

    rnd = random.Random(7)
    archives = [(s, f, f"{s}/a{i}.log") for s, f in (("s1", "rdb"), ("s2", "soliddb"))
                for i in range(6)]
    manifest = {"run_id": "r1", "date": "2026-11-05", "sources": [
        {"name": s, "format": f,
         "archives": [{"file": a, "size": 1000 + i, "accept_loss": i % 2 == 0}
                      for i, (s2, _, a) in enumerate(archives) if s2 == s],
         "landing": [{"file": f"{s}/x.tmp", "status": "ignored", "size": 5, "reason": "not an archive"},
                     {"file": f"{s}/y.log", "status": "duplicate", "size": 9,
                      "duplicate_of": f"{s}/a1.log", "reason": "same bytes"},
                     {"file": f"{s}/z.log", "status": "refused", "size": 3, "reason": "é" * 1200}]}
        for s, f in (("s1", "rdb"), ("s2", "soliddb"))]}
    buckets = []
    for _ in range(300):
        s, f, a = rnd.choice(archives[:-2] + [("s1", "rdb", "s1/unlisted.log")])
        buckets.append({"source": s, "format": f, "archive_file": a,
                        "bucket": rnd.choice(["published", "control", "held_open", "quarantined",
                                              "skipped:nop", "skipped:ddl", None]),
                        "n_records": rnd.choice([None, 0, 1, 2, 5]),
                        "n_bytes": rnd.choice([None, 10, 300])})
    lost = {("s1", "s1/a0.log"): "unreadable: gone", ("s2", "s2/a1.log"): "decoder failed",
            ("s2", "s2/a3.log"): "x" * 1500}
    order = [x.split(" ", 1)[0] for x in AUDIT_DDL.split(", ")]
    got = spark.createDataFrame([tuple(r[c] for c in order)
                                 for r in nightfiles.audit_rows(manifest, buckets, lost)], AUDIT_DDL)
    ddl = "source STRING, format STRING, archive_file STRING, bucket STRING, n_records LONG, " \
          "n_bytes LONG"
    rows = spark.createDataFrame([tuple(b[c] for c in ("source", "format", "archive_file",
                                                      "bucket", "n_records", "n_bytes"))
                                  for b in buckets], ddl)
    listed = spark.createDataFrame(archives, "source STRING, format STRING, archive_file STRING")
    lost_df = spark.createDataFrame([(s, a, m) for (s, a), m in lost.items()],
                                    "source STRING, archive_file STRING, message STRING")
    night = {"run_id": F.lit("r1"), "date": F.lit("2026-11-05")}
    want = complete_audit(spark, manifest, audit(rows, listed).withColumns(night), None,
                          AUDIT_COLUMNS, lost=lost_df)
    assert want.count() == len(archives) + 6
    assert want.filter(F.col("skipped_by_rule") != "{}").count() > 4
    same(got, want, AUDIT_COLUMNS)


@pytest.mark.spark
def test_the_pieces_buckets_on_files_equal_segment_buckets(spark, tmp_path):
    """``segfiles.write_pieces`` (each piece with its group's outcome, routed to the bucket
    of the transaction its bucket depends on) then ``trxfiles._piece_buckets`` against
    ``classify.segment_buckets`` and ``quarantine.segment_quarantine``: random pieces of
    groups decoded into a change, failed or incomplete, pieces of no group, held pieces,
    transactions open, rolled back, captured off or undoing the change, transaction ids
    missing: the same audit sums of tonight's pieces and the same quarantine rows."""
    import random

    from pyspark.sql import functions as F

    from dblog.ordering import segfiles
    from dblog.ordering.classify import QUARANTINED, segment_buckets
    from dblog.ordering.quarantine import quarantine, segment_quarantine
    from dblog.ordering.transactions import TRX_COUNTS_SCHEMA

    rnd = random.Random(17)
    trx_ids = [str(i) for i in range(25)]
    trx_rows = [{"source": s, "trx_id": t, "format": "lldf",
                 "status": rnd.choice(["committed", "committed", "open", "rolled_back"]),
                 "commit_position": None, "commit_ts": None, "user": None, "begin_position": None,
                 "capture_off": rnd.choice([False, False, True, None]),
                 "undone": rnd.choice([[], None, [f"{rnd.randrange(8):03d}", None]]),
                 "event_count": 0}
                for s in ("s1", "s2") for t in trx_ids[:20]]
    trx = pa.Table.from_pylist(trx_rows, schema=TRX_COUNTS_SCHEMA)
    outcomes = []
    for s in ("s1", "s2"):
        for k in range(30):
            kind = rnd.choice(["change", "change", "quarantine", None])
            outcomes.append({"source": s, "seg_key": f"k{k}", "kind": kind,
                             "trx_id": rnd.choice([*trx_ids, None]),
                             "position": f"{rnd.randrange(8):03d}",
                             "error_class": "bad_record" if kind == "quarantine" else None,
                             "message": rnd.choice(["it failed", None]) if kind == "quarantine"
                             else None,
                             "complete": rnd.choice([True, True, False, None])})
    pieces = []
    for i in range(400):
        s = rnd.choice(["s1", "s2"])
        pieces.append({"source": s, "seg_key": rnd.choice([f"k{rnd.randrange(34)}", None]),
                       "trx_id": rnd.choice([*trx_ids, None]), "kind": "segment",
                       "format": "lldf", "archive_file": rnd.choice(["a.dat", "b.dat"]),
                       "record_offset": 11 * i, "seg_num": rnd.choice([1, 2, 3, None]),
                       "seg_total": rnd.choice([3, None]), "n_records": rnd.choice([1, 1, 0, None]),
                       "n_bytes": rnd.randrange(400),
                       "seg_data": rnd.choice([None, bytes(rnd.randrange(256) for _ in
                                                           range(rnd.randrange(300)))]),
                       "from_state": rnd.random() < 0.2})
    table = pa.Table.from_pylist(pieces, schema=segfiles.PIECE_SCHEMA)
    out_t = pa.Table.from_pylist(outcomes, schema=pa.schema(
        [segfiles.GROUP_SCHEMA.field(c) for c in segfiles.OUTCOME_COLUMNS]))
    routed, side = tmp_path / "routed", tmp_path / "side"
    segfiles.write_pieces(table, [out_t], {"pieces_out": str(routed), "trx_buckets": 4,
                                          "bucket": 0})
    got = [trxfiles._piece_buckets({"pieces": str(routed), "bucket": b, "side": str(side)}, trx,
                                   f"part-{b:05d}.parquet") for b in range(4)]
    got_audit = pa.concat_tables(got).to_pylist()
    # Spark
    ev_schema = "source STRING, seg_key STRING, trx_id STRING, kind STRING, format STRING, " \
                "archive_file STRING, record_offset LONG, seg_num INT, seg_total INT, " \
                "n_records INT, n_bytes LONG, seg_data BINARY, from_state BOOLEAN"
    names = [x.split(" ")[0] for x in ev_schema.split(", ")]
    p_df = spark.createDataFrame([tuple(p[c] for c in names) for p in pieces], ev_schema)
    g_df = spark.createDataFrame([tuple(o[c] for c in segfiles.OUTCOME_COLUMNS) for o in outcomes],
                                 "source STRING, seg_key STRING, kind STRING, trx_id STRING, "
                                 "position STRING, error_class STRING, message STRING, "
                                 "complete BOOLEAN")
    t_df = spark.createDataFrame([tuple(r[c] for c in ("source", "trx_id", "status", "capture_off",
                                                       "undone")) for r in trx_rows],
                                 "source STRING, trx_id STRING, status STRING, capture_off BOOLEAN, "
                                 "undone ARRAY<STRING>")
    b = segment_buckets(p_df, g_df, t_df)
    want = b.filter(~F.col("from_state")).groupBy("source", "format", "archive_file", "bucket") \
        .agg(F.sum("n_records").cast("long").alias("n"), F.sum("n_bytes").cast("long").alias("nb"))
    got_sum: dict = {}
    for r in got_audit:
        k = (r["source"], r["format"], r["archive_file"], r["bucket"])
        n, nb = got_sum.get(k, (None, None))
        add = lambda x, y: y if x is None else (x if y is None else x + y)  # noqa: E731
        got_sum[k] = (add(n, r["n_records"]), add(nb, r["n_bytes"]))
    want_sum = {(r["source"], r["format"], r["archive_file"], r["bucket"]): (r["n"], r["nb"])
                for r in want.collect()}
    assert got_sum == want_sum
    assert len({k[3] for k in want_sum}) >= 5
    want_q = quarantine(segment_quarantine(b))
    got_q = spark.read.schema(trxfiles.SIDE_DDL["quarantine"]).parquet(str(side / "quarantine"))
    assert want_q.count() > 30 and b.filter(F.col("bucket") == QUARANTINED).count() == want_q.count()
    same(got_q, want_q)


@pytest.mark.spark
def test_the_sequence_step_writes_the_transactions_the_spark_ranking_writes(spark, tmp_path):
    """With the night's transactions to write, the ranking task writes only the numbered
    transactions' sequence columns (from its sort keys) and each sequence task writes its
    bucket's transactions: the same rows as Spark's ``with_commit_seq`` on the ranked
    transactions, published ones numbered from each source's base, a bucket without
    published changes included."""
    import random

    from pyspark.sql import functions as F

    from dblog.ordering import sequence
    from dblog.ordering.transactions import TRX_COUNTS_SCHEMA

    rnd = random.Random(5)
    rows = []
    for i in range(1200):
        status = rnd.choice(["committed", "committed", "rolled_back", "open"])
        rows.append({"source": rnd.choice(["s1", "s2"]), "trx_id": f"t{i}", "format": "rdb",
                     "status": status,
                     "commit_position": f"{rnd.randrange(300):05d}" if status == "committed"
                     else None,
                     "commit_ts": None, "user": "u", "begin_position": None,
                     "capture_off": False, "undone": [],
                     "event_count": rnd.choice([0, 2]) if status == "committed" else 0})
    pass_dir = tmp_path / "pass"
    (pass_dir / trxfiles.TRX_PART).mkdir(parents=True)
    (pass_dir / trxfiles.PUB_PART).mkdir(parents=True)
    for b in range(3):
        pq.write_table(pa.Table.from_pylist([r for i, r in enumerate(rows) if i % 3 == b],
                                            schema=TRX_COUNTS_SCHEMA),
                       pass_dir / trxfiles.TRX_PART / f"part-{b:05d}.parquet")
    # bucket 1 publishes no change: its transactions are written all the same
    for b in (0, 2):
        pq.write_table(trxfiles.PUB_SCHEMA.empty_table(),
                       pass_dir / trxfiles.PUB_PART / f"part-{b:05d}.parquet")
    out = tmp_path / "transactions"
    small = trxfiles.rank(spark, pass_dir, 3, tmp_path / "trx", out)
    base = {"s1": 100, "s2": 0}
    offsets = sequence.partition_offsets(
        [(r["seq_part"], r["source"], r["n"], r["first_local"]) for r in small
         if r["seq_part"] is not None], base)
    trxfiles.sequence(spark, pass_dir, tmp_path / "trx", offsets, 3, tmp_path / "seq", out,
                      "run1", "2026-11-01")
    got = spark.read.parquet(str(out))
    trx = spark.createDataFrame(rows, schema=spark.read.schema(trxfiles.TRX_COUNTS_DDL)
                                .parquet(str(pass_dir / trxfiles.TRX_PART)).schema)
    ranked = sequence.rank_in_partitions(trx.filter(sequence.numbered(trx)), 1).unionByName(
        trx.filter(~sequence.numbered(trx)).withColumn("seq_part", F.lit(None).cast("int"))
        .withColumn("seq_local", F.lit(None).cast("long")))
    want = sequence.with_commit_seq(ranked, offsets).filter(F.col("status") != "open")
    cols = ["source", "trx_id", "commit_seq", "status", "commit_position", "event_count"]
    assert got.count() == want.count() == len([r for r in rows if r["status"] != "open"])
    assert sorted(map(tuple, got.select(*cols).collect())) == \
        sorted(map(tuple, want.select(*cols).collect()))
    assert got.filter("source = 's1'").agg(F.min("commit_seq")).first()[0] == 101
    assert {r["run_id"] for r in got.select("run_id").collect()} == {"run1"}


@pytest.mark.spark
def test_pieces_routed_to_a_bucket_without_rows_are_still_bucketed(spark, tmp_path):
    """A segment piece whose transaction has no row tonight is routed to that transaction's
    bucket, which then holds no row of the pass: its summarise task runs all the same and
    the piece is counted (quarantined: no transaction to follow) and quarantined, not
    lost."""
    from decoders.events import EVENT_SCHEMA

    n = 2
    rows_file = tmp_path / "events.parquet"
    base = {"source": "s1", "format": "lldf", "archive_file": "a.dat", "n_records": 1,
            "n_bytes": 10, "trx_id": "T1"}
    pq.write_table(pa.Table.from_pylist([
        {**base, "record_offset": 0, "record_index": 0, "kind": "begin", "position": "01"},
        {**base, "record_offset": 10, "record_index": 1, "kind": "change", "position": "02"},
        {**base, "record_offset": 20, "record_index": 2, "kind": "commit", "position": "03",
         "trx_end": "commit", "commit_position": "03"}], schema=EVENT_SCHEMA), rows_file)
    bucket = lambda t: int(trxfiles.buckets_of(pa.record_batch(  # noqa: E731
        [pa.array(["s1"]), pa.array([t])], names=["source", "trx_id"]), n)[0])
    other = next(t for t in (f"T{i}" for i in range(2, 50)) if bucket(t) != bucket("T1"))
    piece = {"source": "s1", "seg_key": "k1", "trx_id": other, "kind": "segment",
             "format": "lldf", "archive_file": "a.dat", "record_offset": 30, "seg_num": 1,
             "seg_total": 2, "n_records": 1, "n_bytes": 7, "seg_data": b"\x01\x02",
             "from_state": False}
    routed = tmp_path / "routed"
    routed.mkdir()
    (routed / segfiles.PIECES_BUCKETS).write_text(str(n))
    segfiles.write_pieces(pa.Table.from_pylist([piece], schema=segfiles.PIECE_SCHEMA), [],
                          {"pieces_out": str(routed), "trx_buckets": n, "bucket": 0})
    assert (routed / f"_b={bucket(other)}").is_dir()
    out, side = tmp_path / "pass", tmp_path / "side"
    # (about 200,000 rows: two buckets on two cores)
    got_n, _ = trxfiles.run(spark, [{"path": str(rows_file), "role": "rows", "source": None,
                                     "from_state": False, "fid": 0}],
                            out, tmp_path, 200_000, side, routed)
    assert got_n == n
    audit = pa.concat_tables([pq.read_table(f) for f in filehook.parquet_files(
        out / trxfiles.AUDIT_PART)]).to_pylist()
    assert {(r["bucket"], r["n_records"], r["n_bytes"]) for r in audit
            if r["archive_file"] == "a.dat" and r["n_bytes"] == 7} == {("quarantined", 1, 7)}
    q = pa.concat_tables([pq.read_table(f) for f in filehook.parquet_files(
        side / "quarantine")]).to_pylist()
    assert [(r["record_offset"], r["error_class"]) for r in q] == [(30, "incomplete_segments")]
