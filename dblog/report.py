"""The nightly data-quality report: ``reports/<date>/index.html`` (one page, every source)
next to the Great Expectations Data Docs (``reports/<date>/data_docs/index.html``).

Its numbers come from the staged audit, changes, quarantine and state of the run, i.e.
the same data that is (or, after a failed validation, is not) published.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from .order import AUDIT, CHANGES, QUARANTINE, STATE, read_staged
from .paths import DataRoot
from .stage import HELD_DIR


def _aggregates(spark, manifest: dict, run_dir: Path) -> dict:
    from pyspark.sql import functions as F

    audit = read_staged(spark, run_dir, AUDIT)
    changes = read_staged(spark, run_dir, CHANGES)
    quarantine = read_staged(spark, run_dir, QUARANTINE)
    out: dict = {s["name"]: {"format": s["format"], "archives": [], "by_table": [], "reasons": [],
                             "hours": [0] * 24, "held_transactions": 0, "held_records": 0}
                 for s in manifest["sources"]}
    for r in audit.orderBy("source", "archive_file").collect():
        out[r["source"]]["archives"].append(r.asDict())
    for r in changes.groupBy("source", "schema_name", "table_name", "op").count() \
            .orderBy("source", "schema_name", "table_name", "op").collect():
        out[r["source"]]["by_table"].append(r.asDict())
    for r in quarantine.groupBy("source", "error_class").agg(
            F.count(F.lit(1)).alias("rows"), F.first("message").alias("example"),
            F.first("archive_file").alias("archive_file"),
            F.first("record_offset").alias("record_offset")).orderBy("source", "error_class").collect():
        out[r["source"]]["reasons"].append(r.asDict())
    for r in changes.filter(F.col("commit_ts").isNotNull()) \
            .groupBy("source", F.hour("commit_ts").alias("h")).count().collect():
        out[r["source"]]["hours"][r["h"]] = r["count"]
    held_dir = Path(run_dir) / STATE / HELD_DIR
    if held_dir.is_dir() and any(held_dir.rglob("*.parquet")):
        from decoders.events import EVENT_SCHEMA  # noqa: F401  (schema of the held rows)
        from .decode import spark_event_schema

        held = spark.read.schema(spark_event_schema()).parquet(str(held_dir))
        for r in held.groupBy("source").agg(F.count_distinct("trx_id").alias("t"),
                                            F.sum("n_records").alias("n")).collect():
            out[r["source"]]["held_transactions"] = r["t"]
            out[r["source"]]["held_records"] = r["n"] or 0
    return out


def _svg_hours(hours: list[int]) -> str:
    top = max(hours) or 1
    bars = []
    for h, n in enumerate(hours):
        height = 100 * n / top
        bars.append(f'<rect x="{h * 20 + 2}" y="{110 - height:.1f}" width="16" height="{height:.1f}">'
                    f'<title>{h:02d}:00 UTC: {n} changes</title></rect>'
                    f'<text x="{h * 20 + 10}" y="124" font-size="8" text-anchor="middle">{h}</text>')
    return ('<svg class="hours" viewBox="0 0 480 128" width="480" height="128" role="img" '
            'aria-label="changes by hour of commit (UTC)">' + "".join(bars) + "</svg>")


def _table(headers: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render(manifest: dict, agg: dict, success: bool, failures: list[str], results: list[dict]) -> str:
    date, run_id = manifest["date"], manifest["run_id"]
    verdict = "PASSED: published" if success else "FAILED: nothing was published"
    parts = [f"<h1>dblog nightly report {html.escape(date)}</h1>",
             f'<p class="verdict {"ok" if success else "bad"}">Validation {verdict}</p>',
             f"<p>run <code>{html.escape(run_id)}</code> &middot; "
             '<a href="data_docs/index.html">Great Expectations Data Docs</a></p>']
    if failures:
        parts.append("<h2>Why validation failed</h2><ul>"
                     + "".join(f"<li>{html.escape(f)}</li>" for f in failures) + "</ul>")
    for name, a in agg.items():
        totals = {k: sum(r[k] for r in a["archives"]) for k in
                  ("records_read", "published", "control", "skipped", "held_open", "quarantined")}
        parts.append(f'<section id="source-{html.escape(name)}"><h2>{html.escape(name)} '
                     f'({html.escape(a["format"])})</h2>')
        parts.append(_table(["records read", "published", "control", "skipped", "held open",
                             "quarantined"], [[totals[k] for k in totals]]))
        parts.append("<h3>Archives</h3>" + _table(
            ["archive", "records read", "published", "control", "skipped", "held open",
             "quarantined", "skipped by rule"],
            [[r["archive_file"], r["records_read"], r["published"], r["control"], r["skipped"],
              r["held_open"], r["quarantined"], r["skipped_by_rule"]] for r in a["archives"]]))
        parts.append("<h3>Changes by table and op</h3>" + _table(
            ["schema", "table", "op", "changes"],
            [[r["schema_name"], r["table_name"], r["op"], r["count"]] for r in a["by_table"]]))
        parts.append("<h3>Quarantined records</h3>" + (_table(
            ["error class", "rows", "first archive", "offset", "example message"],
            [[r["error_class"], r["rows"], r["archive_file"], r["record_offset"], r["example"]]
             for r in a["reasons"]]) if a["reasons"] else "<p>none</p>"))
        parts.append(f"<h3>Open transactions carried to the next night</h3><p>"
                     f"{a['held_transactions']} transactions ({a['held_records']} records)</p>")
        parts.append("<h3>Change volume by hour of commit (UTC)</h3>" + _svg_hours(a["hours"]))
        parts.append("</section>")
    parts.append("<h2>Expectations</h2>" + _table(
        ["suite", "expectation", "column", "result", "unexpected", "why"],
        [[r["suite"], r["expectation"], r["column"], "pass" if r["success"] else "FAIL",
          r["unexpected_count"] if r["unexpected_count"] is not None else "", r["why"] or ""]
         for r in results]))
    style = ("body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse;"
             "margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}"
             ".verdict.ok{color:#060;font-weight:bold}.verdict.bad{color:#a00;font-weight:bold}"
             "svg.hours rect{fill:#4a7ab5}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>dblog {html.escape(date)}"
            f"</title><style>{style}</style></head><body>{''.join(parts)}</body></html>")


def write_report(spark, manifest: dict, run_dir: Path, root: DataRoot, success: bool,
                 failures: list[str], results: list[dict]) -> Path:
    agg = _aggregates(spark, manifest, Path(run_dir))
    out_dir = root.reports(manifest["date"])
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.json").write_text(json.dumps(
        {"date": manifest["date"], "run_id": manifest["run_id"], "success": success,
         "failures": failures, "sources": agg, "expectations": results}, indent=1, default=str))
    tmp = out_dir / "index.html.tmp"
    tmp.write_text(render(manifest, agg, success, failures, results), encoding="utf-8")
    tmp.replace(out_dir / "index.html")
    return out_dir / "index.html"
