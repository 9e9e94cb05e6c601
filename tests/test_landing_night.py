"""Issue 15 end to end: a messy landing zone, a lost archive, a table the catalog does not know.

* A night whose landing folder holds an archive with a non-UTF-8 name, a hidden temporary
  file, a link to a file outside the data root (with distinctive bytes), a dangling link
  and a byte-identical copy of an archive publishes every source exactly as the generator
  wrote it; every file is in the audit; the copy is skipped and named in the report (and,
  the next night, a copy of an archive of the first night too); the outside file's bytes
  appear nowhere under the data root.
* An archive that changed after the stage found it is lost: all its bytes quarantined, the
  night fails with a message naming it; accepted (``accept_loss``) the night publishes
  and the audit and the report say so.
* Records of a table the catalog does not know are quarantined, the rest publishes and
  the report gives a catalog stub; after the catalog learns the table, a rerun publishes
  every change.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dblog.synthcmd import read_expected

from .conftest import REPO, write_config
from .test_pipeline import KEYS, check_night, published, read, run, synth

pytestmark = pytest.mark.spark

D1, D2 = "2026-11-01", "2026-11-02"
MARK = b"OUTSIDE-THE-DATA-ROOT-7f3a9c"


def audit_of(root: Path, source: str, date: str) -> dict[str, dict]:
    return {a["archive_file"]: a for a in read(root / "published" / "audit", source=source, date=date)}


def assert_bytes_add_up(audit: dict[str, dict]) -> None:
    for a in audit.values():
        assert a["bytes_read"] == a["bytes_decoded"] + a["bytes_quarantined"] + a["bytes_skipped"], a
        assert a["records_read"] == a["published"] + a["control"] + a["skipped"] + a["held_open"] \
            + a["quarantined"], a


def nowhere_under(root: Path, mark: bytes) -> list[str]:
    """Files under ``root`` (links not followed) holding ``mark`` or its hex, raw or in a
    Parquet column."""
    needles = [mark, mark.hex().encode(), mark.hex().upper().encode()]
    texts = [n.decode() for n in needles]
    found = []
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            if p.is_symlink():
                continue
            data = p.read_bytes()
            if any(n in data for n in needles):
                found.append(str(p))
            elif f.endswith(".parquet"):
                text = str(pq.read_table(p).to_pylist())
                if any(t in text for t in texts):
                    found.append(str(p))
    return found


def test_messy_landing_zone_publishes_every_source_and_reads_nothing_outside(spark, tmp_path):
    root = tmp_path / "data"
    config = write_config(tmp_path, [{"name": "pos_solid", "format": "soliddb"},
                                     {"name": "fin_rdb", "format": "rdb"}])
    synth(config, root, D1, days=2, trx=40, seed=3)
    night = root / "landing" / "pos_solid" / D1
    first, last = sorted(night.iterdir())[0], sorted(night.iterdir())[-1]
    odd = os.fsencode(night) + b"/sys_log_\xff\xfe.csv"             # sorts last, as `last` did
    os.rename(last, odd)
    shutil.copyfile(first, night / "zz_copy.csv")
    (night / ".sys_log_03.csv.tmp").write_bytes(b"being written")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.csv").write_bytes(MARK * 40)
    (night / "leak.csv").symlink_to(outside / "secret.csv")
    (night / "dangling.csv").symlink_to(root / "nowhere.csv")

    assert run(config, root, D1) == 0
    p = f"pos_solid/{D1}/"
    rows = check_night(root, "pos_solid", D1, 1)        # exactly what the generator wrote
    check_night(root, "fin_rdb", D1, 1)
    assert p + "sys_log_\\xff\\xfe.csv" in {r["archive_file"] for r in rows}
    audit = audit_of(root, "pos_solid", D1)
    assert {k: (a["entry"], a["duplicate_of"]) for k, a in audit.items()} == {
        p + first.name: ("archive", None), p + "sys_log_\\xff\\xfe.csv": ("archive", None),
        p + "zz_copy.csv": ("duplicate", p + first.name), p + ".sys_log_03.csv.tmp": ("ignored", None),
        p + "leak.csv": ("refused", None), p + "dangling.csv": ("refused", None)}
    assert "outside the data root" in audit[p + "leak.csv"]["reason"]
    assert audit[p + first.name]["bytes_read"] == first.stat().st_size
    assert audit[p + "zz_copy.csv"]["bytes_skipped"] == first.stat().st_size
    assert audit[p + "zz_copy.csv"]["records_read"] == 0
    assert_bytes_add_up(audit)
    index = (root / "reports" / D1 / "index.html").read_text()
    page = (root / "reports" / D1 / "pos_solid.html").read_text()
    for text in (index, page):
        assert "zz_copy.csv" in text and "repeats" in text and first.name in text
    assert "sys_log_\\xff\\xfe.csv" in page and "leak.csv" in page
    summary = json.loads((root / "reports" / D1 / "summary.json").read_text())
    assert summary["sources"]["pos_solid"]["landing"]["duplicates"] == 1

    # night 2: an archive of night 1 again, under another name
    shutil.copyfile(first, root / "landing" / "pos_solid" / D2 / "late_copy.csv")
    assert run(config, root, D2) == 0
    seq = rows[-1]["commit_seq"] + 1
    check_night(root, "pos_solid", D2, published(root, "pos_solid", D2)[0]["commit_seq"])
    assert published(root, "pos_solid", D2)[0]["commit_seq"] >= seq
    audit2 = audit_of(root, "pos_solid", D2)
    late = audit2[f"pos_solid/{D2}/late_copy.csv"]
    assert (late["entry"], late["duplicate_of"]) == ("duplicate", p + first.name)
    assert_bytes_add_up(audit2)
    assert "late_copy.csv" in (root / "reports" / D2 / "index.html").read_text()

    assert nowhere_under(root, MARK) == []


def test_lost_archive_fails_its_night_unless_the_loss_is_accepted(spark, tmp_path):
    from dblog.order import AUDIT, QUARANTINE
    from dblog.pipeline import decode_night, order_night, publish_night, stage_night, validate_night

    root = tmp_path / "data"
    config = write_config(tmp_path, [{"name": "pos_solid", "format": "soliddb"}])
    synth(config, root, D1, trx=40, seed=4)
    victim = sorted((root / "landing" / "pos_solid" / D1).iterdir())[0]
    shown = f"pos_solid/{D1}/{victim.name}"

    def night(accept=()):
        run_dir = stage_night(D1, str(config), str(root), accept_loss=accept)
        size = victim.stat().st_size
        with open(victim, "ab") as f:              # still being written when the night ran
            f.write(b"\r\n7,DBE_LOGREADER_LOG_REC_TRX_START,1,1,,0,00,\r\n")
        decode_night(spark, run_dir)
        order_night(spark, run_dir)
        return run_dir, size, validate_night(spark, run_dir)

    run_dir, size, result = night()
    assert not result.success
    failures = "\n".join(result.failures)
    assert shown in failures and "--accept-loss" in failures
    audit = {r["archive_file"]: r for r in read(run_dir / AUDIT)}
    lost = audit[shown]
    assert (lost["lost"], lost["accepted_loss"], lost["bytes_quarantined"], lost["records_read"]) == \
        (True, False, size, 0)
    q = [r for r in read(run_dir / QUARANTINE) if r["archive_file"] == shown]
    assert [(r["error_class"], r["n_records"], r["n_bytes"]) for r in q] == [("unreadable", 0, size)]
    assert "changed after it was staged" in q[0]["message"]
    assert not (root / "published").exists()
    assert shown in (root / "reports" / D1 / "pos_solid.html").read_text()

    run_dir, size, result = night(accept=[f"pos_solid/*/{victim.name}"])
    assert result.success, result.failures
    publish_night(run_dir)
    lost = audit_of(root, "pos_solid", D1)[shown]
    assert (lost["lost"], lost["accepted_loss"], lost["bytes_quarantined"]) == (True, True, size)
    assert {r["archive_file"] for r in published(root, "pos_solid", D1)} == \
        {f"pos_solid/{D1}/{p.name}" for p in victim.parent.iterdir() if p != victim}
    page = (root / "reports" / D1 / "pos_solid.html").read_text()
    assert "Lost archives" in page and "yes (--accept-loss)" in page and f"pos_solid/*/{victim.name}" in page


def test_unknown_table_quarantined_the_rest_published_and_a_rerun_publishes_it(spark, tmp_path):
    root = tmp_path / "data"
    full = write_config(tmp_path, [{"name": "pos_solid", "format": "soliddb"}])
    synth(full, root, D1, trx=60, seed=5)
    catalog = json.loads((REPO / "include" / "catalogs" / "pos_solid.json").read_text())
    catalog["tables"] = [t for t in catalog["tables"] if t["id"] != "10003"]
    reduced_cat = tmp_path / "reduced" / "pos_solid.json"
    reduced_cat.parent.mkdir()
    reduced_cat.write_text(json.dumps(catalog))
    reduced = write_config(reduced_cat.parent, [{"name": "pos_solid", "format": "soliddb",
                                                 "catalog": str(reduced_cat)}])

    assert run(reduced, root, D1) == 0
    expected = [{k: e[k] for k in KEYS} for e in read_expected(type("R", (), {"root": root})(), "pos_solid", D1)]
    got = [{k: r[k] for k in KEYS} for r in published(root, "pos_solid", D1)]
    missing = [e for e in expected if e not in got]
    assert missing and all(e["table_id"] == "10003" for e in missing)
    assert all(g in expected for g in got)
    q = read(root / "published" / "quarantine", source="pos_solid", date=D1)
    assert q and {r["error_class"] for r in q} == {"unknown_table"}
    assert sum(a["quarantined"] for a in audit_of(root, "pos_solid", D1).values()) == \
        sum(r["n_records"] for r in q)
    page = (root / "reports" / D1 / "pos_solid.html").read_text()
    assert "Unknown tables" in page and "10003" in page and "&quot;id&quot;: &quot;10003&quot;" in page
    assert "10003" in (root / "reports" / D1 / "index.html").read_text()

    assert run(full, root, D1) == 0                 # the catalog learned the table: rerun
    check_night(root, "pos_solid", D1, 1)
    assert read(root / "published" / "quarantine", source="pos_solid", date=D1) == []
