"""Sample nights of Log Master logical log data files, written with the project's encoder.

What a night holds (two archives, files unordered as Log Master writes them):

* each unit of recovery's records carry ORDERVALUE 1..n (sometimes two records share an
  ORDERVALUE and LOGLRSN decides), the UOR's disposition and commit LRSN/timestamp;
* rolled-back UORs (UORDISP ``A``) and, inside committed ones, records with LOGRECDISP
  ``S``/``O`` (skipped);
* UORs left open: some of their records this night with UORDISP blank, the rest next night
  with ``C`` (all published then) or, sometimes, ``A`` (all dropped);
* long records split into segments (by size, or at random cuts), pieces spread over both
  archives in any order;
* truncates (``DM``/``DT``/``DR``), ``CO`` DDL, ``E`` exchange, ``IL`` load inserts and
  ``CM``/``SC`` control records;
* the second archive has 296-byte headers (a longer header, which readers must tolerate).

``records_written`` maps each archive of the last night to the records in it (accounting).
"""

from __future__ import annotations

import datetime as _dt
import random

from ..base import hexpos
from ..catalog import Catalog, Column, Table
from ..codecs import Float4
from ..synth import FormatSynth, SynChange, SynTrx, col, default_value
from . import encoder as E
from . import layout as L

_TEXT = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 []!|^¬éÄ$#@"
HEADER_LENS = (L.MIN_HEADER, 296)


class Synth(FormatSynth):
    FORMAT = "lldf"
    planner_options = {"p_rollback": 0.08, "p_open": 0.08, "p_ddl": 0.04, "p_truncate": 0.03}
    MAX_SEGLEN = 400          # Log Master splits DATA areas longer than this
    P_RANDOM_SPLIT = 0.12     # ... and we split some shorter ones at random cuts

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.lrsn = 0x00DB7A10000000000000
        self.rba = 0x00000000000A00000000
        self.records_written: dict[str, int] = {}

    # ------------------------------------------------------------ catalog and values
    def make_catalog(self, source: str, rng: random.Random) -> Catalog:
        accounts = Table("260.5", "CORE", "ACCOUNTS", (
            col("ACCT_ID", "INTEGER", False), col("BRANCH", "SMALLINT"),
            col("BALANCE", "DECIMAL", precision=15, scale=2), col("RATE", "FLOAT", length=8),
            col("FACTOR", "FLOAT", length=4), col("STATUS", "CHAR", length=1),
            col("HOLDER", "VARCHAR", length=40), col("OPENED", "DATE"),
            col("UPDATED", "TIMESTAMP")), key=("ACCT_ID",))
        transfers = Table("260.7", "CORE", "TRANSFERS", (
            col("XFER_ID", "BIGINT", False), col("FROM_ACCT", "INTEGER", False),
            col("AMOUNT", "DECIMAL", False, precision=11, scale=2),
            col("FEE", "DECIMAL", precision=4, scale=0), col("BOOKED", "TIME"),
            col("MEMO", "VARCHAR", length=1000), col("CODE", "CHAR", False, length=4),
            col("REF", "VARCHAR", False, length=12)), key=("XFER_ID",))
        customers = Table("261.3", "CRM", "CUSTOMERS", (
            col("CUST_ID", "INTEGER", False), col("NAME", "CHAR", length=20),
            col("CITY", "VARCHAR", length=30), col("SCORE", "FLOAT", False, length=4),
            col("WEIGHT", "FLOAT", False, length=8), col("BORN", "DATE", False),
            col("SEEN", "TIMESTAMP", False), col("LEVEL", "SMALLINT", False),
            col("LIMIT", "DECIMAL", False, precision=9, scale=3), col("AT", "TIME", False)),
            key=("CUST_ID",), encoding="cp500")
        return Catalog(source, "lldf", (accounts, transfers, customers))

    def value(self, c: Column, rng: random.Random):
        """Values exactly representable in the lldf encodings: FLOAT(4) with 21 significant
        bits and FLOAT(8) with 53 (an IBM hex fraction keeps at least that many), both
        inside the IEEE range so that the JSON text reads back exactly; text from a set of
        characters that differ between cp037 and cp500."""
        if c.nullable and rng.random() < 0.1:
            return None
        if c.type == "FLOAT" and c.length == 4:
            return Float4(rng.randint(-2**20, 2**20) * 2.0 ** rng.randint(-40, 40))
        if c.type == "FLOAT":
            return rng.randint(-2**52, 2**52) * 2.0 ** rng.randint(-90, 90)
        if c.type == "CHAR":
            return "".join(rng.choice(_TEXT) for _ in range(c.length))
        if c.type == "VARCHAR":
            top = c.length if c.length > 100 and rng.random() < 0.3 else min(c.length, 24)
            return "".join(rng.choice(_TEXT) for _ in range(rng.randint(0, top)))
        return default_value(Column(c.name, c.type, False, c.length, c.precision, c.scale), rng)

    # ------------------------------------------------------------ ids and positions
    def _next_lrsn(self) -> int:
        self.lrsn += self.rng.randint(1, 0x4000) << 24
        return self.lrsn

    def _next_rba(self) -> int:
        self.rba += self.rng.randint(0x40, 0x2000)
        return self.rba

    def _rid(self) -> bytes:
        return self.rng.randint(2, 0xFFFFF).to_bytes(4, "big") + bytes([self.rng.randint(1, 255)])

    # ------------------------------------------------------------ one change's records
    def _area(self, ch: SynChange, cp: str) -> tuple[str, bytes]:
        rng = self.rng
        tab = ch.table
        sign = 0xF if rng.random() < 0.2 else 0xC
        if ch.op in ("c", "u", "d"):
            ct = {"c": "IL" if rng.random() < 0.1 else "I ", "u": "UB", "d": "D "}[ch.op]
            return ct, E.row_area(tab, ch.before, ch.after, positive_sign=sign)
        if ch.op == "t":
            ct = rng.choice(sorted(L.TRUNCATE_TYPES))
            if ct == "DM" and rng.random() < 0.5:   # LOAD REPLACE of a partition: limit keys
                return ct, E.encode_area(rng.randbytes(rng.randint(1, 30)))
            return ct, b""
        # ddl
        if ch.extra.get("exchange"):
            owner, name = ch.extra["exchange"]
            return "E ", E.exchange_area(owner, name, cp)
        if not ch.ddl:
            ch.ddl = L.CATALOG_OBJECT_DDL.format(table=tab.qualified_name)
            return "CO", E.encode_area(b"")
        return "CO", E.ddl_area(ch.ddl, cp)

    def _pieces(self, area: bytes) -> list[bytes]:
        rng = self.rng
        if len(area) > self.MAX_SEGLEN:
            return E.split_by_size(area, self.MAX_SEGLEN)
        if len(area) >= 2 and rng.random() < self.P_RANDOM_SPLIT:
            cuts = rng.sample(range(1, len(area)), min(len(area) - 1, rng.randint(1, 3)))
            return E.split_area(area, cuts)
        return [area]

    # ------------------------------------------------------------ the night
    def write(self, date: _dt.date, new: list[SynTrx], carried: list[SynTrx]) -> dict[str, bytes]:
        rng = self.rng
        cp = self.options.get("codepage") or E.DEFAULT_CODEPAGE
        rdw = bool(self.options.get("rdw", False))
        night_start = _dt.datetime.combine(date, _dt.time(0, 0))
        work: list[tuple[SynTrx, list[SynChange], str]] = []
        for t in carried:
            if t.extra.get("late_abort"):
                t.outcome = "rollback"
            work.append((t, t.changes[t.extra["written"]:], "A" if t.outcome == "rollback" else "C"))
            t.commit_ts = night_start + _dt.timedelta(seconds=rng.randint(1, 600))
        for t in new:
            t.extra["uor_rba"], t.extra["uor_lrsn"] = self._next_rba(), self._next_lrsn()
            t.trx_id = hexpos(t.extra["uor_rba"], L.BIN10_HEX)
            t.extra["ov"] = 0
            for ch in t.changes:
                if ch.op == "ddl" and rng.random() < 0.3:
                    tab = ch.table
                    clone = (tab.schema, (tab.name + "_CLONE")[:18])
                    ch.extra["exchange"] = clone
                    ch.ddl = L.EXCHANGE_DDL.format(table=tab.qualified_name, clone=".".join(clone))
                elif ch.op == "ddl" and rng.random() < 0.15:
                    ch.ddl = None
            if t.outcome == "open":
                while len(t.changes) < 2:
                    t.changes.append(self.planner.change(rng.choice(self.catalog.tables)))
                k = rng.randint(1, len(t.changes) - 1)
                t.extra["written"] = k
                t.extra["late_abort"] = rng.random() < 0.25
                work.append((t, t.changes[:k], " "))
            else:
                work.append((t, t.changes, "A" if t.outcome == "rollback" else "C"))

        groups: list[list[tuple[dict, bytes]]] = []     # per change: its pieces
        for t, changes, disp in work:
            entries = []     # (change or None for a skipped extra, LOGRECDISP, ordervalue, lrsn, rba)
            for ch in changes:
                if disp == "C" and rng.random() < 0.08:
                    t.extra["ov"] += 1
                    entries.append((None, rng.choice("SO"), t.extra["ov"], self._next_lrsn(),
                                    self._next_rba()))
                if not (entries and rng.random() < 0.1):
                    t.extra["ov"] += 1
                entries.append((ch, "A" if disp == "A" else "C", t.extra["ov"],
                                self._next_lrsn(), self._next_rba()))
            commit = {}
            if disp == "C":
                lrsn, rba = self._next_lrsn(), self._next_rba()
                t.commit_position = hexpos(lrsn, L.BIN10_HEX)
                ts = t.commit_ts.replace(microsecond=rng.randint(0, 999_999))
                t.commit_ts = ts
                t.extra["published_commit_ts"] = ts.replace(tzinfo=_dt.timezone.utc)
                commit = {"uor_commit_lrsn": E.bin10(lrsn), "uor_commit_point": E.bin10(rba),
                          "uor_commit_timestamp": E.ts17(ts, f"{rng.randint(0, 10**9 - 1):09d}")}
            for ch, lrd, ov, lrsn, rba in entries:
                if ch is None:   # a change rolled back to a savepoint / reversed by Db2
                    tab = rng.choice(self.catalog.tables)
                    ch = SynChange("c", tab, None, self.planner.row(tab))
                tab = ch.table
                ct, area = self._area(ch, cp)
                rid = self._rid() if ch.op in ("c", "u", "d") else bytes(5)
                if ch.op in ("c", "u", "d"):
                    ch.row_id = rid.hex().upper()
                dbid, obid = (int(x) for x in tab.id.split("."))
                fields = {
                    "system_id": "DB2P", "dbid": dbid, "psid": obid + 1, "tbobid": obid,
                    "len_owner": len(tab.schema), "len_name": len(tab.name),
                    "dbname": f"DB{dbid}", "tsname": f"TS{obid}", "owner": tab.schema,
                    "name": tab.name, "timestamp": E.ts17(t.begin_ts), "log_lrsn": E.bin10(lrsn),
                    "log_rba": E.bin10(rba), "rid": rid, "change_type": ct, "sql_type": "R",
                    "log_rec_disp": lrd, "log_bytes": len(area) + 60,
                    "uor_timestamp": E.ts17(t.begin_ts), "uor_disp": disp,
                    "uor_id_lrsn": E.bin10(t.extra["uor_lrsn"]), "uor_id": E.bin10(t.extra["uor_rba"]),
                    "order_value": ov, "connection_type": "TS", "connect_id": "BATCH",
                    "correlation_id": f"JOB{t.serial % 1000:03d}", "auth_id": t.user[:8],
                    "plan": "COREPLAN", **commit}
                groups.append([(fields, p) for p in self._pieces(area)])
        for _ in range(rng.randint(1, 3)):      # Db2 commands and status changes
            ct = rng.choice(("CM", "SC"))
            text = "-STOP DATABASE(DB260) SPACENAM(TS6)" if ct == "CM" else "STATUS RW"
            groups.append([({"change_type": ct, "uor_disp": " ", "log_rba": E.bin10(self._next_rba()),
                             "log_lrsn": E.bin10(self._next_lrsn()), "timestamp": E.ts17(night_start)},
                            E.encode_area(text.encode(cp)))])

        files: list[list[bytes]] = [[], []]
        spread = False
        for pieces in groups:
            first = rng.randrange(2)
            for i, (fields, piece) in enumerate(pieces):
                # segments: alternate archives for the first group, then at random
                a = (first + i) % 2 if len(pieces) > 1 and not spread else rng.randrange(2)
                f = dict(fields, len_segment=len(piece), num_segments=len(pieces), segment_no=i + 1)
                files[a].append(E.encode_header(f, cp, header_len=HEADER_LENS[a], pad=0x40) + piece)
            spread = spread or len(pieces) > 1
        stamp = date.strftime("%Y%m%d")
        out = {}
        self.records_written = {}
        for a, recs in enumerate(files):
            rng.shuffle(recs)
            name = f"lldf_{stamp}_{a + 1:02d}.dat"
            out[name] = E.write_file(recs, rdw=rdw)
            self.records_written[name] = len(recs)
        return out
