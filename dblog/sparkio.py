"""Small Spark I/O helpers shared by the stages."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable


def write_parquet(df, path: str, partition_by: tuple[str, ...] = (),
                  options: dict[str, str] | None = None) -> Callable[[], None]:
    """A deferred ``overwrite`` Parquet write (run it with ``run_concurrently``); ``options``:
    writer options (e.g. ``parquet_options`` of ``dblog.ordering.schema``)."""
    def run() -> None:
        sc = df.sparkSession.sparkContext
        sc.setJobDescription(f"write {'/'.join(path.rstrip('/').split('/')[-2:])}")  # this thread's jobs
        try:
            writer = df.write.mode("overwrite").options(**(options or {}))
            if partition_by:
                writer = writer.partitionBy(*partition_by)
            writer.parquet(path)
        finally:
            sc.setJobDescription(None)
    return run


def run_concurrently(jobs: list[Callable[[], None]], workers: int = 4) -> None:
    """Submit independent Spark jobs from threads, so that small jobs keep every core busy.
    Re-raises the first failure."""
    if len(jobs) <= 1 or workers <= 1:
        for job in jobs:
            job()
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dblog-write") as pool:
        for future in [pool.submit(job) for job in jobs]:
            future.result()


def local_frame(spark, rows: list[tuple], schema):
    """A small DataFrame of driver-side rows (``schema``: DDL text or a StructType), shipped
    to the JVM as Arrow: unlike ``createDataFrame`` of a list, no Python worker runs for it
    in the tasks that read it. For lookup tables (sources, archives, tables, offsets), never
    for data that grows with the night."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType, _parse_datatype_string

    struct = schema if isinstance(schema, StructType) else _parse_datatype_string(schema)
    arrow = to_arrow_schema(struct)
    columns = list(zip(*rows)) if rows else [() for _ in struct.fields]
    table = pa.Table.from_arrays([pa.array(list(c), type=f.type) for c, f in zip(columns, arrow)],
                                 schema=arrow)
    return spark.createDataFrame(table, schema=struct)
