"""IBM's published onlog output as golden inputs (tests/vendor/informix/PROVENANCE.md).

The expected rows are written by hand from the documents: record lines counted by eye, the
positions are ``<uniqid><addr>`` as 8 + 8 hex digits (SPEC section 3) of the addresses the
figures print, transactions are ``<uniqid>:<BEGIN addr>``. A missing document fails.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import pyarrow.dataset as pads
import pytest

from decoders.catalog import Catalog
from decoders.informix import layout as L
from decoders.informix.synth import Synth

VENDOR = Path(__file__).resolve().parent / "vendor" / "informix"
SBLOB_FIGURE = VENDOR / "ibm_adref261_figure24_sblob_1.txt"
HEADER_SAMPLE = VENDOR / "ibm_adr0357_header_sample_1.txt"
CATALOG = Synth("wms_informix").catalog
UTC = _dt.timezone.utc


def run(data: bytes, name: str, carry=None, tz: str = "UTC", catalog: Catalog = CATALOG):
    """One file decoded as the pipeline does (either place of the transaction rules)."""
    from tests.test_informix import run as run_file

    rows, out = run_file(data, name, carry, tz, catalog)
    return rows, {k: out[k] for k in ("version", "uniqid", "open")}


def pos(addr: int) -> str:
    return f"00000001{addr:08X}"


def test_sblob_figure_decodes_to_two_transactions_of_control_records():
    data = SBLOB_FIGURE.read_bytes()
    rows, carry = run(data, SBLOB_FIGURE.name)
    t1, t2 = "1:c8018", "1:c83c4"
    committed = _dt.datetime(1998, 7, 13, 10, 23, 5, tzinfo=UTC)
    sblob = [(line, "control", "sblob", trx, pos(a)) for line, trx, a in [
        (5, t1, 0xc8040), (6, t1, 0xc8148), (7, t1, 0xc8174), (8, t1, 0xc81b8), (9, t1, 0xc82c0),
        (10, t1, 0xc82ec), (11, t1, 0xc8330), (12, t1, 0xc8368),
        (15, t2, 0xc83ec), (16, t2, 0xc84f4), (17, t2, 0xc8520), (18, t2, 0xc8564)]]
    expected = sorted([
        # the header line (line 1) carries two more titles: not a record
        (2, "control", "outside_transaction", None, pos(0x4e8428)),   # xid 8 has no BEGIN yet
        (3, "control", "outside_transaction", None, pos(0x4e8450)),
        (4, "begin", None, t1, pos(0xc8018)),
        (13, "commit", None, t1, pos(0xc83a0)),
        (14, "begin", None, t2, pos(0xc83c4)),
        (19, "commit", None, t2, pos(0xc859c)),
        *sblob])
    got = [(r["record_offset"], r["kind"], r["rule"], r["trx_id"], r["position"]) for r in rows]
    assert got == expected
    assert [r["record_index"] for r in rows] == list(range(18))
    assert all(r["n_records"] == 1 for r in rows)
    assert sum(r["n_bytes"] for r in rows) == len(data)
    commits = [r for r in rows if r["kind"] == "commit"]
    assert [(r["commit_ts"], r["commit_position"], r["user"], r["trx_end"]) for r in commits] == [
        (committed, pos(0xc83a0), "informix", "commit"), (committed, pos(0xc859c), "informix", "commit")]
    assert [r["user"] for r in rows if r["kind"] == "begin"] == ["informix", "informix"]
    assert carry == {"version": 1, "uniqid": 1, "open": {}}


def test_header_sample_keeps_its_header_and_quarantines_records_without_their_columns():
    """The header sample prints the six header columns only: BEGIN, HDELETE, DELITEM, PERASE,
    ERASE, CHFREE and COMMIT lack the additional columns IBM documents for them (corrupt,
    'too few columns'); BEGCOM has none and is read. The header fields still place every
    record: the transaction opened by the BEGIN at 2c018 (quarantined, it still opens it),
    the chain of links unbroken (BEGCOM links to PERASE at 2c2bc), the COMMIT ends it."""
    data = HEADER_SAMPLE.read_bytes()
    rows, carry = run(data, HEADER_SAMPLE.name)
    addrs = [0x2c018, 0x2c038, 0x2c0c4, 0x2c104, 0x2c12c, 0x2c174, 0x2c1a0, 0x2c1e8, 0x2c214,
             0x2c254, 0x2c28c, 0x2c2bc, 0x2c2d4, 0x2c2e8, 0x2c300, 0x2c31c]
    types = ["BEGIN", "HDELETE", "DELITEM", "DELITEM", "HDELETE", "DELITEM", "HDELETE", "DELITEM",
             "HDELETE", "DELITEM", "DELITEM", "PERASE", "BEGCOM", "ERASE", "CHFREE", "COMMIT"]
    expected = [(i + 2, "control" if t == "BEGCOM" else "quarantine",
                 "begcom" if t == "BEGCOM" else None,
                 None if t == "BEGCOM" else "corrupt", "1:2c018", pos(a))
                for i, (t, a) in enumerate(zip(types, addrs))]
    got = [(r["record_offset"], r["kind"], r["rule"], r["error_class"], r["trx_id"], r["position"])
           for r in rows]
    assert got == expected
    for r, t in zip(rows, types):
        if t != "BEGCOM":
            assert f"too few columns for {t}" in r["message"] and f"line {r['record_offset']}" in r["message"]
    assert carry["open"] == {}                  # the COMMIT, quarantined, still ended it


@pytest.mark.parametrize("header", [
    "addr len type xid id link",
    "ADDR     LEN  TYPE     XID      ID LINK",
    "addr\tlen\ttype\txid\tid\tlink\tsubtype\tspecific-info",
    "  addr     len  type     xid      id link     subtype  specific-info",
    "addr len type xid id link subtype specific-info   ",
])
def test_every_header_form_anywhere(header):
    lines = ["18 40 BEGIN 5 3 0 07/13/98 10:23:04 34 informix", header,
             "40 76 HINSERT 5 0 18 100123 101 40", header, header,
             "8c 36 COMMIT 5 0 40 07/13/98 10:23:05", header]
    data = ("\n".join([header, *lines]) + "\r\n").encode()
    rows, _ = run(data, "onlog_1.txt")
    assert [(r["record_offset"], r["kind"]) for r in rows] == [(2, "begin"), (4, "change"),
                                                               (7, "commit")]


def test_record_types_beyond_the_table_are_control_records():
    """Types IBM documents outside the IDS 10.0 table (layout.DOCUMENTED): inside a
    transaction control records of it, outside control records; a type no document lists
    is quarantined."""
    lines = [
        "18 40 BEGIN 5 3 0 07/13/98 10:23:04 34 informix",
        "40 60 ALLOCGENPG 5 0 18 1048868 257 12 0 3 0 some data here",
        "7c 40 ALTSPCOLSNEW 5 0 40 2 [3,4]",
        "a4 40 ALTSPCOLSOLD 5 0 7c 2 [3,4]",
        "cc 24 BEGWORK 5 0 a4",
        "e4 40 BSPADD 5 0 cc blobspace1",
        "10c 56 SBLOB 5 0 e4 UDWRITE [2,2,1,900350517] 0 20",
        "144 24 FROBNIC 5 0 10c",
        "15c 36 COMMIT 5 0 144 07/13/98 10:23:05",
        "180 40 SBLOB 9 0 0 CHFREE (2,53,421)",
        "1a8 24 BSPADD 0 0 0",
    ]
    rows, _ = run(("\n".join(lines) + "\n").encode(), "onlog_1.txt")
    assert [(r["kind"], r["rule"] or r["error_class"], r["trx_id"]) for r in rows] == [
        ("begin", None, "1:18"),
        ("control", "allocgenpg", "1:18"), ("control", "altspcolsnew", "1:18"),
        ("control", "altspcolsold", "1:18"), ("control", "begwork", "1:18"),
        ("control", "bspadd", "1:18"), ("control", "sblob", "1:18"),
        ("quarantine", "unknown_record_type", "1:18"),
        ("commit", None, "1:18"),
        ("control", "outside_transaction", None), ("control", "outside_transaction", None)]
    for t in L.DOCUMENTED:
        assert "Informix" in L.DOCUMENTED[t]


@pytest.mark.spark
def test_sblob_figure_publishes_through_dblog_run(spark, tmp_path):
    from dblog.cli import main
    from dblog.paths import DataRoot

    from .conftest import write_config

    root = tmp_path / "data"
    night = root / "landing" / "ibm_informix" / "1998-07-13"
    night.mkdir(parents=True)
    data = SBLOB_FIGURE.read_bytes()
    (night / SBLOB_FIGURE.name).write_bytes(data)
    config = write_config(tmp_path, [{
        "name": "ibm_informix", "format": "informix", "timezone": "UTC",
        "catalog": str(Path(__file__).resolve().parents[1] / "include" / "catalogs" / "wms_informix.json")}])
    assert main(["run", "--date", "1998-07-13", "--config", str(config),
                 "--data-root", str(root)]) == 0

    paths = DataRoot(root)

    def read(path):
        assert path.exists(), path
        return pads.dataset(str(path), format="parquet", partitioning="hive").to_table().to_pylist()

    trx = sorted(read(paths.published / "transactions"), key=lambda t: t["begin_position"])
    assert [(t["trx_id"], t["status"], t["begin_position"], t["commit_position"]) for t in trx] == [
        ("1:c8018", "committed", pos(0xc8018), pos(0xc83a0)),
        ("1:c83c4", "committed", pos(0xc83c4), pos(0xc859c))]
    # nothing quarantined: no quarantine dataset at all, or none of this source's rows in it
    quarantined = read(paths.quarantine) if paths.quarantine.exists() else []
    assert [q for q in quarantined if q["source"] == "ibm_informix"] == []
    audit = read(paths.audit)
    assert sum(a["records_read"] for a in audit) == 18
    assert sum(a["quarantined"] for a in audit) == 0
