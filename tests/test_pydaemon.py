"""Spark's Python daemon with the decoders preloaded (dblog/pydaemon.py) and where dblog.spark
sets it (``daemon_settings``)."""

from __future__ import annotations

import logging
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from dblog import pydaemon
from dblog import spark as ds

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def plain_env(monkeypatch, tmp_path):
    """No Spark configuration around this process, and the workers' interpreter is this one."""
    for var in (ds.DAEMON_ENV, "PYSPARK_SUBMIT_ARGS", "SPARK_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    return tmp_path


def test_the_daemon_module_is_set_where_the_workers_can_import_it(plain_env):
    assert ds.daemon_settings("local[2]") == {"spark.python.daemon.module": "dblog.pydaemon"}
    assert ds.daemon_settings(None) == {"spark.python.daemon.module": "dblog.pydaemon"}
    assert ds.daemon_settings("spark://cluster:7077") == {"spark.python.daemon.module": "dblog.pydaemon"}


def test_a_module_the_workers_cannot_import_keeps_sparks_own_daemon(plain_env, monkeypatch, caplog):
    # Spark has no fallback: a daemon that does not start fails every Python task
    monkeypatch.setenv(ds.DAEMON_ENV, "dblog.no_such_daemon")
    with caplog.at_level(logging.WARNING, logger="dblog.spark"):
        assert ds.daemon_settings("local[2]") == {}
        assert ds.daemon_settings("spark://cluster:7077") == {}
    assert "cannot import dblog.no_such_daemon" in caplog.text
    # the workers' interpreter is asked, not this process: one that cannot run keeps Spark's
    monkeypatch.delenv(ds.DAEMON_ENV)
    monkeypatch.setenv("PYSPARK_PYTHON", str(plain_env / "no-python"))
    assert ds.daemon_settings("local[2]") == {}


def test_sparks_own_daemon_on_request_or_when_configured_elsewhere(plain_env, monkeypatch):
    monkeypatch.setenv(ds.DAEMON_ENV, "pyspark")
    assert ds.daemon_settings("local[2]") == {}
    monkeypatch.delenv(ds.DAEMON_ENV)
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--conf spark.python.daemon.module=x.y pyspark-shell")
    assert ds.daemon_settings("local[2]") == {}
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    (plain_env / "spark-defaults.conf").write_text("spark.python.daemon.module other.daemon\n")
    assert ds.daemon_settings("local[2]") == {}


def _start_daemon(tmp_path, extra: tuple[str, ...] = ()):
    """The daemon started as Spark starts it (``-m <module> pyspark.worker``, the secret in
    the environment), with ``extra`` modules added to its preload list."""
    code = ("import sys, dblog.pydaemon as d; d.PRELOAD = d.PRELOAD + tuple(sys.argv[2:]); "
            "del sys.argv[2:]; d.main()")
    env = dict(os.environ, PYTHON_WORKER_FACTORY_SECRET="s3cret", PYTHONUNBUFFERED="YES",
               PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path)]))
    return subprocess.Popen([sys.executable, "-c", code, "pyspark.worker", *extra], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_the_daemon_reports_its_port_even_when_a_preload_fails_or_prints(tmp_path):
    (tmp_path / "noisy_mod.py").write_text("import os\nprint('hello from an import')\n"
                                           "os.write(1, b'and from C')\n")
    proc = _start_daemon(tmp_path, ("noisy_mod", "no_such_module_xyz"))
    try:
        head = proc.stdout.read(4)          # what the JVM reads: the port, as a big-endian int
        assert len(head) == 4
        port = struct.unpack(">i", head)[0]
        assert 1 <= port <= 0xFFFF
        import socket

        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            pid = struct.unpack(">i", sock.recv(4))[0]      # a worker was forked for us
            assert pid > 0 and pid != proc.pid
        proc.stdin.close()                  # Spark stops the daemon by closing its stdin
        proc.wait(timeout=30)               # (pyspark's manager exits 1 either way)
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "could not preload no_such_module_xyz" in err
    assert "hello from an import" in err and "and from C" in err


def test_preload_loads_the_decoders_and_reports_failures_without_raising():
    import io

    out = io.StringIO()
    done = pydaemon.preload(("pyarrow", "no_such_module_xyz"), log=out)
    assert isinstance(done["pyarrow"], float)
    assert isinstance(done["no_such_module_xyz"], ImportError)
    assert isinstance(done["decoders (warm)"], float)
    assert "could not preload no_such_module_xyz" in out.getvalue()
    assert "decoders.rdb.decoder" in sys.modules and "decoders.informix.decoder" in sys.modules


@pytest.mark.spark
def test_spark_workers_are_forked_from_the_preloaded_daemon(spark):
    assert spark.sparkContext.getConf().get("spark.python.daemon.module") == "dblog.pydaemon"
    seen = spark.sparkContext.parallelize(range(2), 2).map(pydaemon.probe).collect()
    for got in seen:
        assert "dblog.pydaemon" in got["parent"], got
        # loaded before the task's function was unpickled (probe's module imports none of them)
        assert {"pyarrow", "pandas", "dblog.decode", "decoders.rdb.decoder",
                "decoders.informix.decoder"} <= set(got["loaded"]), got
        # no task re-reads the zip directories of the workers' path (CPython < 3.12)
        assert got["lazy_zip"] is (sys.version_info < (3, 12)), got
        # the allocator's options, set before pyarrow loaded (unless this environment set them)
        assert got["env"] == {k: os.environ.get(k, v) for k, v in pydaemon.ALLOCATOR_ENV.items()}
        # pyspark from the installed package the driver uses (same version), not Spark's zip
        import pyspark

        assert got["pyspark"] == pyspark.__file__ and ".zip" not in got["pyspark"], got


def _package(root: Path, name: str, version: str, zipped: str | None = None) -> str:
    """A package ``name`` whose version.py says ``version``: a folder under ``root``, or a zip
    named ``zipped``. Returns the path entry."""
    import zipfile

    text = f"__version__: str = '{version}'\n"
    if zipped is None:
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text("")
        (root / name / "version.py").write_text(text)
        return str(root)
    path = root / zipped
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}/__init__.py", "")
        z.writestr(f"{name}/version.py", text)
    return str(path)


def test_spark_zips_move_behind_installed_packages_of_the_same_version_only(tmp_path, monkeypatch):
    monkeypatch.setattr(pydaemon, "SHIPPED_ZIPS", (("zz_spk", "zz_spk.zip"), ("zz_p4", "zz_p4-*.zip")))
    site = tmp_path / "site"
    zips = tmp_path / "zips"
    zips.mkdir()
    spk_zip = _package(zips, "zz_spk", "4.1.3", "zz_spk.zip")
    p4_zip = _package(zips, "zz_p4", "0.10.9.9", "zz_p4-0.10.9.9-src.zip")
    spk_dir = _package(site, "zz_spk", "4.1.3")
    path = [str(tmp_path / "repo"), spk_zip, p4_zip, spk_dir]
    # pyspark's twin installed: its zip moves to the end; py4j's has no twin and stays
    assert pydaemon.prefer_installed(path) == [spk_zip]
    assert path == [str(tmp_path / "repo"), p4_zip, spk_dir, spk_zip]
    # another version installed: Spark's order is kept
    other = _package(tmp_path / "other", "zz_p4", "0.10.9.7")
    path = [p4_zip, other]
    assert pydaemon.prefer_installed(path) == [] and path == [p4_zip, other]
    # a zip without a readable version, or nothing installed: kept
    bad = tmp_path / "zips" / "zz_spk.zip"
    bad.write_bytes(b"not a zip")
    path = [str(bad), spk_dir]
    assert pydaemon.prefer_installed(path) == [] and path == [str(bad), spk_dir]
    assert pydaemon.prefer_installed([p4_zip]) == []



_ZIP_CHECK = r'''
import importlib, os, sys, zipfile, zipimport
from dblog import pydaemon

archive = sys.argv[1]
def write(modules):
    with zipfile.ZipFile(archive, "w") as z:
        for name, text in modules.items():
            z.writestr(name + ".py", text)
write({"zmod_a": "VALUE = 1\n", "zpkg/__init__": "", "zpkg/m1": "VALUE = 3\n"})
sys.path.insert(0, archive)
import zmod_a, zpkg.m1                   # two importers of the archive: its root and zpkg/

reads = []
real = zipimport._read_directory
zipimport._read_directory = lambda path: reads.append(path) or real(path)
importlib.invalidate_caches()
eager = len(reads)                       # CPython 3.11 re-reads the directory here
assert pydaemon.lazy_zip_invalidation() is (sys.version_info < (3, 12))
assert pydaemon.lazy_zip_invalidation() is False          # installed once
del reads[:]
for _ in range(3):
    importlib.invalidate_caches()
unchanged = len(reads)
# the archive rewritten (another size, a later time): read again, its new module imports
write({"zmod_a": "VALUE = 1\n", "zmod_b": "VALUE = 2\n", "zpkg/__init__": "",
       "zpkg/m1": "VALUE = 3\n", "zpkg/m2": "VALUE = 4\n"})
st = os.stat(archive)
os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
importlib.invalidate_caches()
changed = len(reads)
import zmod_b
import zpkg.m2        # its importer was not read again: it took the directory read just now
importlib.invalidate_caches()
print(eager, unchanged, changed, len(reads), zmod_a.VALUE, zmod_b.VALUE, zpkg.m2.VALUE)
'''


def test_zip_directories_are_read_again_only_when_their_archive_changed(tmp_path):
    """pyspark's worker calls ``importlib.invalidate_caches()`` per task; on CPython 3.11 every
    zip importer then re-reads its archive's directory (gh-103200): after
    ``lazy_zip_invalidation`` only a changed archive is read again, and its new contents
    import."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", _ZIP_CHECK, str(tmp_path / "mods.zip")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    eager, unchanged, changed, after, a, b, m2 = map(int, done.stdout.split())
    assert (a, b, m2) == (1, 2, 4)
    if sys.version_info < (3, 12):
        assert eager >= 1                # what the patch saves: one read per importer per task
        assert unchanged == 0 and changed == 1 and after == changed
