"""Small Spark I/O helpers shared by the stages."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Callable


def task_count(rows: int, cores: int, per_task: int, min_per_task: int) -> int:
    """Tasks for about ``rows`` rows: at most ``per_task`` each, one per core once each gets
    ``min_per_task`` (fewer before), never none; more than the cores: a multiple of them
    (equal tasks end together: 3 on 2 cores run in two rounds, the second on one core)."""
    n = max(1, min(cores, math.ceil(rows / min_per_task)), math.ceil(rows / per_task))
    return n if n <= cores else math.ceil(n / cores) * cores


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


class StepFailed(RuntimeError):
    """``step``, one of the steps a stage runs side by side, failed with ``cause``."""

    def __init__(self, step: str, cause: BaseException) -> None:
        self.step, self.cause = step, cause
        try:
            text = str(cause).strip().splitlines()[0][:300]
        except Exception:  # noqa: BLE001 - a py4j error renders through a JVM that may be gone
            text = ""
        super().__init__(f"the {step} step failed: {type(cause).__name__}" + (f": {text}" if text else ""))


def side_by_side(steps: dict[str, Callable[[], object]]) -> dict[str, object]:
    """Run independent steps of a stage side by side (threads of one Spark session: Spark
    runs the jobs of several threads at once, so the small jobs of one step use the cores
    that another leaves idle). Returns each step's result. Every step runs to its end; the
    first failure (in the order given) is raised as ``StepFailed`` naming its step."""
    if len(steps) <= 1:
        out = {}
        for name, fn in steps.items():
            try:
                out[name] = fn()
            except Exception as exc:  # noqa: BLE001
                raise StepFailed(name, exc) from exc
        return out
    with ThreadPoolExecutor(max_workers=len(steps), thread_name_prefix="dblog-step") as pool:
        futures = {name: pool.submit(fn) for name, fn in steps.items()}
        out, failed = {}, None
        for name, fut in futures.items():
            try:
                out[name] = fut.result()
            except Exception as exc:  # noqa: BLE001
                failed = failed or (name, exc)
    if failed:
        raise StepFailed(*failed) from failed[1]
    return out
