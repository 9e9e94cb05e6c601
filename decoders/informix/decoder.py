"""Decoder of Informix ``onlog`` text, one logical-log file at a time (SPEC section 3, informix).

Lines: blank lines are ignored; header lines (the titles ``addr len type xid id link``
first, any case and spacing, possibly more titles such as ``subtype specific-info``, even
indented) may repeat anywhere and are not records; an indented line of hex byte groups
(optionally followed by a character rendering: ``columns.DUMP_LINE``) is a ``-l`` dump line
of the record above it (kept in that record's raw text, never a record); an indented line
that is none of these is a record that is quarantined (``corrupt``; its columns, if they
read, still place it in its transaction's chain); every other line is a record line.
``record_offset`` is the record's 1-based line number, ``record_index`` counts record lines
from 0.

Record types: the table of ``formats/informix-onlog-record-types.txt`` plus the types IBM
documents elsewhere (``layout.DOCUMENTED`` names the document of each: SBLOB records of smart
large objects, ALLOCGENPG, ALTSPCOLSNEW/OLD, BEGWORK, BSPADD, two-phase commit records).
Those are control records (of their transaction when inside one). A type no document lists
is quarantined (``unknown_record_type``).

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

Bytes: a record's bytes run from its line's start to the next record line's (header, dump and
blank lines count with the record above them; the first record also has what comes before
it); a row's ``n_bytes`` are those of the records its ``n_records`` counts (a folded record's
count in its change's row, wherever the change is in the file).

Positions: ``position`` = 8 hex digits of the uniqid + 8 of the addr (upper case), so text
order is log order across files; ``trx_id`` = ``<uniqid>:<begin addr>`` (decimal, lower-case
hex); ``commit_position`` = the COMMIT's position; ``commit_ts`` = the COMMIT's date and time
read in ``ctx.timezone`` (fold 0 for an ambiguous local time), as UTC. ``table_id`` and
``row_id`` are the printed hex values, lower case, without leading zeros.

Carry (JSON): ``{"version": 1, "uniqid": <last file>, "open": {"<xid>": {"trx": trx_id,
"user": BEGIN user, "last": addr of the xid's last record (None: unknown), "undo": [positions
a CLR may still compensate], "fold": {"owner", "after", "tbl", "row"} | None}}}``.

How (issue 13): the text is split into lines once and parsed by column (``columns.py``:
newline scan, line kinds by masks, record lines read by fixed columns as 64-bit words
(``fixed.py``) where they are laid out the way ``onlog`` prints them, else copied into one
compact buffer and cut into tokens, numbers read as digit matrices, every documented column
checked per record type; ``-l`` dump lines laid out the way ``encoder.dump_lines`` writes
them are recognised by fixed columns on a byte matrix, any other indented line by the
regular expression);
transactions, link chains, folds and CLR stacks are computed for all records at
once (``chains.py``); rows go to the sink with ``add_columns``.

Fast path for big texts (issue 13): a text of 128 MB or more, or any text of 256 KB or more
once the process has read 128 MB by numpy (``columns.native_wanted``), is read by one
compiled pass (``native.py``, numba: lines, line kinds, dump lines and the fixed-column
reading in one loop over the bytes, the same rules as the numpy passes), and records mode
builds its rows from it in a few more compiled passes (``_RecordsMode.run_native``: rows,
roles and dictionary codes in one pass over the records, the string columns in one pass,
``seg_data`` by ``memcpy``, all into Arrow buffers). The lines either path cannot take go
through the same careful code; both give the same rows (tests/test_informix_native.py).
Without numba, or below the sizes (``make run``'s ~1 MB archives), numba is never imported
and numpy reads the text as described above. A record line the columns
cannot take (damage, non-ASCII, numbers wider than 16 hex / 9 decimal digits) and every
record of its xid, and every record of an xid where the columns find what the rules
quarantine (a broken link, an unknown table, a remainder without its change), go through
the careful per-record machine below (``_Decoder``) instead; xids are independent, so both
paths give the rows the per-record decoder gives (tests/test_informix_oracle.py).

Other decisions: an xid that BEGINs again while still open starts a new transaction (the old
one is never ended, its rows stay held); a BEGIN whose own columns are bad is quarantined
but still opens its transaction; columns beyond the documented ones are ignored (kept on the
parsed ``Record``); a file name without ``_<uniqid>.txt`` makes the whole file one
quarantine row (``n_records`` = its record lines) and passes the carry on unchanged.
Numbers wider than 16 significant hex digits or 19 decimal digits are quarantined
(``bad_value``) before any conversion (no 4,300-digit ``int()`` error, nothing the carry
cannot serialise). A damaged carry entry is left out and reported as a quarantine row of no
records (``n_records`` 0), never a crash.
"""

from __future__ import annotations

import datetime as _dt
import gc
import posixpath
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import codecs as C
from ..base import DecodeContext, hexpos
from ..catalog import Catalog
from ..errors import BadValue, BrokenChain, Corrupt, DecodeError, NeedData, UnknownRecordType, \
    UnknownTable
from ..events import RAW_HEX_LIMIT, EventSink
from . import chains as CH
from . import columns as COL
from . import layout as L
from . import resolve as RS

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
    """One record line with the ``-l`` dump lines under it (``indented``: an indented line
    that is not a dump line; it is quarantined). ``span``: the archive's bytes from the
    line's start to the end of its last dump line (carriage returns and blank lines in
    between as they are)."""
    line_no: int
    line: bytes
    complete: bool                 # the line ends with a newline
    dump: list[bytes] = field(default_factory=list)
    indented: bool = False
    span: bytes = b""

    @property
    def raw(self) -> bytes:
        """The unit's bytes as the archive holds them."""
        return self.span


def _span(text, first: int, last: int) -> bytes:
    """The text's bytes from line ``first``'s start to line ``last``'s end (without the
    newline, and without a carriage return before it)."""
    return bytes(text.buf[int(text.starts[first]):int(text.ends[last])])


is_header = COL.is_header


def split_units(data: bytes) -> list[Unit]:
    """Record lines (with their dump lines) of one onlog text, in order."""
    text = COL.Text(data)
    units: list[Unit] = []
    cur: Unit | None = None
    last = []                         # each unit's last line
    for i, kind in enumerate(text.kind.tolist()):
        if kind == COL.LINE_BLANK:
            continue
        if kind == COL.LINE_DUMP:
            if cur is not None:
                cur.dump.append(text.line(i))
                last[-1] = i
            continue                  # a dump line under a header or at the top: no record
        if kind == COL.LINE_HEADER:
            cur = None
            continue
        cur = Unit(i + 1, text.line(i), bool(text.complete[i]), indented=kind == COL.LINE_INDENTED)
        units.append(cur)
        last.append(i)
    for u, j in zip(units, last):
        u.span = _span(text, u.line_no - 1, j)
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
    if len(tok.lstrip("0")) > L.MAX_HEX_DIGITS:
        raise BadValue(f"{name} out of range", path=name,
                       expected=f"at most {L.MAX_HEX_DIGITS} hex digits", actual=tok[:40])
    return int(tok, 16)


def _dec(tok: str, name: str, signed: bool = True) -> int:
    if not (L.RE_DEC if signed else L.RE_UDEC).fullmatch(tok):
        raise Corrupt(f"{name} is not decimal", path=name, expected="decimal digits",
                      actual=tok[:40])
    # bounded before int(): no 4,300-digit conversion error, nothing the carry cannot hold
    if len(tok.lstrip("-").lstrip("0")) > L.MAX_DEC_DIGITS:
        raise BadValue(f"{name} out of range", path=name,
                       expected=f"at most {L.MAX_DEC_DIGITS} decimal digits", actual=tok[:40])
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
    """One sink row in the making (folded records still add to ``n``, and their line
    numbers to ``folds``: their bytes count in this row's)."""
    __slots__ = ("kind", "offset", "index", "n", "fields", "error", "raw", "folds")

    def __init__(self, kind, offset, index, fields, error=None, raw=None):
        self.kind, self.offset, self.index, self.n = kind, offset, index, 1
        self.fields, self.error, self.raw = fields, error, raw
        self.folds: list[int] = []


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


def _checked_int(v, bound: int, none_ok: bool = True) -> int | None:
    if v is None and none_ok:
        return None
    if type(v) is not int or not 0 <= v <= bound:
        raise ValueError(f"expected an integer in 0..{bound:#x}, got {str(v)[:40]!r}")
    return v


def _checked_str(v, none_ok: bool = False) -> str | None:
    if v is None and none_ok:
        return None
    if not isinstance(v, str) or len(v) > 4096:
        raise ValueError(f"expected a string, got {str(v)[:40]!r}")
    return v


def _trx_from_carry(d) -> _Trx:
    """One carried transaction, every field checked (a damaged state file must not crash
    the night nor put out-of-range values into the next carry)."""
    if not isinstance(d, dict):
        raise ValueError("not an object")
    t = _Trx(_checked_str(d.get("trx")), _checked_str(d.get("user"), True),
             _checked_int(d.get("last"), L.MAX_ADDR))
    undo = d.get("undo") or []
    if not isinstance(undo, list):
        raise ValueError("undo is not a list")
    t.undo = [_checked_str(u) for u in undo]
    f = d.get("fold")
    if f:
        if not isinstance(f, dict):
            raise ValueError("fold is not an object")
        big = (1 << 64) - 1
        t.fold = _Fold(None, _checked_str(f.get("owner")), bool(f.get("after")),
                       _checked_int(f.get("tbl"), big), _checked_int(f.get("row"), big))
    return t


def carry_in(carry: dict | None, problems: list | None = None) -> dict[int, _Trx]:
    """The transactions carried in. A damaged entry is left out and described in
    ``problems`` (the decoder quarantines it as a row of no records)."""
    problems = [] if problems is None else problems
    if not carry:
        return {}
    if not isinstance(carry, dict) or not isinstance(carry.get("open") or {}, dict):
        problems.append("carry is not {\"open\": {xid: transaction}}")
        return {}
    out: dict[int, _Trx] = {}
    for xid, d in (carry.get("open") or {}).items():
        try:
            if not (isinstance(xid, str) and xid.isdigit() and len(xid) <= L.MAX_DEC_DIGITS):
                raise ValueError(f"xid {str(xid)[:40]!r} is not a decimal number")
            out[int(xid)] = _trx_from_carry(d)
        except ValueError as exc:
            problems.append(f"carried transaction of xid {str(xid)[:40]}: {exc}")
    return out


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
        if unit.indented:
            # quarantined; what its columns say still places it (a record line indented by
            # damage keeps its transaction's chain going, like any malformed record)
            try:
                parse_record(unit.line.decode("utf-8"), unit.complete, header)
            except (DecodeError, UnicodeDecodeError):
                pass
            self.malformed(unit, index, Corrupt(
                "indented line is not an onlog -l dump line", path="column 1",
                expected="hex byte groups, optionally a character rendering",
                actual=unit.line.decode("utf-8", "replace").strip()[:40]), header)
            return
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
            fold.row.folds.append(unit.line_no)
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


def decode(data: bytes, ctx: DecodeContext, sink: EventSink) -> dict:
    """Decode one onlog text; returns the carry-out (the transactions still open)."""
    problems: list[str] = []
    state = carry_in(ctx.carry, problems)
    for p in problems:
        err = Corrupt(f"decoder state from the previous archive is damaged: {p}",
                      path="carry", expected="the carry this decoder writes", actual=p[:60])
        err.located(archive=ctx.archive)
        sink.quarantine(err, 0, 0, None, n_records=0, n_bytes=0)
    text = COL.Text(data)
    uniqid = uniqid_of(ctx.archive)
    if uniqid is None or uniqid > L.MAX_ADDR:
        rec_lines = text.record_lines()
        if len(rec_lines):  # no position can be given to anything: the file is one quarantine row
            line_no = int(rec_lines[0]) + 1
            err = Corrupt("archive name does not end in _<uniqid>.txt", path="archive name",
                          expected="..._<decimal uniqid>.txt", actual=ctx.archive[-60:])
            err.located(archive=ctx.archive, path=f"line {line_no}", record_index=0)
            sink.quarantine(err, line_no, 0, data, n_records=len(rec_lines))
        prev = ctx.carry.get("uniqid") if isinstance(ctx.carry, dict) else None
        return {"version": CARRY_VERSION,
                "uniqid": prev if type(prev) is int and 0 <= prev <= L.MAX_ADDR else None,
                "open": {str(xid): t.to_json() for xid, t in sorted(state.items())}}
    recs = text.records()
    out = _Columnar(ctx, uniqid, text, recs, state).run(sink)
    return {"version": CARRY_VERSION, "uniqid": uniqid,
            "open": {str(xid): t for xid, t in sorted(out.items())}}


# ----------------------------------------------------------------- the columnar path

_EPOCH = _dt.datetime(1970, 1, 1)
_US = 1_000_000


def utc_micros(local_s: np.ndarray, zone: ZoneInfo) -> np.ndarray:
    """Naive local times (seconds since 1970-01-01, as written) -> UTC microseconds, like
    ``datetime.replace(tzinfo=zone).astimezone(utc)`` (fold 0). The offset is looked up once
    per local hour; an hour whose first and last second differ in offset (a transition)
    is converted value by value."""
    local_s = np.asarray(local_s, dtype=np.int64)
    if not len(local_s):
        return local_s.copy()
    hours, inv = np.unique(local_s // 3600, return_inverse=True)
    off = np.zeros(len(hours), dtype=np.int64)
    exact = np.ones(len(hours), dtype=bool)
    for i, h in enumerate(hours.tolist()):
        t0 = (_EPOCH + _dt.timedelta(hours=h)).replace(tzinfo=zone)
        o0 = t0.utcoffset()
        o1 = (t0 + _dt.timedelta(seconds=3599)).utcoffset()
        if o0 == o1:
            off[i] = int(o0.total_seconds())
        else:
            exact[i] = False
    out = (local_s - off[inv.reshape(-1)]) * _US
    for j in np.flatnonzero(~exact[inv.reshape(-1)]):
        local = (_EPOCH + _dt.timedelta(seconds=int(local_s[j]))).replace(tzinfo=zone)
        out[j] = int((local.astimezone(_dt.timezone.utc).replace(tzinfo=None) - _EPOCH)
                     / _dt.timedelta(microseconds=1))
    return out


_KINDS = ("control", "begin", "commit", "abort", "undo", "change")
K_CONTROL, K_BEGIN, K_COMMIT, K_ABORT, K_UNDO, K_CHANGE = range(len(_KINDS))
_OPS = ("c", "d", "u", "t", "ddl")
_OP_CODE = {op: i for i, op in enumerate(_OPS)}
_HOME_OP = np.full(COL.N_TYPES, -1, dtype=np.int8)
for _t, _op in L.HOME_OPS.items():
    _HOME_OP[COL.TYPE_NAMES.index(_t)] = _OP_CODE[_op]
_TYPE_RULES = tuple(t.lower() for t in COL.TYPE_NAMES)
R_OUTSIDE, R_CLR_NONE, R_EARLIER = len(_TYPE_RULES), len(_TYPE_RULES) + 1, len(_TYPE_RULES) + 2
_RULES = _TYPE_RULES + ("outside_transaction", "clr_without_work", "remainder_of_earlier_file")
_T_BEGIN = COL.TYPE_NAMES.index(L.BEGIN)
_T_COMMIT = COL.TYPE_NAMES.index(L.COMMIT)


def _strings_of(recs: COL.Records):
    """``S(values, idx, valid)``: ``values[idx]`` where ``valid`` (None: where idx >= 0), null
    elsewhere; built in one pass by the compiled pass's kernels where the records were read
    by it (``COL.dict_strings``), else ``_strings``."""
    if recs.text.native is None or COL._native_state["module"] is None:
        def S(values, idx, valid):
            if valid is None:
                valid = idx >= 0
                idx = np.maximum(idx, 0)
            return _strings(list(values), np.asarray(idx, np.int64), valid)
        return S

    def S(values, idx, valid):
        codes = idx if valid is None else np.where(valid, idx, -1)
        out = COL.dict_strings(values, codes)
        if out is None:
            return _strings(list(values), np.maximum(codes, 0).astype(np.int64), codes >= 0)
        return out
    return S


def _strings(values: pa.Array | list, idx: np.ndarray, valid: np.ndarray) -> pa.Array:
    """``values[idx]`` where ``valid``, else null: the valid rows taken (no index mask), then
    placed at their rows by new offsets and a validity bitmap (``_scatter``; about half the
    time of a take with a masked index)."""
    if not isinstance(values, pa.Array):
        values = pa.array(values, type=pa.string())
    if not len(values):
        return pa.nulls(len(idx), pa.string())
    at = np.flatnonzero(valid)
    if len(at) == len(idx):
        return pc.take(values, pa.array(np.asarray(idx, np.int64)))
    return _scatter(pc.take(values, pa.array(np.asarray(idx, np.int64)[at])), at, len(idx))


class _Columnar:
    """One onlog text decoded by column; xids the columns cannot take (damage, unknown
    tables, ...) go record by record through ``_Decoder`` (xids are independent)."""

    def __init__(self, ctx: DecodeContext, uniqid: int, text: COL.Text, recs: COL.Records,
                 state: dict[int, _Trx]) -> None:
        self.ctx, self.uniqid, self.text, self.recs, self.state = ctx, uniqid, text, recs, state
        self.catalog: Catalog = ctx.catalog
        self.zone = ZoneInfo(ctx.timezone or "UTC")

    # -- helpers
    def unit(self, i: int) -> Unit:
        """Record i as the careful path's ``Unit`` (its line and the dump lines under it)."""
        t = self.text
        line = int(self.recs.lines[i])
        dump = []
        j = end = line + 1
        while j < t.n_lines and t.kind[j] in (COL.LINE_BLANK, COL.LINE_DUMP):
            if t.kind[j] == COL.LINE_DUMP:
                dump.append(t.line(j))
                end = j + 1
            j += 1
        return Unit(line + 1, t.line(line), bool(t.complete[line]), dump,
                    t.kind[line] == COL.LINE_INDENTED, _span(t, line, end - 1))

    def run(self, sink: EventSink) -> dict:
        recs, uniqid = self.recs, self.uniqid
        n = recs.n
        fast = recs.fast.copy()
        role = np.where(fast, CH.ROLE[np.maximum(recs.tcode, 0)], -1)
        # tblspace and rowid of the records that have them (wider than 16 hex digits: careful)
        tbl = np.zeros(n, dtype=np.uint64)
        row = np.zeros(n, dtype=np.uint64)
        hi = np.flatnonzero((role == CH.R_HOME) | (role == CH.R_REMAINDER) | (role == CH.R_DDL))
        if len(hi):
            tbl[hi], ok = recs.hex_column(L.N_HEADER, hi)
            fast[hi[~ok]] = False
            hr = hi[role[hi] != CH.R_DDL]
            row[hr], ok = recs.hex_column(L.N_HEADER + 1, hr)
            fast[hr[~ok]] = False
        role[~fast] = -1
        system = fast & (role == CH.R_SYSTEM)
        # xids the careful path takes: those of any record the fast path cannot read
        hard: set[int] = set()
        for i in np.flatnonzero(~fast).tolist():
            h: dict = {}
            try:
                parse_record(self.text.line(int(recs.lines[i])).decode("utf-8"), True, h)
            except (DecodeError, UnicodeDecodeError):
                pass
            if h.get("xid") is not None and h.get("type") not in L.SYSTEM:
                hard.add(int(h["xid"]))
        xid = recs.xid.astype(np.int64)
        cand = fast & ~system
        if hard:
            cand &= ~np.isin(xid, np.fromiter(hard, np.int64))
        ci = np.flatnonzero(cand)
        positions = COL.positions(uniqid, recs.addr)
        carry_json = {x: t.to_json() for x, t in self.state.items()}
        ch = CH.resolve(xid[ci], recs.tcode[ci], recs.addr[ci], recs.link[ci], tbl[ci], row[ci],
                        carry_json, lambda j: positions[int(ci[j])].as_py())
        anomaly = ch.anomaly.copy()
        crole = role[ci]
        # changes: tables from the catalog (a row change or truncate of an unknown table is
        # quarantined by the careful path)
        change = (ch.trx >= 0) & ~ch.folded & ((crole == CH.R_HOME) | (crole == CH.R_DDL))
        tables = {}
        for t in np.unique(tbl[ci[change]]).tolist():
            tables[t] = self.catalog.table(format(t, "x"))
        known_keys = np.array(sorted(t for t, v in tables.items() if v is not None), np.uint64)
        known = np.isin(tbl[ci], known_keys) if len(known_keys) else np.zeros(len(ci), bool)
        ddl_fields: dict[int, dict] = {}
        for j in np.flatnonzero(change & (crole == CH.R_DDL)).tolist():
            rec = parse_record(self.text.line(int(recs.lines[ci[j]])).decode("utf-8"))
            op = L.DDL_OPS[rec.type]
            table = tables.get(int(tbl[ci[j]]))
            if table is not None:
                schema, name = table.schema, table.name
            elif op == "t":
                anomaly[j] = True
                continue
            else:
                printed = L.printed_table_name(rec.type, rec.values)
                schema, name = L.split_table_name(printed) if printed else (None, None)
            ddl_fields[j] = {"op": op, "schema": schema, "name": name,
                             "ddl": L.ddl_text(rec.type, rec.values)}
        anomaly |= change & (crole == CH.R_HOME) & ~known
        if anomaly.any():
            hard |= set(xid[ci[anomaly]].tolist())
        if hard:
            keep = ~np.isin(xid[ci], np.fromiter(hard, np.int64))
        else:
            keep = np.ones(len(ci), dtype=bool)

        # --- the careful path: every record of a hard xid, and lines without an xid
        careful = ~fast                      # stateless lines and records of hard xids
        if hard:
            careful |= np.isin(xid, np.fromiter(hard, np.int64)) & ~system
        careful_idx = np.flatnonzero(careful).tolist()
        dec = _Decoder(self.ctx, uniqid, {x: t for x, t in self.state.items() if x in hard})
        for i in careful_idx:
            dec.record(self.unit(i), i)
        for r in dec.rows:
            if r.error is not None:
                r.error.located(archive=self.ctx.archive)

        # --- rows of the columnar path
        out_rows = keep & ~(ch.folded & (ch.owner >= 0))
        cj = np.flatnonzero(out_rows)                    # into ci
        sys_i = np.flatnonzero(system)
        rows_i = np.concatenate((ci[cj], sys_i))
        o = np.argsort(rows_i, kind="stable")
        rows_i = rows_i[o]
        cj_full = np.concatenate((cj, np.full(len(sys_i), -1)))[o]
        is_sys = cj_full < 0
        m = len(rows_i)
        cjs = np.maximum(cj_full, 0)
        trx = np.where(is_sys, -1, ch.trx[cjs]) if len(ci) else np.full(m, -1)
        tcode = recs.tcode[rows_i]
        rrole = role[rows_i]
        kind = np.full(m, K_CONTROL, dtype=np.int8)
        rule = np.full(m, -1, dtype=np.int64)
        in_trx = trx >= 0
        rule[is_sys] = tcode[is_sys]
        rule[~is_sys & ~in_trx] = R_OUTSIDE
        kind[in_trx & (rrole == CH.R_BEGIN)] = K_BEGIN
        kind[in_trx & (rrole == CH.R_COMMIT)] = K_COMMIT
        kind[in_trx & (rrole == CH.R_ROLLBACK)] = K_ABORT
        clr = in_trx & (rrole == CH.R_CLR)
        undo = ch.undo[cjs] if len(ci) else np.zeros(m, np.int64)
        has_undo = clr & (undo != CH.NO_UNDO)
        kind[has_undo] = K_UNDO
        rule[clr & ~has_undo] = R_CLR_NONE
        folded_early = in_trx & ch.folded[cjs] if len(ci) else np.zeros(m, bool)
        rule[folded_early] = R_EARLIER
        is_change = in_trx & ~folded_early & ((rrole == CH.R_HOME) | (rrole == CH.R_DDL))
        kind[is_change] = K_CHANGE
        other = in_trx & (kind == K_CONTROL) & (rule < 0)
        rule[other] = tcode[other]
        n_records = np.where(is_sys, 1, ch.n_records[cjs] if len(ci) else 1)

        # trx ids and users: BEGINs of this file, then the transactions carried in
        b_in = ci[ch.trx_begin] if len(ch.trx_begin) else np.zeros(0, np.int64)
        trx_ids = pc.binary_join_element_wise(
            pa.scalar(f"{uniqid}:"), COL.hex_text(recs.addr[b_in]), "") if len(b_in) \
            else pa.array([], pa.string())
        users = recs.rest_of_line(L.N_HEADER + 3, b_in) if len(b_in) else pa.array([], pa.string())
        c_ids, c_users = [], []
        for xv in ch.trx_xid[len(b_in):].tolist():
            c = carry_json.get(int(xv))
            c_ids.append(c["trx"] if c else None)
            c_users.append(c.get("user") if c else None)
        trx_ids = pa.concat_arrays([trx_ids.cast(pa.string()), pa.array(c_ids, pa.string())])
        users = pa.concat_arrays([users.cast(pa.string()), pa.array(c_users, pa.string())])
        t_idx = np.maximum(trx, 0)
        pos = pc.take(positions, pa.array(rows_i))
        fields: dict = {"position": pos}
        fields["trx_id"] = _strings(trx_ids, t_idx, in_trx)
        user_rows = (kind == K_BEGIN) | (kind == K_COMMIT)
        fields["user"] = _strings(users, t_idx, user_rows)
        fields["trx_end"] = _strings(["commit", "abort"], np.where(kind == K_ABORT, 1, 0),
                                     (kind == K_COMMIT) | (kind == K_ABORT))
        commit = kind == K_COMMIT
        fields["commit_position"] = pc.if_else(pa.array(commit), pos, pa.scalar(None, pa.string()))
        ts = np.zeros(m, dtype=np.int64)
        cr = np.flatnonzero(commit)
        if len(cr):
            ts[cr] = utc_micros(recs.local_seconds(L.N_HEADER, rows_i[cr]), self.zone)
        fields["commit_ts"] = pa.array(ts, pa.timestamp("us", tz="UTC"), mask=~commit)
        # undo_of: a position of this file, or one carried in
        u_own = undo if len(ci) else np.zeros(m, np.int64)
        rec_own = has_undo & (u_own >= 0)
        str_own = has_undo & (u_own < 0)
        undo_of = _strings(positions, np.where(rec_own, ci[np.clip(u_own, 0, max(len(ci) - 1, 0))]
                                               if len(ci) else 0, 0), rec_own)
        if str_own.any():
            undo_of = pc.if_else(pa.array(str_own),
                                 _strings(ch.strings, -1 - np.minimum(u_own, -1), str_own), undo_of)
        fields["undo_of"] = undo_of
        # changes
        home = is_change & (rrole == CH.R_HOME)
        op = np.where(home, _HOME_OP[tcode], -1)
        ddl_rows = np.flatnonzero(is_change & (rrole == CH.R_DDL))
        schema = [None] * m
        tname = [None] * m
        ddl = [None] * m
        for r in ddl_rows.tolist():
            f = ddl_fields[int(cj_full[r])]
            op[r] = _OP_CODE[f["op"]]
            schema[r], tname[r], ddl[r] = f["schema"], f["name"], f["ddl"]
        fields["op"] = _strings(list(_OPS), np.maximum(op, 0), op >= 0)
        fields["trx_order"] = pc.if_else(pa.array(is_change), pos, pa.scalar(None, pa.string()))
        tb = tbl[rows_i]
        fields["table_id"] = pc.if_else(pa.array(is_change), COL.hex_text(tb),
                                        pa.scalar(None, pa.string()))
        fields["row_id"] = pc.if_else(pa.array(home), COL.hex_text(row[rows_i]),
                                      pa.scalar(None, pa.string()))
        t_keys = sorted(tables)
        t_code = np.searchsorted(np.array(t_keys, dtype=np.uint64), tb) if t_keys else np.zeros(m, np.int64)
        t_code = np.minimum(t_code, max(len(t_keys) - 1, 0))
        t_schema = [tables[k].schema if tables[k] else None for k in t_keys]
        t_name = [tables[k].name if tables[k] else None for k in t_keys]
        sch = _strings(t_schema, t_code, home)
        nam = _strings(t_name, t_code, home)
        if len(ddl_rows):
            sch = pc.if_else(pa.array(home), sch, pa.array(schema, pa.string()))
            nam = pc.if_else(pa.array(home), nam, pa.array(tname, pa.string()))
        fields["schema_name"], fields["table_name"] = sch, nam
        fields["ddl"] = pa.array(ddl, pa.string()) if len(ddl_rows) else None
        fields["rule"] = _strings(list(_RULES), np.maximum(rule, 0), rule >= 0)

        # --- bytes: every record from its line's start to the next record's line start (the
        # first also what comes before it); a row has the bytes of the records it counts
        # (a folded record's are its change's)
        f_cj = np.flatnonzero(keep & ch.folded & (ch.owner >= 0)) if len(ci) \
            else np.zeros(0, np.int64)
        c_rows = [(k, line - 1) for k, r in enumerate(dec.rows) for line in r.folds]
        line_of_rows = np.concatenate((
            recs.lines[rows_i], np.array([r.offset - 1 for r in dec.rows], dtype=np.int64),
            recs.lines[ci[f_cj]], np.array([ln for _, ln in c_rows], dtype=np.int64)))
        starts = self.text.starts[line_of_rows] if len(line_of_rows) else line_of_rows
        so = np.argsort(starts, kind="stable")
        nxt = np.empty(len(starts), dtype=np.int64)
        if len(starts):
            ss = starts[so]
            nb_sorted = np.append(ss[1:], self.text.size) - ss
            nb_sorted[0] += ss[0]
            nxt[so] = nb_sorted
        n_rows = m + len(dec.rows)
        if len(f_cj):
            row_of_cj = np.full(len(ci), -1, dtype=np.int64)
            row_of_cj[cj_full[~is_sys]] = np.flatnonzero(~is_sys)
            np.add.at(nxt, row_of_cj[ch.owner[f_cj]], nxt[n_rows:n_rows + len(f_cj)])
        for (k, _), nb in zip(c_rows, nxt[n_rows + len(f_cj):].tolist()):
            nxt[m + k] += nb
        sink.add_columns(pa.array(_KINDS).take(pa.array(kind)) if m else "control",
                         recs.lines[rows_i] + 1, rows_i, n_records.astype(np.int32),
                         n_bytes=nxt[:m], **fields)
        for r, nbytes in zip(dec.rows, nxt[m:n_rows].tolist()):
            if r.kind == "quarantine":
                sink.quarantine(r.error, r.offset, r.index, r.raw, n_records=r.n, n_bytes=nbytes,
                                **r.fields)
            else:
                sink.add(r.kind, r.offset, r.index, r.n, n_bytes=nbytes, **r.fields)

        # --- the transactions still open
        out: dict[int, dict] = {}
        for x, t in self.state.items():
            if x not in hard and x not in ch.state:
                out[x] = t.to_json()
        for x, st in ch.state.items():
            if x in hard or st is None:
                continue
            ti = st["trx_index"]
            out[x] = {"trx": trx_ids[ti].as_py(), "user": users[ti].as_py(), "last": st["last"],
                      "undo": st["undo"], "fold": st["fold"]}
        for x, t in dec.state.items():
            out[x] = t.to_json()
        return out


# ----------------------------------------------------------------- records mode (issue 14)

def decode_records(data: bytes, ctx: DecodeContext, sink: EventSink) -> None:
    """Decode one onlog text, or one byte range of it (``ctx.offset``/``line``/``index``), into
    one row per record with its facts and no transaction (``resolve.py`` assigns those in
    the ordering job): kind as inside a transaction, ``position``, ``xid``, ``link``,
    ``record_type``, the record's values, ``raw_hex`` of its line (kept for a record the
    transaction rules quarantine), and ``n_bytes`` from its line to the next record's.
    Lines that do not read are quarantined here, with what their columns say. Every record
    the columns read (DDL and truncates too: only their text is read record by record) is
    added by ``add_columns``; the rest go through ``careful_row`` (``parse_record``), added in
    record order between slices of the columnar rows."""
    if COL.native_wanted(len(data)) and COL._native_module() is not None:
        from . import native as NAT

        scratch = NAT.SCRATCH if NAT.SCRATCH.take() else None
        try:
            return _decode_records(COL.Text(data, native=True, scratch=scratch), data, ctx,
                                   sink)
        finally:
            if scratch is not None:
                scratch.release()
    return _decode_records(COL.Text(data, native=False), data, ctx, sink)


def _decode_records(text: COL.Text, data: bytes, ctx: DecodeContext, sink: EventSink) -> None:
    uniqid = uniqid_of(ctx.archive)
    if uniqid is None or uniqid > L.MAX_ADDR:
        rec_lines = text.record_lines()
        if len(rec_lines):  # no position can be given to anything: one quarantine row
            line_no = ctx.line + int(rec_lines[0]) + 1
            err = Corrupt("archive name does not end in _<uniqid>.txt", path="archive name",
                          expected="..._<decimal uniqid>.txt", actual=ctx.archive[-60:])
            err.located(archive=ctx.archive, path=f"line {line_no}", record_index=ctx.index)
            sink.quarantine(err, line_no, ctx.index, data, n_records=len(rec_lines),
                            n_bytes=len(data))
        return None
    recs = text.records()
    if text.native is None:
        _RecordsMode(ctx, uniqid, text, recs).run(sink)
        return None
    # a big text: the collector paused while its rows are built (the DDL records' values
    # are Python objects; a full collection walks every object of the process, numba's too)
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        _RecordsMode(ctx, uniqid, text, recs).run(sink)
    finally:
        if paused:
            gc.enable()
    return None


def decode_records_careful(data: bytes, ctx: DecodeContext, sink: EventSink) -> None:
    """``decode_records`` with every record read by the careful per-record path (the
    reference the columnar path is tested against: tests/test_informix_fastpath.py)."""
    text = COL.Text(data)
    uniqid = uniqid_of(ctx.archive)
    if uniqid is None or uniqid > L.MAX_ADDR:
        return decode_records(data, ctx, sink)
    _RecordsMode(ctx, uniqid, text, text.records()).run(sink, careful_only=True)
    return None


_ROLE_KIND = {CH.R_OTHER: 0, CH.R_BEGIN: 1, CH.R_COMMIT: 2,
              CH.R_ROLLBACK: 3, CH.R_CLR: 4, CH.R_HOME: 5, CH.R_REMAINDER: 0, CH.R_DDL: 5,
              CH.R_SYSTEM: 0}
_KIND_OF_ROLE = np.array([_ROLE_KIND[r] for r in range(9)], dtype=np.int8)


class _RecordsMode:
    def __init__(self, ctx: DecodeContext, uniqid: int, text: COL.Text, recs: COL.Records) -> None:
        self.ctx, self.uniqid, self.text, self.recs = ctx, uniqid, text, recs
        self.catalog: Catalog = ctx.catalog
        self.zone = ZoneInfo(ctx.timezone or "UTC")

    def unit(self, i: int) -> Unit:
        return _Columnar.unit(self, i)

    def careful_row(self, i: int) -> dict:
        """The row of record i read the careful way (a line the columns cannot take)."""
        unit = self.unit(i)
        index = self.ctx.index + i
        unit.line_no += self.ctx.line
        h: dict = {}
        fields: dict = {}
        err: DecodeError | None = None
        rec = None
        try:
            text = unit.line.decode("utf-8")
        except UnicodeDecodeError as exc:
            err = Corrupt("record line is not valid UTF-8", path=f"column {exc.start}")
            text = None
        if text is not None:
            try:
                rec = parse_record(text, unit.complete, h)
            except DecodeError as exc:
                err = exc
        if unit.indented:
            err = Corrupt("indented line is not an onlog -l dump line", path="column 1",
                          expected="hex byte groups, optionally a character rendering",
                          actual=unit.line.decode("utf-8", "replace").strip()[:40])
        addr = h.get("addr")
        pos = position(self.uniqid, addr) if addr is not None else None
        facts = {"xid": h.get("xid"), "link": h.get("link"), "record_type": h.get("type"),
                 "position": pos}
        if err is None and rec is not None and rec.type == L.BEGIN and rec.link != 0:
            err = BrokenChain("BEGIN links to an earlier record", path="link", expected="0",
                              actual=f"{rec.link:x}")
            facts["user"] = rec.values["user"]
        if err is not None:
            err.path = f"line {unit.line_no}" + (f", {err.path}" if err.path else "")
            err.located(archive=self.ctx.archive, record_index=index)
            return {"kind": "quarantine", "offset": unit.line_no, "index": index, "error": err,
                    "raw": unit.raw, **facts}
        fields.update(facts)
        fields.update(self.values(rec))
        fields["seg_data"] = None if rec.type in L.SYSTEM else unit.raw[:RAW_HEX_LIMIT]
        return {"kind": fields.pop("kind"), "offset": unit.line_no, "index": index, **fields}

    def raw(self, fi: np.ndarray, keep: np.ndarray) -> pa.Array:
        """``Unit.raw[:256]`` of records ``fi`` (null where not ``keep``): the archive's bytes
        from the record line to the end of its last dump line, blank lines and carriage
        returns in between as they are."""
        t = self.text
        lines = self.recs.lines[fi]
        kinds = t.kind
        units = self.recs.units(fi)
        if units is not None:                    # the compiled pass found the units
            start = t.starts[lines]
            end = np.minimum(units[0], start + RAW_HEX_LIMIT)
            bad = np.flatnonzero(~units[1] & keep)      # units of another shape: joined
            patch = {j: self.unit(int(fi[j])).raw[:RAW_HEX_LIMIT] for j in bad.tolist()}
            return COL.binary_spans(t.buf, start, np.where(keep, end, start), keep, patch)
        fast = self._raw_simple(fi, lines, keep)
        if fast is not None:
            return fast
        # the unit: the record line and the dump lines up to the next record, header or
        # indented line; its raw bytes end with its last dump line
        follow = np.append(np.flatnonzero((kinds == COL.LINE_RECORD) | (kinds == COL.LINE_HEADER)
                                          | (kinds == COL.LINE_INDENTED)), t.n_lines)
        next_unit = follow[np.searchsorted(follow, lines, side="right")]
        dumps = np.flatnonzero(kinds == COL.LINE_DUMP)
        k = np.searchsorted(dumps, next_unit) - 1
        last = np.where(k >= 0, dumps[np.maximum(k, 0)] if len(dumps) else lines, lines)
        last = np.maximum(last, lines)
        start = t.starts[lines]
        end = np.minimum(t.ends[last], start + RAW_HEX_LIMIT)
        return COL.substrings_binary(t.buf, start, np.where(keep, end, start), keep)

    def _raw_simple(self, fi: np.ndarray, lines: np.ndarray, keep: np.ndarray) -> pa.Array | None:
        """``raw`` for a text without a cut \\r whose blank lines all stand alone right before
        a header line (how ``onlog`` and the synth print it): then the lines between a record
        line and the next record or header line are its dump lines and at most one blank
        line before the header, and the unit's bytes run from its line's start to the end of
        the last of them. None: another shape (the general way)."""
        t = self.text
        kinds = t.kind
        if t.cr or not len(lines):
            return None
        blank = np.flatnonzero(kinds == COL.LINE_BLANK)
        if len(blank):
            if blank[-1] + 1 >= t.n_lines or blank[0] == 0:
                return None
            if not ((kinds[blank + 1] == COL.LINE_HEADER).all()
                    and (kinds[blank - 1] != COL.LINE_BLANK).all()):
                return None
        heads = np.flatnonzero(kinds == COL.LINE_HEADER)
        every = self.recs.lines                   # record lines (and indented lines)
        nxt_rec = np.append(every[1:], t.n_lines)[fi]
        if len(heads):
            h = np.append(heads, t.n_lines)
            next_unit = np.minimum(nxt_rec, h[np.searchsorted(heads, lines, side="right")])
        else:
            next_unit = nxt_rec
        last = next_unit - 1
        last = last - (kinds[last] == COL.LINE_BLANK)      # the blank before a header
        start = t.starts[lines]
        end = np.minimum(t.ends[last], start + RAW_HEX_LIMIT)
        return COL.substrings_binary(t.buf, start, np.where(keep, end, start), keep)

    def values(self, rec: Record) -> dict:
        """Kind and values of a record that reads (as inside a transaction)."""
        rtype, v = rec.type, rec.values
        if rtype in L.SYSTEM:
            return {"kind": "control", "rule": rtype.lower()}
        if rtype == L.BEGIN:
            return {"kind": "begin", "user": v["user"]}
        if rtype == L.COMMIT:
            local = _dt.datetime.combine(v["date"], v["time"]).replace(tzinfo=self.zone)
            return {"kind": "commit", "commit_ts": local.astimezone(_dt.timezone.utc)}
        if rtype == L.ROLLBACK:
            return {"kind": "abort"}
        if rtype == L.CLR:
            return {"kind": "undo"}
        if rtype in L.HOME_OPS:
            table_id = format(v[L.TBLSPACE], "x")
            table = self.catalog.table(table_id)
            out = {"kind": "change", "op": L.HOME_OPS[rtype], "table_id": table_id,
                   "row_id": format(v[L.ROWID], "x")}
            if table is None:
                out["flag"] = RS.UNKNOWN_TABLE_FLAG
            else:
                out.update(schema_name=table.schema, table_name=table.name)
            return out
        if rtype in L.DDL_OPS:
            op = L.DDL_OPS[rtype]
            table_id = format(v[L.TBLSPACE], "x")
            table = self.catalog.table(table_id)
            out = {"kind": "change", "op": op, "table_id": table_id, "ddl": L.ddl_text(rtype, v)}
            if table is not None:
                out.update(schema_name=table.schema, table_name=table.name)
            elif op == "t":
                out["flag"] = RS.UNKNOWN_TABLE_FLAG
            else:
                printed = L.printed_table_name(rtype, v)
                schema, name = L.split_table_name(printed) if printed else (None, None)
                out.update(schema_name=schema, table_name=name)
            return out
        if rtype in L.REMAINDER:
            return {"kind": "control"}
        return {"kind": "control", "rule": rtype.lower()}

    def run(self, sink: EventSink, careful_only: bool = False) -> None:
        recs, uniqid, ctx = self.recs, self.uniqid, self.ctx
        if not careful_only and recs.n and recs.native_rows():
            return self.run_native(sink)
        n = recs.n
        fast = recs.fast.copy()
        if careful_only:
            fast[:] = False
        role = np.where(fast, CH.ROLE[np.maximum(recs.tcode, 0)], -1)
        tbl = np.zeros(n, dtype=np.uint64)
        row = np.zeros(n, dtype=np.uint64)
        hi = np.flatnonzero((role == CH.R_HOME) | (role == CH.R_DDL))
        if len(hi):
            tbl[hi], ok = recs.hex_column(L.N_HEADER, hi)
            fast[hi[~ok]] = False
        hi = np.flatnonzero(fast & (role == CH.R_HOME))
        if len(hi):
            row[hi], ok = recs.hex_column(L.N_HEADER + 1, hi)
            fast[hi[~ok]] = False
        # rare on the fast path too: a BEGIN that links somewhere
        fast &= ~((role == CH.R_BEGIN) & (recs.link != 0))
        role[~fast] = -1
        fi = np.flatnonzero(fast)
        r = role[fi]
        kind = _KIND_OF_ROLE[r]
        tcode = recs.tcode[fi]
        system = r == CH.R_SYSTEM
        rule_rows = (r == CH.R_OTHER) | system
        S = _strings_of(recs)
        pos = COL.native_positions(uniqid, recs.addr, fi) if S is not _strings else None
        fields: dict = {
            "position": COL.positions(uniqid, recs.addr[fi]) if pos is None else pos,
            "xid": recs.xid[fi].astype(np.int64),
            "link": recs.link[fi].astype(np.int64),
            "record_type": S(COL.TYPE_NAMES, tcode, None),
            "rule": S(_TYPE_RULES, tcode, rule_rows),
        }
        # the record's raw bytes (its line and -l dump lines, at most 256), for a record the
        # transaction rules may quarantine: carried in seg_data until then (resolve.py)
        fields["seg_data"] = self.raw(fi, ~system)
        begin = r == CH.R_BEGIN
        bi = np.flatnonzero(begin)
        if len(bi):
            users = recs.column_strings(L.N_HEADER + 3, fi, begin)
            fields["user"] = users if users is not None else \
                _scatter(recs.rest_of_line(L.N_HEADER + 3, fi[bi]), bi, len(fi))
        ci = np.flatnonzero(r == CH.R_COMMIT)
        ts = np.zeros(len(fi), dtype=np.int64)
        if len(ci):
            ts[ci] = utc_micros(recs.local_seconds(L.N_HEADER, fi[ci]), self.zone)
        commit = r == CH.R_COMMIT
        fields["commit_ts"] = pa.array(ts, pa.timestamp("us", tz="UTC"), mask=~commit)
        home = r == CH.R_HOME
        ddl = r == CH.R_DDL
        change = home | ddl
        if change.any():
            self.changes(fields, fi, tcode, tbl[fi], row[fi], home, ddl, S)
        ci = np.flatnonzero(~fast)
        careful = [self.careful_row(i) for i in ci.tolist()]

        # bytes: every row from its line's start to the next row's line start (the first
        # row also counts the bytes before it, the last one those after it); the rows are
        # the records, their lines in increasing order
        nbytes = np.zeros(n, dtype=np.int64)
        if n:
            ss = self.text.starts[recs.lines]
            nb = np.append(ss[1:], self.text.size) - ss
            nb[0] += ss[0]
            nbytes = nb[np.concatenate((fi, ci))]
        kinds = S(_KINDS, kind, None)
        self.add(sink, fi, ci, careful, kinds, fields, nbytes, recs.lines[fi] + 1 + ctx.line,
                 fi + ctx.index)

    def run_native(self, sink: EventSink) -> None:
        """``run`` for records the compiled pass read (``native.rows``): which records are
        rows, their roles, line numbers, bytes and the codes of their string columns in one
        pass over the records; the string columns built from those codes in one more
        (``COL.dict_columns``), the others from the scan's columns; what ``run`` gives."""
        recs, uniqid, ctx = self.recs, self.uniqid, self.ctx
        nat = COL._native_state["module"]
        n = recs.n
        fast = recs.fast.copy()
        # lines read by tokens: their table and row ids (wider than 16 digits: careful)
        rest = np.flatnonzero(~recs.fit & fast)
        if len(rest):
            role = CH.ROLE[np.maximum(recs.tcode[rest], 0)]
            hi = rest[(role == CH.R_HOME) | (role == CH.R_DDL)]
            if len(hi):
                v, ok = recs.tok.hex_column(L.N_HEADER, recs.tok_row[hi])
                recs._hval[hi, 0] = v
                fast[hi[~ok]] = False
            hi = rest[role == CH.R_HOME]
            hi = hi[fast[hi]]
            if len(hi):
                v, ok = recs.tok.hex_column(L.N_HEADER + 1, recs.tok_row[hi])
                recs._hval[hi, 1] = v
                recs._hcanon[hi, 1] = False
                fast[hi[~ok]] = False
        sc = self.text.scratch                   # working arrays kept between texts
        fi, role_f, codes, local = sc.get("rows", _rows_arrays, n) if sc else _rows_arrays(n)
        offs, idx, nbytes = (nat.empty(n, np.int64) for _ in range(3))   # in the output
        size = 1 << 14
        while True:
            tkeys = np.zeros(size, np.uint64)
            tslot = np.full(size, -1, np.int64)
            m, nt = nat.rows(fast, recs.tcode, recs.link, recs._hval, recs._words, recs.fit,
                             CH.ROLE, _KIND_OF_ROLE, _HOME_OP, L.YEAR_PIVOT, recs._line_s,
                             recs.lines, self.text.size, ctx.line, ctx.index, fi, role_f, codes,
                             tkeys, tslot, local, offs, idx, nbytes)
            if nt >= 0:
                break
            size *= 16
        fi, r, codes = fi[:m], role_f[:m], codes[:, :m]
        keys = np.zeros(nt, np.uint64)
        used = tslot >= 0
        keys[tslot[used]] = tkeys[used]
        xid, link = recs.xid.view(np.int64), recs.link.view(np.int64)
        # the string columns are built in chunks of _CHUNK rows (the sink's batches): a big
        # buffer is fresh memory on every use, chunks are reused by Arrow's allocator
        fields: dict = {
            "position": _chunked(m, lambda a, b: COL.native_positions(uniqid, recs.addr,
                                                                       fi[a:b])),
            "xid": xid.copy() if m == n else xid[fi],          # (the scan's: scratch)
            "link": link.copy() if m == n else link[fi],
        }
        fields["seg_data"] = self.raw_native(fi, r)
        begin = r == CH.R_BEGIN
        if recs.fit[fi[begin]].all():
            users = _chunked(m, lambda a, b: recs.column_strings(L.N_HEADER + 3, fi[a:b],
                                                                 begin[a:b]))
        else:
            bi = np.flatnonzero(begin)
            users = _scatter(recs.rest_of_line(L.N_HEADER + 3, fi[bi]), bi, m)
        fields["user"] = users
        commit = r == CH.R_COMMIT
        ci = np.flatnonzero(commit)
        ts = np.zeros(m, dtype=np.int64)
        if len(ci):
            loc = local[:m][ci]
            tok = np.flatnonzero(loc < 0)                # read by tokens
            if len(tok):
                loc[tok] = recs.local_seconds(L.N_HEADER, fi[ci[tok]])
            ts[ci] = utc_micros(loc, self.zone)
        fields["commit_ts"] = pa.array(ts, pa.timestamp("us", tz="UTC"), mask=~commit)
        specs = [(0, _KINDS), (1, COL.TYPE_NAMES), (2, _TYPE_RULES)]
        names = ["kind", "record_type", "rule"]
        if nt:
            specs += self.changes_native(fields, fi, r, codes, keys)
            names += ["op", "table_id", "schema_name", "table_name", "flag"]
        parts = COL.dict_columns(codes, specs, _bounds(m))
        cols = [p[0] for p in zip(*parts)] if len(parts) == 1 else \
            [_Chunked(list(p), _CHUNK) for p in zip(*parts)]
        kinds = cols[0]
        for name, col in zip(names[1:], cols[1:]):
            fields[name] = col
        if m < n:
            row = np.zeros(n, bool)
            row[fi] = True
            ci = np.flatnonzero(~row)
        else:
            ci = np.zeros(0, np.int64)
        careful = [self.careful_row(i) for i in ci.tolist()]
        if len(ci):
            ss = recs._line_s
            nbc = np.append(ss[1:], self.text.size)[ci] - ss[ci]
            nbc[ci == 0] += ss[0]
            nb = np.concatenate((nbytes[:m], nbc))
        else:
            nb = nbytes[:m]
        self.add(sink, fi, ci, careful, kinds, fields, nb, offs[:m], idx[:m])

    def raw_native(self, fi: np.ndarray, r: np.ndarray) -> pa.Array:
        """``raw(fi, r != R_SYSTEM)`` from the units the compiled pass found, in one pass
        (``native.seg_offsets``, ``seg_fill``)."""
        nat = COL._native_state["module"]
        recs, t = self.recs, self.text
        m = len(fi)
        sc = t.native
        off = nat.empty(m + 1, np.int32)
        bitmap = np.zeros((m + 7) // 8, np.uint8)
        bad = np.empty(m, np.int64)
        _total, nulls, nbad = nat.seg_offsets(fi, recs._line_s, sc.uend, sc.usimple, r,
                                              RAW_HEX_LIMIT, off, bitmap, bad)
        patch = {j: self.unit(int(fi[j])).raw[:RAW_HEX_LIMIT] for j in bad[:nbad].tolist()}
        if patch:                                  # units of another shape: joined
            lens = np.diff(off.astype(np.int64))
            for j, b in patch.items():
                lens[j] = len(b)
            off[1:] = np.cumsum(lens)
        chunks = []
        for a in range(0, max(m, 1), _CHUNK):      # a buffer per chunk of rows
            b = min(a + _CHUNK, m)
            base = int(off[a])
            size = int(off[b]) - base
            data = pa.allocate_buffer(size + 8)
            out = np.frombuffer(data, np.uint8)
            o = off[a:b + 1] - base
            nat.seg_fill(t.buf, fi[a:b], recs._line_s, o, out)
            for j, x in patch.items():             # (seg_fill copied their bytes: replaced)
                if a <= j < b:
                    out[o[j - a]:o[j - a] + len(x)] = np.frombuffer(x, np.uint8)
            bm = bitmap[a >> 3:(b + 7) >> 3]       # a chunk starts at a multiple of 8 rows
            nn = (b - a) - int(np.bitwise_count(bm).sum()) if nulls else 0
            chunks.append(pa.BinaryArray.from_buffers(
                pa.binary(), b - a, [pa.py_buffer(bm) if nn else None, pa.py_buffer(o), data], nn))
        return chunks[0] if len(chunks) == 1 else _Chunked(chunks, _CHUNK)

    def changes_native(self, fields: dict, fi: np.ndarray, r: np.ndarray, codes: np.ndarray,
                       keys: np.ndarray) -> list:
        """``changes`` from the codes of ``native.rows`` (3: op of a home-row change, 4 and 5:
        its table among ``keys``, the distinct tables in order of first appearance): the
        DDL records' codes set here, the row ids and ddl texts built; returns the specs of
        the dictionary columns op, table_id, schema_name, table_name, flag."""
        home = r == CH.R_HOME
        ddl = r == CH.R_DDL
        ids = [format(t, "x") for t in keys.tolist()]
        tables = [self.catalog.table(t) for t in ids]
        kn = np.array([t is not None for t in tables] + [False], bool)
        schemas = [t.schema if t else None for t in tables]
        names = [t.name if t else None for t in tables]
        op, code, flag = codes[3], codes[5], codes[6]
        flag[home & ~kn[codes[4]]] = 0
        di = np.flatnonzero(ddl)
        texts: list = []
        dfit = self.recs.fit[fi[di]]
        col_texts = iter(self.recs.columns_text(fi[di[dfit]]).to_pylist() if dfit.any() else ())
        seen: dict = {}                          # the same columns read once
        known = kn.tolist()
        ops, flags, dcodes = [], [], []          # the DDL rows' codes, set at once
        for rec_i, t, is_fit, c in zip(fi[di].tolist(), codes[1][di].tolist(), dfit.tolist(),
                                       code[di].tolist()):
            if is_fit:
                key = (t, next(col_texts))
                v = seen.get(key)
                if v is None:
                    v = seen[key] = self.values(_record_of_columns(COL.TYPE_NAMES[t], key[1]))
            else:                                # read by tokens (checked): split again
                parts = self.text.line(int(self.recs.lines[rec_i])).decode("utf-8") \
                    .split(None, L.N_HEADER)
                key = (parts[2], parts[L.N_HEADER] if len(parts) > L.N_HEADER else "")
                v = seen.get(key)
                if v is None:
                    v = seen[key] = self.values(_record_of_tokens(*key))
            ops.append(_OP_CODE[v["op"]])
            texts.append(v.get("ddl"))
            if v.get("flag"):
                flags.append(0)
                dcodes.append(-1)
            elif not known[c]:                   # the names the record prints
                flags.append(-1)
                dcodes.append(len(schemas))
                schemas.append(v.get("schema_name"))
                names.append(v.get("table_name"))
            else:
                flags.append(-1)
                dcodes.append(c)
        if len(di):
            op[di] = ops
            flag[di] = flags
            code[di] = dcodes
        parts = [self.recs.hex_strings(L.N_HEADER + 1, fi[a:b], home[a:b])
                 for a, b in _bounds(len(fi))]
        if any(p is None for p in parts):
            home_i = np.flatnonzero(home)
            rid = _scatter(self.recs.hex_text(L.N_HEADER + 1, fi[home_i]), home_i, len(fi))
        else:
            rid = parts[0] if len(parts) == 1 else _Chunked(parts, _CHUNK)
        fields["row_id"] = rid
        if len(di):
            dcode = codes[7]
            dcode[di] = np.arange(len(di))
            fields["ddl"] = COL.dict_strings(texts, dcode)
        return [(3, _OPS), (4, ids), (5, schemas), (5, names), (6, (RS.UNKNOWN_TABLE_FLAG,))]

    def add(self, sink: EventSink, fi: np.ndarray, ci: np.ndarray, careful: list, kinds,
            fields: dict, nbytes: np.ndarray, offsets: np.ndarray, index: np.ndarray) -> None:
        """The rows to the sink: the columnar rows (records ``fi``: their ``offsets``,
        ``index``) in slices between the careful ones (records ``ci``, rows ``careful``);
        ``nbytes`` of the columnar rows, then of the careful ones."""
        ctx = self.ctx
        m = len(fi)
        # rows in record order: the columnar rows in slices between the careful ones (many
        # careful rows: added after them, the sink puts them in order)
        cuts = np.searchsorted(fi, [c["index"] - ctx.index for c in careful]).tolist() \
            if len(careful) <= _INTERLEAVE else [m] * len(careful)
        done = 0
        chunked = any(isinstance(v, _Chunked) for v in [kinds, *fields.values()])
        for c, nb, cut in zip(careful + [None], nbytes[m:].tolist() + [None], cuts + [m]):
            while cut > done:
                end = min(cut, (done // _CHUNK + 1) * _CHUNK) if chunked else cut
                sl = slice(done, end)
                sink.add_columns(kinds[sl], offsets[sl], index[sl], 1, n_bytes=nbytes[sl],
                                 **{k: v[sl] for k, v in fields.items()})
                done = end
            if c is None:
                break
            kind_, off, idx = c.pop("kind"), c.pop("offset"), c.pop("index")
            if kind_ == "quarantine":
                sink.quarantine(c.pop("error"), off, idx, c.pop("raw"), n_records=1, n_bytes=nb,
                                **{k: v for k, v in c.items() if v is not None})
            else:
                sink.add(kind_, off, idx, 1, n_bytes=nb,
                         **{k: v for k, v in c.items() if v is not None})

    def changes(self, fields: dict, fi: np.ndarray, tcode: np.ndarray, tb: np.ndarray,
                rows: np.ndarray, home: np.ndarray, ddl: np.ndarray, S=None) -> None:
        """The change columns of the home-row changes and the table-level records (DDL,
        truncate: their ``ddl`` text and printed names read record by record, ``values``)."""
        change = home | ddl
        enc = pa.array(tb[change]).dictionary_encode()      # the distinct tables, hashed
        keys = enc.dictionary.to_numpy()
        ids = [format(t, "x") for t in keys.tolist()]
        tables = [self.catalog.table(t) for t in ids]
        code = np.zeros(len(fi), np.int64)
        code[change] = enc.indices.to_numpy()
        S = S or _strings_of(self.recs)
        # the id of every change's table: ``format(v, "x")``, rendered once per table
        fields["table_id"] = S(ids, code, change)
        known = change & np.array([t is not None for t in tables], dtype=bool)[code]
        schemas = [t.schema if t else None for t in tables]
        names = [t.name if t else None for t in tables]
        op = np.where(home, _HOME_OP[tcode], -1)
        flag = home & ~known
        di = np.flatnonzero(ddl)
        texts = []
        # the columns of a record read by fixed columns are checked: split, not parsed again
        dfit = self.recs.fit[fi[di]]
        col_texts = iter(self.recs.columns_text(fi[di[dfit]]).to_pylist() if dfit.any() else ())
        seen: dict = {}                          # the same columns read once
        for j, is_fit in zip(di.tolist(), dfit.tolist()):
            if is_fit:
                key = (int(tcode[j]), next(col_texts))
                v = seen.get(key)
                if v is None:
                    v = seen[key] = self.values(_record_of_columns(COL.TYPE_NAMES[key[0]], key[1]))
            else:
                rec = parse_record(self.text.line(int(self.recs.lines[fi[j]])).decode("utf-8"))
                v = self.values(rec)
            op[j] = _OP_CODE[v["op"]]
            texts.append(v.get("ddl"))
            if v.get("flag"):
                flag[j] = True
            elif not known[j]:                   # the names the record prints
                code[j] = len(schemas)
                schemas.append(v.get("schema_name"))
                names.append(v.get("table_name"))
                known[j] = True
        fields["op"] = S(_OPS, op, None)
        # the row ids as printed (when printed the canonical way), else rendered from the value
        rid = self.recs.hex_strings(L.N_HEADER + 1, fi, home)
        if rid is None:
            home_i = np.flatnonzero(home)
            rid = _scatter(self.recs.hex_text(L.N_HEADER + 1, fi[home_i]), home_i, len(fi))
        fields["row_id"] = rid
        fields["schema_name"] = S(schemas, code, known)
        fields["table_name"] = S(names, code, known)
        fields["flag"] = S((RS.UNKNOWN_TABLE_FLAG,), flag.astype(np.int8) - 1, None)
        if len(di):
            dcode = np.full(len(fi), -1, np.int64)
            dcode[di] = np.arange(len(di))
            fields["ddl"] = S(texts, dcode, None)


def _record_of_columns(rtype: str, text: str) -> Record:
    """The values of a record from its columns after the header, as the fixed-column reader
    checked them (one blank between columns; a rest-of-line column last): what
    ``parse_record`` gives for them (the header fields are not needed here: zero)."""
    cols = L.RECORD_TYPES[rtype]
    toks = text.split(" ", len(cols) - 1) if rtype in L.REST_OF_LINE else text.split(" ")
    values = {}
    for (name, kind, _label), tok in zip(cols, toks):
        if kind == L.HEX:
            values[name] = int(tok, 16)
        elif kind == L.DEC:
            values[name] = int(tok)
        else:
            values[name] = _COLUMN[kind](tok, name)
    return Record(0, 0, rtype, 0, 0, 0, values)


def _record_of_tokens(rtype: str, text: str) -> Record:
    """``_record_of_columns`` for the text after the header of a line the token reader
    checked (columns apart by any white space): what ``parse_record`` gives for them."""
    cols = L.RECORD_TYPES[rtype]
    if rtype in L.REST_OF_LINE:
        toks = text.split(None, len(cols) - 1)
        if toks:
            toks[-1] = toks[-1].rstrip()
    else:
        toks = text.split()
    values = {}
    for (name, kind, _label), tok in zip(cols, toks):
        if kind == L.HEX:
            values[name] = int(tok, 16)
        elif kind == L.DEC:
            values[name] = int(tok)
        else:
            values[name] = _COLUMN[kind](tok, name)
    return Record(0, 0, rtype, 0, 0, 0, values)


_INTERLEAVE = 64          # careful rows up to which the columnar rows are added in slices
_CHUNK = 65536            # rows of a seg_data buffer (the sink's batch size)


def _rows_arrays(n: int) -> tuple:
    """The working arrays of ``native.rows`` for n records: rows, roles, codes, times."""
    nat = COL._native_state["module"]
    return (nat.empty(n, np.int64), nat.empty(n, np.int8), nat.empty((8, n), np.int32),
            nat.empty(n, np.int64))


def _bounds(m: int) -> list[tuple[int, int]]:
    """The chunks of ``_CHUNK`` rows of m rows (one, empty, for none)."""
    return [(a, min(a + _CHUNK, m)) for a in range(0, max(m, 1), _CHUNK)]


def _chunked(m: int, build) -> "pa.Array | _Chunked":
    """``build(a, b)`` of every chunk of m rows, as one column."""
    parts = [build(a, b) for a, b in _bounds(m)]
    return parts[0] if len(parts) == 1 else _Chunked(parts, _CHUNK)


class _Chunked:
    """A column in chunks of ``size`` rows; sliced within one chunk."""

    def __init__(self, chunks: list, size: int) -> None:
        self.chunks, self.size = chunks, size

    def __getitem__(self, sl: slice) -> pa.Array:
        k = sl.start // self.size
        return self.chunks[k].slice(sl.start - k * self.size, sl.stop - sl.start)


def _scatter(values: pa.Array, at: np.ndarray, n: int) -> pa.Array:
    """An n-row string array holding ``values`` at rows ``at``, null elsewhere. Rows in
    increasing order and values without nulls: the values' bytes are kept as they are, only
    the offsets and the validity bitmap are new (no copy of the strings)."""
    if not len(at):
        return pa.nulls(n, pa.string())
    values = values.cast(pa.string())
    if values.null_count == 0 and values.offset == 0 and len(at) == len(values) \
            and (len(at) < 2 or bool((at[1:] > at[:-1]).all())):
        voff = np.frombuffer(values.buffers()[1], np.int32, len(values) + 1)
        lens = np.zeros(n, np.int32)
        lens[at] = np.diff(voff)
        offsets = np.empty(n + 1, np.int32)
        offsets[0] = voff[0]
        np.cumsum(lens, out=offsets[1:])
        offsets[1:] += voff[0]
        valid = np.zeros(n, bool)
        valid[at] = True
        bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
        return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), values.buffers()[2],
                                           bitmap, n - len(at))
    idx = np.full(n, -1, dtype=np.int64)
    idx[at] = np.arange(len(at))
    valid = idx >= 0
    return pc.take(values.cast(pa.string()), pa.array(np.where(valid, idx, 0), mask=~valid))


# ----------------------------------------------------------------- ranges (issue 14)

_REMAINDER_LINE = r"^[ \t]*\S+[ \t]+\S+[ \t]+(?:" + "|".join(sorted(L.REMAINDER)) + r")[ \t\r\n]"


def split(data: bytes, ctx: DecodeContext, target_bytes: int) -> list[dict]:
    """Byte ranges of about ``target_bytes`` covering the text, each starting at a record
    line (never inside a record's dump lines) that is not a remainder-page record (those
    stay with the home-row change before them), for ``decode_records`` with ``ctx.offset``,
    ``line`` and ``index`` set to the range's."""
    from ..framing import split_ranges

    text = COL.Text(data)
    lines = text.record_lines()
    starts = text.starts[lines]
    allowed = np.ones(len(lines), dtype=bool)
    if len(lines):
        allowed[0] = False           # the first range starts at 0 and holds the first record
        rem = pc.match_substring_regex(pc.take(text.array, pa.array(lines)), _REMAINDER_LINE)
        allowed &= ~np.asarray(rem.to_numpy(zero_copy_only=False), dtype=bool)
    out = []
    for start, end, index in split_ranges(starts, len(data), target_bytes, allowed):
        line = int(np.searchsorted(text.starts, start)) if start else 0
        out.append({"start": int(start), "end": int(end), "index": int(index), "line": line})
    return out
