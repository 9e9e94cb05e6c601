"""Decoders of the five archived-log formats.

Each format is a package ``decoders.<format>`` exposing the same small face:

``FORMAT``                 the format id (``soliddb``, ``db2luw``, ``informix``, ``rdb``, ``lldf``)
``SEQUENTIAL``             True when the archives of one source must be decoded in order,
                           one after the other, passing decoder state (``carry``) along
``archive_sort_key(name)`` order of archives within a night (sequential formats)
``decode(data, ctx, sink)``   decode one archive into an ``EventSink``; returns the carry-out
``Synth``                  writes realistic archives (with the format's encoder) and knows
                           what it wrote, for tests, the sample night and the benchmark

``get(format)`` is the registry; it raises ``UnknownFormat`` for anything else.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .catalog import FORMATS

__all__ = ["FORMATS", "UnknownFormat", "get"]


class UnknownFormat(KeyError):
    def __init__(self, fmt: str) -> None:
        super().__init__(f"unknown log format {fmt!r}; known: {', '.join(FORMATS)}")


_loaded: dict[str, ModuleType] = {}


def get(fmt: str) -> ModuleType:
    """The decoder package of ``fmt``."""
    if fmt not in FORMATS:
        raise UnknownFormat(fmt)
    mod = _loaded.get(fmt)
    if mod is None:
        mod = importlib.import_module(f"decoders.{fmt}")
        _loaded[fmt] = mod
    return mod
