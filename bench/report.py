"""Ratios, targets and the Markdown rendering of a benchmark result (and a comparison of two)."""

from __future__ import annotations

GOALS = {
    "decode vs plain (local[2])": 3.0,
    "decode vs udf (local[2])": 2.0,
    "local[2] vs local[1]": 1.7,
    "driver memory N / (N/10)": 1.2,      # at most: "flat"
    "validation share of run": 0.25,      # at most
}
AT_MOST = {"driver memory N / (N/10)", "validation share of run"}


def _find(rows, fmt, stage, master=None):
    for r in rows:
        if r["format"] == fmt and r["stage"] == stage and (master is None or r["master"] == master):
            return r
    return None


def _r(x: float) -> float:
    """Three significant figures: a ratio of 0.004 stays 0.004, not 0.0."""
    return float(f"{x:.3g}")


def ratios(report: dict) -> dict:
    """format -> {name: value} (None when the measurement was not made)."""
    rows = report["rows"]
    out = {}
    for fmt in report["meta"]["formats"]:
        d: dict = {}
        plain = _find(rows, fmt, "plain")
        for m in report["meta"]["masters"]:
            dec = _find(rows, fmt, "decode", m)
            udf = _find(rows, fmt, "udf", m)
            if dec and plain:
                d[f"decode vs plain ({m})"] = _r(plain["seconds"] / dec["seconds"])
            if dec and udf:
                d[f"decode vs udf ({m})"] = _r(udf["seconds"] / dec["seconds"])
            if udf and plain:
                d[f"udf vs plain ({m})"] = _r(plain["seconds"] / udf["seconds"])
        d1, d2 = _find(rows, fmt, "decode", "local[1]"), _find(rows, fmt, "decode", "local[2]")
        if d1 and d2:
            d["local[2] vs local[1]"] = _r(d1["seconds"] / d2["seconds"])
        big = _find(rows, fmt, "decode", report["meta"]["masters"][-1])
        small = _find(rows, fmt, "decode@N/10")
        if big and small and small["memory_mb"]["driver"]:
            d["driver memory N / (N/10)"] = round(big["memory_mb"]["driver"]
                                                 / small["memory_mb"]["driver"], 2)
            d["JVM memory N / (N/10)"] = round(big["memory_mb"]["jvm"]
                                              / max(small["memory_mb"]["jvm"], 1), 2)
        run, val = _find(rows, fmt, "run"), _find(rows, fmt, "run:validate")
        if run and val:
            d["validation share of run"] = round(val["seconds"] / run["seconds"], 3)
        out[fmt] = d
    return out


def targets(report: dict) -> list[dict]:
    out = []
    for fmt, d in ratios(report).items():
        for name, goal in GOALS.items():
            v = d.get(name)
            if v is None:
                continue
            if name in AT_MOST:
                met = v <= goal
                by = None if met else f"{v / goal:.2f}x over the limit ({v} > {goal})"
            else:
                met = v >= goal
                by = None if met else f"short by {goal - v:.2f} ({v} < {goal}; needs " \
                                      f"{goal / v:.2f}x faster)"
            out.append({"format": fmt, "target": name, "goal": goal, "value": v, "met": met,
                        "missed_by": by})
    return out


def _mb(r, k):
    return f"{r['memory_mb'].get(k, 0):,.0f}"


def markdown(report: dict) -> str:
    m = report["meta"]
    lines = [f"# dblog-etl decode benchmark {m['stamp']}", "",
             f"N = {m['n']:,} changes per format; machine: {m['nproc']} CPUs ({m['cpu']}), "
             f"{m['memory']}; Python {m['python']}, PySpark {m['pyspark']}; commit "
             f"{m['commit']}; load average at start {m['loadavg_start']}, at end "
             f"{m.get('loadavg_end')}" + (f"; label: {m['label']}" if m.get("label") else "")
             + "; the JVMs' class archive (`dblog jvm-cache`): "
               + ("present (each job's result says whether its JVM mapped it)"
                  if m.get("jvm_class_archive") else "none"),
             "",
             "## Per format and stage", "",
             "| format | stage | master | seconds | archive MB | records | records/s | MB/s "
             "| driver py MB | JVM MB | workers MB | tree MB | load1 |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in report["rows"]:
        lines.append(
            f"| {r['format']} | {r['stage']} | {r['master']} | {r['seconds']:.2f} | "
            f"{r['bytes'] / 1e6:,.1f} | {r['records']:,} | {r['records_per_s']:,} | "
            f"{r['mb_per_s']:,.2f} | {_mb(r, 'driver')} | {_mb(r, 'jvm')} | {_mb(r, 'workers')} | "
            f"{_mb(r, 'tree')} | {r['load1']} |")
    rat = ratios(report)
    names = sorted({k for d in rat.values() for k in d})
    lines += ["", "## Ratios (higher is better for speed ratios)", "",
              "| format | " + " | ".join(names) + " |",
              "|---|" + "---:|" * len(names)]
    for fmt, d in rat.items():
        lines.append(f"| {fmt} | " + " | ".join(str(d.get(k, "")) for k in names) + " |")
    lines += ["", "## Targets", "", "| format | target | goal | value | met | missed by |",
              "|---|---|---:|---:|---|---|"]
    for t in report.get("targets", []):
        goal = ("<= " if t["target"] in AT_MOST else ">= ") + str(t["goal"])
        lines.append(f"| {t['format']} | {t['target']} | {goal} | {t['value']} | "
                     f"{'yes' if t['met'] else 'NO'} | {t['missed_by'] or ''} |")
    return "\n".join(lines) + "\n"


def compare(a: dict, b: dict) -> str:
    """Seconds of run B relative to run A, per format, stage and master."""
    idx = {(r["format"], r["stage"], r["master"]): r for r in a["rows"]}
    lines = [f"A = {a['meta']['stamp']} (N {a['meta']['n']:,}, load {a['meta']['loadavg_start']}), "
             f"B = {b['meta']['stamp']} (N {b['meta']['n']:,}, load {b['meta']['loadavg_start']})",
             "", "| format | stage | master | A s | B s | B/A | A rec/s | B rec/s |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in b["rows"]:
        o = idx.get((r["format"], r["stage"], r["master"]))
        if o is None:
            continue
        lines.append(f"| {r['format']} | {r['stage']} | {r['master']} | {o['seconds']:.2f} | "
                     f"{r['seconds']:.2f} | {r['seconds'] / max(o['seconds'], 1e-9):.2f} | "
                     f"{o['records_per_s']:,} | {r['records_per_s']:,} |")
    return "\n".join(lines) + "\n"
