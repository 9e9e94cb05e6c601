"""Baseline (b): the same per-record decoding inside Spark as a row-at-a-time Python UDF.

The archives' paths are parallelized one per partition; a Python ``flatMap`` reads each
archive and splits it into one row per record (``plain.split``); a plain (pickled, not Arrow)
``@udf`` decodes one record per call with ``plain.RecordDecoder`` and returns a struct; the
change rows are written as Parquet.

The archives are read by the Python workers, not through ``binaryFile``: a ``binaryFile``
row holds the whole archive, which the JVM then pickles to the worker as one string (a
276 MB Log Master archive of the 1M night took more than the 6 GB heap with two tasks at
once; files over 2 GB cannot be read that way at all), so a user would not write it so.
"""

from __future__ import annotations

_DECODERS: dict = {}


def run(spark, fmt: str, source: dict, paths: list[str], out: str) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

    from bench import plain

    options = source.get("options") or {}
    key = (fmt, source["name"])

    def records(path):
        with open(path, "rb") as f:
            data = f.read()
        name = path.rsplit("/", 1)[-1]
        for i, rec in enumerate(plain.split(fmt, data, options)):
            yield name, i, bytearray(rec)

    change = StructType([StructField("op", StringType()), StructField("table_id", StringType()),
                         StructField("before", StringType()), StructField("after", StringType())])

    @F.udf(returnType=change, useArrow=False)
    def decode_record(rec):
        dec = _DECODERS.get(key)
        if dec is None:
            dec = _DECODERS[key] = plain.RecordDecoder(fmt, source).decode
        return dec(bytes(rec))

    recs_schema = StructType([StructField("archive", StringType()),
                              StructField("record", LongType()),
                              StructField("data", BinaryType())])
    archives = spark.sparkContext.parallelize(paths, len(paths))     # one partition per archive
    recs = spark.createDataFrame(archives.flatMap(records), recs_schema)
    rows = recs.select("archive", "record", decode_record("data").alias("c")) \
        .where(F.col("c").isNotNull()).select("archive", "record", "c.*")
    rows.write.mode("overwrite").parquet(out)
