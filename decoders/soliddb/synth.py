"""Sample nights of solidDB SYS_LOG exports, written with the project's encoder."""

from __future__ import annotations

import datetime as _dt
import random

from ..base import hexpos
from ..catalog import Catalog, Table
from ..synth import FormatSynth, SynTrx, col, interleave
from . import encoder as E
from . import layout as L

ALTER_TABLE = 22


class Synth(FormatSynth):
    FORMAT = "soliddb"
    planner_options = {"p_rollback": 0.0, "p_open": 0.03, "p_ddl": 0.01}

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.addr = 1000
        self.trxid = 5000

    def make_catalog(self, source: str, rng: random.Random) -> Catalog:
        orders = Table("10001", "ERP", "ORDERS", (
            col("ORDER_ID", "INTEGER", False), col("CUSTOMER_ID", "BIGINT", False),
            col("STATUS", "CHAR", length=8), col("AMOUNT", "DECIMAL", precision=11, scale=2),
            col("DISCOUNT", "REAL"), col("WEIGHT", "DOUBLE"), col("NOTE", "VARCHAR", length=40),
            col("ORDER_DATE", "DATE"), col("ORDER_TIME", "TIME"), col("UPDATED", "TIMESTAMP")),
            key=("ORDER_ID",))
        items = Table("10002", "ERP", "ITEMS", (
            col("ITEM_ID", "INTEGER", False), col("QTY", "SMALLINT"), col("FLAG", "TINYINT"),
            col("CODE", "BINARY", length=4), col("TAG", "VARBINARY", length=16),
            col("PICTURE", "BLOB"), col("SPEC", "CLOB"), col("PRICE", "FLOAT")), key=("ITEM_ID",))
        names = Table("10003", "CRM", "NAMES", (
            col("NAME_ID", "INTEGER", False), col("NAME", "VARCHAR", length=30),
            col("CITY", "CHAR", length=12)), key=("NAME_ID",), encoding="latin-1")
        return Catalog(source, "soliddb", (orders, items, names))

    def _next_addr(self) -> bytes:
        self.addr += self.rng.randint(1, 40)
        return E.logaddr(self.addr)

    def write(self, date: _dt.date, new: list[SynTrx], carried: list[SynTrx]) -> dict[str, bytes]:
        rng = self.rng
        streams: list[list] = []
        for t in carried:
            streams.append([(t, "commit")])
        for t in new:
            self.trxid += rng.randint(1, 3)
            t.trx_id = str(self.trxid)
            if t.outcome == "commit" and rng.random() < 0.03:
                t.outcome = "capture_off"
            recs = [(t, "start")]
            for i, ch in enumerate(t.changes):
                recs.append((t, ("change", i)))
            if t.outcome in ("commit", "capture_off"):
                recs.append((t, "commit"))
            streams.append(recs)
        rows: list[str] = []
        split_ok: list[int] = []
        for t, what in interleave(rng, streams):
            tid = int(t.trx_id)
            if rng.random() < 0.02:
                rows.append(E.csv_row(L.EMPTY, None, None, None, 0, None, None))
            split_ok.append(len(rows))
            if what == "start":
                flags = L.FLAG_CAPTURE_OFF if t.outcome == "capture_off" else 0
                rows.append(E.csv_row(L.TRX_START, tid, tid, None, flags, self._next_addr(), None))
            elif what == "commit":
                addr = self._next_addr()
                t.commit_position = hexpos(addr, L.LOGADDR_HEX)
                t.extra["published_commit_ts"] = None   # SYS_LOG carries no commit time
                rows.append(E.csv_row(L.COMMIT, tid, tid, None, 0, addr, None))
            else:
                ch = t.changes[what[1]]
                tab = ch.table
                relid = int(tab.id)
                upper = rng.random() < 0.5
                if ch.op == "c":
                    rows.append(E.csv_row(L.INSERT, tid, tid + 1, relid, 1, self._next_addr(),
                                          E.encode_row(tab, ch.after), upper=upper))
                elif ch.op == "d":
                    rows.append(E.csv_row(L.DELETE_FULL, tid, tid + 1, relid, 1, self._next_addr(),
                                          E.encode_row(tab, ch.before), upper=upper))
                elif ch.op == "u":
                    rows.append(E.csv_row(L.UPDATE_BEFOREIMAGE, tid, tid + 1, relid, 1,
                                          self._next_addr(), E.encode_row(tab, ch.before)))
                    rows.append(E.csv_row(L.UPDATE, tid, tid + 1, relid, 1, self._next_addr(),
                                          E.encode_row(tab, ch.after), upper=upper))
                elif ch.op == "ddl":
                    rows.append(E.csv_row(L.DDL, tid, tid, relid, 1, self._next_addr(),
                                          E.encode_ddl(ALTER_TABLE, tab.qualified_name)))
                    if rng.random() < 0.7:
                        rows.append(E.csv_row(L.SQL, tid, tid, relid, 1, self._next_addr(),
                                              E.encode_sql(ch.ddl)))
                    else:
                        ch.ddl = f"Alter table {tab.qualified_name}"
        cut = split_ok[len(split_ok) // 2] if len(split_ok) > 4 else len(rows)
        stamp = date.strftime("%Y%m%d")
        out = {f"sys_log_{stamp}_01.csv": E.write_archive(rows[:cut])}
        if cut < len(rows):
            out[f"sys_log_{stamp}_02.csv"] = E.write_archive(rows[cut:])
        return out
