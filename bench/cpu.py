"""``python -m bench cpu``: in-process decode CPU rate per format, one core, no Spark.

For each format, on the cached night of ``--n`` changes (``bench/gen.py``), measures the CPU
seconds (``time.process_time``) of

* ``decode``: ``decoders.get(fmt).decode(data, ctx, sink)`` then ``sink.batches()`` (what a
  decode task runs per archive), and
* ``plain``:  baseline (a), ``bench/plain.py``'s hand-written loop, Parquet writing left out
  (both sides stop at rows in memory),

each ``--repeat`` times (the best kept), and prints records/s and the ratio decode/plain
(target: >= 3). Peak memory of the process is reported from ``resource`` (maxrss).

Usage: ``python -m bench cpu [--n 200000] [--formats rdb,lldf] [--repeat 3] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

from . import gen


def _decode_once(fmt: str, info: dict, paths: list[Path]) -> tuple[float, int]:
    from decoders import get
    from decoders.base import DecodeContext
    from decoders.catalog import load_catalog
    from decoders.events import EventSink

    from dblog.config import load_config

    src = load_config(Path(info["root"]) / "sources.yaml").source(info["source"])
    catalog = load_catalog(src.catalog_path)
    mod = get(fmt)
    records = 0
    carry = None
    cpu = 0.0
    for p in paths:
        data = p.read_bytes()
        t0 = time.process_time()
        sink = EventSink(src.name, fmt, p.name)
        ctx = DecodeContext(src.name, fmt, catalog, p.name, src.options, src.timezone, carry)
        out = mod.decode(data, ctx, sink)
        carry = out if mod.SEQUENTIAL else None
        batches = sink.batches()
        cpu += time.process_time() - t0
        records += sum(int(b.column("n_records").to_numpy().sum()) for b in batches)
        del batches, data
    return cpu, records


def _plain_once(fmt: str, info: dict, paths: list[Path]) -> tuple[float, int]:
    from . import plain

    from .jobs import _source

    source = _source(info)
    dec = plain.RecordDecoder(fmt, source).decode
    records = 0
    cpu = 0.0
    for p in paths:
        data = p.read_bytes()
        t0 = time.process_time()
        cols = {name: [] for name in plain.OUT_SCHEMA.names}
        for i, rec in enumerate(plain.split(fmt, data, source.get("options"))):
            records += 1
            got = dec(rec)
            if got is None:
                continue
            op, tid, before, after = got
            cols["archive"].append(p.name)
            cols["record"].append(i)
            cols["op"].append(op)
            cols["table_id"].append(tid)
            cols["before"].append(before)
            cols["after"].append(after)
        cpu += time.process_time() - t0
        del cols, data
    return cpu, records


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench cpu", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=200_000)
    p.add_argument("--formats", default=",".join(gen.FORMATS))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", default=str(gen.CACHE))
    p.add_argument("--json", default="", help="also write the results as JSON to this file")
    args = p.parse_args(argv)
    formats = [f for f in args.formats.split(",") if f]
    bad = [f for f in formats if f not in gen.FORMATS]
    if bad:
        print(f"bench cpu: unknown formats {bad}", file=sys.stderr)
        return 2
    results = {"n": args.n, "loadavg_start": [round(x, 2) for x in os.getloadavg()], "formats": {}}
    print(f"load average at start: {results['loadavg_start']}")
    print(f"{'format':9} {'records':>9} {'decode s':>9} {'rec/s':>10} {'plain s':>8} "
          f"{'rec/s':>10} {'ratio':>6}")
    for fmt in formats:
        info = gen.ensure_night(fmt, args.n, args.seed, Path(args.cache))
        paths = gen.archives(info)
        dec = min((_decode_once(fmt, info, paths) for _ in range(args.repeat)), key=lambda x: x[0])
        pla = min((_plain_once(fmt, info, paths) for _ in range(args.repeat)), key=lambda x: x[0])
        ratio = pla[0] / dec[0] if dec[0] else float("inf")
        results["formats"][fmt] = {"records": dec[1], "decode_cpu_s": round(dec[0], 3),
                                   "decode_rate": round(dec[1] / dec[0]) if dec[0] else None,
                                   "plain_records": pla[1], "plain_cpu_s": round(pla[0], 3),
                                   "plain_rate": round(pla[1] / pla[0]) if pla[0] else None,
                                   "ratio": round(ratio, 2)}
        r = results["formats"][fmt]
        print(f"{fmt:9} {dec[1]:>9,} {dec[0]:>9.2f} {r['decode_rate'] or 0:>10,} {pla[0]:>8.2f} "
              f"{r['plain_rate'] or 0:>10,} {ratio:>6.2f}", flush=True)
    results["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    results["maxrss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(f"load average at end: {results['loadavg_end']}; peak RSS {results['maxrss_mb']} MB")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0
