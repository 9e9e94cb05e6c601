"""Oracle Rdb LogMiner binary output (RMU /UNLOAD /AFTER_JOURNAL, Format=Binary)."""

from __future__ import annotations

FORMAT = "rdb"
SEQUENTIAL = False
# option -> (default, check): a tuple of allowed values, ``bool``, or ``"codec"`` (a code page)
OPTIONS: dict = {}
HAS_IMAGES = True          # the log carries row images (before/after)


def check_column(column) -> str | None:
    """What is wrong with a catalog column for this format (None: nothing)."""
    return None


def archive_sort_key(name: str) -> str:
    return name


# the decoder and the generator are imported on first use (the config and the DAG need
# only the names above)
_LAZY = {'decode': 'decoder', 'split': 'decoder', 'Synth': 'synth'}


def __getattr__(name: str):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    if name == "decode":
        from ..events import accounts_bytes

        value = accounts_bytes(value)
    globals()[name] = value
    return value


__all__ = ["FORMAT", "HAS_IMAGES", "OPTIONS", "SEQUENTIAL", "archive_sort_key", "check_column",
           *_LAZY]
