"""Typed per-table datasets (SPEC section 5): ``tables/<source>/<schema>.<table>/date=D``.

The JSON row images of the staged changes are parsed with ``from_json`` (every field read
as text, so DECIMAL strings and number tokens keep their exact text) and cast to the
Spark type the catalog gives each column: ``before_<col>`` and ``after_<col>``.
"""

from __future__ import annotations

from pathlib import Path

from decoders.catalog import Column, parse_catalog

from .order import CHANGES, read_staged
from .sparkio import run_concurrently, write_parquet

TABLES = "tables"


def spark_type(col: Column) -> str:
    t = col.type
    if t in ("TINYINT", "SMALLINT"):
        return "smallint"
    if t == "INTEGER":
        return "int"
    if t == "BIGINT":
        return "bigint"
    if t == "DECIMAL":
        return f"decimal({col.precision},{col.scale or 0})"
    if t == "REAL" or (t == "FLOAT" and col.length == 4):
        return "float"
    if t in ("DOUBLE", "FLOAT"):
        return "double"
    if t in ("BINARY", "VARBINARY"):
        return "binary"
    if t == "DATE":
        return "date"
    if t == "TIMESTAMP":
        return "timestamp_ntz"
    return "string"  # CHAR, VARCHAR, CLOB, TIME, BLOB (hex or {"blob_id": n})


def typed_columns(F, image: str, columns: list[Column]):
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType([StructField(c.name, StringType()) for c in columns])
    parsed = F.from_json(F.col(image), schema)
    out = []
    for c in columns:
        raw = parsed.getField(c.name)
        st = spark_type(c)
        if st == "string":
            val = raw
        elif st == "binary":
            val = F.unhex(raw)
        else:
            val = raw.try_cast(st)
        out.append(val.alias(f"{image}_{c.name}"))
    return out


def tables_stage(spark, manifest: dict, run_dir: Path) -> int:
    """Write one typed dataset per catalog table that has changes tonight; returns how many."""
    from pyspark.sql import functions as F

    run_dir = Path(run_dir)
    changes = read_staged(spark, run_dir, CHANGES)
    date = manifest["date"]
    jobs = []
    present = {(r["source"], r["table_id"]) for r in
               changes.select("source", "table_id").distinct().collect()}
    for src in manifest["sources"]:
        catalog = parse_catalog(src["catalog"], f"<catalog of {src['name']}>")
        for table in catalog.tables:
            if (src["name"], table.id) not in present:
                continue
            cols = list(table.columns)
            df = changes.filter((F.col("source") == src["name"]) & (F.col("table_id") == table.id)) \
                .select("op", "commit_seq", "event_seq", "commit_ts",
                        *typed_columns(F, "before", cols), *typed_columns(F, "after", cols))
            out = run_dir / TABLES / src["name"] / table.qualified_name / f"date={date}"
            jobs.append(write_parquet(df, str(out)))
    run_concurrently(jobs)
    return len(jobs)
