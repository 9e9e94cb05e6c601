"""Oracle Rdb LogMiner binary output (RMU /UNLOAD /AFTER_JOURNAL, Format=Binary)."""

from .decoder import decode
from .synth import Synth

FORMAT = "rdb"
SEQUENTIAL = False


def archive_sort_key(name: str) -> str:
    return name


__all__ = ["FORMAT", "SEQUENTIAL", "Synth", "archive_sort_key", "decode"]
