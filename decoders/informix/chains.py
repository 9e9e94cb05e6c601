"""Transactions of onlog records, for many records at once (numpy): the rules of
``decoder._Decoder`` (the careful per-record state machine) computed by column.

Records are sorted by (xid, record order); within one xid:

* a BEGIN opens a transaction; every record after it up to and including its COMMIT or
  ROLLBACK belongs to it (the latest BEGIN before the record, if no end came between);
  records of an xid before any BEGIN or end belong to the transaction carried in for that
  xid (if one is open); records after an end and before the next BEGIN are outside any
  transaction. A transaction's records are therefore one contiguous run of the sorted order;
* the link of each record must be the address of the record before it in its run (for the
  first record of a carried-in run: the carried ``last``, unless unknown); a BEGIN links to 0;
* fold: the last home-row record of the run (HINSERT, HDELETE, HUPDATE, HUPBEF, HUPAFT)
  before a record is its *candidate*, reset by DDL and CLR records; an HUPAFT whose
  candidate is an HUPBEF of the same tblspace and rowid folds into it (only the first can:
  a second HUPAFT has the first as its candidate); the *setters* are the candidates minus
  the folded HUPAFTs, and a remainder record folds into the last setter before it;
* undo: every record of the run but BEGIN, COMMIT, ROLLBACK and CLR pushes its owner (its
  own position; for a folded record, the owner of its change); a CLR pops the most recent
  push not popped yet (a pop on an empty stack does nothing: ``clr_without_work``). With
  the stack depth after each event (a cumulative sum reflected at 0), a pop at depth d
  matches the latest push that brought the stack to depth d: within one (run, depth) the
  events alternate push, pop, so each effective pop matches the event before it.

Whatever the careful machine would quarantine (a broken link, a BEGIN with a link, a
remainder without a change before it) is flagged ``anomaly`` here: the caller hands every
record of such an xid to the careful machine instead (xids are independent of each other).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import layout as L
from .columns import TYPE_NAMES
from .layout import (R_BEGIN, R_CLR, R_COMMIT, R_DDL, R_HOME, R_OTHER,  # noqa: F401 (decoder's)
                     R_REMAINDER, R_ROLLBACK, R_SYSTEM)

# the role of each record type (``layout.role``), by type code
ROLE = np.array([L.role(t) for t in TYPE_NAMES], dtype=np.int8)
T_HUPBEF = TYPE_NAMES.index(L.UPDATE_BEFORE)
T_HUPAFT = TYPE_NAMES.index(L.UPDATE_AFTER)

NONE, RESET = -1, -2          # fold pointers: no fold / reset by DDL or CLR


@dataclass
class Chains:
    """Per input record (input order): ``trx`` >= 0 the index of its transaction in
    ``trx_begin`` / ``trx_carry`` (-1: outside any transaction); ``folded``: a remainder or
    HUPAFT counted into an earlier change; ``owner``: what a push (or a fold) refers to
    (>= 0: an input record, < 0: ``-1 - j`` for ``strings[j]``, a position carried in);
    ``n_records`` of the record's row; ``undo``: for a CLR, the owner it compensates
    (``NO_UNDO``: nothing left); ``anomaly``: the careful machine must take this xid."""

    trx: np.ndarray
    trx_begin: np.ndarray          # per transaction: input index of its BEGIN, or -1
    trx_xid: np.ndarray            # per transaction: its xid (carried-in ones: begin -1)
    folded: np.ndarray
    owner: np.ndarray
    n_records: np.ndarray
    undo: np.ndarray
    anomaly: np.ndarray
    strings: list
    state: dict                    # xid -> None (no open transaction) or {"trx_index", "last",
    #                                "undo", "fold"}, for every xid seen


NO_UNDO = np.iinfo(np.int64).min


def resolve(xid: np.ndarray, tcode: np.ndarray, addr: np.ndarray, link: np.ndarray,
            tbl: np.ndarray, row: np.ndarray, carry: dict[int, dict],
            position_of) -> Chains:
    """``position_of(i)``: the position string of input record i (for the carry-out)."""
    n = len(xid)
    xid = xid.astype(np.int64)
    order = np.argsort(xid, kind="stable")
    x = xid[order]
    tc = tcode[order]
    role = ROLE[tc]
    ad = addr[order].astype(np.int64)
    ln = link[order].astype(np.int64)
    tb = tbl[order]
    rw = row[order]
    k = np.arange(n)
    gflag = np.ones(n, dtype=bool)
    gflag[1:] = x[1:] != x[:-1]
    gid = np.cumsum(gflag) - 1
    gstart = np.flatnonzero(gflag)[gid]
    gxids = x[gflag]
    ng = len(gxids)
    carried = [carry.get(int(v)) for v in gxids]
    c_open = np.array([c is not None for c in carried], dtype=bool)

    is_begin = role == R_BEGIN
    is_end = (role == R_COMMIT) | (role == R_ROLLBACK)
    last_b = np.maximum.accumulate(np.where(is_begin, k, -1)) if n else k
    last_e = np.maximum.accumulate(np.where(is_end, k, -1)) if n else k
    last_e_before = np.concatenate(([-1], last_e[:-1])) if n else k
    has_b = last_b >= gstart
    has_e = last_e_before >= gstart
    in_begin = has_b & (~has_e | (last_b > last_e_before))
    in_carry = ~has_b & ~has_e & c_open[gid]
    # transaction per sorted record: BEGIN runs 0..nb-1, carried runs after
    b_pos = np.flatnonzero(is_begin)
    nb = len(b_pos)
    b_index = np.cumsum(is_begin) - 1
    trx = np.where(in_begin, b_index[np.maximum(last_b, 0)] if n else 0,
                   np.where(in_carry, nb + gid, -1))
    intrx = trx >= 0
    run_first = intrx.copy()
    if n:
        run_first[1:] &= trx[1:] != trx[:-1]
    run_start = np.maximum.accumulate(np.where(run_first, k, 0)) if n else k

    # --- link chains
    c_last = np.array([(-1 if c.get("last") is None else int(c["last"])) if c else -1
                       for c in carried], dtype=np.int64)
    prev_addr = np.concatenate(([-1], ad[:-1])) if n else ad
    expected = np.where(run_first, np.where(in_carry, c_last[gid], -1), prev_addr)
    anomaly = intrx & ~is_begin & (expected >= 0) & (ln != expected)
    anomaly |= is_begin & (ln != 0)

    # --- strings carried in: fold owners and undo stacks of carried-in runs
    strings: list[str] = []
    c_fold_owner = np.full(ng, 0, dtype=np.int64)
    c_fold_kind = np.full(ng, NONE, dtype=np.int64)      # NONE or -3 (a carried fold)
    c_fold_after = np.zeros(ng, dtype=bool)
    c_fold_tbl = np.full(ng, -1, dtype=np.int64)
    c_fold_row = np.full(ng, -1, dtype=np.int64)
    virt_runs: list[int] = []          # group of each virtual push
    virt_owner: list[int] = []
    for g, c in enumerate(carried):
        if c is None:
            continue
        f = c.get("fold")
        if f:
            strings.append(f["owner"])
            c_fold_owner[g] = -len(strings)
            c_fold_kind[g] = -3
            c_fold_after[g] = bool(f.get("after"))
            c_fold_tbl[g] = -1 if f.get("tbl") is None else int(f["tbl"])
            c_fold_row[g] = -1 if f.get("row") is None else int(f["row"])
        for u in c.get("undo") or []:
            strings.append(u)
            virt_runs.append(g)
            virt_owner.append(-len(strings))

    # --- fold
    is_home = role == R_HOME
    is_cand = intrx & (is_home | (role == R_DDL) | (role == R_CLR))
    init = np.where(in_carry, c_fold_kind[gid], NONE)      # before the run's first candidate

    def last_before(mask: np.ndarray) -> np.ndarray:
        """Sorted position of the last ``mask`` record strictly before each record in its
        run, or -1."""
        if not n:
            return k
        pos = np.maximum.accumulate(np.where(mask, k, -1))
        before = np.concatenate(([-1], pos[:-1]))
        return np.where(before >= run_start, before, -1)

    pc_pos = last_before(is_cand)
    pc = np.where(pc_pos >= 0, np.where(is_home[np.maximum(pc_pos, 0)], pc_pos, RESET), init)
    hupaft = intrx & (tc == T_HUPAFT)
    pcs = np.maximum(pc, 0)
    fold_rec = (pc >= 0) & (tc[pcs] == T_HUPBEF) & (tb[pcs] == tb) & (rw[pcs] == rw)
    fold_virt = (pc == -3) & c_fold_after[gid] & (c_fold_tbl[gid] == tb.astype(np.int64)) \
        & (c_fold_row[gid] == rw.astype(np.int64))
    folded_aft = hupaft & (fold_rec | fold_virt)
    setter = is_cand & ~folded_aft
    ps_pos = last_before(setter)
    ps = np.where(ps_pos >= 0, np.where(is_home[np.maximum(ps_pos, 0)], ps_pos, RESET), init)
    remainder = intrx & (role == R_REMAINDER)
    anomaly |= remainder & (ps < 0) & (ps != -3)
    folded = folded_aft | (remainder & ((ps >= 0) | (ps == -3)))
    # the owner (sorted position, or a carried string as -1 - j) of each folded record
    target = np.where(folded_aft, pc, ps)
    f_owner = np.where(target >= 0, target, c_fold_owner[gid])
    owner_s = np.where(folded, f_owner, k)           # sorted positions for records; <0 strings

    # rows counted into a change of this file
    into = folded & (target >= 0)
    n_rec = np.ones(n, dtype=np.int64)
    if into.any():
        n_rec += np.bincount(target[into], minlength=n)[:n]

    # --- undo stacks
    pushes = intrx & ~is_begin & ~is_end & (role != R_CLR)
    pops = intrx & (role == R_CLR)
    # events: virtual pushes (carried-in stacks) first in their run, then the records
    v_runs = np.array(virt_runs, dtype=np.int64)
    ev_trx = np.concatenate((nb + v_runs, trx))
    ev_seq = np.concatenate((np.arange(len(v_runs)) - len(v_runs) - 1, k))
    ev_delta = np.concatenate((np.ones(len(v_runs), np.int64),
                               pushes.astype(np.int64) - pops.astype(np.int64)))
    ev_owner = np.concatenate((np.array(virt_owner, dtype=np.int64), owner_s))
    ev_is_push = np.concatenate((np.ones(len(v_runs), bool), pushes))
    ev_is_pop = np.concatenate((np.zeros(len(v_runs), bool), pops))
    keep = ev_trx >= 0
    ev_trx, ev_seq, ev_delta, ev_owner = ev_trx[keep], ev_seq[keep], ev_delta[keep], ev_owner[keep]
    ev_is_push, ev_is_pop = ev_is_push[keep], ev_is_pop[keep]
    ev_rec = np.concatenate((np.full(len(v_runs), -1, np.int64), k))[keep]
    eo = np.lexsort((ev_seq, ev_trx))
    ev_trx, ev_delta, ev_owner, ev_rec = ev_trx[eo], ev_delta[eo], ev_owner[eo], ev_rec[eo]
    ev_is_push, ev_is_pop = ev_is_push[eo], ev_is_pop[eo]
    m = len(ev_trx)
    undo_of = np.full(n, NO_UNDO, dtype=np.int64)
    unmatched = np.zeros(m, dtype=bool)
    if m:
        efirst = np.ones(m, dtype=bool)
        efirst[1:] = ev_trx[1:] != ev_trx[:-1]
        erun = np.cumsum(efirst) - 1
        c = np.cumsum(ev_delta)
        base = (c - ev_delta)[efirst][erun]            # cumulative sum before the run
        s = c - base
        big = 2 * (m + 1)
        mins = np.minimum.accumulate(s - erun * big) + erun * big
        depth = s - np.minimum(mins, 0)
        before = np.concatenate(([0], depth[:-1]))
        before[efirst] = 0
        eff_pop = ev_is_pop & (before > 0)
        level = np.where(ev_is_push, depth, before)
        part = ev_is_push | eff_pop
        idx = np.flatnonzero(part)
        o = np.lexsort((idx, level[idx], erun[idx]))
        seq = idx[o]
        is_pop_seq = eff_pop[seq]
        matched_push = np.concatenate(([-1], seq[:-1]))
        pop_at = np.flatnonzero(is_pop_seq)
        pu = matched_push[pop_at]
        po = seq[pop_at]
        undo_of[ev_rec[po]] = ev_owner[pu]
        done = np.zeros(m, dtype=bool)
        done[pu] = True
        unmatched = ev_is_push & ~done

    # --- back to input order
    inv = np.empty(n, dtype=np.int64)
    inv[order] = k

    def owner_in(v: np.ndarray) -> np.ndarray:
        """Owners: sorted positions -> input indexes (strings stay negative)."""
        out = v.copy()
        rec = v >= 0
        out[rec] = order[v[rec]]
        return out

    undo_in = undo_of.copy()
    has_undo = undo_of != NO_UNDO
    undo_in[has_undo] = owner_in(undo_of[has_undo])
    trx_begin = order[b_pos] if nb else np.zeros(0, np.int64)
    trx_xid = np.concatenate((x[b_pos], gxids)) if n else np.zeros(0, np.int64)

    # --- state after this file, per xid seen
    state: dict = {}
    consumed_rec = np.zeros(n, dtype=bool)
    consumed_virt = np.zeros(ng, dtype=bool)
    if folded_aft.any():
        fa = np.flatnonzero(folded_aft)
        t = target[fa]
        consumed_rec[t[t >= 0]] = True
        consumed_virt[gid[fa[t < 0]]] = True
    if n:
        g_last = np.concatenate((np.flatnonzero(gflag)[1:] - 1, [n - 1]))
        # the stacks left: only those of transactions still open at the end matter
        open_trx = np.unique(trx[g_last[(trx[g_last] >= 0) & ~is_end[g_last]]])
        ev_pos_by_trx: dict[int, list[int]] = {}
        left = np.flatnonzero(unmatched & np.isin(ev_trx, open_trx))
        for e, t_, o_ in zip(left.tolist(), ev_trx[left].tolist(), ev_owner[left].tolist()):
            ev_pos_by_trx.setdefault(t_, []).append(o_)

        def owner_text(o: int) -> str:
            return strings[-1 - o] if o < 0 else position_of(int(order[o]))

        for g in range(ng):
            j = g_last[g]
            xv = int(gxids[g])
            if trx[j] < 0 or is_end[j]:
                state[xv] = None
                continue
            t = int(trx[j])
            c = carried[g] if t >= nb else None
            # the fold at the run's end: the last setter of the run (or the carried fold)
            ps_end = np.flatnonzero(setter[run_start[j]:j + 1])
            fold = None
            if len(ps_end):
                sp = run_start[j] + int(ps_end[-1])
                if is_home[sp]:
                    fold = {"owner": position_of(int(order[sp])),
                            "after": bool(tc[sp] == T_HUPBEF and not consumed_rec[sp]),
                            "tbl": int(tb[sp]), "row": int(rw[sp])}
            elif c is not None and c.get("fold"):
                f = c["fold"]
                fold = {"owner": f["owner"],
                        "after": bool(f.get("after")) and not bool(consumed_virt[g]),
                        "tbl": f.get("tbl"), "row": f.get("row")}
            state[xv] = {"trx_index": t, "last": int(ad[j]),
                         "undo": [owner_text(o) for o in ev_pos_by_trx.get(t, [])],
                         "fold": fold}

    return Chains(trx=trx[inv], trx_begin=trx_begin, trx_xid=trx_xid, folded=folded[inv],
                  owner=owner_in(owner_s)[inv], n_records=n_rec[inv], undo=undo_in[inv],
                  anomaly=anomaly[inv], strings=strings, state=state)
