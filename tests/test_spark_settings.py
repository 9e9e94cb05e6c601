"""The settings dblog gives a local Spark JVM it starts (dblog/spark.py): heap and JIT."""

from __future__ import annotations

import pytest

from dblog import spark as ds

FLAG = "-XX:Tier4InvocationThreshold=200000"


@pytest.fixture
def own_jvm(monkeypatch, tmp_path):
    """As if this process were about to start the JVM itself, with no Spark configuration
    around it."""
    monkeypatch.setattr(ds, "jvm_running", lambda: False)
    for var in ("DBLOG_JIT", "DBLOG_DRIVER_MEMORY", "PYSPARK_SUBMIT_ARGS", "SPARK_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))     # an empty conf dir
    return tmp_path


def test_small_night_gets_the_short_work_jit(own_jvm):
    got = ds.jit_settings("local[2]", 8_000_000)
    assert got == {"spark.driver.extraJavaOptions": ds.SMALL_NIGHT_JIT}
    assert FLAG in ds.SMALL_NIGHT_JIT
    assert ds.jit_settings(None, ds.SMALL_NIGHT_BYTES) == got      # local[*] by default


def test_big_or_unknown_night_keeps_hotspots_defaults(own_jvm):
    assert ds.jit_settings("local[2]", ds.SMALL_NIGHT_BYTES + 1) == {}
    assert ds.jit_settings("local[2]", None) == {}


def test_dblog_jit_forces_either_way_and_rejects_other_values(own_jvm, monkeypatch):
    monkeypatch.setenv("DBLOG_JIT", "small")
    assert ds.jit_settings("local[2]", 10 * ds.SMALL_NIGHT_BYTES)["spark.driver.extraJavaOptions"] \
        == ds.SMALL_NIGHT_JIT
    monkeypatch.setenv("DBLOG_JIT", "default")
    assert ds.jit_settings("local[2]", 1000) == {}
    monkeypatch.setenv("DBLOG_JIT", "c1")
    with pytest.raises(ValueError, match="DBLOG_JIT"):
        ds.jit_settings("local[2]", 1000)


def test_a_jvm_that_is_not_ours_is_left_alone(own_jvm, monkeypatch):
    assert ds.jit_settings("spark://cluster:7077", 1000) == {}
    assert ds.memory_settings("spark://cluster:7077") == {}
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-java-options -Dx=1 pyspark-shell")
    assert ds.jit_settings("local[2]", 1000) == {}
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    (own_jvm / "spark-defaults.conf").write_text("spark.driver.extraJavaOptions -Dy=2\n")
    assert ds.jit_settings("local[2]", 1000) == {}
    assert "spark.driver.memory" in ds.memory_settings("local[2]")    # only what is set there
    monkeypatch.setattr(ds, "jvm_running", lambda: True)               # under spark-submit
    (own_jvm / "spark-defaults.conf").unlink()
    assert ds.jit_settings("local[2]", 1000) == {} and ds.memory_settings("local[2]") == {}


def test_heap_from_the_machine_or_the_override(own_jvm, monkeypatch):
    assert ds.default_driver_memory(24 * 1024 ** 3) == "6144m"
    assert ds.default_driver_memory(2 * 1024 ** 3) == f"{ds.MIN_DRIVER_MEMORY_MB}m"
    monkeypatch.setenv("DBLOG_DRIVER_MEMORY", "3g")
    assert ds.memory_settings("local[2]") == {"spark.driver.memory": "3g"}


@pytest.mark.spark
def test_the_test_sessions_jvm_runs_with_the_short_work_jit(spark):
    args = list(spark.sparkContext._jvm.java.lang.management.ManagementFactory
                .getRuntimeMXBean().getInputArguments())
    assert FLAG in args, args


def test_small_night_runs_without_code_generation(own_jvm, monkeypatch):
    monkeypatch.delenv(ds.CODEGEN_ENV, raising=False)
    assert ds.codegen_settings("local[*]", 8_000_000) == ds.SMALL_NIGHT_SQL
    assert ds.codegen_settings(None, ds.SMALL_NIGHT_BYTES) == ds.SMALL_NIGHT_SQL
    # a big or unknown night, a cluster: Spark's code generation
    assert ds.codegen_settings("local[*]", ds.SMALL_NIGHT_BYTES + 1) == {}
    assert ds.codegen_settings("local[*]", None) == {}
    assert ds.codegen_settings("spark://host:7077", 1000) == {}
    monkeypatch.setenv(ds.CODEGEN_ENV, "default")
    assert ds.codegen_settings("local[*]", 1000) == {}
    monkeypatch.setenv(ds.CODEGEN_ENV, "small")
    assert ds.codegen_settings("local[*]", 10 ** 12) == ds.SMALL_NIGHT_SQL
    monkeypatch.setenv(ds.CODEGEN_ENV, "fast")
    with pytest.raises(ValueError, match=ds.CODEGEN_ENV):
        ds.codegen_settings("local[*]", 1000)


def test_code_generation_settings_made_elsewhere_are_kept(own_jvm, monkeypatch):
    monkeypatch.delenv(ds.CODEGEN_ENV, raising=False)
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS",
                       "--conf spark.sql.codegen.wholeStage=true pyspark-shell")
    assert ds.codegen_settings("local[*]", 1000) == {"spark.sql.codegen.factoryMode": "NO_CODEGEN"}
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    monkeypatch.setattr(ds, "jvm_running", lambda: True)     # under spark-submit
    assert ds.codegen_settings("local[*]", 1000) == {}


@pytest.mark.spark
def test_the_test_sessions_night_runs_without_code_generation(spark):
    for key, value in ds.SMALL_NIGHT_SQL.items():
        assert spark.conf.get(key) == value, key
