"""One declaration language for binary record layouts, compiled both ways.

A layout is a table of fields, each with our name, its offset, its type and the vendor's
own name beside ours (pyelftools / dpkt / Kaitai style, ../shared/STYLE.md). It is declared
once and compiled once into

* ``struct``: a ``struct.Struct`` over every field (gaps become pad bytes), for encoders
  and for the careful per-record path (``pack``, ``unpack_from``, ``unpack_dict``);
* ``dtype``: a numpy structured dtype with the same offsets and itemsize, for decoders that
  read the headers of every record at once (``gather``);

and both byte orders come from the same declaration (``with_byte_order``). Offsets check
themselves at import: fields in offset order, no overlap, inside the declared size, names
unique. Types::

    u1 u2 u4 u8   unsigned integers        s1 s2 s4 s8   two's complement integers
    f4 f8         IEEE floats              bN            N raw bytes (hex, text, LSNs ...)

A ``bN`` field reads as ``bytes`` from ``struct`` and as an ``(n, N)`` uint8 array from a
gathered record array (numpy's ``S`` type would drop trailing NUL bytes).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from functools import cached_property

import numpy as np

_INT = {"u1": ("B", "u1"), "u2": ("H", "u2"), "u4": ("I", "u4"), "u8": ("Q", "u8"),
        "s1": ("b", "i1"), "s2": ("h", "i2"), "s4": ("i", "i4"), "s8": ("q", "i8"),
        "f4": ("f", "f4"), "f8": ("d", "f8")}
_BYTES = re.compile(r"b([1-9][0-9]*)$")
ORDERS = {"big": (">", ">"), "little": ("<", "<")}


@dataclass(frozen=True)
class Field:
    """One field: ``name`` (ours, snake_case; ``len_*``, ``ofs_*``, ``num_*``, ``reserved*``),
    ``offset`` from the start of the layout, ``type`` (see the module docstring), ``vendor``
    (the vendor document's own name) and a free ``kind`` tag formats may use (e.g. ``char``
    for EBCDIC text, ``raw`` for bytes kept as hex)."""

    name: str
    offset: int
    type: str
    vendor: str = ""
    kind: str = ""

    @property
    def size(self) -> int:
        if self.type in _INT:
            return struct.calcsize(_INT[self.type][0])
        m = _BYTES.match(self.type)
        if not m:
            raise ValueError(f"field {self.name}: unknown type {self.type!r}")
        return int(m.group(1))

    @property
    def end(self) -> int:
        return self.offset + self.size

    @property
    def is_bytes(self) -> bool:
        return self.type not in _INT

    def struct_code(self) -> str:
        return f"{self.size}s" if self.is_bytes else _INT[self.type][0]

    def numpy_format(self, order: str):
        if self.is_bytes:
            return ("u1", (self.size,))
        code = _INT[self.type][1]
        return code if code.endswith("1") else ORDERS[order][1] + code


class Layout:
    """A record layout (see the module docstring)."""

    def __init__(self, name: str, fields, *, size: int | None = None, byte_order: str = "big") -> None:
        if byte_order not in ORDERS:
            raise ValueError(f"layout {name}: byte_order must be big or little, got {byte_order!r}")
        self.name = name
        self.fields: tuple[Field, ...] = tuple(f if isinstance(f, Field) else Field(*f) for f in fields)
        self.byte_order = byte_order
        end = max((f.end for f in self.fields), default=0)
        self.size = end if size is None else size
        self._check()
        self.by_name = {f.name: f for f in self.fields}
        self.names = tuple(f.name for f in self.fields)
        self._variants: dict[str, Layout] = {byte_order: self}

    def _check(self) -> None:
        seen: set[str] = set()
        pos = 0
        for f in self.fields:
            if f.name in seen:
                raise ValueError(f"layout {self.name}: field {f.name} declared twice")
            seen.add(f.name)
            if f.offset < pos:
                raise ValueError(f"layout {self.name}: field {f.name} at offset {f.offset} overlaps "
                                 f"the field before it (which ends at {pos}) or is out of order")
            pos = f.end
        if pos > self.size:
            raise ValueError(f"layout {self.name}: fields end at {pos}, past the size {self.size}")

    def __repr__(self) -> str:
        return f"<Layout {self.name} {self.size} bytes {self.byte_order}-endian>"

    # ----------------------------------------------------------------- variants
    def with_byte_order(self, byte_order: str) -> "Layout":
        """The same declaration in the other byte order (built once, then cached)."""
        got = self._variants.get(byte_order)
        if got is None:
            got = Layout(self.name, self.fields, size=self.size, byte_order=byte_order)
            got._variants = self._variants
            self._variants[byte_order] = got
        return got

    def offset(self, name: str) -> int:
        return self.by_name[name].offset

    # ----------------------------------------------------------------- struct (one record)
    @cached_property
    def struct(self) -> struct.Struct:
        """Every field in offset order; gaps and the tail up to ``size`` are pad bytes."""
        return self.reader(self.names, _full=True)

    def reader(self, names, _full: bool = False) -> struct.Struct:
        """A struct that reads only ``names`` (in offset order; everything else skipped)."""
        wanted = set(names)
        unknown = wanted - set(self.names)
        if unknown:
            raise KeyError(f"layout {self.name} has no field {sorted(unknown)[0]}")
        codes, pos = [ORDERS[self.byte_order][0]], 0
        for f in self.fields:
            if f.name not in wanted:
                continue
            if f.offset > pos:
                codes.append(f"{f.offset - pos}x")
            codes.append(f.struct_code())
            pos = f.end
        end = self.size if _full else pos
        if end > pos:
            codes.append(f"{end - pos}x")
        return struct.Struct("".join(codes))

    def pack(self, *values, **named) -> bytes:
        """Values in field order, or by name (fields not named are zero / zero bytes)."""
        if values and named:
            raise TypeError("pack takes values in field order or by name, not both")
        if named:
            unknown = set(named) - set(self.names)
            if unknown:
                raise KeyError(f"layout {self.name} has no field {sorted(unknown)[0]}")
            values = tuple(named.get(f.name, b"" if f.is_bytes else 0) for f in self.fields)
        return self.struct.pack(*values)

    def unpack_from(self, buf, offset: int = 0) -> tuple:
        return self.struct.unpack_from(buf, offset)

    def unpack_dict(self, buf, offset: int = 0) -> dict:
        return dict(zip(self.names, self.struct.unpack_from(buf, offset)))

    # ----------------------------------------------------------------- numpy (many records)
    @cached_property
    def dtype(self) -> np.dtype:
        return self.dtype_of(self.names)

    def dtype_of(self, names) -> np.dtype:
        """A structured dtype of only ``names`` (same offsets, itemsize = the layout's size)."""
        fs = [self.by_name[n] for n in names]
        return np.dtype({"names": [f.name for f in fs],
                         "formats": [f.numpy_format(self.byte_order) for f in fs],
                         "offsets": [f.offset for f in fs], "itemsize": self.size})

    def gather(self, buf, starts, names=None) -> np.ndarray:
        """The records of this layout at byte offsets ``starts`` of ``buf``, as one structured
        array (a copy). Every ``start + size`` must lie inside ``buf`` (callers frame first)."""
        return gather(buf, starts, self.dtype if names is None else self.dtype_of(names))


def as_uint8(buf) -> np.ndarray:
    """A read-only uint8 view of bytes / bytearray / memoryview / ndarray (no copy)."""
    if isinstance(buf, np.ndarray):
        return buf.view(np.uint8).reshape(-1)
    return np.frombuffer(buf, dtype=np.uint8)


def byte_runs(buf, starts, ends) -> bytes:
    """The bytes of the ranges ``[starts[i], ends[i])`` of ``buf``, concatenated in order.
    Adjacent ranges are copied as one slice, so the rows of a whole archive (or of most of
    it) cost one copy, not an index per byte."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    if not len(starts):
        return b""
    cut = np.flatnonzero(starts[1:] != ends[:-1]) + 1
    run_starts = starts[np.concatenate(([0], cut))].tolist()
    run_ends = ends[np.concatenate((cut - 1, [len(starts) - 1]))].tolist()
    view = memoryview(as_uint8(buf))
    if len(run_starts) == 1:
        return view[run_starts[0]:run_ends[0]].tobytes()
    return b"".join([view[a:b] for a, b in zip(run_starts, run_ends)])


def gather(buf, starts, dtype: np.dtype, chunk: int = 1 << 16) -> np.ndarray:
    """Records of ``dtype`` (fixed itemsize) at byte offsets ``starts`` of ``buf``."""
    data = as_uint8(buf)
    starts = np.asarray(starts, dtype=np.int64)
    size = dtype.itemsize
    n = len(starts)
    if n == 0:
        return np.empty(0, dtype=dtype)
    if starts.min() < 0 or starts.max() + size > len(data):
        bad = starts[(starts < 0) | (starts + size > len(data))][0]
        raise ValueError(f"record of {size} bytes at offset {bad} runs past the end "
                         f"({len(data)} bytes)")
    windows = np.lib.stride_tricks.as_strided(data, shape=(len(data) - size + 1, size),
                                              strides=(1, 1), writeable=False)
    out = np.empty((n, size), dtype=np.uint8)
    for i in range(0, n, chunk):
        out[i:i + chunk] = windows[starts[i:i + chunk]]
    return out.view(dtype).reshape(n)
