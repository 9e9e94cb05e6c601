"""The report's sections about the landing zone and lost data (``dblog/report.py`` calls them):

* **Landing zone**: every file that was not decoded (ignored, refused, duplicate) with its
  reason, and the bytes of the night read, decoded, quarantined and skipped;
* **Duplicate archives**: each skipped archive and the archive it repeats;
* **Lost archives**: archives that could not be read or decoded (all their bytes
  quarantined), and whether the operator accepted the loss (``--accept-loss``);
* **Unknown tables**: per table id the records quarantined as ``unknown_table``, where the
  first one is, and a catalog stub to add (then rerun the night: its changes publish).

``summarize`` computes the data (small: one entry per file not decoded, per lost archive,
per unknown table) into each source's part of ``summary.json``; the render functions read
only that data.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from .landing import ARCHIVE, DUPLICATE

MAX_LISTED = 200          # files listed per source and section (the audit has them all)


def catalog_stub(table_id: str) -> dict:
    """A catalog entry to fill in for a table the catalog does not know (SPEC section 4)."""
    return {"id": table_id, "schema": "<SCHEMA>", "name": "<TABLE>", "key": [],
            "columns": [{"name": "<COLUMN>", "type": "<TYPE>", "nullable": True}]}


def summarize(spark, manifest: dict, run_dir: Path, agg: dict) -> None:
    """Add ``landing`` to each source of ``agg`` (the report's per-source data).
    Uses the audit rows already in ``agg[source]["archives"]`` and the staged events."""
    from pyspark.sql import functions as F

    from .decode import EVENTS_DIR, spark_event_schema

    unknown: dict[str, list[dict]] = {}
    events = Path(run_dir) / EVENTS_DIR
    if events.is_dir():
        ev = spark.read.schema(spark_event_schema()).parquet(str(events))
        rows = ev.filter((F.col("kind") == "quarantine") & (F.col("error_class") == "unknown_table")) \
            .groupBy("source", "table_id").agg(
                F.sum("n_records").alias("records"), F.count(F.lit(1)).alias("rows"),
                F.min_by(F.struct("archive_file", "record_offset", "message"),
                         F.struct("archive_file", "record_offset")).alias("first")) \
            .orderBy("source", "table_id").limit(MAX_LISTED * max(1, len(agg))).collect()
        for r in rows:
            unknown.setdefault(r["source"], []).append({
                "table_id": r["table_id"], "records": int(r["records"] or 0), "rows": int(r["rows"]),
                "archive_file": r["first"]["archive_file"], "record_offset": r["first"]["record_offset"],
                "example": (r["first"]["message"] or "")[:300]})
    for s in manifest["sources"]:
        a = agg.get(s["name"])
        if a is None:
            continue
        audit = a.get("archives") or []
        files = [r for r in audit if (r.get("entry") or ARCHIVE) != ARCHIVE]
        lost = [r for r in audit if r.get("lost")]
        tables = unknown.get(s["name"], [])
        for t in tables:
            t["stub"] = catalog_stub(t["table_id"] or "<TABLE ID>")

        def total(key):
            return sum(int(r.get(key) or 0) for r in audit)

        a["landing"] = {
            "files": [{"file": r["archive_file"], "entry": r["entry"], "bytes": int(r.get("bytes_read") or 0),
                       "reason": r.get("reason"), "duplicate_of": r.get("duplicate_of")}
                      for r in files[:MAX_LISTED]],
            "files_total": len(files),
            "duplicates": sum(1 for r in files if r["entry"] == DUPLICATE),
            "lost": [{"file": r["archive_file"], "bytes": int(r.get("bytes_quarantined") or 0),
                      "reason": r.get("reason"), "accepted": bool(r.get("accepted_loss"))}
                     for r in lost[:MAX_LISTED]],
            "unknown_tables": tables,
            "unknown_tables_mode": s.get("unknown_tables") or "quarantine",
            "accept_loss": list(manifest.get("accept_loss") or []),
            "bytes": {k: total(f"bytes_{k}") for k in ("read", "decoded", "quarantined", "skipped")},
        }


def _table(headers: list[str], rows: list[list], cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape('' if c is None else str(c))}</td>" for c in r)
                   + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def source_sections(a: dict) -> list[str]:
    """HTML sections of one source's page."""
    d = a.get("landing")
    if not d:
        return []
    b = d["bytes"]
    parts = ['<h2 id="landing">Landing zone</h2>' + _table(
        ["bytes read", "decoded", "quarantined", "skipped (duplicates, ignored)"],
        [[b["read"], b["decoded"], b["quarantined"], b["skipped"]]], "bytes")]
    if d["files"]:
        parts.append(f"<h3>Files not decoded ({d['files_total']})</h3>" + _table(
            ["file", "entry", "bytes", "reason"],
            [[f["file"], f["entry"], f["bytes"], f["reason"]] for f in d["files"]], "landing-files"))
    else:
        parts.append("<p>Every file of the night's landing folders is an archive.</p>")
    dups = [f for f in d["files"] if f["entry"] == DUPLICATE]
    if dups:
        parts.append(f'<h3 id="duplicates">Duplicate archives skipped ({d["duplicates"]})</h3>'
                     '<ul class="duplicates">' + "".join(
                         f"<li><code>{html.escape(f['file'])}</code> repeats "
                         f"<code>{html.escape(f['duplicate_of'] or '')}</code>: skipped whole, "
                         "never published twice</li>" for f in dups) + "</ul>")
    if d["lost"]:
        parts.append('<h2 id="lost">Lost archives (all their bytes quarantined)</h2>' + _table(
            ["archive", "bytes", "loss accepted", "why"],
            [[x["file"], x["bytes"], "yes (--accept-loss)" if x["accepted"] else "NO: the night fails",
              x["reason"]] for x in d["lost"]], "lost"))
    if d["accept_loss"]:
        parts.append("<p>Losses accepted by the operator for archives matching: "
                     + ", ".join(f"<code>{html.escape(p)}</code>" for p in d["accept_loss"]) + "</p>")
    if d["unknown_tables"]:
        mode = d["unknown_tables_mode"]
        what = ("their records are quarantined (<code>unknown_table</code>) and the rest of the "
                "night publishes" if mode == "quarantine" else
                "<code>unknown_tables: fail</code>: the night fails")
        items = []
        for t in d["unknown_tables"]:
            stub = json.dumps(t["stub"], indent=1)
            items.append(f"<li>table id <code>{html.escape(str(t['table_id']))}</code>: {t['records']} "
                         f"records quarantined, first at <code>{html.escape(str(t['archive_file']))}</code> "
                         f"offset {t['record_offset']}. Catalog stub to add (fill in, then rerun the "
                         f"night to publish its changes):<pre>{html.escape(stub)}</pre></li>")
        parts.append(f'<h2 id="unknown-tables">Unknown tables ({len(d["unknown_tables"])})</h2>'
                     f"<p>Tables the catalog does not know: {what}.</p>"
                     '<ul class="unknown-tables">' + "".join(items) + "</ul>")
    return parts


def index_warnings(agg: dict) -> list[str]:
    """Warnings of the night's index page (one line per source and kind)."""
    lines = []
    for name, a in agg.items():
        d = a.get("landing")
        if not d:
            continue
        src = html.escape(name)
        if d["duplicates"]:
            lines.append(f"{src}: {d['duplicates']} duplicate archive(s) skipped: " + ", ".join(
                f"<code>{html.escape(f['file'])}</code> (repeats <code>{html.escape(f['duplicate_of'] or '')}</code>)"
                for f in d["files"] if f["entry"] == DUPLICATE))
        refused = [f for f in d["files"] if f["entry"] == "refused"]
        if refused:
            lines.append(f"{src}: {len(refused)} file(s) refused (not read): " + ", ".join(
                f"<code>{html.escape(f['file'])}</code>" for f in refused))
        for x in d["lost"]:
            lines.append(f"{src}: archive <code>{html.escape(x['file'])}</code> lost ({x['bytes']} bytes "
                         f"quarantined){', loss accepted by the operator' if x['accepted'] else ''}")
        for t in d["unknown_tables"]:
            lines.append(f"{src}: table id <code>{html.escape(str(t['table_id']))}</code> is not in the "
                         f"catalog ({t['records']} records quarantined); add it and rerun the night")
    if not lines:
        return []
    return ['<h2 id="warnings">Warnings</h2><ul class="warnings">'
            + "".join(f"<li>{line}</li>" for line in lines) + "</ul>"]


def source_section(name: str, a: dict) -> str:
    """The sections of one source's page as one HTML string (``report.register_section``)."""
    return "".join(source_sections(a))
