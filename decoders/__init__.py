"""Decoders of the five archived-log formats.

Each format is a package ``decoders.<format>`` exposing the same small face:

``FORMAT``                 the format id (``soliddb``, ``db2luw``, ``informix``, ``rdb``, ``lldf``)
``SEQUENTIAL``             True when the archives of one source must be decoded in order,
                           one after the other, passing decoder state (``carry``) along
``archive_sort_key(name)`` order of archives within a night (sequential formats)
``decode(data, ctx, sink)``   decode one archive into an ``EventSink``; returns the carry-out
``Synth``                  writes realistic archives (with the format's encoder) and knows
                           what it wrote, for tests, the sample night and the benchmark

``OPTIONS``                 the format's options in ``sources.yaml``: name -> (default, check)
``HAS_IMAGES``             whether the log carries row images (before/after)
``check_column(column)``   what is wrong with a catalog column for this format, or None
``DRIVER_FRAMING_MAX``     (optional) bytes of this format a local driver frames into ranges
                           itself, when fewer than ``dblog.decode.DRIVER_FRAMING_MAX``

Those names are cheap (the config and the DAG read them); ``decode`` and ``Synth`` import
the decoder on first use. ``FORMATS`` is the registry (format -> package); ``get(format)``
returns the package and raises ``UnknownFormat`` for anything else.
"""

from __future__ import annotations

import importlib
from types import ModuleType

FORMATS: dict[str, str] = {
    "soliddb": "decoders.soliddb",
    "db2luw": "decoders.db2luw",
    "informix": "decoders.informix",
    "rdb": "decoders.rdb",
    "lldf": "decoders.lldf",
}

__all__ = ["FORMATS", "UnknownFormat", "get"]


class UnknownFormat(KeyError):
    def __init__(self, fmt: str) -> None:
        super().__init__(f"unknown log format {fmt!r}; known: {', '.join(FORMATS)}")


_loaded: dict[str, ModuleType] = {}


def get(fmt: str) -> ModuleType:
    """The decoder package of ``fmt``."""
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise UnknownFormat(fmt)
    mod = _loaded.get(fmt)
    if mod is None:
        mod = importlib.import_module(FORMATS[fmt])
        _loaded[fmt] = mod
    return mod
