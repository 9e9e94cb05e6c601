"""Sample nights of Informix ``onlog`` text, written with the project's writer.

A night is several logical-log files (uniqids increasing, across nights too) of interleaved
transactions: xids are taken lowest-free at BEGIN and given back at COMMIT/ROLLBACK, so they
are reused all the time; rolled-back transactions write a CLR for every record then
ROLLBACK; some committed ones roll back to a savepoint (work + its CLRs, not published);
updates come as HUPDATE or HUPBEF/HUPAFT, some changes with remainder-page records and index
records; DDL (CINDEX, DINDEX, BLDCL of new tables, PTRENAME and ERASE of those) and
LG_PTRUNCATE truncates; checkpoints and chunk records outside transactions; ``-l`` dumps in
some files. Transactions planned ``open`` write BEGIN and their work on their night and their
COMMIT (linking into the earlier night's file) on the next night.

Informix has no row images: changes carry ``row_id`` and the expected rows have
before/after null. Times are written in the source's local time (``timezone``); the UTC
commit time the pipeline must publish is computed here from the local time written.
"""

from __future__ import annotations

import datetime as _dt
import heapq
import random
from zoneinfo import ZoneInfo

from ..catalog import Catalog, Table
from ..synth import FormatSynth, SynChange, SynTrx, col, interleave
from . import encoder as E
from .decoder import position

DEFAULT_TIMEZONE = "America/Chicago"   # wms_informix in include/sources.yaml
FIRST_UNIQID = 40
FIRST_TMP_TBLSPACE = 0x300001


class Synth(FormatSynth):
    FORMAT = "informix"
    planner_options = {"p_rollback": 0.08, "p_open": 0.05, "p_ddl": 0.04, "p_truncate": 0.02,
                       "max_changes": 5}

    def __init__(self, source: str, catalog: Catalog | None = None, options: dict | None = None,
                 seed: int = 0, *, timezone: str | None = None, **planner_kw) -> None:
        tz = timezone or (options or {}).get("timezone") or DEFAULT_TIMEZONE
        super().__init__(source, catalog, options, seed, timezone=tz, **planner_kw)
        self.zone = ZoneInfo(self.timezone)
        self.uniqid = FIRST_UNIQID
        self.free_xids = list(range(1, 1000))          # a heap: lowest free xid first
        self.next_xid = 1000
        self.rowids: dict[int, tuple[list, int]] = {}  # id(row values) -> (values, rowid)
        self.slots: dict[str, int] = {}
        self.tmp_tables: list[tuple[int, str, str]] = []   # (tblspace, owner, name) made by BLDCL
        self.next_tmp = FIRST_TMP_TBLSPACE

    # ------------------------------------------------------------ catalog and values
    def make_catalog(self, source: str, rng: random.Random) -> Catalog:
        stock = Table("100123", "wms", "stock", (
            col("item_id", "INTEGER", False), col("location", "CHAR", length=10),
            col("qty", "INTEGER"), col("updated", "TIMESTAMP")), key=("item_id", "location"))
        locations = Table("100124", "wms", "locations", (
            col("location", "CHAR", False, length=10), col("zone", "CHAR", length=2),
            col("capacity", "DECIMAL", precision=9, scale=2)), key=("location",))
        shipments = Table("200045", "wms", "shipments", (
            col("shipment_id", "BIGINT", False), col("carrier", "VARCHAR", length=30),
            col("shipped", "DATE"), col("weight", "DOUBLE")), key=("shipment_id",))
        picks = Table("20004a", "wms", "picks", (
            col("pick_id", "INTEGER", False), col("shipment_id", "BIGINT"),
            col("item_id", "INTEGER"), col("qty", "SMALLINT")), key=("pick_id",))
        return Catalog(source, "informix", (stock, locations, shipments, picks))

    def value(self, col_, rng):
        return None                      # no row images in onlog: values are never written

    def images(self) -> bool:
        return False

    # ------------------------------------------------------------ rowids
    def _new_rowid(self, table_id: str) -> int:
        n = self.slots.get(table_id, 0x100 + 1) + 1
        if n & 0xFF > 0xC0:
            n = (n & ~0xFF) + 0x101
        self.slots[table_id] = n
        return n

    def _rowid_of(self, values: list, table_id: str) -> int:
        hit = self.rowids.get(id(values))
        if hit is None or hit[0] is not values:
            rowid = self._new_rowid(table_id)
            self.rowids[id(values)] = (values, rowid)
            return rowid
        return hit[1]

    # ------------------------------------------------------------ records of one change
    def _home(self, rtype: str, tab: Table, rowid: int) -> tuple[str, dict]:
        return rtype, {"tblspace_id": int(tab.id, 16), "rowid": rowid,
                       "slotlen": self.rng.randint(20, 180)}

    def _remainder(self, rtype: str, tab: Table, rowid: int) -> tuple[str, dict]:
        return self._home(rtype, tab, rowid + 0x10000)

    def _item(self, rtype: str, tab: Table, rowid: int) -> tuple[str, dict]:
        rng = self.rng
        return rtype, {"tblspace_id": int(tab.id, 16), "rowid": rowid,
                       "logical_page": rng.randint(1, 400), "key_number": rng.randint(1, 3),
                       "key_length": rng.choice((4, 8, 14))}

    def _change_records(self, t: SynTrx, ch: SynChange) -> list[tuple[str, dict]]:
        rng = self.rng
        tab = ch.table
        if ch.op == "c":
            rowid = self._rowid_of(ch.after, tab.id)
            recs = [self._home("HINSERT", tab, rowid)]
            if rng.random() < 0.15:
                recs.append(self._remainder("RINSERT", tab, rowid))
            if rng.random() < 0.3:
                recs.append(self._item("ADDITEM", tab, rowid))
        elif ch.op == "d":
            rowid = self._rowid_of(ch.before, tab.id)
            self.rowids.pop(id(ch.before), None)
            recs = [self._home("HDELETE", tab, rowid)]
            if rng.random() < 0.15:
                recs.append(self._remainder("RDELETE", tab, rowid))
            if rng.random() < 0.3:
                recs.append(self._item("DELITEM", tab, rowid))
        elif ch.op == "u":
            rowid = self._rowid_of(ch.before, tab.id)
            self.rowids.pop(id(ch.before), None)
            self.rowids[id(ch.after)] = (ch.after, rowid)
            if rng.random() < 0.5:
                old, new = rng.randint(20, 180), rng.randint(20, 180)
                recs = [("HUPDATE", {"tblspace_id": int(tab.id, 16), "rowid": rowid,
                                     "forward_ptr_rowid": 0, "old_slotlen": old,
                                     "new_slotlen": new, "no_of_pieces": 1})]
                if rng.random() < 0.15:
                    recs.append(("RUPDATE", {"tblspace_id": int(tab.id, 16),
                                             "rowid": rowid + 0x10000,
                                             "forward_ptr_rowid": rowid, "old_slotlen": old,
                                             "new_slotlen": new, "no_of_pieces": 2}))
            else:
                recs = [self._home("HUPBEF", tab, rowid)]
                split = rng.random() < 0.2
                if split:
                    recs.append(self._remainder("RUPBEF", tab, rowid))
                recs.append(self._home("HUPAFT", tab, rowid))
                if split:
                    recs.append(self._remainder("RUPAFT", tab, rowid))
        elif ch.op == "t":
            tbl = {"tblspace_id": int(tab.id, 16)}
            recs = [("LG_PTRUNCATE", tbl), ("LG_TRUNCATE", tbl), ("LG_ENDTRUNCATE", tbl)]
        else:
            return self._ddl_records(t, ch)
        ch.row_id = None if ch.op == "t" else format(rowid, "x")
        return recs

    def _ddl_records(self, t: SynTrx, ch: SynChange) -> list[tuple[str, dict]]:
        rng = self.rng
        tab = ch.table
        kinds = ["CINDEX", "DINDEX", "BLDCL"] + (["ERASE", "PTRENAME"] if self.tmp_tables else [])
        kind = rng.choice(kinds)
        if kind == "CINDEX":
            name = f"ix_{tab.name}_{t.serial}"
            ch.ddl = f"CINDEX create index {name}"
            return [("CINDEX", {"tblspace_id": int(tab.id, 16), "low_rowid": 0,
                                "high_rowid": rng.randint(100, 9000), "index_descriptor": name})]
        if kind == "DINDEX":
            key = rng.randint(1, 4)
            ch.ddl = f"DINDEX drop index key {key}"
            return [("PDINDEX", {"tblspace_id": int(tab.id, 16)}),
                    ("DINDEX", {"tblspace_id": int(tab.id, 16), "key_number": key})]
        cols = (col("id", "INTEGER", False),)
        if kind == "BLDCL":
            tbl, owner, name = self.next_tmp, "wms", f"tmp_load_{t.serial}"
            self.next_tmp += 1
            self.tmp_tables.append((tbl, owner, name))
            ch.table = Table(format(tbl, "x"), owner, name, cols)
            ch.ddl = f"BLDCL create table {owner}.{name} (tblspace {tbl:x}, 3 columns, row size 24)"
            return [("BLDCL", {"tblspace_id": tbl, "fextsize": 16, "nextsize": 16, "row_size": 24,
                               "ncolumns": 3, "table_name": f"{owner}.{name}"})]
        i = rng.randrange(len(self.tmp_tables))
        tbl, owner, name = self.tmp_tables[i]
        if kind == "ERASE":
            del self.tmp_tables[i]
            ch.table, ch.table_id = None, format(tbl, "x")
            ch.ddl = f"ERASE drop tblspace {tbl:x}"
            return [("ERASE", {"tblspace_id": tbl})]
        new = f"{name}_r{t.serial}"
        self.tmp_tables[i] = (tbl, owner, new)
        ch.table = Table(format(tbl, "x"), owner, new, cols)
        ch.ddl = f"PTRENAME rename table {owner}.{name} to {owner}.{new}"
        return [("PTRENAME", {"tblspace_id": tbl, "old_table_name": f"{owner}.{name}",
                              "new_table_name": f"{owner}.{new}"})]

    def _savepoint(self) -> list[tuple[str, dict]]:
        """Work rolled back to a savepoint: an insert and its index item, then 2 CLRs."""
        tab = self.rng.choice(self.catalog.tables)
        rowid = self._new_rowid(tab.id)
        work = [self._home("HINSERT", tab, rowid), self._item("ADDITEM", tab, rowid)]
        return work + [("CLR", {})] * len(work)

    # ------------------------------------------------------------ a night
    def _plan(self, t: SynTrx) -> list[tuple]:
        rng = self.rng
        groups = [self._change_records(t, ch) for ch in t.changes]
        n_work = sum(len(g) for g in groups)
        if t.outcome in ("commit", "open") and rng.random() < 0.15:
            groups.insert(rng.randint(0, len(groups)), self._savepoint())
        toks: list[tuple] = [("begin", t, None)]
        for g in groups:
            toks.extend(("rec", t, r) for r in g)
        if t.outcome == "commit":
            toks.append(("commit", t, None))
        elif t.outcome == "rollback":
            toks.extend(("rec", t, ("CLR", {})) for _ in range(n_work))
            toks.append(("rollback", t, None))
        return toks

    def _emit(self, w: E.OnlogWriter, tok: tuple) -> None:
        what, t, rec = tok
        rng = self.rng
        if what == "ckpoint":
            dpt = w.add("DPT", 0, 0, {"number_of_dirty_pages": rng.randint(0, 400)})
            w.add("CKPOINT", 0, dpt, {"max_users": rng.randint(5, 60),
                                      "number_of_active_transactions": rng.randint(0, 6)})
            return
        if what == "challoc":
            w.add("CHALLOC", 0, 0, {"pageno": rng.randint(0x1000, 0xfffff), "size": 0x40})
            return
        if what == "begin":
            if not self.free_xids:   # every xid is held by an open transaction: take a new one
                heapq.heappush(self.free_xids, self.next_xid)
                self.next_xid += 1
            xid = heapq.heappop(self.free_xids)
            t.extra["xid"] = xid
            addr = w.add("BEGIN", xid, 0, {**E.stamp(t.begin_ts), "pid": rng.randint(100, 99999),
                                           "user": t.user.lower()}, id_=rng.randint(1, 9))
            t.trx_id = f"{w.uniqid}:{addr:x}"
            t.extra["last"] = addr
            return
        xid, link = t.extra["xid"], t.extra["last"]
        if what == "rec":
            t.extra["last"] = w.add(rec[0], xid, link, rec[1])
            return
        rtype = "COMMIT" if what == "commit" else "ROLLBACK"
        stamp = t.commit_ts
        addr = w.add(rtype, xid, link, E.stamp(stamp))
        t.extra["last"] = addr
        heapq.heappush(self.free_xids, xid)
        if what == "commit":
            t.commit_position = position(w.uniqid, addr)
            t.extra["published_commit_ts"] = \
                stamp.replace(tzinfo=self.zone).astimezone(_dt.timezone.utc)

    def write(self, date: _dt.date, new: list[SynTrx], carried: list[SynTrx]) -> dict[str, bytes]:
        rng = self.rng
        midnight = _dt.datetime.combine(date, _dt.time(0, 0))
        streams: list[list] = []
        for t in carried:
            t.commit_ts = midnight + _dt.timedelta(seconds=rng.randint(1, 900))
            streams.append([("commit", t, None)])
        for t in new:
            t.begin_ts = t.begin_ts.replace(microsecond=0)
            t.commit_ts = t.commit_ts.replace(microsecond=0)
            streams.append(self._plan(t))
        toks = interleave(rng, streams)
        for i in sorted(rng.sample(range(len(toks) + 1), k=min(len(toks) // 25 + 1, 8)),
                        reverse=True):
            toks.insert(i, ("ckpoint" if rng.random() < 0.7 else "challoc", None, None))
        n_files = rng.randint(2, 4) if len(toks) > 8 else 1
        cuts = sorted(rng.sample(range(1, len(toks)), n_files - 1)) if n_files > 1 else []
        out: dict[str, bytes] = {}
        stamp = date.strftime("%Y%m%d")
        for i, (lo, hi) in enumerate(zip([0, *cuts], [*cuts, len(toks)])):
            w = E.OnlogWriter(self.uniqid, dumps=i == 0 or rng.random() < 0.4)
            self.uniqid += 1
            for tok in toks[lo:hi]:
                self._emit(w, tok)
            out[w.file_name(f"onlog_{stamp}")] = w.data()
        return out
