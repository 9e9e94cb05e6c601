"""The format-independent half of the sample-night generator.

A format's ``Synth`` plans transactions with ``Planner`` (random tables, rows, operations,
outcomes, transactions left open across nights), writes them with the format's own
encoder, and records what it wrote as ``Expected`` rows. Expected row images are rendered
with the shared ``RowRenderer`` from the generator's own values, never from decoder output.
"""

from __future__ import annotations

import datetime as _dt
import json
import random
import string
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Callable, Iterable

import numpy as np

from .catalog import Catalog, Column, Table
from .codecs import BlobRef, Float4, RowRenderer, value_renderer

_ALNUM = string.ascii_letters + string.digits


def random_text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_ALNUM + " ") for _ in range(n))


def default_value(col: Column, rng: random.Random):
    """A random, exactly representable value for ``col`` (None only for nullable columns)."""
    t = col.type
    if col.nullable and rng.random() < 0.1:
        return None
    if t == "TINYINT":
        return rng.randint(-128, 127)
    if t == "SMALLINT":
        return rng.randint(-32768, 32767)
    if t == "INTEGER":
        return rng.randint(-2**31, 2**31 - 1)
    if t == "BIGINT":
        return rng.randint(-2**63, 2**63 - 1)
    if t == "DECIMAL":
        p, s = col.precision or 9, col.scale or 0
        unscaled = rng.randint(-(10**p - 1), 10**p - 1)
        return Decimal(unscaled).scaleb(-s)
    if t == "REAL" or (t == "FLOAT" and col.length == 4):
        return Float4(float(np.float32(rng.randint(-2**20, 2**20) / 64.0)))
    if t in ("DOUBLE", "FLOAT"):
        return rng.randint(-2**40, 2**40) / 1024.0
    if t == "CHAR":
        return random_text(rng, col.length or 1)
    if t == "VARCHAR":
        return random_text(rng, rng.randint(0, min(col.length or 1, 24)))
    if t == "BINARY":
        return rng.randbytes(col.length or 1)
    if t == "VARBINARY":
        return rng.randbytes(rng.randint(0, min(col.length or 1, 16)))
    if t == "DATE":
        return _dt.date(1970, 1, 1) + _dt.timedelta(days=rng.randint(-25000, 40000))
    if t == "TIME":
        return _dt.time(rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59))
    if t == "TIMESTAMP":
        return _dt.datetime(1970, 1, 1) + _dt.timedelta(
            seconds=rng.randint(0, 2_000_000_000), microseconds=rng.randint(0, 999_999))
    if t == "BLOB":
        return BlobRef(rng.randint(1, 2**40))
    if t == "CLOB":
        return random_text(rng, rng.randint(0, 40))
    raise ValueError(f"no generator for {t}")


# column type recipes that formats choose from when they invent a catalog
def col(name: str, type_: str, nullable: bool = True, **kw) -> Column:
    return Column(name=name, type=type_, nullable=nullable, **kw)


@dataclass
class SynChange:
    op: str                          # c u d m t ddl
    table: Table | None
    before: list | None = None
    after: list | None = None
    ddl: str | None = None
    row_id: str | None = None
    table_id: str | None = None      # for DDL on tables the catalog does not know
    extra: dict = field(default_factory=dict)


@dataclass
class SynTrx:
    serial: int
    changes: list[SynChange]
    outcome: str                     # commit | rollback | open (commits on a later night) | capture_off
    user: str
    begin_ts: _dt.datetime
    commit_ts: _dt.datetime
    commit_night: int = 0            # index of the night whose archives carry the commit
    # filled in by the writer:
    trx_id: str | None = None
    commit_position: str | None = None
    extra: dict = field(default_factory=dict)


@dataclass
class Expected:
    """One change the pipeline must publish, in the generator's words."""
    trx_id: str
    commit_position: str
    commit_ts: _dt.datetime | None
    op: str
    table_id: str | None
    schema_name: str | None
    table_name: str | None
    before: str | None
    after: str | None
    ddl: str | None
    row_id: str | None

    def as_dict(self) -> dict:
        return dict(self.__dict__)


_renderers: dict[int, RowRenderer] = {}


def render(table: Table, values: list | None) -> str | None:
    if values is None:
        return None
    r = _renderers.get(id(table))
    if r is None:
        r = _renderers[id(table)] = RowRenderer(table.columns)
    return r(values)


def expected_rows(trxs: Iterable[SynTrx], *, images: bool = True) -> list[Expected]:
    """Published changes of the committed transactions, in commit order."""
    out: list[Expected] = []
    done = [t for t in trxs if t.outcome == "commit" and t.changes]
    done.sort(key=lambda t: t.commit_position)
    for t in done:
        for ch in t.changes:
            tab = ch.table
            out.append(Expected(
                trx_id=t.trx_id, commit_position=t.commit_position,
                commit_ts=t.extra.get("published_commit_ts", t.commit_ts), op=ch.op,
                table_id=ch.table_id or (tab.id if tab else None),
                schema_name=tab.schema if tab else None, table_name=tab.name if tab else None,
                before=render(tab, ch.before) if images and tab else None,
                after=render(tab, ch.after) if images and tab else None,
                ddl=ch.ddl, row_id=ch.row_id))
    return out


class Planner:
    """Plans transactions over a catalog: which rows change how, and how each ends."""

    def __init__(self, catalog: Catalog, seed: int = 0, *,
                 value: Callable[[Column, random.Random], object] = default_value,
                 ops: tuple[str, ...] = ("c", "c", "u", "u", "d"),
                 p_rollback: float = 0.05, p_open: float = 0.03, p_ddl: float = 0.01,
                 p_truncate: float = 0.0, max_changes: int = 6, p_reinsert: float = 0.0) -> None:
        self.catalog = catalog
        self.rng = random.Random(seed)
        self.value = value
        self.ops = ops
        self.p_rollback, self.p_open, self.p_ddl, self.p_truncate = \
            p_rollback, p_open, p_ddl, p_truncate
        self.max_changes = max_changes
        self.p_reinsert = p_reinsert      # an insert re-using the key of a row deleted tonight
        self.serial = 0
        self.rows: dict[str, list[list]] = {t.id: [] for t in catalog.tables}
        self.deleted: dict[str, list[list]] = {t.id: [] for t in catalog.tables}

    def row(self, table: Table) -> list:
        return [self.value(c, self.rng) for c in table.columns]

    def change(self, table: Table) -> SynChange:
        rng = self.rng
        live = self.rows[table.id]
        op = rng.choice(self.ops)
        if op in ("u", "d") and not live:
            op = "c"
        if op in ("c", "m"):
            after = self.row(table)
            gone = self.deleted[table.id]
            if self.p_reinsert and gone and table.key and rng.random() < self.p_reinsert:
                old = gone.pop(rng.randrange(len(gone)))
                for j, c in enumerate(table.columns):
                    if c.name in table.key:
                        after[j] = old[j]
            live.append(after)
            return SynChange(op, table, None, after)
        i = rng.randrange(len(live))
        before = live[i]
        if op == "u":
            after = list(before)
            for j, c in enumerate(table.columns):
                if rng.random() < 0.5:
                    after[j] = self.value(c, rng)
            live[i] = after
            return SynChange("u", table, before, after)
        live[i] = live[-1]
        live.pop()
        if self.p_reinsert:
            self.deleted[table.id].append(before)
        return SynChange("d", table, before, None)

    def transaction(self, when: _dt.datetime) -> SynTrx:
        rng = self.rng
        self.serial += 1
        changes: list[SynChange] = []
        r = rng.random()
        if r < self.p_ddl:
            t = rng.choice(self.catalog.tables)
            changes.append(SynChange("ddl", t, ddl=f"ALTER TABLE {t.qualified_name} ADD COLUMN X{self.serial} INTEGER"))
        elif r < self.p_ddl + self.p_truncate:
            t = rng.choice(self.catalog.tables)
            self.rows[t.id].clear()
            changes.append(SynChange("t", t))
        else:
            for _ in range(rng.randint(1, self.max_changes)):
                changes.append(self.change(rng.choice(self.catalog.tables)))
        r = rng.random()
        outcome = "rollback" if r < self.p_rollback else \
            "open" if r < self.p_rollback + self.p_open else "commit"
        user = rng.choice(["APPUSER", "BATCH", "ETL01", "DBA"])
        commit_ts = when + _dt.timedelta(seconds=rng.randint(0, 5))
        return SynTrx(self.serial, changes, outcome, user, when, commit_ts)

    def night(self, date: _dt.date, n: int) -> list[SynTrx]:
        """``n`` transactions spread over the day, in begin order."""
        start = _dt.datetime.combine(date, _dt.time(0, 0))
        step = 86_000 / max(n, 1)
        for gone in self.deleted.values():
            gone.clear()
        return [self.transaction(start + _dt.timedelta(seconds=i * step)) for i in range(n)]


class KeyedState:
    """Each keyed table as the generator knows it wrote it: the committed changes applied by
    key in commit order (SPEC section 5, "Change products": ``c``/``m`` upsert the after
    image, ``u`` removes the before key and upserts the after image, ``d`` removes, ``t``
    empties, ``ddl`` nothing), from the generator's own values."""

    def __init__(self, catalog: Catalog) -> None:
        self.tables = {t.id: t for t in catalog.tables if t.key}
        self.key_idx = {t.id: [i for i, c in enumerate(t.columns) if c.name in t.key]
                        for t in self.tables.values()}
        # table id -> key -> (values, trx_id, commit_position, date of the change)
        self.rows: dict[str, dict[tuple, tuple]] = {tid: {} for tid in self.tables}
        # of the last ``apply``: updates/deletes that found no row, per table id; and per
        # (table id, key) the changes naming it: [count, first (trx_id, pos), last (trx_id, pos)]
        self.missing: dict[str, int] = {}
        self.named: dict[tuple, list] = {}

    def key(self, table_id: str, values: list) -> tuple:
        return tuple(values[i] for i in self.key_idx[table_id])

    def apply(self, committed: list[SynTrx], date: _dt.date) -> None:
        self.missing, self.named = {}, {}

        def name(tid: str, key: tuple, who: tuple) -> None:
            n = self.named.setdefault((tid, key), [0, who, who])
            n[0] += 1
            n[2] = who

        for t in sorted(committed, key=lambda t: t.commit_position):
            who = (t.trx_id, t.commit_position)
            for ch in t.changes:
                tab = ch.table
                rows = self.rows.get(tab.id) if tab is not None else None
                if rows is None:
                    continue
                if ch.op == "t":
                    for key in rows:
                        name(tab.id, key, who)
                    rows.clear()
                    continue
                keys = set()
                if ch.op in ("u", "d") and ch.before is not None:
                    keys.add(self.key(tab.id, ch.before))
                    if self.key(tab.id, ch.before) not in rows:
                        self.missing[tab.id] = self.missing.get(tab.id, 0) + 1
                    rows.pop(self.key(tab.id, ch.before), None)
                if ch.op in ("c", "m", "u") and ch.after is not None:
                    keys.add(self.key(tab.id, ch.after))
                    rows[self.key(tab.id, ch.after)] = (list(ch.after), t.trx_id,
                                                        t.commit_position, date)
                for key in keys:
                    name(tab.id, key, who)

    def key_text(self, table_id: str, key: tuple) -> str:
        """The key as a canonical JSON object, columns in the catalog's ``key`` order."""
        tab = self.tables[table_id]
        by_name = {c.name: (i, c) for i, c in enumerate(tab.columns)}
        vals = dict(zip([tab.columns[i].name for i in self.key_idx[table_id]], key))
        parts = []
        for k in tab.key:
            v = vals[k]
            parts.append(json.dumps(k) + ": " + ("null" if v is None else value_renderer(by_name[k][1])(v)))
        return "{" + ", ".join(parts) + "}"

    def rendered(self) -> dict[str, list[dict]]:
        """Per table id: its rows as canonical JSON with the change that wrote them."""
        return {tid: [{"key": self.key_text(tid, key), "row": render(self.tables[tid], v),
                       "trx_id": trx, "commit_position": pos, "date": d.isoformat() if d else None}
                      for key, (v, trx, pos, d) in rows.items()]
                for tid, rows in self.rows.items()}


@dataclass
class NightOut:
    date: _dt.date
    archives: dict[str, bytes]        # file name -> bytes
    expected: list[Expected]          # what must be published on this night, in commit order
    trxs: list[SynTrx]                # every transaction written (in part) on this night
    mirror: dict[str, list[dict]] = field(default_factory=dict)  # KeyedState.rendered() after it


class FormatSynth:
    """Base of each format's generator: plans with ``Planner``, writes with the encoder.

    Transactions planned as ``open`` are written without their end on their night and
    end (commit) on the next night, so multi-night runs exercise carried transactions."""

    FORMAT = ""
    planner_options: dict = {}

    def __init__(self, source: str, catalog: Catalog | None = None, options: dict | None = None,
                 seed: int = 0, timezone: str = "UTC", **planner_kw) -> None:
        self.source = source
        self.options = dict(options or {})
        self.timezone = timezone      # zone the source writes local times in (informix, rdb)
        self.rng = random.Random(seed * 7919 + 17)
        self.catalog = catalog or self.make_catalog(source, random.Random(seed))
        kw = {**self.planner_options, **planner_kw}
        self.planner = Planner(self.catalog, seed, value=self.value, **kw)
        self.carried: list[SynTrx] = []
        self.night_no = 0
        self.state = KeyedState(self.catalog)

    # -- what a format provides
    def make_catalog(self, source: str, rng: random.Random) -> Catalog:
        raise NotImplementedError

    def value(self, col: Column, rng: random.Random):
        return default_value(col, rng)

    def write(self, date: _dt.date, new: list[SynTrx], carried: list[SynTrx]) -> dict[str, bytes]:
        """Write the night's archives; set ``trx_id`` and ``commit_position`` on each
        transaction that commits on this night."""
        raise NotImplementedError

    def images(self) -> bool:
        return True

    # -- the driver
    def night(self, date: _dt.date, n_transactions: int) -> NightOut:
        new = self.planner.night(date, n_transactions)
        carried = self.carried
        for t in carried:
            t.outcome = "commit"
        archives = self.write(date, new, carried)
        self.carried = [t for t in new if t.outcome == "open"]
        committed = [t for t in carried + new if t.outcome == "commit"]
        self.night_no += 1
        mirror = {}
        if self.images():
            self.state.apply(committed, date)
            mirror = self.state.rendered()
        return NightOut(date, archives, expected_rows(committed, images=self.images()),
                        carried + new, mirror)

    def nights(self, first: _dt.date, days: int, n_transactions: int) -> list[NightOut]:
        return [self.night(first + _dt.timedelta(days=i), n_transactions) for i in range(days)]


def interleave(rng: random.Random, streams: list[list], window: int = 4) -> list:
    """Merge per-transaction record lists the way concurrent sessions write a log: up to
    ``window`` transactions in flight, each stream's own order kept."""
    out: list = []
    active: list[list] = []
    queue = [list(reversed(s)) for s in streams if s]
    qi = 0
    while qi < len(queue) or active:
        while len(active) < window and qi < len(queue):
            active.append(queue[qi])
            qi += 1
        s = rng.choice(active)
        out.append(s.pop())
        if not s:
            active.remove(s)
    return out
