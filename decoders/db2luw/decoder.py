"""Decoder of Db2 LUW log-read buffer streams (SPEC section 3, db2luw): Version 7
(``layout: v7``, the default) and Db2 10.1 to 12.1 (``layout: v10``, decisions below).

Version 7: the archive is ``repeat { LSN (6 bytes), log record }``; each log record starts
with the Log Manager header (20 bytes; 26 for a compensation record ``C``; 32 for a
propagatable compensation record, i.e. ``C`` with flag 0x0002). Every record read gives
exactly one event row (``n_records`` = 1, ``n_bytes`` = its prefix and record);
``record_offset`` is the offset of the record's LSN prefix.

How it decodes (issue 13): one framing pass over the length fields (``frame``), the headers
of all records gathered with numpy (``layout.py``), records classified by type and function
with masks; inserts, deletes and updates decoded per table in batches (``rows.RowBatch``),
commits, aborts, pending lists and skipped types as columns; every other record, and every
record failing a vectorised check, through the careful per-record path (``careful.py``),
which also keeps the per-transaction undo state (the columnar path tells it about the
changes and transaction ends of the transactions that have undo records in the archive).

Decisions (where SPEC and the vendor text leave room):

* ``position`` = the record's LSN, ``trx_id`` = the TID, both 12 upper-case hex digits
  (LSNs/TIDs are byte strings compared big-endian, never byte-swapped).
* ``row_id`` = the RID (``sqlint32`` in source byte order) as 8 upper-case hex digits of
  its unsigned 32-bit value (page and slot stay readable: ``0001A203``).
* Record types: ``N`` decoded by component (DMS 1, DOM 4) and function; ``C`` likewise, as
  an undo; ``M`` commit (time at offset 20, authid = the rest, trailing blanks and NULs
  trimmed; a byte the codepage cannot read is kept as an escape, never costing the commit);
  ``A`` abort; ``E`` control ``local_pending_list``; any other letter is skipped with rule
  ``db2luw_record_type_<letter>``. A type that is no ASCII letter is quarantined.
* Changes: 118 ``c``, 106 ``d``, 120 ``u`` (before and after image); DOM 101/4/2/3 and
  DMS 102/113 ``ddl`` with a readable description; DOM 11 ``t`` (with a description in
  ``ddl`` too). 124, 128, DOM 35 and row records whose image is not formatted user data
  (record-header type not 0x00/0x10, or Formatted User Data byte 0 not 1) are ``control``.
  A compensation record whose body is 124/128/35 is ``control`` (``compensation_<name>``).
* Undo: DMS 110/111/112/104/115 and DOM 130 (in any record type) and every ``C`` record
  with a change function are ``undo`` rows whose ``undo_of`` is the position of the change
  they undo, found by the first rule that applies:
    1. 32-byte header: the compensated LSN at offset 26 (when not zero);
    2. 26-byte header: the transaction's change record whose previous-LSN field equals the
       "LSN of the record before the compensated one" at offset 20 (a transaction's records
       form one backward chain, so that record is unique);
    3. otherwise (20-byte undo records, or the chain does not reach back far enough): the
       latest change of the same transaction, on the same table and RID (no RID for DDL),
       of the function the undo reverses (110->118, 111->106, 112->120, 104->102,
       115->113, 130->101; a ``C`` record that repeats a change function reverses its
       inverse: 118 (re-insert) a 106, 106 an 118, 120 an 120, DDL the same DDL), that
       nothing has undone yet.
  Rule 1 is trusted as written: it is the only rule that reaches a change in another
  archive of the night (the sample-night generator uses it for exactly that case).
  Rules 2 and 3 see this archive only (archives are decoded independently); an undo whose
  change cannot be found is quarantined (``broken_chain``) so that it is never lost.
  The ordering job skips the undone change (rule ``compensated``); an undone DDL is dropped
  with its undo.
* Table id = ``<tablespace id>.<table id>``. A row change of a table the catalog does not
  know is quarantined (``unknown_table``); DDL and truncate of an unknown table publish
  with ``table_id`` set and null schema/table names (CREATE TABLE is usually of a table the
  catalog does not know yet). Undo and control records do not need the catalog.
* Column values: CHAR/VARCHAR/CLOB in the table's ``encoding`` when the catalog gives one,
  else the source ``codepage`` option (default utf-8). BLOB/CLOB/VARBINARY have the
  4-byte offset/length fixed part of VARCHAR. A fixed section longer than the catalog's
  columns need is accepted (bytes beyond are ignored); a shorter one is corrupt.
* Values out of range are quarantined (``bad_value``), never published: a packed DECIMAL,
  DATE, TIME or TIMESTAMP with a nibble that is no digit or no calendar value, a REAL or
  DOUBLE that is NaN or infinite (Db2 stores neither), a v10 commit time past 9999-12-31.
  A code page that is no character set (``idna``, ``undefined``...; the configuration
  refuses them) makes every CHAR/VARCHAR value a ``bad_value``; commit authids are then read
  as ASCII.
* DMS 113/115 (alter column length) are not laid out in the vendor document; the project
  reads them as padding(2), column number u2 (0-based, like SYSCAT.COLUMNS.COLNO),
  reserved(2), old length u4, new length u4 (``layout.ALTER_COLUMN``).
* Framing errors (``frames.py``): a tail shorter than prefix + header, or a record length
  past the end of the file, is ``truncated`` (NeedData); a record length smaller than its
  header, or a length that leads to no plausible record, is ``corrupt``. Decoding then
  resynchronises at the next plausible record (header fields in their domains, positions
  rising, the length inside the archive and the record after it plausible too); the bytes in
  between are one quarantine row (``n_records`` 1, ``n_bytes`` the span), so a damaged length
  or type byte costs only the damaged record. A record whose header is not plausible but
  whose successor is stays a record (e.g. a type that is no letter: ``unknown_record_type``).
  Any other bad record is quarantined alone and decoding goes on with the next record.
* ``layout: v10`` (Db2 10.1 to 12.1, db2ReadLog with a connection and FILTER_ON; SPEC
  section 3, formats/db2luw-v10-notes.md): each record behind a 56-byte
  ``db2ReadLogFilterData``; the next prefix follows the record's own length (header u32 @0;
  ``realLogRecLen`` is not used). Everything the two layouts share is shared code: DMS/DOM
  headers, DDL and control bodies, undo functions, the record header, the Formatted User
  Data Record and every value encoding, the row-image decoding, resynchronisation, ranges.
  Where the public documents are silent, decided as a Db2 user would:

  - ``position`` (and ``commit_position``) = LFS then LSN, 32 upper-case hex digits (sorts
    like the log, also across pureScale streams); ``trx_id`` = the TID's 6 bytes as 12 hex
    digits (opaque); ``row_id`` = the 6-byte RID as 12 hex digits (as IBM's sample prints it).
    The header is authoritative: the prefix's LRIs are not compared with it (the type-1 LRI
    type must be 1 only to find a record again after damage).
  - Types: 0x004E normal, 0x0043 compensation (56-byte header, 64 with flag 0x0002),
    0x0041 abort (its authid is not read), 0x0084 commit and 0x008A local pending list: both
    end the transaction as committed (rule ``local_pending_list`` on the latter's row); their
    time is u64 UTC seconds @40 (past 9999-12-31: ``bad_value``); the authid (length u16 @48,
    text @50, trailing blanks and NULs trimmed) only when the record has the propagatable
    flag, else ``user`` is null. Any other type is skipped with rule
    ``db2luw_record_type_<name>`` (IBM's or third-party names for 0x0087, 0x0049, 0x0085,
    0x0086, 0x0069, 0x0046, 0x0052, 0x0055; else ``0x00XX``).
  - DML: 162 ``c``, 161 ``d``, 163 ``u``; 165/164 the same to an empty page. Row block after
    the DMS header: 2 bytes, length u16 @8, 2 bytes, RID @12, offset u16 @18, record @20
    (164/165/166: 6 more bytes, offset @24, record @26); an update is two such halves. 110 and
    131 (undo insert, undo insert to an empty page) carry length @8 and RID @12, no image;
    111, 112 and 166 carry the row. 124's body is two u64 (IBM's sample), 128's has the
    description length @88 (third-party code, unverified); both are control records.
  - Undo and compensation, last in, first out: every undo function record (110, 111, 112,
    131, 166, 104, 115, DOM 130, in a normal or a compensation record) and every compensation
    record repeating a change function undoes the latest change of its transaction not yet
    undone in the archive (changes: the DML, DDL and truncate records, and row records whose
    image is not formatted user data; control records 124/128/35 are never undone). That
    change must be of the function the undo reverses (an empty-page insert or delete counts
    as the plain one) on the same table and RID, else the undo is ``broken_chain`` (it still
    consumes the change). The header's LSOs are not needed for this. When no change of the
    transaction is left in the archive, the change is in an earlier archive: the undo row is
    written with ``undo_of`` null and ``resolve_transactions`` (``resolve.py``, the ordering
    job's hook) matches it there, last in first out, over the night and the held rows.
* Byte ranges (``split``, issue 14): cuts only at record starts outside every transaction
  that has undo records in the archive (from its first record to its last undo record) and
  away from damage, so each range decodes on its own to exactly its rows of the whole.
"""

from __future__ import annotations

import decimal
import gc
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .. import vectors as V
from ..base import DecodeContext
from ..catalog import codec_problem
from ..errors import Corrupt, DecodeError, NeedData
from ..events import EventSink
from ..framing import Frames, concat_text, hex_bytes, hex_ints, split_ranges
from ..layout import as_uint8, gather
from . import layout as L
from .frames import Framer
from .careful import DEFAULT_CODEPAGE, MAX_EPOCH_SECONDS, Careful, _Change, _Trx, rid_text
from .rows import RowBatch

_US = 1_000_000


class Decoder:
    """Decodes one archive (or one byte range of it: ``ctx.offset``, ``ctx.index``)."""

    def __init__(self, ctx: DecodeContext, sink: EventSink, fast: bool = True) -> None:
        opts = ctx.options or {}
        self.fast = fast                # False: every record through the careful path (tests)
        self.v = L.variant(opts.get("layout"))
        self.byte_order = opts.get("byte_order", "little")
        self.lay = self.v.layouts(self.byte_order)
        self.codepage = opts.get("codepage") or DEFAULT_CODEPAGE
        self.catalog = ctx.catalog
        self.ctx = ctx
        self.sink = sink
        self.careful = Careful(ctx, sink, self.v, self.byte_order)
        self.framer = Framer(self.v, self.byte_order)
        self.batches: dict[str, RowBatch | None] = {}
        self.insert_functions = [fn for fn, (op, _) in self.v.row_functions.items() if op == "c"]
        lay, D, O = self.lay, L.COMPONENT_DMS * 256, L.COMPONENT_DOM * 256
        # the DDL and truncate records the columnar path takes, and the size of their bodies
        self.ddl_sizes = {D + L.DMS_ADD_COLUMNS: lay.add_columns.size,
                          D + L.DMS_ALTER_COLUMN: lay.alter_column.size,
                          O + L.DOM_CREATE_TABLE: lay.table_object.size,
                          O + L.DOM_DROP_TABLE: lay.table_object.size,
                          O + L.DOM_CREATE_INDEX: lay.index.size,
                          O + L.DOM_DROP_INDEX: lay.index.size,
                          O + L.DOM_TRUNCATE: lay.truncate.size}

    # ------------------------------------------------------------- framing
    def frame(self, data) -> Frames:
        return self.framer.frame(data, base=self.ctx.offset)

    def split(self, data, target: int) -> list[dict]:
        """Byte ranges of about ``target`` bytes that decode on their own (see ``split``)."""
        v, lay, fr = self.v, self.lay, self.framer
        frames = fr.frame(data)
        rec_index, _ = frames.record_indexes(0)
        starts, lengths = frames.starts, frames.lengths
        n = len(starts)
        if n < 2:
            return [{"start": 0, "end": len(data), "index": 0}]
        buf = as_uint8(data)
        hdr = lay.header.gather(buf, starts + v.prefix_size)
        rtype = hdr["record_type"].astype(np.int64)
        body = starts + v.prefix_size + v.header_size
        has2 = body + 2 <= starts + lengths
        at = np.minimum(body, len(buf) - 2)
        key = np.where(has2, buf[at].astype(np.int64) * 256 + buf[at + 1], -1)
        undoing = (rtype == v.COMPENSATION) | (
            (rtype == v.NORMAL) & np.isin(key, [c * 256 + fn for c, fn in v.undoes]))
        tid64 = (hdr["tid"].astype(np.uint64) << np.array([40, 32, 24, 16, 8, 0], np.uint64)).sum(axis=1)
        # a transaction with undo records here: no cut between its first record and its last
        # undo record (the undo state is per range)
        depth = np.zeros(n + 1, dtype=np.int64)
        if undoing.any():
            uniq, first = np.unique(tid64, return_index=True)
            u_tid = tid64[undoing]
            u_idx = np.flatnonzero(undoing)
            last = np.full(len(uniq), -1, dtype=np.int64)
            np.maximum.at(last, np.searchsorted(uniq, u_tid), u_idx)
            has = last >= 0
            np.add.at(depth, first[has] + 1, 1)
            np.add.at(depth, last[has] + 1, -1)
        inside = np.cumsum(depth)[:n] > 0
        # and never next to damage or a record whose header is not plausible
        ok = fr.head_ok(buf, starts, len(data))
        hi, lo = fr.keys(buf, starts)
        ok[1:] &= (hi[1:] > hi[:-1]) | ((hi[1:] == hi[:-1]) & (lo[1:] > lo[:-1]))
        contiguous = np.ones(n, dtype=bool)
        contiguous[1:] = starts[:-1] + lengths[:-1] == starts[1:]
        allowed = ~inside & ok & contiguous
        allowed[1:] &= ok[:-1] & contiguous[:-1]
        allowed[:-1] &= ok[1:] & contiguous[1:]
        allowed[0] = False
        return [{"start": a, "end": b, "index": i}
                for a, b, i in split_ranges(starts, len(data), target, allowed, rec_index)]

    # ------------------------------------------------------------- the archive
    def run(self, data) -> None:
        frames = self.frame(data)
        rec_index, dmg_index = frames.record_indexes(self.ctx.index)
        for d, i in zip(frames.damaged, dmg_index):
            self.careful.quarantine_span(data, d.start, d.end, i, d.error)
        if len(frames):
            self._records(data, frames, rec_index)

    def _records(self, data, frames: Frames, rec_index: np.ndarray) -> None:
        v, lay = self.v, self.lay
        buf = as_uint8(data)
        starts, lengths = frames.starts, frames.lengths
        ends = starts + lengths
        n = len(starts)
        hdr = lay.header.gather(buf, starts + v.prefix_size)
        rtype = hdr["record_type"].astype(np.int64)
        flags = hdr["flags"].astype(np.int64)
        tid = hdr["tid"]
        self.trx_hex = hex_bytes(tid)
        if v is L.V7:
            self.pos_hex = hex_bytes(lay.prefix.gather(buf, starts)["lsn"])
        else:
            self.pos_hex = concat_text(hex_ints(hdr["lfs"], 16), hex_ints(hdr["lsn"], 16))
        self.offsets = self.ctx.offset + starts
        self.rec_index, self.lengths = rec_index, lengths
        normal = rtype == v.NORMAL
        compensation = rtype == v.COMPENSATION
        prop = (flags & L.FLAG_PROPAGATABLE) != 0
        hsize = np.where(compensation, np.where(prop, v.prop_comp_size, v.comp_size), v.header_size)
        body = starts + v.prefix_size + hsize
        has2 = body + 2 <= ends
        at = np.minimum(body, len(buf) - 2)
        comp = np.where(has2, buf[at], -1).astype(np.int64)
        func = np.where(has2, buf[at + 1], -1).astype(np.int64)
        key = comp * 256 + func
        f = _Fields(self, buf, body, ends, comp)
        row = normal & (comp == L.COMPONENT_DMS) & np.isin(func, list(v.row_functions))
        commit = rtype == v.COMMIT
        if v is L.V10:
            commit |= rtype == v.PENDING_LIST
        abort = rtype == v.ABORT
        known = normal | commit | abort | compensation | (rtype == v.PENDING_LIST)
        if v is L.V7:
            pending = rtype == v.PENDING_LIST
            skip = ~known & np.isin(rtype, [ord(c) for c in _LETTERS])
        else:
            pending = np.zeros(n, dtype=bool)
            skip = ~known
        control_keys = [c * 256 + fn for c, fn in v.control_functions]
        control = normal & np.isin(key, control_keys)
        undo = ((normal | compensation) & np.isin(key, [c * 256 + fn for c, fn in v.undoes])) | \
            (compensation & np.isin(key, [c * 256 + fn for c, fn in v.compensates]))
        ddl = normal & np.isin(key, list(self.ddl_sizes))
        # fast paths; what they cannot take goes the careful path
        if not self.fast:
            row = commit = abort = pending = skip = control = undo = ddl = np.zeros(n, dtype=bool)
        careful = ~(row | commit | abort | pending | skip | control | undo | ddl)
        took_rows, row_fail = self._rows(buf, np.flatnonzero(row), body, ends, func, f)
        careful[row_fail] = True
        took_commits = self._commits(buf, np.flatnonzero(commit), body, ends, flags, rtype, careful)
        self._simple("abort", np.flatnonzero(abort), trx_end="abort")
        self._simple("control", np.flatnonzero(pending), rule="local_pending_list")
        if skip.any():
            self._simple("skip", np.flatnonzero(skip), rule=self._skip_rules(rtype[skip]))
        self._controls(np.flatnonzero(control), key, body, ends, f, careful)
        took_undo = self._undo_plan(data, np.flatnonzero(undo), compensation, key, body, ends, f, careful)
        took_ddl = self._ddl(data, np.flatnonzero(ddl), key, body, ends, f, careful)
        # in archive order: the careful path, and the undo state of the transactions that
        # have undo records here (their changes are registered, their ends forget them)
        tid64 = (tid.astype(np.uint64) << np.array([40, 32, 24, 16, 8, 0], np.uint64)).sum(axis=1)
        undoing = compensation | undo | (normal & np.isin(key, [c * 256 + fn for c, fn in v.undoes]))
        # a change matters to the undo state only before the last undo record of its transaction
        last_undo = {}
        for t_, i_ in zip(tid64[undoing].tolist(), np.flatnonzero(undoing).tolist()):
            last_undo[t_] = i_
        if last_undo:
            u_tid = np.fromiter(last_undo.keys(), dtype=np.uint64, count=len(last_undo))
            u_last = np.fromiter(last_undo.values(), dtype=np.int64, count=len(last_undo))
            order = np.argsort(u_tid)
            u_tid, u_last = u_tid[order], u_last[order]
            at_ = np.minimum(np.searchsorted(u_tid, tid64), len(u_tid) - 1)
            before_last = (u_tid[at_] == tid64) & (np.arange(n) < u_last[at_])
        else:
            before_last = np.zeros(n, dtype=bool)
        changes = took_rows | took_ddl
        stateful = (before_last & (changes | took_commits | abort)) | took_undo
        todo = np.flatnonzero(careful | stateful)
        if len(todo):
            kind = np.select([careful[todo], changes[todo], took_undo[todo]], [0, 1, 2], 3)
            self._ordered_pass(data, todo, kind, hdr, starts, ends, func, f, comp, took_ddl)

    # ------------------------------------------------------------- the ordered pass
    def _ordered_pass(self, data, todo, kind, hdr, starts, ends, func, f, comp, no_rid) -> None:
        """Kinds: 0 careful record, 1 change to register (a row change, or a DDL or
        truncate record, ``no_rid``), 2 undo to resolve, 3 end."""
        cf, v = self.careful, self.v
        take = pa.array(todo)
        positions = self.pos_hex.take(take).to_pylist()
        trxs = self.trx_hex.take(take).to_pylist()
        prevs = hdr["lsn_prev" if v is L.V7 else "lso_prev"][todo]
        if v is L.V7:                      # 6-byte LSNs as bytes, cut from one copy
            raw = np.ascontiguousarray(prevs, dtype=np.uint8).tobytes()
            prevs = [raw[j:j + 6] for j in range(0, len(raw), 6)]
        else:
            prevs = prevs.tolist()
        rids = f.rid_values(todo)
        if no_rid[todo].any():
            for k in np.flatnonzero(no_rid[todo]).tolist():
                rids[k] = None
        tables = f.dms_tables(todo)
        funcs = func[todo].tolist()
        comps = comp[todo].tolist()
        plan = self.plan
        resolve = cf.resolve
        trx_state = cf.trxs
        out_idx, out_target = [], []
        for k, (i, kd, p, t) in enumerate(zip(todo.tolist(), kind.tolist(), positions, trxs)):
            if kd == 1:
                # Careful.register inlined (a call for each of ~200k changes at 1M)
                tr = trx_state.get(t)
                if tr is None:
                    tr = trx_state[t] = _Trx()
                ch = _Change(p, comps[k], funcs[k], tables[k], rids[k])
                tr.by_prev[prevs[k]] = ch
                tr.by_pos[p] = ch
                tr.changes.append(ch)
            elif kd == 2:
                want, table_id, rid, undo_next, compensated = plan[i]
                try:
                    target = resolve(t, want, table_id, rid, undo_next, compensated)
                except DecodeError as exc:
                    cf.quarantine_record(data, int(starts[i]), int(self.rec_index[i]),
                                         int(ends[i]), p, t, exc)
                    continue
                out_idx.append(i)
                out_target.append(target)
            elif kd == 0:
                cf.record(data, int(starts[i]), int(self.rec_index[i]), int(ends[i]), p, t)
            else:
                cf.ended(t)
        if out_idx:
            idx = np.array(out_idx, dtype=np.int64)
            got = [plan[i] for i in out_idx]
            self._emit("undo", idx, rule=pa.array([self.plan_rule[i] for i in out_idx], pa.string()),
                       undo_of=pa.array(out_target, pa.string()),
                       table_id=pa.array([g[1] for g in got], pa.string()),
                       row_id=pa.array([None if g[2] is None else rid_text(v, g[2]) for g in got],
                                       pa.string()))

    def _ddl(self, data, idx, key, body, ends, f, careful) -> np.ndarray:
        """DDL and truncate records (normal records: add columns, alter column length,
        create/drop table, create/drop index, truncate) whose body holds their layout: change
        rows with the careful path's texts (``Careful._ddl`` and its callers); returns the
        mask of records taken. The others go the careful path."""
        took = np.zeros(len(body), dtype=bool)
        if not len(idx):
            return took
        lay, sizes = self.lay, self.ddl_sizes
        k = key[idx]
        size = np.zeros(len(idx), dtype=np.int64)
        for kk, sz in sizes.items():
            size[k == kk] = sz
        ok = body[idx] + size <= ends[idx]
        careful[idx[~ok]] = True
        good = idx[ok]
        if not len(good):
            return took
        took[good] = True
        D, O = L.COMPONENT_DMS * 256, L.COMPONENT_DOM * 256
        catalog = self.catalog
        texts, ops, schemas, names = [], [], [], []
        tables = f.dms_tables(good)
        for tid, kk, b in zip(tables, key[good].tolist(), body[good].tolist()):
            table = catalog.table(tid)
            name = table.qualified_name if table else tid
            op = "ddl"
            if kk == D + L.DMS_ADD_COLUMNS:
                old, new = lay.add_columns.unpack_from(data, b)[4:]
                text = f"ALTER TABLE {name} ADD COLUMNS (old {old}, new {new})"
            elif kk == D + L.DMS_ALTER_COLUMN:
                colno, old, new = lay.alter_column.unpack_from(data, b)[4:]
                col = table.columns[colno].name if table is not None and colno < len(table.columns) \
                    else f"COLNO {colno}"
                text = f"ALTER TABLE {name} ALTER COLUMN {col} SET LENGTH {new} (old {old})"
            elif kk == O + L.DOM_CREATE_TABLE:
                text = f"CREATE TABLE {name}"
            elif kk == O + L.DOM_DROP_TABLE:
                text = f"DROP TABLE {name}"
            elif kk == O + L.DOM_TRUNCATE:
                op, text = "t", f"TRUNCATE TABLE {name} (IMPORT REPLACE)"
            else:                                     # create / drop index
                token = lay.index.unpack_dict(data, b)["index_token"]
                verb = "CREATE" if kk == O + L.DOM_CREATE_INDEX else "DROP"
                text = f"{verb} INDEX (index token {token}) ON {name}"
            texts.append(text)
            ops.append(op)
            schemas.append(table.schema if table else None)
            names.append(table.name if table else None)
        self._emit("change", good, trx_order=_POSITION, op=pa.array(ops, pa.string()),
                   table_id=pa.array(tables, pa.string()),
                   schema_name=pa.array(schemas, pa.string()),
                   table_name=pa.array(names, pa.string()), ddl=pa.array(texts, pa.string()))
        return took

    def _controls(self, idx, key, body, ends, f, careful) -> None:
        """DMS 124/128 and DOM 35 in normal records: control rows naming the table."""
        if not len(idx):
            return
        lay = self.lay
        k = key[idx]
        size = np.select([k == L.COMPONENT_DMS * 256 + L.DMS_ALTER_ATTRIBUTE,
                          k == L.COMPONENT_DMS * 256 + L.DMS_INIT_TABLE],
                         [lay.alter_attribute.size, lay.init_table.size], lay.reorg.size)
        ok = body[idx] + size <= ends[idx]
        careful[idx[~ok]] = True
        good = idx[ok]
        if len(good):
            names = {c * 256 + fn: name for (c, fn), name in self.v.control_functions.items()}
            self._emit("control", good, rule=pa.array([names[x] for x in key[good].tolist()]),
                       table_id=f.table_ids(good))

    def _undo_plan(self, data, idx, compensation, key, body, ends, f, careful) -> np.ndarray:
        """Undo and compensation records whose body is well formed: what each undoes (its
        resolution happens in the ordered pass); the others go the careful path."""
        v, lay = self.v, self.lay
        took = np.zeros(len(body), dtype=bool)
        self.plan, self.plan_rule = {}, {}
        if not len(idx):
            return took
        undo_of_key = {c * 256 + fn: w for (c, fn), w in v.undoes.items()}
        comp_of_key = {c * 256 + fn: w for (c, fn), w in v.compensates.items()}
        rid_funcs = {*v.row_functions, L.DMS_UNDO_DELETE, L.DMS_UNDO_UPDATE, *v.undo_insert_ids}
        if v is L.V10:
            rid_funcs.add(L.V10_UNDO_DELETE_EMPTY)
        keys = key[idx].tolist()
        comps = compensation[idx].tolist()
        bodies, record_ends = body[idx].tolist(), ends[idx].tolist()
        rids = f.rid_values(idx)
        tables = f.table_ids(idx).to_pylist()
        rec0 = (self.offsets[idx] - self.ctx.offset + v.prefix_size).tolist()
        for k, i in enumerate(idx.tolist()):
            kk = keys[k]
            c, fn = kk >> 8, kk & 0xFF
            is_comp = comps[k] and kk in comp_of_key
            if c == L.COMPONENT_DMS:
                if fn in v.undo_insert_ids:
                    size = lay.undo_insert.size
                elif fn in rid_funcs:
                    size = lay.row_of(fn).size
                else:
                    size = lay.dms.size
                fname = L.DMS_FUNCTIONS[fn]
            else:
                size = lay.dom.size
                fname = L.DOM_FUNCTIONS[fn]
            if bodies[k] + size > record_ends[k]:
                careful[i] = True
                continue
            undo_next = compensated = None
            if comps[k]:
                r = rec0[k]
                if v is L.V7:
                    undo_next = data[r + 20:r + 26]
                    if bodies[k] - r == v.prop_comp_size:
                        compensated = data[r + 26:r + 32]
            rid = rids[k] if c == L.COMPONENT_DMS and fn in rid_funcs else None
            want = comp_of_key[kk] if is_comp else undo_of_key[kk]
            self.plan[i] = (want, tables[k], rid, undo_next, compensated)
            self.plan_rule[i] = ("compensation_" if is_comp else "") + fname
            took[i] = True
        return took

    # ------------------------------------------------------------- fast paths
    def _emit(self, kind: str, idx: np.ndarray, **columns) -> None:
        take = pa.array(idx)
        pos = self.pos_hex.take(take)
        self.sink.add_columns(kind, self.offsets[idx], self.rec_index[idx], 1,
                              n_bytes=self.lengths[idx], trx_id=self.trx_hex.take(take),
                              position=pos, **{k: (pos if c is _POSITION else c)
                                               for k, c in columns.items()})

    def _simple(self, kind: str, idx: np.ndarray, **columns) -> None:
        if len(idx):
            self._emit(kind, idx, **columns)

    def _skip_rules(self, rtype: np.ndarray) -> pa.Array:
        if self.v is L.V7:
            names = [f"db2luw_record_type_{chr(c)}" for c in rtype.tolist()]
        else:
            names = [f"db2luw_record_type_{L.V10_TYPE_NAMES.get(c, f'0x{c:04X}')}"
                     for c in rtype.tolist()]
        return pa.array(names, pa.string())

    def _commits(self, buf, idx, body, ends, flags, rtype, careful) -> np.ndarray:
        """Commit rows (v10: also local pending lists); returns the mask of records taken."""
        v = self.v
        took = np.zeros(len(body), dtype=bool)
        if not len(idx):
            return took
        b, e = body[idx], ends[idx]
        if v is L.V7:
            ok = b + 4 <= e
            secs = self.lay.commit.gather(buf, np.where(ok, b, 0))["time_committed"].astype(np.int64)
            a_start, a_len = b + 4, e - b - 4
        else:
            prop = (flags[idx] & L.FLAG_PROPAGATABLE) != 0
            ok = b + L.COMMIT_V10_BASIC <= e
            u8 = np.dtype(("<" if self.byte_order == "little" else ">") + "u8")
            secs = gather(buf, np.where(ok, b, 0), u8).astype(np.uint64)
            ok &= secs <= MAX_EPOCH_SECONDS
            secs = np.where(ok, secs, 0).astype(np.int64)
            ok &= ~prop | (b + 10 <= e)
            alen = np.zeros(len(idx), dtype=np.int64)
            ip = np.flatnonzero(ok & prop)
            if len(ip):
                alen[ip] = self.lay.commit.gather(buf, b[ip])["len_authid"]
            ok &= b + 10 + alen <= e
            a_start, a_len = b + 10, np.where(prop, alen, 0)
        a_len = np.where(ok, np.maximum(a_len, 0), 0)
        users, ubad = self._authids(buf, a_start, a_len)
        ok &= ~ubad
        careful[idx[~ok]] = True
        good = idx[ok]
        took[good] = True
        if len(good):
            sel = pa.array(np.flatnonzero(ok))
            ts = pa.array(secs[ok] * _US, pa.timestamp("us", tz="UTC"))
            rule = None
            if v is L.V10:
                pend = rtype[good] == v.PENDING_LIST
                if pend.any():
                    rule = pa.array(np.where(pend, "local_pending_list", None).tolist(), pa.string())
            self._emit("commit", good, trx_end="commit", commit_position=_POSITION,
                       commit_ts=ts, user=users.take(sel), rule=rule)
        return took

    def _authids(self, buf, start, length):
        """Authids (trailing blanks and NULs trimmed) and the rows the careful path must read."""
        n = len(start)
        raw, offsets = V._flat(buf, start, length)
        keep = (raw != 0x20) & (raw != 0x00)
        pos_in = np.arange(len(raw), dtype=np.int64) - np.repeat(offsets[:-1], length)
        last = np.zeros(n, dtype=np.int64)
        nonempty = np.flatnonzero(length > 0)
        if len(nonempty):        # segments of the non-empty rows only: each ends where it should
            marks = np.where(keep, pos_in + 1, 0)
            last[nonempty] = np.maximum.reduceat(marks, offsets[:-1][nonempty])
        bad = np.zeros(n, dtype=bool)
        if codec_problem(self.codepage) is not None:
            return pa.nulls(n, pa.string()), last > 0
        text, tbad = V.text(buf, start, last, self.codepage)
        bad |= tbad
        text = pc.if_else(pa.array(last == 0), pa.nulls(n, pa.string()), text)
        return text, bad

    def _rows(self, buf, idx, body, ends, func, fields):
        """Inserts, deletes and updates of catalog tables; returns (mask of records taken,
        indices of records for the careful path)."""
        v, lay = self.v, self.lay
        n_all = len(body)
        took = np.zeros(n_all, dtype=bool)
        if not len(idx):
            return took, idx
        b, e, f = body[idx], ends[idx], func[idx]
        size = np.zeros(len(idx), dtype=np.int64)
        for fn, rl in lay.rows.items():
            size[f == fn] = rl.size
        ok = b + size <= e
        key = fields.dms_key[idx]
        fail = [idx[~ok]]
        keys, inverse = np.unique(np.where(ok, key, -1), return_inverse=True)
        for k_i, k in enumerate(keys.tolist()):
            if k < 0:
                continue
            sel = np.flatnonzero(inverse == k_i)
            table_id = f"{k >> 16}.{k & 0xFFFF}"
            batch = self._batch(table_id)
            if batch is None:
                fail.append(idx[sel])
                continue
            self.fields = fields
            got = self._table_rows(buf, batch, table_id, idx[sel], b[sel], e[sel], f[sel],
                                   size[sel])
            took[idx[sel][got]] = True
            fail.append(idx[sel][~got])
        return took, np.concatenate(fail)

    def _batch(self, table_id: str) -> RowBatch | None:
        if table_id not in self.batches:
            table = self.catalog.table(table_id)
            self.batches[table_id] = None if table is None else \
                RowBatch(table, self.byte_order, self.codepage)
        return self.batches[table_id]

    def _images(self, buf, start, limit, fixed_size):
        """Checks of the row images whose record header is at ``start`` (ending by
        ``limit``): (ok, fixed section start, fixed length, image end)."""
        ok = start + 8 <= limit
        h = self.lay.image_header.gather(buf, np.where(ok, start, 0))
        rlen = h["len_record"].astype(np.int64)
        fixed_len = h["len_fixed"].astype(np.int64)
        end = start + rlen
        ok &= (rlen >= 8) & (end <= limit)
        ok &= np.isin(h["record_type"], list(L.USER_RECORD_TYPES)) & \
            (h["fud_type"] == L.FORMATTED_USER_DATA)
        ok &= (start + 8 + fixed_len <= end) & (fixed_len >= fixed_size)
        return ok, start + 8, fixed_len, end

    def _table_rows(self, buf, batch: RowBatch, table_id, idx, b, e, f, size) -> np.ndarray:
        """Decode the row changes ``idx`` of one table; returns the mask of those taken."""
        v, lay = self.v, self.lay
        first = b + size
        ok1, fx1, fl1, end1 = self._images(buf, first, e, batch.fixed_size)
        upd = f == v.UPDATE
        second = end1 + lay.row.size
        ok2 = ok1 & upd & (second <= e)
        at = np.where(ok2, end1, 0)
        ok2 &= (buf[at] == L.COMPONENT_DMS) & (buf[np.minimum(at + 1, len(buf) - 1)] == v.UPDATE)
        ok2b, fx2, fl2, end2 = self._images(buf, np.where(ok2, second, 0), e, batch.fixed_size)
        ok2 &= ok2b
        ok = ok1 & (~upd | ok2)
        # one batch of images: first images by op (c, d, u), then the updates' new images
        ops = np.select([upd, np.isin(f, self.insert_functions)], [2, 0], 1)
        groups = [np.flatnonzero(ok & (ops == o)) for o in (0, 1, 2)]
        parts = groups + [groups[2]]
        fixed = np.concatenate([fx1[g] for g in groups] + [fx2[groups[2]]])
        fixed_len = np.concatenate([fl1[g] for g in groups] + [fl2[groups[2]]])
        img_end = np.concatenate([end1[g] for g in groups] + [end2[groups[2]]])
        if not len(fixed):
            return ok
        json, bad = batch.decode(buf, fixed, fixed_len, img_end)
        bounds = np.cumsum([0] + [len(g) for g in parts])
        if bad.any():
            for k, g in enumerate(parts):
                ok[g[bad[bounds[k]:bounds[k + 1]]]] = False
        table = batch.table
        for o, op in enumerate(("c", "d", "u")):
            g = groups[o]
            if not len(g):
                continue
            one = json.slice(bounds[o], len(g))
            two = json.slice(bounds[3], len(g)) if op == "u" else None
            keep = ok[g]
            if not keep.all():
                mask = pa.array(keep)
                one = one.filter(mask)
                two = two.filter(mask) if two is not None else None
                g = g[keep]
                if not len(g):
                    continue
            before, after = {"c": (None, one), "d": (one, None), "u": (one, two)}[op]
            self._emit("change", idx[g], trx_order=_POSITION, op=op, table_id=table_id,
                       schema_name=table.schema, table_name=table.name,
                       row_id=self.fields.rid_hex(idx[g]), before=before, after=after)
        return ok


class _Fields:
    """Fields every DMS/DOM body has at fixed places, for all records at once: the table
    (DMS: @2/@4; DOM: @6/@8) and the RID of row records (V7 sqlint32 @8, v10 6 bytes @12)."""

    def __init__(self, dec: "Decoder", buf, body, ends, comp) -> None:
        lay, v = dec.lay, dec.v
        self.v = v
        dms_ok = (comp == L.COMPONENT_DMS) & (body + lay.dms.size <= ends)
        dom_ok = (comp == L.COMPONENT_DOM) & (body + lay.dom.size <= ends)
        dms = lay.dms.gather(buf, np.where(dms_ok, body, 0))
        dom = lay.dom.gather(buf, np.where(dom_ok, body, 0))
        ts = np.where(dom_ok, dom["tablespace_id"], dms["tablespace_id"]).astype(np.int64)
        tb = np.where(dom_ok, dom["table_id"], dms["table_id"]).astype(np.int64)
        self.dms_key = ts * 65536 + tb
        self.ts, self.tb = ts, tb
        rid_field = lay.row.by_name["rid"]
        at = body + rid_field.offset
        rid_ok = at + rid_field.size <= ends
        self.rid = gather(buf, np.where(rid_ok, at, 0), _field_dtype(lay.row, "rid"))["rid"]

    def table_ids(self, idx) -> pa.Array:
        return concat_text(pa.array(self.ts[idx]).cast(pa.string()), pa.scalar("."),
                           pa.array(self.tb[idx]).cast(pa.string()))

    def dms_tables(self, idx) -> list:
        """``<tablespace>.<table>`` of the records ``idx`` (one text per distinct table)."""
        _, first, inv = np.unique(self.dms_key[idx], return_index=True, return_inverse=True)
        names = [f"{a}.{b}" for a, b in zip(self.ts[idx][first].tolist(),
                                             self.tb[idx][first].tolist())]
        return [names[j] for j in inv.reshape(-1).tolist()]

    def rid_values(self, idx) -> list:
        """RIDs as the careful path reads them: V7 int, v10 bytes."""
        if self.v is L.V7:
            return self.rid[idx].tolist()
        return [bytes(r) for r in self.rid[idx]]

    def rid_hex(self, idx) -> pa.Array:
        if self.v is L.V7:
            return hex_ints(self.rid[idx].astype(np.int64) & 0xFFFFFFFF, 8)
        return hex_bytes(self.rid[idx])


def _field_dtype(layout: L.Layout, name: str) -> np.dtype:
    """A one-field record dtype of ``name`` alone (gathered at the field's own offset)."""
    f = layout.by_name[name]
    return np.dtype({"names": [name], "formats": [f.numpy_format(layout.byte_order)],
                     "offsets": [0], "itemsize": f.size})


_POSITION = object()         # an ``_emit`` column: the record's position
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _undo_keys(v: L.Variant) -> list[int]:
    return [c * 256 + f for c, f in v.undoes]


def split(data: bytes, ctx: DecodeContext, target_bytes: int) -> list[dict]:
    """Byte ranges (``start``, ``end``, ``index`` = record_index of the first record) covering
    the archive, about ``target_bytes`` each, cut only at record starts where decoding can
    start on its own: never inside a transaction that has undo records in the archive
    (between its first record and its last undo record), never next to damage. Decoding a
    range (``ctx.offset``/``ctx.index`` set) gives exactly that range's rows of the whole
    archive's decode."""
    return Decoder(ctx, EventSink(ctx.source, ctx.format, ctx.archive)).split(data, target_bytes)


def decode(data: bytes, ctx: DecodeContext, sink: EventSink) -> None:
    """Decode one Db2 LUW archive into ``sink`` (one row per record read)."""
    # the collector paused while the archive decodes: the undo state holds a Python object
    # per change of the transactions that undo (~200k at 1M changes), and every full
    # collection would walk them all again (~40 % of the ordered pass)
    paused = gc.isenabled()
    if paused:
        gc.disable()
    dec = Decoder(ctx, sink)
    try:
        with decimal.localcontext() as dctx:     # DECIMAL(31): exact, whatever the caller's context
            dctx.prec = 64
            dec.run(data)
    finally:
        # the careful path's state is in reference cycles (its handlers are bound methods):
        # freed here, not by the next full collection walking it (~0.1 s at 1M)
        dec.careful.trxs.clear()
        if paused:
            gc.enable()
    return None
