"""What runs inside one measured subprocess: ``python -m bench.jobs KIND --spec FILE``.

KIND is ``plain`` (baseline a, no Spark), ``decode`` (the project's decode job),
``udf`` (baseline b) or ``pipeline`` (the whole ``dblog run``, stage by stage). The spec
(JSON) names the master, the nights (``gen.ensure_night`` infos) and a work directory.
The job writes its result JSON to ``<spec>.result.json``: per format, the wall-clock
window (``time.time()``) of each measured phase, so that the parent can attribute the
memory samples it took to phases, and the counts.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def _source(info: dict) -> dict:
    import yaml

    src = yaml.safe_load((Path(info["root"]) / "sources.yaml").read_text())["sources"][0]
    src["catalog"] = json.loads(Path(src["catalog"]).read_text())
    return src


def _safe(text: str | None) -> str:
    """Spark reads ``[`` ``]`` in paths as glob patterns: keep them out of directory names."""
    return (text or "python").replace("[", "").replace("]", "").replace("*", "all")


def _data_root(work: Path, info: dict, tag: str) -> Path:
    """A fresh data root whose landing zone holds the cached night's archives (hard links,
    or copies across file systems: the stage refuses links that lead outside the data root)."""
    root = work / _safe(f"{info['format']}-{tag}")
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    _link_files(Path(info["root"]) / "landing", root / "landing")
    return root


def _link_files(src: Path, dest: Path) -> None:
    for f in sorted(src.rglob("*")):
        if f.is_file():
            target = dest / f.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(f, target)
            except OSError:
                shutil.copyfile(f, target)


def _spark(master: str):
    from dblog.spark import get_session

    return get_session(master, app="dblog-bench",
                       conf={"spark.sql.execution.pythonUDF.arrow.enabled": "false",
                             "spark.python.worker.reuse": "true"})


def _events_count(path: Path) -> dict:
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    t = ds.dataset(str(path), format="parquet").to_table(columns=["n_records", "kind"])
    return {"records": int(pc.sum(t.column("n_records")).as_py() or 0), "rows": t.num_rows,
            "changes": int(pc.sum(pc.equal(t.column("kind"), "change")).as_py() or 0)}


def _rows(path: Path) -> int:
    import pyarrow.dataset as ds

    return ds.dataset(str(path), format="parquet").count_rows()


def main(argv: list[str]) -> int:
    kind, spec_path = argv[0], Path(argv[argv.index("--spec") + 1])
    spec = json.loads(spec_path.read_text())
    sys.path.insert(0, spec["repo"])
    work = Path(spec["work"])
    master = spec.get("master")
    result: dict = {"kind": kind, "master": master, "pid": os.getpid(), "formats": {}}
    spark = None
    if kind != "plain":
        t0 = time.time()
        spark = _spark(master)
        spark.range(1).count()       # the JVM and the session are up before any timing
        result["spark_start"] = [t0, time.time()]
        from dblog.jvmcache import mapped_archive

        result["jvm_class_archive"] = mapped_archive(spark)
    for info in spec["nights"]:
        fmt = info["format"]
        res: dict = {"phases": {}}
        if kind == "plain":
            from bench import gen, plain

            t0 = time.time()
            res.update(plain.run(fmt, _source(info), gen.archives(info),
                                 work / f"{fmt}-plain" / "changes.parquet"))
            res["phases"]["decode"] = [t0, time.time()]
        elif kind == "udf":
            from bench import gen, udf

            out = work / f"{fmt}-udf-{_safe(master)}"
            paths = [str(p) for p in gen.archives(info)]
            t0 = time.time()
            udf.run(spark, fmt, _source(info), paths, str(out))
            res["phases"]["decode"] = [t0, time.time()]
            res["rows"] = _rows(out)
        elif kind == "decode":
            from dblog import pipeline

            root = _data_root(work, info, f"decode-{master}")
            cfg = str(Path(info["root"]) / "sources.yaml")
            run_dir = pipeline.stage_night(info["date"], cfg, str(root), None, "bench")
            t0 = time.time()
            pipeline.decode_night(spark, run_dir)
            res["phases"]["decode"] = [t0, time.time()]
            res.update(_events_count(run_dir / "events"))
        elif kind == "pipeline":
            res.update(_pipeline(spark, info, work, master))
        elif kind in ("multirun", "tables"):
            break
        result["formats"][fmt] = res
        spec_path.with_suffix(".result.json").write_text(json.dumps(result, indent=1))
    if kind == "multirun":
        result.update(_multirun(spark, spec["nights"], work, master))
        result["driver_memory"] = spark.conf.get("spark.driver.memory", "1g (Spark's default)")
        spec_path.with_suffix(".result.json").write_text(json.dumps(result, indent=1))
    elif kind == "tables":
        result["nights"] = [_tables(spark, info, work, master) for info in spec["nights"]]
        spec_path.with_suffix(".result.json").write_text(json.dumps(result, indent=1))
    if spark is not None:
        spark.stop()
    return 0


def _timed_run(names: dict, date: str, config: str, root: Path, master: str, spark):
    """``pipeline.run_night`` with the functions ``names`` (pipeline attribute -> phase)
    timed in place: (the run's result, phase -> [start, end], ``run`` for the whole)."""
    from dblog import pipeline

    phases: dict = {}

    def timed(name, fn):
        def wrapper(*a, **kw):
            t0 = time.time()
            try:
                return fn(*a, **kw)
            finally:
                phases[name] = [t0, time.time()]
        return wrapper

    originals = {n: getattr(pipeline, n) for n in names}
    try:
        for n, fn in originals.items():
            setattr(pipeline, n, timed(names[n], fn))
        t0 = time.time()
        r = pipeline.run_night(date, config, str(root), None, master, "bench", spark=spark)
        phases["run"] = [t0, time.time()]
    finally:
        for n, fn in originals.items():
            setattr(pipeline, n, fn)
    return r, phases


def _pipeline(spark, info: dict, work: Path, master: str) -> dict:
    """``dblog run`` (``pipeline.run_night``) with each stage function timed in place."""
    names = {"stage_night": "stage", "decode_night": "decode", "order_night": "order",
             "validate_night": "validate", "publish_night": "publish", "tidy_published": "tidy"}
    root = _data_root(work, info, f"run-{master}")
    cfg = str(Path(info["root"]) / "sources.yaml")
    r, phases = _timed_run(names, info["date"], cfg, root, master, spark)
    out = {"phases": phases, "published": r.published, "failures": r.failures,
           "summary": r.summary}
    try:
        out.update(_events_count(root / "staging" / "bench" / "events"))
    except Exception:  # noqa: BLE001 - counts are informative only
        pass
    return out


def _combined_root(work: Path, nights: list[dict], tag: str) -> tuple[Path, Path]:
    """A fresh data root holding every night's archives (hard links) and one sources.yaml
    with each night's source."""
    import yaml

    root = work / _safe(tag)
    if root.exists():
        shutil.rmtree(root)
    sources = []
    for info in nights:
        src = yaml.safe_load((Path(info["root"]) / "sources.yaml").read_text())["sources"][0]
        sources.append(src)
        land = Path(info["root"]) / "landing" / info["source"] / info["date"]
        target = root / "landing" / info["source"] / info["date"]
        target.mkdir(parents=True)
        for f in land.iterdir():
            try:
                os.link(f, target / f.name)
            except OSError:
                shutil.copyfile(f, target / f.name)
    config = root / "sources.yaml"
    config.write_text(yaml.safe_dump({"sources": sources}))
    return root, config


def _multirun(spark, nights: list[dict], work: Path, master: str) -> dict:
    """One ``dblog run`` of all the nights together, each stage timed in place (``order``
    also split into ``ordering``, ``tables`` and ``mirror``)."""
    names = {"stage_night": "stage", "decode_night": "decode", "order_stage": "ordering",
             "tables_stage": "tables", "mirror_stage": "mirror", "order_night": "order",
             "validate_night": "validate", "publish_night": "publish", "tidy_published": "tidy"}
    root, config = _combined_root(work, nights, "multirun")
    r, phases = _timed_run(names, nights[0]["date"], str(config), root, master, spark)
    out = {"phases": phases, "published": r.published, "failures": r.failures,
           "summary": r.summary}
    counts = _events_count(root / "staging" / "bench" / "events")
    out["records"] = counts["records"]
    out["changes"] = _rows(root / "staging" / "bench" / "changes")
    return out


def _tables(spark, info: dict, work: Path, master: str) -> dict:
    """Order one night, then time the typed-tables stage twice (cold, warm)."""
    from dblog import pipeline
    from dblog.ordering import order_stage
    from dblog.stage import load_manifest
    from dblog.tables import TABLES, tables_stage

    root = _data_root(work, info, f"tables-{info.get('tables')}")
    cfg = str(Path(info["root"]) / "sources.yaml")
    run_dir = pipeline.stage_night(info["date"], cfg, str(root), None, "bench")
    pipeline.decode_night(spark, run_dir)
    manifest = load_manifest(run_dir)
    order_stage(spark, manifest, run_dir)
    seconds = []
    for _ in range(2):
        t0 = time.time()
        written = tables_stage(spark, manifest, run_dir)
        seconds.append(time.time() - t0)
    files = len(list((run_dir / TABLES).rglob("*.parquet")))
    return {"seconds": seconds, "tables_written": written, "files": files,
            "changes": _rows(run_dir / "changes")}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
