"""The ordering stage: decoded events -> changes, transactions, quarantine, audit, next state.

The steps (this package's other modules) are plain ``DataFrame -> DataFrame`` functions;
this module reads the events, applies them and writes the outputs. Memory stays bounded
whatever the night's size: every step is a join or an aggregation on keys (spilled by
Spark; the joins with the transactions hold one partition of their narrow rows, see
``classify.hash_side``), the wide columns (row images) are never shuffled: the published
changes are decided on narrow rows tagged with their file and row index and then taken from
those files by Python tasks of a few files each (``wide``), and narrow intermediate datasets are
materialised under ``<run_dir>/ordering/`` so that every output reads them instead of
recomputing:

``segments``  one row per segment group (reassembled change or outcome); only when a
              source's format writes segments
``trx_counts`` one row per transaction: outcome and published change count
``trx``       the same with the range partition and index for ``commit_seq``
``resolved``  the rows of formats with a ``resolve_transactions`` hook, after it
``seq``       the published changes, narrow: file, row index, commit_seq, event_seq, commit
              position and time (``wide``), by file

The driver collects one table whose size is the number of range partitions (plus two rows
per source): the ``commit_seq`` offsets, the summary and the count of open transactions.
The number of Spark jobs does not depend on the number of sources or tables.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

from decoders.events import EVENT_COLUMNS

from ..accounting import (complete_audit, quarantine_duplicate_positions, unique_sources,
                          units_record)
from ..decode import EVENTS_DIR, spark_event_schema, true_count
from ..sparkio import local_frame, run_concurrently, write_parquet
from ..stage import CARRY_DIR, HELD_DIR, SEQ_FILE
from . import filehook, nightfiles, segfiles, sequence, trxfiles
from .audit import audit, other_buckets
from .classify import QUARANTINED, published_changes, segment_buckets
from .hooks import apply_hooks, format_hooks, has_scope, hooked_rows, scope_table
from .quarantine import (decoder_quarantine, orphan_quarantine, quarantine, quarantine_pieces,
                         segment_quarantine)
from .schema import (AUDIT, AUDIT_COLUMNS, CHANGES, QUARANTINE, QUARANTINE_COLUMNS,
                     STATE, SUMMARY, TRANSACTION_COLUMNS, TRANSACTIONS, WORK, parquet_options)
from .segments import (empty_groups, formats_with_segments, reassemble, reassembled_changes,
                       segment_groups)
from .state import carry_rows, held_rows
from .transactions import PASS_BUCKETS_DDL, TRX_COUNTS_DDL, row_partitions, transaction_counts
from .wide import FID, ROW, SEQ, SourceFiles, seq_columns, write_changes

log = logging.getLogger(__name__)

PIECES_ROUTED = "pieces-routed"   # segment pieces with their group's outcome (``segfiles``)
OPEN_BROADCAST_MAX = 200_000   # open transactions up to which their keys are broadcast
TRX_BROADCAST_MAX = 100_000    # transactions up to which the joins with them broadcast them


def _write(df, path: str) -> None:
    """An intermediate dataset (``ordering/...``), dictionary encoding only where it pays."""
    df.write.mode("overwrite").options(**parquet_options(df.columns)).parquet(path)


def _columns(names: list[str], computed: dict) -> list:
    """``names`` as Columns, those in ``computed`` from its expressions (one ``select``)."""
    from pyspark.sql import functions as F

    return [computed[n].alias(n) if n in computed else F.col(n) for n in names]


def _deferred(df, path: Path, partition_by: tuple[str, ...]):
    """An output's write for ``run_concurrently``, dictionary encoding only where it pays."""
    return write_parquet(df, str(path), partition_by, parquet_options(df.columns))


def _tagged(files: SourceFiles | None, df, folder):
    """``df`` read from ``folder``, with its rows' file and row index when ``files`` numbers
    the files read (``wide.SourceFiles``)."""
    return df if files is None else files.tag(df, folder)


def read_events(spark, manifest: dict, run_dir: Path, files: SourceFiles | None = None):
    """The night's events plus the rows held from earlier nights (``from_state``), repeated
    positions marked; with ``files``, each row tagged with its file and row index (``wide``)."""
    return quarantine_duplicate_positions(spark, read_decoded(spark, manifest, run_dir, files),
                                          manifest, unique_sources(manifest, run_dir))


def read_decoded(spark, manifest: dict, run_dir: Path, files: SourceFiles | None = None):
    """The night's events plus the rows held from earlier nights (``from_state``), as the
    decode and the held-state step wrote them (``read_events`` without the search for
    repeated positions)."""
    from pyspark.sql import functions as F

    schema = spark_event_schema()
    folder = Path(run_dir) / EVENTS_DIR
    ev = _tagged(files, spark.read.schema(schema).parquet(str(folder)), folder) \
        .withColumn("from_state", F.lit(False))
    for s in manifest["sources"]:
        if s.get("prev_held"):
            # state/<source>/<date>/held holds the rows of one source (no partition column)
            old = _tagged(files, spark.read.schema(schema).parquet(s["prev_held"]), s["prev_held"]) \
                .withColumn("source", F.lit(s["name"])).withColumn("from_state", F.lit(True))
            ev = ev.unionByName(old)
    return ev


def _file_inputs(manifest: dict, run_dir: Path, fmt: str) -> list[dict] | None:
    """The Parquet files holding ``fmt``'s rows, as the decode wrote them (its record of the
    units, ``decode_units.json``) and as earlier nights held them: (path, source for a held
    file, from_state); None without the decode's record."""
    units = units_record(run_dir)
    if units is None:
        return None
    mine = [s for s in manifest["sources"] if s["format"] == fmt]
    names = {s["name"] for s in mine}
    folder = Path(run_dir).resolve() / EVENTS_DIR      # (the tasks read them by path)
    out = [{"path": str(folder / u["file"]), "source": None, "from_state": False}
           for u in units if u["source"] in names]
    for s in mine:
        if s.get("prev_held"):
            out += [{"path": p, "source": s["name"], "from_state": True}
                    for p in filehook.parquet_files(Path(s["prev_held"]).resolve())]
    return out


def resolve(spark, ev, manifest: dict, work: Path, files: SourceFiles | None = None,
            run_dir: Path | None = None, as_decoded: bool = False, report: dict | None = None):
    """Apply the formats' ``resolve_transactions`` hooks; the rows they may change (all of a
    format's rows, or those in its ``resolve_scope``) are written once (``ordering/resolved``)
    and read back, so no later query recomputes them; the others are read as decoded.

    A format with a hook on files (``filehook``) runs it instead when its rows are read as
    the decode wrote them (``run_dir`` with the decode's record, and ``as_decoded``: no
    repeated position was marked in ``ev``): the same rows, written by Python tasks into
    the same folder. ``report`` (a dict) gets ``on_files`` and ``on_frames``: the formats
    whose hook ran on files and on DataFrames."""
    from pyspark.sql import functions as F

    hooks = format_hooks({s["format"] for s in manifest["sources"]})
    report = {} if report is None else report
    report.update(on_files=[], on_frames=[])
    if not hooks:
        return ev
    path = work / "resolved"
    by_files = {}
    if run_dir is not None and as_decoded:
        for fmt in hooks:
            if filehook.table_hook(fmt) is not None:
                inputs = _file_inputs(manifest, run_dir, fmt)
                if inputs is not None:
                    by_files[fmt] = inputs
    changed = hooked_rows(hooks)
    plain = ev.drop(FID, ROW)
    on_frames = {f: h for f, h in hooks.items() if f not in by_files}
    for fmt in [f for f in on_frames if has_scope(f)]:
        # a hook that changes only the rows in its scope has nothing to do on a night
        # without one (a Db2 LUW night of the v7 layout: no v10 undo rows); the decode
        # counted them (``scoped_rows``), else looking costs a scan of the columns of its
        # scope, the hook itself several jobs
        mine = {fmt: on_frames[fmt]}
        known = None if run_dir is None else scoped_rows(manifest, run_dir, fmt)
        if known == 0 or (known is None and plain.filter(
                (F.col("format") == fmt) & hooked_rows(mine)).isEmpty()):
            del on_frames[fmt]
    report["on_frames"] = sorted(on_frames)
    report["on_files"] = sorted(by_files)
    if on_frames:
        _write(apply_hooks(plain.filter(F.col("format").isin(*on_frames)), on_frames)
               .filter(hooked_rows(on_frames)), str(path))
    else:
        _fresh(path)
        if not by_files:        # no hook has anything to do: the rows as read
            return ev
    for fmt, inputs in sorted(by_files.items()):
        rows = sum(parquet_rows(x["path"]) for x in inputs)
        try:
            filehook.run(spark, fmt, inputs, path, work, rows)
        except filehook.TooBig as exc:
            # one key with very many rows: the DataFrame hook, whose sort spills
            log.warning("%s; running the DataFrame hook instead", exc)
            report["on_files"].remove(fmt)
            report["on_frames"].append(fmt)
            for p in path.glob(f"part-{fmt}-*.parquet"):
                p.unlink()
            extra = work / f"resolved-{fmt}"
            _write(apply_hooks(plain.filter(F.col("format") == fmt), {fmt: hooks[fmt]})
                   .filter(hooked_rows({fmt: hooks[fmt]})), str(extra))
            for p in filehook.parquet_files(extra):
                os.replace(p, path / f"part-{fmt}-{Path(p).name}")
            shutil.rmtree(extra)
    return ev.filter(~changed).unionByName(
        _tagged(files, spark.read.schema(plain.schema).parquet(str(path)), path))


def carry_count(run_dir: Path) -> int | None:
    """The ``carry`` rows decoded tonight, as the decode counted them per unit; None when a
    unit has no count (``carry_rows`` reads tonight's rows only: the held ones never
    count)."""
    units = units_record(run_dir)
    if units is None or any(not isinstance(u.get("carry"), int) for u in units):
        return None
    return sum(u["carry"] for u in units)


def scoped_rows(manifest: dict, run_dir: Path, fmt: str) -> int | None:
    """The rows of ``fmt`` in its hook's scope (``resolve_scope_table``) among the night's
    events, as the decode counted them per unit (``decode_units.json``), plus those among
    the rows held from earlier nights (read from their files, the columns the scope reads:
    all but the row images); None when a unit has no count (no record, no
    ``resolve_scope_table``). The rows as decoded: a repeated position marked later only
    takes rows out of a scope, so 0 stays 0."""
    import pyarrow.parquet as pq

    scope = scope_table(fmt)
    units = units_record(run_dir)
    if scope is None or units is None:
        return None
    names = {s["name"] for s in manifest["sources"] if s["format"] == fmt}
    mine = [u for u in units if u["source"] in names]
    if any(not isinstance(u.get("scoped"), int) for u in mine):
        return None
    total = sum(u["scoped"] for u in mine)
    for s in manifest["sources"]:
        if s["format"] == fmt and s.get("prev_held"):
            for path in filehook.parquet_files(Path(s["prev_held"])):
                pf = pq.ParquetFile(path)
                cols = [c for c in pf.schema_arrow.names if c not in ("before", "after", "ddl",
                                                                       "seg_data", "raw_hex")]
                for batch in pf.iter_batches(batch_size=filehook.BATCH_ROWS, columns=cols):
                    total += true_count(scope(batch))
    return total


def _fresh(path: Path) -> None:
    """``path`` as an empty folder (a rerun replaces what it held)."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)


def segment_inputs(inputs: list[dict], manifest: dict, run_dir: Path | None,
                   formats) -> list[dict]:
    """Of the pass's ``inputs``, those that may hold a segment piece: a file of a source
    whose format is one of ``formats`` (a held file by its source, a decoded file by the
    decode's record of its unit, a hook's output on files by its name,
    ``part-<format>-...``), and every other file (a DataFrame hook's output)."""
    mine = {s["name"] for s in manifest["sources"] if s["format"] in formats}
    others = {s["format"] for s in manifest["sources"]} - set(formats)
    units = None if run_dir is None else units_record(run_dir)
    by_file = {u["file"]: u["source"] for u in units or []}
    folder = None if run_dir is None else (Path(run_dir) / EVENTS_DIR).resolve()
    out = []
    for x in inputs:
        if x.get("source") is not None:
            source = x["source"]
        elif folder is not None and Path(x["path"]).parent == folder:
            source = by_file.get(Path(x["path"]).name)
        elif any(Path(x["path"]).name.startswith(f"part-{f}-") for f in others):
            continue
        else:
            source = None
        if source is None or source in mine:
            out.append(x)
    return out


def write_segments(spark, ev, manifest: dict, work: Path, files: SourceFiles | None = None,
                   inputs: list[dict] | None = None, rows: int | None = None,
                   report: dict | None = None, run_dir: Path | None = None):
    """Reassemble the segment groups (``ordering/segments``); None when no source's format
    writes segments. ``inputs``: the files holding ``ev``'s rows (``trx_inputs``): the
    reassembly runs on them in Python tasks (``segfiles``) unless a group is too big for
    that; ``rows``: about how many rows they hold."""
    from pyspark.sql import functions as F

    formats = formats_with_segments({s["format"] for s in manifest["sources"]})
    if not formats:
        return None
    path = work / "segments"
    done = False
    if inputs is not None and not any(f in x.get("scoped", ()) for x in inputs for f in formats):
        brief = work / "segments-manifest.json"
        work.mkdir(parents=True, exist_ok=True)
        brief.write_text(json.dumps({"sources": [
            {k: s.get(k) for k in ("name", "format", "catalog", "options", "timezone")}
            for s in manifest["sources"]]}))
        # (only the files that may hold a segment piece: not a decoded or held file of a
        # source whose format writes none)
        mine = segment_inputs(inputs, manifest, run_dir, formats)
        try:
            segfiles.run(spark, mine, brief, path, work,
                         sum(parquet_rows(x["path"]) for x in mine), work / PIECES_ROUTED,
                         trx_rows=rows or 0)
            done = True
        except filehook.TooBig as exc:
            log.warning("%s; reassembling the segments in Spark instead", exc)
    if report is not None:
        report["on_files"] = done
    if not done:
        shutil.rmtree(work / PIECES_ROUTED, ignore_errors=True)
        groups = segment_groups(ev.filter(F.col("kind") == "segment"))
        _write(reassemble(groups, manifest), str(path))
    return _tagged(files, spark.read.schema(empty_groups(spark).schema).parquet(str(path)), path)


class SearchFirst(RuntimeError):
    """The pass on files cannot search for repeated positions (it does not run on files):
    the search runs in Spark first (``quarantine_duplicate_positions``), then the steps;
    ``too_big``: the pass found a transaction too big for it (then it runs in Spark)."""

    def __init__(self, message: str, too_big: bool = False) -> None:
        super().__init__(message)
        self.too_big = too_big


def write_trx_counts(spark, ev, groups, work: Path, rows: int | None = None,
                     inputs: list[dict] | None = None, side: Path | None = None,
                     pieces: Path | None = None, check: set | None = None):
    """``ordering/trx_counts``: one row per transaction (``transactions``) with its published
    change count, written once and read back (the ranking reads it three times: the range
    partitioner's sample, the numbered transactions, the others; and the audit, quarantine
    and held rows read it beside the ranking), beside the audit's buckets of the rows of
    the transactions, which the same pass decides (``_part=audit``). ``rows``: about how
    many rows ``ev`` holds (sizes the step's partitions). ``inputs``: the files holding
    ``ev``'s rows (``trx_inputs``): the pass runs on them in Python tasks (``trxfiles``)
    unless a transaction is too big for that. Returns the transactions read back, their
    rows (from the Parquet footers: no job), the buckets read back, and the pass's bucket
    count when it ran on the files (None in Spark): its published changes are then in
    ``_part=pub`` (``bucketsum.Summary.published``), and with ``side`` the split's side outputs
    there (``trxfiles.Side``), with ``pieces`` the segment pieces' buckets among the
    audit's and the quarantined pieces among the side's quarantine rows. With ``check``
    (source names) the pass on files also searches their rows for repeated positions
    (``trxfiles.run``, which raises ``RepeatedPositions``); ``SearchFirst`` when it cannot
    run on files."""
    base = work / "trx_counts"
    n_buckets = None
    if check and inputs is None:
        raise SearchFirst("ordering: the transactions pass does not run on files")
    if inputs is not None:
        try:
            n_buckets, _ = trxfiles.run(spark, inputs, base, work, rows or 0, side, pieces,
                                        check)
        except filehook.TooBig as exc:
            if check:
                raise SearchFirst(str(exc), too_big=True) from exc
            log.warning("%s; running the transactions pass in Spark instead", exc)
    if n_buckets is None:
        reassembled = None if groups is None else reassembled_changes(groups).select(
            "source", "trx_id", "position")
        df = transaction_counts(ev, reassembled, rows, buckets=True)
        df.write.mode("overwrite").partitionBy("_part") \
            .options(**parquet_options(df.columns)).parquet(str(base))
    out = []
    for part, ddl in ((trxfiles.TRX_PART, TRX_COUNTS_DDL), (trxfiles.AUDIT_PART, PASS_BUCKETS_DDL)):
        folder = base / part
        if folder.is_dir() and filehook.parquet_files(folder):
            out.append(spark.read.schema(ddl).parquet(str(folder)))
        else:                   # no row of that part: no file was written for it
            out.append(spark.createDataFrame([], ddl))
    trx, buckets = out
    folder = base / trxfiles.TRX_PART
    n_trx = parquet_rows(folder) if folder.is_dir() else 0
    return trx, n_trx, buckets, n_buckets


def trx_inputs(manifest: dict, run_dir: Path, work: Path, hooked: dict,
               segments: bool, files: SourceFiles) -> list[dict] | None:
    """The files of the rows the transactions pass reads (``trxfiles.run``): the decoded
    events and the rows held from earlier nights, without the rows a hook replaced
    (``hooked``, ``resolve``'s report: a hook on files or without a scope replaced its
    format's rows, a DataFrame hook with a scope those in it), the hooks' output
    (``ordering/resolved``) and with ``segments`` the reassembled groups
    (``ordering/segments``), each with its number in ``files`` (``fid``). None when the rows
    cannot be told apart in Arrow (a scope without ``resolve_scope_table``), the events
    folder is not the flat folder of files the decode writes, or a file was not numbered."""
    on_files, on_frames = list(hooked.get("on_files", ())), list(hooked.get("on_frames", ()))
    scoped = [f for f in on_frames if has_scope(f)]
    if any(scope_table(f) is None for f in scoped):
        return None
    exclude = sorted([*on_files, *[f for f in on_frames if f not in scoped]])
    folder = (Path(run_dir) / EVENTS_DIR).resolve()
    events = filehook.parquet_files(folder)
    if any(Path(p).parent != folder for p in events):
        return None
    rows = {"role": "rows", "exclude": exclude, "scoped": sorted(scoped)}
    # a decoded file of an excluded format's source holds no row the pass reads: not read
    formats = {s["name"]: s["format"] for s in manifest["sources"]}
    left_out = {u["file"] for u in units_record(run_dir) or []
                if formats.get(u["source"]) in exclude}
    # (``check``: a decoded or held file, whose rows the search for repeated positions reads)
    out = [{**rows, "path": p, "source": None, "from_state": False, "check": True}
           for p in events if Path(p).name not in left_out]
    for s in manifest["sources"]:
        if s.get("prev_held") and s["format"] not in exclude:
            out += [{**rows, "path": p, "source": s["name"], "from_state": True, "check": True}
                    for p in filehook.parquet_files(Path(s["prev_held"]).resolve())]
    if on_files or on_frames:       # (the folder holds what the hooks wrote tonight only then)
        out += [{"path": p, "role": "rows", "source": None, "from_state": None}
                for p in filehook.parquet_files((Path(work) / "resolved").resolve())]
    if segments:
        out += [{"path": p, "role": "segments", "source": None, "from_state": False}
                for p in filehook.parquet_files((Path(work) / "segments").resolve())]
    fids = {p: i for i, p in enumerate(files.paths)}
    if any(x["path"] not in fids for x in out):
        return None
    return [{**x, "fid": fids[x["path"]]} for x in out]


def parquet_rows(where: str | Path) -> int:
    """Rows of a Parquet file, or of a folder of them, from their footers."""
    import pyarrow.parquet as pq

    where = Path(where)
    files = [where] if where.is_file() else [
        f for f in sorted(where.iterdir()) if f.is_file() and not f.name.startswith((".", "_"))]
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def event_rows(manifest: dict, run_dir: Path) -> int:
    """Rows of the night's events and of the rows held from earlier nights, from the Parquet
    footers (no job)."""
    folders = [Path(run_dir) / EVENTS_DIR] + [Path(s["prev_held"]) for s in manifest["sources"]
                                              if s.get("prev_held")]
    return sum(parquet_rows(f) for f in folders if f.is_dir())


def rank_transactions(spark, trx, work: Path, n_trx: int | None = None,
                      n_buckets: int | None = None, transactions: Path | None = None):
    """``ordering/trx``: ``trx_counts`` with, for the transactions that get a ``commit_seq``,
    their range partition and index (``sequence``); ``n_trx``: the rows of ``trx`` (sizes the
    range partitions, ``sequence.rank_partitions``). ``n_buckets``: written by the
    transactions pass's bucket (``trxfiles.bucket_column``: ``_bucket=<b>``), and with one
    range partition ranked in one Python task (``trxfiles.rank``); with ``transactions``
    (their folder, made empty) the sequence step on files then writes the night's
    transactions (``trxfiles.sequence``). Returns the ranked transactions read back, and the
    small table (rows per range partition and source, ``trxfiles.rank_file``) when the
    Python task made it (the ranked transactions are then None with ``transactions``:
    their files hold the numbered ones for the sequence step only), else None."""
    from pyspark.sql import functions as F

    parts = None if n_trx is None else sequence.rank_partitions(n_trx)
    if n_buckets is not None and parts == 1:
        # one range partition: its sort in one Python task, with the small table
        small = trxfiles.rank(spark, work / "trx_counts", n_buckets, work / "trx",
                              transactions)
        if transactions is not None:    # (the ranked files hold what the sequence reads)
            return None, small
        return spark.read.schema(trxfiles.RANKED_DDL).parquet(str(work / "trx")), small
    ranked = sequence.rank_in_partitions(trx.filter(sequence.numbered(trx)), parts)
    rest = trx.filter(~sequence.numbered(trx)) \
        .withColumn("seq_part", F.lit(None).cast("int")) \
        .withColumn("seq_local", F.lit(None).cast("long"))
    path = str(work / "trx")
    out = ranked.unionByName(rest)
    if n_buckets is None:
        _write(out, path)
        return spark.read.parquet(path), None
    out = out.withColumn(trxfiles.BUCKET, trxfiles.bucket_column(n_buckets))
    out.write.mode("overwrite").partitionBy(trxfiles.BUCKET) \
        .options(**parquet_options(out.columns)).parquet(path)
    # (the schema given: a night without transactions writes no partition, no file)
    return spark.read.schema(out.schema).parquet(path), None


def pass_search(manifest: dict, run_dir: Path, proved: set) -> set | None:
    """The sources whose rows the transactions pass on files searches for repeated positions
    (``trxfiles.run``'s ``check``) instead of the Spark search before every step: those the
    decode did not prove (``unique_sources``; a Log Master source, whose records are
    grouped by unit of recovery, never is), when each is of a format without a hook (the
    pass then reads every one of its rows as decoded or held) and the decode's record is
    there. None when there is nothing to search or the pass cannot."""
    left = {s["name"]: s["format"] for s in manifest["sources"] if s["name"] not in proved}
    if not left or units_record(run_dir) is None or format_hooks(set(left.values())):
        return None
    return set(left)


def _prepare(spark, manifest: dict, run_dir: Path, work: Path, proved: set,
             check: set | None, pass_on_files: bool = True, memo: dict | None = None):
    """The steps up to the transactions pass: read the night, mark repeated positions (in
    Spark first, unless ``check``: the pass searches those sources, raising
    ``RepeatedPositions`` or ``SearchFirst``), the hooks, the reassembly, the pass (in
    Spark without ``pass_on_files``). ``memo``: what an earlier try learnt (a segment group
    too big for the reassembly on files: it runs in Spark)."""
    memo = {} if memo is None else memo
    files = SourceFiles()
    decoded = read_decoded(spark, manifest, run_dir, files)
    # every step reads the night from the decoded Parquet again, only the columns it needs
    # (no cache of the wide rows; a night with many repeated positions keeps its marked
    # rows, see accounting)
    read = decoded if check else quarantine_duplicate_positions(spark, decoded, manifest, proved)
    # (no repeated position marked: the same frame; the hooks on files may read the files)
    hooked: dict = {}
    ev = resolve(spark, read, manifest, work, files, run_dir, as_decoded=read is decoded,
                 report=hooked)
    n_rows = event_rows(manifest, run_dir)
    # the reassembly and the transactions pass on the files when the rows are theirs as
    # written (no row marked)
    inputs = trx_inputs(manifest, run_dir, work, hooked, False, files) \
        if read is decoded else None
    if check and inputs is None:
        raise SearchFirst("ordering: the night's rows are not all in the decode's files")
    seg_report: dict = {}
    seg_inputs = None if memo.get("segments_in_spark") else inputs
    groups = write_segments(spark, ev, manifest, work, files, seg_inputs, n_rows, seg_report,
                            run_dir)
    if seg_inputs is not None and groups is not None and not seg_report.get("on_files"):
        memo["segments_in_spark"] = True
    if inputs is not None and groups is not None:
        inputs = trx_inputs(manifest, run_dir, work, hooked, True, files)
    # the split also takes the audit's rows without a transaction, the lost archives and the
    # quarantine rows (``trxfiles.Side``), and the pass buckets the segment pieces (routed
    # by the reassembly on files): no scan of the night for them
    pieces = work / PIECES_ROUTED if seg_report.get("on_files") else None
    side = work / "side" if groups is None or pieces is not None else None
    trx_counts, n_trx, pass_buckets, n_buckets = write_trx_counts(
        spark, ev, groups, work, n_rows, inputs if pass_on_files else None, side, pieces, check)
    if n_buckets is None:
        side = None
    return (files, read, ev, groups, inputs, side, trx_counts, n_trx, pass_buckets, n_buckets,
            n_rows)


def order_stage(spark, manifest: dict, run_dir: Path) -> dict:
    """Write changes, transactions, quarantine, audit and next state under ``run_dir``.
    Returns per source: commit_seq range and counts (small).

    After the transactions are known (``trx_counts``) two chains run side by side: the
    ``commit_seq`` chain (ranking, the one collect, then the changes, the transactions and
    the held rows) and the outputs that need no ``commit_seq`` (audit, quarantine, carry),
    so that the single-task stages of one keep the other core busy."""
    from pyspark.sql import functions as F

    run_dir = Path(run_dir)
    work = run_dir / WORK
    run_id, date = manifest["run_id"], manifest["date"]
    seq_base = {s["name"]: int(s["seq_base"]) for s in manifest["sources"]}

    # the night's events with the held rows, repeated positions marked (by the pass on
    # files, ``pass_search``, else first in Spark)
    proved = unique_sources(manifest, run_dir)
    check = pass_search(manifest, run_dir, proved)
    memo: dict = {}
    try:
        got = _prepare(spark, manifest, run_dir, work, proved, check, memo=memo)
    except (trxfiles.RepeatedPositions, SearchFirst) as exc:
        log.warning("%s; searching for repeated positions in Spark first", exc)
        got = _prepare(spark, manifest, run_dir, work, proved, None,
                       pass_on_files=not getattr(exc, "too_big", False), memo=memo)
    (files, read, ev, groups, inputs, side, trx_counts, n_trx, pass_buckets, n_buckets,
     n_rows) = got
    # a night of few transactions joins them by broadcast: the rows are not shuffled for it
    few = n_trx <= TRX_BROADCAST_MAX

    # (one projection per output, not a chain of ``withColumn``: each call has the driver
    # analyse the whole plan again)
    night = {"run_id": F.lit(run_id), "date": F.lit(date)}
    state_dir = run_dir / STATE
    by_night = ("source", "date")
    changes = ev.filter(F.col("kind") == "change")
    if groups is not None:
        changes = changes.unionByName(reassembled_changes(groups))

    # what needs no commit_seq: buckets and quarantine from the transactions' outcome
    listed = local_frame(spark,
        [(s["name"], s["format"], a["file"]) for s in manifest["sources"] for a in s["archives"]],
        "source STRING, format STRING, archive_file STRING")

    def audit_and_quarantine() -> None:
        """The audit and the quarantine; with segments, the pieces' buckets first, decided
        once for both (``ordering/pieces``: the joins of every piece with its group and
        their transactions; the audit reads tonight's, the quarantine the quarantined)."""
        if side is not None:
            # from the pass's and the split's tables, in the driver (``nightfiles``)
            nightfiles.write_audit(manifest, work / "trx_counts", side, run_dir / AUDIT)
            nightfiles.write_quarantine(manifest, side, run_dir / QUARANTINE)
            return
        pieces = None
        if groups is not None:
            path = str(work / "pieces")
            _write(segment_buckets(quarantine_pieces(ev, with_state=True), groups, trx_counts,
                                   few), path)
            pieces = spark.read.parquet(path)
        out_audit = complete_audit(
            spark, manifest, audit(other_buckets(ev, pass_buckets, trx_counts, groups, few,
                                                 pieces), listed).withColumns(night),
            ev, AUDIT_COLUMNS)
        parts = [decoder_quarantine(ev)]
        if pieces is not None:
            parts.append(segment_quarantine(pieces))
        parts.append(orphan_quarantine(changes))
        out_q = quarantine(*parts).select(*_columns(QUARANTINE_COLUMNS, night))
        run_concurrently([_deferred(out_audit, run_dir / AUDIT, by_night),
                          _deferred(out_q, run_dir / QUARANTINE, by_night)])

    small: list = []
    written: dict = {}

    def sequenced() -> None:
        """The commit_seq chain: rank, the one collect (rows per range partition and
        source, their published changes, open transactions), then the outputs that need
        ``commit_seq`` or the open transactions' count."""
        trx, ranked = rank_transactions(spark, trx_counts, work, n_trx, n_buckets,
                                        run_dir / TRANSACTIONS)
        small.extend(ranked if ranked is not None else trx.groupBy("seq_part", "source").agg(
            F.count(F.lit(1)).alias("n"), F.min("seq_local").alias("first_local"),
            F.sum(F.when(F.col("seq_part").isNotNull(), F.col("event_count")).otherwise(0))
            .alias("n_changes"),
            F.sum(F.when(F.col("status") == "open", 1).otherwise(0)).alias("n_open")).collect())
        counts = [(r["seq_part"], r["source"], r["n"], r["first_local"]) for r in small
                  if r["seq_part"] is not None]
        offsets = sequence.partition_offsets(counts, seq_base)
        if n_buckets is not None:
            # the pass published the changes by bucket: only the commit_seq to add, then the
            # rows taken from their files (and the transactions: by the sequence step after
            # the ranking in Python, else in Spark); no Spark plan of the changes is built
            def changes_on_files() -> None:
                # (and the night's transactions, when the Python ranking made their folder)
                trxfiles.sequence(spark, work / "trx_counts", work / "trx", offsets, n_buckets,
                                  work / SEQ, run_dir / TRANSACTIONS if ranked is not None
                                  else None, run_id, date)
                # the held rows of the open transactions (the pass named them) from the
                # same reads of their files' row groups as the published rows
                _fresh(state_dir / HELD_DIR)
                written.update(write_changes(
                    spark, files, work / SEQ, run_dir / CHANGES, run_id, date,
                    held=trxfiles.held_specs(work / "trx_counts", inputs, state_dir / HELD_DIR)))

            run_concurrently([changes_on_files, *([] if ranked is not None else [_deferred(
                sequence.with_commit_seq(trx, offsets).filter(F.col("status") != "open")
                .select(*_columns(TRANSACTION_COLUMNS, night)), run_dir / TRANSACTIONS,
                by_night)])])
            return
        n_open = sum(int(r["n_open"]) for r in small)
        # commit_seq from the offsets as a constant of each query that reads ``trx`` (a
        # broadcast join with a local table cost each of those queries a job)
        trx = sequence.with_commit_seq(trx, offsets)
        # changes: decided on narrow rows (no row image is shuffled); the published rows
        # are then taken from their files (``wide``). Both sides of the join are partitioned
        # by transaction into as many partitions as the transactions pass, a count AQE keeps
        # (it coalesced the tens of MB of narrow rows into one task while the other core
        # idled); the join and the ``event_seq`` window reuse that partitioning
        n_parts = row_partitions(spark, n_rows)
        narrow = changes.select("source", "trx_id", "position", "trx_order", "archive_file",
                                "record_index", FID, ROW).repartition(n_parts, "source", "trx_id")
        numbered = trx.filter(F.col("commit_seq").isNotNull())
        if not few:
            numbered = numbered.repartition(n_parts, "source", "trx_id")
        published = published_changes(narrow, numbered,
                                       extra=["commit_seq", "commit_position", "commit_ts"],
                                       broadcast=few)
        seq_rows = seq_columns(sequence.event_seq(published))
        out_trx = trx.filter(F.col("status") != "open").select(*_columns(TRANSACTION_COLUMNS, night))
        held = held_rows(ev, trx.filter(F.col("status") == "open"),
                         broadcast=n_open <= OPEN_BROADCAST_MAX)

        def changes_job() -> None:
            _deferred(seq_rows, work / SEQ, (FID,))()
            written.update(write_changes(spark, files, work / SEQ, run_dir / CHANGES, run_id, date))

        run_concurrently([
            changes_job,
            _deferred(out_trx, run_dir / TRANSACTIONS, by_night),
            _deferred(held, state_dir / HELD_DIR, ("source",)),
        ])

    run_concurrently([
        sequenced,
        audit_and_quarantine,
        # (no carry row decoded tonight, as the decode counted them: an empty folder)
        (lambda: _fresh(state_dir / CARRY_DIR)) if carry_count(run_dir) == 0 else
        _deferred(carry_rows(ev), state_dir / CARRY_DIR, ("source",)),
    ])

    read.unpersist()
    expected: dict[str, int] = {}
    for r in small:
        if r["seq_part"] is not None:
            expected[r["source"]] = expected.get(r["source"], 0) + int(r["n_changes"] or 0)
    if {k: v for k, v in written.items() if v} != {k: v for k, v in expected.items() if v}:
        raise RuntimeError(f"ordering: changes written per source {written} differ from the "
                           f"transactions' published counts {expected}")
    counts = [(r["seq_part"], r["source"], r["n"], r["first_local"]) for r in small
              if r["seq_part"] is not None]
    last = sequence.last_sequences(counts, seq_base)
    summary = {}
    for s in manifest["sources"]:
        base = seq_base[s["name"]]
        last_seq, n_numbered = last.get(s["name"], (base, 0))
        summary[s["name"]] = {"seq_base": base, "last_commit_seq": int(last_seq),
                              "published_transactions": int(n_numbered)}
        sdir = state_dir / "seq" / s["name"]
        sdir.mkdir(parents=True, exist_ok=True)
        (sdir / SEQ_FILE).write_text(json.dumps({**summary[s["name"]], "date": date, "run_id": run_id}))
    (run_dir / SUMMARY).write_text(json.dumps(summary, indent=1))
    return summary


def load_summary(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / SUMMARY).read_text())


__all__ = ["order_stage", "load_summary", "read_decoded", "read_events", "EVENT_COLUMNS",
           "QUARANTINED"]
