"""The ``dblog`` command.

    dblog run --date YYYY-MM-DD [--config FILE] [--data-root DIR] [--source NAME ...]
    dblog synth --date YYYY-MM-DD [--days N] [--transactions N] [--source NAME ...]
    dblog mirror --source NAME --table SCHEMA.TABLE [--as-of YYYY-MM-DD] [--show N]
    dblog tidy [--data-root DIR]
    dblog jvm-cache [--force]

``run`` exits 0 when it published, 1 when validation failed (nothing published),
2 on bad usage (including a malformed configuration or catalog), 3 when the run itself
failed (e.g. out of memory; nothing published; the message names the stage and the run).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import logging
import sys

from decoders.errors import ConfigError

from .paths import DataRoot, check_date


def _date(text: str) -> str:
    try:
        return check_date(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # bad usage -> exit 2 with the usage line
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="dblog", description="Turn archived database transaction logs into "
                                          "ordered, validated change data.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(sp):
        sp.add_argument("--date", required=True, type=_date, help="logical date YYYY-MM-DD")
        sp.add_argument("--config", help="sources file (default $DBLOG_CONFIG or include/sources.yaml)")
        sp.add_argument("--data-root", help="data root (default $DBLOG_DATA_ROOT or ./data)")
        sp.add_argument("--source", action="append", dest="sources", metavar="NAME",
                        help="only this source (repeatable)")

    run = sub.add_parser("run", help="run the nightly pipeline for one logical date")
    common(run)
    run.add_argument("--master", help="Spark master (default local[*])")
    run.add_argument("--run-id", help="run id (default: generated)")
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.add_argument("--accept-loss", action="append", default=[], metavar="PATTERN",
                     help="accept the loss of archives that cannot be read or decoded and whose "
                          "name (<source>/<date>/<file>, shell pattern) matches: their source's "
                          "night publishes without them; recorded in the audit and the report "
                          "(repeatable)")

    syn = sub.add_parser("synth", help="write sample nights of archives into the landing zone")
    common(syn)
    syn.add_argument("--days", type=int, default=1, help="consecutive nights (default 1)")
    syn.add_argument("--transactions", type=int, default=200,
                     help="transactions per source and night (default 200)")
    syn.add_argument("--seed", type=int, default=0)

    mir = sub.add_parser("mirror", help="where a table's mirror as of a night lies (and its first rows)")
    mir.add_argument("--source", required=True, metavar="NAME")
    mir.add_argument("--table", required=True, metavar="SCHEMA.TABLE")
    mir.add_argument("--as-of", type=_date, metavar="YYYY-MM-DD",
                     help="the night (default: the latest night with a mirror)")
    mir.add_argument("--show", type=int, default=0, metavar="N", help="also print the first N rows")
    mir.add_argument("--config", help="sources file (default $DBLOG_CONFIG or include/sources.yaml)")
    mir.add_argument("--data-root", help="data root (default $DBLOG_DATA_ROOT or ./data)")
    tid = sub.add_parser("tidy", help="the step after a publish (run by `run` and the DAG): delete "
                                      "what publishes took out, prepare the next version")
    tid.add_argument("--data-root", help="data root (default $DBLOG_DATA_ROOT or ./data)")
    jc = sub.add_parser("jvm-cache", help="build the Spark JVM's class archive for this Java and Spark "
                                          "(local JVMs then start faster; run by make's set-up)")
    jc.add_argument("--force", action="store_true", help="build it again even if it exists")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "mirror":
        from .mirror import mirror_command

        if args.show < 0:
            print("dblog: --show must be >= 0", file=sys.stderr)
            return 2
        return mirror_command(args)
    if args.command == "jvm-cache":
        from .jvmcache import command

        return command(force=args.force)
    if args.command == "tidy":
        from .publish import tidy

        done = tidy(DataRoot.of(args.data_root))
        print(f"tidy: {done['trash_removed']} folders of the trash deleted, next version from "
              f"{done['next_from'] or 'as is'}, {done['logs_removed']} old change lists dropped")
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # py4j logs every closed gateway connection (one per thread of the concurrent writes)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    # Great Expectations' import logs dozens of INFO lines about its own docs registry
    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    from .config import load_config

    try:
        cfg = load_config(args.config)
        sources = cfg.select(args.sources)
        for s in sources:
            s.catalog()
    except ConfigError as exc:
        print(f"dblog: configuration error: {exc}", file=sys.stderr)
        return 2
    root = DataRoot.of(args.data_root)
    if args.command == "synth":
        from .synthcmd import synth

        if args.days < 1 or args.transactions < 0:
            print("dblog: --days must be >= 1 and --transactions >= 0", file=sys.stderr)
            return 2
        for w in synth(cfg, sources, root, _dt.date.fromisoformat(args.date), args.days,
                       args.transactions, args.seed):
            print(f"{w['source']} {w['date']}: {w['archives']} archives, {w['bytes']} bytes, "
                  f"{w['expected_changes']} changes to publish -> "
                  f"{root.landing_night(w['source'], w['date'])}")
        return 0
    from .pipeline import RunFailed, describe, run_night, to_json
    from .progress import Progress, show_progress_with_logs

    progress = show_progress_with_logs(Progress())
    try:
        result = run_night(args.date, str(cfg.path), str(root.root), args.sources, args.master,
                           args.run_id, progress=progress, accept_loss=args.accept_loss)
    except RunFailed as exc:
        print(f"dblog: {exc}", file=sys.stderr)
        return 3
    except ConfigError as exc:
        print(f"dblog: configuration error: {exc}", file=sys.stderr)
        return 2
    print(to_json(result) if args.json else describe(result, root))
    return 0 if result.published else 1


if __name__ == "__main__":
    sys.exit(main())
