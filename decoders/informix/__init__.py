"""Informix ``onlog`` text output, one logical-log file per archive (SPEC section 3, informix).

Sequential: a source's logical-log files are decoded in uniqid order in one task, passing
the open transactions along (``decode`` returns them as the carry-out), so that a
transaction spanning files, or nights, links up. Positions are ``<uniqid><addr>`` as 8 + 8
upper-case hex digits; a transaction is ``<uniqid>:<begin addr>``.
"""

from .decoder import decode, position, trx_id_of, uniqid_of
from .synth import Synth

FORMAT = "informix"
SEQUENTIAL = True


def archive_sort_key(name: str) -> tuple[int, str]:
    """Logical-log files in uniqid order (the ``_<uniqid>.txt`` suffix); a file without one
    sorts first, by name (it is quarantined whole)."""
    uniqid = uniqid_of(name)
    return (-1 if uniqid is None else uniqid, name)


__all__ = ["FORMAT", "SEQUENTIAL", "Synth", "archive_sort_key", "decode", "position",
           "trx_id_of"]
