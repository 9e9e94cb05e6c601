"""spark-submit jobs/order.py --run-dir DIR: order transactions, build changes/tables/audit/state."""

from __future__ import annotations

import json
import sys

try:
    from jobs._common import parse, session
except ImportError:
    from _common import parse, session  # type: ignore[no-redef]


def main(argv: list[str] | None = None) -> int:
    args = parse(__doc__, argv)
    from dblog.pipeline import order_night

    import time

    from dblog.metrics import record_seconds

    t0 = time.monotonic()
    summary = order_night(session("dblog-order"), args.run_dir)
    record_seconds(args.run_dir, "order", time.monotonic() - t0)   # for the night's metrics
    print(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
