"""Table definitions of one source (SPEC section 4), with clear errors for a malformed file."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError

TYPES = {
    "SMALLINT", "INTEGER", "BIGINT", "TINYINT", "DECIMAL", "REAL", "DOUBLE", "FLOAT", "CHAR",
    "VARCHAR", "BINARY", "VARBINARY", "DATE", "TIME", "TIMESTAMP", "BLOB", "CLOB",
}
NEEDS_LENGTH = {"CHAR", "VARCHAR", "BINARY", "VARBINARY"}
FORMATS = ("soliddb", "db2luw", "informix", "rdb", "lldf")


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool = True
    length: int | None = None
    precision: int | None = None
    scale: int | None = None

    def to_json(self) -> dict:
        out: dict[str, Any] = {"name": self.name, "type": self.type}
        for key in ("length", "precision", "scale"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        out["nullable"] = self.nullable
        return out


@dataclass(frozen=True)
class Table:
    id: str
    schema: str
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ()
    encoding: str | None = None
    initial_snapshot: str | None = None     # Parquet path, relative to the catalog file

    @property
    def qualified_name(self) -> str:
        return f"{self.schema}.{self.name}"

    def to_json(self) -> dict:
        out: dict[str, Any] = {"id": self.id, "schema": self.schema, "name": self.name}
        if self.key:
            out["key"] = list(self.key)
        if self.encoding:
            out["encoding"] = self.encoding
        if self.initial_snapshot:
            out["initial_snapshot"] = self.initial_snapshot
        out["columns"] = [c.to_json() for c in self.columns]
        return out


@dataclass(frozen=True)
class Catalog:
    source: str
    format: str
    tables: tuple[Table, ...]
    by_id: dict[str, Table] = field(default_factory=dict, compare=False, repr=False)
    by_name: dict[str, Table] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.by_id.update({t.id: t for t in self.tables})
        self.by_name.update({t.name: t for t in self.tables})
        self.by_name.update({t.qualified_name: t for t in self.tables})

    def table(self, table_id: str) -> Table | None:
        return self.by_id.get(table_id)

    def to_json(self) -> dict:
        return {"source": self.source, "format": self.format,
                "tables": [t.to_json() for t in self.tables]}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1)

    @classmethod
    def loads(cls, text: str, origin: str = "<catalog>") -> "Catalog":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(origin, f"line {exc.lineno} column {exc.colno}",
                              f"not valid JSON ({exc.msg})") from exc
        return parse_catalog(doc, origin)


def _need(obj: dict, key: str, kind: type | tuple, file: str, where: str) -> Any:
    if not isinstance(obj, dict):
        raise ConfigError(file, where, f"expected an object, got {type(obj).__name__}")
    if key not in obj:
        raise ConfigError(file, f"{where}.{key}" if where else key, "missing")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise ConfigError(file, f"{where}.{key}" if where else key,
                          f"expected {names}, got {type(value).__name__} {value!r}")
    return value


def _opt_int(obj: dict, key: str, file: str, where: str) -> int | None:
    if key not in obj or obj[key] is None:
        return None
    value = obj[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(file, f"{where}.{key}", f"expected a non-negative integer, got {value!r}")
    return value


def parse_catalog(doc: Any, file: str) -> Catalog:
    if not isinstance(doc, dict):
        raise ConfigError(file, "(top level)", f"expected an object, got {type(doc).__name__}")
    source = _need(doc, "source", str, file, "")
    fmt = _need(doc, "format", str, file, "")
    if fmt not in FORMATS:
        raise ConfigError(file, "format", f"expected one of {', '.join(FORMATS)}, got {fmt!r}")
    tables_doc = _need(doc, "tables", list, file, "")
    tables = []
    seen: set[str] = set()
    for ti, tdoc in enumerate(tables_doc):
        where = f"tables[{ti}]"
        tid = _need(tdoc, "id", str, file, where)
        if tid in seen:
            raise ConfigError(file, f"{where}.id", f"duplicate table id {tid!r}")
        seen.add(tid)
        schema = _need(tdoc, "schema", str, file, where)
        name = _need(tdoc, "name", str, file, where)
        encoding = tdoc.get("encoding")
        if encoding is not None:
            if not isinstance(encoding, str):
                raise ConfigError(file, f"{where}.encoding", f"expected a string, got {encoding!r}")
            try:
                "".encode(encoding)
            except LookupError:
                raise ConfigError(file, f"{where}.encoding",
                                  f"unknown encoding {encoding!r}") from None
        cols_doc = _need(tdoc, "columns", list, file, where)
        if not cols_doc:
            raise ConfigError(file, f"{where}.columns", "expected at least one column")
        columns = []
        names: set[str] = set()
        for ci, cdoc in enumerate(cols_doc):
            cwhere = f"{where}.columns[{ci}]"
            cname = _need(cdoc, "name", str, file, cwhere)
            if cname in names:
                raise ConfigError(file, f"{cwhere}.name", f"duplicate column {cname!r}")
            names.add(cname)
            ctype = _need(cdoc, "type", str, file, cwhere).upper()
            if ctype not in TYPES:
                raise ConfigError(file, f"{cwhere}.type",
                                  f"expected one of {', '.join(sorted(TYPES))}, got {ctype!r}")
            nullable = cdoc.get("nullable", True)
            if not isinstance(nullable, bool):
                raise ConfigError(file, f"{cwhere}.nullable", f"expected true/false, got {nullable!r}")
            length = _opt_int(cdoc, "length", file, cwhere)
            precision = _opt_int(cdoc, "precision", file, cwhere)
            scale = _opt_int(cdoc, "scale", file, cwhere)
            if ctype in NEEDS_LENGTH and not length:
                raise ConfigError(file, f"{cwhere}.length", f"{ctype} needs a positive length")
            if ctype == "DECIMAL":
                if not precision or precision > 31:
                    raise ConfigError(file, f"{cwhere}.precision",
                                      f"DECIMAL needs a precision of 1..31, got {precision!r}")
                if scale is None:
                    scale = 0
                if scale > precision:
                    raise ConfigError(file, f"{cwhere}.scale",
                                      f"scale {scale} exceeds precision {precision}")
            if ctype == "FLOAT" and fmt == "lldf" and length not in (4, 8):
                raise ConfigError(file, f"{cwhere}.length", "lldf FLOAT needs length 4 or 8")
            columns.append(Column(cname, ctype, nullable, length, precision, scale))
        key = tdoc.get("key", [])
        if not isinstance(key, list) or not all(isinstance(k, str) for k in key):
            raise ConfigError(file, f"{where}.key", f"expected a list of column names, got {key!r}")
        for k in key:
            if k not in names:
                raise ConfigError(file, f"{where}.key", f"key column {k!r} is not a column")
        snapshot = tdoc.get("initial_snapshot")
        if snapshot is not None and (not isinstance(snapshot, str) or not snapshot):
            raise ConfigError(file, f"{where}.initial_snapshot",
                              f"expected a Parquet path (relative to the catalog), got {snapshot!r}")
        tables.append(Table(tid, schema, name, tuple(columns), tuple(key), encoding, snapshot))
    return Catalog(source, fmt, tuple(tables))


def load_catalog(path: str | Path) -> Catalog:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), "(file)", f"cannot read: {exc.strerror or exc}") from exc
    return Catalog.loads(text, str(path))


SOURCE_NAME = re.compile(r"^[a-z0-9_]+$")
