"""Format hooks (contract 3): a format package may export

    resolve_transactions(events_df) -> events_df

a pure DataFrame function applied to that format's rows (the night's events plus the rows
held in ``state/`` from earlier nights, with the ``from_state`` column) before the generic
steps; it may, e.g., assign records to their transactions (``trx_id``, ``trx_end``, ...).
It must return the same columns (extra ones are dropped, missing ones are an error).

A hook that changes only some rows may also export

    resolve_scope() -> Column

a predicate on columns the hook never changes that holds for every row it may change (and
for the rows it returns in their place): the rows outside it pass the hook unchanged, and
the ordering job reads them from the decoded events instead of writing them again
(Db2 LUW changes only its v10 undo rows; Informix assigns every record, no scope).

A format with a ``resolve_scope`` may also export ``resolve_scope_table(table)``: the same
predicate on an Arrow table (a boolean array), so that a pass in Python tasks over the
decoded files can leave out the rows the hook replaced (``trxfiles``).

A hook that needs every row of a key together may also export ``RESOLVE_KEY`` and
``resolve_table``: the ordering then runs it on the decoded files in Python tasks
(``filehook``), with the same rows, when the night is read as the decode wrote it.
"""

from __future__ import annotations

from typing import Callable

from decoders import get as get_format

HOOK = "resolve_transactions"
SCOPE = "resolve_scope"
SCOPE_TABLE = "resolve_scope_table"


def format_hooks(formats) -> dict[str, Callable]:
    """format -> its ``resolve_transactions``, for the formats (of those given) that have one."""
    out = {}
    for f in sorted(set(formats)):
        fn = getattr(get_format(f), HOOK, None)
        if fn is not None:
            out[f] = fn
    return out


def has_scope(fmt: str) -> bool:
    """Whether the format's hook changes only the rows of its ``resolve_scope``."""
    return getattr(get_format(fmt), SCOPE, None) is not None


def scope_table(fmt: str):
    """The format's ``resolve_scope_table``, or None."""
    return getattr(get_format(fmt), SCOPE_TABLE, None)


def hooked_rows(hooks: dict[str, Callable]):
    """The predicate of the rows a hook may change: a hooked format's rows, within its
    ``resolve_scope`` when it has one. Never null (a null scope value counts as outside)."""
    from pyspark.sql import functions as F

    out = F.lit(False)
    for fmt in sorted(hooks):
        scope = getattr(get_format(fmt), SCOPE, None)
        mine = F.col("format") == fmt
        out = out | (mine & F.coalesce(scope(), F.lit(False)) if scope is not None else mine)
    return F.coalesce(out, F.lit(False))


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
