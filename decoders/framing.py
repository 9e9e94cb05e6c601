"""Framing: the cheap first pass over an archive that finds where its records are.

Every binary format decodes in two steps: *frame* (record starts and lengths, damaged spans),
then decode the framed records in bulk (headers with ``layout.gather``, row images per table).
The same framing is what an archive is split on (``split_ranges``: byte ranges at record
boundaries, so one archive decodes on every core) and what resynchronises after damage
(``resync``: the next plausible record start, so a damaged record costs only its own bytes).

``Frames`` is the result of framing ``data[start:end]``: ``starts`` and ``lengths`` (int64,
archive offsets, increasing, contiguous with the damaged spans between them) and ``damaged``
(``Damage`` spans that belong to no record: each becomes one quarantine row that counts its
bytes). ``frame_chain`` is the generic tight loop for length-chained formats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pyarrow as pa

from .errors import DecodeError
from .layout import as_uint8


@dataclass
class Damage:
    """Bytes ``[start, end)`` of the archive that are not a record: ``error`` says why (at
    ``start``); ``records`` is how many records they are taken to stand for (1)."""

    start: int
    end: int
    error: DecodeError
    records: int = 1

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass
class Frames:
    starts: np.ndarray
    lengths: np.ndarray
    damaged: list[Damage] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def ends(self) -> np.ndarray:
        return self.starts + self.lengths

    def covered(self) -> int:
        """Bytes covered by records and damaged spans (equals the framed span's length)."""
        return int(self.lengths.sum()) + sum(d.length for d in self.damaged)

    def record_indexes(self, first: int = 0) -> tuple[np.ndarray, list[int]]:
        """``record_index`` of every record and of every damaged span, numbered together in
        archive order from ``first`` (a damaged span counts its ``records``)."""
        n = len(self.starts)
        if not self.damaged:
            return np.arange(first, first + n, dtype=np.int64), []
        dstarts = np.array([d.start for d in self.damaged], dtype=np.int64)
        drecs = np.array([d.records for d in self.damaged], dtype=np.int64)
        # records before each record: its rank among records + damaged records before it
        before = np.searchsorted(dstarts, self.starts, side="left")
        cum = np.concatenate(([0], np.cumsum(drecs)))
        rec_idx = first + np.arange(n, dtype=np.int64) + cum[before]
        rank = np.searchsorted(self.starts, dstarts, side="left")
        dmg_idx = (first + rank + cum[:-1]).tolist()
        return rec_idx, dmg_idx


def frame_chain(data, step: Callable[[int], int], resync: Callable[[int, DecodeError], int],
                start: int = 0, end: int | None = None) -> Frames:
    """Frame a length-chained span: ``step(pos)`` returns the length of the record at ``pos``
    (it checks what it can: length bounds, type codes) or raises ``DecodeError``; on an error,
    ``resync(pos, error)`` returns the next plausible record start after ``pos`` (or ``end``)
    and the bytes in between become one ``Damage``. The records' lengths never run past
    ``end``: a record that would is damaged (its header is read, its length is not trusted)."""
    end = len(data) if end is None else end
    starts: list[int] = []
    lengths: list[int] = []
    damaged: list[Damage] = []
    pos = start
    while pos < end:
        try:
            n = step(pos)
            if n <= 0 or pos + n > end:
                raise _overrun(pos, n, end)
        except DecodeError as err:
            nxt = resync(pos, err)
            if not pos < nxt <= end:
                nxt = end
            damaged.append(Damage(pos, nxt, err))
            pos = nxt
            continue
        starts.append(pos)
        lengths.append(n)
        pos += n
    return Frames(np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64), damaged)


def _overrun(pos: int, n: int, end: int) -> DecodeError:
    from .errors import Corrupt, NeedData

    if n <= 0:
        return Corrupt("record length is not positive", path="length", expected="> 0", actual=n)
    return NeedData("record runs past the end of the archive", path="length",
                    expected=n, actual=end - pos)


def resync(data, pos: int, end: int, plausible: Callable[[np.ndarray, np.ndarray], np.ndarray],
           window: int = 1 << 16, min_gap: int = 1) -> int:
    """The first offset in ``(pos + min_gap - 1, end)`` where ``plausible(buf, candidates)`` is
    true (a boolean mask over an array of candidate offsets, evaluated a window at a time with
    numpy), or ``end``. ``plausible`` must only look at bytes inside the archive: candidates are
    offsets, the buffer is the whole archive as uint8."""
    buf = as_uint8(data)
    lo = pos + max(min_gap, 1)
    while lo < end:
        hi = min(lo + window, end)
        cand = np.arange(lo, hi, dtype=np.int64)
        hits = np.flatnonzero(plausible(buf, cand))
        if len(hits):
            return int(cand[hits[0]])
        lo = hi
    return end


def split_ranges(starts: np.ndarray, size: int, target: int, allowed: np.ndarray | None = None,
                 first_index: np.ndarray | None = None) -> list[tuple[int, int, int]]:
    """Byte ranges ``(start, end, first record_index)`` covering ``[0, size)``, each about
    ``target`` bytes, cut only at record starts (where ``allowed`` is true, if given).
    ``first_index[i]`` is the record_index of record i (default: i)."""
    starts = np.asarray(starts, dtype=np.int64)
    if first_index is None:
        first_index = np.arange(len(starts), dtype=np.int64)
    cut_ok = np.ones(len(starts), dtype=bool) if allowed is None else np.asarray(allowed, bool)
    cut_ok = cut_ok & (starts > 0)
    cands = starts[cut_ok]
    cand_idx = first_index[cut_ok]
    out = []
    lo, lo_index = 0, 0
    while size - lo > target and len(cands):
        k = int(np.searchsorted(cands, lo + target, side="left"))
        if k >= len(cands):
            break
        cut = int(cands[k])
        if cut <= lo:
            break
        out.append((lo, cut, lo_index))
        lo, lo_index = cut, int(cand_idx[k])
    out.append((lo, size, lo_index))
    return out


# ----------------------------------------------------------------- positions as text

_HEX_UPPER = np.frombuffer(b"".join(b"%02X" % i for i in range(256)), dtype=np.uint8).reshape(256, 2)


def hex_bytes(rows: np.ndarray) -> pa.Array:
    """Upper-case hex of each row of an ``(n, w)`` uint8 array (fixed-width positions)."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    n, w = rows.shape if rows.ndim == 2 else (len(rows), 1)
    digits = _HEX_UPPER[rows.reshape(n, w)].reshape(n, 2 * w)
    offsets = (np.arange(n + 1, dtype=np.int32) * (2 * w)).astype(np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(digits.tobytes()))


def hex_ints(values: np.ndarray, width: int) -> pa.Array:
    """Unsigned integers as upper-case hex, zero-padded to ``width`` digits (<= 16)."""
    if not 1 <= width <= 16:
        raise ValueError(f"hex width {width} outside 1..16")
    v = np.ascontiguousarray(values, dtype=np.uint64)
    if len(v) and width < 16 and int(v.max()) >> (4 * width):
        raise ValueError(f"a value needs more than {width} hex digits")
    raw = v.astype(">u8").view(np.uint8).reshape(-1, 8)
    full = _HEX_UPPER[raw].reshape(-1, 16)
    digits = np.ascontiguousarray(full[:, 16 - width:])
    n = len(v)
    offsets = (np.arange(n + 1, dtype=np.int32) * width).astype(np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(digits.tobytes()))


def concat_text(*parts) -> pa.Array:
    """Element-wise concatenation of string arrays / scalars (positions built from parts)."""
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(*parts, pa.scalar("", pa.string()))
