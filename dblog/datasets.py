"""The datasets a run stages and publishes, as data (one place every stage and the publish read).

Every dataset of this registry is written by the run under ``staging/<run_id>/<name>/`` in
its layout, and the one publish of the run makes all of them visible together (SPEC
section 5, "Publishing"). A stage that adds a dataset registers it here; the publish, the
report and the lineage events then know it without further wiring.

Layouts (``<name>`` is the folder under the staging directory and under ``published/``):

``night``   ``<name>/source=<S>/date=<D>/``                 (changes, transactions, ...)
``table``   ``<name>/<S>/<SCHEMA>.<TABLE>/date=<D>/``        (tables, mirror)

``retention``: ``None`` keeps every night; otherwise the name of the per-source setting in
``sources.yaml`` that says how many nights are kept (e.g. ``mirror_retention``).
"""

from __future__ import annotations

from dataclasses import dataclass

NIGHT, TABLE = "night", "table"
LAYOUTS = (NIGHT, TABLE)


@dataclass(frozen=True)
class Dataset:
    name: str
    layout: str
    description: str
    retention: str | None = None

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"dataset {self.name}: layout must be one of {LAYOUTS}, got {self.layout!r}")


REGISTRY: dict[str, Dataset] = {}


def register(dataset: Dataset) -> Dataset:
    known = REGISTRY.get(dataset.name)
    if known is not None and known != dataset:
        raise ValueError(f"dataset {dataset.name} registered twice with different definitions")
    REGISTRY[dataset.name] = dataset
    return dataset


def published() -> list[Dataset]:
    """Every registered dataset, in registration order."""
    return list(REGISTRY.values())


CHANGES = register(Dataset("changes", NIGHT, "the ordered change stream (SPEC section 5)"))
TRANSACTIONS = register(Dataset("transactions", NIGHT, "one row per transaction that ended"))
TABLES = register(Dataset("tables", TABLE, "each table's changes with typed before_/after_ columns"))
QUARANTINE = register(Dataset("quarantine", NIGHT, "records that could not be decoded"))
AUDIT = register(Dataset("audit", NIGHT, "per archive: records and bytes read and their buckets"))
METRICS = register(Dataset("metrics", NIGHT, "per night, source and table: what the night measured "
                                             "(dblog/metrics.py), and the history checks' verdicts"))
MIRROR = register(Dataset("mirror", TABLE, "each keyed table as of the night (SPEC section 5, "
                                          "Change products)", retention="mirror_retention"))
NET_CHANGES = register(Dataset("net_changes", NIGHT, "one row per (table, key) changed that night"))
