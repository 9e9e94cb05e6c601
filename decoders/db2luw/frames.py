"""Framing of Db2 LUW log-read streams: where the records are, resynchronisation after
damage (issue 15) and split points for byte ranges (issue 14).

A stream is ``repeat { prefix, record }`` (V7: 6-byte LSN; v10: 56-byte
``db2ReadLogFilterData``), each record's length in its header (u32 @0). ``Framer.frame``
walks the lengths in one tight loop, then checks every framed record at once with numpy:
its header must be *plausible* (record type in its domain: an ASCII letter in V7, a code
below 0x100 in v10; flags below 0x1000; v10: the prefix's LRI type 1; its position (V7 LSN,
v10 LFS then LSN) above the previous record's). A record that is not plausible but whose
successor is, is a record with a damaged header: it stays a record (the decoder quarantines
or decodes it alone). A record that is not plausible and whose successor is not either is
garbage: the record before it had a damaged length. Then, and after a length that points
outside the archive or below the header's size, ``resync`` scans for the next plausible
record start (header plausible, length inside the archive, and the record after it
plausible too, or the end), and the bytes in between become one damaged span: one quarantine
row, so a damaged length or type byte costs only the damaged record.
"""

from __future__ import annotations

import struct

import numpy as np

from ..errors import Corrupt, DecodeError, NeedData
from ..framing import Damage, Frames, resync, split_ranges
from ..layout import as_uint8
from . import layout as L

_LETTER = np.zeros(65536, dtype=bool)
for _c in b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz":
    _LETTER[_c] = True
MAX_FLAGS = 0x1000            # flags documented up to 0x0800
MAX_V10_TYPE = 0x0100         # every documented v10 record type is below 0x100


class Framer:
    """Frames one variant's stream in one byte order."""

    def __init__(self, variant: L.Variant, byte_order: str) -> None:
        self.v = variant
        self.P, self.H = variant.prefix_size, variant.header_size
        self.little = byte_order == "little"
        self.u4 = struct.Struct(("<" if self.little else ">") + "I").unpack_from
        self.hdr_path = "lm_header" if variant is L.V7 else "log_record_header"

    # ------------------------------------------------------------- integers at many offsets
    def _int(self, buf: np.ndarray, at: np.ndarray, width: int, big: bool | None = None) -> np.ndarray:
        """Unsigned integers of ``width`` bytes at offsets ``at`` (each inside ``buf``)."""
        big = (not self.little) if big is None else big
        out = np.zeros(len(at), dtype=np.uint64)
        for k in range(width):
            shift = 8 * (width - 1 - k) if big else 8 * k
            out |= buf[at + k].astype(np.uint64) << np.uint64(shift)
        return out

    def keys(self, buf: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions as (high, low) uint64: V7 (0, LSN), v10 (LFS, LSN)."""
        if self.v is L.V7:
            return np.zeros(len(starts), np.uint64), self._int(buf, starts, 6, big=True)
        rec = starts + self.P
        return self._int(buf, rec + 16, 8), self._int(buf, rec + 8, 8)

    # ------------------------------------------------------------- plausibility
    def head_ok(self, buf: np.ndarray, starts: np.ndarray, end: int) -> np.ndarray:
        """Header fields in their domains (the position is checked apart); ``starts`` whose
        prefix and header do not fit before ``end`` are not plausible."""
        fits = starts + self.P + self.H <= end
        at = np.where(fits, starts, 0)
        rec = at + self.P
        rtype = self._int(buf, rec + 4, 2)
        flags = self._int(buf, rec + 6, 2)
        ok = fits & (flags < MAX_FLAGS)
        if self.v is L.V7:
            ok &= _LETTER[rtype.astype(np.int64)]
        else:
            ok &= (rtype < MAX_V10_TYPE) & (self._int(buf, at, 8) == 1)
        return ok

    def length_ok(self, buf: np.ndarray, starts: np.ndarray, end: int) -> tuple[np.ndarray, np.ndarray]:
        """(length in bounds, start of the next record) for records at ``starts``."""
        fits = starts + self.P + self.H <= end
        at = np.where(fits, starts, 0)
        length = self._int(buf, at + self.P, 4).astype(np.int64)
        nxt = at + self.P + length
        return fits & (length >= self.H) & (nxt <= end), nxt

    def plausible(self, buf: np.ndarray, starts: np.ndarray, end: int, after) -> np.ndarray:
        """Record starts with a plausible header above position ``after`` ((hi, lo) or None),
        a length inside ``[.., end)``, and a plausible record after them (or ``end``)."""
        ok = self.head_ok(buf, starts, end)
        len_ok, nxt = self.length_ok(buf, starts, end)
        ok &= len_ok
        hi, lo = self.keys(buf, np.where(ok, starts, 0))
        if after is not None:
            ok &= _greater(hi, lo, *after)
        at_end = nxt == end
        n_ok = self.head_ok(buf, np.where(ok & ~at_end, nxt, 0), end)
        n_len, _ = self.length_ok(buf, np.where(ok & ~at_end, nxt, 0), end)
        n_hi, n_lo = self.keys(buf, np.where(ok & ~at_end & n_ok, nxt, 0))
        return ok & (at_end | (n_ok & n_len & _greater(n_hi, n_lo, hi, lo)))

    def key_of(self, buf: np.ndarray, start: int) -> tuple[int, int]:
        hi, lo = self.keys(buf, np.array([start], dtype=np.int64))
        return int(hi[0]), int(lo[0])

    def resync(self, data, buf: np.ndarray, pos: int, end: int, after, limit: int | None = None) -> int:
        """The next plausible record start after ``pos`` and before ``limit`` (default
        ``end``; the records must fit before ``end``), or ``limit``."""
        limit = end if limit is None else limit
        return resync(data, pos, limit, lambda b, cand: self.plausible(buf, cand, end, after),
                      window=1 << 15)

    # ------------------------------------------------------------- framing
    def _chain(self, data, pos: int, end: int):
        """Follow the lengths from ``pos``: (record starts, the position after the last one,
        the framing error there or None)."""
        P, H = self.P, self.H
        u4 = self.u4
        head = P + H
        starts: list[int] = []
        append = starts.append
        while pos < end:
            if end - pos < head:
                return starts, pos, NeedData(
                    "truncated tail: too short for a record prefix and header", path=self.hdr_path,
                    expected=head, actual=end - pos)
            length = u4(data, pos + P)[0]
            if length < H:
                return starts, pos, Corrupt(
                    "record length smaller than the record header", offset=pos + P,
                    path=f"{self.hdr_path}.len_record", expected=f">= {H}", actual=length)
            if pos + P + length > end:
                return starts, pos, NeedData(
                    "record length past the end of the file", offset=pos + P,
                    path=f"{self.hdr_path}.len_record", expected=length, actual=end - pos - P)
            append(pos)
            pos += P + length
        return starts, pos, None

    def _first_suspicious(self, buf, arr: np.ndarray, end: int, after) -> int | None:
        """Index of the first record of ``arr`` whose header is not plausible or whose
        position does not rise (against ``after`` for the first)."""
        if not len(arr):
            return None
        ok = self.head_ok(buf, arr, end)
        hi, lo = self.keys(buf, arr)
        rise = np.ones(len(arr), dtype=bool)
        rise[1:] = _greater(hi[1:], lo[1:], hi[:-1], lo[:-1])
        if after is not None:
            rise[0] = bool(_greater(hi[:1], lo[:1], *after)[0])
        bad = np.flatnonzero(~(ok & rise))
        return int(bad[0]) if len(bad) else None

    def frame(self, data, start: int = 0, end: int | None = None, base: int = 0) -> Frames:
        """Records and damaged spans of ``data[start:end]`` (``base``: archive offset of
        ``data[0]``, for the errors' offsets)."""
        buf = as_uint8(data)
        end = len(data) if end is None else end
        acc: list[int] = []            # accepted record starts
        damaged: list[Damage] = []
        pos = start
        after = None                   # position of the last accepted record
        while pos < end:
            chain, stop, err = self._chain(data, pos, end)
            arr = np.asarray(chain, dtype=np.int64)
            j = self._first_suspicious(buf, arr, end, after)
            while j is not None:       # records with a damaged header stay records
                pred_key = self.key_of(buf, int(arr[j - 1])) if j > 0 else after
                succ = int(arr[j + 1]) if j + 1 < len(arr) else stop
                if succ >= end:
                    standalone = err is None
                else:
                    standalone = self._head_rises(buf, succ, end, pred_key)
                if not standalone:
                    break
                nxt = self._first_suspicious(buf, arr[j + 1:], end, pred_key)
                j = None if nxt is None else j + 1 + nxt
            linked = False             # does acc[-1] end exactly at the bad place?
            if j is None:
                acc.extend(chain)
                if chain:
                    after, linked = self.key_of(buf, chain[-1]), True
                if err is None:
                    break
                bad_at, error = stop, err
                if end - bad_at < self.P + self.H:         # the archive stops inside a header
                    damaged.append(self._damage(bad_at, end, error, base, end))
                    break
                if self._head_rises(buf, bad_at, end, after):
                    # a plausible record whose own length is damaged
                    nxt = self.resync(data, buf, bad_at, end, after)
                    damaged.append(self._damage(bad_at, nxt, error, base, end))
                    pos = nxt
                    continue
            else:
                acc.extend(chain[:j])
                if j > 0:
                    after, linked = self.key_of(buf, chain[j - 1]), True
                bad_at = int(arr[j])
                error = Corrupt("no plausible record header", offset=bad_at, path=self.hdr_path,
                                expected="a record header in its domains, its position rising",
                                actual=bytes(buf[bad_at:bad_at + 16]).hex())
            if linked:
                # garbage where the last record says the next one starts: either its length is
                # damaged (a plausible record starts inside it: it is the damaged one) or the
                # garbage really starts there (the record stays)
                pred = acc[-1]
                before = self.key_of(buf, acc[-2]) if len(acc) > 1 else None
                if self.plausible(buf, np.array([bad_at], np.int64), end, before)[0]:
                    # a plausible record follows, above the one before: the last record's
                    # position is the damaged field
                    acc.pop()
                    after = before
                    damaged.append(self._damage(pred, bad_at, Corrupt(
                        "record position above the records after it", offset=pred,
                        path="position", expected="a position below the next record's",
                        actual=bytes(buf[pred:pred + self.P]).hex()), base, end, tail=False))
                    pos = bad_at
                    continue
                inner = self.resync(data, buf, pred, end, before, limit=bad_at)
                if inner < bad_at and self._head_rises(buf, inner, end, before):
                    acc.pop()
                    after = before
                    error = Corrupt("record length leads to no plausible record",
                                    offset=pred + self.P, path=f"{self.hdr_path}.len_record",
                                    expected="the length of a record followed by a plausible "
                                             "record", actual=self.u4(data, pred + self.P)[0])
                    damaged.append(self._damage(pred, inner, error, base, end))
                    pos = inner
                    continue
            nxt = self.resync(data, buf, bad_at, end, after)
            damaged.append(self._damage(bad_at, nxt, error, base, end))
            pos = nxt
        st = np.asarray(acc, dtype=np.int64)
        return Frames(st, _lengths(st, damaged, start, end), damaged)

    def _head_rises(self, buf, at: int, end: int, after) -> bool:
        """A plausible header at ``at`` whose position is above ``after``."""
        one = np.array([at], np.int64)
        if not self.head_ok(buf, one, end)[0]:
            return False
        return after is None or bool(_greater(*self.keys(buf, one), *after)[0])

    def _damage(self, start: int, nxt: int, error: DecodeError, base: int, end: int,
                tail: bool = True) -> Damage:
        if error.offset is None:
            error.offset = start
        error.offset += base
        if tail:
            error.reason += (" (resynchronised at the next plausible record)" if nxt < end
                             else " (no plausible record after it)")
        error.located()
        return Damage(start, nxt, error)

    # ------------------------------------------------------------- byte ranges
    def split(self, data, target: int) -> list[dict]:
        """Byte ranges of about ``target`` bytes, cut at record starts (every record decodes
        on its own; undo records are resolved within a range, see the decoder)."""
        frames = self.frame(data)
        rec_idx, _ = frames.record_indexes(0)
        return [{"start": s, "end": e, "index": i}
                for s, e, i in split_ranges(frames.starts, len(data), target, None, rec_idx)]


def _greater(hi, lo, ahi, alo) -> np.ndarray:
    hi, lo = np.asarray(hi, np.uint64), np.asarray(lo, np.uint64)
    ahi, alo = np.uint64(ahi) if np.isscalar(ahi) else ahi, np.uint64(alo) if np.isscalar(alo) else alo
    return (hi > ahi) | ((hi == ahi) & (lo > alo))


def _lengths(starts: np.ndarray, damaged: list[Damage], start: int, end: int) -> np.ndarray:
    """Each record's length: up to the next record or damaged span (the spans tile the range)."""
    if not len(starts):
        return np.zeros(0, np.int64)
    bounds = np.sort(np.concatenate([starts[1:], [d.start for d in damaged], [end]]).astype(np.int64))
    nxt = bounds[np.searchsorted(bounds, starts, side="right")]
    return nxt - starts
