"""Benchmark of the mirror stage (docs/BENCHMARK.md, "Mirrors").

    python -m bench.mirror [--rows 10000000] [--changes 1000000] [--master local[2]]

Writes, with Spark, a table's ``initial_snapshot`` of ``--rows`` rows and a staged night of
``--changes`` changes (60 % updates, 20 % deletes of snapshot keys, 20 % inserts), then
times ``dblog.mirror.mirror_stage`` twice on the same snapshot: with the night's changes,
and with no change. Prints the seconds of both, the mirror stage's cost per million changes
(the difference, scaled) and the machine's load (``uptime``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

COLUMNS = [{"name": "ID", "type": "BIGINT", "nullable": False},
           {"name": "AMT", "type": "DECIMAL", "precision": 11, "scale": 2},
           {"name": "NOTE", "type": "VARCHAR", "length": 20},
           {"name": "TS", "type": "TIMESTAMP"}]


def _night(spark, root: Path, rows: int, changes: int, date: str) -> tuple[dict, Path]:
    from pyspark.sql import functions as F

    from dblog.order import CHANGE_COLUMNS, CHANGES_DDL

    cat_dir = root / "catalogs"
    snap = cat_dir / "snap"
    if not snap.exists():
        spark.range(rows).select(
            F.col("id").alias("ID"), (F.col("id") % 1000000 / 100).cast("decimal(11,2)").alias("AMT"),
            F.concat(F.lit("n"), F.col("id").cast("string")).alias("NOTE"),
            F.timestamp_seconds(F.col("id") % 1000000000).cast("timestamp_ntz").alias("TS")) \
            .write.mode("overwrite").parquet(str(snap))
    catalog = {"source": "bench", "format": "soliddb", "tables": [
        {"id": "1", "schema": "B", "name": "T", "key": ["ID"], "initial_snapshot": "snap",
         "columns": COLUMNS}]}
    (cat_dir / "bench.json").write_text(json.dumps(catalog))
    run_dir = root / "staging" / f"run_{changes}"
    shutil.rmtree(run_dir, ignore_errors=True)
    i = F.col("id")
    kind = F.when(i % 5 < 3, "u").when(i % 5 == 3, "d").otherwise("c")
    key = F.when(kind == "c", i + rows).otherwise(F.abs(F.xxhash64(i)) % rows)

    def image(k, amt):
        return F.format_string('{"ID": %d, "AMT": "%s", "NOTE": "%s", "TS": "2026-11-01T00:00:00.000000"}',
                               k, amt, F.concat(F.lit("n"), k.cast("string")))
    ch = spark.range(changes).select(
        F.lit("soliddb").alias("format"), (i + 1).alias("commit_seq"), F.lit(1).alias("event_seq"),
        i.cast("string").alias("trx_id"), F.lit(None).cast("string").alias("commit_position"),
        F.lit(None).cast("timestamp").alias("commit_ts"), kind.alias("op"), F.lit("1").alias("table_id"),
        F.lit("B").alias("schema_name"), F.lit("T").alias("table_name"),
        F.when(kind != "c", image(key, F.lit("1.00"))).alias("before"),
        F.when(kind != "d", image(key, F.lit("2.00"))).alias("after"),
        F.lit(None).cast("string").alias("ddl"), F.lit(None).cast("string").alias("row_id"),
        F.lit(None).cast("string").alias("log_position"), F.lit(None).cast("string").alias("archive_file"),
        F.lit(None).cast("long").alias("record_offset"), F.lit("bench").alias("run_id"),
        F.lit("bench").alias("source"), F.lit(date).alias("date"))
    if changes == 0:
        ch = spark.createDataFrame([], CHANGES_DDL)
    ch.select(*CHANGE_COLUMNS).write.mode("overwrite").partitionBy("source", "date") \
        .parquet(str(run_dir / "changes"))
    manifest = {"run_id": run_dir.name, "date": date, "data_root": str(root), "config": "",
                "sources": [{"name": "bench", "format": "soliddb", "catalog": catalog,
                             "catalog_path": str(cat_dir / "bench.json"), "prev_state": None,
                             "mirror_retention": 7, "seq_base": 0}]}
    return manifest, run_dir


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.mirror")
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--changes", type=int, default=1_000_000)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--keep", action="store_true", help="keep the temporary data root")
    args = p.parse_args(argv)
    from dblog.mirror import mirror_stage
    from dblog.spark import get_session

    spark = get_session(args.master, app="bench-mirror")
    root = Path(tempfile.mkdtemp(prefix="bench-mirror-"))
    try:
        out = {}
        for n in (args.changes, 0):
            manifest, run_dir = _night(spark, root, args.rows, n, "2026-11-01")
            t0 = time.monotonic()
            summary = mirror_stage(spark, manifest, run_dir)
            out[n] = round(time.monotonic() - t0, 2)
            rows = summary["bench"]["tables"][0]["rows"] if summary["bench"]["tables"] else 0
            print(f"snapshot {args.rows} rows + {n} changes: {out[n]} s (mirror rows {rows})")
        per_m = (out[args.changes] - out[0]) / max(args.changes, 1) * 1e6
        print(f"mirror stage: {per_m:.1f} s per million changes ({args.master})")
        print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        spark.stop()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("DBLOG_SPARK_LOG_LEVEL", "ERROR")
    raise SystemExit(main())
