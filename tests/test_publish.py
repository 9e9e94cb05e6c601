"""Atomic publish: a publish killed at any step leaves ``published/`` as it was, the same
run can then be published, and a reader never sees a half-built snapshot.

Night 1 is published by ``dblog run``; night 2 is staged, decoded, ordered and validated
through the pipeline functions, then published in a subprocess that kills itself with
SIGKILL at a chosen step (``DBLOG_PUBLISH_FAILPOINT``, see dblog/publish.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dblog import datasets as D
from dblog import publish as P
from dblog.order import load_summary
from dblog.paths import DataRoot, previous_state
from dblog.stage import load_manifest
from tests import wap_nights as W

pytestmark = pytest.mark.spark

MARKER = P.PUBLISHED_MARKER


@pytest.fixture(scope="module")
def staged(spark, tmp_path_factory):
    """A data root with night 1 published and night 2 validated but not yet published."""
    from dblog import pipeline

    base = W.base_root(tmp_path_factory)
    assert base["rc"] == 0, base["out"]
    root = W.copy_root(tmp_path_factory, "publish")
    run_dir = pipeline.stage_night(W.DATE2, str(base["config"]), str(root))
    pipeline.decode_night(spark, run_dir)
    pipeline.order_night(spark, run_dir)
    assert pipeline.validate_night(spark, run_dir).success
    spare = tmp_path_factory.mktemp("publish_spare") / "data"
    shutil.copytree(root, spare, symlinks=True)        # for a second test, still unpublished
    return root, run_dir, spare


def data_files(files: dict) -> dict:
    """The dataset files of a published tree (state and the publish's own documents apart)."""
    return {k: v for k, v in files.items() if not k.startswith(("state/", "_"))}


def after_publish(before: dict, run_dir: Path) -> dict:
    """published/ once night 2 is in: night 1's files plus night 2's staged partitions of
    every registered dataset (read from the staging folder, not from the publish code)."""
    want = data_files(before)
    for ds in D.published():
        if ds.layout == D.NIGHT:
            parts = [Path(ds.name) / f"source={W.SOURCE}" / f"date={W.DATE2}"]
        else:
            parts = [p.relative_to(run_dir) for p in (run_dir / ds.name / W.SOURCE).glob(f"*/date={W.DATE2}")]
        for part in parts:
            for rel, digest in W.tree(run_dir / part).items():
                want[str(part / rel)] = digest
    return want


def publish_in_subprocess(run_dir: Path, failpoint: str | None) -> int:
    env = dict(os.environ)
    env.pop(P.FAILPOINT_ENV, None)
    if failpoint:
        env[P.FAILPOINT_ENV] = failpoint
    code = ("import sys; from pathlib import Path; from dblog.pipeline import publish_night; "
            "publish_night(Path(sys.argv[1]))")
    return subprocess.run([sys.executable, "-c", code, str(run_dir)], cwd=W.REPO, env=env,
                          timeout=300).returncode


def tidy_in_subprocess(run_dir: Path) -> int:
    code = ("import sys; from pathlib import Path; from dblog.pipeline import tidy_published; "
            "tidy_published(Path(sys.argv[1]))")
    return subprocess.run([sys.executable, "-c", code, str(run_dir)], cwd=W.REPO, timeout=300).returncode


def test_publish_killed_at_every_step(staged):
    root, run_dir, _ = staged
    before = W.published_state(root)
    assert f"date={W.DATE1}" in "".join(before["files"])
    assert not any(f"date={W.DATE2}" in k for k in before["files"])
    want = after_publish(before["files"], run_dir)
    assert any(k.startswith("audit/") and f"date={W.DATE2}" in k for k in want)

    for step in P.FAILPOINTS[:P.FAILPOINTS.index("swapped")]:      # every step before the swap
        rc = publish_in_subprocess(run_dir, step)
        assert rc == -signal.SIGKILL, f"publish was not killed at {step}"
        assert W.published_state(root) == before, f"published/ changed by a publish killed at {step}"

    # killed right after the swap: readers already see the new night, complete
    assert publish_in_subprocess(run_dir, "swapped") == -signal.SIGKILL
    after_kill = W.published_state(root)
    assert after_kill["link"] != before["link"]
    assert data_files(after_kill["files"]) == want

    # and the same run publishes again over what the killed attempts left; tidy (run by
    # dblog run and the DAG after the publish) clears the rest
    assert publish_in_subprocess(run_dir, None) == 0
    final = W.published_state(root)
    assert data_files(final["files"]) == want
    marker = json.loads((root / "published" / MARKER).read_text())
    assert marker["run_id"] == run_dir.name and marker["date"] == W.DATE2
    assert not (root / ".published" / P.BUILDING).exists(), "half-built version left"
    assert tidy_in_subprocess(run_dir) == 0
    assert W.published_state(root) == final
    versions = sorted(p.name for p in (root / ".published").iterdir() if P.VERSION_RE.match(p.name))
    assert len(versions) <= P.KEEP_VERSIONS
    assert not (root / ".published" / P.BUILDING).exists() and not (root / ".published" / P.TRASH).exists()
    assert (root / ".published" / P.NEXT).is_dir()
    assert not list(root.glob(P.LINK_PREFIX + "*"))
    # the state of night 2, published with it: held transactions and the last commit_seq
    state = root / "published" / "state" / W.SOURCE / W.DATE2
    seq = json.loads((state / "seq.json").read_text())
    assert seq["last_commit_seq"] == load_summary(run_dir)[W.SOURCE]["last_commit_seq"]
    assert W.tree(state / "held") == W.tree(run_dir / "state" / "held" / f"source={W.SOURCE}")
    # the next night continues from it
    assert previous_state(DataRoot(root), W.SOURCE, "2026-11-03") == DataRoot(root).state(W.SOURCE) / W.DATE2
    assert previous_state(DataRoot(root), W.SOURCE, W.DATE2) == DataRoot(root).state(W.SOURCE) / W.DATE1


def second_run(run_dir: Path) -> Path:
    """The same night staged again under another run id, with other file names (as a rerun's)."""
    other = run_dir.parent / (run_dir.name + "_again")
    shutil.copytree(run_dir, other)
    for p in list(other.rglob("part-*")):
        p.rename(p.with_name(p.name.replace("part-", "part-again-", 1)))
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["run_id"] = other.name
    (other / "manifest.json").write_text(json.dumps(manifest))
    return other


def test_readers_see_old_or_new_night_never_a_mix(spark, staged):
    """Spark, pyarrow and DuckDB read published/<dataset> by path, over and over, while the
    night is published and republished: every read returns the old night or the new one.
    (A read whose listing straddles a swap can find a file of the version just replaced
    gone: that read fails loudly and is retried; it never returns a mix.)"""
    import duckdb
    import pyarrow.dataset as pads

    _, src_run, root = staged
    run_dir = root / "staging" / src_run.name        # its manifest names the other root
    runs = [run_dir, second_run(run_dir)]
    path = root / "published" / "changes"

    def fingerprint(rows) -> tuple:
        rows = sorted(rows)
        return (len(rows), hash(tuple(rows)))

    def by_spark():
        return fingerprint((r["date"].isoformat() if hasattr(r["date"], "isoformat") else str(r["date"]),
                            r["commit_seq"], r["event_seq"])
                           for r in spark.read.parquet(str(path)).select("date", "commit_seq", "event_seq").collect())

    def by_pyarrow():
        t = pads.dataset(str(path), format="parquet", partitioning="hive").to_table(
            columns=["date", "commit_seq", "event_seq"])
        return fingerprint(zip(map(str, t.column("date").to_pylist()), t.column("commit_seq").to_pylist(),
                               t.column("event_seq").to_pylist()))

    def by_duckdb():
        con = duckdb.connect()
        try:
            return fingerprint(con.sql(
                f"select cast(date as varchar), commit_seq, event_seq from read_parquet("
                f"'{path}/**/*.parquet', hive_partitioning=true)").fetchall())
        finally:
            con.close()

    readers = {"spark": by_spark, "pyarrow": by_pyarrow, "duckdb": by_duckdb}
    before = W.published_state(root)["files"]
    old = {name: read() for name, read in readers.items()}
    assert len(set(old.values())) == 1, old
    seen = {name: [] for name in readers}
    retried = {name: 0 for name in readers}
    errors: list[str] = []
    stop = threading.Event()

    def loop(name, read):
        while not stop.is_set():
            try:
                seen[name].append(read())
            except Exception as exc:  # noqa: BLE001 - a file of the replaced version vanished
                if "No such file" in str(exc) or "FileNotFound" in str(exc) or "not found" in str(exc).lower():
                    retried[name] += 1
                else:
                    errors.append(f"{name}: {exc}")
                    return

    threads = [threading.Thread(target=loop, args=item) for item in readers.items()]
    for t in threads:
        t.start()
    def reads_since(counts):
        """Wait (at most 60 s) until every reader has finished a read after ``counts``: a
        slow reader (Spark: listing, then a job) whose every read straddles a swap of
        back-to-back publishes would otherwise never finish one while they run."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not errors and any(
                len(seen[name]) <= counts[name] for name in readers):
            time.sleep(0.05)

    try:
        for i in range(4):                            # night 2, then reruns of it (other runs)
            run = runs[i % 2]
            P.publish(DataRoot(root), load_manifest(run), run, load_summary(run))
            reads_since({name: len(seen[name]) for name in readers})
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors
    new = {name: read() for name, read in readers.items()}
    assert len(set(new.values())) == 1 and new != old
    for name in readers:
        assert seen[name], f"{name} never read during the publishes"
        assert set(seen[name]) <= {old[name], new[name]}, f"{name} saw a mix"
    assert data_files(W.published_state(root)["files"]) == after_publish(before, runs[1])
