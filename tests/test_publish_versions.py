"""The versioned publish without Spark: staged outputs of nights are made like a run leaves
them (``bench/publish.py``: small Parquet files in every registered dataset's layout), then
published in the ways a data root lives through: new nights, reruns that publish fewer
tables, a night filled in behind later ones, retention, and publishes killed at every step.
After each publish ``published/`` must equal a model built from the staged folders, older
versions must be unchanged, and the work must not grow with the nights already published.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench import publish as B
from dblog import datasets as D
from dblog import publish as P
from dblog.paths import DataRoot, previous_state

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("src_a", "src_b")
RETAINED = D.Dataset("retained_t", D.TABLE, "test dataset with a retention", retention="mirror_retention")


def files_under(path: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            p = Path(dirpath) / f
            out[p.relative_to(path).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def staged_partitions(run: Path, source: str, date: str) -> dict[str, dict[str, str]]:
    """{partition path in published/: its files} of every registered dataset, read from the
    staged folder (independently of the publish code)."""
    out = {}
    for ds in D.published():
        if ds.layout == D.NIGHT:
            parts = [run / ds.name / f"source={source}" / f"date={date}"]
        else:
            parts = sorted((run / ds.name / source).glob(f"*/date={date}"))
        for p in parts:
            if p.is_dir():
                out[p.relative_to(run).as_posix()] = files_under(p)
    return out


class Model:
    """What published/ must hold: per (source, date) the partitions of its latest run."""

    def __init__(self, retention: int | None = None):
        self.nights: dict[tuple[str, str], dict[str, dict[str, str]]] = {}
        self.retention = retention

    def publish(self, run: Path, sources=SOURCES) -> None:
        manifest = json.loads((run / "manifest.json").read_text())
        for s in sources:
            self.nights[(s, manifest["date"])] = staged_partitions(run, s, manifest["date"])

    def files(self) -> dict[str, str]:
        out = {}
        retained = {ds.name for ds in D.published() if ds.retention is not None}
        for (s, d), parts in self.nights.items():
            for rel, files in parts.items():
                name = rel.split("/", 1)[0]
                if name in retained and self.retention is not None:
                    with_it = sorted(dd for (ss, dd), pp in self.nights.items() if ss == s
                                     and any(r.startswith(name + "/") for r in pp))
                    if d not in with_it[-self.retention:]:
                        continue
                for f, digest in files.items():
                    out[f"{rel}/{f}"] = digest
        return out


def published_files(root: Path) -> dict[str, str]:
    """Every data file a reader of published/ sees (state and the publish's own documents apart)."""
    top = Path(os.path.realpath(root / "published"))
    return {k: v for k, v in files_under(top).items()
            if not k.startswith(("state/", "_"))}


def whole_state(root: Path) -> dict:
    link = root / "published"
    return {"link": os.readlink(link) if link.is_symlink() else None,
            "files": files_under(Path(os.path.realpath(link))) if link.exists() else {}}


def check_ring(root: Path) -> None:
    """After a publish and its tidy: the versions readers may hold, ``next`` caught up with
    the current version, nothing else (no building, no trash, no stray link)."""
    names = sorted(p.name for p in (root / ".published").iterdir() if p.is_dir() and p.name != "log")
    assert P.BUILDING not in names, "a finished publish and tidy left a building folder"
    assert P.TRASH not in names, "tidy left removed paths in the trash"
    versions = [n for n in names if n != P.NEXT]
    assert all(P.VERSION_RE.match(n) for n in versions), names
    assert len(versions) <= P.KEEP_VERSIONS
    assert not list(root.glob(P.LINK_PREFIX + "*"))
    assert not (root / "published" / P.BUILDING_FILE).exists()
    current = Path(os.path.realpath(root / "published"))
    assert P.NEXT in names, "tidy did not prepare the next version"
    intent = json.loads((root / ".published" / P.NEXT / P.BUILDING_FILE).read_text())
    assert intent == {"base": int(current.name[1:]), "paths": []}
    # next holds exactly what the current version holds (the publish's own documents apart)
    def data(files):
        return {k: v for k, v in files.items() if k not in (P.BUILDING_FILE, P.PUBLISHED_MARKER)}
    assert data(files_under(root / ".published" / P.NEXT)) == data(files_under(current))


@pytest.fixture()
def template(tmp_path):
    return B._template(tmp_path)


@pytest.fixture()
def retained(monkeypatch):
    monkeypatch.setitem(D.REGISTRY, RETAINED.name, RETAINED)


def publish(root: Path, run: Path, tidy: bool = True) -> Path:
    """Publish the run, then (as ``dblog run`` and the DAG do) tidy."""
    B.publish_run(root, run)
    if tidy:
        B.tidy_run(root)
    return Path(os.path.realpath(root / "published"))


@pytest.fixture(params=["syncfs", "fsync"])
def sync_mode(request, monkeypatch):
    """Both ways of making a version durable: one syncfs (Linux) and fsync per path."""
    if request.param == "fsync":
        monkeypatch.setenv("DBLOG_PUBLISH_SYNC", "fsync")
    else:
        monkeypatch.delenv("DBLOG_PUBLISH_SYNC", raising=False)
        assert P._syncfs(Path(".")) is True, "this platform has no syncfs"
    return request.param


def test_nights_reruns_gaps_and_retention(tmp_path, template, retained, sync_mode):
    root = tmp_path / "data"
    model = Model(retention=2)
    opts = {"mirror_retention": 2}
    snapshots: dict[str, dict] = {}

    def step(n: int, tables: int = 4, run_id: str | None = None) -> Path:
        run = B.stage_night(root, n, tables, template, sources=SOURCES, run_id=run_id, options=opts)
        version = publish(root, run)
        model.publish(run)
        assert published_files(root) == model.files(), f"night {n} ({run.name})"
        check_ring(root)
        snapshots[version.name] = whole_state(root)["files"]
        for v in (root / ".published").iterdir():     # older versions: as they were published
            if P.VERSION_RE.match(v.name) and v.name in snapshots:
                assert files_under(v) == snapshots[v.name], f"{v.name} changed after it was replaced"
        return run

    for n in (1, 2, 3, 5):
        step(n)
    d = B.night_date
    r = DataRoot(root)
    # a night after the latest continues from the latest; a new night behind it, from the one before
    assert previous_state(r, "src_a", d(6)) == r.state("src_a") / d(5)
    assert previous_state(r, "src_a", d(4)) == r.state("src_a") / d(3)
    # a rerun that publishes fewer tables: the tables it no longer has are gone
    step(2, tables=2, run_id="rerun_2")
    assert not any(k.startswith("tables/src_a/BENCH.T0003/date=" + d(2)) for k in published_files(root))
    # night 4 filled in behind night 5; night 5 still reads what its first run read (night 3)
    step(4)
    assert previous_state(r, "src_a", d(4)) == r.state("src_a") / d(3)
    assert previous_state(r, "src_a", d(5)) == r.state("src_a") / d(3)
    assert previous_state(r, "src_a", d(6)) == r.state("src_a") / d(5)
    step(6)
    assert previous_state(r, "src_a", d(7)) == r.state("src_a") / d(6)
    assert previous_state(r, "src_b", d(1)) is None
    # retention: only the last 2 nights of retained_t, per source
    kept = {k.split("/")[3] for k in published_files(root) if k.startswith("retained_t/src_a/")}
    assert kept == {f"date={d(5)}", f"date={d(6)}"}
    # the state of every night, with its own seq.json and held/carry
    for n in range(1, 7):
        seq = json.loads((r.state("src_b") / d(n) / "seq.json").read_text())
        assert seq["last_commit_seq"] == 100 * n
        assert list((r.state("src_b") / d(n) / "held").glob("*.parquet"))


def test_work_does_not_grow_with_the_nights_published(tmp_path, template, monkeypatch):
    """Count the files a publish links and the directories it lists, and those of the tidy
    after it: the same after 4 and after 24 nights. A publish after a tidy touches the paths
    of its own night; the tidy catches ``next`` up over at most KEEP_VERSIONS nights."""
    root = tmp_path / "data"
    counts: dict[int, tuple[int, int]] = {}
    tidy_counts: dict[int, tuple[int, int]] = {}
    links, walks = [0], [0]
    real_link, real_walk = P._link, os.walk

    def counting_link(src, dst):
        links[0] += 1
        real_link(src, dst)

    def counting_walk(top, *a, **k):
        for item in real_walk(top, *a, **k):
            walks[0] += 1
            yield item

    monkeypatch.setattr(P, "_link", counting_link)
    monkeypatch.setattr(P.os, "walk", counting_walk)
    for n in range(1, 25):
        links[0] = walks[0] = 0
        B.publish_run(root, B.stage_night(root, n, 10, template))
        counts[n] = (links[0], walks[0])
        links[0] = walks[0] = 0
        B.tidy_run(root)
        tidy_counts[n] = (links[0], walks[0])
    # every publish links its night's data files and state (held/carry), nothing else
    assert counts[1] == counts[2] == counts[4] == counts[24], counts
    assert tidy_counts[4] == tidy_counts[24], tidy_counts
    # the tidy re-links, into the oldest version no reader holds, the files of the
    # KEEP_VERSIONS publishes it missed, and their state documents (seq.json, night.json)
    assert tidy_counts[24][0] <= P.KEEP_VERSIONS * (counts[1][0] + 2)


def _publish_code(failpoint: str | None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop(P.FAILPOINT_ENV, None)
    if failpoint:
        env[P.FAILPOINT_ENV] = failpoint
    return env


# the subprocess registers what this process registered (e.g. the test's retained dataset)
REGISTER = ("from dblog import datasets as D; import json; "
            "[D.REGISTRY.setdefault(d['name'], D.Dataset(**d)) for d in json.loads(sys.argv[-1])]; ")


def _registered() -> str:
    return json.dumps([{"name": d.name, "layout": d.layout, "description": d.description,
                        "retention": d.retention} for d in D.published()])


def publish_in_subprocess(root: Path, run: Path, failpoint: str | None) -> int:
    code = ("import sys; from pathlib import Path; from bench.publish import publish_run; " + REGISTER
            + "publish_run(Path(sys.argv[1]), Path(sys.argv[2]))")
    return subprocess.run([sys.executable, "-c", code, str(root), str(run), _registered()], cwd=REPO,
                          env=_publish_code(failpoint), timeout=120).returncode


def tidy_in_subprocess(root: Path, failpoint: str | None) -> int:
    code = ("import sys; from pathlib import Path; from bench.publish import tidy_run; "
            "tidy_run(Path(sys.argv[1]))")
    return subprocess.run([sys.executable, "-c", code, str(root)], cwd=REPO,
                          env=_publish_code(failpoint), timeout=120).returncode


@pytest.mark.parametrize("tidied", [True, False], ids=["from_next", "without_tidy"])
def test_killed_at_every_step_then_another_run_publishes(tmp_path, template, tidied):
    """Killed at every step, both when the publish starts from the ``next`` that tidy
    prepared and when no tidy ran (it builds in the oldest version and catches it up)."""
    root = tmp_path / "data"
    model = Model()
    for n in (1, 2, 3, 4):                              # the ring is full: versions are reused
        run = B.stage_night(root, n, 4, template, sources=SOURCES)
        publish(root, run, tidy=tidied or n < 3)
        model.publish(run)
    assert (root / ".published" / P.NEXT).is_dir() == tidied
    before = whole_state(root)
    killed = B.stage_night(root, 5, 6, template, sources=SOURCES, run_id="killed")
    for step in P.FAILPOINTS[:P.FAILPOINTS.index("swapped")]:
        assert publish_in_subprocess(root, killed, step) == -signal.SIGKILL, step
        assert whole_state(root) == before, f"published/ changed by a publish killed at {step}"
    # another run of the same night publishes over what the killed attempts left
    other = B.stage_night(root, 5, 2, template, sources=SOURCES, run_id="other")
    assert publish_in_subprocess(root, other, None) == 0
    model.publish(other)
    assert published_files(root) == model.files()
    assert tidy_in_subprocess(root, None) == 0
    check_ring(root)
    # killed right after the swap: the new version is whole; the same run publishes again
    night6 = B.stage_night(root, 6, 3, template, sources=SOURCES)
    assert publish_in_subprocess(root, night6, "swapped") == -signal.SIGKILL
    model.publish(night6)
    assert published_files(root) == model.files()
    assert publish_in_subprocess(root, night6, None) == 0
    assert published_files(root) == model.files()
    assert tidy_in_subprocess(root, None) == 0
    check_ring(root)
    marker = json.loads((root / "published" / P.PUBLISHED_MARKER).read_text())
    assert marker["run_id"] == night6.name and marker["sources"] == list(SOURCES)


def test_readers_find_every_dataset_by_path(tmp_path, template):
    """pyarrow and DuckDB read published/<dataset> by path with hive partitions."""
    import duckdb
    import pyarrow.dataset as pads

    root = tmp_path / "data"
    for n in (1, 2):
        publish(root, B.stage_night(root, n, 3, template, sources=SOURCES))
    for ds in D.published():
        path = root / "published" / ds.name
        if ds.layout == D.NIGHT:
            t = pads.dataset(str(path), format="parquet", partitioning="hive").to_table()
            assert sorted(set(zip(t.column("source").to_pylist(), t.column("date").to_pylist()))) == \
                sorted((s, B.night_date(n)) for s in SOURCES for n in (1, 2))
            got = duckdb.sql(f"select source, cast(date as varchar) d, count(*) n from read_parquet("
                             f"'{path}/**/*.parquet', hive_partitioning=true) group by all order by all"
                             ).fetchall()
            assert got == [(s, B.night_date(n), 20) for s in SOURCES for n in (1, 2)]
        else:
            table = path / "src_a" / "BENCH.T0001"
            t = pads.dataset(str(table), format="parquet", partitioning="hive").to_table()
            assert t.num_rows == 40
            got = duckdb.sql(f"select count(*) from read_parquet('{table}/**/*.parquet', "
                             f"hive_partitioning=true)").fetchone()
            assert got == (40,)


def test_a_data_root_of_the_earlier_layout_moves_under_published(tmp_path, template):
    """Earlier layout: published -> .published/<timestamp snapshot>/ with changes/...;
    quarantine/, audit/ and state/ at the top. The first publish takes all of it in."""
    root = tmp_path / "data"
    old = root / ".published" / "v20261101T000000000000_abcdef"
    d1, d2 = B.night_date(1), B.night_date(2)
    for rel in (f"changes/source=src_a/date={d1}", f"tables/src_a/BENCH.T0000/date={d1}",
                f"audit/source=src_a/date={d1}"):
        base = old if not rel.startswith("audit") else root
        (base / rel).mkdir(parents=True)
        (base / rel / "part-old.parquet").write_bytes(template.read_bytes())
    (old / "_PUBLISHED.json").write_text("{}")
    (root / "state" / "src_a" / d1 / "held").mkdir(parents=True)
    (root / "state" / "src_a" / d1 / "seq.json").write_text(json.dumps({"last_commit_seq": 100}))
    (root / "published").symlink_to(os.path.relpath(old, root))
    r = DataRoot(root)
    run = B.stage_night(root, 2, 1, template, sources=("src_a",))
    publish(root, run)
    files = published_files(root)
    assert f"changes/source=src_a/date={d1}/part-old.parquet" in files
    assert f"audit/source=src_a/date={d1}/part-old.parquet" in files
    assert f"tables/src_a/BENCH.T0000/date={d2}/part-00000-{run.name}.c000.snappy.parquet" in files
    assert not (root / "audit").exists() and not (root / "state").exists()
    assert previous_state(r, "src_a", d2) == r.state("src_a") / d1
    assert previous_state(r, "src_a", B.night_date(3)) == r.state("src_a") / d2
    assert old.is_dir()                # readers that resolved it keep it until the next publish
    # and the next publishes go on from there
    publish(root, B.stage_night(root, 3, 1, template, sources=("src_a",)))
    assert f"changes/source=src_a/date={d1}/part-old.parquet" in published_files(root)
    assert not old.exists()
    check_ring(root)


def held_versions(root: Path) -> dict[str, dict[str, str]]:
    """{name: files} of the versions a reader may still hold: the current one and the
    KEEP_VERSIONS - 1 before it."""
    current = int(Path(os.path.realpath(root / "published")).name[1:])
    out = {}
    for n in range(max(1, current - P.KEEP_VERSIONS + 1), current + 1):
        v = root / ".published" / P.version_name(n)
        assert v.is_dir(), f"{v.name} is gone while a reader may hold it"
        out[v.name] = files_under(v)
    return out


def test_tidy_killed_at_every_step_then_tidy_or_publish_finishes(tmp_path, template, retained):
    """Kill the tidy at each of its steps (after a publish that drops a night past the
    retention, so that there is a trash to delete and a version to catch up): published/
    and every version a reader may hold stay as they were; then, in turn, the next tidy
    or the next publish (without a tidy before it) finishes the job."""
    root = tmp_path / "data"
    model = Model(retention=2)
    opts = {"mirror_retention": 2}

    def stage(n: int):
        return B.stage_night(root, n, 3, template, sources=SOURCES, options=opts)

    n = 0
    for n in range(1, 6):
        run = stage(n)
        publish(root, run)
        model.publish(run)
    for i, step in enumerate(P.TIDY_FAILPOINTS):
        n += 1
        run = stage(n)
        publish(root, run, tidy=False)
        model.publish(run)
        assert (root / ".published" / P.TRASH).is_dir(), "the publish deleted what it took out"
        before, held = whole_state(root), held_versions(root)
        assert tidy_in_subprocess(root, step) == -signal.SIGKILL, f"tidy was not killed at {step}"
        assert whole_state(root) == before, f"published/ changed by a tidy killed at {step}"
        assert held_versions(root) == held, f"a version a reader may hold changed (tidy killed at {step})"
        assert published_files(root) == model.files()
        if i % 2 == 0:                                 # the next tidy finishes it
            assert tidy_in_subprocess(root, None) == 0
            assert whole_state(root) == before and held_versions(root) == held
        else:                                          # the next publish, then its tidy
            n += 1
            run = stage(n)
            assert publish_in_subprocess(root, run, None) == 0
            model.publish(run)
            assert published_files(root) == model.files(), f"after a tidy killed at {step}"
            assert tidy_in_subprocess(root, None) == 0
        check_ring(root)
        assert published_files(root) == model.files()


def test_tidy_is_idempotent_and_keeps_disk_bounded(tmp_path, template, retained):
    """A publish renames what leaves the version into the trash and deletes nothing; tidy
    deletes it. With a tidy after every publish the files kept of a dataset with a
    retention stay constant once the window and the ring are full; a second tidy changes nothing;
    without tidies the trash keeps what the publishes removed, and one tidy clears it."""
    root = tmp_path / "data"
    opts = {"mirror_retention": 2}
    model = Model(retention=2)

    def entries() -> int:
        """Files on disk of the dataset with a retention (distinct inodes: versions share
        them as hard links), anywhere under .published/ (versions, next, trash)."""
        inodes = set()
        for dirpath, _dirs, files in os.walk(root / ".published"):
            if "/retained_t/" in dirpath + "/" or "/" + P.TRASH + "/" in dirpath + "/":
                inodes.update(os.stat(Path(dirpath) / f).st_ino for f in files)
        return len(inodes)

    sizes = {}
    for n in range(1, 17):
        run = B.stage_night(root, n, 3, template, sources=SOURCES, options=opts)
        publish(root, run, tidy=False)
        model.publish(run)
        if n > 2:                                # night n - 2 left the retention window
            gone = f"retained_t/src_a/BENCH.T0000/date={B.night_date(n - 2)}"
            trashed = [p for p in (root / ".published" / P.TRASH).rglob("*.parquet")]
            assert trashed, "the publish deleted what left the retention window"
            assert not (root / "published" / gone).exists()
        B.tidy_run(root)
        check_ring(root)
        again = whole_state(root), files_under(root / ".published")
        assert B.tidy_run(root)[1] == {"next_from": None, "dirs_touched": 0, "trash_removed": 0,
                                       "logs_removed": 0}
        assert (whole_state(root), files_under(root / ".published")) == again
        sizes[n] = entries()
        # tidy freed the files of the nights past the retention (no other link to them)
        assert published_files(root) == model.files()
    assert sizes[8] == sizes[16], sizes
    for n in range(17, 23):                       # no tidy: the trash keeps what was removed
        run = B.stage_night(root, n, 3, template, sources=SOURCES, options=opts)
        publish(root, run, tidy=False)
        model.publish(run)
        assert published_files(root) == model.files()
    assert entries() > sizes[16]
    assert len([p for p in (root / ".published").iterdir() if P.VERSION_RE.match(p.name)]) \
        <= P.KEEP_VERSIONS + 1
    from dblog.cli import main

    assert main(["tidy", "--data-root", str(root)]) == 0       # dblog tidy
    check_ring(root)
    assert entries() == sizes[16]


def test_readers_during_tidy_see_the_published_version(tmp_path, template, retained):
    """pyarrow and DuckDB read published/<dataset> by path, and the older versions a reader
    may hold, over and over while tidy runs: every read returns exactly what was published,
    and no read fails (tidy never touches a version a reader may hold)."""
    import threading

    import duckdb
    import pyarrow.dataset as pads

    root = tmp_path / "data"
    opts = {"mirror_retention": 2}
    for n in range(1, 5):
        publish(root, B.stage_night(root, n, 20, template, sources=SOURCES, options=opts))

    def by_pyarrow(path: Path):
        t = pads.dataset(str(path), format="parquet", partitioning="hive").to_table()
        return t.num_rows, tuple(sorted(set(map(str, t.column("date").to_pylist()))))

    def by_duckdb(path: Path):
        con = duckdb.connect()
        try:
            return con.sql(f"select count(*), count(distinct filename) from read_parquet("
                           f"'{path}/**/*.parquet', filename=true)").fetchone()
        finally:
            con.close()

    for n in range(5, 8):
        publish(root, B.stage_night(root, n, 20, template, sources=SOURCES, options=opts), tidy=False)
        held = held_versions(root)
        paths = [root / "published" / "changes", root / "published" / "retained_t"] + \
            [root / ".published" / v / "retained_t" for v in held]
        want = {(r.__name__, p): r(p) for r in (by_pyarrow, by_duckdb) for p in paths}
        seen: list[tuple] = []
        errors: list[str] = []
        stop = threading.Event()

        def loop(read, path):
            while not stop.is_set():
                try:
                    seen.append(((read.__name__, path), read(path)))
                except Exception as exc:  # noqa: BLE001 - no read may fail during a tidy
                    errors.append(f"{read.__name__} {path}: {exc}")
                    return

        threads = [threading.Thread(target=loop, args=(r, p)) for r in (by_pyarrow, by_duckdb)
                   for p in paths]
        for t in threads:
            t.start()
        try:
            for _ in range(3):                   # the tidy, and tidies with nothing left to do
                B.tidy_run(root)
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert not errors, errors
        assert seen and all(got == want[key] for key, got in seen)
        assert held_versions(root) == held
        check_ring(root)
