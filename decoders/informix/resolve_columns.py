"""``resolve.resolve_stream`` by column: the ordering job's Informix transaction step on Arrow
batches, the common case with numpy, the rest through the per-row rules unchanged.

The input is the stream ``resolve_stream`` reads (one partition's rows sorted by source,
xid, file, record), as Arrow record batches. It is cut into *pieces* where the per-row
machine forgets what came before: where a (source, xid) key starts, at a BEGIN that opens
a transaction (``from_state`` false, position set) and at a state row held from an earlier
night (both replace the open transaction; the machine flushes what it held). A piece is
therefore resolved on its own; only the key's last piece writes the open transaction's
state row (``end_of_xid``).

A piece is *fast* when it holds nothing but rows the machine passes through unchanged
(held rows of earlier nights, system records) and, if any other row, starts with a BEGIN
row that decoded (kind ``begin``) followed by decoded records (no quarantine row) of known
role, every one linking to the record before it, none after the transaction's COMMIT or
ROLLBACK, no ``unknown_table`` flag, every home-row change with its table and row id, every
remainder record with a home-row change to fold into. Those pieces are assigned with numpy
(segments, shifted arrays, cumulative maxima; the CLR stacks with ``chains.py``'s depth
matching) and their rows built as Arrow columns; the state row of a transaction left open
is built per transaction (its JSON), never per record. Every other piece (broken chains,
quarantined records, records outside a transaction, carried state, unknown tables,
remainders without a change) goes, whole, through ``resolve._Machine``: the same rows, the
same errors (archive, offset, class) as before.

Memory: batches are gathered to about ``CHUNK_ROWS`` rows; a chunk is resolved up to its
last cut and the rows from there (one piece: at most one transaction's records) wait for
the next batches.
"""

from __future__ import annotations

import json
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import layout as L
from . import resolve as RS
from .layout import (R_BEGIN, R_CLR, R_COMMIT, R_DDL, R_HOME, R_REMAINDER, R_ROLLBACK, R_SYSTEM,
                     R_UNKNOWN)

CHUNK_ROWS = 65536

# kinds of the rows a fast piece writes
_KINDS = ("begin", "commit", "abort", "undo", "control", "change")
K_BEGIN, K_COMMIT, K_ABORT, K_UNDO, K_CONTROL, K_CHANGE = range(len(_KINDS))
# the columns every resolved row keeps from its record (``resolve._base``)
_BASE = ("source", "format", "archive_file", "record_offset", "record_index", "n_records",
         "n_bytes", "from_state")


# ----------------------------------------------------------------- column helpers

def _codes(arr: pa.Array) -> tuple[np.ndarray, list]:
    """Dictionary codes of a column (-1 for null) and its distinct values."""
    enc = pc.dictionary_encode(arr)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    idx = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    return idx, enc.dictionary.to_pylist()


def _bools(arr: pa.Array) -> np.ndarray:
    return np.asarray(arr.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)


def _ints(arr: pa.Array, fill: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(values with nulls as ``fill``, valid mask)."""
    valid = _bools(arr.is_valid())
    return np.asarray(arr.fill_null(fill).to_numpy(zero_copy_only=False), dtype=np.int64), valid


_HEX = np.full(256, 255, dtype=np.uint8)
for _c in b"0123456789":
    _HEX[_c] = _c - 48
for _c in b"abcdef":
    _HEX[_c] = _c - 87
    _HEX[_c - 32] = _c - 87


def _addrs(position: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``resolve.addr_of`` of every position of 16 hex digits: (addr, ok); any other
    position (null, another length, not hex) is not ok (the per-row rules take it)."""
    n = len(position)
    arr = position.cast(pa.large_string()) if position.type != pa.large_string() else position
    bufs = arr.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset:arr.offset + n + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None and n else \
        np.zeros(0, np.uint8)
    valid = _bools(arr.is_valid())
    ok = valid & (np.diff(offsets) == 16)
    addr = np.zeros(n, dtype=np.int64)
    at = np.flatnonzero(ok)
    if len(at):
        digits = _HEX[data[offsets[at][:, None] + np.arange(8, 16)]]
        good = (digits != 255).all(axis=1)
        shifts = np.arange(28, -1, -4, dtype=np.int64)
        addr[at] = (digits.astype(np.int64) << shifts).sum(axis=1)
        ok[at[~good]] = False
        addr[at[~good]] = 0
    return addr, ok


def _strings(values: list, idx: np.ndarray, valid: np.ndarray) -> pa.Array:
    """``values[idx]`` where valid, null elsewhere."""
    return pc.take(pa.array(values, pa.string()),
                   pa.array(np.where(valid, idx, 0), mask=~valid))


def _take(col: pa.Array, idx: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """``col[idx]`` (null where not valid)."""
    if valid is None:
        return pc.take(col, pa.array(idx))
    return pc.take(col, pa.array(np.where(valid, idx, 0), mask=~valid))


def _last_before(mask: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Position of the last ``mask`` element strictly before each element, at or after its
    run's ``start``; -1 if none."""
    n = len(mask)
    if not n:
        return np.zeros(0, np.int64)
    k = np.arange(n)
    pos = np.maximum.accumulate(np.where(mask, k, -1))
    before = np.concatenate(([-1], pos[:-1]))
    return np.where(before >= start, before, -1)


# ----------------------------------------------------------------- one chunk

class _Folds:
    """Folds of the records of fast pieces (compact arrays, in stream order): the last
    home-row change before a record is its fold unless a CLR or DDL record came between;
    an HUPAFT whose last candidate (home-row, CLR or DDL record) is an HUPBEF of the same
    table and row folds into it; a remainder record folds into its fold."""

    def __init__(self, ti, run, r, t_code, rtypes, tb, rw) -> None:
        M = self.M = len(ti)
        self.run, self.r, self.t_code = run, r, t_code
        rstart_c = np.zeros(M, dtype=np.int64)       # compact index of the run's first
        if M:
            rf = np.ones(M, dtype=bool)
            rf[1:] = run[1:] != run[:-1]
            rstart_c = np.maximum.accumulate(np.where(rf, np.arange(M), 0))
        self.rstart_c = rstart_c
        self.is_hupbef = np.isin(t_code, [i for i, t in enumerate(rtypes) if t == L.UPDATE_BEFORE])
        is_hupaft = np.isin(t_code, [i for i, t in enumerate(rtypes) if t == L.UPDATE_AFTER])
        is_home = self.is_home = r == R_HOME
        cand = is_home | (r == R_DDL) | (r == R_CLR)
        pcand = self.pcand = _last_before(cand, rstart_c)
        pcs = np.maximum(pcand, 0)
        self.folded_aft = is_hupaft & (pcand >= 0) & is_home[pcs] & self.is_hupbef[pcs] \
            & (tb[pcs] == tb) & (rw[pcs] == rw)
        self.setter = cand & ~self.folded_aft
        pset = self.pset = _last_before(self.setter, rstart_c)
        self.has_fold = (pset >= 0) & is_home[np.maximum(pset, 0)]
        self.remainder = r == R_REMAINDER
        self.orphan = self.remainder & ~self.has_fold


class _Chunk:
    """A table of the sorted stream and its facts as numpy columns."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.schema = table.schema
        n = self.n = table.num_rows
        col = self.col = {name: table.column(name).combine_chunks() for name in table.column_names}
        src, _ = _codes(col["source"])
        xid, _ = _ints(col["xid"])
        key_start = np.ones(n, dtype=bool)
        if n:
            key_start[1:] = (src[1:] != src[:-1]) | (xid[1:] != xid[:-1])
        self.xid, self.key_start = xid, key_start
        fs = _bools(col["from_state"]) if "from_state" in col else np.zeros(n, dtype=bool)
        kind, kinds = _codes(col["kind"])
        rule, rules = _codes(col["rule"])
        kcode = {v: i for i, v in enumerate(kinds)}
        rcode = {v: i for i, v in enumerate(rules)}
        self.kind = kind
        self.kinds = kinds
        is_state = fs & (kind == kcode.get("control", -2)) & (rule == rcode.get(RS.STATE_RULE, -2))
        rt, rtypes = _codes(col["record_type"])
        role_of = np.array([L.role(t) for t in rtypes] + [R_UNKNOWN], dtype=np.int8)
        self.role = role_of[rt]                      # code -1 (null) -> the last: unknown
        self.rtypes, self.rt = rtypes, rt
        self.addr, self.addr_ok = _addrs(col["position"])
        pos_valid = _bools(col["position"].is_valid())
        self.passthru = (fs & ~is_state) | (~fs & (self.role == R_SYSTEM))
        self.begin_cut = ~fs & (self.role == R_BEGIN) & pos_valid
        self.cut = key_start | self.begin_cut | is_state
        self.is_state = is_state
        self.fs = fs
        self.quarantine = kind == kcode.get("quarantine", -2)

    def last_cut(self) -> int:
        cuts = np.flatnonzero(self.cut)
        return int(cuts[-1]) if len(cuts) else 0

    # -- resolve rows [0, m): the rows from m on start a piece (m == n: the stream's end)
    def resolve(self, m: int, tail_ends_key: bool) -> Iterator[pa.RecordBatch]:
        if not m:
            return
        cut = self.cut[:m]
        pstart = np.flatnonzero(cut)
        piece = np.cumsum(cut) - 1
        pend = np.append(pstart[1:], m)
        ends_key = np.append(self.key_start[pend[:-1]], tail_ends_key) if len(pend) else pend
        trx = ~self.passthru[:m] & ~self.is_state[:m]
        np_ = len(pstart)
        has_trx = np.bincount(piece[trx], minlength=np_) > 0
        first = pstart
        role = self.role[:m]
        clean_begin = self.begin_cut[first] & (self.kind[first] == self._kind_code("begin"))
        # pieces that may be fast: only passed-through rows, or a decoded BEGIN first and
        # no state row (a state row is a cut: it can only be a piece's first row)
        maybe = ~self.is_state[first] & (~has_trx | clean_begin)
        col = self.col
        n_rec, n_rec_ok = _ints(col["n_records"])
        link, link_ok = _ints(col["link"], -1)
        flag_unknown = _bools(pc.equal(col["flag"], RS.UNKNOWN_TABLE_FLAG))
        tbl, _ = _codes(col["table_id"])
        row, _ = _codes(col["row_id"])
        arch, archives = _codes(col["archive_file"])
        # record-level reasons for the per-row rules
        prev_trx = _last_before(trx, pstart[piece])
        is_end = trx & ((role == R_COMMIT) | (role == R_ROLLBACK))
        end_before = _last_before(is_end, pstart[piece])
        odd = trx & ~self.begin_cut[:m] & (
            self.quarantine[:m] | (role == R_UNKNOWN) | (role == R_BEGIN)
            | (end_before >= 0) | ~self.addr_ok[:m] | ~n_rec_ok[:m] | flag_unknown[:m]
            | ~link_ok[:m] | (prev_trx < 0)
            | (link[:m] != np.where(prev_trx >= 0, self.addr[np.maximum(prev_trx, 0)], -1))
            | ((role == R_HOME) & ((tbl[:m] < 0) | (row[:m] < 0))))
        bad_piece = ~maybe
        bad_piece[piece[odd]] = True

        # -- folds, over the records of the pieces still fast (compact arrays); a piece
        # with a remainder record that has nothing to fold into leaves, and the rest is
        # computed again (pieces are independent)
        while True:
            ti = np.flatnonzero(trx & ~bad_piece[piece])
            f = _Folds(ti, piece[ti], role[ti], self.rt[ti], self.rtypes, tbl[ti], row[ti])
            if not f.orphan.any():
                break
            bad_piece[f.run[f.orphan]] = True
        run, M, r, rstart_c = f.run, f.M, f.r, f.rstart_c
        is_hupbef, is_home, t_code = f.is_hupbef, f.is_home, f.t_code
        folded_aft, setter, has_fold, remainder = f.folded_aft, f.setter, f.has_fold, f.remainder
        pcand, pset = f.pcand, f.pset
        folded = folded_aft | (remainder & has_fold)
        target = np.where(folded_aft, pcand, pset)           # compact index of the owner
        tgt = np.maximum(target, 0)
        rows_i = ti                                           # chunk row of each record
        same_arch = arch[rows_i[tgt]] == arch[rows_i]
        into = folded & same_arch
        earlier = folded & ~same_arch
        # a record folded into a change of its archive has no row: its records and bytes
        # count in the change's
        n_out = n_rec[rows_i].copy()
        nb, _ = _ints(col["n_bytes"])
        nb_out = nb[rows_i].copy()
        if into.any():
            n_out += np.bincount(tgt[into], weights=n_rec[rows_i][into], minlength=M)[:M] \
                .astype(np.int64)
            nb_out += np.bincount(tgt[into], weights=nb_out[into], minlength=M)[:M] \
                .astype(np.int64)
        owner = np.where(folded, tgt, np.arange(M))           # what a push refers to

        # -- CLR stacks
        is_end_c = (r == R_COMMIT) | (r == R_ROLLBACK)
        pushes = (r != R_BEGIN) & ~is_end_c & (r != R_CLR)
        pops = r == R_CLR
        undo_of = np.full(M, -1, dtype=np.int64)             # compact index of the owner
        unmatched = pushes.copy()
        ev = np.flatnonzero(pushes | pops)
        if len(ev):
            erun = run[ev]
            efirst = np.ones(len(ev), dtype=bool)
            efirst[1:] = erun[1:] != erun[:-1]
            eid = np.cumsum(efirst) - 1
            delta = np.where(pushes[ev], 1, -1).astype(np.int64)
            c = np.cumsum(delta)
            base = (c - delta)[efirst][eid]
            s = c - base
            big = 2 * (len(ev) + 1)
            mins = np.minimum.accumulate(s - eid * big) + eid * big
            depth = s - np.minimum(mins, 0)
            before = np.concatenate(([0], depth[:-1]))
            before[efirst] = 0
            ev_push = pushes[ev]
            eff_pop = ~ev_push & (before > 0)
            level = np.where(ev_push, depth, before)
            part = np.flatnonzero(ev_push | eff_pop)
            o = np.lexsort((part, level[part], eid[part]))
            seq = part[o]
            pop_at = np.flatnonzero(eff_pop[seq])
            if len(pop_at):
                pu = seq[pop_at - 1]
                po = seq[pop_at]
                undo_of[ev[po]] = owner[ev[pu]]
                unmatched[ev[pu]] = False

        # -- the transaction of each record: its BEGIN (the run's first record)
        begin_c = rstart_c
        b_rows = rows_i[begin_c]
        uniq = [str(RS.uniqid_of_archive(a)) for a in archives] + ["-1"]
        first_of_run = np.flatnonzero(begin_c == np.arange(M))
        fb = rows_i[first_of_run]
        trx_ids_b = pc.binary_join_element_wise(
            _strings(uniq, np.where(arch[fb] >= 0, arch[fb], len(archives)), np.ones(len(fb), bool)),
            _hex_text(self.addr[fb]), ":")
        run_no = np.cumsum(begin_c == np.arange(M)) - 1      # run of each record, 0..
        trx_id = pc.take(trx_ids_b, pa.array(run_no)) if M else pa.array([], pa.string())

        # -- rows of fast records
        kind = np.full(M, K_CONTROL, dtype=np.int8)
        kind[r == R_BEGIN] = K_BEGIN
        kind[r == R_COMMIT] = K_COMMIT
        kind[r == R_ROLLBACK] = K_ABORT
        has_undo = pops & (undo_of >= 0)
        kind[has_undo] = K_UNDO
        change = ~folded & (is_home | (r == R_DDL))
        kind[change] = K_CHANGE
        # rules of control rows: rtype.lower(), clr_without_work, remainder_of_earlier_file
        rules = [t.lower() if t is not None else None for t in self.rtypes] + \
            ["clr_without_work", "remainder_of_earlier_file"]
        rule_i = t_code.copy()
        rule_i[pops & ~has_undo] = len(self.rtypes)
        rule_i[earlier] = len(self.rtypes) + 1
        rule_valid = (kind == K_CONTROL)
        pos = col["position"]
        fast_batch = self._fast_rows(rows_i, kind, n_out, nb_out, rule_i, rule_valid, rules,
                                     trx_id, r, change, is_home, has_undo, undo_of, b_rows, pos)
        if into.any():
            fast_batch = fast_batch.filter(pa.array(~into))
        out = [fast_batch]

        # -- state rows of the transactions left open at their key's end
        run_last = np.append(np.flatnonzero(np.diff(run_no)) if M else [], M - 1).astype(np.int64) \
            if M else np.zeros(0, np.int64)
        if M:
            rp = run[run_last]
            open_ = ~is_end_c[run_last] & ends_key[rp]
            if open_.any():
                out.append(self._state_rows(run_last[open_], rows_i, begin_c, trx_id, unmatched,
                                            owner, setter, is_home, is_hupbef, folded_aft,
                                            target, run_no, pos))
        # -- rows passed through by fast pieces
        pt = np.flatnonzero(self.passthru[:m] & ~bad_piece[piece])
        if len(pt):
            out.append(self.table.take(pa.array(pt)).combine_chunks().to_batches()[0]
                       if len(pt) else None)
        for b in out:
            if b is not None and b.num_rows:
                yield b
        # -- the other pieces through the per-row rules
        slow = np.flatnonzero(bad_piece)
        if len(slow):
            yield from self._slow(pstart[slow], pend[slow], ends_key[slow])

    def _kind_code(self, name: str) -> int:
        try:
            return self.kinds.index(name)
        except ValueError:
            return -2

    def _fast_rows(self, rows_i, kind, n_out, nb_out, rule_i, rule_valid, rules, trx_id, r,
                   change, is_home, has_undo, undo_of, b_rows, pos) -> pa.RecordBatch:
        M = len(rows_i)
        col = self.col
        arrays = []
        is_commit = kind == K_COMMIT
        for field in self.schema:
            name = field.name
            if name == "n_records":
                a = pa.array(n_out.astype(np.int64)).cast(field.type)
            elif name == "n_bytes":
                a = pa.array(nb_out, mask=~_bools(col[name].is_valid())[rows_i]).cast(field.type)
            elif name in _BASE:
                a = _take(col[name], rows_i)
            elif name == "kind":
                a = _strings(list(_KINDS), kind.astype(np.int64), np.ones(M, dtype=bool))
            elif name == "rule":
                a = _strings(rules, rule_i, rule_valid)
            elif name == "trx_id":
                a = trx_id
            elif name == "position":
                a = _take(pos, rows_i)
            elif name == "trx_order":
                a = _take(pos, rows_i, change)
            elif name == "trx_end":
                a = _strings(["commit", "abort"], np.where(is_commit, 0, 1),
                             is_commit | (kind == K_ABORT))
            elif name == "commit_position":
                a = _take(pos, rows_i, is_commit)
            elif name == "commit_ts":
                a = _take(col[name], rows_i, is_commit)
            elif name == "user":
                a = _take(col[name], b_rows, (kind == K_BEGIN) | is_commit)
            elif name in ("op", "table_id", "schema_name", "table_name"):
                a = _take(col[name], rows_i, change)
            elif name == "row_id":
                a = _take(col[name], rows_i, change & is_home)
            elif name == "ddl":
                a = _take(col[name], rows_i, change & ~is_home)
            elif name == "undo_of":
                a = _take(pos, rows_i[np.maximum(undo_of, 0)], has_undo)
            else:
                a = pa.nulls(M, field.type)
            arrays.append(a.cast(field.type) if a.type != field.type else a)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _state_rows(self, last, rows_i, begin_c, trx_id, unmatched, owner, setter, is_home,
                    is_hupbef, folded_aft, target, run_no, pos) -> pa.RecordBatch:
        """One state row per transaction left open (``resolve._Machine.end_of_xid``)."""
        col = self.col
        at = rows_i[last]                      # the row the transaction was last seen at
        runs = run_no[last]
        users = _take(col["user"], rows_i[begin_c[last]]).to_pylist()
        ids = pc.take(trx_id, pa.array(last)).to_pylist()
        positions = pos
        # the stacks left: unmatched pushes of these runs, in push order
        want = np.zeros(int(run_no[-1]) + 1, dtype=bool)
        want[runs] = True
        left = np.flatnonzero(unmatched & want[run_no])
        left_pos = _take(positions, rows_i[owner[left]]).to_pylist() if len(left) else []
        left_run = run_no[left].tolist()
        stacks: dict[int, list] = {}
        for rr, p in zip(left_run, left_pos):
            stacks.setdefault(rr, []).append(p)
        # the fold at the end: the last setter of the run
        consumed = np.zeros(len(rows_i), dtype=bool)
        fa = np.flatnonzero(folded_aft)
        consumed[target[fa]] = True
        first = begin_c[last]
        messages = []
        for j, f0, rr, trx, user in zip(last.tolist(), first.tolist(), runs.tolist(), ids,
                                        users):
            sp = np.flatnonzero(setter[f0:j + 1])
            fold = None
            if len(sp):
                s = f0 + int(sp[-1])
                if is_home[s]:
                    i = int(rows_i[s])
                    fold = {"owner": positions[i].as_py(),
                            "after": bool(is_hupbef[s] and not consumed[s]),
                            "tbl": int(col["table_id"][i].as_py(), 16),
                            "row": int(col["row_id"][i].as_py(), 16)}
            messages.append(json.dumps({"trx": trx, "user": user, "last": int(self.addr[rows_i[j]]),
                                        "undo": stacks.get(rr, []), "fold": fold}))
        k = len(last)
        arrays = []
        for field in self.schema:
            name = field.name
            if name in ("source", "format", "archive_file", "record_offset", "record_index"):
                a = _take(col[name], at)
            elif name in ("n_records", "n_bytes"):
                a = pa.array(np.zeros(k, np.int64)).cast(field.type)
            elif name == "from_state":
                a = pa.array(np.zeros(k, dtype=bool))
            elif name == "kind":
                a = pa.array(["control"] * k, pa.string())
            elif name == "rule":
                a = pa.array([RS.STATE_RULE] * k, pa.string())
            elif name == "trx_id":
                a = pa.array(ids, pa.string())
            elif name == "message":
                a = pa.array(messages, pa.string())
            elif name == "xid":
                a = pa.array(self.xid[at])
            else:
                a = pa.nulls(k, field.type)
            arrays.append(a.cast(field.type) if a.type != field.type else a)
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _slow(self, starts, ends, ends_key) -> Iterator[pa.RecordBatch]:
        idx = np.concatenate([np.arange(s, e) for s, e in zip(starts.tolist(), ends.tolist())])
        rows = self.table.take(pa.array(idx)).to_pylist()
        machine = RS._Machine()
        i = 0
        for s, e, last in zip(starts.tolist(), ends.tolist(), ends_key.tolist()):
            for row in rows[i:i + e - s]:
                machine.row(row)
            i += e - s
            if last:
                machine.end_of_xid(int(self.xid[s]))
            else:
                machine.close()
        if machine.out:
            yield pa.RecordBatch.from_pylist(machine.out, schema=self.schema)


def _hex_text(v: np.ndarray) -> pa.Array:
    """``format(v, "x")`` of non-negative ints below 2**32."""
    n = len(v)
    if not n:
        return pa.array([], pa.string())
    v = v.astype(np.uint64)
    digits = np.array([(v >> np.uint64(s)) & np.uint64(15) for s in range(28, -1, -4)],
                      dtype=np.uint8).T                      # (n, 8)
    width = np.maximum(8 - np.argmax(digits != 0, axis=1), 1)
    width[(digits == 0).all(axis=1)] = 1
    chars = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)[digits]
    # right-aligned: each value's last ``width`` characters
    start = 8 - width
    keep = np.arange(8)[None, :] >= start[:, None]
    data = chars[keep]
    offsets = np.concatenate(([0], np.cumsum(width))).astype(np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()),
                                       pa.py_buffer(data.tobytes()))


# ----------------------------------------------------------------- the stream

def resolve_batches(batches: Iterable[pa.RecordBatch],
                    chunk_rows: int = CHUNK_ROWS) -> Iterator[pa.RecordBatch]:
    """``resolve.resolve_stream`` on Arrow batches of the sorted stream -> resolved batches
    (the same rows, in another order), holding about ``chunk_rows`` rows plus one open
    piece at a time."""
    pending: list[pa.RecordBatch] = []
    n_pending = 0
    limit = chunk_rows
    for batch in batches:
        if not batch.num_rows:
            continue
        pending.append(batch)
        n_pending += batch.num_rows
        if n_pending < limit:
            continue
        chunk = _Chunk(pa.Table.from_batches(pending))
        cut = chunk.last_cut()
        if cut == 0:                 # one piece longer than a chunk: wait for its end
            limit = 2 * n_pending
            continue
        yield from chunk.resolve(cut, bool(chunk.key_start[cut]))
        rest = chunk.table.slice(cut)
        pending = rest.combine_chunks().to_batches()
        n_pending = rest.num_rows
        limit = max(chunk_rows, 2 * n_pending)
    if n_pending:
        chunk = _Chunk(pa.Table.from_batches(pending))
        yield from chunk.resolve(chunk.n, True)
