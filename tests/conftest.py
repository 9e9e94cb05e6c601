"""Shared fixtures: one SparkSession for the whole test session."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# py4j logs "Closing down clientserver connection" at interpreter exit, after pytest has
# closed its capture streams; keep the run's last line pytest's own summary
logging.getLogger("py4j").setLevel(logging.WARNING)


# The test files that take minutes, longest first. `make test` runs the suite on two
# pytest-xdist workers, a file at a time per worker (``--dist loadfile``, in collection
# order): these start first so that the two workers finish together.
SLOW_FIRST = ("test_browser.py", "test_pipeline.py", "test_airflow_dags_test.py", "test_history.py",
              "test_mirror.py", "test_ordering.py", "test_landing_night.py", "test_jvmcache.py", "test_bench.py",
              "test_decode_ranges.py", "test_validation_suites.py", "test_validation_nights.py",
              "test_publish.py", "test_report.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable: in-file order kept


@pytest.fixture(scope="session")
def spark():
    from dblog.spark import SMALL_NIGHT_BYTES, get_session

    # the tests' nights are small: the JIT set for short work (dblog.spark.jit_settings)
    session = get_session("local[2]", app="dblog-tests", night_bytes=SMALL_NIGHT_BYTES,
                          conf={"spark.sql.shuffle.partitions": "4",
                                "spark.default.parallelism": "4"})
    yield session
    session.stop()


def write_config(tmp: Path, sources: list[dict]) -> Path:
    """A sources.yaml in ``tmp`` for the given sources (catalog paths made absolute)."""
    import yaml

    items = []
    for s in sources:
        item = dict(s)
        item.setdefault("catalog", str(REPO / "include" / "catalogs" / f"{s['name']}.json"))
        items.append(item)
    path = tmp / "sources.yaml"
    path.write_text(yaml.safe_dump({"sources": items}))
    return path
