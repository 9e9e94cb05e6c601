"""Format hooks (contract 3): a format package may export

    resolve_transactions(events_df) -> events_df

a pure DataFrame function applied to that format's rows (the night's events plus the rows
held in ``state/`` from earlier nights, with the ``from_state`` column) before the generic
steps; it may, e.g., assign records to their transactions (``trx_id``, ``trx_end``, ...).
It must return the same columns (extra ones are dropped, missing ones are an error).
"""

from __future__ import annotations

from typing import Callable

from decoders import get as get_format

HOOK = "resolve_transactions"


def format_hooks(formats) -> dict[str, Callable]:
    """format -> its ``resolve_transactions``, for the formats (of those given) that have one."""
    out = {}
    for f in sorted(set(formats)):
        fn = getattr(get_format(f), HOOK, None)
        if fn is not None:
            out[f] = fn
    return out


def apply_hooks(events, hooks: dict[str, Callable]):
    """events -> events with each hooked format's rows replaced by its hook's output."""
    from pyspark.sql import functions as F

    if not hooks:
        return events
    columns = events.columns
    out = events.filter(~F.col("format").isin(*hooks))
    for fmt, fn in sorted(hooks.items()):
        resolved = fn(events.filter(F.col("format") == fmt))
        missing = [c for c in columns if c not in resolved.columns]
        if missing:
            raise ValueError(f"{fmt}.{HOOK} dropped columns {missing}")
        out = out.unionByName(resolved.select(*columns))
    return out
