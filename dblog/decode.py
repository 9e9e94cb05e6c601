"""Decode stage: archives -> decoded events (one row per record read), in Spark.

The driver builds small *work units* from the manifest: one per byte range of an archive
(one per archive below the split size; per source for sequential formats); executors read
the bytes themselves (``pyarrow.fs``: local paths, shared file systems and object stores
alike) and decode them with ``mapInArrow``, so nothing but file names and offsets passes
through the driver.

**Ranges, not files.** An archive bigger than the split size (``split_target``: the night's
bytes per core, between 4 and 32 MiB, so a task decodes in seconds and a cluster's cores
all get ranges; ``DBLOG_SPLIT_BYTES`` fixes it) of a format that can split (its package exports
``split``) is first framed by one Spark task, which returns byte ranges cut at record
boundaries where decoding can start on its own (``decoders/framing.py``); each range is then
a work unit of its own, so one big archive decodes on every core. Only the ranges (a few
numbers per 32 MiB) come back to the driver. Offsets and record indexes stay relative to the
archive, so accounting, quarantine and positions do not change with the split.
"""

from __future__ import annotations

import json
import os
import threading
import traceback
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from decoders import get as get_format
from decoders.base import DecodeContext
from decoders.catalog import parse_catalog
from decoders.events import EVENT_COLUMNS, EVENT_SCHEMA, EventSink

from .landing import read_archive
from .sparkio import local_frame

EVENTS_DIR = "events"


# The decode's Spark schemas as Arrow schemas, made Spark's with ``from_arrow_schema`` on use
# (as ``spark_event_schema`` and the segments' ``GROUP_SCHEMA``), not DDL text: pyspark has
# the JVM's SQL parser read DDL, and its first use in a driver loads its classes (0.12-0.15 s,
# on the decode's critical path before the workers could start).
UNIT_SCHEMA = pa.schema([("unit_id", pa.int32()), ("payload", pa.string())])
RANGE_SCHEMA = pa.schema([("unit_id", pa.int32()), ("ranges", pa.string())])


def spark_schema(schema: pa.Schema):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


SPLIT_ENV = "DBLOG_SPLIT_BYTES"
DEFAULT_SPLIT_BYTES = 32 << 20     # the largest range: a task decodes it in seconds
MIN_SPLIT_BYTES = 4 << 20          # the smallest: below it a task costs more than it decodes
TASKS_PER_CORE = 1                 # ranges per core a night aims at (Spark's rule for files;
                                   # 4 took the 400k rdb night's decode from 4.8 to 8.0 s
                                   # on 2 cores: each task has a fixed cost)


def split_bytes() -> int:
    """The split size set by hand (``DBLOG_SPLIT_BYTES``), else ``DEFAULT_SPLIT_BYTES``."""
    text = os.environ.get(SPLIT_ENV, "")
    try:
        value = int(text) if text else DEFAULT_SPLIT_BYTES
    except ValueError:
        raise ValueError(f"{SPLIT_ENV} must be a number of bytes, got {text!r}") from None
    if value < 1:
        raise ValueError(f"{SPLIT_ENV} must be positive, got {value}")
    return value


def split_target(night_bytes: int, cores: int) -> int:
    """The split size of a night: ``DBLOG_SPLIT_BYTES`` when set; else the night's bytes
    per core (``TASKS_PER_CORE`` ranges per core), between ``MIN_SPLIT_BYTES`` and
    ``DEFAULT_SPLIT_BYTES``: Spark's own rule for files (``maxSplitBytes``: the bytes per
    core, at most ``maxPartitionBytes``, at least ``openCostInBytes``). So a 100 MiB archive
    is 4 ranges on 1 or 2 cores but 8 on 8 cores (and 25 on 32), and a small night is not
    cut at all."""
    if os.environ.get(SPLIT_ENV, ""):
        return split_bytes()
    per_task = int(night_bytes) // max(1, TASKS_PER_CORE * int(cores))
    return max(MIN_SPLIT_BYTES, min(DEFAULT_SPLIT_BYTES, per_task))


def _splittable(src: dict, archive: dict, target: int) -> bool:
    fmt = get_format(src["format"])
    return (not fmt.SEQUENTIAL and hasattr(fmt, "split") and archive["size"] > target)


def work_units(manifest: dict, ranges: dict | None = None) -> list[dict]:
    """The decode tasks of a night: per archive, or per range of an archive when ``ranges``
    (``(source, file) -> [range, ...]``, from ``plan_ranges``) has it."""
    ranges = ranges or {}
    units = []
    for src in manifest["sources"]:
        fmt = get_format(src["format"])
        common = {k: src[k] for k in ("name", "format", "timezone", "options", "catalog")}
        common["data_root"] = manifest.get("data_root")
        if fmt.SEQUENTIAL:
            if src["archives"] or src["carry"]:
                units.append({**common, "archives": src["archives"], "carry": src["carry"],
                              "emit_carry": True})
            continue
        for a in src["archives"]:
            for r in ranges.get((src["name"], a["file"]), [None]):
                unit = {**common, "archives": [a], "carry": None, "emit_carry": False}
                if r is not None:
                    unit["range"] = r
                units.append(unit)
    # big work first, so that the longest tasks start first
    units.sort(key=lambda u: -_unit_bytes(u))
    return units


def _unit_bytes(unit: dict) -> int:
    r = unit.get("range")
    return r["end"] - r["start"] if r else sum(a["size"] for a in unit["archives"])


def split_archive(unit: dict, target: int) -> list[dict]:
    """Frame one archive and return its ranges (one task of the planning job)."""
    fmt = get_format(unit["format"])
    archive = unit["archives"][0]
    catalog = parse_catalog(unit["catalog"], f"<catalog of {unit['name']}>")
    ctx = DecodeContext(unit["name"], unit["format"], catalog, archive["file"],
                        unit.get("options") or {}, unit.get("timezone") or "UTC")
    try:
        data = read_bytes(archive, data_root=unit.get("data_root"))
        ranges = fmt.split(data, ctx, target)
    except Exception:  # noqa: BLE001 - an archive that cannot be framed decodes whole
        return [{"start": 0, "end": archive["size"], "index": 0}]
    if not ranges or ranges[0]["start"] != 0 or ranges[-1]["end"] != len(data) or any(
            a["end"] != b["start"] for a, b in zip(ranges, ranges[1:])):
        return [{"start": 0, "end": len(data), "index": 0}]
    return ranges


def _split_partition(target: int):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            ids, out = [], []
            for uid, payload in zip(batch.column("unit_id").to_pylist(),
                                    batch.column("payload").to_pylist()):
                ids.append(uid)
                out.append(json.dumps(split_archive(json.loads(payload), target)))
            yield pa.RecordBatch.from_arrays([pa.array(ids, pa.int32()), pa.array(out)],
                                             names=["unit_id", "ranges"])
    return run


# the Arrow conversion's settings that give ``units_frame`` one partition per row (its
# ``per_task`` sets the rows per batch, hence per partition)
ONE_ROW_PER_PARTITION = {"spark.sql.execution.arrow.maxRecordsPerBatch": "1",
                         "spark.sql.execution.arrow.localRelationThreshold": "0"}


# Python tasks per core a job of many small units aims at (``grouped``): Spark's JVM side of a
# Python task costs ~50 ms between its launch and the call of its function (a JVM-only task
# ~20 ms; docs/BENCHMARK.md, "Twenty-seventh session"), which the ordering's file jobs (one
# unit per decoded file: 18-22 files of ~0.1 s each at 1M) paid once per file
PYTHON_TASKS_PER_CORE = 2


def grouped(rows: list[tuple[int, str]], sizes: list[int], cores: int
            ) -> tuple[list[tuple[int, str]], int]:
    """``rows`` (``units_frame``'s) laid out for ``units_frame(..., per_task=k)``: at most
    ``PYTHON_TASKS_PER_CORE`` tasks per core, each of ``k`` consecutive rows (the last may
    have fewer), their ``sizes`` (e.g. file bytes) balanced greedily (the biggest unit to
    the least loaded task with room); with a task per unit, the biggest first. Returns
    (rows, k)."""
    n = len(rows)
    tasks = max(1, min(n, PYTHON_TASKS_PER_CORE * max(1, int(cores))))
    k = -(-n // tasks) if n else 1
    if k <= 1:          # a task per unit: the biggest first
        return [rows[i] for i in sorted(range(n), key=lambda i: -int(sizes[i]))], 1
    count = -(-n // k)
    room = [k] * (count - 1) + [n - k * (count - 1)]
    load = [0] * count
    groups: list[list[int]] = [[] for _ in range(count)]
    for i in sorted(range(n), key=lambda i: -int(sizes[i])):
        g = min((g for g in range(count) if room[g]), key=lambda g: (load[g], g))
        groups[g].append(i)
        room[g] -= 1
        load[g] += int(sizes[i])
    return [rows[i] for g in groups for i in g], k


def file_bytes(path: str | None) -> int:
    """A unit's file bytes, for ``grouped`` (0 without a file, or when it is gone: its task
    says so)."""
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


def units_frame(spark, rows: list[tuple[int, str]], per_task: int = 1):
    """The work units (``unit_id``, JSON payload) as a DataFrame with **one partition per
    unit**, so each unit is a task of its own and the scheduler hands the next unit to the
    first free core (``work_units`` puts the biggest first); with ``per_task``, one
    partition per ``per_task`` consecutive rows (``grouped``).

    Shipped to the JVM as Arrow (``sparkio.local_frame``), one record batch per unit, read
    as an RDD of those batches (``localRelationThreshold`` 0: a ``LocalRelation`` would be
    sliced into ``defaultParallelism`` partitions of several units each): no Python worker
    runs to read them, unlike ``createDataFrame`` of a Python RDD of pickled rows, which
    started one more Python worker per task to unpickle the rows before the decoding
    worker. The two settings are the session's only while the frame is built (Arrow
    conversion reads them then), under a lock: the ordering builds such frames from several
    threads at once (``sparkio.run_concurrently``), and two interleaved set-and-restore
    sequences left one batch per row as the session's setting, after which every Arrow
    batch handed to Python held one row (the typed tables' writer took ten minutes at a
    million changes instead of ten seconds)."""
    conf = spark.conf
    settings = {**ONE_ROW_PER_PARTITION,
                "spark.sql.execution.arrow.maxRecordsPerBatch": str(max(1, int(per_task)))}
    with _UNITS_FRAME_LOCK:
        before = {k: conf.get(k, None) for k in settings}
        try:
            for k, v in settings.items():
                conf.set(k, v)
            return local_frame(spark, rows, spark_schema(UNIT_SCHEMA))
        finally:
            for k, v in before.items():
                if v is None:
                    conf.unset(k)
                else:
                    conf.set(k, v)


_UNITS_FRAME_LOCK = threading.Lock()


# bytes of big archives a local driver frames itself: the driver frames one archive after
# another while the workers start (~1 s), a planning job frames them on every core only once
# they have started; at ~400 MB/s (soliddb, lldf: docs/BENCHMARK.md, "Twenty-seventh
# session") the driver is the sooner up to ~2 x 400 MB x 1 s on two cores (and ~1 s worth on
# many). A format whose framing costs the driver more declares its own limit
# (``DRIVER_FRAMING_MAX`` in its package: informix, whose split loads compiled code above
# 128 MB that only a decoding process reuses).
DRIVER_FRAMING_MAX = 640 << 20
DRIVER_FRAMING_ENV = "DBLOG_DRIVER_FRAMING"   # "0": always the planning job (tests, comparisons)


def _is_local(spark) -> bool:
    return str(spark.sparkContext.master or "").startswith("local")


def _frame_in_driver(spark, big: list[dict]) -> bool:
    """Frame the big archives in this process rather than in a planning job: on a local master
    (the driver reads the same disks as the workers) when they are few bytes (the driver frames
    one archive after another, a job on every core): at most ``DRIVER_FRAMING_MAX`` in all, and
    at most a format's own ``DRIVER_FRAMING_MAX`` of that format's."""
    if os.environ.get(DRIVER_FRAMING_ENV, "") == "0" or not _is_local(spark):
        return False
    return driver_frames([(u["format"], int(u["archives"][0]["size"])) for u in big])


def driver_frames(sizes: list[tuple[str, int]]) -> bool:
    """Whether the driver frames archives of these (format, bytes) (``_frame_in_driver``)."""
    per_format: dict[str, int] = {}
    for fmt, size in sizes:
        per_format[fmt] = per_format.get(fmt, 0) + size
    if sum(per_format.values()) > DRIVER_FRAMING_MAX:
        return False
    return all(total <= getattr(get_format(fmt), "DRIVER_FRAMING_MAX", DRIVER_FRAMING_MAX)
               for fmt, total in per_format.items())


def plan_ranges(spark, manifest: dict, target: int | None = None) -> dict:
    """``(source, file) -> ranges`` of every archive worth splitting: framed by one Spark task
    each (only the ranges come back to the driver), or, on a local master with few bytes to
    frame, by the driver itself (``_frame_in_driver``: the same ``split_archive``, no job and
    no Python worker to wait for)."""
    if target is None:
        night = sum(int(a["size"]) for src in manifest["sources"] for a in src["archives"])
        target = split_target(night, spark.sparkContext.defaultParallelism)
    big = []
    for src in manifest["sources"]:
        common = {k: src[k] for k in ("name", "format", "timezone", "options", "catalog")}
        common["data_root"] = manifest.get("data_root")
        for a in src["archives"]:
            if _splittable(src, a, target):
                big.append({**common, "archives": [a]})
    if not big:
        return {}
    if _frame_in_driver(spark, big):
        found = [(i, split_archive(u, target)) for i, u in enumerate(big)]
    else:
        df = units_frame(spark, [(i, json.dumps(u)) for i, u in enumerate(big)])
        got = df.mapInArrow(_split_partition(target), spark_schema(RANGE_SCHEMA)).collect()
        found = [(row["unit_id"], json.loads(row["ranges"])) for row in got]
    out = {}
    for i, ranges in found:
        u = big[i]
        if len(ranges) > 1:
            out[(u["name"], u["archives"][0]["file"])] = ranges
    return out


STARTED_SCHEMA = pa.schema([("started", pa.int32())])


def _started(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The workers' start job's function: one empty batch per task."""
    for _ in batches:
        pass
    yield pa.RecordBatch.from_arrays([pa.array([], pa.int32())], schema=STARTED_SCHEMA)


def start_python_workers(spark):
    """Start the Python workers of a local master (Spark's Python daemon and one worker per
    core) in a background job, so that their start (~1 s: Python, ``pyspark.worker``, the
    daemon's preloaded modules) overlaps the driver's planning instead of delaying the
    decode's first tasks. Returns a function that waits for it; a failure is left to the
    decode job to report (it starts the same workers). Nothing happens on other masters.

    The job is a ``mapInArrow``, the decode's own kind of Python job, so that it also loads
    what the first Arrow job of a process loads once (the JVM's Arrow writer and reader
    classes and allocator, the workers' Arrow stream serializers): a row-at-a-time UDF
    started the same workers, but the planning job's tasks then took 0.34-0.44 s to reach
    their function, against 0.13-0.18 s after an Arrow start job (docs/BENCHMARK.md,
    "Twenty-seventh session"). (pandas, which pyspark's Arrow path imports in the driver, is
    loaded anyway: the session's creation imports ``pyspark.testing.utils``.)"""
    import threading

    if not _is_local(spark):
        return lambda: None
    sc = spark.sparkContext
    cores = max(1, int(sc.defaultParallelism))
    errors: list[BaseException] = []
    group = f"dblog-python-workers-{os.getpid()}-{os.urandom(4).hex()}"

    def run() -> None:
        sc.setJobGroup(group, "decode: start the Python workers")
        try:
            # (the schema as an object: a DDL string is parsed by the JVM's SQL parser, whose
            # first use loads its classes, ~0.12 s before the job could start)
            spark.range(0, cores, 1, cores).mapInArrow(
                _started, spark_schema(STARTED_SCHEMA)).collect()
            # the JVM's SQL parser loaded while the decode runs, not on the ordering's path
            # (its first DDL schema: the decode's own are objects)
            from pyspark.sql.types import _parse_datatype_string

            _parse_datatype_string("unit_id INT")
        except BaseException as exc:  # noqa: BLE001 - reported by the decode job, if real
            errors.append(exc)
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)
            sc.setJobDescription(None)

    thread = threading.Thread(target=run, name="dblog-python-workers", daemon=True)
    thread.start()
    submitted(sc, group, thread)
    return thread.join


def submitted(sc, group: str, thread, timeout: float = 2.0) -> bool:
    """Wait until the job of ``group`` is submitted (or ``thread`` ended, or ``timeout``
    seconds): the thread's py4j calls and the UDF's pickling need the GIL, and the driver's
    framing that follows holds it, which delayed the workers' start by ~0.5 s on a 150 MB
    night (docs/BENCHMARK.md, "Twenty-sixth session"). Returns whether it was seen.

    Any active job counts too: nothing else runs when the decode starts, and without
    pyspark's pinned threads (``PYSPARK_PIN_THREAD=false``) a thread's job group may not
    reach the JVM thread that submits its job."""
    import time

    tracker = sc.statusTracker()
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if tracker.getJobIdsForGroup(group) or tracker.getActiveJobsIds():
            return True
        if not thread.is_alive():
            return False
        time.sleep(0.005)
    return False


# error classes of an archive lost whole: all its bytes are quarantined, and the source's
# night fails unless the operator accepted the loss (``dblog run --accept-loss``)
LOST_CLASSES = ("unreadable", "decoder_error")


def read_bytes(archive: dict | str, start: int = 0, end: int | None = None,
               data_root: str | None = None) -> bytes:
    """The bytes of a staged archive (a manifest entry: read by its real bytes path, checked
    against the data root and the staged size), ``[start, end)`` of it for a range, or of a
    path or URI. ``OSError`` if not (``landing.read_archive``)."""
    return read_archive(archive, data_root, start, end)


def _lost(sink: EventSink, archive: dict, error_class: str, message: str, raw: bytes | None = None,
          start: int = 0, index: int = 0, span: int | None = None) -> None:
    """The archive (or its range ``start``, ``span`` bytes) is lost whole: one quarantine row
    standing for all its bytes (and no record: how many there were is not known)."""
    span = int(archive.get("size") or 0) if span is None else span
    sink.add("quarantine", start, index, 0, error_class=error_class, n_bytes=span,
             message=(message + (" (loss accepted by the operator)" if archive.get("accept_loss") else
                                 "; the source's night fails unless the loss is accepted "
                                 "(dblog run --accept-loss)"))[:1000],
             raw_hex=raw[:256].hex() if raw else None)


def decode_unit(unit: dict) -> Iterator[pa.RecordBatch]:
    """Decode the archives of one unit (or one byte range of an archive), in order, passing
    the carry along."""
    fmt = get_format(unit["format"])
    catalog = parse_catalog(unit["catalog"], f"<catalog of {unit['name']}>")
    carry = unit.get("carry")
    rng = unit.get("range")
    for archive in unit["archives"]:
        sink = EventSink(unit["name"], unit["format"], archive["file"])
        start, end = (rng["start"], rng["end"]) if rng else (0, None)
        first = rng["index"] if rng else 0
        span = (end - start) if rng else archive["size"]
        ctx = DecodeContext(unit["name"], unit["format"], catalog, archive["file"],
                            unit.get("options") or {}, unit.get("timezone") or "UTC", carry,
                            offset=start, index=first, line=rng.get("line", 0) if rng else 0,
                            split=rng.get("split") if rng else None)
        what = archive["file"] + (f" bytes {start}..{end}" if rng else "")
        try:
            data = read_bytes(archive, start, end, unit.get("data_root"))
        except (OSError, ValueError) as exc:
            _lost(sink, archive, "unreadable",
                  f"{what}: cannot read the archive, all {span} bytes quarantined: {exc}",
                  start=start, index=first, span=span)
            yield from sink.batches()
            continue
        try:
            carry = fmt.decode(data, ctx, sink)
        except Exception as exc:  # a decoder bug must not stop the night: quarantine the bytes
            sink = EventSink(unit["name"], unit["format"], archive["file"])
            tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
            _lost(sink, archive, "decoder_error",
                  f"{what}: decoder failed, whole {'range' if rng else 'archive'} ({len(data)} bytes) "
                  f"quarantined: {tb}", data, start=start, index=first, span=len(data))
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


WRITTEN_SCHEMA = pa.schema([("unit_id", pa.int32()), ("file", pa.string()), ("rows", pa.int64()),
                            ("bytes", pa.int64()), ("positions", pa.string()),
                            ("scoped", pa.int64()), ("carry", pa.int64())])
UNITS_FILE = "decode_units.json"   # per work unit: its file, rows and position run (run dir)
# the kinds of rows whose positions must not repeat in a source's night (the ordering's
# ``duplicate_position`` rule, ``accounting.POSITION_KINDS``)
POSITION_KINDS = ("change", "segment", "begin", "commit", "abort", "undo")


class PositionRun:
    """The (position, seg_num) keys of a unit's rows of ``POSITION_KINDS``, as written:
    the first, the last, and whether every key is greater than the one before it. A unit
    whose keys rise strictly repeats none of them; units of one source whose key ranges do
    not overlap share none (``accounting.unique_sources``), and the ordering then leaves
    that source's rows out of its search for repeated positions. Arrow compute over each
    batch, no Python per row."""

    def __init__(self) -> None:
        self.first: list | None = None
        self.last: list | None = None
        self.rising = True

    def add(self, batch: pa.RecordBatch) -> None:
        import pyarrow.compute as pc

        if not self.rising or batch.num_rows == 0:
            return
        pos = batch.column("position")
        mask = pc.and_(pc.is_in(batch.column("kind"), pa.array(POSITION_KINDS)), pc.is_valid(pos))
        pos = pc.filter(pos, mask)
        if len(pos) == 0:
            return
        sn = pc.fill_null(pc.filter(batch.column("seg_num"), mask), 0)
        if len(pos) > 1:
            a, b = pos.slice(0, len(pos) - 1), pos.slice(1)
            rises = pc.or_(pc.less(a, b), pc.and_(pc.equal(a, b),
                                                  pc.less(sn.slice(0, len(sn) - 1), sn.slice(1))))
            if not pc.all(rises).as_py():
                self.rising = False
                return
        first = [pos[0].as_py(), sn[0].as_py()]
        if self.last is not None and not tuple(self.last) < tuple(first):
            self.rising = False
            return
        if self.first is None:
            self.first = first
        self.last = [pos[-1].as_py(), sn[-1].as_py()]

    def to_json(self) -> str:
        return json.dumps({"first": self.first, "last": self.last, "rising": self.rising})
# Parquet of the events: snappy (Spark's own default). Dictionary pages only for the columns
# with few distinct values per file (names, kinds, ops, tables, codes): on the others (offsets,
# positions, transaction ids, row images) the writer builds a dictionary, finds it too big
# and falls back to plain pages, for nothing. Min/max statistics only where a reader's filter
# can use them (not on positions, row images and messages, whose long values cost the most
# to compare). The values and the schema the readers see are the same either way.
EVENT_DICTIONARY_COLUMNS = ("source", "format", "archive_file", "n_records", "kind", "rule",
                            "flag", "trx_end", "user", "op", "table_id", "schema_name",
                            "table_name", "seg_total", "error_class", "record_type")
EVENT_UNSORTED_COLUMNS = ("trx_id", "position", "trx_order", "commit_position", "before", "after",
                          "ddl", "row_id", "undo_of", "seg_key", "seg_data", "message", "raw_hex")
PARQUET_OPTIONS = {"compression": "snappy",
                   "use_dictionary": list(EVENT_DICTIONARY_COLUMNS),
                   "write_statistics": [c for c in EVENT_COLUMNS if c not in EVENT_UNSORTED_COLUMNS]}


def hidden_temp(path: str) -> str:
    """A hidden temporary name beside ``path`` (readers skip names starting with ``.``), for
    a file written whole and then renamed to ``path``."""
    d, name = os.path.split(path)
    return os.path.join(d, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")


def true_count(mask) -> int:
    """The true values of a boolean array (null counts as false)."""
    import pyarrow.compute as pc

    return int(pc.sum(pc.cast(pc.fill_null(mask, False), pa.int64())).as_py() or 0)


def write_unit(unit_id: int, unit: dict, out_dir: str) -> tuple[str, int, int, str, int | None,
                                                                 int]:
    """Decode one work unit straight into ``<out_dir>/part-<unit_id>.parquet`` with pyarrow,
    batch by batch (memory: one batch). Written under a hidden name (Spark's reader skips
    names starting with ``.``) and renamed when whole, so a retried or speculative attempt
    replaces the file with the same content and a killed one leaves nothing a reader sees.
    Returns (file name, rows, bytes, the unit's ``PositionRun`` as JSON, the rows in the
    scope of its format's hook: ``resolve_scope_table``, None without one, and its
    ``carry`` rows)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    name = f"part-{unit_id:05d}.parquet"
    final = os.path.join(out_dir, name)
    tmp = hidden_temp(final)
    rows = 0
    run = PositionRun()
    scope = getattr(get_format(unit["format"]), "resolve_scope_table", None) \
        if unit.get("format") else None
    scoped = None if scope is None else 0
    carry = 0
    try:
        with pq.ParquetWriter(tmp, EVENT_SCHEMA, **PARQUET_OPTIONS) as writer:
            for batch in decode_unit(unit):
                if batch.schema != EVENT_SCHEMA:
                    batch = batch.cast(EVENT_SCHEMA)
                writer.write_batch(batch)
                run.add(batch)
                rows += batch.num_rows
                if scope is not None and batch.num_rows:
                    scoped += true_count(scope(batch))
                if batch.num_rows:
                    carry += true_count(pc.equal(batch.column("kind"), "carry"))
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return name, rows, os.path.getsize(final), run.to_json(), scoped, carry


def _write_partition(out_dir: str):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for unit_id, payload in zip(batch.column("unit_id").to_pylist(),
                                        batch.column("payload").to_pylist()):
                name, rows, size, positions, scoped, carry = write_unit(
                    unit_id, json.loads(payload), out_dir)
                yield pa.record_batch([pa.array([unit_id], pa.int32()), pa.array([name]),
                                       pa.array([rows], pa.int64()), pa.array([size], pa.int64()),
                                       pa.array([positions]), pa.array([scoped], pa.int64()),
                                       pa.array([carry], pa.int64())],
                                      names=["unit_id", "file", "rows", "bytes", "positions",
                                             "scoped", "carry"])
    return run


def decode_stage(spark, manifest: dict, run_dir: Path) -> str:
    """Decode every archive of the manifest into ``<run_dir>/events`` (Parquet, one file per
    work unit).

    The Python workers write the events themselves (pyarrow's Parquet writer); only one
    small row per unit (its file, rows and bytes) goes back through Spark. Handing the
    events to the JVM instead (``mapInArrow`` -> ``DataFrame.write``) cost more CPU than the
    decoding: Arrow to Spark rows, Parquet encoding in the JVM and the JIT compiling both.
    Readers read the folder with Spark, pyarrow or DuckDB as before.

    On a local master the Python workers are started first, in the background
    (``start_python_workers``), while the driver plans the ranges."""
    started = start_python_workers(spark) if any(
        src["archives"] or src.get("carry") for src in manifest["sources"]) else (lambda: None)
    try:
        return _decode_units(spark, manifest, run_dir)
    finally:
        started()      # the workers' start ended before the decode's first task began


def _decode_units(spark, manifest: dict, run_dir: Path) -> str:
    import shutil

    units = work_units(manifest, plan_ranges(spark, manifest))
    out = Path(run_dir) / EVENTS_DIR
    if out.exists():
        shutil.rmtree(out)      # a rerun of the stage replaces what it wrote
    (Path(run_dir) / UNITS_FILE).unlink(missing_ok=True)
    out.mkdir(parents=True)
    if not units:
        import pyarrow.parquet as pq

        pq.write_table(EVENT_SCHEMA.empty_table(), out / "part-empty.parquet", **PARQUET_OPTIONS)
        _write_units_file(run_dir, [])
        return str(out)
    units_df = units_frame(spark, [(i, json.dumps(u)) for i, u in enumerate(units)])
    written = units_df.mapInArrow(_write_partition(str(out)), spark_schema(WRITTEN_SCHEMA)).collect()
    # one small row per unit (the units are few: the night's bytes / the split size)
    got = {r["unit_id"] for r in written}
    if got != set(range(len(units))):
        missing = sorted(set(range(len(units))) - got)[:10]
        raise RuntimeError(f"decode: work units {missing} of {len(units)} wrote no events "
                           f"file in {out}")
    _write_units_file(run_dir, [{"source": units[r["unit_id"]]["name"], "file": r["file"],
                                 "rows": int(r["rows"]), "positions": json.loads(r["positions"]),
                                 "scoped": r["scoped"], "carry": r["carry"]}
                                for r in sorted(written, key=lambda r: r["unit_id"])])
    return str(out)


def _write_units_file(run_dir: Path, units: list[dict]) -> None:
    """``<run_dir>/decode_units.json``: what each work unit wrote (one entry per unit)."""
    path = Path(run_dir) / UNITS_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"units": units}))
    tmp.replace(path)


def spark_event_schema():
    return spark_schema(EVENT_SCHEMA)
