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
from pathlib import Path

import pytest

from dblog import publish as P
from dblog.order import load_summary
from dblog.paths import DataRoot
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


def without_marker(files: dict) -> dict:
    return {k: v for k, v in files.items() if k != MARKER}


def after_publish(before: dict, run_dir: Path) -> dict:
    """published/ once night 2 is in: night 1's files plus the staged files of night 2."""
    want = without_marker(before)
    for dataset in ("changes", "transactions"):
        part = Path(dataset) / f"source={W.SOURCE}" / f"date={W.DATE2}"
        for rel, digest in W.tree(run_dir / part).items():
            want[str(part / rel)] = digest
    for rel, digest in W.tree(run_dir / "tables").items():
        want[str(Path("tables") / rel)] = digest
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


def test_publish_killed_at_every_step(staged):
    root, run_dir, _ = staged
    before = W.published_state(root)
    assert f"date={W.DATE1}" in "".join(before["files"])
    assert not any(f"date={W.DATE2}" in k for k in before["files"])
    want = after_publish(before["files"], run_dir)
    assert any(f"date={W.DATE2}" in k for k in want)

    for step in P.FAILPOINTS[:-1]:           # every step before the swap
        rc = publish_in_subprocess(run_dir, step)
        assert rc == -signal.SIGKILL, f"publish was not killed at {step}"
        assert W.published_state(root) == before, f"published/ changed by a publish killed at {step}"

    # killed right after the swap: readers already see the new night, complete
    assert publish_in_subprocess(run_dir, "swapped") == -signal.SIGKILL
    after_kill = W.published_state(root)
    assert after_kill["link"] != before["link"]
    assert without_marker(after_kill["files"]) == want

    # and the same run publishes again, cleaning up what the killed attempts left
    assert publish_in_subprocess(run_dir, None) == 0
    final = W.published_state(root)
    assert without_marker(final["files"]) == want
    marker = json.loads((root / "published" / MARKER).read_text())
    assert marker["run_id"] == run_dir.name and marker["date"] == W.DATE2
    versions = sorted(p.name for p in (root / ".published").iterdir() if p.name.startswith("v"))
    assert len(versions) <= P.KEEP_VERSIONS
    assert all((root / ".published" / v / MARKER).is_file() for v in versions), "half-built snapshot left"
    assert not list(root.glob(P.LINK_PREFIX + "*"))
    # quarantine/, audit/ and state/ hold night 2 as staged
    for dataset in ("audit",):
        part = Path(f"source={W.SOURCE}") / f"date={W.DATE2}"
        assert W.tree(root / dataset / part) == W.tree(run_dir / dataset / part)
    seq = json.loads((root / "state" / W.SOURCE / W.DATE2 / "seq.json").read_text())
    assert seq["last_commit_seq"] == load_summary(run_dir)[W.SOURCE]["last_commit_seq"]


def test_reader_sees_old_or_new_night_never_a_mix(staged):
    """A reader that resolves published/ once sees a complete snapshot, during publishes."""
    _, src_run, root = staged
    run_dir = root / "staging" / src_run.name        # its manifest names the other root
    before = W.published_state(root)
    assert not any(f"date={W.DATE2}" in k for k in before["files"])
    old, new = without_marker(before["files"]), after_publish(before["files"], run_dir)
    old_names, new_names = set(old), set(new)
    seen, bad, stop = [], [], threading.Event()

    def reader():
        while not stop.is_set():
            snap = Path(os.path.realpath(root / "published"))
            names = set()
            for dirpath, _dirs, files in os.walk(snap):
                names.update(str((Path(dirpath) / f).relative_to(snap)) for f in files)
            names.discard(MARKER)
            seen.append(len(names))
            if names not in (old_names, new_names):
                bad.append(sorted(names ^ new_names)[:5])

    t = threading.Thread(target=reader)
    t.start()
    try:
        manifest, summary = load_manifest(run_dir), load_summary(run_dir)
        for _ in range(P.KEEP_VERSIONS - 1):         # a rerun replaces what it published
            P.publish(DataRoot(root), manifest, run_dir, summary)
    finally:
        stop.set()
        t.join()
    assert len(seen) > 1 and not bad
    assert without_marker(W.published_state(root)["files"]) == new
