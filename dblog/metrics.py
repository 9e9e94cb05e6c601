"""``metrics/``: what each night measured, per source and table (SPEC section 5, "Metrics").

One row per (source, date, table_id or null for the whole source, metric, value), staged
under ``staging/<run_id>/metrics/source=S/date=D/`` and published with the night (the
``metrics`` dataset of ``dblog/datasets.py``). Columns in the files: ``table_id``,
``schema_name``, ``table_name``, ``metric``, ``value`` (double), ``run_id``; ``source`` and
``date`` are the partition folders.

Computed at the start of the validate stage (everything it measures is staged by then) by
four small Spark aggregations over the staged audit, changes, transactions and held state,
run side by side; what comes back to the driver is one row per (source, table, op), never
a row per change. ``mirror_stats`` (written by the mirror step) and the archive list of the
manifest are read directly: they hold one row per table and per archive.

Metrics (``table_id`` null unless marked *per table*):

=================================  ==========================================================
``archives``, ``bytes_read``       archives of the night and their bytes (the manifest)
``records_read``                   records read, and their buckets ``records_published``,
                                   ``records_control``, ``records_skipped``, ``records_held_open``,
                                   ``records_quarantined`` (the audit)
``bytes_quarantined``              bytes quarantined (the audit's byte column, else the
                                   quarantine rows' ``n_bytes``; absent while neither exists)
``quarantine_share``               records_quarantined / records_read (0 for an empty night)
``bytes_quarantine_share``         bytes_quarantined / bytes_read (with bytes_quarantined)
``changes``, ``changes_<op>``      published changes, in all and per op (also *per table*)
``transactions_committed``,        transactions that ended tonight
``transactions_rolled_back``
``largest_transaction_changes``    change count of tonight's largest committed transaction
``commit_lag_p50_s``, ``_p95_s``,  end of the night (the day after the logical date, 00:00
``commit_lag_max_s``               UTC) minus ``commit_ts``, over committed transactions with a
                                   commit time (approximate percentiles; absent for formats
                                   without commit times, e.g. solidDB)
``open_transactions``              transactions held open into the next night
``open_transaction_records``       records they hold (this night's and carried ones)
``open_trx_oldest_age_nights``     nights since the oldest of them began: 0 = it began
                                   tonight (from the date folder of its earliest archive)
``mirror_rows``,                   from ``mirror_stats`` when the mirror step wrote it (also
``mirror_missing_base``            *per table*)
``seconds_<stage>``                seconds of the stages done before the metrics are frozen:
                                   ``stage``, ``decode``, ``order``; ``validate`` is added at
                                   the end of the validate stage (see below)
``check:<name>``                   the history checks' verdicts (``dblog/checks.py``): 0 passed,
                                   1 flagged at severity warn, 2 flagged at severity error
=================================  ==========================================================

Which stage seconds a night's own metrics can hold: the metrics are part of what the
publish makes visible, so they are frozen before the publish; a night holds the seconds
of ``stage``, ``decode``, ``order`` and ``validate`` (validate's are measured up to its
report and written, with the check verdicts, as a second small file of the same staged
partition before the publish). The publish's own seconds go to the lineage COMPLETE event
and ``dblog run``'s last lines, not to the metrics.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

log = logging.getLogger("dblog.metrics")

METRICS = "metrics"
SECONDS_DIR = "seconds"
MIRROR_STATS = "mirror_stats"
OPS = ("c", "u", "d", "m", "t", "ddl")
BUCKETS = ("published", "control", "skipped", "held_open", "quarantined")
STAGES = ("stage", "decode", "order", "validate")
SOURCE_METRICS = (
    "archives", "bytes_read", "records_read", *(f"records_{b}" for b in BUCKETS),
    "bytes_quarantined", "quarantine_share", "bytes_quarantine_share",
    "changes", *(f"changes_{op}" for op in OPS),
    "transactions_committed", "transactions_rolled_back", "largest_transaction_changes",
    "commit_lag_p50_s", "commit_lag_p95_s", "commit_lag_max_s",
    "open_transactions", "open_transaction_records", "open_trx_oldest_age_nights",
    "mirror_rows", "mirror_missing_base", *(f"seconds_{s}" for s in STAGES),
)
TABLE_METRICS = ("changes", *(f"changes_{op}" for op in OPS), "mirror_rows", "mirror_missing_base")
CHECK_PREFIX = "check:"
COLUMNS = ("table_id", "schema_name", "table_name", "metric", "value", "run_id")
# byte columns the audit may carry (landing's byte accounting), first match wins
_AUDIT_BYTES_QUARANTINED = ("bytes_quarantined", "quarantined_bytes")
_ARCHIVE_DATE = r"^[^/]+/(\d{4}-\d{2}-\d{2})/"


def arrow_schema():
    import pyarrow as pa

    return pa.schema([("table_id", pa.string()), ("schema_name", pa.string()),
                      ("table_name", pa.string()), ("metric", pa.string()),
                      ("value", pa.float64()), ("run_id", pa.string())])


def partition_dir(base: Path, source: str, date: str) -> Path:
    return Path(base) / f"source={source}" / f"date={date}"


def end_of_night(date: str) -> _dt.datetime:
    """The end of logical date ``date``: the next day, 00:00 UTC."""
    d = _dt.date.fromisoformat(date) + _dt.timedelta(days=1)
    return _dt.datetime.combine(d, _dt.time(), _dt.timezone.utc)


# ----------------------------------------------------------------- stage seconds

def record_seconds(run_dir: Path, stage: str, seconds: float) -> None:
    """Remember how long ``stage`` took in ``<run_dir>/seconds/<stage>.json`` (one file per
    stage, so that tasks of the DAG running in other processes never write the same file)."""
    d = Path(run_dir) / SECONDS_DIR
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{stage}.{uuid.uuid4().hex[:6]}.tmp"
    tmp.write_text(json.dumps({"stage": stage, "seconds": round(float(seconds), 3)}))
    tmp.replace(d / f"{stage}.json")


def read_seconds(run_dir: Path) -> dict[str, float]:
    """{stage: seconds} recorded for the run. ``stage.<source>`` entries (the DAG stages each
    source in its own task, side by side) count as one ``stage`` of the longest of them."""
    d = Path(run_dir) / SECONDS_DIR
    out: dict[str, float] = {}
    if not d.is_dir():
        return out
    for f in sorted(d.glob("*.json")):
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        name = str(doc.get("stage", f.stem)).split(".", 1)[0]
        out[name] = max(out.get(name, 0.0), float(doc.get("seconds", 0.0)))
    return out


# ----------------------------------------------------------------- computing them

def _has_parquet(path: Path) -> bool:
    return path.is_dir() and any(path.rglob("*.parquet"))


def _audit(spark, run_dir: Path):
    """Per source: record buckets and (when the audit has them) quarantined bytes."""
    from pyspark.sql import functions as F

    from .order import AUDIT, read_staged

    if not _has_parquet(Path(run_dir) / AUDIT):
        return {}
    au = read_staged(spark, run_dir, AUDIT)
    aggs = [F.sum("records_read").alias("records_read")] + \
        [F.sum(b).alias(f"records_{b}") for b in BUCKETS if b in au.columns]
    byte_col = next((c for c in _AUDIT_BYTES_QUARANTINED if c in au.columns), None)
    if byte_col:
        aggs.append(F.sum(byte_col).alias("bytes_quarantined"))
    return {r["source"]: {k: v for k, v in r.asDict().items() if k != "source"}
            for r in au.groupBy("source").agg(*aggs).collect()}


def _quarantine_bytes(spark, run_dir: Path):
    """Per source: quarantined bytes from the quarantine rows' ``n_bytes`` (when present)."""
    from pyspark.sql import functions as F

    from .order import QUARANTINE, read_staged

    if not _has_parquet(Path(run_dir) / QUARANTINE):
        return {}
    q = read_staged(spark, run_dir, QUARANTINE)
    if "n_bytes" not in q.columns:
        return {}
    return {r["source"]: r["b"] for r in
            q.groupBy("source").agg(F.sum("n_bytes").alias("b")).collect()}


def _changes(spark, run_dir: Path):
    """(source, table_id, schema_name, table_name, op, count) rows: one per table and op."""
    from .order import CHANGES, read_staged

    if not _has_parquet(Path(run_dir) / CHANGES):
        return []
    ch = read_staged(spark, run_dir, CHANGES)
    return [r.asDict() for r in
            ch.groupBy("source", "table_id", "schema_name", "table_name", "op").count().collect()]


def _transactions(spark, run_dir: Path, date: str):
    from pyspark.sql import functions as F

    from .order import TRANSACTIONS, read_staged

    if not _has_parquet(Path(run_dir) / TRANSACTIONS):
        return {}
    tx = read_staged(spark, run_dir, TRANSACTIONS)
    committed = F.col("status") == "committed"
    lag = F.when(committed, F.lit(end_of_night(date)).cast("double")
                 - F.col("commit_ts").cast("double"))
    out = {}
    for r in tx.groupBy("source").agg(
            F.sum(F.when(committed, 1).otherwise(0)).alias("transactions_committed"),
            F.sum(F.when(F.col("status") == "rolled_back", 1).otherwise(0))
            .alias("transactions_rolled_back"),
            F.max(F.when(committed, F.col("event_count"))).alias("largest_transaction_changes"),
            F.percentile_approx(lag, [0.5, 0.95], 10000).alias("lag_pct"),
            F.max(lag).alias("commit_lag_max_s")).collect():
        d = {k: r[k] for k in ("transactions_committed", "transactions_rolled_back",
                               "largest_transaction_changes", "commit_lag_max_s")}
        pct = r["lag_pct"]
        if pct and r["commit_lag_max_s"] is not None:
            d["commit_lag_p50_s"], d["commit_lag_p95_s"] = pct[0], pct[1]
        out[r["source"]] = d
    return out


def _held(spark, run_dir: Path, date: str):
    """Per source: transactions held open into the next night, their records, the oldest's age."""
    from pyspark.sql import functions as F

    path = Path(run_dir) / "state" / "held"
    if not _has_parquet(path):
        return {}
    held = spark.read.parquet(str(path)).withColumn("source", F.col("source").cast("string"))
    first = F.to_date(F.regexp_extract("archive_file", _ARCHIVE_DATE, 1))
    per_trx = held.groupBy("source", "trx_id").agg(
        F.min(first).alias("first_night"), F.sum("n_records").alias("n"))
    out = {}
    for r in per_trx.groupBy("source").agg(
            F.count(F.lit(1)).alias("open_transactions"),
            F.sum("n").alias("open_transaction_records"),
            F.datediff(F.lit(date).cast("date"), F.min("first_night"))
            .alias("open_trx_oldest_age_nights")).collect():
        out[r["source"]] = {k: v for k, v in r.asDict().items() if k != "source"}
    return out


def _mirror_stats(run_dir: Path):
    """Rows of ``mirror_stats`` (one per table), when the mirror step wrote it."""
    path = Path(run_dir) / MIRROR_STATS
    if not _has_parquet(path):
        return []
    import pyarrow.dataset as pads

    return pads.dataset(str(path), format="parquet", partitioning="hive").to_table().to_pylist()


def compute(spark, manifest: dict, run_dir: Path, seconds: dict[str, float] | None = None) -> dict:
    """{source: [row dict, ...]} of the night's metrics (rows as in ``COLUMNS``)."""
    run_dir = Path(run_dir)
    date, run_id = manifest["date"], manifest["run_id"]
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="dblog-metrics") as pool:
        futures = {
            "audit": pool.submit(_audit, spark, run_dir),
            "qbytes": pool.submit(_quarantine_bytes, spark, run_dir),
            "changes": pool.submit(_changes, spark, run_dir),
            "trx": pool.submit(_transactions, spark, run_dir, date),
            "held": pool.submit(_held, spark, run_dir, date),
        }
        got = {k: f.result() for k, f in futures.items()}
    mirror = _mirror_stats(run_dir)
    seconds = read_seconds(run_dir) if seconds is None else seconds
    out: dict[str, list[dict]] = {}
    for s in manifest["sources"]:
        name = s["name"]
        rows: list[dict] = []

        def put(metric, value, table=None):
            if value is None:
                return
            t = table or {}
            rows.append({"table_id": t.get("table_id"), "schema_name": t.get("schema_name"),
                         "table_name": t.get("table_name"), "metric": metric,
                         "value": float(value), "run_id": run_id})

        archives = s.get("archives") or []
        bytes_read = sum(int(a.get("size") or 0) for a in archives)
        put("archives", len(archives))
        put("bytes_read", bytes_read)
        au = got["audit"].get(name, {})
        read = int(au.get("records_read") or 0)
        put("records_read", read)
        for b in BUCKETS:
            put(f"records_{b}", int(au.get(f"records_{b}") or 0))
        quarantined = int(au.get("records_quarantined") or 0)
        put("quarantine_share", quarantined / read if read else 0.0)
        qbytes = au.get("bytes_quarantined")
        if qbytes is None:
            qbytes = got["qbytes"].get(name)
        if qbytes is not None:
            put("bytes_quarantined", qbytes)
            put("bytes_quarantine_share", qbytes / bytes_read if bytes_read else 0.0)

        by_table: dict[str, dict] = {}
        total = {op: 0 for op in OPS}
        for r in got["changes"]:
            if r["source"] != name:
                continue
            t = by_table.setdefault(r["table_id"], {"table_id": r["table_id"],
                                                    "schema_name": r["schema_name"],
                                                    "table_name": r["table_name"],
                                                    "ops": {op: 0 for op in OPS}})
            t["ops"][r["op"]] = t["ops"].get(r["op"], 0) + r["count"]
            total[r["op"]] = total.get(r["op"], 0) + r["count"]
        put("changes", sum(total.values()))
        for op in OPS:
            put(f"changes_{op}", total.get(op, 0))
        trx = got["trx"].get(name, {})
        for k in ("transactions_committed", "transactions_rolled_back"):
            put(k, int(trx.get(k) or 0))
        put("largest_transaction_changes", int(trx.get("largest_transaction_changes") or 0))
        for k in ("commit_lag_p50_s", "commit_lag_p95_s", "commit_lag_max_s"):
            put(k, trx.get(k))
        held = got["held"].get(name, {})
        put("open_transactions", int(held.get("open_transactions") or 0))
        put("open_transaction_records", int(held.get("open_transaction_records") or 0))
        put("open_trx_oldest_age_nights", held.get("open_trx_oldest_age_nights")
            if held.get("open_transactions") else 0)

        stats = [m for m in mirror if m.get("source") == name]
        if stats:
            put("mirror_rows", sum(int(m.get("rows") or 0) for m in stats))
            put("mirror_missing_base", sum(int(m.get("mirror_missing_base") or 0) for m in stats))
        for stage in STAGES:
            if stage in seconds:
                put(f"seconds_{stage}", seconds[stage])

        # per table: every catalog table (a quiet table has its zeros: a sparkline needs them),
        # plus tables that only showed up in tonight's changes (DDL of new tables)
        tables = {t["id"]: {"table_id": t["id"], "schema_name": t.get("schema"),
                            "table_name": t.get("name")}
                  for t in (s.get("catalog") or {}).get("tables", [])}
        for tid, t in by_table.items():
            tables.setdefault(tid, {k: t[k] for k in ("table_id", "schema_name", "table_name")})
        mirror_by = {m.get("table_id"): m for m in stats}
        for tid in sorted(tables, key=lambda x: (x is None, str(x))):
            if tid is None:
                continue
            t = tables[tid]
            ops = by_table.get(tid, {}).get("ops", {op: 0 for op in OPS})
            put("changes", sum(ops.values()), t)
            for op in OPS:
                put(f"changes_{op}", ops.get(op, 0), t)
            m = mirror_by.get(tid)
            if m is not None:
                put("mirror_rows", int(m.get("rows") or 0), t)
                put("mirror_missing_base", int(m.get("mirror_missing_base") or 0), t)
        out[name] = rows
    return out


def write_rows(base: Path, source: str, date: str, rows: list[dict], part: str) -> Path:
    """Write ``rows`` as ``<base>/source=S/date=D/part-<part>.parquet`` (replacing that file)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = partition_dir(base, source, date)
    d.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=arrow_schema())
    target = d / f"part-{part}.parquet"
    tmp = d / f".part-{part}.{uuid.uuid4().hex[:6]}.tmp"
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, target)
    return target


def write_metrics(spark, manifest: dict, run_dir: Path) -> dict:
    """Compute and stage the night's metrics under ``<run_dir>/metrics/``; returns them."""
    import shutil

    base = Path(run_dir) / METRICS
    if base.exists():
        shutil.rmtree(base)
    rows = compute(spark, manifest, run_dir)
    for source, r in rows.items():
        write_rows(base, source, manifest["date"], r, "0")
    return rows


def add_rows(run_dir: Path, manifest: dict, rows: dict[str, list[dict]], part: str) -> None:
    """Stage more rows of tonight's metrics (validate's seconds, the check verdicts)."""
    for source, r in rows.items():
        write_rows(Path(run_dir) / METRICS, source, manifest["date"], r, part)


def metric_row(metric: str, value: float, run_id: str, table: dict | None = None) -> dict:
    t = table or {}
    return {"table_id": t.get("table_id"), "schema_name": t.get("schema_name"),
            "table_name": t.get("table_name"), "metric": metric, "value": float(value),
            "run_id": run_id}


# ----------------------------------------------------------------- reading them back

def read_partition(path: Path, metrics: set[str] | None = None, source_only: bool = False) -> list[dict]:
    """Rows of one ``source=S/date=D`` partition (all its files)."""
    import pyarrow.dataset as pads

    path = Path(path)
    if not _has_parquet(path):
        return []
    ds = pads.dataset(str(path), format="parquet", schema=arrow_schema())
    flt = None
    if metrics:
        flt = pads.field("metric").isin(sorted(metrics))
    if source_only:
        cond = pads.field("table_id").is_null()
        flt = cond if flt is None else flt & cond
    return ds.to_table(filter=flt).to_pylist()


def published_base(root) -> Path:
    """``published/metrics`` of the version ``published`` points at now (resolved once, so a
    reader takes every night of its window from the same version)."""
    return Path(os.path.realpath(root.published)) / METRICS


def history(root, source: str, date: str, nights: int, metrics: set[str] | None = None,
            source_only: bool = False, base: Path | None = None) -> dict[str, list[dict]]:
    """{date: rows} of the published nights among the ``nights`` calendar nights before
    ``date``. Looks at exactly those partitions (``nights`` paths), never lists the history."""
    base = published_base(root) if base is None else Path(base)
    day = _dt.date.fromisoformat(date)
    out: dict[str, list[dict]] = {}
    for i in range(nights, 0, -1):
        d = (day - _dt.timedelta(days=i)).isoformat()
        part = partition_dir(base, source, d)
        if part.is_dir():
            try:
                rows = read_partition(part, metrics, source_only)
            except Exception as exc:  # noqa: BLE001 - an unreadable night is left out, and said
                log.warning("metrics of %s %s unreadable, left out of the history: %s", source, d, exc)
                continue
            out[d] = rows
    return out


def value_of(rows: list[dict], metric: str, table_id: str | None = None) -> float | None:
    for r in rows:
        if r["metric"] == metric and r["table_id"] == table_id:
            return r["value"]
    return None


def known_metric(name: str) -> bool:
    """Is ``name`` a metric this module writes (for the validation of ``checks``)?"""
    return name in SOURCE_METRICS or name in TABLE_METRICS
