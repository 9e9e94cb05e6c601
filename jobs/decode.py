"""spark-submit jobs/decode.py --run-dir DIR: decode every archive of the run into events/."""

from __future__ import annotations

import sys

try:
    from jobs._common import parse, session
except ImportError:  # run as a file by spark-submit without the project on sys.path
    from _common import parse, session  # type: ignore[no-redef]


def main(argv: list[str] | None = None) -> int:
    args = parse(__doc__, argv)
    from dblog.pipeline import decode_night

    import time

    from dblog.metrics import record_seconds

    t0 = time.monotonic()
    decode_night(session("dblog-decode"), args.run_dir)
    record_seconds(args.run_dir, "decode", time.monotonic() - t0)   # for the night's metrics
    print(f"decoded -> {args.run_dir / 'events'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
