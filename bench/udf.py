"""Baseline (b): the same per-record decoding inside Spark as a row-at-a-time Python UDF.

The archives are read with ``binaryFile``; a Python ``flatMap`` splits each into one row per
record (``plain.split``); a plain (pickled, not Arrow) ``@udf`` decodes one record per call
with ``plain.RecordDecoder`` and returns a struct; the change rows are written as Parquet.
"""

from __future__ import annotations

_DECODERS: dict = {}


def run(spark, fmt: str, source: dict, paths: list[str], out: str) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

    from bench import plain

    options = source.get("options") or {}
    key = (fmt, source["name"])

    def records(row):
        name = row.path.rsplit("/", 1)[-1]
        for i, rec in enumerate(plain.split(fmt, bytes(row.content), options)):
            yield name, i, bytearray(rec)

    change = StructType([StructField("op", StringType()), StructField("table_id", StringType()),
                         StructField("before", StringType()), StructField("after", StringType())])

    @F.udf(returnType=change, useArrow=False)
    def decode_record(rec):
        dec = _DECODERS.get(key)
        if dec is None:
            dec = _DECODERS[key] = plain.RecordDecoder(fmt, source).decode
        return dec(bytes(rec))

    files = spark.read.format("binaryFile").load(paths)
    recs_schema = StructType([StructField("archive", StringType()),
                              StructField("record", LongType()),
                              StructField("data", BinaryType())])
    # binaryFile packs small files into one partition: one partition per archive instead
    recs = spark.createDataFrame(files.rdd.repartition(len(paths)).flatMap(records), recs_schema)
    rows = recs.select("archive", "record", decode_record("data").alias("c")) \
        .where(F.col("c").isNotNull()).select("archive", "record", "c.*")
    rows.write.mode("overwrite").parquet(out)
