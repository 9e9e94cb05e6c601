"""Row images of one table in bulk: the fast path of the Db2 LUW decoder.

Given the byte offsets of many Formatted User Data Records of one table (their fixed sections,
lengths and ends), ``RowBatch.decode`` reads every column for all of them at once: the fixed
section through the table's ``row_layout`` gathered with numpy (fixed-width columns are
views at fixed offsets), null bytes as masks, VARCHAR by offset arithmetic, packed DECIMAL /
DATE / TIME / TIMESTAMP and text with ``decoders.vectors``, and renders the JSON images with
``render.render_rows``. It returns a bad mask instead of raising: a row failing any check
goes through the careful path (``careful.RowCodec``), which raises the precise error.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .. import vectors as V
from ..catalog import Table, codec_problem
from ..render import render_rows
from . import layout as L

_INT_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT")


def _binary(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    raw, offsets = V._flat(buf, starts, lengths)
    return pa.BinaryArray.from_buffers(pa.binary(), len(lengths), [
        None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(raw.tobytes())])


def _fixed_binary(rows: np.ndarray) -> pa.Array:
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    n, w = rows.shape
    offsets = np.arange(n + 1, dtype=np.int32) * w
    return pa.BinaryArray.from_buffers(pa.binary(), n, [
        None, pa.py_buffer(offsets), pa.py_buffer(rows.tobytes())])


class RowBatch:
    """One table's row images, decoded many at a time."""

    def __init__(self, table: Table, byte_order: str, codepage: str) -> None:
        self.table = table
        self.layout = L.row_layout(table.columns, byte_order)
        self.fixed_size = self.layout.size
        self.encoding = table.encoding or codepage
        self.text_ok = codec_problem(self.encoding) is None

    def decode(self, buf: np.ndarray, fixed: np.ndarray, fixed_len: np.ndarray,
               end: np.ndarray) -> tuple[pa.Array, np.ndarray]:
        """JSON images of the records whose fixed sections start at ``fixed`` (each at least
        ``fixed_size`` long, ``fixed_len`` as declared, the image ending at ``end``), and the
        mask of rows the careful path must decode instead."""
        n = len(fixed)
        rec = self.layout.gather(buf, fixed)
        bad = np.zeros(n, dtype=bool)
        arrays = []
        var_end = end - fixed
        for i, col in enumerate(self.table.columns):
            if col.nullable:
                nb = rec[f"c{i}_null"]
                bad |= nb > L.NULL_FLAG_NULL
                null = nb != L.NULL_FLAG_VALUE
            else:
                null = np.zeros(n, dtype=bool)
            arr, col_bad = self._column(i, col, rec, buf, fixed, fixed_len, var_end, null)
            bad |= col_bad & ~null
            arrays.append(arr)
        return render_rows(self.table.columns, arrays), bad

    def _column(self, i: int, col, rec, buf, fixed, fixed_len, var_end, null):
        t = col.type
        n = len(null)
        none = np.zeros(n, dtype=bool)
        if t in L.VARIABLE_TYPES:
            ofs = rec[f"c{i}_ofs"].astype(np.int64)
            ln = rec[f"c{i}_len"].astype(np.int64)
            bad = (ln > 0) & ((ofs < fixed_len) | (ofs + ln > var_end))
            ln = np.where(bad | null, 0, ln)
            starts = fixed + np.where(ln > 0, ofs, 0)
            if t in L.TEXT_TYPES:
                if not self.text_ok:
                    return pa.nulls(n, pa.string()), bad | (~null)
                arr, tbad = V.text(buf, starts, ln, self.encoding)
                return _nulls(arr, null), bad | tbad
            return _nulls(_binary(buf, starts, ln), null), bad
        raw = rec[f"c{i}"]
        if raw.dtype.byteorder not in ("=", "|"):
            raw = raw.astype(raw.dtype.newbyteorder("="))
        if t in _INT_TYPES:
            return pa.array(raw, mask=null), none
        if t in ("REAL", "FLOAT", "DOUBLE"):
            bad = ~np.isfinite(raw)
            return pa.array(np.where(bad, 0, raw), mask=null | bad), bad
        if t == "DECIMAL":
            arr, bad = V.packed_decimal(raw, col.scale or 0)
            return _nulls(arr, null), bad
        if t == "DATE":
            arr, bad = V.db2_dates(raw)
            return _nulls(arr, null), bad
        if t == "TIME":
            arr, bad = V.db2_times(raw)
            return _nulls(arr, null), bad
        if t == "TIMESTAMP":
            arr, bad = V.db2_timestamps(raw)
            return _nulls(arr, null), bad
        if t == "CHAR":
            if not self.text_ok:
                return pa.nulls(n, pa.string()), ~null
            arr, bad = V.text_fixed(raw, self.encoding)
            return _nulls(arr, null), bad
        if t == "BINARY":
            return _nulls(_fixed_binary(raw), null), none
        raise ValueError(f"db2luw cannot decode column type {t}")


def _nulls(arr: pa.Array, null: np.ndarray) -> pa.Array:
    if not null.any():
        return arr
    return V.pc_if_else(null, arr)
