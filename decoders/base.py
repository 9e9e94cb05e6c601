"""What every format's ``decode`` receives besides the bytes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .catalog import Catalog


@dataclass
class DecodeContext:
    source: str
    format: str
    catalog: Catalog
    archive: str                      # path relative to the landing zone
    options: dict[str, Any] = field(default_factory=dict)
    timezone: str = "UTC"
    carry: dict | None = None         # carry-in: state left by the previous archive / night
    # a range of a split archive (decoders/framing.py): ``data`` is the archive's bytes from
    # ``offset`` on; its first record has ``record_index`` ``index``; text formats: ``line``
    # lines of the archive come before ``data`` (record_offset = line + 1-based line in data);
    # ``split`` is what the format's ``split`` attached to the range (e.g. a CSV header)
    offset: int = 0
    index: int = 0
    line: int = 0
    split: dict | None = None


def hexpos(value: int | bytes, width: int) -> str:
    """A position as fixed-width upper-case hex, so that text order is log order."""
    if isinstance(value, (bytes, bytearray)):
        text = bytes(value).hex().upper()
    else:
        text = format(value, "X")
    if len(text) > width:
        raise ValueError(f"position {text} wider than {width} hex digits")
    return text.rjust(width, "0")
