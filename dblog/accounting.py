"""Accounting (SPEC section 5): every file of the landing zone and every byte of an archive.

The ordering stage computes, per archive, the records read and their buckets; this module
completes that audit with

* one row per file of the landing zone that is not decoded (``entry`` = ``ignored``,
  ``refused`` or ``duplicate``, with ``reason`` and, for a duplicate, ``duplicate_of``);
* bytes beside records: ``bytes_read`` (the file's size; 0 for a refused entry, which is
  never looked at) = ``bytes_decoded`` + ``bytes_quarantined`` + ``bytes_skipped`` (a
  duplicate or ignored file, skipped whole);
* ``lost``: the archive could not be read or its decoder failed, so all its bytes are
  quarantined; ``accepted_loss``: the operator accepted that (``dblog run --accept-loss``).
  A lost archive whose loss is not accepted fails its source's night (suite ``audit``).

It also holds the ordering-level rule that quarantines a record position met twice in one
source's night (``duplicate_position``).
"""

from __future__ import annotations

import json
from pathlib import Path

from .decode import LOST_CLASSES, POSITION_KINDS, UNITS_FILE
from .landing import ARCHIVE, DUPLICATE, DUPLICATE_RULE, IGNORED
from .sparkio import local_frame

AUDIT_EXTRA_COLUMNS = ["entry", "bytes_read", "bytes_decoded", "bytes_quarantined", "bytes_skipped",
                       "lost", "accepted_loss", "duplicate_of", "reason"]
AUDIT_EXTRA_DDL = (
    "entry STRING, bytes_read LONG, bytes_decoded LONG, bytes_quarantined LONG, bytes_skipped LONG, "
    "lost BOOLEAN, accepted_loss BOOLEAN, duplicate_of STRING, reason STRING")
DUPLICATE_POSITION = "duplicate_position"
DUPLICATE_BROADCAST_MAX = 200_000   # repeated positions up to which they are broadcast
REASON_LIMIT = 1000
NO_POSITIONS = ("", "")      # ``_held_range`` of held rows without positions


def _archive_facts(manifest: dict) -> dict:
    """(source, format, archive_file) -> (size, accept_loss) of the night's archives."""
    return {(s["name"], s["format"], a["file"]): (int(a.get("size") or 0), bool(a.get("accept_loss")))
            for s in manifest["sources"] for a in s["archives"]}


def _fact_columns(manifest: dict):
    """Columns ``size`` (long) and ``accept_loss`` (boolean) of the row's archive, looked up
    by (source, format, archive_file) in constant maps of the query (null for an archive
    the manifest does not list, as the left join with a table of the archives gave), so
    that the audit needs no job to broadcast that table."""
    from pyspark.sql import functions as F

    facts = _archive_facts(manifest)
    if not facts:
        return F.lit(None).cast("long"), F.lit(None).cast("boolean")

    def nested(i: int, cast: str):
        tree: dict = {}
        for (source, fmt, archive), values in facts.items():
            tree.setdefault(source, {}).setdefault(fmt, {})[archive] = values[i]

        def build(node, depth):
            if depth == 2:
                return F.create_map(*[x for k in sorted(node) for x in (F.lit(k), F.lit(node[k]).cast(cast))])
            return F.create_map(*[x for k in sorted(node) for x in (F.lit(k), build(node[k], depth + 1))])
        return build(tree, 0)[F.col("source")][F.col("format")][F.col("archive_file")]

    return nested(0, "long"), nested(1, "boolean")


def landing_rows(spark, manifest: dict, columns: list[str]):
    """Audit rows of the files that were not decoded (ignored, refused, duplicate)."""
    from pyspark.sql import functions as F

    rows = []
    for s in manifest["sources"]:
        for e in s.get("landing") or []:
            size = int(e.get("size") or 0)
            skipped = size if e["status"] in (DUPLICATE, IGNORED) else 0
            rules = f'{{"{DUPLICATE_RULE}": 0}}' if e["status"] == DUPLICATE else "{}"
            rows.append((s["name"], s["format"], e["file"], e["status"], size, skipped,
                         e.get("duplicate_of"), (e.get("reason") or "")[:REASON_LIMIT], rules))
    df = local_frame(spark, rows, "source STRING, format STRING, archive_file STRING, "
                                     "entry STRING, bytes_read LONG, bytes_skipped LONG, "
                                     "duplicate_of STRING, reason STRING, skipped_by_rule STRING")
    zero = F.lit(0).cast("long")
    filled = {c: zero for c in ("records_read", "published", "control", "skipped", "held_open",
                                "quarantined", "bytes_decoded", "bytes_quarantined")}
    filled.update(lost=F.lit(False), accepted_loss=F.lit(False),
                  run_id=F.lit(manifest["run_id"]), date=F.lit(manifest["date"]))
    return df.select(*[F.col(c) if c in df.columns else filled[c].alias(c) for c in columns])


def complete_audit(spark, manifest: dict, audit, ev, columns: list[str], lost=None):
    """The per-archive ``audit`` (records and bytes by bucket: ``bytes_decoded``,
    ``bytes_quarantined``) with the file's size, loss and the landing rows.

    ``ev``: the night's events (``from_state`` marks rows carried from state); ``lost``:
    instead, the lost archives already found (source, archive_file, message: one row each,
    the first quarantine row of a ``LOST_CLASSES`` class read tonight)."""
    from pyspark.sql import functions as F

    if lost is None:
        new = ev.filter(~F.col("from_state"))
        lost = new.filter((F.col("kind") == "quarantine")
                          & F.col("error_class").isin(*LOST_CLASSES)) \
            .groupBy("source", "archive_file").agg(F.first("message").alias("message"))
    lost = lost.select("source", "archive_file", F.col("message").alias("lost_reason")) \
        .withColumn("lost", F.lit(True))
    size, accept_loss = _fact_columns(manifest)
    out = audit.withColumns({"size": size, "accept_loss": accept_loss}) \
        .join(lost, ["source", "archive_file"], "left") \
        .withColumn("lost", F.coalesce("lost", F.lit(False))) \
        .withColumn("bytes_read", F.coalesce("size", F.lit(0)).cast("long"))
    out = out.withColumn("entry", F.lit(ARCHIVE)) \
        .withColumn("bytes_skipped", F.lit(0).cast("long")) \
        .withColumn("accepted_loss", F.col("lost") & F.coalesce("accept_loss", F.lit(False))) \
        .withColumn("duplicate_of", F.lit(None).cast("string")) \
        .withColumn("reason", F.substring("lost_reason", 1, REASON_LIMIT)) \
        .select(*columns)
    return out.unionByName(landing_rows(spark, manifest, columns))


def _held_range(folder: str) -> tuple[str, str] | None:
    """(min, max) ``position`` of the rows held from an earlier night, from the Parquet
    footers' statistics (no row is read); ``NO_POSITIONS`` when no held row has one; None
    when a file has no statistics (unknown)."""
    import pyarrow.parquet as pq

    lo = hi = None
    for f in sorted(Path(folder).iterdir()) if Path(folder).is_dir() else []:
        if not f.is_file() or f.name.startswith((".", "_")):
            continue
        meta = pq.ParquetFile(f).metadata
        names = meta.schema.names
        if "position" not in names:
            return None
        col = names.index("position")
        for rg in range(meta.num_row_groups):
            n = meta.row_group(rg).num_rows
            st = meta.row_group(rg).column(col).statistics
            if n == 0 or (st is not None and st.has_null_count and st.null_count == n):
                continue            # no row, or no position: nothing to compare
            if st is None or not st.has_min_max:
                return None
            a, b = (v.decode("utf-8", "replace") if isinstance(v, bytes) else v
                    for v in (st.min, st.max))
            lo = a if lo is None else min(lo, a)
            hi = b if hi is None else max(hi, b)
    return (lo, hi) if lo is not None else NO_POSITIONS


def units_record(run_dir: Path) -> list[dict] | None:
    """The decode's record of its work units (``decode_units.json``: per unit its source,
    events file, rows and position run), or None when there is none or it cannot be read."""
    try:
        units = json.loads((Path(run_dir) / UNITS_FILE).read_text())["units"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(units, list) or not all(
            isinstance(u, dict) and isinstance(u.get("source"), str)
            and isinstance(u.get("file"), str) for u in units):
        return None
    return units


def unique_sources(manifest: dict, run_dir: Path) -> set[str]:
    """The sources whose night the decode proves repeats no record position, so that
    ``quarantine_duplicate_positions`` need not look at their rows: every work unit of the
    source has (position, seg_num) keys that rise strictly (``decode.PositionRun``), the key
    ranges of its units do not overlap, and none overlaps the positions of its rows held
    from earlier nights (their Parquet statistics). A repeat is one within a source's night,
    so each source is proved on its own (a Log Master source, whose records are grouped by
    unit of recovery, never rises, and used to send every source's rows to the search).
    No record of the decode: no source."""
    units = units_record(run_dir)
    if units is None:
        return set()
    runs: dict[str, list] = {}
    falling: set[str] = set()
    for u in units:
        p = u.get("positions") or {}
        if not p.get("rising"):
            falling.add(u["source"])
        elif p.get("first") is not None:
            runs.setdefault(u["source"], []).append((tuple(p["first"]), tuple(p["last"])))
    out = set()
    for s in manifest["sources"]:
        if s["name"] in falling:
            continue
        ranges = sorted(runs.get(s["name"], []))
        if any(not a[1] < b[0] for a, b in zip(ranges, ranges[1:])):
            continue
        if s.get("prev_held") and ranges:
            held = _held_range(s["prev_held"])
            if held is None:
                continue
            if held != NO_POSITIONS and any(not (last[0] < held[0] or first[0] > held[1])
                                        for first, last in ranges):
                continue
        out.add(s["name"])
    return out


def positions_unique(manifest: dict, run_dir: Path) -> bool:
    """True when the decode proves that no record position repeats in any source's night
    (``unique_sources`` holds them all)."""
    return unique_sources(manifest, run_dir) >= {s["name"] for s in manifest["sources"]}


def quarantine_duplicate_positions(spark, ev, manifest: dict, unique: bool | set = False):
    """Events -> events: a record position met again in the same source's night (two archives
    that overlap, a record written twice) is quarantined (``duplicate_position``) wherever it
    comes after its first occurrence: rows carried from state first, then archive order, then
    offset. Only rows that take part in publishing are compared (changes, segments, begin,
    commit, abort, undo); ``skip`` and ``control`` rows publish nothing, and a format may
    write one per piece of a segmented record, all at the record's position. The pieces of
    a segmented change share their record's position and are told apart by ``seg_num``.
    ``unique``: True when the decode proved it for every source (nothing to look for), or
    the set of sources it proved it for (``unique_sources``: their rows are not searched).
    Returns ``ev`` itself when no row was marked."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if isinstance(unique, (set, frozenset)):
        proved = set(unique)
        unique = proved >= {s["name"] for s in manifest["sources"]}
    else:
        proved = set()
    if unique:          # the decode proved it: nothing to look for
        return ev
    candidate = F.col("position").isNotNull() & F.col("kind").isin(*POSITION_KINDS)
    if proved:
        candidate = candidate & ~F.col("source").isin(*sorted(proved))
    key = ["source", "position", "_sn"]
    sn = F.coalesce(F.col("seg_num"), F.lit(0))
    # positions met more than once: one narrow aggregation (it reads four columns), counted
    # first. Usually there are none and the events are returned as read: no wide row is
    # shuffled or joined, and every later step reads only the columns it needs. A few are
    # broadcast; only a night with more than DUPLICATE_BROADCAST_MAX of them joins by a
    # shuffle, and then keeps the result (memory, spilled to disk) so that the shuffle
    # runs once (the caller's ``unpersist`` frees it).
    # The first count groups by a 64-bit hash of (source, position) and ``seg_num``: numbers,
    # not 40-character strings, are shuffled and compared. Rows of one position share its
    # hash, so no group of more than one means no repeated position (the usual night: the
    # events are returned as read); a group of more than one (a repeat, or two positions of
    # one hash) means the exact count below decides.
    if ev.filter(candidate).select(F.xxhash64("source", "position").alias("_h"), sn.alias("_sn")) \
            .groupBy("_h", "_sn").count().filter(F.col("count") > 1).isEmpty():
        return ev
    repeated = ev.filter(candidate).select("source", "position", sn.alias("_sn")) \
        .groupBy(*key).count().filter(F.col("count") > 1) \
        .select(*key, F.lit(True).alias("_dk"))
    n_repeated = repeated.count()
    if n_repeated == 0:
        return ev
    columns = ev.columns
    ev = ev.withColumn("_sn", sn)
    marked = ev.join(F.broadcast(repeated) if n_repeated <= DUPLICATE_BROADCAST_MAX else repeated,
                     key, "left")
    plain = marked.filter(F.col("_dk").isNull()).drop("_dk", "_sn")
    order = local_frame(spark,
        [(s["name"], a["file"], i) for s in manifest["sources"] for i, a in enumerate(s["archives"])],
        "source STRING, archive_file STRING, archive_index INT")
    w = Window.partitionBy(*key).orderBy(
        F.when(F.col("from_state"), 0).otherwise(1), F.coalesce("archive_index", F.lit(-1)),
        "archive_file", "record_offset", "record_index")
    ranked = marked.filter(F.col("_dk")).join(F.broadcast(order), ["source", "archive_file"], "left") \
        .withColumn("_cand", candidate) \
        .withColumn("_rank", F.when(F.col("_cand"), F.row_number().over(w))) \
        .withColumn("_first", F.when(F.col("_cand"), F.first(F.struct("archive_file", "record_offset")).over(w)))
    dup = F.col("_cand") & (F.col("_rank") > 1)
    msg = F.concat(F.lit("position "), F.col("position"), F.lit(" was already read at "),
                   F.col("_first.archive_file"), F.lit(" offset "),
                   F.col("_first.record_offset").cast("string"),
                   F.lit(": the record is not decoded twice"))
    out = ranked \
        .withColumn("error_class", F.when(dup, F.lit(DUPLICATE_POSITION)).otherwise(F.col("error_class"))) \
        .withColumn("message", F.when(dup, msg).otherwise(F.col("message"))) \
        .withColumn("kind", F.when(dup, F.lit("quarantine")).otherwise(F.col("kind")))
    # a quarantined duplicate is no part of any transaction any more
    for c in ("trx_id", "trx_end", "commit_position", "op", "seg_key", "undo_of"):
        out = out.withColumn(c, F.when(dup, F.lit(None).cast("string")).otherwise(F.col(c)))
    out = out.drop("_cand", "_rank", "_first", "archive_index", "_dk", "_sn")
    result = plain.unionByName(out).select(*columns)
    if n_repeated > DUPLICATE_BROADCAST_MAX:
        from pyspark import StorageLevel

        result = result.persist(StorageLevel.MEMORY_AND_DISK)
    return result
