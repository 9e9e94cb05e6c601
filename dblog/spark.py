"""One way to build the SparkSession, shared by ``dblog run``, the jobs and the tests."""

from __future__ import annotations

import os
import sys

DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.parquet.compression.codec": "zstd",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
}


def get_session(master: str | None = None, app: str = "dblog", conf: dict | None = None):
    """The active session, or a new one. ``master`` is only used when no session exists
    (under spark-submit the master comes from the Spark connection)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app)
    master = master or os.environ.get("DBLOG_SPARK_MASTER")
    if master:
        builder = builder.master(master)
    settings = dict(DEFAULT_CONF)
    settings.setdefault("spark.sql.shuffle.partitions", os.environ.get("DBLOG_SHUFFLE_PARTITIONS", "8"))
    if os.environ.get("DBLOG_DRIVER_MEMORY"):
        settings["spark.driver.memory"] = os.environ["DBLOG_DRIVER_MEMORY"]
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("DBLOG_SPARK_LOG_LEVEL", "WARN"))
    return spark
