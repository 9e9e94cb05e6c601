"""Informix ``onlog`` text output, one logical-log file per archive (SPEC section 3, informix).

Sequential: a source's logical-log files are decoded in uniqid order in one task, passing
the open transactions along (``decode`` returns them as the carry-out), so that a
transaction spanning files, or nights, links up. Positions are ``<uniqid><addr>`` as 8 + 8
upper-case hex digits; a transaction is ``<uniqid>:<begin addr>``.
"""

from __future__ import annotations

from .layout import RE_UNIQID as _RE_UNIQID

FORMAT = "informix"
SEQUENTIAL = True
# option -> (default, check): a tuple of allowed values, ``bool``, or ``"codec"`` (a code page)
OPTIONS: dict = {}
HAS_IMAGES = False          # the log carries row images (before/after)


def check_column(column) -> str | None:
    """What is wrong with a catalog column for this format (None: nothing)."""
    return None


def archive_sort_key(name: str) -> tuple[int, str]:
    """Logical-log files in uniqid order (the ``_<uniqid>.txt`` suffix); a file without one
    sorts first, by name (it is quarantined whole)."""
    m = _RE_UNIQID.search(name.replace("\\", "/").rsplit("/", 1)[-1])
    return (-1 if m is None else int(m.group(1)), name)


# the decoder and the generator are imported on first use (the config and the DAG need
# only the names above)
_LAZY = {'position': 'decoder', 'trx_id_of': 'decoder', 'uniqid_of': 'decoder', 'decode': 'decoder', 'Synth': 'synth'}


def __getattr__(name: str):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    if name == "decode":
        from ..events import accounts_bytes

        value = accounts_bytes(value, lines=True)
    globals()[name] = value
    return value


__all__ = ["FORMAT", "HAS_IMAGES", "OPTIONS", "SEQUENTIAL", "archive_sort_key", "check_column",
           *_LAZY]
