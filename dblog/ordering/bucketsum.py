"""A bucket of the transactions pass on files summarised on integer group numbers.

A summarise task (``trxfiles.summarize_bucket``) holds every row of each of its
transactions. ``transactions.partial`` / ``final``, ``categories`` / ``_buckets`` and the
published changes' ranking are the same rules written for a stream of chunks, where a
transaction's rows may be in two chunks: each groups or joins on (source, trx_id), two
string keys, and takes string minimums and maximums over every row. On a bucket of 440,000
rows those took about 0.9 CPU s (docs/BENCHMARK.md, "Twenty-fourth session").

Here the pair is numbered once (``group_ids``: dictionary codes, in the order of first
appearance), and every rule becomes numpy on those numbers:

- counts and flags per transaction are ``np.bincount``;
- a string minimum or maximum is taken over the rows that can give it only (a commit
  row's ``commit_position``, a begin row's ``position``, ...), as the rank of the value among
  the distinct values of those rows (``_extreme``); ``partial``'s fallbacks (any row's
  ``user`` and ``position``) only for the transactions that need them;
- the transaction of a row is ``trx[gid]``: the audit's bucket of each row, the changes
  that publish and the held rows need no join;
- ``event_seq`` (a change's rank in its transaction) sorts the published changes by the
  group number and the order's columns, skipped when the rows already are in that order
  (``_in_order``: the common case, a transaction's changes in their file's order).

The output is what the chunked rules give on the same rows (``tests/test_bucket_summary.py``
compares both on every format's night).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .transactions import CHANGE, COMPENSATED, OTHER, TRX_COUNTS_SCHEMA

KEYS = ["source", "trx_id"]
# ``event_seq``'s order inside a transaction (``sequence.event_seq``), nulls first
ORDER = ["_k", "position", "archive_file", "record_index"]
STATUS = ["committed", "rolled_back", "open"]
COMMITTED, ROLLED_BACK, OPEN = range(3)
# the audit's buckets of a row of a transaction (``classify.change_bucket``, ``other_bucket``)
BUCKETS = ["held_open", "skipped:rolled_back", "skipped:capture_off", "skipped:compensated",
           "published", "control", "quarantined"]


def _codes(values) -> tuple[np.ndarray, pa.Array]:
    """Dictionary codes of a string column (int64, nulls as the dictionary's length) and
    its dictionary (a dictionary column's own)."""
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    enc = values if pa.types.is_dictionary(values.type) else values.dictionary_encode()
    codes = enc.indices.fill_null(len(enc.dictionary)).to_numpy(zero_copy_only=False)
    return codes.astype(np.int64), enc.dictionary


def group_ids(rows: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """(source, trx_id) of each row -> (its group number, int64, numbered in the order of
    first appearance; the index of each group's first row)."""
    n = rows.num_rows
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    s, s_dict = _codes(rows.column("source"))
    t, t_dict = _codes(rows.column("trx_id"))
    pair = pa.array(s * (len(t_dict) + 1) + t)
    gid = pair.dictionary_encode().indices.to_numpy(zero_copy_only=False).astype(np.int64)
    seen = np.maximum.accumulate(gid)
    first = np.flatnonzero(np.concatenate([[True], gid[1:] > seen[:-1]]))
    return gid, first


def _mask(values) -> np.ndarray:
    """A boolean Arrow column as numpy, null as false."""
    return pc.fill_null(values, False).to_numpy(zero_copy_only=False).astype(bool)


def _any(gid: np.ndarray, mask: np.ndarray, g: int) -> np.ndarray:
    return np.bincount(gid[mask], minlength=g) > 0


def _ranked(codes: np.ndarray, dictionary: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Dictionary codes -> (each code's rank among the dictionary's values, ascending by
    their bytes; the null code ranked past them), the dictionary's sort order."""
    order = pc.sort_indices(dictionary).to_numpy(zero_copy_only=False)
    rank = np.empty(len(order) + 1, np.int64)
    rank[order] = np.arange(len(order))
    rank[len(order)] = len(order)
    return rank[codes], order


def _extreme(values, rows_idx: np.ndarray, gid: np.ndarray, g: int, how: str,
             where: np.ndarray | None = None, ranked=None) -> pa.Array:
    """The minimum (``how`` = "min") or maximum of ``values`` over the rows ``rows_idx`` of
    each group (null where it has none, or only nulls), as Arrow's ``hash_min`` / ``hash_max``
    (strings by their bytes, timestamps by their value); ``where``: the groups that need it
    (the others get null); ``ranked``: (``_ranked`` of the whole column, its dictionary),
    for a column of few distinct values, else the rows' values are ranked here."""
    typ = values.type
    if where is not None:
        rows_idx = rows_idx[where[gid[rows_idx]]]
    if len(rows_idx) == 0:
        return pa.nulls(g, typ)
    string = pa.types.is_string(typ) or pa.types.is_large_string(typ)
    if string:
        if ranked is not None:
            (rank, order), dictionary = ranked
            r = rank[rows_idx]
        else:
            sub = values.take(pa.array(rows_idx))
            codes, dictionary = _codes(sub)
            rank, order = _ranked(codes, dictionary)
            r = rank
        k = len(order)
        valid = r < k
        gids, r = gid[rows_idx][valid], r[valid]
        if how == "min":
            best = np.full(g, k, np.int64)
            np.minimum.at(best, gids, r)
            has = best < k
        else:
            best = np.full(g, -1, np.int64)
            np.maximum.at(best, gids, r)
            has = best >= 0
        out = np.zeros(g, np.int64)
        out[has] = order[best[has]]
        return dictionary.take(pa.array(out, mask=~has))
    sub = values.take(pa.array(rows_idx))
    sub = sub.combine_chunks() if isinstance(sub, pa.ChunkedArray) else sub
    valid = pc.is_valid(sub).to_numpy(zero_copy_only=False)
    gids = gid[rows_idx][valid]
    v = sub.filter(pa.array(valid)).cast(pa.int64()).to_numpy(zero_copy_only=False)
    lo = np.iinfo(np.int64)
    best = np.full(g, lo.max if how == "min" else lo.min, np.int64)
    (np.minimum if how == "min" else np.maximum).at(best, gids, v)
    has = np.bincount(gids, minlength=g) > 0
    return pa.array(best, mask=~has).cast(typ)


def _undone_lists(rows: pa.Table, gid: np.ndarray, undo: np.ndarray, g: int) -> pa.Array:
    """Per group, the distinct ``undo_of`` of its undo rows, sorted (null when none)."""
    idx = np.flatnonzero(undo & _mask(pc.is_valid(rows.column("undo_of"))))
    if len(idx) == 0:
        return pa.nulls(g, pa.list_(pa.string()))
    t = pa.table({"g": gid[idx], "u": rows.column("undo_of").take(pa.array(idx))})
    t = t.group_by(["g", "u"], use_threads=False).aggregate([]) \
        .sort_by([("g", "ascending"), ("u", "ascending")])
    tg = t.column("g").to_numpy()
    counts = np.bincount(tg, minlength=g)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), t.column("u").combine_chunks(),
                                    mask=pa.array(counts == 0))


def compensated_mask(rows: pa.Table, gid: np.ndarray, undo: np.ndarray,
                     change: np.ndarray) -> np.ndarray:
    """The changes an undo row of their transaction undoes (its ``undo_of`` is their
    ``position``): ``transactions.compensated`` on the group numbers."""
    uidx = np.flatnonzero(undo & _mask(pc.is_valid(rows.column("undo_of"))))
    out = np.zeros(rows.num_rows, bool)
    if len(uidx) == 0:
        return out
    cidx = np.flatnonzero(change & np.isin(gid, gid[uidx]))
    if len(cidx) == 0:
        return out
    targets = pa.table({"g": gid[uidx], "p": rows.column("undo_of").take(pa.array(uidx))})
    cand = pa.table({"g": gid[cidx], "p": rows.column("position").take(pa.array(cidx)),
                     "_i": cidx})
    hit = cand.join(targets, ["g", "p"], join_type="left semi", use_threads=False).column("_i")
    out[hit.to_numpy()] = True
    return out


class Summary:
    """A bucket's rows (``trxfiles.SPLIT_SCHEMA``, every row of each of its transactions)
    summarised: ``trx`` (``TRX_COUNTS_SCHEMA``, the groups with a row of their own in the
    transaction, ``in_trx``), ``undone`` (the compensated changes, a mask over the rows)
    and for each row the index of its transaction in ``trx`` (``row_trx``, -1 for none)."""

    def __init__(self, rows: pa.Table) -> None:
        self.rows = rows
        n = rows.num_rows
        gid, first = group_ids(rows)
        g = len(first)
        self.gid = gid
        kind, end = rows.column("kind"), rows.column("trx_end")
        in_trx = _mask(rows.column("_in_trx"))
        change = _mask(pc.equal(kind, "change"))
        is_begin = in_trx & _mask(pc.equal(kind, "begin"))
        is_commit = in_trx & _mask(pc.equal(kind, "commit"))
        commit_end = in_trx & _mask(pc.equal(end, "commit"))
        abort = in_trx & _mask(pc.equal(end, "abort"))
        undo = in_trx & _mask(pc.equal(kind, "undo"))
        self.change, self.in_trx = change, in_trx
        capture = is_begin & _mask(pc.equal(rows.column("flag"), "capture_off"))

        has_trx = _any(gid, in_trx, g)
        ab, cap = _any(gid, abort, g), _any(gid, capture, g)
        n_changes = np.bincount(gid[change], minlength=g)
        undone = compensated_mask(rows, gid, undo, change)
        self.undone = undone
        n_comp = np.bincount(gid[undone], minlength=g)

        idx_in, idx_end = np.flatnonzero(in_trx), np.flatnonzero(commit_end)
        idx_begin, idx_commit = np.flatnonzero(is_begin), np.flatnonzero(is_commit)
        user, position = rows.column("user"), rows.column("position")
        # (the columns of few values ranked once: format, user)
        self.codes = {c: _codes(rows.column(c)) for c in ("format", "user")}
        by = {c: (_ranked(*self.codes[c]), self.codes[c][1]) for c in self.codes}
        fmt = _extreme(rows.column("format"), idx_in, gid, g, "min", ranked=by["format"])
        cp = _extreme(rows.column("commit_position"), idx_end, gid, g, "max")
        cts = _extreme(rows.column("commit_ts"), idx_end, gid, g, "max")
        uc = _extreme(user, idx_commit, gid, g, "max", ranked=by["user"])
        ub = _extreme(user, idx_begin, gid, g, "max", ranked=by["user"])
        # (``partial``'s last fallbacks, looked at only where the first are null)
        no_user = _mask(pc.and_(pc.is_null(uc), pc.is_null(ub)))
        u = _extreme(user, idx_in, gid, g, "max", where=no_user, ranked=by["user"]) \
            if no_user.any() else pa.nulls(g, pa.string())
        pb = _extreme(position, idx_begin, gid, g, "min")
        no_begin = _mask(pc.is_null(pb))
        p = _extreme(position, idx_in, gid, g, "min", where=no_begin) if no_begin.any() \
            else pa.nulls(g, pa.string())
        lists = _undone_lists(rows, gid, undo, g)

        committed = _mask(pc.is_valid(cp))
        state = np.where(committed, COMMITTED, np.where(ab, ROLLED_BACK, OPEN))
        published = n_changes - n_comp
        event_count = np.where(committed & ~cap, published, 0).astype(np.int64)
        keep = np.flatnonzero(has_trx)
        take = pa.array(keep)
        heads = rows.select(KEYS).take(pa.array(first[keep]))
        self.trx = pa.table([
            heads.column("source"), heads.column("trx_id"), fmt.take(take),
            pa.array(STATUS, pa.string()).take(pa.array(state[keep])), cp.take(take), cts.take(take),
            pc.coalesce(uc, ub, u).take(take), pc.coalesce(pb, p).take(take),
            pa.array(cap[keep]), lists.take(take), pa.array(event_count[keep])],
            schema=TRX_COUNTS_SCHEMA)
        where = np.full(g, -1, np.int64)
        where[keep] = np.arange(len(keep))
        self.row_trx = where[gid] if n else np.zeros(0, np.int64)
        self._status = state[keep]
        self._cap = cap[keep]
        self._count = event_count[keep]

    def audit_buckets(self) -> pa.Table:
        """The audit's records and bytes of the bucket's rows that it counts, per (source,
        format, archive_file, bucket): ``transactions.categories`` then ``_buckets``, the
        keys as dictionary codes combined into one integer."""
        rows, t = self.rows, self.row_trx
        kind = rows.column("kind")
        counted = self.in_trx & ~_mask(rows.column("from_state")) & ~_mask(rows.column("_seen")) \
            & ~_mask(pc.is_in(kind, pa.array(["segment", "carry"])))
        one_record = _mask(pc.and_(pc.is_null(rows.column("seg_key")),
                                   pc.greater(rows.column("n_records"), 0)))
        counted &= (~self.change | one_record) & (t >= 0)
        idx = np.flatnonzero(counted)
        tr = t[idx]
        status, cap = self._status[tr], self._cap[tr]
        is_open, rolled = status == OPEN, status == ROLLED_BACK
        # the bucket of each row as a code of ``BUCKETS``; a skipped row's: past them, by rule
        code = np.where(self.change[idx],
                        np.where(is_open, 0, np.where(rolled, 1, np.where(
                            cap, 2,
                            np.where(self.undone[idx], 3, 4)))),
                        np.where(is_open, 0, 5))
        code[_mask(pc.equal(kind, "quarantine"))[idx]] = 6
        skip = _mask(pc.equal(kind, "skip"))[idx] & (code != 6)
        rule, rules = _codes(rows.column("rule"))
        code[skip] = len(BUCKETS) + rule[idx][skip]
        src, srcs = _codes(rows.column("source"))
        fmt, fmts = self.codes["format"]
        arc, arcs = _codes(rows.column("archive_file"))
        nc, nf, na = len(BUCKETS) + len(rules) + 1, len(fmts) + 1, len(arcs) + 1
        key = ((src[idx] * nf + fmt[idx]) * na + arc[idx]) * nc + code
        enc = pa.array(key).dictionary_encode()
        inv = enc.indices.to_numpy(zero_copy_only=False)
        uniq = enc.dictionary.to_numpy(zero_copy_only=False)
        m = len(uniq)
        sums = []
        for col in ("n_records", "n_bytes"):
            v = rows.column(col).take(pa.array(idx))
            v = v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v
            ok = pc.is_valid(v).to_numpy(zero_copy_only=False)
            total = np.zeros(m, np.int64)
            np.add.at(total, inv[ok], v.filter(pa.array(ok)).to_numpy().astype(np.int64))
            sums.append(pa.array(total, mask=np.bincount(inv[ok], minlength=m) == 0))
        c = uniq % nc
        a = uniq // nc % na
        f = uniq // nc // na % nf
        s_ = uniq // nc // na // nf
        names = pa.array(BUCKETS + [None], pa.string())
        skipped = pc.binary_join_element_wise(
            "skipped:", _take_code(rules, np.where(c >= len(BUCKETS), c - len(BUCKETS), len(rules))), "")
        bucket = pc.if_else(pa.array(c >= len(BUCKETS)), skipped,
                            names.take(pa.array(np.minimum(c, len(BUCKETS)))))
        return pa.table({"source": _take_code(srcs, s_), "format": _take_code(fmts, f),
                         "archive_file": _take_code(arcs, a), "bucket": bucket,
                         "n_records": sums[0], "n_bytes": sums[1]})

    def published(self, schema: pa.Schema, fid: str, row: str) -> pa.Table:
        """The changes the bucket publishes (``schema``: ``trxfiles.PUB_SCHEMA``): those of a
        transaction with published changes that no undo row of it undoes, each with its
        ``event_seq``, its rank in its transaction by ``ORDER`` (``_k``:
        ``coalesce(trx_order, position)``), nulls first."""
        t = self.row_trx
        ok = self.change & ~self.undone & (t >= 0)
        ok[ok] &= self._count[t[ok]] > 0
        idx = np.flatnonzero(ok)
        if len(idx) == 0:
            return schema.empty_table()
        rows = self.rows
        cand = rows.select(["trx_order", "position", "archive_file", "record_index"]) \
            .take(pa.array(idx))
        cols = {"_k": pc.coalesce(cand.column("trx_order"), cand.column("position")),
                "position": cand.column("position"), "archive_file": cand.column("archive_file"),
                "record_index": cand.column("record_index")}
        g = self.gid[idx]
        order = np.argsort(g, kind="stable")
        if not _in_order(g, [cols[c] for c in ORDER], order):
            t2 = pa.table({"_g": g, **cols})
            order = pc.sort_indices(t2, sort_keys=[("_g", "ascending")] + [
                (c, "ascending", "at_start") for c in ORDER]).to_numpy()
        gs = g[order]
        n = len(gs)
        first = np.concatenate([[True], gs[1:] != gs[:-1]])
        starts = np.flatnonzero(first)
        seq = (np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n))) + 1).astype(np.int32)
        at = pa.array(idx[order])
        return pa.table([rows.column(fid).take(at), rows.column(row).take(at),
                         rows.column("source").take(at), rows.column("trx_id").take(at),
                         pa.array(seq)], schema=schema)

    def held(self, fid: str, row: str) -> pa.Table:
        """(``fid``, ``row``) of the rows of the transactions still open, but quarantine
        rows (``state.held_rows``) and the reassembled changes."""
        t = self.row_trx
        keep = self.in_trx & ~_mask(pc.equal(self.rows.column("kind"), "quarantine")) & (t >= 0)
        keep[keep] &= self._status[t[keep]] == OPEN
        return self.rows.select([fid, row]).filter(pa.array(keep))


def _take_code(dictionary: pa.Array, codes: np.ndarray) -> pa.Array:
    """``dictionary[codes]``, null where a code is the dictionary's length (``_codes``)."""
    null = codes >= len(dictionary)
    return dictionary.take(pa.array(np.where(null, 0, codes), mask=null)) if len(dictionary) \
        else pa.nulls(len(codes), pa.string())


def _in_order(g: np.ndarray, cols: list, order: np.ndarray) -> bool:
    """Whether the rows taken in ``order`` (sorted by group, stable) are also sorted by
    ``cols`` inside each group, ascending; False when a column has a null (left to the
    sort, which puts them first)."""
    n = len(order)
    if n < 2:
        return True
    same = g[order][1:] == g[order][:-1]
    if not same.any():
        return True
    at = pa.array(order)
    undecided = same
    for col in cols:
        c = col.take(at)
        c = c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c
        if c.null_count:
            return False
        a, b = c.slice(0, n - 1), c.slice(1)
        lt = pc.less(a, b).to_numpy(zero_copy_only=False)
        gt = pc.greater(a, b).to_numpy(zero_copy_only=False)
        if (undecided & gt).any():
            return False
        undecided = undecided & ~lt
        if not undecided.any():
            return True
    return True        # (equal in every column: any order of them is the sort's)
