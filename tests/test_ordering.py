"""Transaction ordering across formats and nights (issue 7), through `dblog run`.

Every expectation comes from the generators (what they wrote), never from the decoders.
"""

from __future__ import annotations

import datetime as dt

import pytest

from dblog.paths import DataRoot
from dblog.synthcmd import read_expected
from decoders.soliddb import encoder as E
from decoders.soliddb import layout as L

from .conftest import REPO, write_config
from .test_pipeline import KEYS, published, read, run, synth

pytestmark = pytest.mark.spark

SOURCES = [
    {"name": "pos_solid", "format": "soliddb"},
    {"name": "erp_db2", "format": "db2luw", "options": {"byte_order": "big", "codepage": "utf-8"}},
    # Db2 10.1-12.1 (layout v10) in both byte orders (SPEC section 3), one catalog
    {"name": "hr_db2v10", "format": "db2luw", "options": {"layout": "v10", "byte_order": "big"}},
    {"name": "hr_db2v10_le", "format": "db2luw", "catalog": str(REPO / "include" / "catalogs" / "hr_db2v10.json"),
     "options": {"layout": "v10", "byte_order": "little"}},
    {"name": "wms_informix", "format": "informix", "timezone": "America/Chicago"},
    {"name": "fin_rdb", "format": "rdb", "timezone": "Europe/Berlin"},
    {"name": "core_zos", "format": "lldf", "options": {"codepage": "cp037", "rdw": True}},
]
DATES = ["2026-11-01", "2026-11-02", "2026-11-03"]


@pytest.fixture(scope="module")
def three_nights(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("formats")
    config = write_config(tmp, SOURCES)
    root = tmp / "data"
    synth(config, root, DATES[0], days=3, trx=40, seed=21)
    for d in DATES:
        assert run(config, root, d) == 0
    return config, root


@pytest.mark.parametrize("source", [s["name"] for s in SOURCES])
def test_every_format_publishes_what_the_generator_wrote(three_nights, source):
    _, root = three_nights
    seq = 1
    for d in DATES:
        rows = published(root, source, d)
        expected = read_expected(DataRoot(root), source, d)
        assert [{k: r[k] for k in KEYS} for r in rows] == [{k: e[k] for k in KEYS} for e in expected]
        assert [r["commit_ts"] and r["commit_ts"].isoformat() for r in rows] == \
            [e["commit_ts"] and dt.datetime.fromisoformat(e["commit_ts"]).replace(tzinfo=None).isoformat()
             for e in expected]
        seqs = sorted({r["commit_seq"] for r in rows})
        assert seqs == list(range(seq, seq + len(seqs))), f"{source} {d}: commit_seq continues"
        seq += len(seqs)
        for a in read(root / "published" / "audit", source=source, date=d):
            assert a["records_read"] == a["published"] + a["control"] + a["skipped"] \
                + a["held_open"] + a["quarantined"], a
            assert a["quarantined"] == 0


def test_each_transaction_published_once_on_the_night_of_its_commit(three_nights):
    _, root = three_nights
    for s in SOURCES:
        trx = read(root / "published" / "transactions", source=s["name"])
        keys = [t["trx_id"] for t in trx]
        assert len(keys) == len(set(keys)), f"{s['name']}: a transaction ended twice"
        changes = read(root / "published" / "changes", source=s["name"])
        nights_of = {}
        for c in changes:
            nights_of.setdefault(c["trx_id"], set()).add(c["date"])
        assert all(len(v) == 1 for v in nights_of.values())


def test_held_transactions_finish_later(three_nights):
    _, root = three_nights
    carried = 0
    for s in SOURCES:
        held_1 = {e["trx_id"] for e in read(root / "published" / "state" / s["name"] / DATES[0] / "held")}
        later = {t["trx_id"]: t["status"] for t in read(root / "published" / "transactions", source=s["name"])
                 if t["date"] in DATES[1:]}
        carried += len(held_1 & set(later))
    assert carried > 0, "some transactions open at the end of night 1 end on a later night"


def test_open_transaction_later_rolled_back_publishes_nothing(three_nights):
    _, root = three_nights
    ended = []
    for s in SOURCES:
        for d0, d1 in zip(DATES, DATES[1:]):
            held = {e["trx_id"] for e in read(root / "published" / "state" / s["name"] / d0 / "held")}
            for t in read(root / "published" / "transactions", source=s["name"], date=d1):
                if t["trx_id"] in held and t["status"] == "rolled_back":
                    ended.append((s["name"], t["trx_id"]))
                    assert t["commit_seq"] is None and t["event_count"] == 0
    published_ids = {(c["source"], c["trx_id"]) for c in read(root / "published" / "changes")}
    assert not set(ended) & published_ids


# --------------------------------------------------------------- hand-made solidDB nights

def _archive(root, date, rows):
    night = root / "landing" / "pos_solid" / date
    night.mkdir(parents=True, exist_ok=True)
    (night / "sys_log.csv").write_bytes(E.write_archive(rows))


def test_nights_without_commits_and_transactions_spanning_three_nights(spark, tmp_path):
    """T1 begins on night 1, changes on night 2, commits on night 3; night 2 has no commit at all."""
    import json
    config = write_config(tmp_path, [{"name": "pos_solid", "format": "soliddb"}])
    root = tmp_path / "data"
    from decoders.catalog import load_catalog
    from decoders.synth import render

    cat = load_catalog(REPO / "include" / "catalogs" / "pos_solid.json")
    names = cat.table("10003")
    row = lambda i: [i, f"name{i}", "city        "]  # noqa: E731
    ins = lambda trx, a, i: E.csv_row(L.INSERT, trx, trx, 10003, 1, E.logaddr(a), E.encode_row(names, row(i)))  # noqa: E731
    _archive(root, DATES[0], [E.csv_row(L.TRX_START, 1, 1, None, 0, E.logaddr(1), None), ins(1, 2, 1),
                              E.csv_row(L.TRX_START, 2, 2, None, 0, E.logaddr(3), None), ins(2, 4, 2),
                              E.csv_row(L.COMMIT, 2, 2, None, 0, E.logaddr(5), None)])
    _archive(root, DATES[1], [ins(1, 6, 3), E.csv_row(L.TRX_START, 3, 3, None, 0, E.logaddr(7), None),
                              ins(3, 8, 4)])
    _archive(root, DATES[2], [E.csv_row(L.COMMIT, 3, 3, None, 0, E.logaddr(9), None), ins(1, 10, 5),
                              E.csv_row(L.COMMIT, 1, 1, None, 0, E.logaddr(11), None)])
    for d in DATES:
        assert run(config, root, d) == 0
    n1, n2, n3 = (published(root, "pos_solid", d) for d in DATES)
    assert [(r["trx_id"], r["commit_seq"], r["event_seq"]) for r in n1] == [("2", 1, 1)]
    assert n2 == []
    assert [(r["trx_id"], r["commit_seq"], r["event_seq"], json.loads(r["after"])["NAME_ID"]) for r in n3] == \
        [("3", 2, 1, 4), ("1", 3, 1, 1), ("1", 3, 2, 3), ("1", 3, 3, 5)]
    assert n3[1]["after"] == render(names, row(1))
    audit2 = read(root / "published" / "audit", source="pos_solid", date=DATES[1])
    assert [(a["records_read"], a["held_open"]) for a in audit2] == [(3, 3)]
    trx2 = read(root / "published" / "transactions", source="pos_solid", date=DATES[1])
    assert trx2 == []
