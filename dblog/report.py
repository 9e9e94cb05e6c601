"""The nightly data-quality report under ``reports/<date>/``: ``index.html`` (the verdict, why
it failed, one line per source, the expectation results), one page per source
(``<source>.html``: records read and their accounting, changes by table and op, quarantined
records by reason, open transactions carried over, expectation results, change volume by
hour), ``summary.json`` (the same numbers), next to the Great Expectations Data Docs
(``data_docs/index.html``).

Its numbers come from the staged audit, changes, quarantine and state of the run, i.e.
the same data that is (or, after a failed validation, is not) published.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from . import landing_report
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
        from .decode import spark_event_schema

        held = spark.read.schema(spark_event_schema()).parquet(str(held_dir))
        for r in held.groupBy("source").agg(F.count_distinct("trx_id").alias("t"),
                                            F.sum("n_records").alias("n")).collect():
            out[r["source"]]["held_transactions"] = r["t"]
            out[r["source"]]["held_records"] = r["n"] or 0
    landing_report.summarize(spark, manifest, Path(run_dir), out)
    return out


def _svg_hours(hours: list[int]) -> str:
    top = max(hours) or 1
    bars = []
    for h, n in enumerate(hours):
        height = 100 * n / top
        bars.append(f'<rect x="{h * 20 + 2}" y="{110 - height:.1f}" width="16" height="{height:.1f}" '
                    f'data-hour="{h}" data-count="{n}">'
                    f'<title>{h:02d}:00 UTC: {n} changes</title></rect>'
                    f'<text x="{h * 20 + 10}" y="124" font-size="8" text-anchor="middle">{h}</text>')
    return ('<svg class="hours" viewBox="0 0 480 128" width="480" height="128" role="img" '
            'aria-label="changes by hour of commit (UTC)">'
            f'<text x="2" y="8" font-size="8">max {top}</text>' + "".join(bars) + "</svg>")


def _table(headers: list[str], rows: list[list], keys: list[str] | None = None) -> str:
    """An HTML table; ``keys`` name the columns in ``data-metric`` attributes (for tests and scrapers)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    attrs = [f' data-metric="{html.escape(k)}"' for k in keys] if keys else [""] * len(headers)
    body = "".join("<tr>" + "".join(f"<td{a}>{html.escape(str(c))}</td>" for a, c in zip(attrs, r))
                   + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


BUCKETS = ("records_read", "published", "control", "skipped", "held_open", "quarantined")
STYLE = ("body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse;"
         "margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}"
         ".verdict.ok{color:#060;font-weight:bold}.verdict.bad{color:#a00;font-weight:bold}"
         "tr.fail td{background:#fdd}svg.hours rect{fill:#4a7ab5}")


def totals(a: dict) -> dict:
    return {k: sum(int(r[k]) for r in a["archives"]) for k in BUCKETS}


def source_page(name: str) -> str:
    return f"{name}.html"


def _page(title: str, parts: list[str]) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>")


def _verdict(manifest: dict, success: bool, failures: list[str]) -> list[str]:
    verdict = "PASSED: published" if success else "FAILED: nothing was published"
    parts = [f'<p class="verdict {"ok" if success else "bad"}">Validation {verdict}</p>',
             f"<p>run <code>{html.escape(manifest['run_id'])}</code> &middot; "
             '<a href="data_docs/index.html">Great Expectations Data Docs</a></p>']
    if failures:
        parts.append('<h2>Why validation failed</h2><ul class="failures">'
                     + "".join(f"<li>{html.escape(f)}</li>" for f in failures) + "</ul>"
                     + f"<p>The staged data stays in <code>staging/{html.escape(manifest['run_id'])}"
                     "/</code> for inspection.</p>")
    return parts


def _expectations(results: list[dict]) -> str:
    head = "".join(f"<th>{h}</th>" for h in
                   ("suite", "expectation", "column", "result", "unexpected", "rows", "why", "examples"))
    body = []
    for r in results:
        cells = [r["suite"], r["expectation"], r["column"], "pass" if r["success"] else "FAIL",
                 "" if r.get("unexpected_count") is None else r["unexpected_count"],
                 "" if r.get("element_count") is None else r["element_count"], r.get("why") or "",
                 " | ".join(r.get("examples") or [])]
        body.append(f'<tr class="{"pass" if r["success"] else "fail"}">'
                    + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    return (f"<h2>Expectations ({sum(not r['success'] for r in results)} failed of {len(results)})</h2>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")


def render_source(manifest: dict, name: str, a: dict, success: bool, failures: list[str],
                  results: list[dict]) -> str:
    """The one-page nightly summary of one source."""
    date = manifest["date"]
    t = totals(a)
    share = t["quarantined"] / t["records_read"] if t["records_read"] else 0.0
    parts = [f"<h1>{html.escape(name)} ({html.escape(a['format'])}): nightly summary "
             f"{html.escape(date)}</h1>", '<p><a href="index.html">all sources</a></p>',
             *_verdict(manifest, success, failures)]
    parts.append('<h2>Records read and how each was accounted for</h2>' + _table(
        ["records read", "published changes", "control", "skipped", "held open", "quarantined"],
        [[t[k] for k in BUCKETS]], list(BUCKETS)))
    parts.append(f"<p>quarantined share {share:.2%} (threshold {a['threshold']:.2%})</p>")
    parts.append("<h3>Per archive</h3>" + _table(
        ["archive", "records read", "published", "control", "skipped", "held open",
         "quarantined", "skipped by rule"],
        [[r["archive_file"], *[r[k] for k in BUCKETS], r["skipped_by_rule"]] for r in a["archives"]]))
    parts.extend(landing_report.source_sections(a))
    parts.append(f"<h2>Changes {'published' if success else 'staged (not published)'} by table "
                 f"and op ({sum(r['count'] for r in a['by_table'])})</h2>" + _table(
                     ["schema", "table", "op", "changes"],
                     [[r["schema_name"], r["table_name"], r["op"], r["count"]] for r in a["by_table"]],
                     ["schema_name", "table_name", "op", "count"]))
    parts.append(f"<h2>Quarantined records ({t['quarantined']}) by reason</h2>" + (_table(
        ["error class", "rows", "first archive", "offset", "example message"],
        [[r["error_class"], r["rows"], r["archive_file"], r["record_offset"], r["example"]]
         for r in a["reasons"]], ["error_class", "rows", "archive_file", "record_offset", "example"])
        if a["reasons"] else "<p>none</p>"))
    parts.append(f'<h2>Open transactions carried to the next night</h2><p data-metric="held_transactions">'
                 f"{a['held_transactions']} transactions ({a['held_records']} records)</p>")
    parts.append("<h2>Change volume by hour of commit (UTC)</h2>" + _svg_hours(a["hours"]))
    parts.append(_expectations(results))
    return _page(f"dblog {name} {date}", parts)


def render(manifest: dict, agg: dict, success: bool, failures: list[str], results: list[dict]) -> str:
    """The night's index: verdict, one line per source (linking its page), expectations."""
    date = manifest["date"]
    parts = [f"<h1>dblog nightly report {html.escape(date)}</h1>", *_verdict(manifest, success, failures)]
    rows = []
    for name, a in agg.items():
        t = totals(a)
        share = t["quarantined"] / t["records_read"] if t["records_read"] else 0.0
        rows.append(f'<tr><td><a href="{html.escape(source_page(name))}">{html.escape(name)}</a></td>'
                    f"<td>{html.escape(a['format'])}</td>"
                    + "".join(f"<td>{t[k]}</td>" for k in BUCKETS)
                    + f"<td>{share:.2%} / {a['threshold']:.2%}</td><td>{a['held_transactions']}</td></tr>")
    head = "".join(f"<th>{h}</th>" for h in
                   ("source", "format", "records read", "published", "control", "skipped", "held open",
                    "quarantined", "quarantined share / threshold", "open transactions carried"))
    parts.append(f"<h2>Sources</h2><table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}"
                 "</tbody></table>")
    parts.extend(landing_report.index_warnings(agg))
    parts.append(_expectations(results))
    return _page(f"dblog {date}", parts)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_report(spark, manifest: dict, run_dir: Path, root: DataRoot, success: bool,
                 failures: list[str], results: list[dict]) -> Path:
    """``reports/<date>/index.html``, one ``<source>.html`` per source and ``summary.json``."""
    agg = _aggregates(spark, manifest, Path(run_dir))
    for s in manifest["sources"]:
        agg[s["name"]]["threshold"] = float(s["quarantine_threshold"])
    out_dir = root.reports(manifest["date"])
    out_dir.mkdir(parents=True, exist_ok=True)
    _write(out_dir / "summary.json", json.dumps(
        {"date": manifest["date"], "run_id": manifest["run_id"], "success": success,
         "failures": failures, "sources": agg, "expectations": results}, indent=1, default=str))
    for name, a in agg.items():
        _write(out_dir / source_page(name), render_source(manifest, name, a, success, failures, results))
    _write(out_dir / "index.html", render(manifest, agg, success, failures, results))
    return out_dir / "index.html"
