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

from .decoder import assemble_segments, decode, decode_reassembled
from .synth import Synth

FORMAT = "lldf"
SEQUENTIAL = False


def archive_sort_key(name: str) -> str:
    return name


__all__ = ["FORMAT", "SEQUENTIAL", "Synth", "archive_sort_key", "assemble_segments", "decode",
           "decode_reassembled"]
