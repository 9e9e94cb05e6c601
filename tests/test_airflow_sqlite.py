"""The local Airflow's SQLite database: writers wait for the lock (not pysqlite's 5 s) and the
file is in write-ahead-log mode, so that a backfill created from the UI under load is not
given up and removed (which killed the scheduler in CI: dblog/airflow_sqlite.py)."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from dblog.airflow_sqlite import BUSY_TIMEOUT_S, CONNECT_ARGS, main, sqlite_path, use_wal

from .airflow_local import BIN, airflow_env, prepare, run, write_config


def test_sqlite_path():
    assert str(sqlite_path("sqlite:////tmp/a/airflow.db")) == "/tmp/a/airflow.db"
    assert str(sqlite_path("sqlite:////tmp/a/airflow.db?mode=rwc")) == "/tmp/a/airflow.db"
    assert sqlite_path("postgresql+psycopg2://u@h/airflow") is None
    assert sqlite_path("sqlite://") is None


def test_use_wal_sets_and_keeps_the_mode(tmp_path):
    db = tmp_path / "airflow.db"
    sqlite3.connect(db).execute("create table t (x)").connection.close()
    assert use_wal(db) == "wal"
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert main([f"sqlite:///{db}"]) == 0
    assert main(["postgresql://u@h/airflow"]) == 0      # another database: nothing to do
    with pytest.raises(FileNotFoundError, match="no Airflow database"):
        use_wal(tmp_path / "missing.db")


def test_a_writer_waits_for_the_lock_instead_of_failing(tmp_path):
    """What pysqlite's 5 s default gave up on: another writer holds the lock for 6 s."""
    db = tmp_path / "airflow.db"
    sqlite3.connect(db).execute("create table t (x)").connection.close()
    use_wal(db)
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("insert into t values (1)")
    release = threading.Timer(6.0, lambda: holder.execute("COMMIT"))
    release.start()
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            sqlite3.connect(db, timeout=0.5).execute("insert into t values (2)")
        t0 = time.monotonic()
        con = sqlite3.connect(db, check_same_thread=False, **CONNECT_ARGS)
        con.execute("insert into t values (3)")
        con.commit()
        assert time.monotonic() - t0 < BUSY_TIMEOUT_S
    finally:
        release.join()
    assert sorted(r[0] for r in con.execute("select x from t")) == [1, 3]


@pytest.mark.airflow
def test_airflow_local_prepares_wal_and_airflow_uses_the_timeout(tmp_path):
    env = airflow_env(tmp_path / "airflow_home", tmp_path / "data", write_config(tmp_path, ["pos_solid"]))
    prepare(env)
    db = tmp_path / "airflow_home" / "airflow.db"
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    proc = run(env, str(BIN / "python"), "-c",
               "from airflow import settings; print(settings._get_connect_args('sync')['timeout'],"
               " settings._get_connect_args('async')['timeout'])")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-2:] == [str(BUSY_TIMEOUT_S)] * 2
