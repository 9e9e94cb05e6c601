"""``dblog run`` does not print Great Expectations' INFO lines about its own docs registry."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

SCRIPT = """
import logging
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
from dblog.pipeline import quiet_great_expectations
quiet_great_expectations()
import great_expectations
from great_expectations.data_context.data_context import file_data_context
logging.getLogger("great_expectations.probe").warning("still warns")
logging.getLogger("dblog").info("dblog still informs")
"""


def test_great_expectations_imports_quietly_and_still_warns():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin",
                                                       "GX_ANALYTICS_ENABLED": "false"})
    assert done.returncode == 0, done.stderr
    assert "_docs_decorators" not in done.stderr and "Skipping registering" not in done.stderr
    assert "INFO great_expectations" not in done.stderr
    assert "WARNING great_expectations.probe: still warns" in done.stderr
    assert "INFO dblog: dblog still informs" in done.stderr
