"""What every job does: parse ``--run-dir``, build the session, log like the CLI."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path


def parse(description: str, argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--run-dir", required=True, type=Path,
                   help="the run's staging directory (holds manifest.json)")
    args = p.parse_args(argv)
    if not (args.run_dir / "manifest.json").is_file():
        p.error(f"{args.run_dir}/manifest.json not found (run the stage task first)")
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return args


def session(app: str):
    from dblog.spark import get_session

    return get_session(app=app)
