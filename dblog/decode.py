"""Decode stage: archives -> decoded events (one row per record read), in Spark.

The driver builds one small *work unit* per archive (per source for sequential formats)
from the manifest; executors read the archive bytes themselves (``pyarrow.fs``: local
paths, shared file systems and object stores alike) and decode them with ``mapInArrow``,
so nothing but file names passes through the driver.
"""

from __future__ import annotations

import json
import traceback
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from decoders import get as get_format
from decoders.base import DecodeContext
from decoders.catalog import parse_catalog
from decoders.events import EVENT_SCHEMA, EventSink

from .landing import read_archive

EVENTS_DIR = "events"
UNIT_SCHEMA = "unit_id INT, payload STRING"


def work_units(manifest: dict) -> list[dict]:
    units = []
    for src in manifest["sources"]:
        fmt = get_format(src["format"])
        common = {k: src[k] for k in ("name", "format", "timezone", "options", "catalog")}
        common["data_root"] = manifest.get("data_root")
        if fmt.SEQUENTIAL:
            if src["archives"] or src["carry"]:
                units.append({**common, "archives": src["archives"], "carry": src["carry"],
                              "emit_carry": True})
        else:
            for a in src["archives"]:
                units.append({**common, "archives": [a], "carry": None, "emit_carry": False})
    # big archives first, so that the longest tasks start first
    units.sort(key=lambda u: -sum(a["size"] for a in u["archives"]))
    return units


# error classes of an archive lost whole: all its bytes are quarantined, and the source's
# night fails unless the operator accepted the loss (``dblog run --accept-loss``)
LOST_CLASSES = ("unreadable", "decoder_error")


def read_bytes(archive: dict | str, data_root: str | None = None) -> bytes:
    """The bytes of a staged archive (a manifest entry: read by its real bytes path, checked
    against the data root and the staged size) or of a path or URI. ``OSError`` if not."""
    return read_archive(archive, data_root)


def _lost(sink: EventSink, archive: dict, error_class: str, message: str, raw: bytes | None = None) -> None:
    """The archive is lost whole: one quarantine row standing for all its bytes."""
    sink.add("quarantine", 0, 0, 0, error_class=error_class, n_bytes=int(archive.get("size") or 0),
             message=(message + (" (loss accepted by the operator)" if archive.get("accept_loss") else
                                 "; the source's night fails unless the loss is accepted "
                                 "(dblog run --accept-loss)"))[:1000],
             raw_hex=raw[:256].hex() if raw else None)


def decode_unit(unit: dict) -> Iterator[pa.RecordBatch]:
    """Decode the archives of one unit, in order, passing the carry along."""
    fmt = get_format(unit["format"])
    catalog = parse_catalog(unit["catalog"], f"<catalog of {unit['name']}>")
    carry = unit.get("carry")
    for archive in unit["archives"]:
        sink = EventSink(unit["name"], unit["format"], archive["file"])
        ctx = DecodeContext(unit["name"], unit["format"], catalog, archive["file"],
                            unit.get("options") or {}, unit.get("timezone") or "UTC", carry)
        try:
            data = read_bytes(archive, unit.get("data_root"))
        except (OSError, ValueError) as exc:
            _lost(sink, archive, "unreadable",
                  f"{archive['file']}: cannot read the archive, all {archive.get('size', 0)} bytes "
                  f"quarantined: {exc}")
            yield from sink.batches()
            continue
        try:
            carry = fmt.decode(data, ctx, sink)
        except Exception as exc:  # a decoder bug must not stop the night: quarantine the archive
            sink = EventSink(unit["name"], unit["format"], archive["file"])
            tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
            _lost(sink, archive, "decoder_error",
                  f"{archive['file']}: decoder failed, whole archive ({len(data)} bytes) "
                  f"quarantined: {tb}", data)
        yield from sink.batches()
    if unit.get("emit_carry"):
        sink = EventSink(unit["name"], unit["format"],
                         unit["archives"][-1]["file"] if unit["archives"] else "")
        try:
            text = json.dumps(carry) if carry is not None else None
        except (TypeError, ValueError) as exc:   # e.g. an int of more than 4,300 digits
            sink.add("quarantine", -1, -1, 0, error_class="carry_error", n_bytes=0,
                     message=f"{sink.archive_file}: the decoder state carried to the next night "
                             f"cannot be written ({exc}); the next night starts without it")
            text = None
        sink.add("carry", -1, -1, 0, n_bytes=0, message=text)
        yield from sink.batches()


def _decode_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for payload in batch.column("payload").to_pylist():
            yield from decode_unit(json.loads(payload))


def decode_stage(spark, manifest: dict, run_dir: Path) -> str:
    """Decode every archive of the manifest into ``<run_dir>/events`` (Parquet)."""
    units = work_units(manifest)
    out = str(Path(run_dir) / EVENTS_DIR)
    rows = [(i, json.dumps(u)) for i, u in enumerate(units)]
    if rows:
        rdd = spark.sparkContext.parallelize(rows, numSlices=len(rows))
        units_df = spark.createDataFrame(rdd, UNIT_SCHEMA)
        events = units_df.mapInArrow(_decode_partition, spark_event_schema())
    else:
        events = spark.createDataFrame([], spark_event_schema())
    events.write.mode("overwrite").parquet(out)
    return out


def spark_event_schema():
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(EVENT_SCHEMA)
