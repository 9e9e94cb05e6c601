"""The embedded SQLite database of the local Airflow (``bin/airflow-local``, the tests).

Airflow's api-server, scheduler, dag-processor and triggerer all write the one SQLite file.
With pysqlite's default 5 s busy timeout a writer under load gives up with ``database is
locked``; in Airflow 3.3 a backfill that gives up so is removed again
(``_cleanup_partial_backfill`` deletes its runs, and with them their deadlines), and a
scheduler that has just read one of those deadlines to mark it missed dies on
``StaleDataError: UPDATE statement on table 'deadline' expected to update 1 row(s); 0 were
matched`` (seen in CI: every task stopped after ``decode``). Two settings keep writers from
giving up:

* ``CONNECT_ARGS`` (``AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS`` names it in
  ``bin/airflow-env.sh`` when the database is SQLite): a writer waits up to
  ``BUSY_TIMEOUT_S`` for the lock;
* ``use_wal(path)`` (``bin/airflow-local --prepare``): the file in write-ahead-log mode, so
  that readers (the UI's polling, the scheduler's queries) no longer block writers. The
  mode is kept in the file;
* ``ImmediateConnection`` (the ``factory`` of both connect-args dicts): a transaction that a
  ``SAVEPOINT`` opens (SQLAlchemy's ``session.begin_nested()``) starts with ``BEGIN
  IMMEDIATE``, i.e. takes the write lock first. Otherwise SQLite opens it deferred: its
  first ``SELECT`` takes a read snapshot, and when another connection commits before its
  first write, that write fails at once with ``database is locked`` (SQLITE_BUSY_SNAPSHOT
  in WAL mode; no busy timeout helps, the snapshot is stale). Airflow 3.3 creates each
  backfill run in a ``begin_nested()`` that reads and then writes, and answers such a
  failure with HTTP 503 ("Backfill creation is not supported on SQLite under concurrent
  access"): seen in CI, the UI's "Run Backfill" failed four times while the triggered
  run's tasks were writing.

A production Airflow runs on PostgreSQL or MySQL, where neither applies.
"""
from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

BUSY_TIMEOUT_S = 120.0


def _opens_savepoint(sql: str) -> bool:
    return sql.lstrip()[:9].upper() == "SAVEPOINT"


class ImmediateCursor(sqlite3.Cursor):
    """A cursor whose ``SAVEPOINT`` outside a transaction first runs ``BEGIN IMMEDIATE``."""

    def execute(self, sql, parameters=(), /):
        if not self.connection.in_transaction and _opens_savepoint(sql):
            super().execute("BEGIN IMMEDIATE")   # waits up to the busy timeout for the lock
        return super().execute(sql, parameters)


class ImmediateConnection(sqlite3.Connection):
    """``sqlite3.connect(..., factory=ImmediateConnection)``: every cursor is an
    ``ImmediateCursor``, also the one of ``Connection.execute`` (which in C bypasses
    ``cursor()``). Transactions that pysqlite opens itself (before an INSERT, UPDATE or
    DELETE) are unchanged: their first statement writes, and SQLite retries a stale snapshot
    there under the busy timeout."""

    def cursor(self, factory=ImmediateCursor):
        return super().cursor(factory)

    def execute(self, sql, parameters=(), /):
        return self.cursor().execute(sql, parameters)


# read by Airflow's conf.getimport("database", "sql_alchemy_connect_args"); Airflow adds
# check_same_thread=False itself
CONNECT_ARGS = {"timeout": BUSY_TIMEOUT_S, "factory": ImmediateConnection}
# the api-server's async engine (aiosqlite passes it to sqlite3.connect); its own dict, not
# CONNECT_ARGS: Airflow adds check_same_thread to the sync engine's dict in place
CONNECT_ARGS_ASYNC = {"timeout": BUSY_TIMEOUT_S, "factory": ImmediateConnection}


def sqlite_path(conn: str) -> Path | None:
    """The file of an ``sqlite:///ABS/PATH`` SQLAlchemy URL, None for another database."""
    prefix = "sqlite:///"
    if not conn.startswith(prefix):
        return None
    path = conn[len(prefix):].split("?", 1)[0]
    return Path(path) if path else None


def use_wal(path: Path) -> str:
    """Put the SQLite file at ``path`` in write-ahead-log mode; returns the mode now set."""
    if not path.is_file():
        raise FileNotFoundError(f"no Airflow database at {path} (run `airflow db migrate` first)")
    con = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)
    try:
        return con.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    finally:
        con.close()


def main(argv: list[str]) -> int:
    """``python -m dblog.airflow_sqlite SQL_ALCHEMY_CONN``: WAL mode when it is SQLite."""
    if len(argv) != 1:
        print("usage: python -m dblog.airflow_sqlite SQL_ALCHEMY_CONN", file=sys.stderr)
        return 2
    path = sqlite_path(argv[0])
    if path is None:
        return 0
    mode = use_wal(path)
    if mode.lower() != "wal":
        print(f"{path}: journal mode stayed {mode!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
