"""OpenLineage run events of a nightly run (SPEC section 5, "lineage").

Every run writes ``START`` (after staging: the night's archives are known) and then
``COMPLETE`` (published) or ``FAIL`` (validation failed, the publish was refused, or the run
broke), built with ``openlineage-python``:

* job: namespace ``$OPENLINEAGE_NAMESPACE`` (default ``dblog``), name ``dblog_nightly``;
  run id: a UUID derived from the dblog run id (the same in every process of a run, so the
  DAG's tasks emit START and COMPLETE of one run);
* inputs: per source, the night's landing folder ``<data root>/landing/<source>/<date>``
  (namespace ``file``) with ``inputStatistics`` (archives, bytes; records read on the end
  event);
* outputs (COMPLETE): every registered dataset (``dblog/datasets.py``) the run published,
  ``<data root>/published/<dataset>``, with ``outputStatistics``: rows, bytes and files the
  run published into it (from the Parquet footers of the staged partitions: no Spark);
* run facets: ``nominalTime`` (the night), ``errorMessage`` on FAIL, ``processing_engine``.

Events go, as JSON lines, to ``<data root>/lineage/<date>/<run_id>.jsonl`` (the client's
file transport, appending) and, when ``$OPENLINEAGE_URL`` is set, to that server (the
client's HTTP transport configured from the environment: ``OPENLINEAGE_URL``,
``OPENLINEAGE_ENDPOINT``, ``OPENLINEAGE_API_KEY``, ``OPENLINEAGE_DISABLED``).

Off the hot path, never in the way: events are built and sent by one background thread;
``close()`` waits for it a bounded time (``DBLOG_LINEAGE_TIMEOUT``, default 30 s). Any
failure (no disk space, server down, a bug here) is logged as a warning and never fails
the night.
"""

from __future__ import annotations

import contextvars
import datetime as _dt
import functools
import logging
import os
import queue
import threading
import time
import traceback
import uuid
from pathlib import Path

log = logging.getLogger("dblog.lineage")

JOB_NAME = "dblog_nightly"
DEFAULT_NAMESPACE = "dblog"
FILE_NAMESPACE = "file"
LINEAGE_DIR = "lineage"
PRODUCER = "https://dblog-etl.invalid/producer/dblog"   # a URI naming the producer (not served)
_RUN_NS = uuid.UUID("6d1f5a52-7a3e-4a55-9f3c-0d1b10c0ffee")
# the schema of the ``dblog`` run facet ships in dblog/schemas/ (the URL names it; it is not served)
DBLOG_FACET_SCHEMA = "https://dblog-etl.invalid/spec/facets/1-0-0/DblogRunFacet.json#/$defs/DblogRunFacet"
SCHEMAS_DIR = Path(__file__).resolve().parent / "schemas"


def run_uuid(run_id: str) -> str:
    """The OpenLineage run id of a dblog run (stable across the processes of one run)."""
    return str(uuid.uuid5(_RUN_NS, run_id))


def events_file(root, date: str, run_id: str) -> Path:
    return Path(root.root) / LINEAGE_DIR / date / f"{run_id}.jsonl"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ----------------------------------------------------------------- what goes into an event

def _dblog_facet_class():
    import attr
    from openlineage.client.generated.base import RunFacet

    @attr.define
    class DblogRunFacet(RunFacet):
        runId: str = attr.field()                                # noqa: N815
        date: str = attr.field()
        sources: list = attr.field(factory=list)
        published: bool = attr.field(default=False)
        seconds: dict = attr.field(factory=dict)
        failures: list = attr.field(factory=list)
        warnings: list = attr.field(factory=list)

        @staticmethod
        def _get_schema() -> str:
            return DBLOG_FACET_SCHEMA

    return DblogRunFacet


def _parquet_stats(folder: Path) -> tuple[int, int, int]:
    """(rows, bytes, files) of the Parquet files under ``folder`` (footers only)."""
    import pyarrow.parquet as pq

    rows = size = files = 0
    for f in sorted(Path(folder).rglob("*.parquet")):
        if f.name.startswith("."):
            continue
        rows += pq.ParquetFile(f).metadata.num_rows
        size += f.stat().st_size
        files += 1
    return rows, size, files


def published_outputs(manifest: dict, run_dir: Path, sources: list[str] | None = None) -> dict:
    """{dataset: (rows, bytes, files)} of what the run staged for publishing, per registered
    dataset, over this night's partitions of its sources."""
    from . import datasets as D

    date = manifest["date"]
    names = sources or [s["name"] for s in manifest["sources"]]
    out: dict[str, tuple[int, int, int]] = {}
    for ds in D.published():
        base = Path(run_dir) / ds.name
        rows = size = files = 0
        for s in names:
            parts = [base / f"source={s}" / f"date={date}"] if ds.layout == D.NIGHT \
                else sorted((base / s).glob(f"*/date={date}"))
            for p in parts:
                if p.is_dir():
                    r, b, f = _parquet_stats(p)
                    rows, size, files = rows + r, size + b, files + f
        out[ds.name] = (rows, size, files)
    return out


def _records_read(run_dir: Path, manifest: dict) -> dict[str, int]:
    """Records read per source, from tonight's staged metrics (when written)."""
    from . import metrics as M

    out = {}
    for s in manifest["sources"]:
        rows = M.read_partition(M.partition_dir(Path(run_dir) / M.METRICS, s["name"], manifest["date"]),
                                {"records_read"}, source_only=True)
        v = M.value_of(rows, "records_read")
        if v is not None:
            out[s["name"]] = int(v)
    return out


def build_event(state: str, manifest: dict, run_dir: Path | None = None, *,
                published: bool = False, error: str | None = None, stack: str | None = None,
                seconds: dict | None = None, sources: list[str] | None = None,
                failures: list[str] | None = None, warnings: list[str] | None = None):
    """One ``RunEvent`` of the run (``state``: START, COMPLETE or FAIL)."""
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
    from openlineage.client.facet_v2 import (
        error_message_run,
        input_statistics_input_dataset,
        job_type_job,
        nominal_time_run,
        output_statistics_output_dataset,
        processing_engine_run,
    )

    date = manifest["date"]
    root = Path(manifest["data_root"])
    start = _dt.datetime.combine(_dt.date.fromisoformat(date), _dt.time(), _dt.timezone.utc)
    run_facets = {"nominalTime": nominal_time_run.NominalTimeRunFacet(
        nominalStartTime=start.isoformat().replace("+00:00", "Z"),
        nominalEndTime=(start + _dt.timedelta(days=1)).isoformat().replace("+00:00", "Z"),
        producer=PRODUCER)}
    try:
        from pyspark import __version__ as spark_version
    except Exception:  # noqa: BLE001
        spark_version = "unknown"
    from importlib.metadata import PackageNotFoundError, version

    try:
        ol_version = version("openlineage-python")
    except PackageNotFoundError:
        ol_version = "unknown"
    run_facets["processing_engine"] = processing_engine_run.ProcessingEngineRunFacet(
        version=spark_version, name="spark", openlineageAdapterVersion=ol_version, producer=PRODUCER)
    if state == "FAIL":
        run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=(error or "the run failed")[:10_000], programmingLanguage="python",
            stackTrace=stack, producer=PRODUCER)
    names = sources or [s["name"] for s in manifest["sources"]]
    run_facets["dblog"] = _dblog_facet_class()(
        runId=manifest["run_id"], date=date, sources=list(names), published=bool(published),
        seconds={k: float(v) for k, v in (seconds or {}).items()},
        failures=[str(f)[:2000] for f in failures or []][:50],
        warnings=[str(w)[:2000] for w in warnings or []][:50], producer=PRODUCER)
    records = _records_read(Path(run_dir), manifest) if run_dir and state != "START" else {}
    inputs = []
    for s in manifest["sources"]:
        if s["name"] not in names:
            continue
        archives = s.get("archives") or []
        stats = input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
            rowCount=records.get(s["name"]), size=sum(int(a.get("size") or 0) for a in archives),
            fileCount=len(archives), producer=PRODUCER)
        inputs.append(InputDataset(namespace=FILE_NAMESPACE,
                                   name=str(root / "landing" / s["name"] / date),
                                   inputFacets={"inputStatistics": stats}))
    outputs = []
    if state == "COMPLETE" and published and run_dir is not None:
        for name, (rows, size, files) in published_outputs(manifest, Path(run_dir), names).items():
            outputs.append(OutputDataset(
                namespace=FILE_NAMESPACE, name=str(root / "published" / name),
                outputFacets={"outputStatistics": output_statistics_output_dataset
                              .OutputStatisticsOutputDatasetFacet(rowCount=rows, size=size,
                                                                  fileCount=files, producer=PRODUCER)}))
    job = Job(namespace=os.environ.get("OPENLINEAGE_NAMESPACE") or DEFAULT_NAMESPACE, name=JOB_NAME,
              facets={"jobType": job_type_job.JobTypeJobFacet(
                  processingType="BATCH", integration="SPARK", jobType="JOB", producer=PRODUCER)})
    return RunEvent(eventType=getattr(RunState, state), eventTime=_now(),
                    run=Run(runId=run_uuid(manifest["run_id"]), facets=run_facets),
                    job=job, inputs=inputs, outputs=outputs, producer=PRODUCER)


# ----------------------------------------------------------------- sending

def _file_client(path: Path):
    from openlineage.client import OpenLineageClient
    from openlineage.client.transport.file import FileConfig, FileTransport

    if not os.environ.get("OPENLINEAGE_CLIENT_LOGGING"):
        logging.getLogger("openlineage.client").setLevel(logging.WARNING)
    path.parent.mkdir(parents=True, exist_ok=True)
    return OpenLineageClient(transport=FileTransport(FileConfig(log_file_path=str(path), append=True)))


def _server_client():
    """The client's own environment configuration (``OPENLINEAGE_URL`` and friends)."""
    from openlineage.client import OpenLineageClient

    return OpenLineageClient()


_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("dblog_lineage", default=None)


def observed(fn):
    """Decorate a run (``pipeline.run_night``): when it raises after its ``Lineage`` started,
    the run's FAIL event is written (with the error and its stack) before the error goes on."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        token = _ACTIVE.set(None)
        try:
            return fn(*args, **kwargs)
        except BaseException as exc:
            lin = _ACTIVE.get()
            if lin is not None and not lin.ended:
                lin.fail(lin.run_dir, f"the run failed: {exc!r}", exc)
                lin.close()
            raise
        finally:
            _ACTIVE.reset(token)
    return wrapper


class Lineage:
    """The run's lineage events: one background thread builds each event and appends it
    to the run's file; a second one sends it to ``$OPENLINEAGE_URL`` (so a slow or absent
    server never holds the file back)."""

    def __init__(self, manifest: dict, enabled: bool | None = None):
        self.manifest = manifest
        self.enabled = enabled if enabled is not None else \
            os.environ.get("DBLOG_LINEAGE", "on").lower() not in ("off", "0", "false")
        from .paths import DataRoot

        self.path = events_file(DataRoot(Path(manifest["data_root"])), manifest["date"],
                                manifest["run_id"])
        self._queue: queue.Queue = queue.Queue()
        self._send: queue.Queue | None = queue.Queue() if os.environ.get("OPENLINEAGE_URL") else None
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []
        self.ended = False
        self.run_dir: Path | None = None
        _ACTIVE.set(self)

    def _builder(self) -> None:
        client = None
        while True:
            item = self._queue.get()
            if item is None:
                break
            state, kw = item
            try:
                event = build_event(state, self.manifest, **kw)
            except Exception as exc:  # noqa: BLE001
                self._failed(f"building {state}: {exc!r}")
                continue
            if self._send is not None:
                self._send.put((state, event))
            try:
                client = client or _file_client(self.path)
                client.emit(event)
            except Exception as exc:  # noqa: BLE001 - no disk, no lineage; the night goes on
                self._failed(f"writing {state} to {self.path}: {exc!r}")
        if self._send is not None:
            self._send.put(None)

    def _sender(self) -> None:
        client = None
        while True:
            item = self._send.get()
            if item is None:
                return
            state, event = item
            try:
                client = client or _server_client()
                client.emit(event)
            except Exception as exc:  # noqa: BLE001 - a lineage server down is no reason to fail
                self._failed(f"sending {state} to {os.environ.get('OPENLINEAGE_URL')}: {exc!r}")

    def _failed(self, what: str) -> None:
        self.errors.append(what)
        log.warning("OpenLineage event not written (the night goes on): %s", what)

    def emit(self, state: str, **kw) -> None:
        if not self.enabled:
            return
        if not self._threads:
            self._threads.append(threading.Thread(target=self._builder, name="dblog-lineage",
                                                  daemon=True))
            if self._send is not None:
                self._threads.append(threading.Thread(target=self._sender,
                                                      name="dblog-lineage-send", daemon=True))
            for t in self._threads:
                t.start()
        self._queue.put((state, kw))

    def start(self, run_dir: Path | None = None) -> "Lineage":
        self.run_dir = Path(run_dir) if run_dir else None
        self.emit("START")
        return self

    def end(self, published: bool, run_dir: Path, seconds: dict | None = None,
            failures: list[str] | None = None, warnings: list[str] | None = None) -> None:
        """COMPLETE when the run published, else FAIL naming why; then wait for the events."""
        if published:
            self.complete(run_dir, seconds, warnings)
        else:
            self.fail(run_dir, "not published: " + "; ".join(failures or ["unknown reason"])[:2000],
                      seconds=seconds, failures=failures, warnings=warnings)
        self.close()

    def complete(self, run_dir: Path, seconds: dict | None = None,
                 warnings: list[str] | None = None) -> None:
        self.ended = True
        self.emit("COMPLETE", run_dir=Path(run_dir), published=True, seconds=dict(seconds or {}),
                  warnings=warnings)

    def fail(self, run_dir: Path | None, error: str, exc: BaseException | None = None,
             seconds: dict | None = None, failures: list[str] | None = None,
             warnings: list[str] | None = None) -> None:
        self.ended = True
        stack = "".join(traceback.format_exception(exc)) if exc is not None else None
        self.emit("FAIL", run_dir=run_dir, error=error, stack=stack, seconds=dict(seconds or {}),
                  failures=failures, warnings=warnings)

    def close(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds in all) for the events to be written and sent;
        True when everything is done."""
        if not self._threads:
            return True
        if timeout is None:
            timeout = float(os.environ.get("DBLOG_LINEAGE_TIMEOUT", "30"))
        deadline = time.monotonic() + timeout
        self._queue.put(None)
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        done = not any(t.is_alive() for t in self._threads)
        if not done:
            log.warning("OpenLineage events still being sent after %.0f s; not waiting longer "
                        "(the file %s has them)", timeout, self.path)
        self._threads = []
        return done

def emit_now(state: str, manifest: dict, **kw) -> bool:
    """Write one event and wait for it (the DAG's tasks: one event per task). Never raises."""
    try:
        lin = Lineage(manifest)
        lin.emit(state, **kw)
        return lin.close() and not lin.errors
    except Exception as exc:  # noqa: BLE001
        log.warning("OpenLineage event not written (the night goes on): %r", exc)
        return False
