"""The local Airflow's SQLite database: writers wait for the lock (not pysqlite's 5 s), the
file is in write-ahead-log mode, and a transaction opened by a SAVEPOINT takes the write lock
first, so that a backfill created from the UI under load is neither given up and removed
(which killed the scheduler in CI) nor refused with HTTP 503 (dblog/airflow_sqlite.py)."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from dblog.airflow_sqlite import (BUSY_TIMEOUT_S, CONNECT_ARGS, CONNECT_ARGS_ASYNC,
                                  ImmediateConnection, main, sqlite_path, use_wal)

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


def _wal_db(tmp_path):
    tmp_path.mkdir(parents=True, exist_ok=True)
    db = tmp_path / "airflow.db"
    sqlite3.connect(db).execute("create table t (x)").connection.close()
    use_wal(db)
    return db


def _nested_read_then_write(db, connect_args: dict) -> list[int]:
    """Airflow 3.3's backfill run creation on SQLAlchemy: in ``session.begin_nested()`` read,
    then write; between the two another connection commits a write (a task's state, say)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.orm import Session

    engine = create_engine(f"sqlite:///{db}", connect_args=dict(connect_args, check_same_thread=False))
    other = threading.Thread(target=lambda: _commit_one(db, 1))
    try:
        with Session(engine) as session:
            with session.begin_nested():
                session.execute(text("select count(*) from t")).scalar()
                other.start()
                time.sleep(0.3)  # the other writer commits now, or waits for our lock
                session.execute(text("insert into t values (2)"))
            session.commit()
    finally:
        if other.ident is not None:
            other.join()
        engine.dispose()
    return sorted(r[0] for r in sqlite3.connect(db).execute("select x from t"))


def _commit_one(db, x: int) -> None:
    con = sqlite3.connect(db, timeout=30)
    con.execute("insert into t values (?)", (x,))
    con.commit()
    con.close()


def test_a_savepoint_transaction_is_not_refused_after_another_commit(tmp_path):
    """pysqlite opens the transaction of a SAVEPOINT deferred: its first read takes a WAL
    snapshot, and once another connection has committed, its write fails at once (no busy
    timeout applies; Airflow answers a backfill so with HTTP 503). With ``ImmediateConnection``
    the savepoint's transaction holds the write lock from the start and the other writer
    waits instead."""
    from sqlalchemy.exc import OperationalError

    with pytest.raises(OperationalError, match="database is locked"):
        _nested_read_then_write(_wal_db(tmp_path / "plain"), {"timeout": BUSY_TIMEOUT_S})
    assert _nested_read_then_write(_wal_db(tmp_path / "immediate"), CONNECT_ARGS) == [1, 2]


def test_immediate_connection_only_changes_savepoints(tmp_path):
    db = _wal_db(tmp_path)
    con = sqlite3.connect(db, factory=ImmediateConnection)
    assert con.execute("select count(*) from t").fetchone() == (0,)
    assert not con.in_transaction          # a read opens no transaction, as before
    con.execute("insert into t values (1)")
    assert con.in_transaction              # pysqlite's own BEGIN before a write, as before
    con.commit()
    con.execute("  savepoint s1")
    assert con.in_transaction
    # the write lock is taken: another writer cannot get it
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        sqlite3.connect(db, timeout=0.1).execute("insert into t values (9)")
    con.execute("release savepoint s1")
    assert con.in_transaction              # the BEGIN IMMEDIATE's transaction ends at commit
    con.commit()
    assert sorted(r[0] for r in con.execute("select x from t")) == [1]
    assert CONNECT_ARGS_ASYNC["factory"] is ImmediateConnection


@pytest.mark.airflow
def test_airflow_local_prepares_wal_and_airflow_uses_the_timeout(tmp_path):
    env = airflow_env(tmp_path / "airflow_home", tmp_path / "data", write_config(tmp_path, ["pos_solid"]))
    prepare(env)
    db = tmp_path / "airflow_home" / "airflow.db"
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    proc = run(env, str(BIN / "python"), "-c",
               "from airflow import settings; s, a = (settings._get_connect_args(k) for k in ('sync', 'async'));"
               " print(s['timeout'], a['timeout'], s['factory'].__name__, a['factory'].__name__)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-4:] == [str(BUSY_TIMEOUT_S)] * 2 + ["ImmediateConnection"] * 2
