"""spark-submit jobs/validate.py --run-dir DIR: Great Expectations over the staged run.

Records the verdict in ``<run-dir>/validation.json`` and writes the data-quality report
(``reports/<date>/index.html``). It never publishes, and exits 0 whatever the verdict
(the job worked); the DAG's publish tasks refuse to publish a failed validation.
"""

from __future__ import annotations

import sys

try:
    from jobs._common import parse, session
except ImportError:
    from _common import parse, session  # type: ignore[no-redef]


def main(argv: list[str] | None = None) -> int:
    args = parse(__doc__, argv)
    from dblog.pipeline import validate_night

    result = validate_night(session("dblog-validate"), args.run_dir)
    print(("VALID" if result.success else "VALIDATION FAILED") + f"; report: {result.report}")
    for f in result.failures:
        print(f"  failed: {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
