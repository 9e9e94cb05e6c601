"""The night's audit and quarantine from what the transactions pass on files found, without
a Spark job.

When the transactions pass runs on the night's files (``trxfiles``), its split tasks also
take the audit's buckets of the rows read tonight without a transaction, the lost archives
and the quarantine rows (``trxfiles.Side``), and its summarise tasks the buckets of the rows
of the transactions (``_part=audit``). What remains of the audit is a table of one row per
archive and bucket: the Spark steps (``audit.audit``, ``accounting.complete_audit``) cost a
plan and code generation of their own, several seconds at the end of the ordering on a
JVM whose two cores run the changes' tasks (docs/BENCHMARK.md, "Twenty-second session").
Here the same rules run on those small tables in the driver with pyarrow, and the outputs are
written as the Spark write lays them out (``<dataset>/source=<S>/date=<D>/``, the columns
of ``schema.AUDIT_DDL`` and ``QUARANTINE_DDL``). The quarantine rows are rewritten one split
task's file at a time (memory: one decode unit's quarantine rows).

The Spark steps stay the contract: the stage uses them whenever the pass ran in Spark or
the night has segments; ``tests/test_ordering_trxfiles.py`` compares both through
``dblog run``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ..accounting import REASON_LIMIT, _archive_facts
from ..decode import hidden_temp
from ..landing import ARCHIVE, DUPLICATE, DUPLICATE_RULE, IGNORED
from . import filehook
from .classify import HELD, QUARANTINED
from .schema import AUDIT_COLUMNS, QUARANTINE_COLUMNS

SKIPPED = "skipped:"
_LONG = ("records_read", "published", "control", "skipped", "held_open", "quarantined",
         "bytes_read", "bytes_decoded", "bytes_quarantined", "bytes_skipped")
_BOOL = ("lost", "accepted_loss")
AUDIT_SCHEMA = pa.schema([(c, pa.int64() if c in _LONG else pa.bool_() if c in _BOOL
                           else pa.string()) for c in AUDIT_COLUMNS])
QUARANTINE_SCHEMA = pa.schema([(c, pa.int64() if c in ("record_offset", "n_records", "n_bytes")
                                else pa.string()) for c in QUARANTINE_COLUMNS])


def _tables(folder: Path) -> list[pa.Table]:
    import pyarrow.parquet as pq

    return [pq.read_table(f) for f in filehook.parquet_files(folder)] if folder.is_dir() else []


def _sum(values: list) -> int | None:
    """Spark's ``sum``: null when every value is null."""
    got = [v for v in values if v is not None]
    return sum(got) if got else None


def audit_rows(manifest: dict, buckets: list[dict], lost: dict) -> list[dict]:
    """``audit.audit`` then ``accounting.complete_audit`` on plain rows: ``buckets`` (source,
    format, archive_file, bucket, n_records, n_bytes: the rows read tonight, summed by
    bucket or not), ``lost`` ((source, archive_file) -> the first message of a lost
    archive). One row per archive the manifest lists (those with no record too, the
    others left out), then the landing zone's rows; ``AUDIT_COLUMNS`` each."""
    per_bucket: dict = {}
    for r in buckets:
        k = (r["source"], r["format"], r["archive_file"], r["bucket"])
        got = per_bucket.setdefault(k, ([], []))
        got[0].append(r["n_records"])
        got[1].append(r["n_bytes"])
    by_archive: dict = {}
    for (source, fmt, archive, bucket), (n, nb) in per_bucket.items():
        by_archive.setdefault((source, fmt, archive), []).append((bucket, _sum(n), _sum(nb)))
    facts = _archive_facts(manifest)
    night = {"run_id": manifest["run_id"], "date": manifest["date"]}
    out = []
    for source, fmt, archive in sorted(facts):
        rows = by_archive.get((source, fmt, archive), [])

        def total(cond, i=1):
            return _sum([r[i] for r in rows if r[0] is not None and cond(r[0])]) or 0

        rules = sorted((b[len(SKIPPED):len(SKIPPED) + 200], n) for b, n, _ in rows
                       if b is not None and b.startswith(SKIPPED))
        size, accept_loss = facts[(source, fmt, archive)]
        reason = lost.get((source, archive))
        is_lost = (source, archive) in lost
        out.append({
            **night, "source": source, "format": fmt, "archive_file": archive,
            "records_read": _sum([n for _, n, _ in rows]) or 0,
            "published": total(lambda b: b == "published"),
            "control": total(lambda b: b == "control"),
            "skipped": total(lambda b: b.startswith(SKIPPED)),
            "held_open": total(lambda b: b == HELD),
            "quarantined": total(lambda b: b == QUARANTINED),
            "skipped_by_rule": json.dumps(dict(rules), separators=(",", ":"), ensure_ascii=False),
            "entry": ARCHIVE, "bytes_read": int(size or 0),
            "bytes_decoded": total(lambda b: b != QUARANTINED, 2),
            "bytes_quarantined": total(lambda b: b == QUARANTINED, 2),
            "bytes_skipped": 0, "lost": is_lost, "accepted_loss": is_lost and bool(accept_loss),
            "duplicate_of": None, "reason": None if reason is None else reason[:REASON_LIMIT]})
    for s in manifest["sources"]:
        for e in s.get("landing") or []:
            size = int(e.get("size") or 0)
            out.append({
                **night, "source": s["name"], "format": s["format"], "archive_file": e["file"],
                "records_read": 0, "published": 0, "control": 0, "skipped": 0, "held_open": 0,
                "quarantined": 0,
                "skipped_by_rule": f'{{"{DUPLICATE_RULE}": 0}}' if e["status"] == DUPLICATE
                else "{}",
                "entry": e["status"], "bytes_read": size, "bytes_decoded": 0,
                "bytes_quarantined": 0,
                "bytes_skipped": size if e["status"] in (DUPLICATE, IGNORED) else 0,
                "lost": False, "accepted_loss": False, "duplicate_of": e.get("duplicate_of"),
                "reason": (e.get("reason") or "")[:REASON_LIMIT]})
    return out


def write_by_source(table: pa.Table, out_dir: Path, date: str, name: str, **options) -> None:
    """``table`` (with ``source`` and ``date``) as Spark's ``partitionBy("source", "date")``
    lays it out: ``<out_dir>/source=<S>/date=<D>/<name>``, those two columns in the names;
    ``options``: ``pq.write_table``'s (zstd by default)."""
    import pyarrow.parquet as pq

    from ..mirror import escape_path_name

    sources = table.column("source")
    rest = table.drop_columns(["source", "date"])
    for s in pc.unique(sources).to_pylist():
        folder = out_dir / f"source={escape_path_name(s)}" / f"date={escape_path_name(date)}"
        folder.mkdir(parents=True, exist_ok=True)
        final = str(folder / name)
        tmp = hidden_temp(final)
        try:
            pq.write_table(rest.filter(pc.equal(sources, s)), tmp,
                           **{"compression": "zstd", **options})
            os.replace(tmp, final)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _fresh(folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)


def write_audit(manifest: dict, pass_dir: Path, side_dir: Path, out_dir: Path) -> int:
    """The night's audit (``out_dir``, replaced) from the pass's buckets
    (``pass_dir/_part=audit``) and the split's (``side_dir/other``, ``side_dir/lost``).
    Returns its rows."""
    from .trxfiles import AUDIT_PART

    buckets = []
    for t in _tables(Path(pass_dir) / AUDIT_PART) + _tables(Path(side_dir) / "other"):
        buckets += t.select(["source", "format", "archive_file", "bucket", "n_records",
                             "n_bytes"]).to_pylist()
    lost: dict = {}
    for t in _tables(Path(side_dir) / "lost"):
        for r in t.to_pylist():
            lost.setdefault((r["source"], r["archive_file"]), r["message"])
    rows = audit_rows(manifest, buckets, lost)
    out_dir = Path(out_dir)
    _fresh(out_dir)
    if rows:
        write_by_source(pa.Table.from_pylist(rows, schema=AUDIT_SCHEMA), out_dir,
                         manifest["date"], "part-00000.zstd.parquet")
    return len(rows)


def write_quarantine(manifest: dict, side_dir: Path, out_dir: Path) -> int:
    """The night's quarantine (``out_dir``, replaced) from the split tasks' quarantine rows
    (``side_dir/quarantine``), one task's file at a time. Returns its rows."""
    import pyarrow.parquet as pq

    out_dir = Path(out_dir)
    _fresh(out_dir)
    folder = Path(side_dir) / "quarantine"
    total = 0
    for i, f in enumerate(filehook.parquet_files(folder) if folder.is_dir() else []):
        t = pq.read_table(f)
        n = t.num_rows
        t = t.append_column("run_id", pa.repeat(pa.scalar(manifest["run_id"]), n)) \
            .append_column("date", pa.repeat(pa.scalar(manifest["date"]), n))
        write_by_source(t.select(QUARANTINE_SCHEMA.names).cast(QUARANTINE_SCHEMA), out_dir,
                         manifest["date"], f"part-{i:05d}.zstd.parquet")
        total += n
    return total


__all__ = ["AUDIT_SCHEMA", "QUARANTINE_SCHEMA", "audit_rows", "write_audit", "write_by_source",
           "write_quarantine"]
