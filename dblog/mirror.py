"""Change products (SPEC section 5): every keyed table mirrored as of each night, and the
night's net changes.

``mirror/<S>/<SCHEMA>.<TABLE>/date=D/`` is the previous night's mirror with night D's
published changes applied in (commit_seq, event_seq) order; ``net_changes/source=S/date=D/``
holds one row per (table, key) that night's changes named. Both are built here, in the
order stage after the typed tables, in one pass over all tables and sources:

* Every row is handled in a generic form: ``key`` (canonical JSON object of the key
  columns, derived from the row image) and ``row`` (the canonical JSON image of the whole
  row, exactly the text the ``changes`` carry). So one DataFrame holds every table of every
  source, and the rules are joins and windows over it, whatever the number of tables.
* The generic rows of a mirror are kept beside its typed files, in the hidden folder
  ``date=D/_rows/`` (readers skip folders starting with ``_``). The next night reads them
  for the tables it changes: the ``before`` of a net change is the exact text the row was
  written with, never a re-rendering of typed values.
* Applying a night: each change becomes *key events* (``c``/``m`` upsert its after key;
  ``u`` removes its before key and upserts its after key, one event when both are the
  same; ``d`` removes its before key). A truncate is not an event of every key (keys x
  truncates did not finish on a 1M night): each key event carries its *epoch*, the number
  of its table's truncates before it (``truncate_epochs``, an equi-join on commit_seq
  bins). Per key, the events are ordered by (commit_seq, event_seq); whether the key is
  present after an event depends on that event alone (upsert: present, removal: absent),
  and a step of the epoch between two events means a truncate removed it in between, so
  "present before this event" is one ``lag`` over the window, seeded by the previous
  mirror. That gives the end state of each named key, the truncates that removed a present
  row (they name it: the first truncate after it was last present), and the
  updates/deletes that found no row (``mirror_missing_base``). Keys of the previous mirror
  that no change names are kept, or removed by the table's first truncate of the night.
* A table the night does not change keeps its previous mirror: its ``date=D`` folder is
  made of hard links to the previous night's files (no Spark job, no rewrite). Only the
  tables changed tonight (and, on their first night, the tables seeded from an
  ``initial_snapshot``) are rewritten, typed as ``published/tables`` in one pass over all
  of them (``dblog.tables.write_by_table``), never one job per table.

Which night is "the previous one": that of the source's previous state (the latest earlier
night published, as for held transactions), so a rerun of a night rebuilds its mirror from
the night before it, and a backfill equals the nights run one by one. See
``previous_mirror`` for the first night, nights before mirrors existed, and reruns of
nights whose previous mirror is past ``mirror_retention``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from decoders.catalog import Column, parse_catalog

from .order import CHANGES, read_staged
from .paths import DataRoot
from .sparkio import local_frame, run_concurrently, write_parquet
from .tables import spark_type

log = logging.getLogger("dblog.mirror")

MIRROR, NET_CHANGES, MIRROR_STATS = "mirror", "net_changes", "mirror_stats"
ROWS_DIR = "_rows"                 # the generic rows of a mirror, beside its typed files
ROWS_STAGED = "mirror_rows"        # staging: the generic rows of the tables rewritten tonight
PREV_STAGED = "mirror_prev"        # staging: their rows at the start of the night (validation)
MIRROR_SUMMARY = "mirror_summary.json"
DEFAULT_RETENTION = 7
ROW_OPS = ("c", "u", "d", "m", "t")
ROWS_DDL = ("source STRING, table_id STRING, key STRING, row STRING, _commit_seq LONG, "
            "_date STRING")
NET_COLUMNS = ["table_id", "schema_name", "table_name", "key", "net_op", "before", "after",
               "first_commit_seq", "last_commit_seq", "n_changes"]
NET_DDL = ("table_id STRING, schema_name STRING, table_name STRING, key STRING, net_op STRING, "
           "before STRING, after STRING, first_commit_seq LONG, last_commit_seq LONG, "
           "n_changes LONG, source STRING, date STRING")
STATS_DDL = ("source STRING, table_id STRING, schema_name STRING, table_name STRING, rows LONG, "
             "mirror_missing_base LONG")


# ----------------------------------------------------------------- which tables, and why not

def mirror_plan(manifest: dict) -> tuple[list[dict], list[dict]]:
    """(tables that get a mirror, tables that do not with the reason), from the manifest.

    A table gets a mirror when its catalog entry has a ``key`` and its format writes row
    images. Small: one entry per catalog table."""
    mirrored, skipped = [], []
    for src in manifest["sources"]:
        catalog = parse_catalog(src["catalog"], f"<catalog of {src['name']}>")
        for t in catalog.tables:
            entry = {"source": src["name"], "format": src["format"], "table_id": t.id,
                     "schema_name": t.schema, "table_name": t.name, "key": list(t.key),
                     "columns": list(t.columns), "snapshot": _snapshot_path(src, t.initial_snapshot)}
            if not t.key:
                skipped.append({**_public(entry), "reason": "no key in the catalog"})
            elif not has_images(src["format"]):
                skipped.append({**_public(entry), "reason": f"{src['format']} logs carry no row "
                                                            "images (changes have row_id only)"})
            else:
                mirrored.append(entry)
    return mirrored, skipped


def has_images(fmt: str) -> bool:
    """Does the format's log carry row images (``HAS_IMAGES`` of its package)?"""
    from decoders import get as get_format

    return bool(getattr(get_format(fmt), "HAS_IMAGES", True))


def _public(entry: dict) -> dict:
    return {k: entry[k] for k in ("source", "table_id", "schema_name", "table_name")}


def _snapshot_path(src: dict, rel: str | None) -> str | None:
    if not rel:
        return None
    base = src.get("catalog_path")
    path = Path(rel) if Path(rel).is_absolute() or not base else Path(base).parent / rel
    return str(path)


def table_dir(name: str, table: dict) -> str:
    return f"{table['schema_name']}.{table['table_name']}"


# ----------------------------------------------------------------- the previous night's mirror

@dataclass(frozen=True)
class Previous:
    """Where a source's mirror continues from.

    ``mode``: ``first`` (no earlier mirror: seed from ``initial_snapshot`` or empty),
    ``chain`` (continue from the mirror of night ``date``), ``gone`` (the previous night's
    mirror is past retention: this night's mirror cannot be rebuilt)."""
    mode: str
    date: str | None = None


def mirror_nights(published: Path, source: str) -> list[str]:
    """Nights whose mirror was built for ``source`` (every such night has a net_changes
    partition, written even when empty; net_changes are kept for every night)."""
    base = published / NET_CHANGES / f"source={source}"
    if not base.is_dir():
        return []
    return sorted(p.name.split("=", 1)[1] for p in base.iterdir() if p.name.startswith("date="))


def retained(nights: list[str], retention: int) -> list[str]:
    """The mirror nights kept: the last ``retention`` nights (per source)."""
    return sorted(nights)[-retention:] if retention > 0 else []


def previous_mirror(published: Path | None, src: dict, date: str) -> Previous:
    """Decide what night ``date`` of source ``src`` (a manifest entry) continues from.

    * no previous state (first night), or a previous night that built no mirror (the
      data root ran before mirrors existed): ``first``, seeded from ``initial_snapshot``;
    * the previous night's mirror is still kept: ``chain`` from it;
    * the previous night built a mirror that ``mirror_retention`` has since removed (a
      rerun of a night older than the retention): ``gone``; the run keeps what the earlier
      run of this night published for its mirror and net changes (see ``carry_published``).
    """
    prev_state = src.get("prev_state")
    if not prev_state or published is None:
        return Previous("first")
    prev = Path(prev_state).name
    nights = mirror_nights(published, src["name"])
    if prev not in nights:
        return Previous("first")
    keep = retained(nights, int(src.get("mirror_retention") or DEFAULT_RETENTION))
    return Previous("chain", prev) if prev in keep else Previous("gone", prev)


def current_published(root: DataRoot) -> Path | None:
    """The published snapshot this run reads (resolved once: one version throughout)."""
    link = root.published
    if not link.exists():
        return None
    return link.resolve()


# ----------------------------------------------------------------- generic rows (Spark)

def _json_string(c):
    """A string column as a JSON string literal, escaped like Python's ``json.dumps``
    (``ensure_ascii=False``): Jackson escapes the same characters, with upper-case hex."""
    from pyspark.sql import functions as F

    text = F.regexp_replace(F.to_json(F.array(c)), r"^\[|\]$", "")
    for code in ("0B", "0E", "0F", "1A", "1B", "1C", "1D", "1E", "1F"):
        text = F.replace(text, F.lit("\\u00" + code), F.lit("\\u00" + code.lower()))
    return text


def _float_parts(s):
    """(digits, decimal point position) of the text ``s`` of a finite non-zero float (Java's
    ``1.0E-5`` or ``%e``'s ``1.000000e-05``): value = 0.<digits> * 10^decpt, digits without
    leading or trailing zeros."""
    from pyspark.sql import functions as F

    body = F.regexp_replace(s, "^-", "")
    exp = F.coalesce(F.regexp_replace(F.regexp_extract(body, r"[Ee]([+-]?[0-9]+)$", 1), r"^\+", "")
                     .try_cast("int"), F.lit(0))
    ip = F.regexp_extract(body, r"^([0-9]*)", 1)
    raw = F.concat(ip, F.regexp_extract(body, r"^[0-9]*\.([0-9]*)", 1))
    stripped = F.regexp_replace(raw, "^0+", "")
    digits = F.regexp_replace(stripped, "0+$", "")
    return digits, F.length(ip) + exp - (F.length(raw) - F.length(stripped))


def _float4_text(c):
    """The shortest ``%e`` text that reads back to the same single (1 to 9 significant
    digits), rounded half to even as Python's ``%e`` (``decoders.codecs.float4_text``) does;
    Java's ``%e`` rounds half up and its ``Float.toString`` is not always the shortest
    before Java 19."""
    from pyspark.sql import functions as F

    d = c.cast("double")
    texts = [F.format_string(f"%.{k}e", d) for k in range(10)]
    found = []
    for k in range(9):
        t, finer = texts[k], texts[k + 1]
        tie = finer.rlike(r"5e[+-]") & (finer.try_cast("double") == d)
        last = F.regexp_extract(t, r"([0-9])e", 1).try_cast("int")
        even = F.when(tie & (last % 2 == 1), F.regexp_replace(
            t, r"[0-9]e", F.concat((last - 1).cast("string"), F.lit("e")))).otherwise(t)
        found.append(F.when(even.try_cast("float") == c, even))
    return F.coalesce(*found)


def _float_layout(c, s, digits, decpt, four: bool):
    """Python's text of a float (``repr`` for doubles; for REAL the shortest single text in
    numpy's layout), from Java's shortest digits: only the layout differs (``1.0E-5``)."""
    from pyspark.sql import functions as F

    nd = F.length(digits)
    sign = F.when(s.startswith("-"), F.lit("-")).otherwise(F.lit(""))
    tail = F.lit("") if four else F.lit(".0")
    positional = F.when(decpt <= 0, F.concat(F.lit("0."), F.repeat(F.lit("0"), -decpt), digits)) \
        .when(decpt >= nd, F.concat(digits, F.repeat(F.lit("0"), decpt - nd), tail)) \
        .otherwise(F.concat(F.substring(digits, 1, decpt), F.lit("."),
                            F.substring(digits, decpt + 1, 1 << 30)))
    e = decpt - 1
    plus = "" if four else "+"
    expo = F.when(e < 0, F.concat(F.lit("e-"), F.format_string("%02d", -e))) \
        .otherwise(F.concat(F.lit("e" + plus), F.format_string("%02d", e)))
    sci = F.concat(F.substring(digits, 1, 1),
                   F.when(nd > 1, F.concat(F.lit("."), F.substring(digits, 2, 1 << 30)))
                   .otherwise(F.lit("")), expo)
    # numpy lays a single out by its value (1e-5 <= |v| < 1e16 positional), repr by the digits
    use_sci = ((F.abs(c) < 1e-5) | (F.abs(c) >= 1e16)) if four else (decpt < -3) | (decpt > 16)
    zero = F.when(s.startswith("-"), F.lit("-0" if four else "-0.0")).otherwise(F.lit("0" if four else "0.0"))
    return F.when(F.isnan(c), F.lit('"NaN"')) \
        .when(c == float("inf"), F.lit('"Infinity"')) \
        .when(c == float("-inf"), F.lit('"-Infinity"')) \
        .when(c == 0, zero) \
        .otherwise(F.concat(sign, F.when(use_sci, sci).otherwise(positional)))


def render_value_sql(c, col: Column):
    """The canonical JSON text (SPEC section 5) of a typed column, as a Spark expression."""
    from pyspark.sql import functions as F

    st = spark_type(col)
    if st in ("smallint", "int", "bigint"):
        text = c.cast("string")
    elif st.startswith("decimal"):
        text = F.concat(F.lit('"'), c.cast("string"), F.lit('"'))
    elif st in ("float", "double"):
        raise ValueError("floats are rendered by render_rows (staged projections)")
    elif st == "binary":
        text = F.concat(F.lit('"'), F.lower(F.hex(c)), F.lit('"'))
    elif st == "date":
        text = F.concat(F.lit('"'), F.date_format(c, "yyyy-MM-dd"), F.lit('"'))
    elif st == "timestamp_ntz":
        text = F.concat(F.lit('"'), F.date_format(c, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"), F.lit('"'))
    elif col.type == "BLOB":
        blob = F.regexp_extract(c, r'^\{"blob_id":\s*([0-9]+)\}$', 1)
        text = F.when(blob != "", F.concat(F.lit('{"blob_id": '), blob, F.lit("}"))) \
            .otherwise(_json_string(c))
    else:
        text = _json_string(c)
    return F.when(c.isNull(), F.lit("null")).otherwise(text)


def render_rows(df, columns: list[Column], out: str = "row"):
    """``df`` (typed columns named as in the catalog) plus ``out``: the canonical JSON object
    of the row. Floats go through three small projections (Java's text, then its digits and
    decimal point, then Python's layout) so that the generated code stays small."""
    from pyspark.sql import functions as F

    floats = [(i, c) for i, c in enumerate(columns) if spark_type(c) in ("float", "double")]
    df = df.withColumns({f"__s{i}": _float4_text(F.col(f"`{c.name}`")) if spark_type(c) == "float"
                         else F.col(f"`{c.name}`").cast("string") for i, c in floats}) \
        if floats else df
    parts = {}
    for i, c in floats:
        d, p = _float_parts(F.col(f"__s{i}"))
        parts[f"__d{i}"], parts[f"__p{i}"] = d, p
    if parts:
        df = df.withColumns(parts)
    texts = []
    for i, col in enumerate(columns):
        c = F.col(f"`{col.name}`")
        if spark_type(col) in ("float", "double"):
            text = F.when(c.isNull(), F.lit("null")).otherwise(_float_layout(
                c, F.col(f"__s{i}"), F.col(f"__d{i}"), F.col(f"__p{i}"), spark_type(col) == "float"))
        else:
            text = render_value_sql(c, col)
        texts += [F.lit(("" if i == 0 else ", ") + json.dumps(col.name) + ": "), text]
    df = df.withColumn(out, F.concat(F.lit("{"), *texts, F.lit("}")))
    return df.drop(*[f"__{k}{i}" for i, _c in floats for k in "sdp"])


def no_rows(spark, ddl: str):
    """An empty frame of ``ddl`` that the optimizer knows to be empty (a zero limit becomes
    an empty local relation): joins, unions and aggregations over it are pruned when the
    query is planned, instead of being run as jobs over an empty input."""
    return local_frame(spark, [], ddl).limit(0)


def key_meta(spark, tables: list[dict]):
    """One row per mirrored table: its key columns, the JSON prefix of each and how its
    value is written in a row image (``num``: bare, ``str``: a JSON string, ``lob``)."""
    rows = []
    for t in tables:
        by_name = {c.name: c for c in t["columns"]}
        kinds = []
        for k in t["key"]:
            st = spark_type(by_name[k])
            kinds.append("num" if st in ("smallint", "int", "bigint", "float", "double")
                         else "lob" if by_name[k].type in ("BLOB",) else "str")
        prefixes = [("" if i == 0 else ", ") + json.dumps(k) + ": " for i, k in enumerate(t["key"])]
        rows.append((t["source"], t["table_id"], t["schema_name"], t["table_name"], list(t["key"]),
                     prefixes, kinds))
    return local_frame(spark,
        rows, "source STRING, table_id STRING, schema_name STRING, table_name STRING, "
              "key_cols ARRAY<STRING>, key_prefix ARRAY<STRING>, key_kind ARRAY<STRING>")


def key_of(image):
    """The JSON object of the key columns of a row image (``key_cols`` and friends from
    ``key_meta`` must be columns of the frame): integers, strings, DECIMAL, dates and times
    exactly as in the row image; a float key as Spark's parser writes it back (``1.5E-7``),
    the same for every image of the same value, so keys match."""
    from pyspark.sql import functions as F

    m = F.from_json(image, "map<string,string>")
    parts = F.transform(
        F.arrays_zip(F.col("key_cols").alias("c"), F.col("key_prefix").alias("p"),
                     F.col("key_kind").alias("k")),
        lambda x: F.concat(x["p"], F.when(m[x["c"]].isNull(), F.lit("null"))
                           .when(x["k"] == "num", m[x["c"]])
                           .when((x["k"] == "lob") & m[x["c"]].startswith("{"),
                                 F.regexp_replace(m[x["c"]], r'^\{"blob_id":', '{"blob_id": '))
                           .otherwise(_json_string(m[x["c"]]))))
    return F.when(image.isNull(), F.lit(None)).otherwise(
        F.concat(F.lit("{"), F.array_join(parts, ""), F.lit("}")))


KEY_SIGNATURES_MAX = 64   # distinct key layouts (columns and kinds) built as one CASE; more: key_of


@dataclass(frozen=True)
class KeyPlan:
    """How the keys of the row images of some tables are extracted (``key_plan``): the key
    columns of all of them (one ``from_json`` schema), the distinct key layouts (a tuple of
    (column, kind) per layout) and each table's layout index."""
    names: tuple
    signatures: tuple
    table_sig: tuple     # ((source, table_id, layout index), ...)


def key_plan(meta) -> KeyPlan | None:
    """The ``KeyPlan`` of the tables of ``meta`` (``key_meta``: a small local frame, read on
    the driver), or None when they have more than ``KEY_SIGNATURES_MAX`` key layouts."""
    rows = meta.select("source", "table_id", "key_cols", "key_kind").collect()
    sigs: dict[tuple, int] = {}
    table_sig, names = [], set()
    for r in rows:
        sig = tuple(zip(r["key_cols"], r["key_kind"]))
        names.update(r["key_cols"])
        table_sig.append((r["source"], r["table_id"], sigs.setdefault(sig, len(sigs))))
    folded = {n.lower() for n in names}
    if len(sigs) > KEY_SIGNATURES_MAX or not sigs or len(folded) < len(names):
        return None      # (names differing only by case: Spark resolves struct fields ignoring case)
    return KeyPlan(tuple(sorted(names)), tuple(sigs), tuple(table_sig))


_ESCAPES = r'["\\\x00-\x1f]'   # a character JSON escapes in a string (none: written as it is)


def _key_text(v, kind: str):
    """The text of one key value ``v`` (a field of ``from_json`` read as a string, as
    ``key_of`` reads it from its map) in the key's JSON, as ``key_of`` writes it."""
    from pyspark.sql import functions as F

    if kind == "num":
        text = v
    else:
        quoted = F.when(~v.rlike(_ESCAPES), F.concat(F.lit('"'), v, F.lit('"'))).otherwise(_json_string(v))
        text = quoted if kind != "lob" else F.when(
            v.startswith("{"), F.regexp_replace(v, r'^\{"blob_id":', '{"blob_id": ')).otherwise(quoted)
    return F.when(v.isNull(), F.lit("null")).otherwise(text)


# the raw JSON tokens a key value is taken as written, because ``key_of`` writes the same
# text: an integer of at most 38 digits (DECIMAL's precision; a BIGINT has 19) with no
# leading zero and not ``-0`` (the parser writes it back as it is, past a long's range
# too: ``tests/test_mirror.py``), a string without escapes (quoted as it is), null
_INT_TOKEN = r"(?:0|-?[1-9][0-9]{0,37})"
_STR_TOKEN = '"[^' + _ESCAPES[1:] + '*"'   # none of the characters ``_key_text`` escapes


def leading_key_pattern(sig) -> str:
    """A Java regular expression matching a row image whose first fields are the key
    columns of the layout ``sig`` ((column, kind), ...), in order, each written with one of
    the tokens ``key_of`` writes back unchanged; group 1 is then exactly the inside of the
    key's JSON object as ``key_of`` writes it (names as ``json.dumps`` writes them, ``": "``
    and ``", "`` between). Anchored at the image's start, so a field of a nested value or a
    string can never match; a BLOB key never matches (its reference object is rewritten)."""
    parts = []
    for name, kind in sig:
        if kind == "lob":
            return r"(?!)"
        token = _INT_TOKEN if kind == "num" else _STR_TOKEN
        parts.append(re.escape(json.dumps(name)) + ": (?:" + token + "|null)")
    return r"^\{(" + ", ".join(parts) + r")(?:, |\})"


def with_keys(df, images: dict, plan: KeyPlan, sig_col: str = "key_sig"):
    """``df`` plus, per ``out: image column`` of ``images``, ``out``: the JSON object of the
    key columns of the image, exactly as ``key_of`` gives it (``sig_col``: the table's key
    layout index, from ``plan.table_sig``).

    The decoders write a row image's fields in catalog order, so a key is mostly the
    image's first fields: then its text is cut from the image as written (one anchored
    regular expression, ``leading_key_pattern``: only tokens that ``key_of`` writes back
    unchanged; catalog column names are unique, so a leading field is the field; an image
    not closed by ``}`` is left to the parser, which reads no field of it). Any other image
    is parsed once, by a ``from_json`` of the key columns alone (the same converter as
    ``key_of``'s map, so the same texts: numbers as written back by the parser, objects as
    compact JSON); the other fields are skipped, not built. The cut costs about a third
    of the parse (docs/BENCHMARK.md, "Seventeenth session")."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType([StructField(n, StringType()) for n in plan.names])
    tmp = {out: (f"__kv_{out}", f"__has_{out}", f"__lead_{out}") for out in images}

    def by_layout(expr_of):
        """``expr_of(sig)`` of the row's key layout (one CASE over ``sig_col``)."""
        if len(plan.signatures) == 1:
            return expr_of(plan.signatures[0])
        out = None
        for i, sig in enumerate(plan.signatures):
            out = F.when(F.col(sig_col) == i, expr_of(sig)) if out is None \
                else out.when(F.col(sig_col) == i, expr_of(sig))
        return out

    def leading(image):
        cut = by_layout(lambda sig: F.regexp_extract(image, leading_key_pattern(sig), 1))
        # an image cut short (not closed) is the parser's: it reads no field of it
        return F.when(image.endswith("}"), cut).otherwise(F.lit(""))

    # the leading cut first (a column of its own, so the parse below is computed only for
    # the images it did not cut; the optimizer keeps a non-trivial expression used twice in
    # its own projection)
    df = df.withColumns({lead: leading(images[out]) for out, (_kv, _h, lead) in tmp.items()})
    df = df.withColumns({
        **{kv: F.when(images[out].isNotNull() & (F.col(lead) == ""), F.from_json(images[out], schema))
           for out, (kv, _h, lead) in tmp.items()},
        **{h: images[out].isNotNull() for out, (_kv, h, _l) in tmp.items()}})
    outs = {}
    for out, (kv, has, lead) in tmp.items():
        def layout(sig):
            parts = [F.lit("{")]
            for i, (name, kind) in enumerate(sig):
                parts += [F.lit(("" if i == 0 else ", ") + json.dumps(name) + ": "),
                          _key_text(F.col(kv).getField(name), kind)]
            return F.concat(*parts, F.lit("}"))
        key = by_layout(layout)
        cut = F.concat(F.lit("{"), F.col(lead), F.lit("}"))
        outs[out] = F.when(F.col(has), F.when(F.col(lead) != "", cut).otherwise(key))
    return df.withColumns(outs).drop(*[c for names in tmp.values() for c in names])


def key_sigs(spark, plan: KeyPlan):
    """(source, table_id, key_sig) of ``plan``: a small local frame to join by table."""
    return local_frame(spark, list(plan.table_sig), "source STRING, table_id STRING, key_sig INT")


# ----------------------------------------------------------------- the stage

def _seed_rows(spark, table: dict, meta):
    """Generic rows of a table's ``initial_snapshot`` (columns by catalog name, cast to the
    catalog's types): ``_commit_seq`` and ``_date`` null (no change applied yet)."""
    from pyspark.sql import functions as F

    path = table["snapshot"]
    where = f"{table['source']} {table['schema_name']}.{table['table_name']}: initial_snapshot {path}"
    if not Path(path).exists():
        raise MirrorError(f"{where}: not found")
    snap = spark.read.parquet(path)
    have = {c.upper(): c for c in snap.columns}
    missing = [c.name for c in table["columns"] if c.name.upper() not in have]
    if missing:
        raise MirrorError(f"{where}: columns {missing} missing (has {snap.columns})")
    cols = [F.col(f"`{have[c.name.upper()]}`").cast(spark_type(c)).alias(c.name)
            for c in table["columns"]]
    rows = render_rows(snap.select(*cols), table["columns"]).select(
        F.lit(table["source"]).alias("source"), F.lit(table["table_id"]).alias("table_id"), "row")
    plan = key_plan(meta)
    if plan is None:
        rows = rows.join(F.broadcast(meta), ["source", "table_id"]) \
            .withColumn("key", key_of(F.col("row")))
    else:
        rows = with_keys(rows.join(F.broadcast(key_sigs(spark, plan)), ["source", "table_id"]),
                         {"key": F.col("row")}, plan)
    return rows.select("source", "table_id", "key", "row",
                       F.lit(None).cast("long").alias("_commit_seq"),
                       F.lit(None).cast("string").alias("_date"))


class MirrorError(RuntimeError):
    pass


TRUNCATE_BROADCAST_MAX = 1_000_000   # truncates of a night broadcast (as epoch intervals) up to this


def truncate_epochs(events, truncs, n_truncates: int | None = None):
    """``events`` (with ``source, table_id, commit_seq, event_seq``) with ``epoch``: how many
    truncates of its table come before it in (commit_seq, event_seq) order, and ``n_t``: the
    table's truncates that night (0 for a table without any). ``truncs``: (source, table_id,
    commit_seq, event_seq) of the night's truncates.

    An equi-join, never events x truncates: the truncates of a table cut its positions into
    intervals (epoch k from the k-th truncate to the next); each interval is listed once for
    every commit_seq *bin* it overlaps, bins of ``B`` = the table's commit_seq span /
    its number of truncates, so the intervals make at most about 2 x truncates rows; an event
    joins the intervals of its (table, bin) and keeps the one holding its position. Events
    before the first truncate have epoch 0, after the last the table's count. The intervals
    are broadcast when ``n_truncates`` (the night's count, if known) is at most
    ``TRUNCATE_BROADCAST_MAX``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ids = ["source", "table_id"]
    cs, es = F.col("commit_seq"), F.col("event_seq")
    per_table = Window.partitionBy(*ids).orderBy(cs, es)
    numbered = truncs.select(*ids, cs, es, F.row_number().over(per_table).alias("tnum"),
                             F.lead(cs).over(per_table).alias("n_cs"),
                             F.lead(es).over(per_table).alias("n_es"))
    stats = truncs.groupBy(*ids).agg(
        F.count(F.lit(1)).alias("n_t"), F.max(F.struct(cs, es)).alias("last_t"),
        F.greatest(F.lit(1), F.floor((F.max(cs) - F.min(cs)) / F.count(F.lit(1)))).cast("long")
        .alias("bin_w"))
    intervals = numbered.filter(F.col("n_cs").isNotNull()).join(stats.select(*ids, "bin_w"), ids) \
        .select(*ids, F.col("tnum").alias("k"), cs.alias("lo_cs"), es.alias("lo_es"),
                F.col("n_cs").alias("hi_cs"), F.col("n_es").alias("hi_es"),
                F.explode(F.sequence(F.floor(cs / F.col("bin_w")).cast("long"),
                                     F.floor(F.col("n_cs") / F.col("bin_w")).cast("long")))
                .alias("bin"))
    small = n_truncates is not None and n_truncates <= TRUNCATE_BROADCAST_MAX
    if small:
        stats, intervals = F.broadcast(stats), F.broadcast(intervals)
    ev = events.join(stats, ids, "left") \
        .withColumn("bin", F.floor(cs / F.col("bin_w")).cast("long"))
    iv = intervals.alias("iv")
    after = lambda c_cs, c_es: (cs > c_cs) | ((cs == c_cs) & (es > c_es))   # noqa: E731
    cond = [ev[c] == iv[c] for c in ids + ["bin"]] + [
        after(F.col("iv.lo_cs"), F.col("iv.lo_es")),
        ~after(F.col("iv.hi_cs"), F.col("iv.hi_es"))]
    out = ev.join(iv, cond, "left")
    last_t = F.col("last_t")
    epoch = F.when(F.col("n_t").isNull(), 0) \
        .when(after(last_t["commit_seq"], last_t["event_seq"]), F.col("n_t")) \
        .otherwise(F.coalesce(F.col("iv.k"), F.lit(0)))
    return out.select(*[ev[c] for c in events.columns],
                      epoch.cast("long").alias("epoch"),
                      F.coalesce(F.col("n_t"), F.lit(0)).cast("long").alias("n_t")), numbered


# A 64-bit hash of (source, table_id, key) leads the keys of the joins and the window by
# key: a sort compares rows by an 8-byte prefix of its first key, and the source (the same
# for every row of a source) left every comparison to the whole strings
KH = "_kh"


def key_hash():
    from pyspark.sql import functions as F

    return F.xxhash64("source", "table_id", "key")


def apply_night(spark, changes, prev, meta, date: str, keep=None, n_truncates: int | None = None):
    """The night's changes applied to the previous mirror rows.

    ``changes``: staged changes (source, table_id, commit_seq, event_seq, op, before, after)
    of mirrored tables; ``prev``: the previous rows (``ROWS_DDL``) of the tables changed
    tonight; ``meta``: ``key_meta``. Returns (new rows of those tables, net changes,
    missing-base counts per table). DataFrame -> DataFrame, no action. ``keep``: a function
    (e.g. ``persist``) applied to the intermediate frame the three results share (one row
    per key named tonight, with its last row image), so that it is computed once. The key
    events are narrow (keys and positions, no row images): the window shuffles and sorts
    keys, and only each key's last upsert takes its image, joined back by change.
    ``n_truncates``: the night's number of truncates when known (``truncate_epochs``).

    Truncates are not events of every key (that was keys x truncates): each key event
    carries its ``epoch`` (``truncate_epochs``). In the window of a key, a step of the epoch
    between two events (or from the start) means a truncate came between them: the key is
    absent before the later event, and the first of those truncates names the key if it was
    present. After the key's last event, a table with more truncates removes it if present
    (the next truncate names it). So a key has its events plus at most one truncate per
    event."""
    keep = keep or (lambda df: df)
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ids = ["source", "table_id"]
    cs, es = F.col("commit_seq"), F.col("event_seq")
    rowed = changes.filter(F.col("op").isin(*ROW_OPS))
    plan = key_plan(meta)
    if plan is None:      # more key layouts than one CASE should hold: the generic key_of
        ch = rowed.join(F.broadcast(meta), ids) \
            .withColumn("kb", key_of(F.col("before"))).withColumn("ka", key_of(F.col("after")))
    else:
        ch = with_keys(rowed.join(F.broadcast(key_sigs(spark, plan)), ids),
                       {"kb": F.col("before"), "ka": F.col("after")}, plan)
    # the key events are narrow: keys and positions, never the row images (an upsert's row
    # is the after image of its change, joined back for each key's last event only)
    is_u = F.col("op") == "u"
    same = F.col("before").isNull() | (F.col("kb") == F.col("ka"))
    # each change's (at most two) events from one projection, exploded: the images are read
    # and parsed once (a filter per kind of event would be pushed below the keys' projection
    # and parse them again)
    up = F.when(F.col("op").isin("c", "m", "u") & F.col("after").isNotNull(), F.struct(
        F.col("ka").alias("key"), F.lit(1).alias("sub"), F.lit("up").alias("act"),
        (is_u & same).alias("check")))
    rm = F.when(((F.col("op") == "d") | (is_u & ~same)) & F.col("before").isNotNull(), F.struct(
        F.col("kb").alias("key"), F.lit(0).alias("sub"), F.lit("rm").alias("act"),
        F.lit(True).alias("check")))
    events = ch.select(*ids, cs, es, F.explode(F.array(up, rm)).alias("e")) \
        .filter(F.col("e").isNotNull()).select(*ids, "e.key", cs, es, "e.sub", "e.act", "e.check") \
        .withColumn(KH, key_hash())
    if n_truncates == 0:      # known: no truncate tonight, no epochs to find
        key_events, numbered = events.withColumn("epoch", F.lit(0).cast("long")) \
            .withColumn("n_t", F.lit(0).cast("long")), None
    else:
        truncs = rowed.filter(F.col("op") == "t").join(F.broadcast(meta.select(*ids)), ids) \
            .select(*ids, cs, es)
        key_events, numbered = truncate_epochs(events, truncs, n_truncates)
    prev = prev.withColumn(KH, key_hash())
    keyed = [KH, *ids, "key"]
    start = prev.select(*keyed, F.col("row").alias("p_row"))
    tl = key_events.join(start.select(*keyed, F.lit(True).alias("in_prev")), keyed, "left") \
        .withColumn("in_prev", F.coalesce("in_prev", F.lit(False)))
    w = Window.partitionBy(*keyed).orderBy(cs, es, "sub")
    whole = w.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    present_after = F.col("act") == "up"
    prior = F.coalesce(F.lag(present_after).over(w), F.col("in_prev"))
    prev_epoch = F.coalesce(F.lag("epoch").over(w), F.lit(0))
    gap = F.col("epoch") > prev_epoch
    tl = tl.withColumn("present_before", ~gap & prior) \
        .withColumn("gap_t", F.when(gap & prior, prev_epoch + 1)) \
        .withColumn("last_event", F.lead("act").over(w).isNull()) \
        .withColumn("tail_t", F.when(F.col("last_event") & present_after
                                     & (F.col("n_t") > F.col("epoch")), F.col("epoch") + 1)) \
        .withColumn("missing_base", F.col("check") & ~F.col("present_before"))
    # what the key's whole timeline says, from the same window (its events, plus the
    # truncates that name it: one before an event after an epoch step where the key was
    # there, ``gap_t``, one after its last event, ``tail_t``; its updates and deletes that
    # found no row): fixed-width values only, so no aggregation ever buffers the row images
    tl = tl.withColumn("k_named", F.count(F.lit(1)).over(whole) + F.count("gap_t").over(whole)) \
        .withColumn("k_first_cs", F.min(cs).over(whole)) \
        .withColumn("k_gap_first", (F.min("epoch").over(whole) > 0) & F.col("in_prev")) \
        .withColumn("k_missing", F.count(F.when(F.col("missing_base"), 1)).over(whole))
    last = tl.filter(F.col("last_event"))
    t_cs = F.lit(None).cast("long")
    first_cs = F.col("k_first_cs")
    if numbered is not None:
        small = n_truncates is not None and n_truncates <= TRUNCATE_BROADCAST_MAX
        hint = F.broadcast if small else (lambda df: df)
        # a gap before the key's first event is the table's first truncate, the earliest
        # naming; the tail's truncate is the latest
        first_t = hint(numbered.filter(F.col("tnum") == 1).select(*ids, F.col("commit_seq").alias("t1_cs")))
        tail = hint(numbered.select(*ids, F.col("tnum").alias("tail_t"), F.col("commit_seq").alias("t_cs")))
        last = last.join(first_t, ids, "left").join(tail, ids + ["tail_t"], "left")
        t_cs = F.col("t_cs")
        first_cs = F.when(F.col("k_gap_first"), F.least(first_cs, F.col("t1_cs"))).otherwise(first_cs)
    by_tail = F.col("tail_t").isNotNull()
    won = ~by_tail & present_after      # the key ends on an upsert: the row is its after image
    per_key = last.select(
        *keyed,
        (F.col("k_named") + by_tail.cast("long")).alias("n_changes"),
        first_cs.alias("first_commit_seq"),
        F.when(by_tail, t_cs).otherwise(cs).alias("last_commit_seq"),
        F.when(by_tail, F.struct(F.lit("t").alias("act"), t_cs.alias("cs")))
        .otherwise(F.struct(F.col("act"), cs.alias("cs"))).alias("last"),
        "in_prev", "k_missing",
        F.when(won, cs).alias("w_cs"), F.when(won, es).alias("w_es"))
    # the winners' row images: one hash join of the keys (the small side, built) with the
    # night's after images by change, no sort of the images
    images = changes.filter(F.col("op").isin("c", "m", "u") & F.col("after").isNotNull()).select(
        *ids, F.col("commit_seq").alias("w_cs"), F.col("event_seq").alias("w_es"),
        F.col("after").alias("w_row"))
    per_key = keep(per_key.hint("shuffle_hash").join(images, ids + ["w_cs", "w_es"], "left")
                   .join(start, keyed, "left"))
    end_present = F.col("last.act") == "up"
    net_named = per_key.select(
        *ids, "key",
        F.when(F.col("in_prev") & end_present, "u").when(end_present, "c")
        .when(F.col("in_prev"), "d").alias("net_op"),
        F.when(F.col("in_prev"), F.col("p_row")).alias("before"),
        F.when(end_present, F.col("w_row")).alias("after"),
        "first_commit_seq", "last_commit_seq", "n_changes").filter(F.col("net_op").isNotNull())
    # rows of the previous mirror that no change names: kept, or removed by the first truncate
    unnamed = prev.join(per_key.select(*keyed), keyed, "left_anti")
    if numbered is None:
        unnamed = unnamed.withColumn("t_seq", F.lit(None).cast("long"))
    else:
        first_trunc = numbered.filter(F.col("tnum") == 1).select(*ids, F.col("commit_seq").alias("t_seq"))
        unnamed = unnamed.join(first_trunc, ids, "left")
    net_trunc = unnamed.filter(F.col("t_seq").isNotNull()).select(
        *ids, "key", F.lit("d").alias("net_op"), F.col("row").alias("before"),
        F.lit(None).cast("string").alias("after"), F.col("t_seq").alias("first_commit_seq"),
        F.col("t_seq").alias("last_commit_seq"), F.lit(1).cast("long").alias("n_changes"))
    kept = unnamed.filter(F.col("t_seq").isNull()).select(*ids, "key", "row", "_commit_seq", "_date")
    upserted = per_key.filter(end_present).select(
        *ids, "key", F.col("w_row").alias("row"), F.col("last.cs").alias("_commit_seq"),
        F.lit(date).alias("_date"))
    names = meta.select(*ids, "schema_name", "table_name")
    net = net_named.unionByName(net_trunc).join(F.broadcast(names), ids)
    missing = per_key.filter(F.col("k_missing") > 0).groupBy(*ids).agg(
        F.sum("k_missing").alias("mirror_missing_base"))
    return kept.unionByName(upserted), net, missing


def _link_tree(src: Path, dst: Path) -> int:
    n = 0
    for dirpath, _dirs, files in os.walk(src):
        target = dst / Path(dirpath).relative_to(src)
        target.mkdir(parents=True, exist_ok=True)
        for f in files:
            try:
                os.link(Path(dirpath) / f, target / f)
            except OSError:
                shutil.copy2(Path(dirpath) / f, target / f)
            n += 1
    return n


def _parquet_rows(folder: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows
               for f in sorted(folder.glob("*.parquet")) if f.is_file())


def mirror_stage(spark, manifest: dict, run_dir: Path) -> dict:
    """Stage ``mirror/``, ``net_changes/`` and ``mirror_stats/`` under ``run_dir``.

    Returns (and writes as ``mirror_summary.json``) per source: how the mirror continued,
    the tables without a mirror and why, and per table rows and ``mirror_missing_base``
    (small: one entry per table)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    run_dir = Path(run_dir)
    date = manifest["date"]
    root = DataRoot.of(manifest["data_root"])
    published = current_published(root)
    tables, skipped = mirror_plan(manifest)
    by_id = {(t["source"], t["table_id"]): t for t in tables}
    prevs = {s["name"]: previous_mirror(published, s, date) for s in manifest["sources"]}
    summary = {s["name"]: {"previous": prevs[s["name"]].__dict__, "tables": [],
                           "without_mirror": [x for x in skipped if x["source"] == s["name"]]}
               for s in manifest["sources"]}
    for name in (MIRROR, NET_CHANGES, MIRROR_STATS, ROWS_STAGED, PREV_STAGED):
        if (run_dir / name).exists():
            shutil.rmtree(run_dir / name)
    building = {s for s, p in prevs.items() if p.mode in ("first", "chain")}
    for s, p in prevs.items():
        if p.mode == "gone":
            log.warning("%s: the mirror of %s, the night before %s, is past mirror_retention; "
                        "the mirror and net changes of %s stay as published before", s, p.date,
                        date, date)
            carry_published(published, s, date, run_dir)
    live = [t for t in tables if t["source"] in building]
    stats: dict[tuple[str, str], dict] = {}
    if live:
        meta = key_meta(spark, live)
        changes = read_staged(spark, run_dir, CHANGES).select(
            "source", "table_id", "commit_seq", "event_seq", "op", "before", "after") \
            .filter(F.col("source").isin(*sorted(building)))
        # one row per table changed tonight (small): which, and how many truncates
        per_table = changes.filter(F.col("op").isin(*ROW_OPS)).groupBy("source", "table_id") \
            .agg(F.sum((F.col("op") == "t").cast("long")).alias("n_t")).collect()
        changed = {(r["source"], r["table_id"]) for r in per_table} & set(by_id)
        n_truncates = sum(int(r["n_t"]) for r in per_table if (r["source"], r["table_id"]) in changed)
        # the previous rows of the tables rewritten tonight; the others are linked as they are
        prev_parts, rewrite = [], set(changed)
        for t in live:
            ident = (t["source"], t["table_id"])
            p = prevs[t["source"]]
            if p.mode == "first":
                if t["snapshot"]:
                    prev_parts.append(_seed_rows(spark, t, meta))
                    rewrite.add(ident)
            elif ident in changed:
                folder = published / MIRROR / t["source"] / table_dir(MIRROR, t) / f"date={p.date}" / ROWS_DIR
                files = sorted(str(f) for f in folder.glob("*.parquet")) if folder.is_dir() else []
                if files:   # Spark skips a folder named _rows: read its files by name
                    prev_parts.append(
                        spark.read.schema("key STRING, row STRING, _commit_seq LONG, _date STRING")
                        .parquet(*files)
                        .select(F.lit(t["source"]).alias("source"),
                                F.lit(t["table_id"]).alias("table_id"), "key", "row",
                                "_commit_seq", "_date"))
        if prev_parts:
            prev = local_frame(spark, [], ROWS_DDL)
            for part in prev_parts:
                prev = prev.unionByName(part)
            prev = prev.persist(StorageLevel.MEMORY_AND_DISK)
        else:
            # no previous rows (first nights without a snapshot): an empty relation the
            # optimizer sees as empty, so the joins and unions with it drop out of the plans
            prev = no_rows(spark, ROWS_DDL)
        night = changes.join(F.broadcast(local_frame(spark,
            sorted(rewrite) or [("", "")], "source STRING, table_id STRING")), ["source", "table_id"])
        # a table seeded tonight without changes still goes through apply_night (no events)
        kept: list = []

        def keep(df):
            kept.append(df.persist(StorageLevel.MEMORY_AND_DISK))
            return kept[-1]

        rows, net, missing = apply_night(spark, night, prev, meta, date, keep, n_truncates)
        specs = mirror_specs([by_id[i] for i in sorted(rewrite)], run_dir, date)
        written: list = []
        missed: list = []
        run_concurrently([
            lambda: written.extend(write_mirrors(rows, specs).collect()),
            lambda: missed.extend(missing.collect()),
            write_parquet(prev.select("source", "table_id", "key", "row"), str(run_dir / PREV_STAGED),
                          ("source",)),
            write_parquet(net.withColumn("date", F.lit(date)).select(*NET_COLUMNS, "source", "date"),
                          str(run_dir / NET_CHANGES), ("source", "date")),
        ])
        counts: dict[tuple[str, str], int] = {}
        for r in written:
            ident = (r["source"], r["table_id"])
            counts[ident] = counts.get(ident, 0) + int(r["rows"])
        missing_by = {(r["source"], r["table_id"]): r["mirror_missing_base"] for r in missed}
        # the generic rows beside the typed files of the rewritten tables; links for the others
        for t in live:
            ident = (t["source"], t["table_id"])
            out = run_dir / MIRROR / t["source"] / table_dir(MIRROR, t) / f"date={date}"
            n = 0
            if ident in rewrite:
                n = counts.get(ident, 0)
                if n:
                    _link_tree(staged_rows_dir(run_dir, *ident), out / ROWS_DIR)
            else:
                p = prevs[t["source"]]
                if p.mode == "chain":
                    src_dir = published / MIRROR / t["source"] / table_dir(MIRROR, t) / f"date={p.date}"
                    if src_dir.is_dir():
                        _link_tree(src_dir, out)
                        n = _parquet_rows(src_dir)
            if n or missing_by.get(ident):
                stats[ident] = {"rows": int(n), "mirror_missing_base": int(missing_by.get(ident, 0))}
        for df in kept:
            df.unpersist()
        prev.unpersist()
    # every source that built its mirror has its net_changes partition, even when empty
    for s in sorted(building):
        part = run_dir / NET_CHANGES / f"source={s}" / f"date={date}"
        if not part.is_dir():
            _empty_parquet(part, NET_DDL, drop=("source", "date"))
    stat_rows = []
    for (s, tid), st in sorted(stats.items()):
        t = by_id[(s, tid)]
        stat_rows.append((s, tid, t["schema_name"], t["table_name"], st["rows"], st["mirror_missing_base"]))
        summary[s]["tables"].append({"table_id": tid, "schema_name": t["schema_name"],
                                     "table_name": t["table_name"], **st})
    local_frame(spark, stat_rows, STATS_DDL).coalesce(1).write.mode("overwrite") \
        .parquet(str(run_dir / MIRROR_STATS))
    (run_dir / MIRROR_SUMMARY).write_text(json.dumps(summary, indent=1))
    return summary


def _rows_schema():
    import pyarrow as pa

    return pa.schema([("key", pa.string()), ("row", pa.string()), ("_commit_seq", pa.int64()),
                      ("_date", pa.string())])


def typed_schema(columns: list[tuple[str, str]]):
    """The typed mirror's schema: the catalog columns typed as in ``published/tables``,
    then ``_commit_seq`` and ``_date``."""
    import pyarrow as pa

    from .tables import arrow_type

    return pa.schema([pa.field(n, arrow_type(st)) for n, st in columns]
                     + [pa.field("_commit_seq", pa.int64()), pa.field("_date", pa.string())])


# characters Spark escapes in a partition folder's value (ExternalCatalogUtils.escapePathName)
_ESCAPED = set(chr(c) for c in range(1, 0x20)) | set('"#%\'*/:=?\\\x7f{[]^')


def escape_path_name(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def staged_rows_dir(run_dir: Path, source: str, table_id: str) -> Path:
    """``mirror_rows/source=S/table_id=T``: the generic rows of a table rewritten tonight."""
    return (Path(run_dir) / ROWS_STAGED / f"source={escape_path_name(source)}"
            / f"table_id={escape_path_name(table_id)}")


def mirror_specs(tables: list[dict], run_dir: Path, date: str) -> dict[str, dict]:
    """``dblog.tables.write_by_table`` specs of the tables rewritten tonight: the typed mirror
    folder and the staged generic rows folder of each."""
    specs = {}
    for t in tables:
        columns = [(c.name, spark_type(c)) for c in t["columns"]]
        out = Path(run_dir) / MIRROR / t["source"] / table_dir(MIRROR, t) / f"date={date}"
        specs[f"{t['source']}\0{t['table_id']}"] = {
            "columns": columns,
            "outputs": [(out.resolve().as_uri(), typed_schema(columns)),
                        (staged_rows_dir(run_dir, t["source"], t["table_id"]).resolve().as_uri(),
                         _rows_schema())]}
    return specs


def _render_mirror(spec: dict, rows):
    """Generic rows of one table -> [its typed rows, its generic rows] (``mirror_specs``)."""
    import pyarrow as pa

    from .tables import cast_texts, field_texts

    columns = spec["columns"]
    fields = field_texts(rows.column("row"), [n for n, _ in columns])
    typed_schema_, rows_schema = spec["outputs"][0][1], spec["outputs"][1][1]
    arrays = [cast_texts(vals, f.type) for vals, f in zip(fields, typed_schema_)]
    meta = [rows.column("_commit_seq").cast(pa.int64()), rows.column("_date").cast(pa.string())]
    generic = pa.Table.from_arrays([rows.column("key").cast(pa.string()),
                                    rows.column("row").cast(pa.string()), *meta], schema=rows_schema)
    return [pa.Table.from_arrays(arrays + meta, schema=typed_schema_), generic]


def write_mirrors(rows, specs: dict[str, dict]):
    """The new generic rows (``ROWS_DDL``) of the tables rewritten tonight -> their typed
    mirror files and staged generic rows, in one pass (``dblog.tables.write_by_table``);
    a lazy DataFrame of the files written (``dblog.tables.WRITTEN_DDL``)."""
    from .tables import WRITTEN_DDL, write_by_table

    return rows.hint("rebalance", "source", "table_id") \
        .mapInArrow(write_by_table(_render_mirror, specs), WRITTEN_DDL)


def _empty_parquet(folder: Path, ddl: str, drop: tuple[str, ...] = ()) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    types = {"STRING": pa.string(), "LONG": pa.int64()}
    fields = []
    for part in ddl.split(", "):
        name, typ = part.split(" ")
        if name not in drop:
            fields.append(pa.field(name, types[typ]))
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({f.name: pa.array([], f.type) for f in fields}),
                   folder / "part-00000-empty.parquet")


def carry_published(published: Path | None, source: str, date: str, run_dir: Path) -> None:
    """Stage what is published for ``date`` of ``source`` (mirror folders and net changes)
    as it is: a rerun whose previous mirror is gone keeps them."""
    if published is None:
        return
    for tdir in sorted((published / MIRROR / source).glob(f"*/date={date}")):
        _link_tree(tdir, run_dir / MIRROR / source / tdir.parent.name / tdir.name)
    net = published / NET_CHANGES / f"source={source}" / f"date={date}"
    if net.is_dir():
        _link_tree(net, run_dir / NET_CHANGES / f"source={source}" / f"date={date}")


def load_mirror_summary(run_dir: Path) -> dict:
    path = Path(run_dir) / MIRROR_SUMMARY
    return json.loads(path.read_text()) if path.is_file() else {}


# ----------------------------------------------------------------- dblog mirror (the CLI)

def locate(published: Path | None, source: str, table: str, as_of: str | None,
           retention: int) -> tuple[str | None, Path | None, str]:
    """(night, folder or None, message) of ``table`` (``SCHEMA.TABLE``) of ``source`` as of
    night ``as_of`` (default: the latest night with a mirror). The night used is the latest
    night at or before ``as_of`` that built the source's mirror; the folder is None when the
    table held no rows then, or when that night is past ``mirror_retention``."""
    nights = mirror_nights(published, source) if published is not None else []
    usable = [n for n in nights if as_of is None or n <= as_of]
    if not usable:
        when = f"on or before {as_of}" if as_of else "yet"
        return None, None, f"no mirror of {source} published {when}"
    night = usable[-1]
    folder = published / MIRROR / source / table / f"date={night}"
    note = "" if as_of is None or night == as_of else f" (the latest night on or before {as_of})"
    if folder.is_dir():
        return night, folder, f"{source} {table} as of {night}{note}"
    if night not in retained(nights, retention):
        return night, None, (f"the mirror of {source} as of {night}{note} is past mirror_retention "
                             f"({retention} nights kept: {', '.join(retained(nights, retention))})")
    return night, None, f"{source} {table} held no rows as of {night}{note}"


def show_rows(folder: Path, n: int) -> str:
    """The first ``n`` rows of a mirror folder, as text (pyarrow; the hidden ``_rows`` is skipped)."""
    import pyarrow.dataset as ds

    table = ds.dataset(str(folder), format="parquet").head(n)
    return table.to_pandas().to_string(index=False, max_colwidth=40)


def mirror_command(args) -> int:
    """``dblog mirror``: print where a table's mirror as of a night lies (and its first rows)."""
    import sys

    from decoders.errors import ConfigError

    from .config import load_config

    try:
        src = load_config(args.config).source(args.source)
        catalog = src.catalog()
    except ConfigError as exc:
        print(f"dblog: configuration error: {exc}", file=sys.stderr)
        return 2
    table = next((t for t in catalog.tables if t.qualified_name == args.table), None)
    if table is None:
        print(f"dblog mirror: {args.source} has no table {args.table} in its catalog "
              f"({', '.join(t.qualified_name for t in catalog.tables)})", file=sys.stderr)
        return 2
    if not table.key or not has_images(src.format):
        why = "no key in the catalog" if not table.key else f"{src.format} logs carry no row images"
        print(f"dblog mirror: {args.source} {args.table} has no mirror: {why}", file=sys.stderr)
        return 1
    root = DataRoot.of(args.data_root)
    published = root.published if root.published.exists() else None
    night, folder, message = locate(published, args.source, args.table, args.as_of,
                                    src.mirror_retention)
    if folder is None:
        print(f"dblog mirror: {message}", file=sys.stderr)
        return 1 if night is None or "retention" in message else 0
    print(folder)
    if args.show:
        print(f"# {message}; first {args.show} rows")
        print(show_rows(folder, args.show))
    return 0


# ----------------------------------------------------------------- check datasets (validation)

PREV_DDL = "source STRING, table_id STRING, key STRING, row STRING"
DDL = {ROWS_STAGED: ROWS_DDL, PREV_STAGED: PREV_DDL, NET_CHANGES: NET_DDL, MIRROR_STATS: STATS_DDL}


def read_mirror_staged(spark, run_dir: Path, dataset: str):
    """A staged mirror dataset with its fixed schema (empty when the night staged none)."""
    path = Path(run_dir) / dataset
    if not path.is_dir():
        return local_frame(spark, [], DDL[dataset])
    return spark.read.schema(DDL[dataset]).parquet(str(path))


def prepare_mirror(spark, manifest: dict, run_dir: Path):
    """One row per table rewritten tonight: rows, distinct keys, ``keys_unique``."""
    from pyspark.sql import functions as F

    rows = read_mirror_staged(spark, run_dir, ROWS_STAGED)
    return rows.groupBy("source", "table_id").agg(
        F.count(F.lit(1)).alias("rows"), F.count_distinct("key").alias("keys"),
        F.sum(F.col("key").isNull().cast("long")).alias("null_keys")) \
        .select("source", "table_id", "rows", "keys",
                ((F.col("rows") == F.col("keys")) & (F.col("null_keys") == 0)).alias("keys_unique"))


def prepare_net_changes(spark, manifest: dict, run_dir: Path):
    """Net changes against the mirrors they join: one row per net change (``consistent``:
    ``before`` is the previous mirror's row, ``after`` the new one's, ``net_op`` follows from
    which exist, counts and sequence numbers in order), plus one row (``consistent`` false)
    per key whose row differs between the two mirrors without a net change."""
    from pyspark.sql import functions as F

    ids = ["source", "table_id", "key"]
    prev = read_mirror_staged(spark, run_dir, PREV_STAGED).select(*ids, F.col("row").alias("p_row"))
    cur = read_mirror_staged(spark, run_dir, ROWS_STAGED).select(*ids, F.col("row").alias("c_row"))
    net = read_mirror_staged(spark, run_dir, NET_CHANGES)
    # a source whose previous mirror is past retention keeps what was published (carried, not
    # rebuilt): there is no staged pair of mirrors to check its net changes against
    carried = sorted(s for s, v in load_mirror_summary(run_dir).items()
                     if v.get("previous", {}).get("mode") == "gone")
    if carried:
        net = net.filter(~F.col("source").isin(*carried))
    both = prev.join(cur, ids, "full")
    checked = net.join(both, ids, "left").select(
        *ids, "net_op",
        F.coalesce(
            F.col("before").eqNullSafe(F.col("p_row")) & F.col("after").eqNullSafe(F.col("c_row"))
            & (F.col("net_op") == F.when(F.col("p_row").isNull(), "c")
               .when(F.col("c_row").isNull(), "d").otherwise("u"))
            & (F.col("n_changes") >= 1) & (F.col("first_commit_seq") <= F.col("last_commit_seq")),
            F.lit(False)).alias("consistent"))
    unexplained = both.filter(~F.col("p_row").eqNullSafe(F.col("c_row"))) \
        .join(net.select(*ids), ids, "left_anti") \
        .select(*ids, F.lit(None).cast("string").alias("net_op"), F.lit(False).alias("consistent"))
    return checked.unionByName(unexplained)


def prepare_missing_base(spark, manifest: dict, run_dir: Path):
    """One row per source: ``mirror_missing_base`` of the night and the source's optional
    ``mirror_missing_base_limit`` (no limit: always within)."""
    from pyspark.sql import functions as F

    stats = read_mirror_staged(spark, run_dir, MIRROR_STATS).groupBy("source") \
        .agg(F.sum("mirror_missing_base").alias("mirror_missing_base"))
    limits = local_frame(spark,
        [(s["name"], s.get("mirror_missing_base_limit")) for s in manifest["sources"]],
        "source STRING, mirror_missing_base_limit LONG")
    total = F.coalesce(F.col("mirror_missing_base"), F.lit(0)).cast("long")
    return limits.join(stats, "source", "left").select(
        "source", total.alias("mirror_missing_base"), "mirror_missing_base_limit",
        (F.col("mirror_missing_base_limit").isNull() | (total <= F.col("mirror_missing_base_limit")))
        .alias("within_limit"))
