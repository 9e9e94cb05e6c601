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


def hexpos(value: int | bytes, width: int) -> str:
    """A position as fixed-width upper-case hex, so that text order is log order."""
    if isinstance(value, (bytes, bytearray)):
        text = bytes(value).hex().upper()
    else:
        text = format(value, "X")
    if len(text) > width:
        raise ValueError(f"position {text} wider than {width} hex digits")
    return text.rjust(width, "0")
