"""Step ``segment reassembly``: ``segment`` rows (one piece of a segmented record) -> changes.

Pieces are grouped by (source, ``seg_key``); a complete group (all of ``1..seg_total``, each
once) is concatenated in ``seg_num`` order and decoded by the format's
``decode_reassembled`` (in ``mapInArrow``) into the change's before/after/ddl; a decoding
error makes the group a ``quarantine`` row. The result, one row per group
(``GROUP_COLUMNS``), is what the other steps read: the reassembled changes (``kind =
change``), and each group's outcome for the buckets of its pieces.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Iterator

import pyarrow as pa

from decoders import get as get_format
from decoders.base import DecodeContext
from decoders.catalog import parse_catalog
from decoders.errors import DecodeError
from decoders.events import EVENT_COLUMNS, EVENT_FIELDS

# fields a piece leaves empty and the reassembly fills (or the quarantine, on failure)
FILLED = ("before", "after", "ddl", "error_class", "message", "raw_hex", "seg_data")
HEADER = [c for c in EVENT_COLUMNS if c not in FILLED]
GROUP_FIELDS = [(n, t) for n, t in EVENT_FIELDS if n != "seg_data"] + [("complete", pa.bool_())]
GROUP_SCHEMA = pa.schema(GROUP_FIELDS)
GROUP_COLUMNS = [n for n, _ in GROUP_FIELDS]


def formats_with_segments(formats) -> list[str]:
    """The formats (of those given) whose decoder writes ``segment`` rows."""
    return sorted({f for f in formats if hasattr(get_format(f), "decode_reassembled")})


def segment_groups(segments):
    """``segment`` rows -> one row per (source, seg_key): the first piece's header fields,
    ``complete`` and, for complete groups, ``data`` (the pieces' bytes in ``seg_num`` order)."""
    from pyspark.sql import functions as F

    groups = segments.groupBy("source", "seg_key").agg(
        F.count(F.lit(1)).alias("n_rows"),
        F.count_distinct("seg_num").alias("n_have"),
        F.max("seg_total").alias("seg_total_max"),
        F.min("seg_total").alias("seg_total_min"),
        F.min("seg_num").alias("seg_min"),
        F.max("seg_num").alias("seg_max"),
        F.sort_array(F.collect_list(F.struct("seg_num", "seg_data"))).alias("pieces"),
        F.min_by(F.struct(*[c for c in HEADER if c not in ("source", "seg_key")]), "seg_num")
        .alias("first"),
    )
    complete = ((F.col("n_rows") == F.col("seg_total_max")) & (F.col("n_have") == F.col("seg_total_max"))
                & (F.col("seg_total_min") == F.col("seg_total_max")) & (F.col("seg_min") == 1)
                & (F.col("seg_max") == F.col("seg_total_max")))
    data = F.when(complete, F.expr(
        "aggregate(pieces, cast('' as binary), (acc, p) -> concat(acc, p.seg_data))"))
    return groups.select(
        "source", "seg_key",
        *[F.col(f"first.{c}").alias(c) for c in HEADER if c not in ("source", "seg_key")],
        complete.alias("complete"), data.alias("data"))


def _decode_one(fmt, data: bytes, row: dict, ctx) -> dict:
    """One group through the format's ``decode_reassembled``: the change's fields, or the
    quarantine fields of its error."""
    try:
        return {"kind": "change", **fmt.decode_reassembled(data, row, ctx)}
    except DecodeError as exc:
        return _failed(exc.error_class, str(exc), data, row)
    except Exception as exc:  # decoder bug: quarantine, never stop the night
        return _failed("decoder_error", repr(exc), data, row)


def _failed(error_class: str, message: str, data: bytes, row: dict) -> dict:
    return {"kind": "quarantine", "error_class": error_class,
            "message": f"reassembled segments of {row['seg_key']}: {message}",
            "raw_hex": data[:256].hex()}


def _decode_complete(fmt, datas: list[bytes], rows: list[dict], ctx) -> list[dict]:
    """The groups of one (source, format, archive) of a batch: all at once through the
    format's ``decode_reassembled_many`` when it has one (row images per table in batches;
    one group at a time cost a 1M-change Log Master night 380 s of task time), else, or when
    the batch call fails unexpectedly, one at a time (a bad group costs only itself)."""
    many = getattr(fmt, "decode_reassembled_many", None)
    if many is not None:
        try:
            got = many(datas, rows, ctx)
        except Exception:  # noqa: BLE001 - a decoder bug: find the group, one at a time
            got = None
        if got is not None and len(got) == len(datas):
            return [_failed(g.error_class, str(g), d, r) if isinstance(g, DecodeError)
                    else {"kind": "change", **g} for g, d, r in zip(got, datas, rows)]
    return [_decode_one(fmt, d, r, ctx) for d, r in zip(datas, rows)]


class HeaderRows:
    """The header rows of a batch's complete groups as the format's decoder reads them (a
    mapping per group, ``row["table_id"]``, ``row.get("op")``), each column turned into Python
    values the first time a decoder asks for it: a Log Master group's decoder reads three of
    the thirty (docs/BENCHMARK.md, "Twenty-fourth session")."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.names = table.schema.names
        self.known = frozenset(self.names)
        self._cols: dict[str, list] = {}

    def column(self, name: str) -> list:
        got = self._cols.get(name)
        if got is None:
            got = self._cols[name] = self.table.column(name).to_pylist()
        return got

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, i: int) -> "HeaderRow":
        return HeaderRow(self, i)


class HeaderRow(Mapping):
    """One group's header fields (``HeaderRows``), a read-only mapping."""

    __slots__ = ("_rows", "_i")

    def __init__(self, rows: HeaderRows, i: int) -> None:
        self._rows, self._i = rows, i

    def __getitem__(self, key: str):
        col = self._rows._cols.get(key)
        if col is None:
            if key not in self._rows.known:
                raise KeyError(key)
            col = self._rows.column(key)
        return col[self._i]

    def get(self, key: str, default=None):
        col = self._rows._cols.get(key)
        if col is None:
            if key not in self._rows.known:
                return default
            col = self._rows.column(key)
        return col[self._i]

    def __iter__(self):
        return iter(self._rows.names)

    def __len__(self) -> int:
        return len(self._rows.names)


def _by_key(results: list[dict]) -> dict[str, tuple[list[int], list]]:
    """Decoded fields of the groups (``results[j]``: group j's) -> {field: (the groups that
    set it, their values)}, gathered per set of fields (a format returns few shapes: a
    change's, a quarantine's)."""
    shapes: dict[tuple, list[int]] = {}
    for j, g in enumerate(results):
        shapes.setdefault(tuple(g), []).append(j)
    out: dict[str, tuple[list[int], list]] = {}
    for keys, members in shapes.items():
        for key in keys:
            have, values = out.setdefault(key, ([], []))
            have.extend(members)
            values.extend([results[j][key] for j in members])
    return out


def _decode_groups(catalogs: dict[str, dict], options: dict[str, tuple]):
    """mapInArrow function: group rows (``HEADER`` + complete + data) -> ``GROUP_SCHEMA`` rows:
    a group not complete with ``kind`` null, a complete one with what the format decoded
    (``_decode_complete``: the change's fields, or the quarantine's) over its header; no
    group accounts for records or bytes (its pieces do). Columns are taken from the batch
    as they are; the decoder reads the complete groups' header fields as mappings
    (``HeaderRows``), and what it returns is set back by column (``_by_key``)."""
    import numpy as np
    import pyarrow.compute as pc

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        parsed: dict = {}
        for batch in batches:
            n = batch.num_rows
            names = batch.schema.names
            complete = pc.fill_null(batch.column("complete"), False).to_numpy(
                zero_copy_only=False)
            done = np.flatnonzero(complete)
            decoded: dict[str, tuple[np.ndarray, list]] = {}   # key -> (rows, values)
            if len(done):
                sub = pa.Table.from_batches([batch.take(pa.array(done))])
                datas = sub.column("data").to_pylist()
                rows = HeaderRows(sub.drop_columns(["data"]))
                todo: dict[tuple, list[int]] = {}
                for j, key in enumerate(zip(rows.column("source"), rows.column("format"),
                                            rows.column("archive_file"))):
                    todo.setdefault(key, []).append(j)
                results: list = [None] * len(done)
                for (source, fmt_name, archive), idx in todo.items():
                    cat = parsed.get(source)
                    if cat is None:
                        cat = parsed[source] = parse_catalog(catalogs[source],
                                                             f"<catalog of {source}>")
                    opts, tz = options[source]
                    ctx = DecodeContext(source, fmt_name, cat, archive, opts, tz)
                    got = _decode_complete(get_format(fmt_name), [datas[j] for j in idx],
                                           [rows[j] for j in idx], ctx)
                    for j, g in zip(idx, got):
                        results[j] = g
                decoded = {key: (done[np.array(have, np.int64)], values)
                           for key, (have, values) in _by_key(results).items()}
            cols = []
            for name, t in GROUP_FIELDS:
                if name == "n_records":          # the pieces account for the records read
                    cols.append(pa.array(np.zeros(n, np.int64)).cast(t))
                    continue
                col = batch.column(name) if name in names else pa.nulls(n, t)
                col = col if col.type == t else col.cast(t)
                if name == "kind":               # a group not complete: no kind
                    col = pc.if_else(pa.array(complete), col, pa.scalar(None, t))
                mask = None
                if name in decoded:
                    at, values = decoded[name]
                    mask = np.zeros(n, bool)
                    mask[at] = True
                    where = np.zeros(n, np.int64)
                    where[at] = np.arange(len(at))
                    col = pc.if_else(pa.array(mask), pa.array(values, t).take(pa.array(where)),
                                     col)
                if name == "n_bytes":            # ... and for the bytes
                    zero = pa.scalar(0, t)
                    col = pa.repeat(zero, n) if name in names else pc.if_else(
                        pa.array(mask if mask is not None else np.zeros(n, bool)), zero, col)
                cols.append(col)
            yield pa.RecordBatch.from_arrays(cols, schema=GROUP_SCHEMA)

    return run


def reassemble(groups, manifest: dict):
    """``segment_groups`` -> ``GROUP_COLUMNS``: complete groups decoded (``kind`` = ``change``,
    or ``quarantine`` with the decoder's error), incomplete ones with ``kind`` null."""
    from pyspark.sql.pandas.types import from_arrow_schema

    catalogs = {s["name"]: s["catalog"] for s in manifest["sources"]}
    options = {s["name"]: (s["options"], s["timezone"]) for s in manifest["sources"]}
    return groups.mapInArrow(_decode_groups(catalogs, options), from_arrow_schema(GROUP_SCHEMA))


def empty_groups(spark):
    from pyspark.sql.pandas.types import from_arrow_schema

    from ..sparkio import local_frame

    return local_frame(spark, [], from_arrow_schema(GROUP_SCHEMA))


def reassembled_changes(groups):
    """The changes of the decoded groups, as event rows (``from_state`` false)."""
    from pyspark.sql import functions as F

    tags = [c for c in ("_fid", "_row") if c in groups.columns]   # ``wide.SourceFiles.tag``
    return groups.filter(F.col("kind") == "change") \
        .select(*[c for c in EVENT_COLUMNS if c != "seg_data"], *tags) \
        .withColumn("seg_data", F.lit(None).cast("binary")) \
        .withColumn("from_state", F.lit(False))
