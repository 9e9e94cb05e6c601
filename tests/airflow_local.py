"""Helpers of the Airflow tests: the environment of ``bin/airflow-env.sh`` in a temporary
AIRFLOW_HOME, small generated nights, and checks of what was published against what the
generator wrote (never against what the pipeline computed)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pyarrow.dataset as pads

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / ".venv" / "bin"
KEYS = ["trx_id", "op", "table_id", "before", "after", "ddl", "commit_position"]
# Sources whose decoders are complete; more can be added with DBLOG_TEST_AIRFLOW_SOURCES=a,b
DEFAULT_SOURCES = ["pos_solid"]
TRANSACTIONS = 20


def chosen_sources() -> list[str]:
    env = os.environ.get("DBLOG_TEST_AIRFLOW_SOURCES", "")
    return [s.strip() for s in env.split(",") if s.strip()] or DEFAULT_SOURCES


def write_config(tmp: Path, names: list[str]) -> Path:
    """A sources.yaml holding only ``names`` (copied from include/sources.yaml)."""
    import yaml

    doc = yaml.safe_load((REPO / "include" / "sources.yaml").read_text())
    items = []
    for s in doc["sources"]:
        if s["name"] in names:
            s = dict(s)
            s["catalog"] = str((REPO / "include" / s["catalog"]).resolve())
            items.append(s)
    path = tmp / "sources.yaml"
    path.write_text(yaml.safe_dump({"sources": items}))
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def airflow_env(home: Path, data_root: Path, config: Path, port: int = 8080, **extra) -> dict:
    """The environment ``bin/airflow-env.sh`` gives, for this AIRFLOW_HOME and data root."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("AIRFLOW", "DBLOG_")) or k == "DBLOG_TEST_AIRFLOW_SOURCES"}
    base.update({"AIRFLOW_HOME": str(home), "DBLOG_DATA_ROOT": str(data_root),
                 "DBLOG_CONFIG": str(config), "AIRFLOW_PORT": str(port)})
    base.update({k: str(v) for k, v in extra.items()})
    out = subprocess.run(["bash", "-c", f". {REPO}/bin/airflow-env.sh && env -0"], env=base,
                         capture_output=True, check=True, timeout=60).stdout
    return dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)


def run(env: dict, *args: str, timeout: float = 300, log: Path | None = None) -> subprocess.CompletedProcess:
    """Run a command in ``env``; its output goes to ``log`` when given."""
    if log is None:
        return subprocess.run(list(args), env=env, cwd=REPO, capture_output=True, text=True,
                              timeout=timeout)
    with open(log, "w") as fh:
        return subprocess.run(list(args), env=env, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT,
                              text=True, timeout=timeout)


def synth(env: dict, first: str, days: int, transactions: int = TRANSACTIONS) -> None:
    proc = run(env, str(BIN / "dblog"), "synth", "--date", first, "--days", str(days),
               "--transactions", str(transactions))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def prepare(env: dict) -> None:
    """``bin/airflow-local --prepare``: database migrated, pool created."""
    proc = run(env, str(REPO / "bin" / "airflow-local"), "--prepare", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def read_published(root: Path, source: str, date: str) -> list[dict]:
    path = root / "published" / "changes"
    if not path.exists():
        return []
    table = pads.dataset(str(path), format="parquet", partitioning="hive").to_table()
    rows = [r for r in table.to_pylist() if str(r["source"]) == source and str(r["date"]) == date]
    return sorted(rows, key=lambda r: (r["commit_seq"], r["event_seq"]))


def check_night(root: Path, source: str, date: str) -> list[dict]:
    """Published changes of the night equal the generator's expected changes, in order."""
    from dblog.paths import DataRoot
    from dblog.synthcmd import read_expected

    rows = read_published(root, source, date)
    expected = read_expected(DataRoot(root), source, date)
    assert expected, f"generator expected no changes for {source} {date}?"
    assert [{k: r[k] for k in KEYS} for r in rows] == [{k: e[k] for k in KEYS} for e in expected]
    return rows


def stop(proc: subprocess.Popen, timeout: float = 60) -> None:
    """Stop a process group started with start_new_session=True: TERM, then KILL."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def leftovers(marker: str) -> list[int]:
    """Pids of processes whose environment holds ``marker`` (our unique AIRFLOW_HOME)."""
    pids = []
    needle = marker.encode()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if needle in (d / "environ").read_bytes():
                pids.append(int(d.name))
        except OSError:
            continue
    return pids


def kill_leftovers(marker: str) -> list[int]:
    """Kill what we started and is still running (daemonised workers, spark-submit JVMs)."""
    pids = leftovers(marker)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids
