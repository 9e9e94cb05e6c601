"""A format's hook on files (dblog/ordering/filehook.py; Informix's ``resolve_table``): the
same rows as the per-row rules and as the DataFrame hook, whatever the buckets; the buckets'
key; the split's bound; and ``dblog run`` on Informix nights with open transactions carried
from night to night publishes the same with the file hook as with the DataFrame hook."""

from __future__ import annotations

import datetime as _dt
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dblog.ordering import filehook
from decoders.events import EVENT_SCHEMA
from decoders.informix import resolve as RS
from tests.test_informix_resolve import SOURCE, records
from tests.test_informix_resolve_columns import SCHEMA, Log, _key


def _norm(rows):
    out = []
    for r in rows:
        out.append({k: (v.replace(tzinfo=None) if isinstance(v, _dt.datetime) else v)
                    for k, v in r.items()})
    return sorted(out, key=_key)


def _nights(seed, n_nights=3, files=2, n=120):
    """Night after night of adversarial Informix rows (two sources on the second night), with
    the rows the held-state step keeps from the night before: [(rows, want)]."""
    log = Log(seed)
    held, out = [], []
    for night in range(n_nights):
        archives = [(f"{SOURCE}/x/{name}", d) for name, d in log.night(files, n)]
        rows = held + records(archives, "UTC")
        if night == 1:
            rows += [{**r, "source": "other_informix"} for r in rows]
        want = RS.resolve_rows(rows)
        out.append((rows, want))
        held = RS.held_after(want)
    return out


def test_bucket_count_follows_the_rows_and_the_cores():
    assert filehook.bucket_count(0, 2) == 1
    assert filehook.bucket_count(150_000, 2) == 2        # one per core once each gets 100k
    assert filehook.bucket_count(150_000, 8) == 2
    assert filehook.bucket_count(2_476_380, 2) == 6      # at most 500k rows each, 2 per round
    assert filehook.bucket_count(2_476_380, 1) == 5
    assert filehook.bucket_count(2_476_380, 8) == 8
    assert filehook.bucket_count(25_000_000, 2) == 50
    assert filehook.bucket_count(25_000_000, 3) == 51


def test_a_key_goes_to_one_bucket_in_any_batch_and_rows_without_one_to_the_rest():
    n = 7
    a = pa.record_batch({"source": ["s1", "s2", "s1", None, "s1"], "xid": [5, 5, None, 5, -3]})
    b = pa.record_batch({"source": pa.array(["s1", "s2"]).dictionary_encode(), "xid": [5, 5]})
    ba, bb = filehook.buckets_of(a, "xid", n, 3), filehook.buckets_of(b, "xid", n, 4)
    assert ba[0] == bb[0] and ba[1] == bb[1] and ba[4] in range(n)
    assert ba[2] == 3 and ba[3] == 3                      # no key, no source: the rest's bucket
    xids = pa.record_batch({"source": ["s"] * 7000, "xid": list(range(7000))})
    counts = [int((filehook.buckets_of(xids, "xid", n, 0) == k).sum()) for k in range(n)]
    assert counts == [1000] * n


@pytest.mark.parametrize("seed", [3, 11])
def test_resolve_table_equals_the_rows_in_any_order_and_any_buckets(seed):
    """``resolve_table`` sorts what it is given: rows shuffled, split into buckets by
    ``buckets_of`` and resolved bucket by bucket give ``resolve_rows``' rows."""
    rng = random.Random(seed)
    for rows, want in _nights(seed):
        shuffled = list(rows)
        rng.shuffle(shuffled)
        table = pa.Table.from_pylist(shuffled, schema=SCHEMA)
        for n in (1, 3):
            got = []
            for batch in table.to_batches(max_chunksize=10_000):
                b = filehook.buckets_of(batch, "xid", n, 0)
                for k in range(n):
                    part = pa.Table.from_batches([batch.filter(pa.array(b == k))])
                    got += [r for out in RS.resolve_table(part) for r in out.to_pylist()]
            assert _norm(got) == _norm(want)


def _write_night(folder, rows, held):
    """The night's rows as two decoded events files (``EVENT_SCHEMA``, no ``from_state``,
    small row groups) and the held rows as a state file (no ``source``, as the held-state
    step writes them): the file hook's inputs."""
    folder.mkdir(parents=True)
    tonight = pa.Table.from_pylist([r for r in rows if not r["from_state"]], schema=SCHEMA) \
        .select(EVENT_SCHEMA.names)
    half = tonight.num_rows // 2
    inputs = []
    for i, part in enumerate((tonight.slice(0, half), tonight.slice(half))):
        path = folder / f"part-{i:05d}.parquet"
        pq.write_table(part, path, row_group_size=40)
        inputs.append({"path": str(path), "source": None, "from_state": False})
    for source in sorted({r["source"] for r in held}):
        mine = pa.Table.from_pylist([r for r in held if r["source"] == source], schema=SCHEMA)
        path = folder / f"held-{source}.parquet"
        pq.write_table(mine.drop_columns(["source", "from_state"]), path)
        inputs.append({"path": str(path), "source": source, "from_state": True})
    return inputs


def _read(folder):
    return pq.ParquetDataset(str(folder)).read().to_pylist() if any(folder.iterdir()) else []


@pytest.mark.spark
def test_the_file_hook_equals_the_rules_night_after_night(spark, tmp_path, monkeypatch):
    """Split and resolve in Python tasks, several buckets: every column of every row as
    ``resolve_rows`` (raw_hex of quarantined records from the events files), and the split's
    files are gone afterwards."""
    monkeypatch.setattr(filehook, "MIN_BUCKET_ROWS", 50)
    for night, (rows, want) in enumerate(_nights(7)):
        held = [r for r in rows if r["from_state"]]
        inputs = _write_night(tmp_path / f"in{night}", rows, held)
        out, work = tmp_path / f"out{night}", tmp_path / f"work{night}"
        out.mkdir()
        n = filehook.run(spark, "informix", inputs, out, work, len(rows))
        got = _read(out)
        assert n == len(got) == len(want)
        cores = spark.sparkContext.defaultParallelism
        assert len(list(out.glob("part-informix-*.parquet"))) == \
            filehook.bucket_count(len(rows), cores) >= 2
        assert _norm(got) == _norm(want)
        assert any(r["kind"] == "quarantine" and r["raw_hex"] for r in want)
        assert not list(work.iterdir())


@pytest.mark.spark
def test_a_bucket_too_big_stops_the_file_hook_before_it_writes(spark, tmp_path, monkeypatch):
    rows, _ = _nights(1, n_nights=1)[0]
    inputs = _write_night(tmp_path / "in", rows, [])
    monkeypatch.setattr(filehook, "MAX_BUCKET_ROWS", 20)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(filehook.TooBig, match="too many rows"):
        filehook.run(spark, "informix", inputs, out, tmp_path / "work", len(rows))
    assert not list(out.iterdir()) and not list((tmp_path / "work").iterdir())


def test_the_file_hook_needs_the_decodes_record_of_its_units(tmp_path):
    from dblog.decode import UNITS_FILE
    from dblog.ordering import stage

    manifest = {"sources": [{"name": "a", "format": "informix"}, {"name": "b", "format": "rdb"}]}
    assert stage._file_inputs(manifest, tmp_path, "informix") is None
    (tmp_path / UNITS_FILE).write_text('{"units": [{"source": "a", "file": "part-00000.parquet"},'
                                       ' {"source": "b", "file": "part-00001.parquet"}]}')
    assert stage._file_inputs(manifest, tmp_path, "informix") == [
        {"path": str(tmp_path.resolve() / "events" / "part-00000.parquet"), "source": None,
         "from_state": False}]
    (tmp_path / UNITS_FILE).write_text('{"units": [{"source": "a"}]}')
    assert stage._file_inputs(manifest, tmp_path, "informix") is None


@pytest.mark.spark
def test_dblog_run_publishes_the_same_with_the_file_hook_and_the_dataframe_hook(
        spark, tmp_path, monkeypatch):
    """Two Informix nights (transactions open across them, a damaged record): the published
    datasets and the held state with the file hook equal those with the DataFrame hook,
    which the ordering runs when a repeated position was marked in the events (``marked``:
    the hook must see the marks) and when a bucket is too big. When the decode could not
    prove that no position repeats, the search runs and, finding none, the file hook is
    still tried (``searched``)."""
    from chispa import assert_df_equality

    from dblog.ordering import stage
    from tests.conftest import write_config
    from tests.test_pipeline import run, synth

    config = write_config(tmp_path, [{"name": "wms_informix", "format": "informix",
                                      "timezone": "America/Chicago"}])
    dates = ["2026-11-05", "2026-11-06"]
    calls = []
    real_run = filehook.run

    def counted(*a, **k):
        calls.append(a[1])
        return real_run(*a, **k)

    monkeypatch.setattr(filehook, "run", counted)
    roots = {}
    for how in ("files", "marked", "searched"):
        root = roots[how] = tmp_path / how
        synth(config, root, dates[0], days=2, trx=60, seed=6)
        night = root / "landing" / "wms_informix" / dates[1]
        archive = sorted(night.iterdir())[0]
        data = bytearray(archive.read_bytes())
        data[len(data) // 2] = ord("#")
        archive.write_bytes(bytes(data))

    def marked(spark_, ev, manifest, unique=False):
        return ev.select("*")          # another frame: as when rows were marked

    for how, root in roots.items():
        with monkeypatch.context() as m:
            if how == "marked":
                m.setattr(stage, "quarantine_duplicate_positions", marked)
            if how == "searched":
                m.setattr(stage, "unique_sources", lambda manifest, run_dir: set())
                m.setattr(filehook, "MAX_BUCKET_ROWS", 10)
            before = len(calls)
            for d in dates:
                assert run(config, root, d) == 0
            assert len(calls) - before == (0 if how == "marked" else 2)
    for ds in ("changes", "transactions", "audit", "quarantine"):
        frames = {how: spark.read.parquet(str(root / "published" / ds)).drop("run_id")
                  for how, root in roots.items()}
        assert frames["files"].count() > 0
        assert_df_equality(frames["files"], frames["marked"], ignore_row_order=True,
                           ignore_column_order=True)
        assert_df_equality(frames["files"], frames["searched"], ignore_row_order=True,
                           ignore_column_order=True)
    for d in dates:
        held = {how: sorted(map(str, pq.ParquetDataset(
            str(root / "published" / "state" / "wms_informix" / d / "held")).read().to_pylist()))
            for how, root in roots.items()}
        assert held["files"] == held["marked"] == held["searched"]
    assert held["files"], "the generator leaves transactions open"
