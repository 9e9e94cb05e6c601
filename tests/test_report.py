"""The nightly report's numbers equal the audit's (and the published or staged data's).

The per-source page (``reports/<date>/<source>.html``) marks its numbers with
``data-metric`` attributes; they are read back from the HTML a person would open and
compared with what Spark reads from the datasets themselves.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from chispa import assert_df_equality

from tests import wap_nights as W

pytestmark = pytest.mark.spark


class Page(HTMLParser):
    """Cells with ``data-metric`` (grouped into table rows) and the hour bars."""

    def __init__(self, text: str):
        super().__init__()
        self.rows, self.hours, self.held = [], {}, None
        self._row, self._metric, self._text = None, None, ""
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr":
            self._row = {}
        elif a.get("data-metric"):
            self._metric, self._text = a["data-metric"], ""
        if tag == "rect" and "data-hour" in a:
            self.hours[int(a["data-hour"])] = int(a["data-count"])

    def handle_data(self, data):
        if self._metric:
            self._text += data

    def handle_endtag(self, tag):
        if self._metric and tag in ("td", "p"):
            if tag == "p":
                self.held = int(self._text.split()[0])
            elif self._row is not None:
                self._row[self._metric] = self._text
            self._metric = None
        if tag == "tr" and self._row:
            self.rows.append(self._row)
            self._row = None

    def table(self, *keys):
        return [r for r in self.rows if set(keys) <= set(r)]


def page(root: Path, date: str) -> Page:
    return Page((root / "reports" / date / f"{W.SOURCE}.html").read_text())


def check_numbers(spark, root: Path, date: str, where: Path):
    """Compare the page with the audit, changes, quarantine and held state under ``where``."""
    from pyspark.sql import functions as F

    p = page(root, date)
    cond = (F.col("source") == W.SOURCE) & (F.col("date") == date)
    buckets = ["records_read", "published", "control", "skipped", "held_open", "quarantined"]
    audit = spark.read.parquet(str(where["audit"])).filter(cond)
    want = audit.agg(*[F.sum(b).alias(b) for b in buckets]).first().asDict()
    [got] = p.table(*buckets)
    assert {k: int(v.replace(",", "")) for k, v in got.items()} == {k: int(want[k] or 0) for k in buckets}
    assert want["records_read"] > 0

    changes = spark.read.parquet(str(where["changes"])).filter(cond)
    ops = ("c", "u", "d", "m", "t", "ddl")
    by_table = spark.createDataFrame(          # one row per table, a column per op
        [(r["schema_name"], r["table_name"], op, int(r[f"changes_{op}"].replace(",", "")))
         for r in p.table("schema_name", "table_name", *[f"changes_{op}" for op in ops])
         for op in ops if int(r[f"changes_{op}"].replace(",", ""))],
        "schema_name STRING, table_name STRING, op STRING, count LONG")
    assert_df_equality(by_table, changes.groupBy("schema_name", "table_name", "op").count(),
                       ignore_row_order=True, ignore_nullable=True)
    by_hour = changes.filter(F.col("commit_ts").isNotNull()) \
        .groupBy(F.hour("commit_ts").alias("h")).count().collect()
    assert {h: n for h, n in p.hours.items() if n} == {r["h"]: r["count"] for r in by_hour}

    reasons = spark.createDataFrame(
        [(r["error_class"], int(r["rows"])) for r in p.table("error_class", "rows")],
        "error_class STRING, count LONG")
    if where["quarantine"].is_dir():
        q = spark.read.parquet(str(where["quarantine"])).filter(cond).groupBy("error_class").count()
    else:
        q = spark.createDataFrame([], "error_class STRING, count LONG")
    assert_df_equality(reasons, q, ignore_row_order=True, ignore_nullable=True)

    held = spark.read.parquet(str(where["held"])).select("trx_id").distinct().count() \
        if where["held"].is_dir() and any(where["held"].rglob("*.parquet")) else 0
    assert p.held == held
    return p


def test_good_night_report_numbers_equal_the_published_audit(spark, tmp_path_factory):
    base = W.base_root(tmp_path_factory)
    root = base["root"]
    assert base["rc"] == 0
    check_numbers(spark, root, W.DATE1, {
        "audit": root / "audit", "changes": root / "published" / "changes",
        "quarantine": root / "quarantine", "held": root / "state" / W.SOURCE / W.DATE1 / "held"})
    index = (root / "reports" / W.DATE1 / "index.html").read_text()
    assert f'href="{W.SOURCE}.html"' in index and 'href="data_docs/index.html"' in index


def test_failed_night_report_numbers_equal_the_staged_audit_and_show_why(spark, tmp_path_factory):
    night = W.threshold_night(tmp_path_factory)
    root = night["root"]
    assert night["rc"] == 1
    run = W.staged_run(root)
    p = check_numbers(spark, root, W.DATE2, {
        "audit": run / "audit", "changes": run / "changes", "quarantine": run / "quarantine",
        "held": run / "state" / "held"})
    [totals] = p.table("quarantined")
    assert int(totals["quarantined"]) >= night["broken"]       # every broken row is there
    text = (root / "reports" / W.DATE2 / f"{W.SOURCE}.html").read_text()
    assert "Why validation failed" in text and "quarantined / records read" in text
