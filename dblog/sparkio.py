"""Small Spark I/O helpers shared by the stages."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable


def write_parquet(df, path: str, partition_by: tuple[str, ...] = ()) -> Callable[[], None]:
    """A deferred ``overwrite`` Parquet write (run it with ``run_concurrently``)."""
    def run() -> None:
        writer = df.write.mode("overwrite")
        if partition_by:
            writer = writer.partitionBy(*partition_by)
        writer.parquet(path)
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
