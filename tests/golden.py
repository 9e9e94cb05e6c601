"""Golden-file helper: decode an archive, compare with an expected ``.jsonl``.

On mismatch the actual output is written beside the expected file (``*.actual.jsonl``)
and the test fails naming both paths. Set ``DBLOG_UPDATE_GOLDEN=1`` to (re)write the
expected files after reviewing a deliberate change.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path

from decoders.events import EVENT_COLUMNS

GOLDEN = Path(__file__).parent / "golden"


def _jsonable(v):
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if isinstance(v, _dt.datetime):
        return v.isoformat()
    return v


def rows_to_jsonl(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        lines.append(json.dumps({k: _jsonable(r[k]) for k in EVENT_COLUMNS if r.get(k) is not None},
                                sort_keys=False, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def check_golden(rows: list[dict], expected_path: Path) -> None:
    actual = rows_to_jsonl(rows)
    if os.environ.get("DBLOG_UPDATE_GOLDEN") == "1" or not expected_path.exists():
        if os.environ.get("DBLOG_UPDATE_GOLDEN") != "1":
            raise AssertionError(f"golden file {expected_path} is missing; "
                                 "review the decoder output and run with DBLOG_UPDATE_GOLDEN=1")
        expected_path.write_text(actual, encoding="utf-8")
        return
    expected = expected_path.read_text(encoding="utf-8")
    if actual != expected:
        actual_path = expected_path.with_suffix(".actual.jsonl")
        actual_path.write_text(actual, encoding="utf-8")
        raise AssertionError(f"decoded events differ from {expected_path}; actual output written "
                             f"to {actual_path} (diff them)")
