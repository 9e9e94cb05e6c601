"""Records to transactions (SPEC section 3, informix), after decoding: the ordering job's step.

The decoder in *records* mode (``decoder.decode_records``) reads every record on its own,
whatever file or byte range it is in: one row per record line with its facts (``xid``,
``position`` = uniqid + addr, ``link``, ``record_type``, the values of its columns) and the
kind it would have inside a transaction. This module assigns records to transactions, with
the rules the per-record decoder applied file by file (``decoder._Decoder``), over a stream
of one source's records sorted by (xid, file uniqid, record_index):

* a record belongs to the transaction of the latest BEGIN of its xid before it (xids are
  reused), unless a COMMIT or ROLLBACK of that transaction came between;
* its link must be the address of the record before it in that transaction, in this night's
  files or held from an earlier night; a broken chain is quarantined and the chain goes on
  from the quarantined record;
* remainder records fold into the home-row change before them (``n_records`` + 1; into a
  change of another archive: a ``remainder_of_earlier_file`` control row), HUPBEF + HUPAFT
  of one row are one update, CLRs compensate the latest uncompensated record, a row change
  or truncate of a table the catalog does not know is quarantined (``unknown_table``).

What a transaction still open at the end of the night needs on the next night (the
transaction id, the BEGIN's user, the last address, the CLR stack, the fold) is one row of
no records (``control``, rule ``open_transaction_state``, the state as JSON in ``message``)
with the transaction's ``trx_id``: the generic held-state step keeps it with the
transaction's other rows, and the next night's stream starts from it (the decoder carry
is gone). A folded record has no row: its records and bytes count in the row it folds into
(``n_records`` and ``n_bytes`` of a row cover the same records), as in the file decoder.

``resolve_rows`` runs the whole step on Python rows (tests, tools: the reference);
``resolve_transactions`` is the same on a Spark DataFrame (``repartition`` by source and xid,
sort within partitions, ``mapInArrow`` over the sorted stream: a task holds one chunk of
rows and one open transaction at a time, whatever the size of the night). The Spark step
reads the stream by column (``resolve_columns.py``: the common transactions with numpy,
the pieces with anything unusual through ``_Machine`` below, the same rows:
tests/test_informix_resolve_columns.py).
"""

from __future__ import annotations

import json
import re
from typing import Iterable, Iterator

from ..errors import BrokenChain, Corrupt, DecodeError, UnknownTable
from ..events import RAW_HEX_LIMIT
from . import layout as L

STATE_RULE = "open_transaction_state"
UNKNOWN_TABLE_FLAG = "unknown_table"  # flag of a change whose table the catalog lacks
RE_UNIQID = re.compile(r"_([0-9]+)\.txt$")
# columns a resolved row does not keep (facts for this step only; ``seg_data`` holds a
# record's raw bytes until then, for a record the rules quarantine)
FACT_COLUMNS = ("xid", "link", "record_type")


def uniqid_of_archive(name: str | None) -> int:
    m = RE_UNIQID.search(name or "")
    return int(m.group(1)) if m else -1


def addr_of(position: str | None) -> int | None:
    return None if position is None else int(position[8:], 16)


def order_key(row: dict) -> tuple:
    """Where a row stands in its xid's stream: file, record, and a state row after the
    record it was left at."""
    state = row["kind"] == "control" and row.get("rule") == STATE_RULE
    return (uniqid_of_archive(row["archive_file"]), row["record_index"], 1 if state else 0)


class _Fold:
    __slots__ = ("row", "owner", "awaiting", "tbl", "rowid")

    def __init__(self, row, owner, awaiting, tbl, rowid):
        self.row, self.owner, self.awaiting, self.tbl, self.rowid = row, owner, awaiting, tbl, rowid

    def to_json(self) -> dict:
        return {"owner": self.owner, "after": self.awaiting,
                "tbl": None if self.tbl is None else int(self.tbl, 16),
                "row": None if self.rowid is None else int(self.rowid, 16)}


class _Trx:
    __slots__ = ("trx_id", "user", "last", "undo", "fold", "at", "changed", "state_row")

    def __init__(self, trx_id, user, last):
        self.trx_id, self.user, self.last = trx_id, user, last
        self.undo: list[str] = []
        self.fold: _Fold | None = None
        self.at: dict | None = None          # the row the transaction was last seen at
        self.changed = True
        self.state_row: dict | None = None

    @classmethod
    def from_state(cls, row: dict) -> "_Trx":
        d = json.loads(row["message"])
        last = d.get("last")
        if not isinstance(d["trx"], str) or not (last is None or type(last) is int) \
                or not all(isinstance(u, str) for u in d.get("undo") or []):
            raise ValueError("unexpected field types")
        t = cls(d["trx"], d.get("user"), last)
        t.undo = list(d.get("undo") or [])
        f = d.get("fold")
        if f:
            t.fold = _Fold(None, f["owner"], bool(f["after"]),
                           None if f.get("tbl") is None else format(f["tbl"], "x"),
                           None if f.get("row") is None else format(f["row"], "x"))
        t.at, t.changed, t.state_row = row, False, row
        return t

    def to_json(self) -> dict:
        return {"trx": self.trx_id, "user": self.user, "last": self.last, "undo": self.undo,
                "fold": self.fold.to_json() if self.fold else None}


def _base(row: dict, kind: str, n_records: int | None = None) -> dict:
    """A resolved row: the record's place and accounting, its kind, nothing else yet."""
    out = {k: None for k in row}
    for k in ("source", "format", "archive_file", "record_offset", "record_index", "n_records",
              "n_bytes", "from_state"):
        if k in row:
            out[k] = row[k]
    out["kind"] = kind
    if n_records is not None:
        out["n_records"] = n_records
    return out


def _error(row: dict, err: DecodeError) -> DecodeError:
    """The error as the per-record decoder words it: archive, record, line, column."""
    err.path = f"line {row['record_offset']}" + (f", {err.path}" if err.path else "")
    return err.located(archive=row["archive_file"], record_index=row["record_index"])


class _Machine:
    """The transaction rules over one source's records of one xid at a time."""

    def __init__(self) -> None:
        self.cur: _Trx | None = None
        self.buffer: list[dict] = []        # rows of the open transaction (folds may add)
        self.out: list[dict] = []

    # -- output
    def emit(self, row: dict) -> None:
        (self.buffer if self.cur is not None else self.out).append(row)

    def flush(self) -> None:
        self.out.extend(self.buffer)
        self.buffer = []

    def close(self) -> None:
        self.flush()
        self.cur = None

    def open(self, trx: _Trx) -> None:
        self.flush()
        self.cur = trx

    def end_of_xid(self, xid) -> None:
        t = self.cur
        if t is not None:
            if t.changed or t.state_row is None:
                row = _base(t.at, "control", 0)
                row.update(n_bytes=0, rule=STATE_RULE, trx_id=t.trx_id, from_state=False,
                           message=json.dumps(t.to_json()), xid=xid)
                self.buffer.append(row)
            else:
                self.buffer.append(t.state_row)
        self.close()

    # -- one row of the stream
    def row(self, row: dict) -> None:
        if row.get("from_state"):
            if row["kind"] == "control" and row.get("rule") == STATE_RULE:
                # the state of this xid's transaction left by an earlier night; a newer one
                # (a later BEGIN of the xid) supersedes an older one, which is dropped
                if self.cur is not None:
                    self.flush()
                try:
                    self.cur = _Trx.from_state(row)
                except (ValueError, KeyError, TypeError, AttributeError) as exc:
                    # a damaged state row never stops the night: it is reported (no records)
                    self.cur = None
                    q = _base(row, "quarantine", 0)
                    q.update(n_bytes=0, from_state=False, error_class="corrupt", message=str(
                        Corrupt(f"held state of an open transaction is damaged: {exc}",
                                archive=row["archive_file"], path="message",
                                expected="the state this step writes",
                                actual=str(row.get("message"))[:60])))
                    self.out.append(q)
                return
            self.out.append(row)             # held rows are already resolved
            return
        rtype = row.get("record_type")
        if rtype in L.SYSTEM:
            self.out.append(row)              # never part of a transaction
            return
        if row["kind"] == "quarantine":
            self.malformed(row, rtype)
        else:
            self.record(row, rtype)

    def touch(self, row: dict) -> None:
        if self.cur is not None:
            self.cur.at = row
            self.cur.changed = True

    # -- the per-record decoder's rules (decoder._Decoder), on rows
    def malformed(self, row: dict, rtype: str | None) -> None:
        pos = row.get("position")
        addr = addr_of(pos)
        if rtype == L.BEGIN and addr is not None:
            # the BEGIN's columns are bad (or it links somewhere): it opens its transaction
            trx = _Trx(f"{uniqid_of_archive(row['archive_file'])}:{addr:x}", row.get("user"), addr)
            self.open(trx)
            self.touch(row)
            self.emit({**row, "trx_id": trx.trx_id, "user": None})
            return
        if self.cur is None:
            self.out.append({**row, "user": None})
            return
        self.bad_in_trx({**row, "user": None}, rtype, pos, addr)

    def bad_in_trx(self, qrow: dict, rtype: str | None, pos: str | None, addr: int | None) -> None:
        t = self.cur
        qrow["trx_id"] = t.trx_id
        self.touch(qrow)
        self.emit(qrow)
        t.last = addr
        if rtype in (L.COMMIT, L.ROLLBACK):
            self.close()
            return
        if rtype == L.CLR:
            return
        owner = pos
        if rtype in L.REMAINDER or (rtype == L.UPDATE_AFTER and t.fold and t.fold.awaiting):
            if t.fold is not None:
                owner = t.fold.owner
        elif rtype in L.HOME_OPS and pos is not None:
            t.fold = _Fold(qrow, pos, False, None, None)
        elif rtype in L.DDL_OPS:
            t.fold = None
        if owner is not None:
            t.undo.append(owner)

    def quarantine(self, row: dict, err: DecodeError, **fields) -> dict:
        q = _base(row, "quarantine")
        raw = row.get("seg_data")
        if "table_id" not in fields and getattr(err, "table_id", None) is not None:
            fields["table_id"] = err.table_id       # the report names the unknown table
        q.update(error_class=err.error_class, message=str(_error(row, err)),
                 raw_hex=None if raw is None else bytes(raw[:RAW_HEX_LIMIT]).hex(), **fields)
        return q

    def record(self, row: dict, rtype: str) -> None:
        pos = row["position"]
        addr = addr_of(pos)
        if rtype == L.BEGIN:
            trx = _Trx(f"{uniqid_of_archive(row['archive_file'])}:{addr:x}", row.get("user"), addr)
            self.open(trx)
            self.touch(row)
            out = _base(row, "begin")
            out.update(trx_id=trx.trx_id, position=pos, user=trx.user)
            self.emit(out)
            return
        t = self.cur
        if t is None:
            out = _base(row, "control")
            out.update(rule="outside_transaction", position=pos)
            self.out.append(out)
            return
        if t.last is not None and row["link"] != t.last:
            err = BrokenChain("link does not point to the previous record of the transaction",
                              path="link", expected=f"{t.last:x}", actual=f"{row['link']:x}")
            self.bad_in_trx(self.quarantine(row, err, trx_id=t.trx_id, position=pos), rtype, pos,
                            addr)
            return
        t.last = addr
        self.touch(row)
        try:
            _HANDLERS.get(rtype, _Machine.other)(self, row, rtype, pos, t)
        except DecodeError as err:
            self.bad_in_trx(self.quarantine(row, err, trx_id=t.trx_id, position=pos), rtype, pos,
                            addr)

    def commit(self, row, rtype, pos, t: _Trx) -> None:
        out = _base(row, "commit")
        out.update(trx_id=t.trx_id, position=pos, trx_end="commit", commit_position=pos,
                   commit_ts=row.get("commit_ts"), user=t.user)
        self.emit(out)
        self.close()

    def rollback(self, row, rtype, pos, t: _Trx) -> None:
        out = _base(row, "abort")
        out.update(trx_id=t.trx_id, position=pos, trx_end="abort")
        self.emit(out)
        self.close()

    def clr(self, row, rtype, pos, t: _Trx) -> None:
        t.fold = None
        if not t.undo:
            out = _base(row, "control")
            out.update(rule="clr_without_work", trx_id=t.trx_id, position=pos)
        else:
            out = _base(row, "undo")
            out.update(trx_id=t.trx_id, position=pos, undo_of=t.undo.pop())
        self.emit(out)

    def home(self, row, rtype, pos, t: _Trx) -> None:
        tbl, rowid = row["table_id"], row["row_id"]
        fold = t.fold
        if (rtype == L.UPDATE_AFTER and fold is not None and fold.awaiting
                and fold.tbl == tbl and fold.rowid == rowid):
            fold.awaiting = False
            self.fold_into(row, pos, t, fold)
            return
        if row.get("flag") == UNKNOWN_TABLE_FLAG:
            r = self.quarantine(row, UnknownTable("tblspace not in the catalog", path=L.TBLSPACE,
                                                  expected="a catalog table id", actual=tbl),
                                trx_id=t.trx_id, position=pos)
        else:
            r = _base(row, "change")
            r.update(trx_id=t.trx_id, position=pos, trx_order=pos, op=row["op"], table_id=tbl,
                     schema_name=row["schema_name"], table_name=row["table_name"], row_id=rowid)
        self.emit(r)
        t.fold = _Fold(r, pos, rtype == L.UPDATE_BEFORE, tbl, rowid)
        t.undo.append(pos)

    def remainder(self, row, rtype, pos, t: _Trx) -> None:
        if t.fold is None:
            raise Corrupt("remainder-page record without a home-row change before it",
                          path="type", expected="a home-row change of the transaction",
                          actual=rtype)
        self.fold_into(row, pos, t, t.fold)

    def fold_into(self, row, pos, t: _Trx, fold: _Fold) -> None:
        owner = fold.row
        if owner is not None and owner["archive_file"] == row["archive_file"] \
                and not owner.get("from_state"):
            # no row of its own: its record and its bytes count in the change's row
            owner["n_records"] += row["n_records"]
            if owner["n_bytes"] is not None:
                owner["n_bytes"] += row["n_bytes"] or 0
        else:  # the change was decoded from an earlier file
            out = _base(row, "control")
            out.update(rule="remainder_of_earlier_file", trx_id=t.trx_id, position=pos)
            self.emit(out)
        t.undo.append(fold.owner)

    def table_level(self, row, rtype, pos, t: _Trx) -> None:
        t.fold = None
        t.undo.append(pos)
        if row.get("flag") == UNKNOWN_TABLE_FLAG:
            self.emit(self.quarantine(
                row, UnknownTable("tblspace not in the catalog", path=L.TBLSPACE,
                                  expected="a catalog table id", actual=row["table_id"]),
                trx_id=t.trx_id, position=pos))
            return
        out = _base(row, "change")
        out.update(trx_id=t.trx_id, position=pos, trx_order=pos, op=row["op"],
                   table_id=row["table_id"], schema_name=row["schema_name"],
                   table_name=row["table_name"], ddl=row["ddl"])
        self.emit(out)

    def other(self, row, rtype, pos, t: _Trx) -> None:
        t.undo.append(pos)
        out = _base(row, "control")
        out.update(rule=rtype.lower(), trx_id=t.trx_id, position=pos)
        self.emit(out)


_HANDLERS = {L.COMMIT: _Machine.commit, L.ROLLBACK: _Machine.rollback, L.CLR: _Machine.clr,
             **{t: _Machine.home for t in L.HOME_OPS},
             **{t: _Machine.remainder for t in L.REMAINDER},
             **{t: _Machine.table_level for t in L.DDL_OPS}}


def stream_key(row: dict) -> tuple:
    return (row["source"], row["xid"])


def resolve_stream(rows: Iterable[dict]) -> Iterator[dict]:
    """Rows sorted by (source, xid, ``order_key``), every one with an xid -> resolved rows
    (a folded record has none: it counts in its change's row). Holds one transaction's rows
    at a time."""
    machine = _Machine()
    key = None
    for row in rows:
        k = stream_key(row)
        if k != key:
            if key is not None:
                machine.end_of_xid(key[1])
            key = k
        machine.row(row)
        if machine.out:
            yield from machine.out
            machine.out = []
    if key is not None:
        machine.end_of_xid(key[1])
    yield from machine.out


def needs_resolving(row: dict) -> bool:
    return row.get("xid") is not None


def clear_facts(row: dict) -> dict:
    row = dict(row)
    for k in FACT_COLUMNS:
        if k in row and not (row["kind"] == "control" and row.get("rule") == STATE_RULE
                             and k == "xid"):
            row[k] = None
    if row.get("flag") == UNKNOWN_TABLE_FLAG:
        row["flag"] = None
    row["seg_data"] = None
    return row


def resolve_rows(rows: list[dict]) -> list[dict]:
    """The whole step on Python rows (one or more sources): resolved rows in (source,
    archive, record) order, as the ordering job writes them."""
    rows = [dict(r) for r in rows]          # the input is left as it is
    todo = sorted((r for r in rows if needs_resolving(r)),
                  key=lambda r: (r["source"], r["xid"], order_key(r)))
    done = [r for r in rows if not needs_resolving(r)] + list(resolve_stream(todo))
    out = [clear_facts(r) for r in done]
    out.sort(key=lambda r: (r["source"], uniqid_of_archive(r["archive_file"]), r["archive_file"],
                            r["record_index"], order_key(r)[2]))
    return out


# ----------------------------------------------------------------- on Spark

def _state_flag(F):
    return ((F.col("kind") == "control") & (F.col("rule") == STATE_RULE)).cast("int")


def _uniqid_col(F):
    return F.coalesce(F.regexp_extract("archive_file", r"_([0-9]+)\.txt$", 1).cast("long"),
                      F.lit(-1).cast("long"))


# the Spark step reads its stream by column (resolve_columns.py: numpy for the common case,
# the per-row rules above for the rest); False: every row through ``resolve_stream``
COLUMNAR = True


def _resolve_rows_of(batches):
    """A partition's rows sorted by (source, xid, file, record) -> resolved batches."""
    import pyarrow as pa

    if COLUMNAR:
        from .resolve_columns import resolve_batches

        yield from resolve_batches(batches)
        return

    schema = None

    def rows():
        nonlocal schema
        for batch in batches:
            schema = batch.schema
            yield from batch.to_pylist()

    out: list[dict] = []
    for r in resolve_stream(rows()):
        out.append(r)
        if len(out) >= 8192:
            yield pa.RecordBatch.from_pylist(out, schema=schema)
            out = []
    if out:
        yield pa.RecordBatch.from_pylist(out, schema=schema)


def _needs_raw(batch):
    """Rows the rules quarantined whose raw bytes were not in the stream: tonight's
    quarantine rows of records (``n_records`` > 0) without ``raw_hex``."""
    import pyarrow.compute as pc

    return pc.fill_null(pc.and_(pc.and_(pc.equal(batch.column("kind"), "quarantine"),
                                        pc.is_null(batch.column("raw_hex"))),
                                pc.and_(pc.invert(pc.fill_null(batch.column("from_state"), False)),
                                        pc.greater(batch.column("n_records"), 0))), False)


def raw_hex_from_files(table, files):
    """``table``'s rows (resolved quarantine rows) with ``raw_hex`` from the ``seg_data`` of
    their record's row, (archive_file, record_index), in the Parquet ``files`` the events
    were read from. A row group is read only when its statistics say it may hold one of the
    keys, one at a time, and only three of its columns: memory is one row group's plus the
    rows found. A record not found keeps a null raw_hex."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    arch = table.column("archive_file").to_pylist()
    idx = table.column("record_index").to_pylist()
    want = {(a, i) for a, i in zip(arch, idx) if a is not None and i is not None}
    if not want:
        return table
    names = {a for a, _ in want}
    wanted = np.unique(np.array([i for _, i in want], dtype=np.int64))

    def may_hold(st) -> bool:              # a record_index of the keys within [min, max]
        if st is None or not st.has_min_max:
            return True
        k = np.searchsorted(wanted, st.min)
        return bool(k < len(wanted) and wanted[k] <= st.max)

    found: dict[tuple, bytes] = {}
    for path in files:
        try:
            pf = pq.ParquetFile(path)
        except (OSError, ValueError):
            continue
        cols = pf.schema_arrow.names
        if not all(c in cols for c in ("archive_file", "record_index", "seg_data")):
            continue
        ia, ii = cols.index("archive_file"), cols.index("record_index")
        for g in range(pf.metadata.num_row_groups):
            rg = pf.metadata.row_group(g)
            sa = rg.column(ia).statistics
            if not may_hold(rg.column(ii).statistics):
                continue
            if sa is not None and sa.has_min_max and not any(sa.min <= n <= sa.max for n in names):
                continue
            got = pf.read_row_groups([g], columns=["archive_file", "record_index", "seg_data"])
            got = got.filter(pc.and_(pc.is_in(got.column("archive_file"), pa.array(sorted(names))),
                                     pc.is_in(got.column("record_index"), pa.array(wanted))))
            for a, i, d in zip(got.column("archive_file").to_pylist(),
                               got.column("record_index").to_pylist(),
                               got.column("seg_data").to_pylist()):
                if d is not None and (a, i) in want:
                    found.setdefault((a, i), d[:RAW_HEX_LIMIT])
    raw = [None if found.get((a, i)) is None else bytes(found[(a, i)]).hex()
           for a, i in zip(arch, idx)]
    at = table.schema.get_field_index("raw_hex")
    return table.set_column(at, table.schema.field(at), pa.array(raw, pa.string()))


RAW_WAIT_ROWS = 65536    # quarantined rows a partition holds before it looks their bytes up


def _resolve_partition(batches, files=()):
    """mapInArrow: a partition's rows sorted by (source, xid, file, record) -> resolved rows.
    With ``files`` (the stream has no ``seg_data``), the rows the rules quarantined wait
    (until the partition's end, or ``RAW_WAIT_ROWS`` of them) and take their raw bytes from
    the files in one pass."""
    import pyarrow as pa
    import pyarrow.compute as pc

    waiting: list = []
    n_waiting = 0

    def looked_up():
        table = raw_hex_from_files(pa.Table.from_batches(waiting), files)
        waiting.clear()
        return table.combine_chunks().to_batches()

    for b in _resolve_rows_of(batches):
        if files:
            need = _needs_raw(b)
            if need.true_count:
                waiting.append(b.filter(need))
                n_waiting += need.true_count
                b = b.filter(pc.invert(need))
        if b.num_rows:
            yield b
        if n_waiting >= RAW_WAIT_ROWS:
            yield from looked_up()
            n_waiting = 0
    if waiting:
        yield from looked_up()


def _local_files(df) -> tuple[str, ...]:
    """The files ``df`` reads (``inputFiles``, no job), as paths; () when any is not a local
    path (then the stream carries ``seg_data``)."""
    from urllib.parse import unquote, urlparse

    out = []
    for uri in df.inputFiles():
        u = urlparse(uri)
        if u.scheme not in ("", "file"):
            return ()
        out.append(unquote(u.path))
    return tuple(sorted(out))


def resolve_transactions(events):
    """The ordering job's hook (contract 3): informix rows (the night's and those held from
    earlier nights, with ``from_state``) -> the same columns, every record in its
    transaction. Records are repartitioned by (source, xid) and each partition is read in
    (xid, file, record) order by one Python function (``resolve_stream``); its output is the
    hook's: one exchange, since a folded record's bytes go to its change's row, in the same
    partition.

    ``seg_data`` (a record's raw bytes, for the raw_hex of a record the rules quarantine;
    about half the bytes of the stream) stays out of the stream when the events are read
    from local Parquet files (``inputFiles``): the few quarantined rows take it from those
    files at the end of their partition (``raw_hex_from_files``). Rows not read from files
    (a DataFrame made in memory) carry it through the stream."""
    import functools

    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    columns = events.columns
    files = _local_files(events)
    stream = [c for c in columns if c != "seg_data"] if files else columns
    todo = events.filter(F.col("xid").isNotNull())
    rest = events.filter(F.col("xid").isNull())
    ordered = todo.withColumn("_u", _uniqid_col(F)).withColumn("_s", _state_flag(F)) \
        .repartition("source", "xid") \
        .sortWithinPartitions("source", "xid", "_u", "record_index", "_s") \
        .select(*stream)
    schema = StructType([f for f in events.schema.fields if f.name in stream])
    out = ordered.mapInArrow(functools.partial(_resolve_partition, files=files), schema)
    if files:
        out = out.withColumn("seg_data", F.lit(None).cast("binary"))
    resolved = rest.unionByName(out)
    state = (F.col("kind") == "control") & (F.col("rule") == STATE_RULE)
    cleared = {"xid": F.when(state, F.col("xid")), "link": F.lit(None).cast("long"),
               "record_type": F.lit(None).cast("string"), "seg_data": F.lit(None).cast("binary"),
               "flag": F.when(F.col("flag") != UNKNOWN_TABLE_FLAG, F.col("flag"))}
    # one projection (a chain of withColumn has the driver analyse the plan once per call)
    return resolved.select(*[cleared[c].alias(c) if c in cleared else F.col(c) for c in columns])


RESOLVE_KEY = "xid"     # the hook on files (``resolve_table``): rows grouped by (source, xid)


def _cleared(table):
    """The hook's last projection (``resolve_transactions``) in Arrow: the record facts
    cleared (``xid`` kept on open-transaction state rows only), ``flag`` without the
    unknown-table mark."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind, rule, flag = table.column("kind"), table.column("rule"), table.column("flag")
    state = pc.fill_null(pc.and_(pc.equal(kind, "control"), pc.equal(rule, STATE_RULE)), False)
    xid = table.column("xid")
    cols = {"xid": pc.if_else(state, xid, pa.scalar(None, xid.type)),
            "link": pa.nulls(table.num_rows, table.schema.field("link").type),
            "record_type": pa.nulls(table.num_rows, table.schema.field("record_type").type),
            "flag": pc.if_else(pc.fill_null(pc.not_equal(flag, UNKNOWN_TABLE_FLAG), False), flag,
                               pa.scalar(None, flag.type))}
    for name, values in cols.items():
        table = table.set_column(table.schema.get_field_index(name), name, values)
    return table


def resolve_table(table, files=(), chunk_rows: int = 65536):
    """The hook on an Arrow table holding every row of each (source, xid) it has (and the
    rows of no xid it is given): ``resolve_transactions``' rows, as record batches of
    ``table``'s schema. The ordering job's hook on files (``dblog.ordering.filehook``) groups
    the night's Parquet files into such tables by a hash of (source, ``RESOLVE_KEY``), so
    that no row passes through the JVM. ``table`` lacks ``seg_data`` when ``files`` are given:
    quarantined rows take their raw bytes from those files (as ``resolve_transactions``)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    xid = table.column("xid")
    has = pc.is_valid(xid)
    rest = table.filter(pc.invert(has))
    if rest.num_rows:
        yield from _cleared(rest).to_batches(max_chunksize=chunk_rows)
    todo = table.filter(has)
    del table
    if not todo.num_rows:
        return
    # the stream's order (``resolve_transactions``): source, xid, the file's uniqid, the
    # record, the state rows last; the uniqid from each distinct archive name, not per row
    arch = todo.column("archive_file").combine_chunks().dictionary_encode()
    # (a uniqid past a long, or no archive name, is -1: Spark's cast gives null there)
    uniq = np.array([u if u < 2 ** 63 else -1 for u in map(uniqid_of_archive,
                                                           arch.dictionary.to_pylist())] + [-1],
                    np.int64)
    codes = arch.indices.fill_null(len(arch.dictionary)).to_numpy(zero_copy_only=False)
    state = pc.fill_null(pc.and_(pc.equal(todo.column("kind"), "control"),
                                 pc.equal(todo.column("rule"), STATE_RULE)), False)
    keyed = pa.table({"source": todo.column("source"), "xid": todo.column("xid"),
                      "_u": uniq[codes], "record_index": todo.column("record_index"),
                      "_s": pc.cast(state, pa.int8())})
    keys = [(name, "ascending", "at_start") for name in keyed.column_names]  # Spark's order
    if pc.count_distinct(keyed.column("source"), mode="all").as_py() <= 1:
        keys = keys[1:]          # one source (the usual table): no string comparisons
    order = pc.sort_indices(keyed, keys)
    del keyed
    todo = todo.take(order)
    for b in _resolve_partition(todo.to_batches(max_chunksize=chunk_rows), files):
        yield from _cleared(pa.Table.from_batches([b])).to_batches()


# ----------------------------------------------------------------- one file at a time

def held_after(rows: list[dict]) -> list[dict]:
    """What the generic held-state step keeps of resolved rows: every row of a transaction
    with no end, quarantine rows excepted (``from_state`` set for the next night)."""
    ended = {r["trx_id"] for r in rows if r.get("trx_end")}
    return [{**r, "from_state": True} for r in rows
            if r.get("trx_id") and r["trx_id"] not in ended
            and r["kind"] not in ("quarantine", "carry")]


def decode_file(data: bytes, ctx, source: str, held: list[dict] | None = None,
                decode_records=None) -> tuple[list[dict], list[dict]]:
    """Records mode and this step on one file, the way a night of the pipeline does it:
    (this file's resolved rows, the rows held after it). For tests and tools."""
    from ..events import EventSink, accounts_bytes

    if decode_records is None:
        from .decoder import decode_records
    sink = EventSink(source, "informix", ctx.archive)
    accounts_bytes(decode_records, lines=True)(data, ctx, sink)
    rows = [{**r, "from_state": False} for r in sink.rows()]
    out = resolve_rows(list(held or []) + rows)
    mine = [{k: v for k, v in r.items() if k != "from_state"} for r in out
            if not r.get("from_state") and r.get("rule") != STATE_RULE]
    return mine, held_after(out)


def open_transactions(held: list[dict]) -> dict:
    """The open transactions the held state rows describe, as the decoder carry said them:
    ``{xid: {"trx", "user", "last", "undo", "fold"}}``."""
    states = [r for r in held if r["kind"] == "control" and r.get("rule") == STATE_RULE]
    return {str(r["xid"]): json.loads(r["message"]) for r in sorted(states, key=lambda r: r["xid"])}
