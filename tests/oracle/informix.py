"""ORACLE (tests only): the per-record Informix onlog decoder as it was before the columnar
rewrite of decoders/informix/decoder.py (its layout frozen beside it in informix_layout.py);
tests/test_informix_oracle.py checks that both give the same rows. ``decode`` is wrapped with
``accounts_bytes`` like the package's. Do not change its behaviour.

Decoder of Informix ``onlog`` text, one logical-log file at a time (SPEC section 3, informix).

Lines: blank lines are ignored; header lines (``addr len type xid id link``) may repeat
anywhere and are not records; a line starting with white space is a ``-l`` dump line of the
record above it (kept in that record's raw text, never a record); every other line is a
record line. ``record_offset`` is the record's 1-based line number, ``record_index`` counts
record lines from 0.

Transactions (state carried from file to file and night to night, see ``_Trx``):

* a BEGIN opens a transaction for its xid; its id is ``<uniqid>:<begin addr>`` (xids are
  reused, the position of the BEGIN is not);
* every later record of an open xid must ``link`` to the previous record of that xid (in
  this or an earlier file). A record whose link does not is quarantined (``broken_chain``)
  and the chain goes on from it: the next record must link to the quarantined one, so one
  bad link costs one record. After a record whose own address could not be read, the next
  link of that xid is accepted as it is;
* COMMIT / ROLLBACK end the transaction (also when quarantined: the xid is free again);
* records of checkpoints and chunk/log management (``layout.SYSTEM``) and records of an xid
  without an open transaction are ``control`` rows.

Changes: HINSERT ``c``, HDELETE ``d``, HUPDATE ``u``, HUPBEF + the HUPAFT of the same row
``u`` (one row, ``n_records`` 2); remainder-page records fold into the last home-row change
of their transaction (``n_records`` + 1; when that change was published from an earlier
file, the remainder is a ``control`` row ``remainder_of_earlier_file``). BLDCL, PTRENAME,
CINDEX, DINDEX, ERASE are ``ddl``; LG_PTRUNCATE is ``t``. A row change or truncate of a
tblspace the catalog does not know is quarantined (``unknown_table``); DDL publishes with the
table name the record prints (BLDCL: its table name, PTRENAME: the new name), if any.

CLR rule: each CLR compensates the most recent record of its transaction that is not yet
compensated (records are stacked as they are read, BEGIN/CLR/COMMIT/ROLLBACK excepted); its
``undo`` row's ``undo_of`` is the position of the change that record belongs to (its own
position for a record that is not part of a change). A CLR with nothing left to compensate
is a control row ``clr_without_work``.

Positions: ``position`` = 8 hex digits of the uniqid + 8 of the addr (upper case), so text
order is log order across files; ``trx_id`` = ``<uniqid>:<begin addr>`` (decimal, lower-case
hex); ``commit_position`` = the COMMIT's position; ``commit_ts`` = the COMMIT's date and time
read in ``ctx.timezone`` (fold 0 for an ambiguous local time), as UTC. ``table_id`` and
``row_id`` are the printed hex values, lower case, without leading zeros.

Carry (JSON): ``{"version": 1, "uniqid": <last file>, "open": {"<xid>": {"trx": trx_id,
"user": BEGIN user, "last": addr of the xid's last record (None: unknown), "undo": [positions
a CLR may still compensate], "fold": {"owner", "after", "tbl", "row"} | None}}}``.

Other decisions: an xid that BEGINs again while still open starts a new transaction (the old
one is never ended, its rows stay held); a BEGIN whose own columns are bad is quarantined
but still opens its transaction; columns beyond the documented ones are ignored (kept on the
parsed ``Record``); a file name without ``_<uniqid>.txt`` makes the whole file one
quarantine row (``n_records`` = its record lines) and passes the carry on unchanged.
"""

from __future__ import annotations

import datetime as _dt
import posixpath
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

from decoders import codecs as C
from decoders.base import DecodeContext, hexpos
from decoders.catalog import Catalog
from decoders.errors import BadValue, BrokenChain, Corrupt, DecodeError, NeedData, \
    UnknownRecordType, UnknownTable
from decoders.events import EventSink, accounts_bytes

from . import informix_layout as L

CARRY_VERSION = 1
POS_WIDTH = 8                      # hex digits of uniqid and of addr in a position


def position(uniqid: int, addr: int) -> str:
    """Fixed-width upper-case hex of (uniqid, addr): text order = log order across files."""
    return hexpos(uniqid, POS_WIDTH) + hexpos(addr, POS_WIDTH)


def trx_id_of(uniqid: int, begin_addr: int) -> str:
    return f"{uniqid}:{begin_addr:x}"


def uniqid_of(name: str) -> int | None:
    m = L.RE_UNIQID.search(posixpath.basename(name.replace("\\", "/")))
    return int(m.group(1)) if m else None


# ----------------------------------------------------------------- lines and records

@dataclass
class Unit:
    """One record line with the ``-l`` dump lines under it."""
    line_no: int
    line: bytes
    complete: bool                 # the line ends with a newline
    dump: list[bytes] = field(default_factory=list)

    @property
    def raw(self) -> bytes:
        return b"\n".join([self.line, *self.dump])


def is_header(line: bytes) -> bool:
    return [t.lower() for t in line.split()] == [h.encode() for h in L.HEADER]


def split_units(data: bytes) -> list[Unit]:
    """Record lines (with their dump lines) of one onlog text, in order."""
    units: list[Unit] = []
    cur: Unit | None = None
    pos, n, line_no = 0, len(data), 0
    while pos < n:
        end = data.find(b"\n", pos)
        complete = end >= 0
        if not complete:
            end = n
        line = data[pos:end]
        pos = end + 1
        line_no += 1
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip():
            continue
        if line[:1].isspace():
            if cur is not None:
                cur.dump.append(line)
            continue                  # a dump line under a header or at the top: no record
        if is_header(line):
            cur = None
            continue
        cur = Unit(line_no, line, complete)
        units.append(cur)
    return units


@dataclass
class Record:
    addr: int
    length: int
    type: str
    xid: int
    id: int
    link: int
    values: dict
    extra: tuple[str, ...] = ()    # columns beyond the documented ones (kept, not checked)


def _too_few(complete: bool, what: str, expected: int, actual: int) -> DecodeError:
    if complete:
        return Corrupt(f"too few columns {what}", expected=expected, actual=actual)
    return NeedData(f"too few columns {what} (truncated tail)", expected=expected, actual=actual)


def _hex(tok: str, name: str) -> int:
    if not L.RE_HEX.fullmatch(tok):
        raise Corrupt(f"{name} is not hex", path=name, expected="hex digits", actual=tok[:40])
    return int(tok, 16)


def _dec(tok: str, name: str, signed: bool = True) -> int:
    if not (L.RE_DEC if signed else L.RE_UDEC).fullmatch(tok):
        raise Corrupt(f"{name} is not decimal", path=name, expected="decimal digits",
                      actual=tok[:40])
    return int(tok)


def parse_date(tok: str, name: str = "date") -> _dt.date:
    m = L.RE_DATE.fullmatch(tok)
    if not m:
        raise BadValue(f"{name} is not MM/DD/YY", path=name, expected="MM/DD/YY", actual=tok[:40])
    mm, dd, yy = (int(g) for g in m.groups())
    return C.make_date(L.full_year(yy), mm, dd, name)


def parse_time(tok: str, name: str = "time") -> _dt.time:
    m = L.RE_TIME.fullmatch(tok)
    if not m:
        raise BadValue(f"{name} is not HH:MM:SS", path=name, expected="HH:MM:SS", actual=tok[:40])
    return C.make_time(*(int(g) for g in m.groups()), what=name)


def _used_free(tok: str, name: str) -> str:
    if tok not in L.USED_FREE_VALUES:
        raise BadValue(f"{name} is not USED/FREE", path=name, expected="USED/FREE", actual=tok[:40])
    return tok


_COLUMN = {
    L.HEX: _hex,
    L.DEC: _dec,
    L.ASCII: lambda tok, name: tok,
    L.USED_FREE: _used_free,
    L.DATE: parse_date,
    L.TIME: parse_time,
}


def parse_record(text: str, complete: bool = True, header: dict | None = None) -> Record:
    """One record line -> ``Record``. Header fields read before an error are left in
    ``header`` (so that the transaction chain can go on past a bad record)."""
    h = {} if header is None else header
    tokens = text.split()
    if len(tokens) < L.N_HEADER:
        raise _too_few(complete, "for a record header", L.N_HEADER, len(tokens))
    first: DecodeError | None = None
    for name, tok, conv in (("addr", tokens[0], _hex), ("len", tokens[1], _dec),
                            ("xid", tokens[3], _dec), ("id", tokens[4], _dec),
                            ("link", tokens[5], _hex)):
        try:
            value = conv(tok, name) if conv is _hex else conv(tok, name, False)
            if conv is _hex and value > L.MAX_ADDR:
                raise Corrupt(f"{name} wider than 32 bits", path=name, expected="<= ffffffff",
                              actual=tok[:40])
            h[name] = value
        except DecodeError as exc:
            first = first or exc
    rtype = tokens[2]
    h["type"] = rtype
    cols = L.RECORD_TYPES.get(rtype)
    if first is not None:
        raise first
    if cols is None:
        raise UnknownRecordType("unknown record type", path="type",
                                expected="a type of informix-onlog-record-types.txt",
                                actual=rtype[:40])
    if rtype in L.REST_OF_LINE:
        parts = text.split(None, L.N_HEADER + len(cols) - 1)
        rest = parts[L.N_HEADER:]
        if rest:
            rest[-1] = rest[-1].rstrip()
        extra: list[str] = []
    else:
        rest = tokens[L.N_HEADER:L.N_HEADER + len(cols)]
        extra = tokens[L.N_HEADER + len(cols):]
    if len(rest) < len(cols):
        raise _too_few(complete, f"for {rtype}", L.N_HEADER + len(cols), L.N_HEADER + len(rest))
    values = {}
    for (name, kind, _label), tok in zip(cols, rest):
        values[name] = _COLUMN[kind](tok, name)
    return Record(h["addr"], h["len"], rtype, h["xid"], h["id"], h["link"], values, tuple(extra))


# ----------------------------------------------------------------- transactions

class _Row:
    """One sink row in the making (folded records still add to ``n``)."""
    __slots__ = ("kind", "offset", "index", "n", "fields", "error", "raw")

    def __init__(self, kind, offset, index, fields, error=None, raw=None):
        self.kind, self.offset, self.index, self.n = kind, offset, index, 1
        self.fields, self.error, self.raw = fields, error, raw


class _Fold:
    """The last home-row change of a transaction: where remainder records go."""
    __slots__ = ("row", "owner", "awaiting_after", "tblspace", "rowid")

    def __init__(self, row, owner, awaiting_after, tblspace, rowid):
        self.row, self.owner, self.awaiting_after = row, owner, awaiting_after
        self.tblspace, self.rowid = tblspace, rowid

    def to_json(self) -> dict:
        return {"owner": self.owner, "after": self.awaiting_after, "tbl": self.tblspace,
                "row": self.rowid}

    @classmethod
    def from_json(cls, d: dict | None) -> "_Fold | None":
        if not d:
            return None
        return cls(None, d["owner"], d["after"], d["tbl"], d["row"])


class _Trx:
    """An open transaction: what the next record of its xid needs to know."""
    __slots__ = ("trx_id", "user", "last", "undo", "fold")

    def __init__(self, trx_id: str, user: str | None, last: int | None) -> None:
        self.trx_id, self.user, self.last = trx_id, user, last
        self.undo: list[str] = []          # positions a CLR may compensate, oldest first
        self.fold: _Fold | None = None

    def to_json(self) -> dict:
        return {"trx": self.trx_id, "user": self.user, "last": self.last, "undo": self.undo,
                "fold": self.fold.to_json() if self.fold else None}

    @classmethod
    def from_json(cls, d: dict) -> "_Trx":
        t = cls(d["trx"], d.get("user"), d.get("last"))
        t.undo = list(d.get("undo") or [])
        t.fold = _Fold.from_json(d.get("fold"))
        return t


def carry_in(carry: dict | None) -> dict[int, _Trx]:
    if not carry:
        return {}
    return {int(xid): _Trx.from_json(d) for xid, d in (carry.get("open") or {}).items()}


# ----------------------------------------------------------------- the decoder

class _Decoder:
    def __init__(self, ctx: DecodeContext, uniqid: int, state: dict[int, _Trx]) -> None:
        self.catalog: Catalog = ctx.catalog
        self.zone = ZoneInfo(ctx.timezone or "UTC")
        self.uniqid = uniqid
        self.state = state
        self.rows: list[_Row] = []

    # -- rows
    def row(self, kind: str, unit: Unit, index: int, **fields) -> _Row:
        r = _Row(kind, unit.line_no, index, fields)
        self.rows.append(r)
        return r

    def bad(self, unit: Unit, index: int, err: DecodeError, **fields) -> _Row:
        # the offset of an onlog record is its line number: say "line N", not "pos 0x.."
        err.path = f"line {unit.line_no}" + (f", {err.path}" if err.path else "")
        err.located(record_index=index)
        r = _Row("quarantine", unit.line_no, index, fields, err, unit.raw)
        self.rows.append(r)
        return r

    def emit(self, sink: EventSink) -> None:
        for r in self.rows:
            if r.kind == "quarantine":
                sink.quarantine(r.error, r.offset, r.index, r.raw, n_records=r.n, **r.fields)
            else:
                sink.add(r.kind, r.offset, r.index, r.n, **r.fields)

    def local_ts(self, values: dict) -> _dt.datetime:
        local = _dt.datetime.combine(values["date"], values["time"]).replace(tzinfo=self.zone)
        return local.astimezone(_dt.timezone.utc)

    # -- one record line
    def record(self, unit: Unit, index: int) -> None:
        header: dict = {}
        try:
            try:
                text = unit.line.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise Corrupt("record line is not valid UTF-8", path=f"column {exc.start}") from exc
            rec = parse_record(text, unit.complete, header)
        except DecodeError as err:
            self.malformed(unit, index, err, header)
            return
        pos = position(self.uniqid, rec.addr)
        rtype = rec.type
        if rtype in L.SYSTEM:
            self.row("control", unit, index, rule=rtype.lower(), position=pos)
            return
        if rtype == L.BEGIN:
            self.begin(unit, index, rec, pos)
            return
        trx = self.state.get(rec.xid)
        if trx is None:
            self.row("control", unit, index, rule="outside_transaction", position=pos)
            return
        if trx.last is not None and rec.link != trx.last:
            err = BrokenChain("link does not point to the previous record of the transaction",
                              path="link", expected=f"{trx.last:x}", actual=f"{rec.link:x}")
            self.bad_in_trx(unit, index, err, trx, rec.xid, rtype, pos, rec.addr)
            return
        trx.last = rec.addr
        handler = _HANDLERS.get(rtype, _Decoder.other)
        try:
            handler(self, unit, index, rec, pos, trx)
        except DecodeError as err:
            self.bad_in_trx(unit, index, err, trx, rec.xid, rtype, pos, rec.addr)

    def malformed(self, unit: Unit, index: int, err: DecodeError, h: dict) -> None:
        addr, xid, rtype = h.get("addr"), h.get("xid"), h.get("type")
        pos = position(self.uniqid, addr) if addr is not None else None
        if xid is None or rtype in L.SYSTEM:
            self.bad(unit, index, err, position=pos)
            return
        if rtype == L.BEGIN and addr is not None:
            # the BEGIN's columns are bad, not the transaction: open it all the same
            trx = self.state[xid] = _Trx(trx_id_of(self.uniqid, addr), None, addr)
            self.bad(unit, index, err, trx_id=trx.trx_id, position=pos)
            return
        trx = self.state.get(xid)
        if trx is None:
            self.bad(unit, index, err, position=pos)
            return
        self.bad_in_trx(unit, index, err, trx, xid, rtype, pos, addr)

    def bad_in_trx(self, unit, index, err, trx: _Trx, xid: int, rtype, pos, addr) -> None:
        """Quarantine a record of an open transaction; the chain goes on from it."""
        r = self.bad(unit, index, err, trx_id=trx.trx_id, position=pos)
        trx.last = addr                       # None: accept the next link as it is
        if rtype in (L.COMMIT, L.ROLLBACK):
            self.state.pop(xid, None)
            return
        if rtype == L.CLR:
            return
        owner = pos
        if rtype in L.REMAINDER or (rtype == L.UPDATE_AFTER and trx.fold
                                    and trx.fold.awaiting_after):
            if trx.fold is not None:
                owner = trx.fold.owner
        elif rtype in L.HOME_OPS and pos is not None:
            trx.fold = _Fold(r, pos, False, None, None)
        elif rtype in L.DDL_OPS:
            trx.fold = None
        if owner is not None:
            trx.undo.append(owner)

    # -- record types
    def begin(self, unit: Unit, index: int, rec: Record, pos: str) -> None:
        trx = _Trx(trx_id_of(self.uniqid, rec.addr), rec.values["user"], rec.addr)
        self.state[rec.xid] = trx          # an xid still open is reused: its old trx stays open
        if rec.link != 0:
            self.bad(unit, index, BrokenChain("BEGIN links to an earlier record", path="link",
                                              expected="0", actual=f"{rec.link:x}"),
                     trx_id=trx.trx_id, position=pos)
            return
        self.row("begin", unit, index, trx_id=trx.trx_id, position=pos, user=trx.user)

    def commit(self, unit, index, rec: Record, pos, trx: _Trx) -> None:
        ts = self.local_ts(rec.values)
        self.state.pop(rec.xid, None)
        self.row("commit", unit, index, trx_id=trx.trx_id, position=pos, trx_end="commit",
                 commit_position=pos, commit_ts=ts, user=trx.user)

    def rollback(self, unit, index, rec: Record, pos, trx: _Trx) -> None:
        self.state.pop(rec.xid, None)
        self.row("abort", unit, index, trx_id=trx.trx_id, position=pos, trx_end="abort")

    def clr(self, unit, index, rec: Record, pos, trx: _Trx) -> None:
        trx.fold = None
        if not trx.undo:
            self.row("control", unit, index, rule="clr_without_work", trx_id=trx.trx_id,
                     position=pos)
            return
        self.row("undo", unit, index, trx_id=trx.trx_id, position=pos, undo_of=trx.undo.pop())

    def home(self, unit, index, rec: Record, pos, trx: _Trx) -> None:
        v = rec.values
        tbl, rowid = v[L.TBLSPACE], v[L.ROWID]
        fold = trx.fold
        if (rec.type == L.UPDATE_AFTER and fold is not None and fold.awaiting_after
                and fold.tblspace == tbl and fold.rowid == rowid):
            fold.awaiting_after = False
            self.fold_into(unit, index, pos, trx, fold)
            return
        table_id = format(tbl, "x")
        table = self.catalog.table(table_id)
        fields = dict(trx_id=trx.trx_id, position=pos)
        if table is None:
            r = self.bad(unit, index, UnknownTable("tblspace not in the catalog", path=L.TBLSPACE,
                                                   expected="a catalog table id", actual=table_id),
                         **fields)
        else:
            r = self.row("change", unit, index, trx_order=pos, op=L.HOME_OPS[rec.type],
                         table_id=table_id, schema_name=table.schema, table_name=table.name,
                         row_id=format(rowid, "x"), **fields)
        trx.fold = _Fold(r, pos, rec.type == L.UPDATE_BEFORE, tbl, rowid)
        trx.undo.append(pos)

    def remainder(self, unit, index, rec: Record, pos, trx: _Trx) -> None:
        if trx.fold is None:
            raise Corrupt("remainder-page record without a home-row change before it",
                          path="type", expected="a home-row change of the transaction",
                          actual=rec.type)
        self.fold_into(unit, index, pos, trx, trx.fold)

    def fold_into(self, unit, index, pos, trx: _Trx, fold: _Fold) -> None:
        if fold.row is not None:
            fold.row.n += 1
        else:  # the change was decoded from an earlier file
            self.row("control", unit, index, rule="remainder_of_earlier_file",
                     trx_id=trx.trx_id, position=pos)
        trx.undo.append(fold.owner)

    def table_level(self, unit, index, rec: Record, pos, trx: _Trx) -> None:
        v = rec.values
        op = L.DDL_OPS[rec.type]
        table_id = format(v[L.TBLSPACE], "x")
        table = self.catalog.table(table_id)
        trx.fold = None
        trx.undo.append(pos)
        fields = dict(trx_id=trx.trx_id, position=pos)
        if table is not None:
            schema, name = table.schema, table.name
        elif op == "t":
            self.bad(unit, index, UnknownTable("tblspace not in the catalog", path=L.TBLSPACE,
                                               expected="a catalog table id", actual=table_id),
                     **fields)
            return
        else:
            printed = L.printed_table_name(rec.type, v)
            schema, name = L.split_table_name(printed) if printed else (None, None)
        self.row("change", unit, index, trx_order=pos, op=op, table_id=table_id,
                 schema_name=schema, table_name=name, ddl=L.ddl_text(rec.type, v), **fields)

    def other(self, unit, index, rec: Record, pos, trx: _Trx) -> None:
        trx.undo.append(pos)
        self.row("control", unit, index, rule=rec.type.lower(), trx_id=trx.trx_id, position=pos)


_HANDLERS = {L.COMMIT: _Decoder.commit, L.ROLLBACK: _Decoder.rollback, L.CLR: _Decoder.clr,
             **{t: _Decoder.home for t in L.HOME_OPS},
             **{t: _Decoder.remainder for t in L.REMAINDER},
             **{t: _Decoder.table_level for t in L.DDL_OPS}}


def _decode(data: bytes, ctx: DecodeContext, sink: EventSink) -> dict:
    """Decode one onlog text; returns the carry-out (the transactions still open)."""
    state = carry_in(ctx.carry)
    units = split_units(data)
    uniqid = uniqid_of(ctx.archive)
    if uniqid is None or uniqid > L.MAX_ADDR:
        if units:  # no position can be given to anything: the file is one quarantine row
            err = Corrupt("archive name does not end in _<uniqid>.txt", path="archive name",
                          expected="..._<decimal uniqid>.txt", actual=ctx.archive[-60:])
            err.located(archive=ctx.archive, path=f"line {units[0].line_no}", record_index=0)
            sink.quarantine(err, units[0].line_no, 0, data, n_records=len(units))
        return dict(ctx.carry) if ctx.carry else {"version": CARRY_VERSION, "uniqid": None,
                                                  "open": {}}
    dec = _Decoder(ctx, uniqid, state)
    for index, unit in enumerate(units):
        dec.record(unit, index)
    for row in dec.rows:
        if row.error is not None:
            row.error.located(archive=ctx.archive)
    dec.emit(sink)
    return {"version": CARRY_VERSION, "uniqid": uniqid,
            "open": {str(xid): t.to_json() for xid, t in sorted(state.items())}}


decode = accounts_bytes(_decode, lines=True)
