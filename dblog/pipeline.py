"""The nightly pipeline as plain functions, one per stage.

``dblog run`` calls them in one process (Spark ``local[*]``); the Airflow DAG runs the same
functions as separate tasks (``jobs/`` are the spark-submit entry points). Every stage
reads what it needs from the run's staging directory and the data root only.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from decoders.errors import ConfigError

from .config import load_config
from .decode import decode_stage
from .landing import record_published
from .lineage import Lineage, observed
from .metrics import record_seconds
from .mirror import mirror_stage
from .ordering import load_summary, order_stage
from .paths import DataRoot, new_run_id, safe_run_id
from .progress import Progress, staged_text
from .publish import PublishError, publish, tidy
from .sparkio import StepFailed, side_by_side
from .stage import load_manifest, stage
from .tables import tables_stage

log = logging.getLogger("dblog")


class RunFailed(RuntimeError):
    """The run itself failed in ``stage`` (an error such as running out of memory, not a
    verdict on the data): nothing was published (``dblog run`` exits 3). ``step`` names the
    step of the stage when the stage runs several side by side (e.g. ``mirror``)."""

    def __init__(self, stage: str, run_dir: Path | None, cause: BaseException,
                 step: str | None = None) -> None:
        self.stage, self.run_dir, self.cause, self.step = stage, run_dir, cause, step
        where = f"in the {stage} stage" + (f" ({step} step)" if step else "") \
            + (f" of run {Path(run_dir).name} ({run_dir})" if run_dir else "")
        super().__init__(f"the run failed {where}: {describe_error(cause)}; nothing was published")


def _exception_text(exc: BaseException) -> str:
    """str(exc); a py4j error renders through the JVM, which may be gone (e.g. after an
    OutOfMemoryError stopped it): then its Python-side arguments."""
    try:
        return str(exc) or type(exc).__name__
    except Exception:  # noqa: BLE001
        parts = []
        for a in getattr(exc, "args", ()):
            try:
                parts.append(a if isinstance(a, str) else str(a))
            except Exception:  # noqa: BLE001
                parts.append(f"<{type(a).__name__}>")
        return " ".join(parts) or type(exc).__name__


def describe_error(exc: BaseException) -> str:
    """One line for an exception, with the JVM's own error when Spark failed."""
    text = _exception_text(exc)
    for marker in ("java.lang.OutOfMemoryError", "OutOfMemoryError"):
        if marker in text:
            line = next(ln for ln in text.splitlines() if marker in ln).strip()
            return (f"out of memory ({line[line.index(marker):][:200]}); the JVM heap is "
                    f"spark.driver.memory (default a fraction of the machine's memory, "
                    f"DBLOG_DRIVER_MEMORY to set it)")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    cause = next((ln for ln in lines if ("Exception:" in ln or "Error:" in ln)
                  and not ln.startswith("at ")), lines[0] if lines else type(exc).__name__)
    return f"{type(exc).__name__}: {cause[:500]}"


@dataclass
class RunResult:
    run_id: str
    date: str
    published: bool
    report: str | None
    summary: dict = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    version: str | None = None
    seconds: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)    # history checks flagged at warn


def stage_night(date: str, config: str | None = None, data_root: str | None = None,
                sources: list[str] | None = None, run_id: str | None = None,
                accept_loss: list[str] | tuple[str, ...] = ()) -> Path:
    cfg = load_config(config)
    root = DataRoot.of(data_root)
    run_id = safe_run_id(run_id) if run_id else new_run_id(date)
    stage(cfg, cfg.select(sources), root, date, run_id, accept_loss)
    return root.staging(run_id)


def decode_night(spark, run_dir: Path) -> None:
    decode_stage(spark, load_manifest(run_dir), run_dir)


def order_night(spark, run_dir: Path) -> dict:
    """The ordering, then the typed tables and the mirrors side by side (each reads only
    the ordered changes; ``side_by_side``). A failure of either raises ``StepFailed``."""
    manifest = load_manifest(run_dir)
    summary = order_stage(spark, manifest, run_dir)
    side_by_side({"tables": lambda: tables_stage(spark, manifest, run_dir),
                  "mirror": lambda: mirror_stage(spark, manifest, run_dir)})
    return summary


def validate_night(spark, run_dir: Path):
    from .validate import validate_stage

    manifest = load_manifest(run_dir)
    return validate_stage(spark, manifest, run_dir, DataRoot.of(manifest["data_root"]))


def publish_night(run_dir: Path, only_sources: list[str] | None = None) -> Path:
    manifest = load_manifest(run_dir)
    version = publish(DataRoot.of(manifest["data_root"]), manifest, run_dir, load_summary(run_dir),
                      only_sources)
    record_published(manifest["data_root"], manifest, only_sources)
    return version


def tidy_published(run_dir: Path) -> dict:
    """The step after the publish (``dblog.publish.tidy``): deletes what the publishes took
    out of their versions and prepares the next one. The published version never needs it."""
    return tidy(DataRoot.of(load_manifest(run_dir)["data_root"]))


def staged_bytes(manifest: dict) -> int:
    """Bytes of the night's staged archives (``dblog.spark.jit_settings``)."""
    return sum(int(a.get("size") or 0) for s in manifest["sources"] for a in s["archives"])


def quiet_great_expectations() -> None:
    """Great Expectations logs dozens of INFO lines while it imports ("Skipping registering
    function ...", "Multiple declarations of metric ..."): its logger starts at WARNING
    unless a level was set for it already."""
    gx_log = logging.getLogger("great_expectations")
    if gx_log.level == logging.NOTSET:
        gx_log.setLevel(logging.WARNING)


def _preload_validation() -> None:
    """Import Great Expectations (seconds of imports) in a background thread while the
    JVM starts, decodes and orders: the validate stage then finds it loaded. Only an import.
    PySpark's modules are imported first, here, so that the two threads never import the
    same package at once (Great Expectations imports pyspark when it is installed)."""
    import os
    import threading

    import pyspark.sql  # noqa: F401

    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")   # as dblog.validate sets them
    os.environ.setdefault("TQDM_DISABLE", "1")
    quiet_great_expectations()

    def load() -> None:
        try:
            import great_expectations  # noqa: F401
        except Exception:  # noqa: BLE001 - the validate stage imports it again and reports
            pass

    threading.Thread(target=load, name="dblog-preload-gx", daemon=True).start()


@observed
def run_night(date: str, config: str | None = None, data_root: str | None = None,
              sources: list[str] | None = None, master: str | None = None,
              run_id: str | None = None, spark=None, progress=None,
              accept_loss: list[str] | tuple[str, ...] = ()) -> RunResult:
    """Stage, decode, order, validate and (if valid) publish one logical date.
    ``progress`` shows the stages as they run (``dblog.progress``); the run's OpenLineage
    events and stage seconds are written by ``dblog.lineage`` and ``dblog.metrics``.
    ``accept_loss``: shell patterns of archives (``<source>/<date>/<file>``) whose loss
    (unreadable, decoder crash) does not fail their source's night."""
    from .spark import get_session

    progress = progress or Progress(enabled=False)
    seconds: dict[str, float] = {}
    t0 = time.monotonic()

    def lap(name: str, detail: str | None = None) -> None:
        nonlocal t0
        now = time.monotonic()
        seconds[name] = round(now - t0, 2)
        t0 = now
        record_seconds(run_dir, name, seconds[name])
        progress.end(name, seconds[name], detail)

    current, run_dir = "stage", None
    # Great Expectations' imports (seconds of Python) overlap the JVM's start and the decode
    _preload_validation()
    try:
        progress.begin("stage")
        run_dir = stage_night(date, config, data_root, sources, run_id, accept_loss)
        lineage = Lineage(load_manifest(run_dir)).start(run_dir)
        current = "spark session"
        spark = spark or get_session(master or "local[*]", night_bytes=staged_bytes(load_manifest(run_dir)))
        progress.attach_spark(spark)
        lap("stage", staged_text(load_manifest(run_dir)))
        current = "decode"
        log.info("decoding %s", run_dir)
        progress.begin("decode")
        decode_night(spark, run_dir)
        lap("decode")
        current = "order"
        log.info("ordering")
        progress.begin("order")
        summary = order_night(spark, run_dir)
        lap("order")
        current = "validate"
        log.info("validating")
        progress.begin("validate")
        result = validate_night(spark, run_dir)
        lap("validate")
        current = "publish"
        progress.begin("publish")
        version = None
        failures = list(result.failures)
        warnings = list(result.warnings)
        published = result.success
        if result.success:
            try:
                version = str(publish_night(run_dir))
            except PublishError as exc:   # e.g. a rerun that would renumber later nights
                published = False
                failures.append(f"publish refused: {exc}")
                _mark_report_unpublished(result.report, str(exc))
        lap("publish", "published" if published else "nothing published")
        if published:
            current = "tidy"
            progress.begin("tidy")
            try:
                done = tidy_published(run_dir)
                detail = f"{done['trash_removed']} removed, next from {done['next_from'] or 'as is'}"
            except Exception as exc:  # noqa: BLE001 - the night is published whatever tidy does
                log.warning("tidy failed after the publish: %s", describe_error(exc))
                warnings.append(f"tidy failed ({describe_error(exc)}); the night is published, "
                                "the next tidy or publish finishes it")
                detail = "failed"
            lap("tidy", detail)
        current = "lineage"
        lineage.end(published, run_dir, seconds, failures, warnings)
    except ConfigError:
        raise
    except StepFailed as exc:   # a step of a stage that runs several: named too
        if isinstance(exc.cause, ConfigError):
            raise exc.cause from None
        raise RunFailed(current, run_dir, exc.cause, exc.step) from exc.cause
    except Exception as exc:  # noqa: BLE001 - any failure of the run itself: exit 3, says where
        raise RunFailed(current, run_dir, exc) from exc
    return RunResult(run_dir.name, date, published, result.report, summary, failures,
                     version, seconds, warnings)


def _mark_report_unpublished(report: str | None, why: str) -> None:
    """The report was written before publishing: say that the publish was refused."""
    if not report or not Path(report).is_file():
        return
    import html

    page = Path(report)
    text = page.read_text(encoding="utf-8")
    note = (f'<p class="verdict bad">Validation passed, but the publish was refused: '
            f"{html.escape(why)}. Nothing was published.</p>")
    page.write_text(text.replace("<body>", "<body>" + note, 1), encoding="utf-8")


def describe(result: RunResult, root: DataRoot) -> str:
    lines = [f"run {result.run_id} for {result.date}: "
             + ("PUBLISHED" if result.published else "VALIDATION FAILED, nothing published")]
    for source, s in result.summary.items():
        lines.append(f"  {source}: {s['published_transactions']} transactions, commit_seq "
                     f"{s['seq_base'] + 1}..{s['last_commit_seq']}")
    for f in result.failures:
        lines.append(f"  failed: {f}")
    for w in result.warnings:
        lines.append(f"  warning: {w}")
    if result.published:
        from .datasets import published as datasets

        names = ", ".join(d.name for d in datasets())
        lines.append(f"  published: {root.published}/{{{names}}} "
                     f"(snapshot {Path(result.version).name})")
    if result.report:
        lines.append(f"  report: {result.report}")
    if result.seconds:
        lines.append("  seconds: " + ", ".join(f"{k} {v}" for k, v in result.seconds.items()))
    return "\n".join(lines)


def to_json(result: RunResult) -> str:
    return json.dumps(result.__dict__, indent=1, default=str)


# ----------------------------------------------------------------- split stage (the Airflow DAG)
# The DAG stages each source in its own mapped task (a broken catalog or landing zone shows
# as that source's failed task), then merges the parts into the run's one manifest.

PARTS_DIR = "parts"


def stage_source_part(date: str, source: str, run_dir: Path, config: str | None = None,
                      accept_loss: list[str] | tuple[str, ...] = ()) -> Path:
    """Stage one source of a run into ``<run_dir>/parts/<source>/manifest.json``."""
    cfg = load_config(config)
    run_dir = Path(run_dir)
    root = DataRoot(run_dir.parent.parent)
    part_id = f"{run_dir.name}/{PARTS_DIR}/{source}"
    stage(cfg, cfg.select([source]), root, date, part_id, accept_loss)
    return root.staging(part_id)


def merge_stage_parts(run_dir: Path, sources: list[str]) -> dict:
    """Merge the per-source parts into ``<run_dir>/manifest.json`` (in the order given)."""
    from .order import STATE
    from .stage import MANIFEST

    run_dir = Path(run_dir)
    parts = [load_manifest(run_dir / PARTS_DIR / s) for s in sources]
    if not parts:
        raise ValueError(f"no sources staged in {run_dir}")
    dates = {p["date"] for p in parts}
    if len(dates) != 1:
        raise ValueError(f"parts of {run_dir} are for different dates: {sorted(dates)}")
    first = parts[0]
    manifest = {"run_id": run_dir.name, "date": first["date"], "data_root": first["data_root"],
                "config": first["config"],
                "accept_loss": sorted({a for p in parts for a in p.get("accept_loss") or []}),
                "sources": [e for p in parts for e in p["sources"]]}
    tmp = run_dir / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1))
    tmp.replace(run_dir / MANIFEST)
    # each part's list of archives joins the run's state (published with the night)
    import shutil

    for s in sources:
        part_state = run_dir / PARTS_DIR / s / STATE
        if part_state.is_dir():
            shutil.copytree(part_state, run_dir / STATE, dirs_exist_ok=True)
    return manifest


def load_validation(run_dir: Path) -> dict | None:
    """What the validate stage recorded (``<run_dir>/validation.json``), or None."""
    path = Path(run_dir) / "validation.json"
    return json.loads(path.read_text()) if path.is_file() else None
