"""Db2 LUW Version 7 log-read buffer streams (db2ReadLog/sqlurlog output, SPEC section 3)."""

from .decoder import decode
from .synth import Synth

FORMAT = "db2luw"
SEQUENTIAL = False


def archive_sort_key(name: str) -> str:
    """Archives are named ``S<7-digit log sequence>.LOG``: name order is log order."""
    return name


__all__ = ["FORMAT", "SEQUENTIAL", "Synth", "archive_sort_key", "decode"]
