"""Sample nights of Db2 LUW log-read streams, written with the project's encoder, in the
Version 7 layout or (option ``layout: v10``) the Db2 10.1-12.1 one.

A night is two archives (``S<seq>.LOG``) of interleaved transactions: commits (some with a
local pending list ``E`` before ``M``), rollbacks (``A``, often preceded by the undo records
Db2 writes while rolling back), compensations inside committed transactions (an extra
change and the ``C``/undo record that undoes it: the extra change is never reported as
expected), transactions left open until the next night, control records (124, 128, DOM
35, non-formatted user data) and records of other Log Manager types (skipped).

Undo records are written in three forms: ``C`` with the 32-byte header (compensated LSN),
``C`` with the 26-byte header (undo-next LSN, resolved through the backward chain) and
``N`` undo records (resolved by RID); a form that needs the undone change in the same
archive is only used when it is.

``layout: v10`` writes the same transactions with the v10 records: a 56-byte
``db2ReadLogFilterData`` before each record, 40/56/64-byte headers (LSN, LFS, LSO), commits
0x0084 (some as local pending lists 0x008A, which end a transaction as committed; some not
propagatable, without authid), aborts 0x0041, DML 162/161/163 and the empty-page variants
165/164 (undone by 131/166), undo and compensation last-in-first-out (compensation records
with 56- and 64-byte headers, and normal records with undo functions), other record types
0x0069, 0x0046, 0x0052, 0x0055 and 0x00A1 (skipped), 6-byte RIDs. A rollback's undo records
may fall in the night's other archive (the ordering job resolves them); a compensation
inside a committed transaction stays in the archive of the change it undoes.
"""

from __future__ import annotations

import datetime as _dt
import random

from ..base import hexpos
from ..catalog import Catalog, Table
from ..synth import FormatSynth, SynChange, SynTrx, col, interleave
from . import layout as L
from .encoder import Encoder, lsn as lsn_bytes, rid_bytes, tid as tid_bytes

_UTC = _dt.timezone.utc
OTHER_TYPES = "BLPXiQcFo"        # Log Manager types a reader skips
OTHER_V10_TYPES = (0x0069, 0x0046, 0x0052, 0x0055, 0x00A1)
V10_CODES = {"N": 0x004E, "C": 0x0043, "M": 0x0084, "A": 0x0041, "E": 0x008A}


class _Item:
    __slots__ = ("tid", "rtype", "flags", "body", "target", "mode", "lsn", "prev", "trx",
                 "commit", "undo", "lfs", "lso")

    def __init__(self, tid: bytes, rtype: str, body: bytes, *, flags: int = L.FLAG_PROPAGATABLE,
                 target: "_Item | None" = None, mode: str | None = None,
                 trx: SynTrx | None = None, commit: bool = False) -> None:
        self.tid, self.rtype, self.body, self.flags = tid, rtype, body, flags
        self.target, self.mode, self.trx, self.commit = target, mode, trx, commit
        self.lsn = self.prev = self.lfs = self.lso = 0
        self.undo: bytes | None = None


class Synth(FormatSynth):
    FORMAT = "db2luw"
    planner_options = {"p_rollback": 0.08, "p_open": 0.04, "p_ddl": 0.04, "p_truncate": 0.01}

    def __init__(self, *args, timezone: str = "UTC", **kw) -> None:
        # Db2 writes commit times in UTC: the source's timezone does not change the log
        super().__init__(*args, **kw)
        self.v10 = self.options.get("layout", "v7") == "v10"
        self.enc = Encoder(self.options.get("byte_order", "little"),
                           self.options.get("codepage", "utf-8"), self.options.get("layout", "v7"))
        self.lsn = 0x0000_0200_0000
        self.lfs = 0x0000_0000_0001_0000          # v10: log flush sequence
        self.lso = 0x0000_0000_4000_0000          # v10: byte offset in the log stream
        self.tid = 0x0000_0000_A000
        self.log_seq = 0
        self.rid_of: dict[int, int] = {}
        self.next_slot: dict[str, int] = {}
        self.new_table = 900
        self.record_counts: dict[str, int] = {}   # records per archive of the last night

    def make_catalog(self, source: str, rng: random.Random) -> Catalog:
        if self.options.get("layout", "v7") == "v10":
            return self._catalog_v10(source)
        orders = Table("2.5", "ERP", "ORDERS", (
            col("ORDER_ID", "INTEGER", False), col("CUSTOMER_ID", "BIGINT", False),
            col("STATUS", "CHAR", length=8), col("AMOUNT", "DECIMAL", precision=11, scale=2),
            col("DISCOUNT", "REAL"), col("WEIGHT", "DOUBLE"), col("NOTE", "VARCHAR", length=40),
            col("ORDER_DATE", "DATE"), col("ORDER_TIME", "TIME"), col("UPDATED", "TIMESTAMP")),
            key=("ORDER_ID",))
        items = Table("2.6", "ERP", "ORDER_ITEMS", (
            col("ITEM_ID", "INTEGER", False), col("QTY", "SMALLINT"),
            col("CODE", "BINARY", length=4), col("TAG", "VARBINARY", length=16),
            col("PRICE", "DECIMAL", False, precision=9, scale=3),
            col("DESCR", "VARCHAR", False, length=30), col("LOT", "CHAR", False, length=3)),
            key=("ITEM_ID",))
        staff = Table("3.17", "HR", "EMPLOYEES", (
            col("EMP_ID", "SMALLINT", False), col("NAME", "VARCHAR", length=30),
            col("BIRTH", "DATE", False), col("SALARY", "DECIMAL", precision=8, scale=0),
            col("RATING", "DOUBLE", False), col("BADGE", "BINARY", length=2),
            col("CREATED", "TIMESTAMP", False), col("SHIFT_START", "TIME", False),
            col("SCORE", "REAL", False), col("BIG", "BIGINT")), key=("EMP_ID",))
        return Catalog(source, "db2luw", (orders, items, staff))

    def _catalog_v10(self, source: str) -> Catalog:
        """The v10 sample source's tables (a Db2 11.5 HR schema)."""
        payroll = Table("4.20", "HR", "PAYROLL", (
            col("PAY_ID", "BIGINT", False), col("EMP_ID", "INTEGER", False),
            col("PERIOD", "DATE", False), col("GROSS", "DECIMAL", False, precision=15, scale=4),
            col("TAX_RATE", "REAL"), col("CURRENCY", "CHAR", length=3),
            col("PAID_AT", "TIMESTAMP"), col("MEMO", "VARCHAR", length=60)), key=("PAY_ID",))
        shifts = Table("4.21", "HR", "SHIFTS", (
            col("SHIFT_ID", "INTEGER", False), col("STARTS", "TIME", False), col("ENDS", "TIME"),
            col("SITE", "SMALLINT", False), col("BADGE", "VARBINARY", length=12),
            col("HOURS", "DOUBLE"), col("NOTE", "CLOB"), col("SERIAL", "DECIMAL", precision=31,
                                                              scale=0)), key=("SHIFT_ID",))
        audit = Table("5.3", "SEC", "ACCESS_LOG", (
            col("EVENT_ID", "BIGINT", False), col("TOKEN", "BINARY", False, length=8),
            col("WHO", "VARCHAR", False, length=20), col("AT", "TIMESTAMP", False),
            col("CODE", "CHAR", False, length=2)), key=("EVENT_ID",))
        return Catalog(source, "db2luw", (payroll, shifts, audit))

    def _rid_text(self, rid: int) -> str:
        return rid_bytes(rid).hex().upper() if self.v10 else format(rid, "08X")

    def _rid_of_text(self, text: str) -> int:
        return int(text, 16)
    # ------------------------------------------------------------- row ids
    def _new_rid(self, table: Table) -> int:
        n = self.next_slot.get(table.id, 0) + 1
        self.next_slot[table.id] = n
        return ((n // 200 + 1) << 8) | (n % 200)       # page << 8 | slot

    def _rid(self, row: list, table: Table) -> int:
        rid = self.rid_of.get(id(row))
        if rid is None:
            rid = self.rid_of[id(row)] = self._new_rid(table)
        return rid

    # ------------------------------------------------------------- a transaction's records
    def _change_items(self, t: SynTrx, tid: bytes, ch: SynChange) -> list[_Item]:
        """The record of one planned change (and set what the decoder will report)."""
        enc, rng, tab = self.enc, self.rng, ch.table
        if ch.op == "c":
            rid = self._rid(ch.after, tab)
            ch.row_id = self._rid_text(rid)
            return [_Item(tid, "N", enc.insert(tab, rid, ch.after, empty_page=self._empty(ch)),
                          trx=t)]
        if ch.op == "d":
            rid = self._rid(ch.before, tab)
            ch.row_id = self._rid_text(rid)
            return [_Item(tid, "N", enc.delete(tab, rid, ch.before, empty_page=self._empty(ch)),
                          trx=t)]
        if ch.op == "u":
            rid = self._rid(ch.before, tab)
            self.rid_of[id(ch.after)] = rid
            ch.row_id = self._rid_text(rid)
            return [_Item(tid, "N", enc.update(tab, rid, ch.before, ch.after), trx=t)]
        if ch.op == "t":
            ch.ddl = f"TRUNCATE TABLE {tab.qualified_name} (IMPORT REPLACE)"
            return [_Item(tid, "N", enc.truncate(tab.id, bytes(rng.randint(0, 8))), trx=t)]
        # ddl: one of the DDL records Db2 writes
        kind = rng.choice(("add_columns", "alter_column", "create_index", "drop_index",
                           "create_table", "drop_table"))
        qn = tab.qualified_name
        if kind == "add_columns":
            n = len(tab.columns)
            ch.ddl = f"ALTER TABLE {qn} ADD COLUMNS (old {n}, new {n + 1})"
            body = enc.add_columns(tab.id, n, n + 1)
        elif kind == "alter_column":
            colno = rng.randrange(len(tab.columns))
            c = tab.columns[colno]
            old = c.length or 4
            ch.ddl = f"ALTER TABLE {qn} ALTER COLUMN {c.name} SET LENGTH {old + 10} (old {old})"
            body = enc.alter_column(tab.id, colno, old, old + 10)
        elif kind in ("create_index", "drop_index"):
            token = rng.randint(1, 40)
            drop = kind == "drop_index"
            ch.ddl = f"{'DROP' if drop else 'CREATE'} INDEX (index token {token}) ON {qn}"
            body = enc.index(tab.id, token, rng.randint(0, 9999), drop=drop)
        elif kind == "create_table":
            self.new_table += 1
            new_id = f"{tab.id.split('.')[0]}.{self.new_table}"
            ch.table, ch.table_id = None, new_id
            ch.ddl = f"CREATE TABLE {new_id}"
            body = enc.create_table(new_id)
        else:
            ch.ddl = f"DROP TABLE {qn}"
            body = enc.drop_table(tab.id)
        return [_Item(tid, "N", body, trx=t)]

    def _empty(self, ch: SynChange) -> bool:
        """v10: some inserts and deletes go to an empty page (165/164)."""
        if not self.v10:
            return False
        ch.extra["empty_page"] = self.rng.random() < 0.15
        return ch.extra["empty_page"]

    def _undo_body(self, item: _Item, ch: SynChange) -> tuple[bytes, bool]:
        """(body of the record that undoes ``ch``, whether an ``N`` undo record may carry it)."""
        enc, rng, tab = self.enc, self.rng, ch.table
        empty = ch.extra.get("empty_page", False)
        if ch.op == "c":
            rid = int(ch.row_id, 16)
            if rng.random() < 0.3:               # compensation repeating the inverse function
                return enc.row_body(enc.variant.DELETE, tab.id, rid, enc.user_data(tab, ch.after)), False
            return enc.undo_insert(tab.id, rid, empty_page=empty), True
        if ch.op == "d":
            return enc.undo_delete(tab, int(ch.row_id, 16), ch.before, empty_page=empty), True
        if ch.op == "u":
            return enc.undo_update(tab, int(ch.row_id, 16), ch.before), True
        if ch.op == "ddl" and ch.ddl.startswith("CREATE TABLE"):
            return enc.create_table(ch.table_id, undo=True), True
        if ch.op == "ddl" and " ADD COLUMNS " in ch.ddl:
            n = len(tab.columns)
            return enc.add_columns(tab.id, n, n + 1, undo=True), True
        return item.body, False                  # compensation repeating the change's body

    def _undo_item(self, tid: bytes, t: SynTrx, target: _Item, ch: SynChange) -> _Item:
        body, n_ok = self._undo_body(target, ch)
        # V7: C32 (compensated LSN), C26 (undo-next LSN), N (by RID); v10 (last in, first
        # out): C64, C56, N
        modes = ["direct", "chain"] + (["rid"] if n_ok else [])
        return _Item(tid, "C", body, target=target, mode=self.rng.choice(modes), trx=t)

    def _extra_change(self, table: Table) -> SynChange:
        """A change that a compensation will undo (never expected)."""
        rng = self.rng
        op = rng.choice(("c", "c", "d", "u", "ddl"))
        row = self.planner.row(table)
        if op == "c":
            return SynChange("c", table, None, row)
        if op == "d":
            return SynChange("d", table, row, None)
        if op == "u":
            return SynChange("u", table, row, self.planner.row(table))
        if rng.random() < 0.5:
            self.new_table += 1
            new_id = f"{table.id.split('.')[0]}.{self.new_table}"
            return SynChange("ddl", None, ddl=f"CREATE TABLE {new_id}", table_id=new_id)
        n = len(table.columns)
        return SynChange("ddl", table, ddl=f"ALTER TABLE {table.qualified_name} ADD COLUMNS "
                                           f"(old {n}, new {n + 1})")

    def _extra_items(self, t: SynTrx, tid: bytes, ch: SynChange) -> list[_Item]:
        enc, tab = self.enc, ch.table
        if ch.op == "c":
            rid = self._new_rid(tab)
            ch.row_id = self._rid_text(rid)
            return [_Item(tid, "N", enc.insert(tab, rid, ch.after, empty_page=self._empty(ch)),
                          trx=t)]
        if ch.op == "d":
            rid = self._new_rid(tab)
            ch.row_id = self._rid_text(rid)
            return [_Item(tid, "N", enc.delete(tab, rid, ch.before, empty_page=self._empty(ch)),
                          trx=t)]
        if ch.op == "u":
            rid = self._new_rid(tab)
            ch.row_id = self._rid_text(rid)
            return [_Item(tid, "N", enc.update(tab, rid, ch.before, ch.after), trx=t)]
        if tab is None:
            return [_Item(tid, "N", enc.create_table(ch.table_id), trx=t)]
        n = len(tab.columns)
        return [_Item(tid, "N", enc.add_columns(tab.id, n, n + 1), trx=t)]

    def _control_item(self, t: SynTrx, tid: bytes, rows: bool = True) -> _Item:
        enc, rng = self.enc, self.rng
        tab = rng.choice(self.catalog.tables)
        kind = rng.randrange(4 if rows else 3)
        if kind == 0:
            body = enc.alter_attribute(tab.id, 0x1, rng.choice((0, 1)))
        elif kind == 1:
            body = enc.init_table(tab.id, len(tab.columns))
        elif kind == 2:
            body = enc.reorg(tab.id, rng.randint(0, 3))
        else:   # internal control record in a row record: not formatted user data
            rid = self._new_rid(tab)
            body = enc.insert(tab, rid, self.planner.row(tab), formatted=2)
            item = _Item(tid, "N", body, trx=t)
            # what undoing it takes (v10 rollbacks undo every row record, last first)
            item.undo = enc.undo_insert(tab.id, rid)
            return item
        return _Item(tid, "N", body, trx=t)

    def _trx_items(self, t: SynTrx, tid: bytes) -> list[_Item]:
        rng = self.rng
        items: list[_Item] = []
        done: list[tuple[_Item, SynChange]] = []
        for ch in t.changes:
            if rng.random() < 0.05:
                ctl = self._control_item(t, tid)
                items.append(ctl)
                if ctl.undo is not None and self.v10:
                    done.append((ctl, None))
            recs = self._change_items(t, tid, ch)
            items.extend(recs)
            done.append((recs[0], ch))
            if t.outcome != "rollback" and rng.random() < 0.12:
                tab = ch.table or rng.choice(self.catalog.tables)
                extra = self._extra_change(tab)
                extra_items = self._extra_items(t, tid, extra)
                items.extend(extra_items)
                if rng.random() < 0.3 and extra.op != "ddl":   # unrelated work in between
                    items.append(self._control_item(t, tid, rows=not self.v10))
                items.append(self._undo_item(tid, t, extra_items[0], extra))
        if t.outcome == "rollback":
            if rng.random() < 0.7:      # Db2 undoes the work, last change first, then aborts
                for target, ch in reversed(done):
                    if ch is None:      # v10: an internal control record's insert
                        items.append(_Item(tid, "C", target.undo, target=target,
                                           mode=self.rng.choice(("direct", "chain")), trx=t))
                    else:
                        items.append(self._undo_item(tid, t, target, ch))
            items.append(_Item(tid, "A", self.enc.abort(t.user) if self.v10 else b"", trx=t))
        elif t.outcome == "commit":
            items.extend(self._end_items(t, tid))
        return items

    def _end_items(self, t: SynTrx, tid: bytes) -> list[_Item]:
        if self.v10:
            return self._end_items_v10(t, tid)
        items = []
        if self.rng.random() < 0.2:
            items.append(_Item(tid, "E", b"", trx=t))
        secs = int(t.commit_ts.replace(tzinfo=_UTC).timestamp())
        t.extra["published_commit_ts"] = _dt.datetime.fromtimestamp(secs, _UTC)
        items.append(_Item(tid, "M", self.enc.commit(secs, t.user.ljust(8)), trx=t, commit=True))
        return items

    def _end_items_v10(self, t: SynTrx, tid: bytes) -> list[_Item]:
        """A normal commit (0x0084) or a local pending list (0x008A, ends it as committed);
        not every commit is propagatable (then it has no authid)."""
        rng = self.rng
        secs = int(t.commit_ts.replace(tzinfo=_UTC).timestamp())
        t.extra["published_commit_ts"] = _dt.datetime.fromtimestamp(secs, _UTC)
        prop = rng.random() < 0.9
        kind = "E" if rng.random() < 0.15 else "M"
        return [_Item(tid, kind, self.enc.commit(secs, t.user, propagatable=prop), trx=t,
                      commit=True, flags=L.FLAG_PROPAGATABLE if prop else 0)]

    # ------------------------------------------------------------- the night
    def _streams(self, new: list[SynTrx], carried: list[SynTrx], last_key: str,
                 other_types) -> tuple[list[_Item], dict[bytes, int]]:
        """The night's items in log order (carried transactions' ends, new transactions,
        records of other types), and the last LSN/LSO of each carried transaction."""
        rng = self.rng
        streams: list[list[_Item]] = []
        last: dict[bytes, int] = {}
        for t in carried:
            tid = t.extra["tid"]
            last[tid] = t.extra[last_key]
            streams.append(self._end_items(t, tid))
        for t in new:
            self.tid += 1
            tid = tid_bytes(self.tid)
            t.trx_id = tid.hex().upper()
            t.extra["tid"] = tid
            streams.append(self._trx_items(t, tid))
        for _ in range(max(1, len(new) // 10)):
            code = rng.choice(other_types)
            streams.append([_Item(tid_bytes(rng.randint(0, self.tid)), code,
                                  rng.randbytes(rng.randint(0, 24)), flags=0)])
        return interleave(rng, streams), last

    def write(self, date: _dt.date, new: list[SynTrx], carried: list[SynTrx]) -> dict[str, bytes]:
        if self.v10:
            return self._write_v10(date, new, carried)
        rng = self.rng
        order, last = self._streams(new, carried, "last_lsn", OTHER_TYPES)
        for it in order:
            self.lsn += rng.randint(20, 400)
            it.lsn = self.lsn
            if it.rtype in OTHER_TYPES:
                continue
            it.prev = last.get(it.tid, 0)
            last[it.tid] = it.lsn
            if it.trx is not None:
                it.trx.extra["last_lsn"] = it.lsn
        cut = len(order) // 2
        index = {id(it): i for i, it in enumerate(order)}
        files: list[list[bytes]] = [[], []]
        enc = self.enc
        for i, it in enumerate(order):
            part = 0 if i < cut else 1
            if it.commit:
                it.trx.commit_position = hexpos(it.lsn, 12)
            if it.target is None:
                files[part].append(enc.record(lsn_bytes(it.lsn), it.rtype, it.body, tid_=it.tid,
                                              prev=lsn_bytes(it.prev), flags=it.flags))
                continue
            mode = it.mode
            same_file = (index[id(it.target)] < cut) == (i < cut)
            if not same_file:
                mode = "direct"
            if mode == "rid":
                rec = enc.record(lsn_bytes(it.lsn), "N", it.body, tid_=it.tid,
                                 prev=lsn_bytes(it.prev))
            else:
                rec = enc.record(lsn_bytes(it.lsn), "C", it.body, tid_=it.tid,
                                 prev=lsn_bytes(it.prev),
                                 flags=L.FLAG_PROPAGATABLE if mode == "direct" else 0,
                                 undo_next=lsn_bytes(it.target.prev),
                                 compensated=lsn_bytes(it.target.lsn))
            files[part].append(rec)
        out: dict[str, bytes] = {}
        self.record_counts = {}
        for recs in files:
            self.log_seq += 1
            name = f"S{self.log_seq:07d}.LOG"
            out[name] = b"".join(recs)
            self.record_counts[name] = len(recs)
        return out

    def _write_v10(self, date: _dt.date, new: list[SynTrx], carried: list[SynTrx]) -> dict[str, bytes]:
        rng, enc = self.rng, self.enc
        order, last = self._streams(new, carried, "last_lso", OTHER_V10_TYPES)
        records: list[bytes] = []
        for it in order:
            self.lsn += rng.randint(1, 40)
            self.lfs += rng.random() < 0.3
            it.lsn, it.lfs, it.lso = self.lsn, self.lfs, self.lso
            if not isinstance(it.rtype, int):
                it.prev = last.get(it.tid, 0)
                last[it.tid] = it.lso
                if it.trx is not None:
                    it.trx.extra["last_lso"] = it.lso
            rec = self._record_v10(it)
            records.append(rec)
            self.lso += len(rec) - L.V10.prefix_size
            if it.commit:
                it.trx.commit_position = f"{it.lfs:016X}{it.lsn:016X}"
        # the cut between the night's two archives: near the middle, but never between a
        # compensation of a committed transaction and the change it undoes
        index = {id(it): i for i, it in enumerate(order)}
        cut = len(order) // 2
        crossing = [(index[id(it.target)], i) for i, it in enumerate(order)
                    if it.target is not None and it.trx is not None and it.trx.outcome != "rollback"]
        while any(a < cut <= b for a, b in crossing):
            cut += 1
        out: dict[str, bytes] = {}
        self.record_counts = {}
        for recs in (records[:cut], records[cut:]):
            self.log_seq += 1
            name = f"S{self.log_seq:07d}.LOG"
            out[name] = b"".join(recs)
            self.record_counts[name] = len(recs)
        return out

    def _record_v10(self, it: _Item) -> bytes:
        enc = self.enc
        code = it.rtype if isinstance(it.rtype, int) else V10_CODES[it.rtype]
        kw = dict(tid_=it.tid, lfs=it.lfs, lso=it.lso, lso_prev=it.prev, flags=it.flags)
        if it.target is not None:
            if it.mode == "rid":         # a normal record carrying the undo function
                code, kw["flags"] = V10_CODES["N"], L.FLAG_PROPAGATABLE
            else:                        # compensation: 64-byte header (propagatable) or 56
                code = V10_CODES["C"]
                kw.update(flags=L.FLAG_PROPAGATABLE if it.mode == "direct" else 0,
                          undo_next=it.target.prev, compensated=it.target.lso)
        return enc.record10(it.lsn, code, it.body, **kw)
