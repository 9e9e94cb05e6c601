"""Table definitions of one source (SPEC section 4), with clear errors for a malformed file."""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import FORMATS, get as _format
from .errors import ConfigError

TYPES = {
    "SMALLINT", "INTEGER", "BIGINT", "TINYINT", "DECIMAL", "REAL", "DOUBLE", "FLOAT", "CHAR",
    "VARCHAR", "BINARY", "VARBINARY", "DATE", "TIME", "TIMESTAMP", "BLOB", "CLOB",
}
MAX_INT_FIELD = 2**31 - 1          # lengths, precisions, scales: what a 4-byte length can say
NEEDS_LENGTH = {"CHAR", "VARCHAR", "BINARY", "VARBINARY"}
# decoded by every code page check: each single byte, and runs of letters and blanks
_CODEC_PROBES = (bytes(range(256)), b"ABC  ", b"\xc1\xc2\xc3\x40\x40", b" " * 64)


def codec_problem(name: object) -> str | None:
    """Why ``name`` cannot be the code page of character data (None when it can).

    A code page must name a text codec (``codecs.lookup``) that turns any bytes into text:
    decoding must never raise with ``errors="replace"``. That refuses unknown names, the
    bytes-to-bytes codecs (``hex``, ``zlib``) and the special-purpose text codecs that fail
    on ordinary bytes (``idna``, ``punycode``, ``undefined``), which would otherwise pass the
    configuration and crash every archive."""
    if not isinstance(name, str) or not name:
        return f"expected a code page name, got {name!r}"
    try:
        info = codecs.lookup(name)
    except (LookupError, ValueError, TypeError):
        return f"unknown encoding {name!r}"
    if not getattr(info, "_is_text_encoding", True):
        return f"{name!r} is not a text encoding (it turns bytes into bytes)"
    for probe in _CODEC_PROBES:
        try:
            probe.decode(name, "replace")
        except Exception as exc:  # noqa: BLE001 - any failure disqualifies the codec
            return (f"{name!r} is not a character set: it cannot decode arbitrary bytes "
                    f"({type(exc).__name__}: {exc})")
    return None


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
        except RecursionError:
            raise ConfigError(origin, "(file)", "not a catalog: JSON nested too deep to read") from None
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
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_INT_FIELD:
        raise ConfigError(file, f"{where}.{key}",
                          f"expected an integer from 0 to {MAX_INT_FIELD}, got {value!r}")
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
            problem = codec_problem(encoding)
            if problem:
                raise ConfigError(file, f"{where}.encoding", problem)
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
            column = Column(cname, ctype, nullable, length, precision, scale)
            problem = _format(fmt).check_column(column)
            if problem:
                raise ConfigError(file, f"{cwhere}.length" if ctype == "FLOAT" else cwhere, problem)
            columns.append(column)
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


def read_text_file(path: Path) -> str:
    """A configuration file's text (UTF-8); ``ConfigError`` naming the place of a bad byte."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(str(path), "(file)", f"cannot read: {exc.strerror or exc}") from exc
    except ValueError as exc:   # e.g. an embedded NUL in the path
        raise ConfigError(str(path), "(file)", f"cannot read: {exc}") from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(str(path), f"line {line} column {col}",
                          f"not UTF-8: byte 0x{data[exc.start]:02X} at offset {exc.start}") from None


def load_catalog(path: str | Path) -> Catalog:
    path = Path(path)
    return Catalog.loads(read_text_file(path), str(path))


SOURCE_NAME = re.compile(r"[a-z0-9_]+")
