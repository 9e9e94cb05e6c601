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


@pytest.fixture(scope="session")
def spark():
    from dblog.spark import get_session

    session = get_session("local[2]", app="dblog-tests",
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
