"""Mirrors and net changes (SPEC section 5, "Change products") over three nights of every
format, compared with the state each generator knows it wrote (``decoders.synth.KeyedState``:
the generator's own values, applied by key in commit order), never with decoder output.

The nights cover keys moved by an update, a delete then a re-insert of the same key in one
night (``p_reinsert``), truncates (db2luw, lldf), transactions held open across a night,
Rdb's ``m`` upserts of live rows, an ``initial_snapshot`` (erp_db2 ERP.ORDERS) and a
source with ``mirror_retention: 2`` whose rerun of a night past the retention keeps what
was published. Informix (no row images) gets no mirror.
"""

from __future__ import annotations

import datetime as _dt
import json
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from decoders import get as get_format
from decoders.synth import default_value, render

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parent.parent
DATES = ["2026-11-01", "2026-11-02", "2026-11-03"]
TRX = 50
SNAPSHOT_TABLE = ("erp_db2", "2.5")          # ERP.ORDERS is seeded from an initial_snapshot
SNAPSHOT_ROWS = 40
RETENTION_SOURCE = "pos_solid"               # mirror_retention: 2


def _sources() -> list[dict]:
    return yaml.safe_load((REPO / "include" / "sources.yaml").read_text())["sources"]


def _arrow_type(col):
    import pyarrow as pa

    t = col.type
    return {"TINYINT": pa.int16(), "SMALLINT": pa.int16(), "INTEGER": pa.int32(),
            "BIGINT": pa.int64(), "DOUBLE": pa.float64(), "DATE": pa.date32(),
            "TIMESTAMP": pa.timestamp("us"), "BINARY": pa.binary(), "VARBINARY": pa.binary()}.get(
        t, pa.decimal128(col.precision, col.scale or 0) if t == "DECIMAL"
        else pa.float32() if t == "REAL" or (t == "FLOAT" and col.length == 4)
        else pa.float64() if t == "FLOAT" else pa.string())


def _write_snapshot(path: Path, table, rows: list[list]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = {}
    for i, c in enumerate(table.columns):
        vals = [r[i] for r in rows]
        if c.type == "TIME":
            vals = [None if v is None else v.strftime("%H:%M:%S") for v in vals]
        elif c.type in ("REAL", "DOUBLE", "FLOAT"):
            vals = [None if v is None else float(v) for v in vals]
        arrays[c.name] = pa.array(vals, _arrow_type(c))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(arrays), path)


@pytest.fixture(scope="module")
def world(spark, tmp_path_factory):
    """Three nights of the five sample sources, generated here and run with ``run_night``.
    After each night the published mirrors (generic rows), net changes and the staged
    mirror stats are read back, so that a later night's retention cannot hide them."""
    import random

    from pyspark.sql import functions as F

    from dblog.config import load_config
    from dblog.pipeline import run_night

    top = tmp_path_factory.mktemp("mirror")
    root = top / "data"
    items = []
    for s in _sources():
        item = dict(s)
        item["catalog"] = str(REPO / "include" / "catalogs" / f"{s['name']}.json")
        if s["name"] == RETENTION_SOURCE:
            item["mirror_retention"] = 2
        items.append(item)
    # erp_db2's catalog with an initial snapshot for ERP.ORDERS (relative to the catalog)
    cat = json.loads((REPO / "include" / "catalogs" / "erp_db2.json").read_text())
    for t in cat["tables"]:
        if t["id"] == SNAPSHOT_TABLE[1]:
            t["initial_snapshot"] = "snapshots/orders.parquet"
    (top / "catalogs").mkdir()
    (top / "catalogs" / "erp_db2.json").write_text(json.dumps(cat))
    next(i for i in items if i["name"] == "erp_db2")["catalog"] = str(top / "catalogs" / "erp_db2.json")
    config = top / "sources.yaml"
    config.write_text(yaml.safe_dump({"sources": items}))
    cfg = load_config(config)

    gens, nights = {}, {}
    for i, src in enumerate(cfg.sources):
        kw = {"p_reinsert": 0.4} if src.format != "rdb" else {}
        if src.format in ("db2luw", "lldf"):
            kw["p_truncate"] = 0.04
        gen = get_format(src.format).Synth(src.name, catalog=src.catalog(), options=src.options,
                                           seed=11 + i, timezone=src.timezone, **kw)
        if src.name == SNAPSHOT_TABLE[0]:
            table = gen.catalog.table(SNAPSHOT_TABLE[1])
            rng = random.Random(5)
            snap = []
            for _ in range(SNAPSHOT_ROWS):
                row = [default_value(c, rng) for c in table.columns]
                row[0] = rng.randint(1, 2**31 - 1)
                snap.append(row)
            _write_snapshot(top / "catalogs" / "snapshots" / "orders.parquet", table, snap)
            for row in snap:      # the generator's table starts as the snapshot
                gen.state.rows[table.id][gen.state.key(table.id, row)] = (row, None, None, None)
                gen.planner.rows[table.id].append(row)
        gens[src.name] = gen
        nights[src.name] = []
        first = _dt.date.fromisoformat(DATES[0])
        for k in range(len(DATES)):
            out = gen.night(first + _dt.timedelta(days=k), TRX)
            land = root / "landing" / src.name / DATES[k]
            land.mkdir(parents=True)
            for name, data in out.archives.items():
                (land / name).write_bytes(data)
            nights[src.name].append({
                "out": out, "missing": dict(gen.state.missing),
                "named": {(tid, gen.state.key_text(tid, key)): list(v)
                          for (tid, key), v in gen.state.named.items()}})

    seen: dict = {"mirror": {}, "net": {}, "stats": {}, "summary": {}, "results": {}}
    published = root / "published"
    for date in DATES:
        result = run_night(date, str(config), str(root), spark=spark)
        assert result.published, result.failures
        seen["results"][date] = result
        run_dir = root / "staging" / result.run_id
        for r in spark.read.parquet(str(run_dir / "mirror_stats")).collect():
            seen["stats"][(date, r["source"], r["table_id"])] = r.asDict()
        seen["summary"][date] = json.loads((run_dir / "mirror_summary.json").read_text())
        mirror = published / "mirror"
        for folder in sorted(mirror.glob(f"*/*/date={date}/_rows")):
            source, table = folder.parent.parent.parent.name, folder.parent.parent.name
            rows = spark.read.parquet(*[str(f) for f in folder.glob("*.parquet")]).collect()
            seen["mirror"][(date, source, table)] = [r.asDict() for r in rows]
        net = spark.read.parquet(str(published / "net_changes")).filter(F.col("date") == date)
        for r in net.collect():
            seen["net"].setdefault((date, r["source"]), []).append(r.asDict())
    return {"root": root, "config": config, "cfg": cfg, "gens": gens, "nights": nights,
            "seen": seen, "top": top}


def _commit_seqs(world, source: str) -> dict[tuple, int]:
    """(trx_id, commit_position) -> commit_seq, from the generator's expected changes of the
    nights in order (a transaction's number is its rank in commit order over the nights)."""
    seqs, n = {}, 0
    for night in world["nights"][source]:
        for e in night["out"].expected:
            who = (e.trx_id, e.commit_position)
            if who not in seqs:
                n += 1
                seqs[who] = n
    return seqs


def _expected_mirror(world, source: str, k: int) -> dict[str, dict]:
    """table dir name -> {row text: (commit_seq, date)} as the generator wrote night k."""
    gen = world["gens"][source]
    seqs = _commit_seqs(world, source)
    out = {}
    for tid, rows in world["nights"][source][k]["out"].mirror.items():
        tab = gen.catalog.table(tid)
        if rows:
            out[tab.qualified_name] = {
                r["row"]: (seqs.get((r["trx_id"], r["commit_position"])), r["date"] if r["trx_id"] else None)
                for r in rows}
    return out


MIRRORED = ["pos_solid", "erp_db2", "fin_rdb", "core_zos"]


@pytest.mark.parametrize("source", MIRRORED)
def test_mirrors_equal_what_the_generator_wrote(world, source):
    for k, date in enumerate(DATES):
        want = _expected_mirror(world, source, k)
        got = {table: {r["row"]: (r["_commit_seq"], r["_date"]) for r in rows}
               for (d, s, table), rows in world["seen"]["mirror"].items() if d == date and s == source}
        assert got == want, f"{source} {date}"
        for (d, s, table), rows in world["seen"]["mirror"].items():
            if d == date and s == source:
                assert len({r["key"] for r in rows}) == len(rows), f"{source} {table} keys unique"


def test_scenarios_are_covered(world):
    """The nights hold what the mirror rules are about (else the comparisons prove little)."""
    moved = truncate = held = again = upsert_m = 0
    for source, nights in world["nights"].items():
        gen = world["gens"][source]
        if not gen.images():
            continue
        live: set = set()
        for night in nights:
            held += sum(1 for t in night["out"].trxs if t.outcome == "open")
            deleted = set()
            for e in night["out"].expected:
                if e.op == "t":
                    truncate += 1
                if e.op in ("ddl", "t") or e.table_id not in gen.state.tables:
                    continue
                kb = e.before and _key(gen, e.table_id, e.before)
                ka = e.after and _key(gen, e.table_id, e.after)
                if e.op == "u" and kb != ka:
                    moved += 1
                if e.op == "d":
                    deleted.add((e.table_id, kb))
                if e.op == "c" and (e.table_id, ka) in deleted:
                    again += 1
                if e.op == "m" and (e.table_id, ka) in live:
                    upsert_m += 1
                if ka:
                    live.add((e.table_id, ka))
    assert moved and truncate and held and again and upsert_m, (moved, truncate, held, again, upsert_m)


def _key(gen, table_id: str, image: str) -> str:
    tab = gen.catalog.table(table_id)
    row = json.loads(image)
    return json.dumps({k: row[k] for k in tab.key})


@pytest.mark.parametrize("source", MIRRORED)
def test_net_changes_equal_the_generators_changes(world, source):
    gen = world["gens"][source]
    seqs = _commit_seqs(world, source)
    prev: dict = {}
    for k, date in enumerate(DATES):
        night = world["nights"][source][k]
        now = {(tid, r["key"]): r["row"] for tid, rows in night["out"].mirror.items() for r in rows}
        if k == 0 and source == SNAPSHOT_TABLE[0]:
            tab = gen.catalog.table(SNAPSHOT_TABLE[1])
            prev = {(tab.id, gen.state.key_text(tab.id, gen.state.key(tab.id, v))): render(tab, v)
                    for v in _snapshot_rows(world)}
        want = {}
        for (tid, key), (n, first, last) in night["named"].items():
            before, after = prev.get((tid, key)), now.get((tid, key))
            if before is None and after is None:
                continue
            op = "u" if before is not None and after is not None else "c" if after is not None else "d"
            want[(tid, key)] = (op, before, after, seqs[first], seqs[last], n)
        got = {(r["table_id"], r["key"]): (r["net_op"], r["before"], r["after"], r["first_commit_seq"],
                                           r["last_commit_seq"], r["n_changes"])
               for r in world["seen"]["net"].get((date, source), [])}
        assert got == want, f"{source} {date}"
        prev = now


def _snapshot_rows(world):
    import pyarrow.parquet as pq

    tab = world["gens"][SNAPSHOT_TABLE[0]].catalog.table(SNAPSHOT_TABLE[1])
    t = pq.read_table(world["top"] / "catalogs" / "snapshots" / "orders.parquet")
    out = []
    for row in t.to_pylist():
        vals = []
        for c in tab.columns:
            v = row[c.name]
            if c.type == "TIME" and v is not None:
                v = _dt.time.fromisoformat(v)
            if c.type == "REAL" and v is not None:
                from decoders.codecs import Float4
                v = Float4(v)
            vals.append(v)
        out.append(vals)
    return out


@pytest.mark.parametrize("source", MIRRORED)
def test_net_changes_are_the_difference_of_consecutive_mirrors(world, source):
    """Read back from the published data alone: every key whose row differs between the
    mirrors of D-1 and D has its net change, with those rows; the other net changes are
    keys that ended the night as they started (``u``, before = after)."""
    seen = world["seen"]
    gen = world["gens"][source]
    for k, date in enumerate(DATES[1:], start=1):
        def rows(d):
            out = {}
            for (dd, s, table), rs in seen["mirror"].items():
                if dd == d and s == source:
                    tid = next(t.id for t in gen.catalog.tables if t.qualified_name == table)
                    out.update({(tid, r["key"]): r["row"] for r in rs})
            return out
        a, b = rows(DATES[k - 1]), rows(date)
        diff = {key: (a.get(key), b.get(key)) for key in set(a) | set(b) if a.get(key) != b.get(key)}
        net = {(r["table_id"], r["key"]): (r["before"], r["after"], r["net_op"])
               for r in seen["net"].get((date, source), [])}
        assert {key: v[:2] for key, v in net.items() if v[0] != v[1]} == diff, f"{source} {date}"
        for key, (before, after, op) in net.items():
            if before == after:
                assert op == "u" and before is not None, key
            assert op == ("c" if before is None else "d" if after is None else "u"), key


@pytest.mark.parametrize("source", MIRRORED)
def test_missing_base_counted_per_table(world, source):
    gen = world["gens"][source]
    for k, date in enumerate(DATES):
        want = {tid: n for tid, n in world["nights"][source][k]["missing"].items() if n}
        got = {tid: r["mirror_missing_base"] for (d, s, tid), r in world["seen"]["stats"].items()
               if d == date and s == source and r["mirror_missing_base"]}
        assert got == want, f"{source} {date}"
        rows = {tid: r["rows"] for (d, s, tid), r in world["seen"]["stats"].items()
                if d == date and s == source and r["rows"]}
        assert rows == {tid: len(v) for tid, v in world["nights"][source][k]["out"].mirror.items() if v}
    assert gen.images()


def test_typed_mirror_is_typed_like_the_tables(world, spark):
    """The typed columns hold the generator's values (read with Spark from the one path)."""
    from pyspark.sql import functions as F

    root = world["root"]
    gen = world["gens"]["erp_db2"]
    tab = gen.catalog.table(SNAPSHOT_TABLE[1])
    df = spark.read.parquet(str(root / "published" / "mirror" / "erp_db2" / tab.qualified_name))
    dtypes = dict(df.dtypes)
    assert dtypes["ORDER_ID"] == "int" and dtypes["AMOUNT"] == "decimal(11,2)"
    assert dtypes["UPDATED"] == "timestamp_ntz" and dtypes["DISCOUNT"] == "float"
    assert dtypes["_commit_seq"] == "bigint" and dtypes["_date"] == "string"
    assert "_rows" not in " ".join(df.columns) and "key" not in df.columns
    last = df.filter(F.col("date") == DATES[-1])
    want = {}
    for (vals, _trx, _pos, _d) in gen.state.rows[tab.id].values():
        want[vals[0]] = (vals[1], None if vals[3] is None else Decimal(vals[3]), vals[9])
    got = {r["ORDER_ID"]: (r["CUSTOMER_ID"], r["AMOUNT"], r["UPDATED"]) for r in last.collect()}
    assert got == want


def test_tables_without_a_mirror_are_listed_with_the_reason(world):
    summary = world["seen"]["summary"][DATES[0]]
    informix = summary["wms_informix"]["without_mirror"]
    assert {t["table_name"] for t in informix} == {"stock", "locations", "shipments", "picks"}
    assert all("row images" in t["reason"] for t in informix)
    assert not (world["root"] / "published" / "mirror" / "wms_informix").exists()


def test_retention_keeps_the_last_nights(world):
    root = world["root"]
    dates = {p.name for p in (root / "published" / "mirror" / RETENTION_SOURCE).glob("*/date=*")}
    assert dates == {f"date={d}" for d in DATES[1:]}
    dates = {p.name for p in (root / "published" / "mirror" / "erp_db2").glob("*/date=*")}
    assert dates == {f"date={d}" for d in DATES}
    nets = {p.name for p in (root / "published" / "net_changes" / f"source={RETENTION_SOURCE}").iterdir()}
    assert nets == {f"date={d}" for d in DATES}


def test_reruns_rebuild_from_the_previous_night_and_past_retention_keep_what_was_published(world, spark):
    from dblog.pipeline import run_night

    root, seen = world["root"], world["seen"]

    def now(date, source):
        out = {}
        for folder in (root / "published" / "mirror" / source).glob(f"*/date={date}/_rows"):
            out[folder.parent.parent.name] = sorted(
                (r["key"], r["row"], r["_commit_seq"], r["_date"])
                for r in spark.read.parquet(*[str(f) for f in folder.glob("*.parquet")]).collect())
        return out

    def before(date, source):
        return {t: sorted((r["key"], r["row"], r["_commit_seq"], r["_date"]) for r in rows)
                for (d, s, t), rows in seen["mirror"].items() if d == date and s == source}

    result = run_night(DATES[1], str(world["config"]), str(root), spark=spark)
    assert result.published, result.failures
    for source in MIRRORED:
        assert now(DATES[1], source) == before(DATES[1], source), source
        assert now(DATES[2], source) == before(DATES[2], source), source
    summary = json.loads((root / "staging" / result.run_id / "mirror_summary.json").read_text())
    assert summary[RETENTION_SOURCE]["previous"]["mode"] == "gone"      # night 1 is past retention
    assert summary["erp_db2"]["previous"] == {"mode": "chain", "date": DATES[0]}


def test_dblog_mirror_prints_the_path_and_rows(world):
    from tests.wap_nights import run_cli

    root, config = world["root"], world["config"]
    rc, out = run_cli("mirror", "--source", "erp_db2", "--table", "ERP.ORDERS", "--as-of", DATES[1],
                      "--show", "2", "--config", str(config), "--data-root", str(root))
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == str(root / "published" / "mirror" / "erp_db2" / "ERP.ORDERS" / f"date={DATES[1]}")
    assert "ORDER_ID" in lines[2] and "_commit_seq" in lines[2] and len(lines) == 5
    rc, out = run_cli("mirror", "--source", RETENTION_SOURCE, "--table", "ERP.ORDERS", "--as-of",
                      DATES[0], "--config", str(config), "--data-root", str(root))
    assert rc == 1
    rc, out = run_cli("mirror", "--source", "wms_informix", "--table", "wms.stock",
                      "--config", str(config), "--data-root", str(root))
    assert rc == 1


def test_report_shows_missing_bases_and_tables_without_a_mirror(world):
    reports = world["root"] / "reports"
    date = DATES[-1]
    page = (reports / date / "erp_db2.html").read_text()
    assert "<h2>Mirrors</h2>" in page and 'data-metric="mirror_missing_base"' in page
    want = world["nights"]["erp_db2"][-1]["missing"]
    for tid, n in want.items():
        name = world["gens"]["erp_db2"].catalog.table(tid).name
        assert f'<td data-metric="table_name">{name}</td><td data-metric="rows">' in page
    informix = (reports / date / "wms_informix.html").read_text()
    assert "Tables without a mirror" in informix and "row images" in informix
