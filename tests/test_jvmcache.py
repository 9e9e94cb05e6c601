"""The Spark JVM's class archive (dblog/jvmcache.py): its name, its checks, its build, and the
JVMs that map it (a local session, the DAG's spark-submit)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dblog import jvmcache as jc
from dblog import spark as ds

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def fake_install(monkeypatch, tmp_path):
    """A Java runtime and a Spark jars directory of our own, and an empty archive directory."""
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_bytes(b"#!/bin/sh\n")
    spark_home = tmp_path / "spark"
    (spark_home / "jars").mkdir(parents=True)
    for name in ("spark-core.jar", "spark-sql.jar"):
        (spark_home / "jars" / name).write_bytes(b"PK" + name.encode())
    (spark_home / "bin").mkdir()
    (spark_home / "bin" / "spark-submit").write_text("")
    cache = tmp_path / "cache"
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    monkeypatch.setenv("SPARK_HOME", str(spark_home))
    monkeypatch.setenv(jc.ENV, str(cache))
    return {"java": java_home / "bin" / "java", "jars": spark_home / "jars", "cache": cache}


def write_archive(path: Path, size: int = 4096, magic: int = jc.MAGIC) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<I", magic) + bytes(size - 4))
    return path


def named(pattern: Path, size: int) -> Path:
    return pattern.with_name(pattern.name.replace("*", str(size)))


def test_the_archive_is_keyed_by_the_runtime_and_the_jars(fake_install):
    key = jc.archive_key()
    assert key and jc.archive_path() == fake_install["cache"] / f"spark-{key}.*.jsa"
    jar = fake_install["jars"] / "spark-sql.jar"
    jar.write_bytes(b"PK another build")
    assert jc.archive_key() != key                      # another Spark install: another archive
    key2 = jc.archive_key()
    os.utime(fake_install["java"], ns=(1, 1))
    assert jc.archive_key() not in (key, key2)          # another runtime too


def test_off_and_nothing_to_key_mean_no_archive(fake_install, monkeypatch):
    monkeypatch.setenv(jc.ENV, "off")
    assert jc.cache_dir() is None and jc.archive_path() is None and jc.java_options() == []
    assert jc.build()["status"] == "off"
    monkeypatch.setenv(jc.ENV, str(fake_install["cache"]))
    monkeypatch.setenv("JAVA_HOME", str(fake_install["cache"] / "no-jdk"))
    assert jc.archive_path() is None and jc.java_options() == []


def test_only_a_whole_archive_is_mapped(fake_install):
    pattern = jc.archive_path()
    assert jc.find_archive() is None and jc.java_options() == []
    short = write_archive(named(pattern, 8192), size=4096)      # shorter than its name says
    other = write_archive(named(pattern, 4096), magic=0xCAFEBABE)   # not a class archive
    assert not jc.is_archive(short) and not jc.is_archive(other)
    assert jc.find_archive() is None and jc.java_options() == []
    whole = write_archive(named(pattern, 12288), size=12288)
    assert jc.is_archive(whole) and jc.find_archive() == whole
    assert jc.java_options() == ["-XX:+VerifySharedSpaces", f"-XX:SharedArchiveFile={whole}"]
    assert jc.build()["status"] == "exists"


def dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def test_one_builder_at_a_time_and_a_dead_ones_lock_is_taken_over(tmp_path):
    lock = tmp_path / "spark-k.lock"
    assert jc._lock(lock) and lock.read_text() == str(os.getpid())
    assert not jc._lock(lock)                           # held by a live process (this one)
    lock.write_text("")                                 # being taken: its pid not written yet
    assert not jc._lock(lock)
    os.utime(lock, (1, 1))                              # ... and never written: a dead taker's
    assert jc._lock(lock) and lock.read_text() == str(os.getpid())
    lock.write_text(str(dead_pid()))
    assert jc._lock(lock) and lock.read_text() == str(os.getpid())


def test_prune_keeps_the_newest_archives_and_drops_dead_builders_files(tmp_path):
    def archive(name, age):
        p = write_archive(tmp_path / name)
        os.utime(p, (1_000_000 - age, 1_000_000 - age))
        return p

    keep = archive("spark-a.4096.jsa", 0)
    earlier_a = archive("spark-a.999.jsa", 5)           # an earlier build of the same key
    others = [archive(f"spark-{k}.4096.jsa", age) for k, age in (("b", 1), ("c", 2), ("d", 3))]
    dead_tmp = write_archive(tmp_path / f"spark-a.{dead_pid()}.tmp")
    live_tmp = write_archive(tmp_path / f"spark-a.{os.getpid()}.tmp")
    removed = jc._prune(tmp_path, keep)
    assert set(removed) == {earlier_a, others[2], dead_tmp}
    assert {p.name for p in tmp_path.iterdir()} == {keep.name, others[0].name, others[1].name,
                                                   live_tmp.name}


@pytest.fixture
def own_jvm(monkeypatch, tmp_path):
    monkeypatch.setattr(ds, "jvm_running", lambda: False)
    for var in ("DBLOG_JIT", "PYSPARK_SUBMIT_ARGS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))


def test_a_local_jvm_we_start_maps_the_archive_beside_the_jit(fake_install, own_jvm, monkeypatch):
    whole = write_archive(named(jc.archive_path(), 4096))
    small = ds.java_settings("local[2]", 1000)["spark.driver.extraJavaOptions"]
    assert small == f"{ds.SMALL_NIGHT_JIT} -XX:+VerifySharedSpaces -XX:SharedArchiveFile={whole}"
    assert ds.java_settings("local[2]", None) == {
        "spark.driver.extraJavaOptions": f"-XX:+VerifySharedSpaces -XX:SharedArchiveFile={whole}"}
    assert ds.java_settings("spark://cluster:7077", 1000) == {}
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-java-options -Dx=1 pyspark-shell")
    assert ds.java_settings("local[2]", 1000) == {}       # configured elsewhere: left alone
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    monkeypatch.setenv(jc.ENV, "off")
    assert ds.java_settings("local[2]", 1000) == {"spark.driver.extraJavaOptions": ds.SMALL_NIGHT_JIT}


def test_the_dags_spark_submit_maps_it_on_a_local_master_only(fake_install, monkeypatch):
    from dblog import airflow_tasks as at

    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)
    assert "SPARK_SUBMIT_OPTS" not in at.spark_env("local[2]")       # no archive yet
    whole = write_archive(named(jc.archive_path(), 4096))
    assert at.spark_env("local[2]")["SPARK_SUBMIT_OPTS"] == \
        f"-XX:+VerifySharedSpaces -XX:SharedArchiveFile={whole}"
    assert "SPARK_SUBMIT_OPTS" not in at.spark_env("spark://cluster:7077")
    assert "SPARK_SUBMIT_OPTS" not in at.spark_env(None)
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Dkeep=1")
    assert at.spark_env("local[2]")["SPARK_SUBMIT_OPTS"] == \
        f"-Dkeep=1 -XX:+VerifySharedSpaces -XX:SharedArchiveFile={whole}"
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Xshare:off")
    assert "SPARK_SUBMIT_OPTS" not in at.spark_env("local[2]")       # the user's choice stands


@pytest.mark.spark
def test_no_build_beside_a_running_jvm(spark, tmp_path, monkeypatch):
    monkeypatch.setenv(jc.ENV, str(tmp_path))
    with pytest.raises(jc.BuildError, match="already runs"):
        jc.build()
    assert list(tmp_path.iterdir()) == []


BUILD = textwrap.dedent("""
    import json, sys
    from dblog import jvmcache as jc

    def workload(spark, workdir, transactions, say):
        spark.range(0, 20000).selectExpr("id % 7 AS k").groupBy("k").count() \\
            .write.parquet(str(workdir / "out"))
        if sys.argv[1:] == ["fail"]:
            raise RuntimeError("the sample night failed")
    try:
        print(json.dumps(jc.build(workload=workload, say=lambda *_: None)))
    except RuntimeError as exc:
        print(json.dumps({"status": "failed", "error": str(exc)}))
""")

USE = textwrap.dedent("""
    import json
    from dblog import jvmcache as jc
    from dblog.spark import get_session

    spark = get_session("local[1]", night_bytes=1000)
    n = spark.range(0, 1000).selectExpr("sum(id)").first()[0]
    print(json.dumps({"sum": n, "mapped": jc.mapped_archive(spark)}))
""")


def run_py(code: str, env: dict, *args: str) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    import json

    # HotSpot's warnings go to its standard output, pyspark's and Spark's to the error output
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stdout + done.stderr


@pytest.mark.spark
def test_build_then_map_and_a_damaged_archive_is_not_used(tmp_path):
    """A real JVM writes the archive as it exits; the next JVM maps it; a damaged copy costs
    a warning (HotSpot's checksums) or is not offered at all (too short), never a failed start."""
    env = {**os.environ, jc.ENV: str(tmp_path), "PYTHONPATH": str(REPO)}
    for var in ("PYSPARK_SUBMIT_ARGS", "SPARK_SUBMIT_OPTS", "PYSPARK_GATEWAY_PORT"):
        env.pop(var, None)
    failed, _ = run_py(BUILD, env, "fail")           # the workload fails: nothing is left behind
    assert failed == {"status": "failed", "error": "the sample night failed"}
    assert list(tmp_path.iterdir()) == []
    built, _ = run_py(BUILD, env)
    path = Path(built["path"])
    assert built["status"] == "built" and path.parent == tmp_path and jc.is_archive(path)
    assert path.name.split(".")[1] == str(path.stat().st_size)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]     # no lock, no temporary

    used, _ = run_py(USE, env)
    assert used == {"sum": 499500, "mapped": str(path)}

    data = bytearray(path.read_bytes())
    for i in range(len(data) // 3, len(data), len(data) // 50):
        data[i] ^= 0xFF                                  # damaged inside, whole length
    path.chmod(0o644)
    path.write_bytes(bytes(data))
    used, out = run_py(USE, env)
    assert used == {"sum": 499500, "mapped": None} and "Unable to use shared archive" in out

    path.write_bytes(bytes(data[: len(data) // 2]))      # cut short: not offered to the JVM
    assert not jc.is_archive(path)
    used, out = run_py(USE, env)
    assert used == {"sum": 499500, "mapped": None} and "SharedArchiveFile" not in out
