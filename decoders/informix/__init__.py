"""Informix ``onlog`` text output, one logical-log file per archive (SPEC section 3, informix).

Where records are assigned to their transactions (``RESOLVE``):

* ``"decoder"``: sequential; a source's logical-log files are decoded in uniqid order in one
  task, passing the open transactions along (``decode`` returns them as the carry-out), so
  that a transaction spanning files, or nights, links up;
* ``"ordering"``: every file, and every byte range of a big file (``split``), decodes on its
  own into one row per record with its facts (``decoder.decode_records``); the ordering
  job's hook ``resolve_transactions`` (``resolve.py``) assigns records to transactions, the
  open ones held as rows by the generic held-state step. Needs an ordering job that applies
  format hooks (contract 3).

Both give the same rows (tests/test_informix_resolve.py). Positions are ``<uniqid><addr>``
as 8 + 8 upper-case hex digits; a transaction is ``<uniqid>:<begin addr>``.
"""

from __future__ import annotations

from .layout import RE_UNIQID as _RE_UNIQID

FORMAT = "informix"
RESOLVE = "ordering"
SEQUENTIAL = RESOLVE == "decoder"
# option -> (default, check): a tuple of allowed values, ``bool``, or ``"codec"`` (a code page)
OPTIONS: dict = {}
HAS_IMAGES = False          # the log carries row images (before/after)
# bytes of this format a local driver frames itself (``dblog.decode.DRIVER_FRAMING_MAX``):
# ``split`` reads a text of 128 MB or more, or any text once a process has read 128 MB
# (``columns.NATIVE_MIN_BYTES``, ``NATIVE_AFTER_BYTES``), with the compiled pass, whose load
# (numba, 0.5-0.8 s) a driver that decodes nothing would pay only to frame; the planning
# job's workers load it once for their decode too
DRIVER_FRAMING_MAX = 120 << 20


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
_LAZY = {'position': 'decoder', 'trx_id_of': 'decoder', 'uniqid_of': 'decoder', 'decode': 'decoder',
         'decode_records': 'decoder', 'Synth': 'synth'}
if RESOLVE == "ordering":
    _LAZY.update(split='decoder', resolve_transactions='resolve', resolve_table='resolve',
                 RESOLVE_KEY='resolve')


def __getattr__(name: str):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module = importlib.import_module(f"{__name__}.{where}")
    value = getattr(module, "decode_records" if name == "decode" and RESOLVE == "ordering"
                    else name)
    if name in ("decode", "decode_records"):
        from ..events import accounts_bytes

        value = accounts_bytes(value, lines=True)
    globals()[name] = value
    return value


__all__ = ["DRIVER_FRAMING_MAX", "FORMAT", "HAS_IMAGES", "OPTIONS", "SEQUENTIAL", "archive_sort_key",
           "check_column", *_LAZY]
