"""BMC AMI Log Master for Db2: logical log data files (LLDF), SPEC section 3 ``lldf``.

Options (``ctx.options``): ``codepage`` of the CHAR header fields and of the DDL text
(default ``cp037``; row CHAR/VARCHAR/DATE/TIME/TIMESTAMP use the table's ``encoding``, same
default) and ``rdw`` (default false: each record preceded by a z/OS RDW).

Log Master files are unordered: archives of a night are independent (``SEQUENTIAL`` is
False). Segmented records become ``segment`` rows that the ordering job groups by
``seg_key``, concatenates (``assemble_segments`` does it in plain Python) and decodes with
``decode_reassembled``. The decisions on positions, dispositions, DDL and exchange records
are listed in ``decoder``'s docstring.
"""

from __future__ import annotations

FORMAT = "lldf"
SEQUENTIAL = False
# option -> (default, check): a tuple of allowed values, ``bool``, or ``"codec"`` (a code page)
OPTIONS: dict = {"codepage": ("cp037", "codec"), "rdw": (False, bool)}
HAS_IMAGES = True          # the log carries row images (before/after)


def check_column(column) -> str | None:
    """What is wrong with a catalog column for this format (None: nothing)."""
    if column.type == "FLOAT" and column.length not in (4, 8):
        return "lldf FLOAT needs length 4 or 8"
    return None


def archive_sort_key(name: str) -> str:
    return name


# the decoder and the generator are imported on first use (the config and the DAG need
# only the names above)
_LAZY = {'assemble_segments': 'decoder', 'decode_reassembled': 'decoder', 'decode': 'decoder', 'Synth': 'synth'}


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
