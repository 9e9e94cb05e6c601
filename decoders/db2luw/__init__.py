"""Db2 LUW log-read buffer streams (db2ReadLog/sqlurlog output, SPEC section 3): the Version 7
layout (``layout: v7``, the default) and Db2 10.1 to 12.1 (``layout: v10``)."""

from __future__ import annotations

FORMAT = "db2luw"
SEQUENTIAL = False
# option -> (default, check): a tuple of allowed values, ``bool``, or ``"codec"`` (a code page)
OPTIONS: dict = {"byte_order": ("little", ("little", "big")), "codepage": ("utf-8", "codec"),
                 "layout": ("v7", ("v7", "v10"))}
HAS_IMAGES = True          # the log carries row images (before/after)


def check_column(column) -> str | None:
    """What is wrong with a catalog column for this format (None: nothing): Db2's limits on
    what a fixed section can hold (CHAR/BINARY 1..255 bytes, DECIMAL 1..31 digits)."""
    if column.type in ("CHAR", "BINARY") and not 1 <= (column.length or 0) <= 255:
        return f"db2luw {column.type} length must be 1..255 (Db2's limit), got {column.length}"
    if column.type == "DECIMAL" and column.precision is not None and not 1 <= column.precision <= 31:
        return f"db2luw DECIMAL precision must be 1..31 (Db2's limit), got {column.precision}"
    return None


def archive_sort_key(name: str) -> str:
    """Archives are named ``S<7-digit log sequence>.LOG``: name order is log order."""
    return name


# the decoder and the generator are imported on first use (the config and the DAG need
# only the names above)
_LAZY = {'decode': 'decoder', 'split': 'decoder', 'Synth': 'synth',
         'resolve_transactions': 'resolve', 'resolve_scope': 'resolve',
         'resolve_scope_table': 'resolve'}


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
