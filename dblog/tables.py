"""Typed per-table datasets (SPEC section 5): ``tables/<source>/<schema>.<table>/date=D``.

**One pass over the changes, whatever the number of tables.** The staged changes (only the
columns the tables need) are rebalanced by (source, table_id): rows of one table meet in one
task unless the table is large, when adaptive execution splits it. Each task
(``mapInArrow``) turns the JSON row images of the rows it holds into the catalog's types
with Arrow and writes one Parquet file per table it saw, named after its partition
(``part-<partition>.zstd.parquet``): a retried task overwrites its own file, and the stage
clears ``tables/`` first, so a rerun never leaves a stale file. The job returns one small
row per file written (tables x tasks, never the night).

Values are those of the images' text cast to the catalog's Spark type, as Spark's
``try_cast`` would: every field of the JSON object is read as text (``parse_int`` /
``parse_float`` keep numbers' exact text; a nested object, e.g. a BLOB reference
``{"blob_id": n}``, is kept as compact JSON text), then cast with Arrow; a value that does
not cast (bad text, overflow) becomes null; BINARY/VARBINARY are lower-case hex decoded.
"""

from __future__ import annotations

import json
import shutil
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from decoders.catalog import Column, parse_catalog

from .ordering.schema import CHANGES, read_staged

TABLES = "tables"
ROW_GROUP_ROWS = 65_536       # rows of one table buffered before they are written
TASK_BUFFER_ROWS = 262_144    # rows of all tables buffered by one task before all are written
WRITTEN_DDL = "source STRING, table_id STRING, path STRING, rows LONG"
INPUT_COLUMNS = ["source", "table_id", "op", "commit_seq", "event_seq", "commit_ts", "before", "after"]
META_FIELDS = [("op", pa.string()), ("commit_seq", pa.int64()), ("event_seq", pa.int32()),
               ("commit_ts", pa.timestamp("us", tz="UTC"))]


def spark_type(col: Column) -> str:
    t = col.type
    if t in ("TINYINT", "SMALLINT"):
        return "smallint"
    if t == "INTEGER":
        return "int"
    if t == "BIGINT":
        return "bigint"
    if t == "DECIMAL":
        return f"decimal({col.precision},{col.scale or 0})"
    if t == "REAL" or (t == "FLOAT" and col.length == 4):
        return "float"
    if t in ("DOUBLE", "FLOAT"):
        return "double"
    if t in ("BINARY", "VARBINARY"):
        return "binary"
    if t == "DATE":
        return "date"
    if t == "TIMESTAMP":
        return "timestamp_ntz"
    return "string"  # CHAR, VARCHAR, CLOB, TIME, BLOB (hex or {"blob_id": n})


def arrow_type(spark_name: str) -> pa.DataType:
    simple = {"smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
              "float": pa.float32(), "double": pa.float64(), "binary": pa.binary(),
              "date": pa.date32(), "timestamp_ntz": pa.timestamp("us"), "string": pa.string()}
    if spark_name in simple:
        return simple[spark_name]
    if spark_name.startswith("decimal("):
        p, s = spark_name[len("decimal("):-1].split(",")
        return pa.decimal128(int(p), int(s))
    raise ValueError(f"no Arrow type for {spark_name}")


def table_schema(columns: list[tuple[str, str]]) -> pa.Schema:
    """The typed dataset's schema: op, commit_seq, event_seq, commit_ts, before_*, after_*."""
    fields = [pa.field(n, t) for n, t in META_FIELDS]
    for image in ("before", "after"):
        fields += [pa.field(f"{image}_{name}", arrow_type(st)) for name, st in columns]
    return pa.schema(fields)


# ----------------------------------------------------------------- JSON images -> typed Arrow

class _Number(str):
    """A JSON number's text as it was written (``parse_int``/``parse_float``)."""
    __slots__ = ()


_decode = json.JSONDecoder(parse_int=_Number, parse_float=_Number, parse_constant=_Number).decode


def _raw(value) -> str:
    """A nested JSON value's compact text, numbers as written (Spark's ``from_json`` gives a
    nested object read as a string the same way: ``{"blob_id":869417065180}``)."""
    if isinstance(value, _Number):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_raw(v)}"
                              for k, v in value.items()) + "}"
    return "[" + ",".join(_raw(v) for v in value) + "]"


def _text(value):
    """A field of an image as text: strings and numbers as written, booleans, objects and
    arrays as their compact JSON."""
    if value is None:
        return None
    return str(value) if isinstance(value, str) else _raw(value)


def image_fields(texts: list, names: list[str]) -> list[list]:
    """JSON object texts (or None) -> per name, the field's text (None when absent/null): one
    image at a time (``json``). The careful path of ``field_texts``. An image that is not a
    JSON object (not JSON at all) gives nulls, as Spark's ``from_json`` does."""
    out: list[list] = [[] for _ in names]
    for text in texts:
        try:
            obj = _decode(text) if text is not None else None
        except (ValueError, RecursionError):     # (not JSON; nested past the parser)
            obj = None
        if not isinstance(obj, dict):
            for col in out:
                col.append(None)
            continue
        for col, name in zip(out, names):
            col.append(_text(obj.get(name)))
    return out


# A JSON value as ``image_fields`` reads it, for the images the renderers write: a string
# without raw control characters (JSON forbids them; ``json`` rejects the image), with the
# escapes JSON allows; a number (the grammar of ``json``'s, ASCII digits); a constant; a BLOB
# reference. Anything else (nested values, other spacing) is left to ``image_fields``.
_STRING_TOKEN = r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"'
_VALUE_TOKEN = ("(?:" + _STRING_TOKEN + r"|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"
                r'|null|true|false|NaN|-?Infinity|\{"blob_id": [0-9]+\})')


def _literal(text: str) -> str:
    """``text`` as an RE2 pattern matching it literally (ASCII punctuation as ``\\xHH``)."""
    return "".join(c if c.isalnum() or ord(c) > 127 else f"\\x{ord(c):02x}" for c in text)


def image_pattern(names: list[str]) -> str:
    """An RE2 pattern matching a whole canonical row image of the columns ``names`` in that
    order (``codecs.RowRenderer``: ``{"NAME": value, ...}``)."""
    fields = ", ".join(_literal(json.dumps(n)) + ": " + _VALUE_TOKEN for n in names)
    return r"^\{" + fields + r"\}$"


_QUOTE, _BACKSLASH, _COMMA = ord('"'), ord("\\"), ord(",")


def _escaped(data, quotes):
    """Which of the quotes at ``quotes`` (byte offsets into ``data``) are escaped: preceded
    by an odd run of backslashes (numpy; the runs are short, one step per backslash)."""
    import numpy as np

    esc = np.zeros(len(quotes), bool)
    has = np.flatnonzero(quotes > 0)
    cand = has[data[quotes[has] - 1] == _BACKSLASH]
    run = np.zeros(len(cand), np.int64)
    pos = quotes[cand] - 1
    alive = np.arange(len(cand))
    while len(alive):
        run[alive] += 1
        pos[alive] -= 1
        p = pos[alive]
        alive = alive[(p >= 0) & (data[np.maximum(p, 0)] == _BACKSLASH)]
    esc[cand] = run % 2 == 1
    return esc


def _value_spans(images: pa.Array, ok, names: list[str]):
    """For the images of rows ``ok`` (numpy indexes, increasing), each matched by
    ``image_pattern(names)``: the byte span [start, end) of each column's value in the
    array's data buffer, as two (rows, columns) numpy arrays; None when the images do not
    split as the pattern says (they then take the careful path)."""
    import numpy as np

    k = len(names)
    offsets = np.frombuffer(images.buffers()[1], np.int32)[images.offset:images.offset + len(images) + 1]
    data = np.frombuffer(images.buffers()[2], np.uint8)
    row_start, row_end = offsets[ok].astype(np.int64), offsets[ok + 1].astype(np.int64)
    lo, hi = int(row_start[0]), int(row_end[-1])
    window = data[lo:hi]
    quotes = np.flatnonzero(window == _QUOTE) + lo
    quotes = quotes[~_escaped(data, quotes)]
    commas = np.flatnonzero(window == _COMMA) + lo
    # a comma between two values is outside every string: an even number of unescaped
    # quotes between its image's start and it (a matched image's strings are closed)
    row = np.searchsorted(row_start, commas, "right") - 1
    inside = commas < row_end[row]
    commas, row = commas[inside], row[inside]
    depth = np.searchsorted(quotes, commas) - np.searchsorted(quotes, row_start)[row]
    commas = commas[depth % 2 == 0]
    if len(commas) != len(ok) * (k - 1):
        return None
    cuts = commas.reshape(len(ok), k - 1)
    field_start = np.concatenate([row_start[:, None] + 1, cuts + 2], axis=1)
    ends = np.concatenate([cuts, row_end[:, None] - 1], axis=1)
    prefix = np.array([len(json.dumps(n)) + 2 for n in names], np.int64)
    return field_start + prefix, ends


def _gather(images: pa.Array, starts, ends, order=None) -> pa.Array:
    """The strings at byte spans [starts, ends) (increasing, not overlapping) of the data
    buffer of ``images``, copied once (``take`` of every other string of an array whose
    offsets are the spans' bounds), in span order or in ``order`` (span numbers)."""
    import numpy as np

    n = len(starts)
    if n == 0:
        return pa.array([], pa.string())
    bounds = np.empty(2 * n, np.int32)
    bounds[0::2], bounds[1::2] = starts, ends
    spans = pa.StringArray.from_buffers(2 * n - 1, pa.py_buffer(bounds), images.buffers()[2])
    order = np.arange(n, dtype=np.int64) if order is None else order
    return spans.take(pa.array(2 * order))


# images below which ``field_texts`` reads them one by one: its bulk split costs ~0.5 ms a
# call (the pattern's compilation, numpy calls per column) plus ~1 us an image, ``json``
# 2-10 us an image (docs/BENCHMARK.md, "Twenty-eighth session")
FIELD_TEXTS_BULK_ROWS = 64
FIELD_TEXTS_GROUP_BYTES = 256 << 20    # chunks of a column split together at most


def field_texts(images, names: list[str]) -> list[pa.Array]:
    """Row images (an Arrow string column; null: no image) -> per name, the field's text as
    ``image_fields`` gives it (null when absent or JSON null), as Arrow string arrays.

    The images the decoders write (every catalog column, in order, ``RowRenderer``'s
    spacing) are recognised by one RE2 match per image (``image_pattern``, no capture) and
    cut at the commas between their values (numpy over the column's bytes: the commas
    outside strings); the values are then taken as written (a string without its quotes,
    one with an escape through ``json``, value by value; a BLOB reference as compact JSON).
    An image the pattern does not match (another column order, nested values, invalid
    JSON ...) goes through ``image_fields``, so every image gets exactly the texts
    ``image_fields`` gives (``tests/test_mirror_rules.py``). A column of more than
    ``FIELD_TEXTS_GROUP_BYTES`` is split a group of its chunks at a time."""
    import numpy as np

    if isinstance(images, pa.ChunkedArray):
        groups, size = [[]], 0
        for chunk in images.chunks:
            if size and size + chunk.nbytes > FIELD_TEXTS_GROUP_BYTES:
                groups.append([])
                size = 0
            groups[-1].append(chunk)
            size += chunk.nbytes
        if len(groups) > 1:     # (32-bit string offsets: a group's bytes stay far below 2 GB)
            parts = [field_texts(pa.chunked_array(g, images.type), names) for g in groups]
            return [pa.concat_arrays([p[i] for p in parts]) for i in range(len(names))]
        images = images.combine_chunks()
    if images.type != pa.string():
        images = images.cast(pa.string())
    n = len(images)
    if not names:
        return []
    if n < FIELD_TEXTS_BULK_ROWS:       # few images: the fixed cost of the bulk split is more
        return [pa.array(v, pa.string()) for v in image_fields(images.to_pylist(), names)]
    matched = pc.fill_null(pc.match_substring_regex(images, image_pattern(names)), False) \
        .to_numpy(zero_copy_only=False)
    ok = np.flatnonzero(matched)
    spans = _value_spans(images, ok, names) if len(ok) else None
    if spans is None:
        ok = ok[:0]
    valid = images.is_valid().to_numpy(zero_copy_only=False).copy()
    valid[ok] = False
    rest = np.flatnonzero(valid)
    slow = image_fields(images.take(pa.array(rest, pa.int64())).to_pylist(), names) \
        if len(rest) else None
    k, m = len(names), len(ok)
    if m:
        data = np.frombuffer(images.buffers()[2], np.uint8)
        s, e = spans                                # (m, k) each, ascending row by row
        first = data[s]
        quoted = first == _QUOTE
        s, e = s + quoted, e - quoted               # (a string without its quotes)
        backslashes = np.flatnonzero(data[int(s[0, 0]):int(e[-1, -1])] == _BACKSLASH) + int(s[0, 0])
        odd = quoted & (np.searchsorted(backslashes, e) > np.searchsorted(backslashes, s))
        # every value copied once, column after column (the spans ascend row by row)
        flat = _gather(images, s.ravel(), e.ravel(),
                       np.arange(m * k, dtype=np.int64).reshape(m, k).T.ravel())
        null = (first == ord("n")).T.ravel()
        if null.any():
            flat = pc.if_else(pa.array(null), pa.scalar(None, pa.string()), flat)
        blob = (first == ord("{")).T.ravel()
        if blob.any():     # a BLOB reference: its compact JSON (``_raw``)
            flat = pc.if_else(pa.array(blob), pc.replace_substring(
                flat, '{"blob_id": ', '{"blob_id":', max_replacements=1), flat)
        if m < n:          # the other rows' places: null, then the careful path's values
            place = np.full(n, -1, np.int64)
            place[ok] = np.arange(m)
            at = (place[None, :] + (np.arange(k, dtype=np.int64) * m)[:, None]).ravel()
            flat = flat.take(pa.array(at, mask=np.tile(place < 0, k)))
    else:
        odd = np.zeros((0, k), bool)
        flat = pa.nulls(n * k, pa.string())
    # the values with an escape through ``json``, and the careful rows (position: column * n
    # + row)
    fixes: dict = {}
    if odd.any():
        r, c = np.nonzero(odd)
        raw = _gather(images, spans[0][r, c], spans[1][r, c]).to_pylist()
        fixes.update(zip((c * n + ok[r]).tolist(), (_text(_decode(t)) for t in raw)))
    for i in range(k) if len(rest) else ():
        fixes.update(zip((i * n + rest).tolist(), slow[i]))
    if fixes:
        mask = np.zeros(n * k, bool)
        keys = sorted(fixes)
        mask[keys] = True
        flat = pc.replace_with_mask(flat, pa.array(mask),
                                    pa.array([fixes[x] for x in keys], pa.string()))
    return [flat.slice(i * n, n) for i in range(k)]


def _one(text: str, typ: pa.DataType):
    """One value's cast, as ``try_cast``: None when it does not cast."""
    try:
        if pa.types.is_decimal(typ):
            d = Decimal(text).quantize(Decimal(1).scaleb(-typ.scale), rounding=ROUND_HALF_UP)
            return d if len(d.as_tuple().digits) <= typ.precision else None
        return pc.cast(pa.array([text]), typ)[0].as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, InvalidOperation, ValueError):
        return None


def cast_texts(texts, typ: pa.DataType) -> pa.Array:
    """Field texts (a list or an Arrow string array) -> an Arrow array of ``typ``
    (vectorised; value by value when some fail)."""
    if isinstance(texts, (pa.Array, pa.ChunkedArray)):
        if pa.types.is_string(typ):
            return texts
        if pa.types.is_binary(typ):
            texts = texts.to_pylist()
        else:
            try:
                return pc.cast(texts, typ)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return pa.array([None if t is None else _one(t, typ) for t in texts.to_pylist()],
                                typ)
    if pa.types.is_string(typ):
        return pa.array(texts, pa.string())
    if pa.types.is_binary(typ):
        out = []
        for t in texts:
            try:
                out.append(None if t is None else bytes.fromhex(t))
            except ValueError:
                out.append(None)
        return pa.array(out, pa.binary())
    arr = pa.array(texts, pa.string())
    try:
        return pc.cast(arr, typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.array([None if t is None else _one(t, typ) for t in texts], typ)


def typed_batch(rows: pa.Table, columns: list[tuple[str, str]], schema: pa.Schema) -> pa.Table:
    """Rows of one table (INPUT_COLUMNS) -> its typed rows (``schema``)."""
    names = [n for n, _ in columns]
    arrays = [rows.column(n).cast(t) for n, t in META_FIELDS]
    n = rows.num_rows
    # both images in one column: one match of the pattern, one cast per column
    both = pa.chunked_array([*rows.column("before").cast(pa.string()).chunks,
                             *rows.column("after").cast(pa.string()).chunks], pa.string())
    cast = [cast_texts(vals, arrow_type(st)) for vals, (_, st) in zip(field_texts(both, names), columns)]
    for lo in (0, n):
        arrays += [a.slice(lo, n) for a in cast]
    return pa.Table.from_arrays(arrays, schema=schema)


# ----------------------------------------------------------------- the task

def _groups(keys: pa.Array) -> Iterator[tuple[str, pa.Array]]:
    """(key, row indices) per distinct non-null key of a batch: one sort, no filter per key."""
    import numpy as np

    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    enc = pc.dictionary_encode(keys)
    codes = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    order = np.argsort(codes, kind="stable")
    cuts = np.flatnonzero(np.diff(codes[order])) + 1
    names = enc.dictionary.to_pylist()
    for run in np.split(order, cuts):
        code = int(codes[run[0]]) if len(run) else -1
        if code >= 0:
            yield names[code], pa.array(run, pa.int64())


def write_by_table(render, specs: dict[str, dict]):
    """mapInArrow function: rows holding ``source`` and ``table_id`` -> Parquet files, one
    per output folder of each (source, table) seen by the task, named after its partition
    (``part-<partition>.zstd.parquet``, written under a hidden name and moved: a retried
    task replaces its own file). ``specs``: "source\\0table_id" -> {"outputs": [(folder URI,
    schema), ...], ...}; rows of keys without a spec are skipped. ``render(spec, rows)``
    returns one ``pa.Table`` per output of the spec. Yields (source, table_id, path, rows)
    per key and task (the path of its first output)."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq
        from pyarrow import fs as pafs
        from pyspark import TaskContext

        part = TaskContext.get().partitionId()
        buffers: dict[str, list[pa.Table]] = {}
        buffered = {"rows": 0}
        pending: dict[str, int] = {}        # rows in ``buffers`` per key
        writers: dict[str, list] = {}
        counts: dict[str, int] = {}

        def open_writers(spec: dict) -> list:
            out = []
            for uri, schema in spec["outputs"]:
                filesystem, base = pafs.FileSystem.from_uri(uri)
                filesystem.create_dir(base, recursive=True)
                final = f"{base}/part-{part:05d}.zstd.parquet"
                tmp = f"{base}/.part-{part:05d}.zstd.parquet.tmp"
                out.append((pq.ParquetWriter(tmp, schema, filesystem=filesystem,
                                             compression="zstd"), filesystem, tmp, final))
            return out

        def flush(key: str) -> None:
            tables = buffers.pop(key, [])
            pending.pop(key, None)
            if not tables:
                return
            spec = specs[key]
            rows = pa.concat_tables(tables)
            buffered["rows"] -= rows.num_rows
            if key not in writers:
                writers[key] = open_writers(spec)
            for (writer, *_), table in zip(writers[key], render(spec, rows)):
                writer.write_table(table)
            counts[key] = counts.get(key, 0) + rows.num_rows

        for batch in batches:
            if batch.num_rows == 0:
                continue
            keys = pc.binary_join_element_wise(batch.column("source"), batch.column("table_id"), "\0")
            table = pa.Table.from_batches([batch])
            for key, idx in _groups(keys):
                if key not in specs:
                    continue           # not a table of the specs (e.g. not in the catalog)
                rows = table.take(idx)
                buffers.setdefault(key, []).append(rows)
                buffered["rows"] += rows.num_rows
                pending[key] = pending.get(key, 0) + rows.num_rows
                if pending[key] >= ROW_GROUP_ROWS:
                    flush(key)
            if buffered["rows"] >= TASK_BUFFER_ROWS:
                for key in list(buffers):
                    flush(key)
        for key in list(buffers):
            flush(key)
        out = {"source": [], "table_id": [], "path": [], "rows": []}
        for key, files in writers.items():
            for writer, filesystem, tmp, final in files:
                writer.close()
                filesystem.move(tmp, final)
            source, table_id = key.split("\0", 1)
            out["source"].append(source)
            out["table_id"].append(table_id)
            out["path"].append(files[0][3])
            out["rows"].append(counts[key])
        yield pa.RecordBatch.from_pydict(out, schema=pa.schema(
            [("source", pa.string()), ("table_id", pa.string()), ("path", pa.string()),
             ("rows", pa.int64())]))

    return run


def _render_table(spec: dict, rows: pa.Table) -> list[pa.Table]:
    return [typed_batch(rows, spec["columns"], spec["outputs"][0][1])]


def table_specs(manifest: dict, out_root: Path) -> dict[str, dict]:
    """"source\\0table_id" -> {"outputs": [(the table's date folder, its schema)], "columns":
    [(name, spark type)]}."""
    date = manifest["date"]
    specs = {}
    for src in manifest["sources"]:
        catalog = parse_catalog(src["catalog"], f"<catalog of {src['name']}>")
        for table in catalog.tables:
            folder = Path(out_root) / src["name"] / table.qualified_name / f"date={date}"
            columns = [(c.name, spark_type(c)) for c in table.columns]
            specs[f"{src['name']}\0{table.id}"] = {
                "outputs": [(folder.resolve().as_uri(), table_schema(columns))], "columns": columns}
    return specs


# a night of fewer changes than this is split by rows, not bytes: its shuffle (~120 bytes a
# change) is below Spark's advisory partition size, so the adaptive rebalance gave the
# whole night to one task, while the Python writer costs ~5-10 us a change (200,000
# changes over 500 tables: 2.1 s on one core; docs/BENCHMARK.md, "Twenty-eighth session")
SPLIT_BY_ROWS_BELOW = 1_000_000
TASK_MIN_ROWS = 50_000        # changes below which a night is not split further


def write_tables(changes, specs: dict[str, dict], rows: int | None = None, cores: int = 1):
    """changes (INPUT_COLUMNS) -> the files written (WRITTEN_DDL), as a lazy DataFrame.
    Rows of one table meet in one task: a rebalance by (source, table_id), which adaptive
    execution sizes by bytes and splits when a table is large; a night of ``rows`` changes
    below ``SPLIT_BY_ROWS_BELOW`` is hashed by table into as many partitions as ``cores``
    (at most one per ``TASK_MIN_ROWS``) instead."""
    df = changes.select(*INPUT_COLUMNS)
    if rows is not None and rows < SPLIT_BY_ROWS_BELOW:
        df = df.repartition(max(1, min(cores, -(-rows // TASK_MIN_ROWS))), "source", "table_id")
    else:
        df = df.hint("rebalance", "source", "table_id")
    return df.mapInArrow(write_by_table(_render_table, specs), WRITTEN_DDL)


def tables_stage(spark, manifest: dict, run_dir: Path) -> int:
    """Write one typed dataset per catalog table that has changes tonight; returns how many."""
    run_dir = Path(run_dir)
    out_root = run_dir / TABLES
    if out_root.exists():
        shutil.rmtree(out_root)
    specs = table_specs(manifest, out_root)
    from .ordering.filehook import parquet_files
    from .ordering.stage import parquet_rows

    rows = sum(parquet_rows(f) for f in parquet_files(run_dir / CHANGES))
    written = write_tables(read_staged(spark, run_dir, CHANGES), specs, rows,
                           int(spark.sparkContext.defaultParallelism)).collect()
    return len({(r["source"], r["table_id"]) for r in written})
