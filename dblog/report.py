"""The nightly data-quality report under ``reports/<date>/``.

``index.html``   the verdict and why, one line per source (tonight's numbers, a 30-night
                 sparkline of the volume, the checks flagged), the history checks flagged
                 tonight, the expectation results
``<source>.html`` one page per source: tonight at a glance, the checks against history,
                 charts of the last 30 nights (changes by op, quarantine share, open
                 transactions, stage seconds), per table a row with a 30-night sparkline,
                 records read and how each was accounted for (per archive), quarantined
                 records by reason, change volume by hour, expectation results, and the
                 sections other slices add (``SOURCE_SECTIONS``)
``summary.json`` the same numbers
``data_docs/``   Great Expectations Data Docs

Self-contained HTML: inline CSS and SVG, no script, no web font, nothing fetched (the
Airflow UI serves it offline); readable on a laptop screen and printable (print CSS).

Numbers come from the staged run (audit, quarantine, changes: the data that is, or after a
failed validation is not, published) and from ``metrics/``: tonight's staged metrics and
the published metrics of the 29 nights before (``metrics.history``: one path per night, so
the report's cost is bounded by its 30 nights, not by the history).

Other slices add sections to a source's page with ``register_section(fn)``: ``fn(name, a)``
gets the source's entry of ``summary.json`` (``a``: ``format``, ``totals``, ``archives``,
``metrics``, ``checks``, ... plus whatever the slice put there) and returns HTML (or "").
"""

from __future__ import annotations

import datetime as _dt
import html
import json
from pathlib import Path
from typing import Callable

from . import landing_report
from . import metrics as M
from .order import AUDIT, CHANGES, QUARANTINE, read_staged
from .paths import DataRoot

NIGHTS = 30
BUCKETS = ("records_read", "published", "control", "skipped", "held_open", "quarantined")
OP_NAMES = {"c": "insert", "u": "update", "d": "delete", "m": "insert/modify", "t": "truncate",
            "ddl": "DDL"}
# Okabe-Ito: tells the colours apart for the colour-blind, and in grey print
OP_COLORS = {"c": "#009E73", "u": "#0072B2", "d": "#D55E00", "m": "#56B4E9", "t": "#E69F00",
             "ddl": "#CC79A7"}
STAGE_COLORS = {"stage": "#999999", "decode": "#0072B2", "order": "#E69F00", "validate": "#009E73"}
SOURCE_SECTIONS: list[Callable[[str, dict], str]] = []


def register_section(fn: Callable[[str, dict], str]) -> Callable[[str, dict], str]:
    """Add a section to every source page (called with the source name and its summary entry)."""
    if fn not in SOURCE_SECTIONS:
        SOURCE_SECTIONS.append(fn)
    return fn


# ----------------------------------------------------------------- numbers

def report_aggregates(spark, manifest: dict, run_dir: Path) -> dict:
    """Per source: the audit per archive, quarantined records by reason, changes per hour."""
    from pyspark.sql import functions as F

    audit = read_staged(spark, run_dir, AUDIT)
    changes = read_staged(spark, run_dir, CHANGES)
    quarantine = read_staged(spark, run_dir, QUARANTINE)
    out: dict = {s["name"]: {"format": s["format"], "archives": [], "reasons": [], "hours": [0] * 24}
                 for s in manifest["sources"]}
    for r in audit.orderBy("source", "archive_file").collect():
        out[r["source"]]["archives"].append(r.asDict())
    for r in quarantine.groupBy("source", "error_class").agg(
            F.count(F.lit(1)).alias("rows"), F.first("message").alias("example"),
            F.first("archive_file").alias("archive_file"),
            F.first("record_offset").alias("record_offset")).orderBy("source", "error_class").collect():
        out[r["source"]]["reasons"].append(r.asDict())
    for r in changes.filter(F.col("commit_ts").isNotNull()) \
            .groupBy("source", F.hour("commit_ts").alias("h")).count().collect():
        out[r["source"]]["hours"][r["h"]] = r["count"]
    landing_report.summarize(spark, manifest, Path(run_dir), out)
    return out


def totals(a: dict) -> dict:
    return {k: sum(int(r[k]) for r in a["archives"]) for k in BUCKETS}


def _nights(date: str, n: int = NIGHTS) -> list[str]:
    day = _dt.date.fromisoformat(date)
    return [(day - _dt.timedelta(days=i)).isoformat() for i in range(n - 1, -1, -1)]


def _series(root: DataRoot, name: str, date: str, tonight: list[dict]) -> dict:
    """The source's metrics over the last ``NIGHTS`` nights: ``{"dates": [...], "source":
    {metric: [value or None per night]}, "tables": {table_id: {...}}}`` (None: no metrics
    published for that night, e.g. a night that failed validation)."""
    dates = _nights(date)
    past = M.history(root, name, date, NIGHTS - 1)
    past[date] = tonight
    src: dict[str, list] = {}
    tables: dict[str, dict] = {}
    for i, d in enumerate(dates):
        for r in past.get(d) or []:
            if r["table_id"] is None:
                src.setdefault(r["metric"], [None] * len(dates))[i] = r["value"]
            else:
                t = tables.setdefault(r["table_id"], {"schema_name": r["schema_name"],
                                                      "table_name": r["table_name"], "metrics": {}})
                t["metrics"].setdefault(r["metric"], [None] * len(dates))[i] = r["value"]
    published = [d in past and bool(past[d]) for d in dates]
    return {"dates": dates, "published": published, "source": src, "tables": tables}


def _tonight_tables(metric_rows: list[dict]) -> list[dict]:
    """One entry per table of tonight's metrics: id, names, changes per op, mirror numbers."""
    by: dict[str, dict] = {}
    for r in metric_rows:
        if r["table_id"] is None:
            continue
        t = by.setdefault(r["table_id"], {"table_id": r["table_id"], "schema_name": r["schema_name"],
                                          "table_name": r["table_name"]})
        t[r["metric"]] = r["value"]
    return sorted(by.values(), key=lambda t: (str(t["schema_name"]), str(t["table_name"]),
                                              str(t["table_id"])))


# ----------------------------------------------------------------- formatting

def _num(v, digits: int = 0) -> str:
    if v is None:
        return "–"
    if digits == 0 and float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:,.{digits or 1}f}"


def _pct(v) -> str:
    return "–" if v is None else f"{100 * v:.2f}%"


def _secs(v) -> str:
    if v is None:
        return "–"
    v = float(v)
    if v < 120:
        return f"{v:.1f} s"
    if v < 7200:
        return f"{v / 60:.1f} min"
    return f"{v / 3600:.1f} h"


def _nice_max(v: float) -> float:
    """A round axis maximum at or above ``v``."""
    if v <= 0:
        return 1.0
    import math

    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * exp >= v:
            return m * exp
    return 10 * exp


def _esc(x) -> str:
    return html.escape(str(x), quote=True)


# ----------------------------------------------------------------- charts (inline SVG)

W, H = 560, 190          # chart viewBox
PAD_L, PAD_R, PAD_T, PAD_B = 46, 8, 10, 34


def bar_chart(title: str, dates: list[str], stacks: list[tuple[str, str, list]], *,
              fmt: Callable = _num, threshold: float | None = None, threshold_label: str = "",
              published: list[bool] | None = None, marks: list[str | None] | None = None,
              chart_id: str = "") -> str:
    """Stacked bars, one per night (tonight last, outlined); a night without metrics shows
    a grey ``no data`` tick. ``stacks``: (label, colour, values per night)."""
    n = len(dates)
    sums = [sum((s[2][i] or 0) for s in stacks) for i in range(n)]
    top = _nice_max(max([*sums, threshold or 0, 0]))
    pw, ph = W - PAD_L - PAD_R, H - PAD_T - PAD_B
    step = pw / n
    bw = max(2.0, step * 0.72)
    parts = [f'<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{_esc(title)}" '
             f'data-chart="{_esc(chart_id)}" preserveAspectRatio="xMidYMid meet">']
    for frac in (0, 0.5, 1):
        y = PAD_T + ph * (1 - frac)
        parts.append(f'<line class="grid" x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}"/>'
                     f'<text class="axis" x="{PAD_L - 4}" y="{y + 3:.1f}" text-anchor="end">'
                     f'{_esc(fmt(top * frac))}</text>')
    for i, d in enumerate(dates):
        x = PAD_L + i * step + (step - bw) / 2
        has = published[i] if published is not None else any(s[2][i] is not None for s in stacks)
        tip = [f"{d}"]
        if not has:
            parts.append(f'<g data-date="{d}" data-nodata="1"><title>{d}: no metrics published '
                         f'(no run, or validation failed)</title>'
                         f'<line class="nodata" x1="{x:.1f}" x2="{x + bw:.1f}" y1="{PAD_T + ph - 1:.1f}" '
                         f'y2="{PAD_T + ph - 1:.1f}"/></g>')
        else:
            y = PAD_T + ph
            rects = []
            for label, color, vals in stacks:
                v = vals[i] or 0
                h = ph * v / top if top else 0
                if h > 0:
                    y -= h
                    rects.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bw:.1f}" height="{h:.1f}" '
                                 f'fill="{color}"/>')
                tip.append(f"{label}: {fmt(vals[i])}")
            tonight = i == n - 1
            parts.append(f'<g data-date="{d}" data-value="{sums[i]:g}"{" class=tonight" if tonight else ""}>'
                         f'<title>{_esc(" · ".join(tip))}</title>{"".join(rects)}'
                         f'<rect class="hit" x="{x:.1f}" y="{PAD_T}" width="{bw:.1f}" height="{ph}"/></g>')
        if marks and marks[i]:
            parts.append(f'<text class="mark {marks[i]}" x="{x + bw / 2:.1f}" y="{PAD_T + 9}" '
                         f'text-anchor="middle">{"!" if marks[i] == "error" else "▲"}</text>')
    # tonight's outline, the threshold, the date axis
    x = PAD_L + (n - 1) * step + (step - bw) / 2
    parts.append(f'<rect class="tonight-frame" x="{x - 1.5:.1f}" y="{PAD_T - 2}" width="{bw + 3:.1f}" '
                 f'height="{ph + 4}"/>')
    if threshold is not None:
        y = PAD_T + ph * (1 - threshold / top)
        parts.append(f'<line class="threshold" x1="{PAD_L}" x2="{W - PAD_R}" y1="{y:.1f}" y2="{y:.1f}"/>'
                     f'<text class="axis thr" x="{PAD_L + 4}" y="{y - 3:.1f}" text-anchor="start">'
                     f'{_esc(threshold_label)}</text>')
    for i, d in enumerate(dates):
        if (n - 1 - i) % 7 == 0:
            cx = PAD_L + i * step + step / 2
            label = "tonight" if i == n - 1 else d[5:]
            parts.append(f'<text class="axis" x="{cx:.1f}" y="{H - PAD_B + 13}" text-anchor="middle">'
                         f'{label}</text>')
    parts.append("</svg>")
    legend = "".join(f'<span class="key"><i style="background:{c}"></i>{_esc(lbl)}</span>'
                     for lbl, c, _ in stacks if len(stacks) > 1 or lbl)
    return (f'<figure class="card chart-card"><figcaption>{_esc(title)}</figcaption>{"".join(parts)}'
            f'<div class="legend">{legend}</div></figure>')


def sparkline(values: list, width: int = 132, height: int = 26, label: str = "") -> str:
    """A small line over the nights (gaps where a night has no value), tonight as a dot."""
    vals = [v for v in values if v is not None]
    top = max(vals) if vals else 0
    n = len(values)
    pts: list[list[str]] = [[]]
    for i, v in enumerate(values):
        if v is None:
            if pts[-1]:
                pts.append([])
            continue
        x = 2 + (width - 4) * i / max(n - 1, 1)
        y = height - 3 - (height - 6) * (v / top if top else 0)
        pts[-1].append(f"{x:.1f},{y:.1f}")
    lines = "".join(f'<polyline points="{" ".join(p)}"/>' for p in pts if len(p) > 1)
    dots = "".join(f'<circle r="1.2" cx="{p[0].split(",")[0]}" cy="{p[0].split(",")[1]}"/>'
                   for p in pts if len(p) == 1)
    last = values[-1] if values else None
    end = ""
    if last is not None:
        y = height - 3 - (height - 6) * (last / top if top else 0)
        end = f'<circle class="now" r="2.4" cx="{width - 2}" cy="{y:.1f}"/>'
    title = f"{label}: last {n} nights, max {_num(top)}, tonight {_num(last)}"
    return (f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
            f'role="img" aria-label="{_esc(title)}"><title>{_esc(title)}</title>{lines}{dots}{end}</svg>')


# ----------------------------------------------------------------- page pieces

STYLE = """
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--bg:#fff;--panel:#f6f8fa;--ok:#1a7f37;
--okbg:#dafbe1;--warn:#7d4e00;--warnbg:#fff8c5;--err:#b0131f;--errbg:#ffebe9}
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--fg);background:var(--bg);margin:0 auto;padding:1.2rem 1.6rem 3rem;max-width:78rem;
font-size:14px;line-height:1.45}
h1{font-size:1.45rem;margin:.2rem 0 .4rem}h2{font-size:1.1rem;margin:1.6rem 0 .5rem;
border-bottom:1px solid var(--line);padding-bottom:.2rem}h3{font-size:.98rem;margin:1rem 0 .4rem}
a{color:#0550ae}nav{font-size:.9rem;color:var(--muted)}nav a{margin-right:.9rem}
code{font-size:.9em;background:var(--panel);padding:0 .25em;border-radius:3px}
table{border-collapse:collapse;margin:.4rem 0;font-size:.9rem}
td,th{border-bottom:1px solid var(--line);padding:.28rem .55rem;text-align:left;vertical-align:top}
th{background:var(--panel);font-weight:600;vertical-align:bottom}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}th.n{text-align:right}
.scroll{overflow-x:auto}
.verdict{font-weight:700;padding:.5rem .8rem;border-radius:6px;display:inline-block;margin:.2rem 0}
.verdict.ok{color:var(--ok);background:var(--okbg)}.verdict.bad{color:var(--err);background:var(--errbg)}
.badge{display:inline-block;padding:0 .45em;border-radius:1em;font-size:.8rem;font-weight:600;
white-space:nowrap;border:1px solid transparent}
.badge.ok{color:var(--ok);background:var(--okbg)}.badge.warn{color:var(--warn);background:var(--warnbg);
border-color:#d4a72c}.badge.error{color:var(--err);background:var(--errbg);border-color:#ff8182}
.badge.wait,.badge.none{color:var(--muted);background:var(--panel)}
tr.fail td{background:var(--errbg)}tr.warn td{background:var(--warnbg)}
.kpis{display:grid;grid-template-columns:repeat(auto-fill,minmax(8.6rem,1fr));gap:.6rem;margin:.6rem 0}
.kpi{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:.5rem .7rem}
.kpi b{display:block;font-size:1.3rem;font-variant-numeric:tabular-nums}
.kpi span{font-size:.8rem;color:var(--muted)}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(26rem,1fr));gap:.9rem}
.card{border:1px solid var(--line);border-radius:8px;padding:.55rem .7rem .4rem;margin:0;background:#fff}
figcaption{font-weight:600;font-size:.92rem;margin-bottom:.2rem}
svg.chart{width:100%;height:auto;display:block}
svg.chart text{font-size:10px;fill:var(--muted)}
svg.chart .grid{stroke:#e6eaef;stroke-width:1}
svg.chart .nodata{stroke:#b7bfc7;stroke-width:3;stroke-dasharray:2 2}
svg.chart .hit{fill:transparent}
svg.chart .tonight-frame{fill:none;stroke:#1f2328;stroke-width:1;stroke-dasharray:3 2}
svg.chart .threshold{stroke:var(--err);stroke-width:1.2;stroke-dasharray:5 3}
svg.chart text.thr{fill:var(--err)}
svg.chart text.mark{font-size:11px;font-weight:700}
svg.chart text.mark.error{fill:var(--err)}svg.chart text.mark.warn{fill:#bf8700}
.legend{font-size:.78rem;color:var(--muted);margin-top:.15rem}
.key{margin-right:.8rem;white-space:nowrap}.key i{display:inline-block;width:.7rem;height:.7rem;
border-radius:2px;margin-right:.3rem;vertical-align:-1px}
svg.spark{vertical-align:middle}svg.spark polyline{fill:none;stroke:#0072B2;stroke-width:1.3}
svg.spark circle{fill:#0072B2}svg.spark circle.now{fill:#1f2328}
svg.hours rect{fill:#0072B2}svg.hours text{fill:#59636e}
.muted{color:var(--muted)}ul.failures li{margin:.2rem 0}
.msg{font-size:.82rem;color:var(--muted);max-width:46rem}
@media (max-width:700px){body{padding:.8rem}.grid{grid-template-columns:1fr}}
@media print{
 @page{size:A4;margin:12mm}
 body{max-width:none;padding:0;font-size:10pt}
 nav,.noprint{display:none}
 a{color:inherit;text-decoration:none}
 h2{break-after:avoid}
 .card,.kpi,table,tr{break-inside:avoid}
 .grid{grid-template-columns:1fr 1fr;gap:6mm}
 .scroll{overflow:visible}
 th{background:#eee!important;-webkit-print-color-adjust:exact;print-color-adjust:exact}
 .badge,.verdict,tr.fail td,tr.warn td,svg{-webkit-print-color-adjust:exact;print-color-adjust:exact}
}
"""


def _table(headers: list[str], rows: list[list], keys: list[str] | None = None,
           numeric: set[int] | None = None, row_class: list[str] | None = None) -> str:
    """An HTML table; ``keys`` name the columns in ``data-metric`` attributes (for tests and
    scrapers); ``numeric`` holds the indexes of right-aligned number columns."""
    numeric = numeric or set()
    head = "".join(f'<th{" class=n" if i in numeric else ""}>{_esc(h)}</th>' for i, h in enumerate(headers))
    attrs = [f' data-metric="{_esc(k)}"' for k in keys] if keys else [""] * len(headers)
    body = []
    for j, r in enumerate(rows):
        cls = f' class="{row_class[j]}"' if row_class and row_class[j] else ""
        cells = []
        for i, (a, c) in enumerate(zip(attrs, r)):
            raw = c if isinstance(c, Markup) else _esc(c)
            cells.append(f'<td{a}{" class=n" if i in numeric else ""}>{raw}</td>')
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'


class Markup(str):
    """Text that is already HTML (not escaped by ``_table``)."""


def source_page(name: str) -> str:
    return f"{name}.html"


def _page(title: str, parts: list[str]) -> str:
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width,initial-scale=1'>"
            f"<title>{_esc(title)}</title><style>{STYLE}</style></head><body>{''.join(parts)}"
            "</body></html>")


def _verdict(manifest: dict, success: bool, failures: list[str]) -> list[str]:
    verdict = "PASSED: published" if success else "FAILED: nothing was published"
    parts = [f'<p class="verdict {"ok" if success else "bad"}">Validation {verdict}</p>',
             f"<p class=muted>run <code>{_esc(manifest['run_id'])}</code></p>"]
    if failures:
        parts.append('<h2>Why validation failed</h2><ul class="failures">'
                     + "".join(f"<li>{_esc(f)}</li>" for f in failures) + "</ul>"
                     + f"<p>The staged data stays in <code>staging/{_esc(manifest['run_id'])}"
                     "/</code> for inspection.</p>")
    return parts


def _expectations(results: list[dict]) -> str:
    rows, cls = [], []
    for r in results:
        rows.append([r["suite"], r["expectation"], r["column"],
                     Markup('<span class="badge ok">pass</span>' if r["success"]
                            else '<span class="badge error">FAIL</span>'),
                     "" if r.get("unexpected_count") is None else r["unexpected_count"],
                     "" if r.get("element_count") is None else r["element_count"], r.get("why") or "",
                     " | ".join(r.get("examples") or [])])
        cls.append("" if r["success"] else "fail")
    return (f"<h2>Expectations ({sum(not r['success'] for r in results)} failed of {len(results)})</h2>"
            + _table(["suite", "expectation", "column", "result", "unexpected", "rows", "why", "examples"],
                     rows, numeric={4, 5}, row_class=cls))


STATUS_BADGE = {"ok": ("ok", "ok"), "not_enough_history": ("wait", "not enough history"),
                "no_value": ("none", "no value tonight")}


def _check_badge(c: dict) -> str:
    if c["status"] == "flagged":
        sev = c["severity"]
        return f'<span class="badge {sev}">{"ERROR" if sev == "error" else "WARN"}</span>'
    cls, text = STATUS_BADGE.get(c["status"], ("none", c["status"]))
    return f'<span class="badge {cls}">{text}</span>'


def _checks_table(checks: list[dict], show_source: bool = False) -> str:
    if not checks:
        return "<p class=muted>no checks configured</p>"
    rows, cls = [], []
    for c in checks:
        hist = c.get("history") or {}
        n_hist = len(hist)
        median = "–" if c.get("median") is None else _fmt_metric(c["metric"], c["median"])
        if c["status"] == "not_enough_history":
            median = f"{n_hist} of {c['min_history']} nights needed"
        row = ([c["source"]] if show_source else []) + [
            Markup(f"<b>{_esc(c['name'])}</b>"), c["metric"] + (f" ({c['table']})" if c.get("table") else ""),
            _fmt_metric(c["metric"], c.get("tonight")), median,
            f"{n_hist} of {c['window']}", c["rule"], c["severity"],
            Markup(_check_badge(c) + (f'<div class="msg">{_esc(c.get("reason") or "")}</div>'
                                       if c["status"] == "flagged" else ""))]
        rows.append(row)
        cls.append("fail" if c["status"] == "flagged" and c["severity"] == "error"
                   else "warn" if c["status"] == "flagged" else "")
    keys = (["source"] if show_source else []) + ["check", "metric", "tonight", "median",
                                                   "history_nights", "rule", "severity", "result"]
    heads = (["source"] if show_source else []) + ["check", "metric", "tonight", "median of window",
                                                    "published nights", "bounds", "severity", "result"]
    off = 1 if show_source else 0
    return _table(heads, rows, keys, numeric={2 + off, 3 + off}, row_class=cls)


def _fmt_metric(metric: str, v) -> str:
    if v is None:
        return "–"
    if metric.endswith("_share"):
        return _pct(v)
    if metric.endswith("_s"):
        return _secs(v)
    return _num(v, 0 if float(v).is_integer() else 2)


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


def _marks(checks: list[dict], dates: list[str], past_flags: dict[str, str]) -> list[str | None]:
    """Per night: 'error' / 'warn' when a check was flagged that night (tonight from the
    results, earlier nights from their published ``check:`` verdicts)."""
    out = []
    for d in dates[:-1]:
        out.append(past_flags.get(d))
    tonight = None
    for c in checks:
        if c["status"] == "flagged":
            tonight = "error" if c["severity"] == "error" or tonight == "error" else "warn"
    out.append(tonight)
    return out


def _past_flags(series: dict) -> dict[str, str]:
    flags: dict[str, str] = {}
    for metric, vals in series["source"].items():
        if not metric.startswith(M.CHECK_PREFIX):
            continue
        for d, v in zip(series["dates"], vals):
            if v == 2:
                flags[d] = "error"
            elif v == 1 and flags.get(d) != "error":
                flags[d] = "warn"
    return flags


def _kpis(a: dict) -> str:
    m = a["metrics"]
    tiles = [
        ("records read", _num(m.get("records_read")),
         f"{_num(m.get('archives'))} archive{'' if m.get('archives') == 1 else 's'}, "
         f"{_num(m.get('bytes_read'))} bytes"),
        ("changes", _num(m.get("changes")), f"{_num(m.get('transactions_committed'))} transactions"),
        ("quarantine share", _pct(m.get("quarantine_share")),
         f"threshold {_pct(a.get('threshold'))}"),
        ("open transactions", _num(m.get("open_transactions")),
         f"oldest {_num(m.get('open_trx_oldest_age_nights'))} nights"
         if m.get("open_transactions") else "none carried"),
        ("commit lag p95", _secs(m.get("commit_lag_p95_s")),
         f"max {_secs(m.get('commit_lag_max_s'))}" if m.get("commit_lag_max_s") is not None
         else "no commit times"),
        ("largest transaction", _num(m.get("largest_transaction_changes")), "changes"),
    ]
    if m.get("mirror_missing_base") is not None:
        tiles.append(("mirror missing base", _num(m.get("mirror_missing_base")),
                      f"{_num(m.get('mirror_rows'))} mirror rows"))
    secs = sum(v for k, v in m.items() if k.startswith("seconds_") and v is not None)
    tiles.append(("run seconds", _secs(secs), "stage to validate"))
    return '<div class="kpis">' + "".join(
        f'<div class="kpi" data-kpi="{_esc(lbl)}"><span>{_esc(lbl)}</span><b>{_esc(v)}</b>'
        f"<span>{_esc(sub)}</span></div>" for lbl, v, sub in tiles) + "</div>"


def _charts(a: dict) -> str:
    s = a["series"]
    dates, src, pub = s["dates"], s["source"], s["published"]
    none = [None] * len(dates)
    marks = _marks(a["checks"], dates, _past_flags(s))
    ops = [op for op in OP_COLORS if any(v for v in src.get(f"changes_{op}", none) if v)] or ["c", "u", "d"]
    charts = [
        bar_chart("Changes by op, last 30 nights", dates,
                  [(OP_NAMES[op], OP_COLORS[op], src.get(f"changes_{op}", none)) for op in ops],
                  published=pub, marks=marks, chart_id="changes_by_op"),
        bar_chart("Quarantined share of records read", dates,
                  [("quarantined share", "#D55E00", src.get("quarantine_share", none))], fmt=_pct,
                  threshold=a.get("threshold"), threshold_label=f"threshold {_pct(a.get('threshold'))}",
                  published=pub, chart_id="quarantine_share"),
        bar_chart("Open transactions carried to the next night", dates,
                  [("open transactions", "#56B4E9", src.get("open_transactions", none))],
                  published=pub, chart_id="open_transactions"),
        bar_chart("Seconds per stage", dates,
                  [(st, c, src.get(f"seconds_{st}", none)) for st, c in STAGE_COLORS.items()],
                  fmt=_secs, published=pub, chart_id="stage_seconds"),
    ]
    ages = src.get("open_trx_oldest_age_nights", none)
    note = ""
    if any(v for v in ages if v):
        note = ('<p class="muted">Age in nights of the oldest open transaction: '
                + ", ".join(f"{d[5:]}: {_num(v)}" for d, v in zip(dates, ages) if v) + "</p>")
    key = ('<p class="muted">Each bar is one night; the dashed frame is tonight; a grey dashed '
           'tick is a night without published metrics (not run, or refused by validation); '
           '<b style="color:#b0131f">!</b> a history check failed that night, '
           '<b style="color:#bf8700">▲</b> one warned.</p>')
    return f'<div class="grid">{"".join(charts)}</div>{note}{key}'


def _tables_section(a: dict) -> str:
    tables = a["tables"]
    if not tables:
        return "<p class=muted>no tables</p>"
    series = a["series"]["tables"]
    has_mirror = any(t.get("mirror_rows") is not None for t in tables)
    heads = ["schema", "table", "id", *[OP_NAMES[op] for op in M.OPS], "changes"]
    keys = ["schema_name", "table_name", "table_id", *[f"changes_{op}" for op in M.OPS], "changes"]
    if has_mirror:
        heads += ["mirror rows", "mirror missing base"]
        keys += ["mirror_rows", "mirror_missing_base"]
    heads.append("changes, last 30 nights")
    keys.append("sparkline")
    rows = []
    for t in tables:
        vals = (series.get(t["table_id"]) or {}).get("metrics", {}).get("changes") \
            or [None] * (NIGHTS - 1) + [t.get("changes")]
        row = [t["schema_name"] or "", t["table_name"] or "", t["table_id"],
               *[_num(t.get(f"changes_{op}", 0)) for op in M.OPS], _num(t.get("changes", 0))]
        if has_mirror:
            row += [_num(t.get("mirror_rows")), _num(t.get("mirror_missing_base"))]
        row.append(Markup(sparkline(vals, label=f"{t['schema_name']}.{t['table_name']} changes")))
        rows.append(row)
    numeric = set(range(3, 3 + len(M.OPS) + 1 + (2 if has_mirror else 0)))
    return _table(heads, rows, keys, numeric=numeric)


def render_source(manifest: dict, name: str, a: dict, success: bool, failures: list[str],
                  results: list[dict]) -> str:
    """The one-page nightly summary of one source."""
    date = manifest["date"]
    t = a["totals"]
    share = t["quarantined"] / t["records_read"] if t["records_read"] else 0.0
    flagged = [c for c in a["checks"] if c["status"] == "flagged"]
    parts = [f'<nav><a href="index.html">&larr; all sources</a><a href="data_docs/index.html">'
             "Great Expectations Data Docs</a></nav>",
             f"<h1>{_esc(name)} <span class=muted>({_esc(a['format'])})</span>: night of "
             f"{_esc(date)}</h1>", *_verdict(manifest, success, failures), _kpis(a)]
    parts.append(f"<h2>Checks against history ({len(flagged)} flagged)</h2>" + _checks_table(a["checks"]))
    parts.append("<h2>The last 30 nights</h2>" + _charts(a))
    parts.append(f"<h2>Tables ({len(a['tables'])})</h2>" + _tables_section(a))
    parts.append('<h2>Records read and how each was accounted for</h2>' + _table(
        ["records read", "published changes", "control", "skipped", "held open", "quarantined"],
        [[t[k] for k in BUCKETS]], list(BUCKETS), numeric=set(range(6))))
    parts.append(f"<p>quarantined share {share:.2%} (threshold {a['threshold']:.2%})</p>")
    parts.append("<h3>Per archive</h3>" + _table(
        ["archive", "records read", "published", "control", "skipped", "held open",
         "quarantined", "skipped by rule"],
        [[r["archive_file"], *[r[k] for k in BUCKETS], r["skipped_by_rule"]] for r in a["archives"]],
        numeric=set(range(1, 7))))
    parts.append(f"<h2>Quarantined records ({t['quarantined']}) by reason</h2>" + (_table(
        ["error class", "rows", "first archive", "offset", "example message"],
        [[r["error_class"], r["rows"], r["archive_file"], r["record_offset"], r["example"]]
         for r in a["reasons"]], ["error_class", "rows", "archive_file", "record_offset", "example"],
        numeric={1, 3}) if a["reasons"] else "<p class=muted>none</p>"))
    parts.append(f'<h2>Open transactions carried to the next night</h2><p data-metric="held_transactions">'
                 f"{a['held_transactions']} transactions ({a['held_records']} records)"
                 + (f", the oldest began {_num(a['metrics'].get('open_trx_oldest_age_nights'))} nights ago"
                    if a["held_transactions"] else "") + "</p>")
    parts.append("<h2>Change volume by hour of commit (UTC)</h2>" + (
        _svg_hours(a["hours"]) if any(a["hours"]) else
        "<p class=muted>no commit times (the format has none, or nothing committed)</p>"))
    for fn in SOURCE_SECTIONS:
        try:
            parts.append(fn(name, a) or "")
        except Exception as exc:  # noqa: BLE001 - one section never takes the report down
            parts.append(f"<p class=muted>section {_esc(getattr(fn, '__name__', fn))} failed: "
                         f"{_esc(exc)}</p>")
    parts.append(_expectations(results))
    return _page(f"dblog {name} {date}", parts)


def render(manifest: dict, agg: dict, success: bool, failures: list[str], results: list[dict]) -> str:
    """The night's index: verdict, one line per source (linking its page), checks, expectations."""
    date = manifest["date"]
    parts = [f'<nav><a href="data_docs/index.html">Great Expectations Data Docs</a></nav>',
             f"<h1>dblog nightly report {_esc(date)}</h1>", *_verdict(manifest, success, failures)]
    rows = []
    for name, a in agg.items():
        t = a["totals"]
        share = t["quarantined"] / t["records_read"] if t["records_read"] else 0.0
        flagged = [c for c in a["checks"] if c["status"] == "flagged"]
        errors = sum(c["severity"] == "error" for c in flagged)
        warns = len(flagged) - errors
        waiting = sum(c["status"] == "not_enough_history" for c in a["checks"])
        badge = (f'<span class="badge error">{errors} error</span> ' if errors else "") + \
                (f'<span class="badge warn">{warns} warn</span> ' if warns else "")
        if not flagged:
            badge = ('<span class="badge wait">not enough history</span>' if waiting
                     else '<span class="badge ok">ok</span>')
        vol = a["series"]["source"].get("records_read") or [None] * NIGHTS
        rows.append(f'<tr><td><a href="{_esc(source_page(name))}"><b>{_esc(name)}</b></a></td>'
                    f"<td>{_esc(a['format'])}</td>"
                    + "".join(f"<td class=n>{_num(t[k])}</td>" for k in BUCKETS)
                    + f"<td class=n>{share:.2%} / {a['threshold']:.2%}</td>"
                    f"<td class=n>{a['held_transactions']}</td>"
                    f"<td>{sparkline(vol, label=f'{name} records read')}</td><td>{badge}</td></tr>")
    head = "".join(f"<th{' class=n' if 1 < i < 10 else ''}>{h}</th>" for i, h in enumerate(
        ("source", "format", "records read", "published", "control", "skipped", "held open",
         "quarantined", "quarantined share / threshold", "open trans&shy;actions carried",
         "records read, 30 nights", "history checks")))
    parts.append(f'<h2>Sources</h2><div class="scroll"><table><thead><tr>{head}</tr></thead>'
                 f"<tbody>{''.join(rows)}</tbody></table></div>")
    all_checks = [c for a in agg.values() for c in a["checks"]]
    flagged = [c for c in all_checks if c["status"] == "flagged"]
    waiting = [c for c in all_checks if c["status"] == "not_enough_history"]
    parts.append(f"<h2>History checks flagged tonight ({len(flagged)})</h2>"
                 + (_checks_table(flagged, show_source=True) if flagged else
                    "<p class=muted>none" + (f" ({len(waiting)} checks wait for history: "
                                             "not enough history yet)" if waiting else "") + "</p>"))
    parts.extend(landing_report.index_warnings(agg))
    parts.append(_expectations(results))
    return _page(f"dblog {date}", parts)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


register_section(landing_report.source_section)


@register_section
def mirror_section(name: str, a: dict) -> str:
    """Mirrors of the source (dblog/mirror.py's summary): rows and ``mirror_missing_base`` per
    table, and the tables that get no mirror with the reason."""
    m = a.get("mirror") or {}
    if not m:
        return ""
    prev = m.get("previous") or {}
    how = {"first": "first night: from the initial snapshots (or empty)",
           "chain": f"continued from {prev.get('date')}",
           "gone": f"the mirror of {prev.get('date')} is past mirror_retention: this night's "
                   "mirror and net changes stay as published before"}.get(prev.get("mode"), "")
    out = [f"<h2>Mirrors</h2><p>{html.escape(how)}</p>"]
    tables = m.get("tables") or []
    out.append(_table(["schema", "table", "rows", "mirror_missing_base"],
                      [[t["schema_name"], t["table_name"], t["rows"], t["mirror_missing_base"]]
                       for t in tables], ["schema_name", "table_name", "rows", "mirror_missing_base"])
               if tables else "<p>no table holds rows</p>")
    skipped = m.get("without_mirror") or []
    if skipped:
        out.append("<h3>Tables without a mirror</h3>" + _table(
            ["schema", "table", "why"], [[t["schema_name"], t["table_name"], t["reason"]] for t in skipped],
            ["schema_name", "table_name", "reason"]))
    return "".join(out)


def write_report(spark, manifest: dict, run_dir: Path, root: DataRoot, success: bool,
                 failures: list[str], results: list[dict], checks: list | None = None,
                 metrics: dict | None = None, aggregates: dict | None = None) -> Path:
    """``reports/<date>/index.html``, one ``<source>.html`` per source and ``summary.json``.

    ``checks``: the history checks' results (``dblog.checks.CheckResult``); ``metrics``:
    tonight's metric rows per source (else read from the staged ``metrics/``);
    ``aggregates``: ``report_aggregates`` of the night when already computed (the validate
    stage computes them beside the check datasets), else computed here."""
    run_dir = Path(run_dir)
    date = manifest["date"]
    agg = report_aggregates(spark, manifest, run_dir) if aggregates is None else aggregates
    from .mirror import load_mirror_summary

    mirror_summary = load_mirror_summary(run_dir)
    checks_json = [c.to_json() if hasattr(c, "to_json") else dict(c) for c in checks or []]
    for s in manifest["sources"]:
        name = s["name"]
        a = agg[name]
        rows = (metrics or {}).get(name)
        if rows is None:
            rows = M.read_partition(M.partition_dir(run_dir / M.METRICS, name, date))
        a["threshold"] = float(s["quarantine_threshold"])
        a["mirror"] = mirror_summary.get(name, {})
        a["totals"] = totals(a)
        a["metrics"] = {r["metric"]: r["value"] for r in rows if r["table_id"] is None}
        a["tables"] = _tonight_tables(rows)
        a["checks"] = [c for c in checks_json if c["source"] == name]
        a["held_transactions"] = int(a["metrics"].get("open_transactions") or 0)
        a["held_records"] = int(a["metrics"].get("open_transaction_records") or 0)
        a["series"] = _series(root, name, date, rows)
    out_dir = root.reports(date)
    out_dir.mkdir(parents=True, exist_ok=True)
    _write(out_dir / "summary.json", json.dumps(
        {"date": date, "run_id": manifest["run_id"], "success": success,
         "failures": failures, "sources": agg, "expectations": results, "checks": checks_json},
        indent=1, default=str))
    for name, a in agg.items():
        _write(out_dir / source_page(name), render_source(manifest, name, a, success, failures, results))
    _write(out_dir / "index.html", render(manifest, agg, success, failures, results))
    return out_dir / "index.html"
