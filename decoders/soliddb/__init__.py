"""solidDB SYS_LOG (CSV export of the Log Reader's virtual table)."""

from .decoder import decode
from .synth import Synth

FORMAT = "soliddb"
SEQUENTIAL = False


def archive_sort_key(name: str) -> str:
    return name


__all__ = ["FORMAT", "SEQUENTIAL", "Synth", "archive_sort_key", "decode"]
