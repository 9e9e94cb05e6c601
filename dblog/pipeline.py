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

from .config import load_config
from .decode import decode_stage
from .landing import record_published
from .order import load_summary, order_stage
from .paths import DataRoot, new_run_id, safe_run_id
from .publish import PublishError, publish
from .stage import load_manifest, stage
from .tables import tables_stage

log = logging.getLogger("dblog")


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
    manifest = load_manifest(run_dir)
    summary = order_stage(spark, manifest, run_dir)
    tables_stage(spark, manifest, run_dir)
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


def run_night(date: str, config: str | None = None, data_root: str | None = None,
              sources: list[str] | None = None, master: str | None = None,
              run_id: str | None = None, spark=None,
              accept_loss: list[str] | tuple[str, ...] = ()) -> RunResult:
    """Stage, decode, order, validate and (if valid) publish one logical date.
    ``accept_loss``: shell patterns of archives (``<source>/<date>/<file>``) whose loss
    (unreadable, decoder crash) does not fail their source's night."""
    from .spark import get_session

    seconds: dict[str, float] = {}
    t0 = time.monotonic()

    def lap(name: str) -> None:
        nonlocal t0
        now = time.monotonic()
        seconds[name] = round(now - t0, 2)
        t0 = now

    run_dir = stage_night(date, config, data_root, sources, run_id, accept_loss)
    spark = spark or get_session(master or "local[*]")
    lap("stage")
    log.info("decoding %s", run_dir)
    decode_night(spark, run_dir)
    lap("decode")
    log.info("ordering")
    summary = order_night(spark, run_dir)
    lap("order")
    log.info("validating")
    result = validate_night(spark, run_dir)
    lap("validate")
    version = None
    failures = list(result.failures)
    published = result.success
    if result.success:
        try:
            version = str(publish_night(run_dir))
        except PublishError as exc:   # e.g. a rerun that would renumber later nights
            published = False
            failures.append(f"publish refused: {exc}")
            _mark_report_unpublished(result.report, str(exc))
    lap("publish")
    return RunResult(run_dir.name, date, published, result.report, summary, failures,
                     version, seconds)


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
    if result.published:
        lines.append(f"  published: {root.published}/changes, transactions, tables "
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
