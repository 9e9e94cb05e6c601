"""In-process rate of the Informix transaction step (``decoders/informix/resolve.py``), the
ordering job's ``mapInArrow`` function, per-row vs columnar, on one core.

    python -m bench.informix_resolve [--night DIR] [--repeat N]

The night's archives (a ``bench run`` cache entry) are decoded in records mode (byte
ranges of 32 MB, as the decode job does), sorted as ``resolve_transactions`` sorts them
(source, xid, file, record) and cut into Arrow batches of 10,000 rows (Spark's
``maxRecordsPerBatch``); the sorted stream is kept beside the night
(``/tmp/dblog-ifx-resolve-<name>.arrow``). Each path then reads the whole stream as one
partition; the CPU seconds of the process (``time.process_time``) are reported.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

BATCH = 10_000


def decode_night(night: Path) -> pa.Table:
    import yaml

    from decoders.base import DecodeContext
    from decoders.catalog import Catalog
    from decoders.events import EventSink, accounts_bytes
    from decoders.informix import archive_sort_key
    from decoders.informix.decoder import decode_records, split

    conf = yaml.safe_load((night / "sources.yaml").read_text())["sources"][0]
    catalog = Catalog.loads(Path(conf["catalog"]).read_text(), conf["catalog"])
    src = conf["name"]
    files = sorted((night / "landing" / src).rglob("*.txt"), key=lambda p: archive_sort_key(p.name))
    batches = []
    dec = accounts_bytes(decode_records, lines=True)
    for path in files:
        data = path.read_bytes()
        name = f"{src}/{path.parent.name}/{path.name}"
        ctx0 = DecodeContext(src, "informix", catalog, name, {}, conf.get("timezone"), None)
        for r in split(data, ctx0, 32 << 20):
            ctx = DecodeContext(src, "informix", catalog, name, {}, conf.get("timezone"), None)
            ctx.offset, ctx.index, ctx.line = r["start"], r["index"], r["line"]
            sink = EventSink(src, "informix", name)
            dec(data[r["start"]:r["end"]], ctx, sink)
            batches.extend(sink.batches())
    table = pa.Table.from_batches(batches)
    return table.append_column("from_state", pa.array([False] * table.num_rows))


def sorted_stream(table: pa.Table) -> pa.Table:
    table = table.filter(pc.is_valid(table["xid"]))
    u = pc.cast(pc.struct_field(pc.extract_regex(table["archive_file"], r"_(?P<u>[0-9]+)\.txt$"), "u"),
                pa.int64())
    t = table.append_column("_u", pc.fill_null(u, -1))
    t = t.sort_by([("source", "ascending"), ("xid", "ascending"), ("_u", "ascending"),
                   ("record_index", "ascending")])
    return t.drop_columns(["_u"])


def load(night: Path) -> pa.Table:
    cache = Path(f"/tmp/dblog-ifx-resolve-{night.name}.arrow")
    if cache.exists():
        with pa.memory_map(str(cache)) as f:
            return pa.ipc.open_file(f).read_all()
    t = sorted_stream(decode_night(night))
    with pa.OSFile(str(cache), "wb") as f, pa.ipc.new_file(f, t.schema) as w:
        w.write_table(t, max_chunksize=BATCH)
    return t


def measure(table: pa.Table, columnar: bool) -> tuple[float, int]:
    from decoders.informix import resolve as RS

    RS.COLUMNAR = columnar
    batches = table.to_batches(max_chunksize=BATCH)
    t0 = time.process_time()
    n = sum(b.num_rows for b in RS._resolve_partition(iter(batches)))
    return time.process_time() - t0, n


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--night", default="/work/main/bench/cache/informix-n1000000-s0-47b4ee8e91")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--paths", default="rows,columns")
    args = p.parse_args()
    table = load(Path(args.night))
    print(f"records in the stream: {table.num_rows:,}")
    for path in args.paths.split(","):
        for _ in range(args.repeat):
            s, n = measure(table, path == "columns")
            print(f"{path}: {s:.2f} CPU s, {table.num_rows / s:,.0f} records/s, {n:,} rows out")


if __name__ == "__main__":
    main()
