"""Sample nights of Oracle Rdb LogMiner binary output, written with the project's encoder.

LogMiner writes only committed work, each transaction's records together, in commit order,
with only the final image of each row per transaction (``M`` after image or ``D`` before
image), optionally followed by a ``C`` commit record. So the writer:

* writes a transaction on the night it commits (an ``open`` one on the next night, all of
  it; a rolled-back one never) and nothing for open or rolled-back work;
* keeps, per transaction, only the last change of each row (rows are told apart by DBK),
  and never deletes a row in the transaction that inserted it;
* gives commit times that strictly increase in file order, with sub-microsecond ticks that
  the decoder must truncate, and computes the expected UTC ``commit_ts`` from the local time
  it wrote;
* adds commit records to most archives (option ``commit_records``: True, False, or None =
  chosen per archive), fills some NULL columns with garbage (a NULL still occupies its
  width), and writes a few records with a RECORD_TYPE unknown to the catalog, so that the
  decoder has to find the table by RELATION_NAME.
"""

from __future__ import annotations

import datetime as _dt
import random

from ..catalog import Catalog, Table
from ..synth import FormatSynth, Planner, SynChange, SynTrx, col
from . import encoder as E
from . import layout as L
from .decoder import commit_position, local_to_utc

DEFAULT_TIMEZONE = "Europe/Berlin"


class RdbPlanner(Planner):
    """``m`` inserts a row or modifies a live one (after image), ``d`` deletes one; every
    row has a DBK, carried in ``row_id``."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.dbk_of: dict[int, str] = {}           # id(live row list) -> DBK text
        self.area = {t.id: i + 2 for i, t in enumerate(self.catalog.tables)}
        self.next_row = {t.id: 0 for t in self.catalog.tables}
        self.fresh: set[int] = set()

    def _new_dbk(self, table: Table) -> str:
        k = self.next_row[table.id]
        self.next_row[table.id] = k + 1
        return L.dbk_text(L.dbk_value(self.area[table.id], 1000 + k // 40, 1 + k % 40))

    def transaction(self, when: _dt.datetime) -> SynTrx:
        self.fresh: set[int] = set()               # rows inserted by this transaction
        return super().transaction(when)

    def change(self, table: Table) -> SynChange:
        rng = self.rng
        live = self.rows[table.id]
        op = rng.choice(self.ops)
        if op == "d" and live:
            # a row inserted and deleted by one transaction never shows in LogMiner output:
            # delete only rows of earlier transactions
            for _ in range(4):
                i = rng.randrange(len(live))
                before = live[i]
                if id(before) not in self.fresh:
                    live[i] = live[-1]
                    live.pop()
                    return SynChange("d", table, before, None,
                                     row_id=self.dbk_of.pop(id(before)))
        if live and rng.random() < 0.35:          # modify a live row, keeping its key
            i = rng.randrange(len(live))
            before = live[i]
            after = list(before)
            for j, c in enumerate(table.columns):
                if c.name not in table.key and rng.random() < 0.5:
                    after[j] = self.value(c, rng)
            live[i] = after
            dbk = self.dbk_of.pop(id(before))
            self.dbk_of[id(after)] = dbk
            if id(before) in self.fresh:
                self.fresh.discard(id(before))
                self.fresh.add(id(after))
            return SynChange("m", table, None, after, row_id=dbk)
        after = self.row(table)
        live.append(after)
        dbk = self._new_dbk(table)
        self.dbk_of[id(after)] = dbk
        self.fresh.add(id(after))
        return SynChange("m", table, None, after, row_id=dbk)


class Synth(FormatSynth):
    FORMAT = "rdb"
    planner_options = {"p_rollback": 0.0, "p_open": 0.0, "p_ddl": 0.0, "p_truncate": 0.0,
                       "ops": ("m", "m", "d")}

    def __init__(self, source: str, catalog: Catalog | None = None, options: dict | None = None,
                 seed: int = 0, timezone: str | None = None, **planner_kw) -> None:
        # the zone the source writes local times in (sources.yaml ``timezone``); without one,
        # that of the sample source fin_rdb
        timezone = timezone or (options or {}).get("timezone") or DEFAULT_TIMEZONE
        super().__init__(source, catalog, options, seed, timezone=timezone, **planner_kw)
        self.timezone = timezone
        kw = {**self.planner_options, **planner_kw}
        self.planner = RdbPlanner(self.catalog, seed, value=self.value, **kw)
        self.tsn = 70000
        self.last_local = _dt.datetime(1858, 11, 17)
        self.records_written: dict[str, int] = {}

    def make_catalog(self, source: str, rng: random.Random) -> Catalog:
        accounts = Table("41", "FIN", "ACCOUNTS", (
            col("ACCOUNT_ID", "INTEGER", False), col("BRANCH", "SMALLINT"),
            col("STATUS", "TINYINT"), col("BALANCE", "DOUBLE"), col("RATE", "REAL"),
            col("HOLDER", "VARCHAR", length=30), col("CURRENCY", "CHAR", length=3),
            col("OPENED", "DATE"), col("UPDATED", "TIMESTAMP")), key=("ACCOUNT_ID",))
        ledger = Table("42", "FIN", "LEDGER_ENTRIES", (
            col("ENTRY_ID", "BIGINT", False), col("ACCOUNT_ID", "INTEGER", False),
            col("AMOUNT", "DOUBLE"), col("BOOKED", "TIMESTAMP"), col("VALUE_DATE", "DATE"),
            col("MEMO", "VARCHAR", length=40), col("KIND", "TINYINT")), key=("ENTRY_ID",))
        rates = Table("47", "FIN", "FX_RATES", (
            col("CCY", "CHAR", False, length=3), col("FACTOR", "REAL"),
            col("MID", "DOUBLE"), col("AS_OF", "DATE"), col("SOURCE_ID", "SMALLINT"),
            col("NOTE", "VARCHAR", length=12)), key=("CCY",), encoding="latin-1")
        return Catalog(source, "rdb", (accounts, ledger, rates))

    # -- writing
    def _final_images(self, t: SynTrx) -> None:
        """Only the last change of each row (by DBK) per transaction (an insert then modify
        of one row is one ``m`` with the last image)."""
        last = {ch.row_id: i for i, ch in enumerate(t.changes)}
        t.changes = [ch for i, ch in enumerate(t.changes) if last[ch.row_id] == i]

    def _records(self, t: SynTrx, encoders: dict[str, E.RowEncoder]) -> list[bytes]:
        rng = self.rng
        self._final_images(t)
        self.tsn += rng.randint(1, 3)
        tsn = self.tsn
        t.trx_id = str(tsn)
        local = t.commit_ts.replace(microsecond=rng.randint(0, 999_999))
        if local <= self.last_local:
            local = self.last_local + _dt.timedelta(microseconds=rng.randint(1, 900))
        self.last_local = local
        commit_tad = E.vms_ticks(local, rng.randint(0, 9))
        start_tad = E.vms_ticks(min(t.begin_ts, local))
        t.commit_position = commit_position(commit_tad, tsn)
        t.extra["published_commit_ts"] = local_to_utc(local, self.timezone)
        out = []
        for ch in t.changes:
            tab = ch.table
            enc = encoders.get(tab.id) or encoders.setdefault(tab.id, E.RowEncoder(tab))
            values = ch.after if ch.op == "m" else ch.before
            fill = rng.choice((None, None, b"\xff", b"\xa5\x5a"))
            data, nbv = enc.encode(values, null_fill=fill, extra_ticks=rng.randint(0, 9))
            record_type = int(tab.id) if rng.random() > 0.03 else 9000 + int(tab.id)
            a, p, ln = (int(x) for x in ch.row_id.split(":"))
            out.append(E.row_record(L.ACTION_MODIFY if ch.op == "m" else L.ACTION_DELETE,
                                    tab.name, record_type, L.dbk_value(a, p, ln), start_tad,
                                    commit_tad, tsn, data, nbv, nbv_bits=len(tab.columns),
                                    record_version=1))
        t.extra["commit_record"] = E.commit_record(
            start_tad, commit_tad, tsn, tid=rng.randint(1, 5000), pid=rng.randint(0x20200000, 0x2020FFFF),
            rm_tid=rng.randbytes(16) if rng.random() < 0.1 else b"")
        return out

    def write(self, date: _dt.date, new: list[SynTrx], carried: list[SynTrx]) -> dict[str, bytes]:
        rng = self.rng
        encoders: dict[str, E.RowEncoder] = {}
        # carried ones first, then in planned order: the commit order (commit times are made
        # to increase in this order by _records)
        committed = [t for t in carried + new if t.outcome == "commit"]
        stamp = date.strftime("%Y%m%d")
        cut = (len(committed) + 1) // 2
        out: dict[str, bytes] = {}
        for k, part in enumerate((committed[:cut], committed[cut:]), start=1):
            if not part:
                continue
            option = self.options.get("commit_records")
            with_commits = rng.random() < 0.75 if option is None else bool(option)
            records: list[bytes] = []
            for t in part:
                records.extend(self._records(t, encoders))
                if with_commits:
                    records.append(t.extra["commit_record"])
                del t.extra["commit_record"]
            name = f"logminer_{stamp}_{k:02d}.rdb"
            out[name] = b"".join(records)
            self.records_written[name] = len(records)
        return out
