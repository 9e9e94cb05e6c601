"""Write-audit-publish end to end through ``dblog run`` on small synthesized solidDB nights.

Night 1 is good and publishes. Night 2 is then broken three ways (a duplicated commit_seq
injected between ordering and validation, archives corrupted past the quarantine threshold,
a catalog that misses a table); each run exits 1, leaves ``published/`` (and quarantine/,
audit/, state/) exactly as night 1 left them, keeps its staging directory, and its report
says why.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests import wap_nights as W

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def base(spark, tmp_path_factory):
    return W.base_root(tmp_path_factory)


def test_good_night_passes_and_publishes(spark, base):
    root = base["root"]
    assert base["rc"] == 0, base["out"]
    assert "PUBLISHED" in base["out"]
    report = root / "reports" / W.DATE1 / "index.html"
    assert f"report: {report}" in base["out"]
    assert "Validation PASSED" in report.read_text()
    assert (root / "reports" / W.DATE1 / "data_docs" / "index.html").is_file()
    run = W.staged_run(root)
    validation = json.loads((run / "validation.json").read_text())
    assert validation["success"] is True
    assert {r["suite"] for r in validation["results"]} == {
        "events", "changes", "commit_order", "transactions", "audit", "quarantine",
        "mirror", "net_changes", "mirror_missing_base"}
    published = spark.read.parquet(str(root / "published" / "changes")) \
        .filter(f"source = '{W.SOURCE}' and date = '{W.DATE1}'")
    assert published.count() == len(W.expected_changes(root, W.DATE1)) > 0
    assert (root / "published" / "audit" / f"source={W.SOURCE}" / f"date={W.DATE1}").is_dir()
    assert (root / "published" / "state" / W.SOURCE / W.DATE1 / "seq.json").is_file()


def outside_state(root: Path) -> dict:
    """Everything a failed night must leave alone."""
    return {"published": W.published_state(root),
            **{p: W.tree(root / "published" / p) for p in ("audit", "quarantine", "state")}}


def failed_expectations(run_dir: Path) -> set[str]:
    doc = json.loads((run_dir / "validation.json").read_text())
    return {f"{r['suite']}:{r['column'] if isinstance(r['column'], str) else ','.join(r['column'])}"
            for r in doc["results"] if not r["success"]}


def assert_failed_night(root: Path, before: dict, rc: int, out: str, expected: set[str], why: str,
                        also: set[str] = frozenset()):
    """... and exactly the ``expected`` expectations failed (plus, maybe, some of ``also``)."""
    assert rc == 1, out
    assert "VALIDATION FAILED, nothing published" in out
    assert why in out                                    # the clear message on the console
    assert outside_state(root) == before                 # nothing published, nothing replaced
    run = W.staged_run(root)
    assert any((run / "changes").rglob("*.parquet")), "staged data kept for inspection"
    assert expected <= failed_expectations(run) <= expected | also
    report = root / "reports" / W.DATE2 / "index.html"
    assert f"report: {report}" in out
    page = report.read_text()
    assert "Validation FAILED: nothing was published" in page
    assert why in page
    assert why in (report.parent / f"{W.SOURCE}.html").read_text()
    return run


def test_duplicated_commit_seq_fails_and_publishes_nothing(spark, base, tmp_path_factory,
                                                           monkeypatch):
    from pyspark.sql import functions as F

    from dblog import pipeline
    from dblog.order import CHANGES, read_staged
    from dblog.stage import load_manifest

    root = W.copy_root(tmp_path_factory, "dup_seq")
    before = outside_state(root)
    order_night = pipeline.order_night

    def order_then_corrupt(spark, run_dir):
        summary = order_night(spark, run_dir)
        base_seq = load_manifest(run_dir)["sources"][0]["seq_base"]
        ch = read_staged(spark, run_dir, CHANGES)
        assert ch.filter(F.col("commit_seq") == base_seq + 2).count() > 0
        bad = ch.withColumn("commit_seq", F.when(F.col("commit_seq") == base_seq + 2, base_seq + 1)
                            .otherwise(F.col("commit_seq")))
        tmp = Path(run_dir) / "changes.corrupt"
        bad.write.partitionBy("source", "date").parquet(str(tmp))
        shutil.rmtree(Path(run_dir) / CHANGES)
        tmp.rename(Path(run_dir) / CHANGES)
        return summary

    monkeypatch.setattr(pipeline, "order_night", order_then_corrupt)
    rc, out = W.run_night(root, base["config"], W.DATE2)
    assert_failed_night(root, before, rc, out,
                        {"changes:source,commit_seq,event_seq", "commit_order:unmatched"},
                        "keys (source, commit_seq, event_seq) unique")


def test_night_over_quarantine_threshold_fails(spark, base, tmp_path_factory):
    night = W.threshold_night(tmp_path_factory)
    root = night["root"]
    assert night["broken"] > 0
    assert_failed_night(root, night["before"], night["rc"], night["out"],
                        {"quarantine:under_threshold"}, "quarantined / records read",
                        also={"quarantine:bytes_under_threshold"})
    page = (root / "reports" / W.DATE2 / f"{W.SOURCE}.html").read_text()
    assert "corrupt" in page and "wrong number of fields" in page     # the reasons
    assert "threshold 10.00%" in page


def test_night_with_unknown_table_fails_when_the_source_says_fail(spark, base, tmp_path_factory):
    root = W.copy_root(tmp_path_factory, "unknown_table")
    catalog = json.loads(W.CATALOG.read_text())
    catalog["tables"] = [t for t in catalog["tables"] if t["name"] != "NAMES"]
    assert len(catalog["tables"]) == 2
    cat_path = root.parent / "pos_solid_without_names.json"
    cat_path.write_text(json.dumps(catalog))
    # threshold 1: the unknown table alone must fail the night, not the quarantined share;
    # unknown_tables: fail (the default, quarantine, publishes the rest: tests/test_landing_night.py)
    config = W.write_sources(root.parent, catalog=cat_path, quarantine_threshold=1.0,
                             unknown_tables="fail")
    before = outside_state(root)
    rc, out = W.run_night(root, config, W.DATE2)
    # changes of NAMES decoded on night 1 in transactions still open then (held in state/)
    # commit tonight and reach the staged changes: the changes suite catches those
    assert_failed_night(root, before, rc, out, {"quarantine:unknown_table_rows"},
                        "row changes name tables the catalog knows", also={"changes:table_known"})
    page = (root / "reports" / W.DATE2 / f"{W.SOURCE}.html").read_text()
    assert "unknown_table" in page and "RELID not in the catalog" in page
