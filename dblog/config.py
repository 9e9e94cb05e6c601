"""``sources.yaml`` (SPEC section 2): which sources exist, their format, catalog and options."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from decoders.catalog import FORMATS, Catalog, load_catalog
from decoders.errors import ConfigError

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "include" / "sources.yaml"
NAME = re.compile(r"^[a-z0-9_]+$")

# per format: option -> (default, check)
_OPTIONS: dict[str, dict[str, tuple[Any, Any]]] = {
    "soliddb": {},
    "db2luw": {"byte_order": ("little", ("little", "big")), "codepage": ("utf-8", "codec")},
    "informix": {},
    "rdb": {},
    "lldf": {"codepage": ("cp037", "codec"), "rdw": (False, bool)},
}
DEFAULT_QUARANTINE_THRESHOLD = 0.05
DEFAULT_MIRROR_RETENTION = 7        # nights of published/mirror kept (SPEC section 5)


@dataclass(frozen=True)
class Source:
    name: str
    format: str
    catalog_path: Path
    timezone: str = "UTC"
    options: dict[str, Any] = field(default_factory=dict)
    quarantine_threshold: float = DEFAULT_QUARANTINE_THRESHOLD
    mirror_retention: int = DEFAULT_MIRROR_RETENTION
    mirror_missing_base_limit: int | None = None     # off unless set

    def catalog(self) -> Catalog:
        cat = load_catalog(self.catalog_path)
        if cat.format != self.format:
            raise ConfigError(str(self.catalog_path), "format",
                              f"catalog says {cat.format!r} but source {self.name} is {self.format!r}")
        return cat

    def to_json(self) -> dict:
        return {"name": self.name, "format": self.format, "timezone": self.timezone,
                "options": self.options, "quarantine_threshold": self.quarantine_threshold,
                "catalog_path": str(self.catalog_path), "mirror_retention": self.mirror_retention,
                "mirror_missing_base_limit": self.mirror_missing_base_limit}


@dataclass(frozen=True)
class Config:
    path: Path
    sources: tuple[Source, ...]

    def source(self, name: str) -> Source:
        for s in self.sources:
            if s.name == name:
                return s
        raise ConfigError(str(self.path), "sources",
                          f"no source named {name!r}; configured: {', '.join(s.name for s in self.sources)}")

    def select(self, names: list[str] | None) -> list[Source]:
        return list(self.sources) if not names else [self.source(n) for n in names]


def config_path(explicit: str | os.PathLike | None = None) -> Path:
    if explicit:
        return Path(explicit)
    env = os.environ.get("DBLOG_CONFIG")
    return Path(env) if env else DEFAULT_CONFIG


def load_config(path: str | os.PathLike | None = None) -> Config:
    path = config_path(path)
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(file, "(file)", f"cannot read: {exc.strerror or exc}") from exc
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else "(file)"
        raise ConfigError(file, where, f"not valid YAML ({getattr(exc, 'problem', exc)})") from exc
    if not isinstance(doc, dict) or "sources" not in doc:
        raise ConfigError(file, "sources", "missing: expected a top-level `sources:` list")
    items = doc["sources"]
    if not isinstance(items, list) or not items:
        raise ConfigError(file, "sources", "expected a non-empty list of sources")
    sources: list[Source] = []
    names: set[str] = set()
    for i, item in enumerate(items):
        where = f"sources[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(file, where, f"expected a mapping, got {type(item).__name__}")
        unknown = set(item) - {"name", "format", "catalog", "timezone", "options",
                               "quarantine_threshold", "mirror_retention",
                               "mirror_missing_base_limit"}
        if unknown:
            raise ConfigError(file, f"{where}.{sorted(unknown)[0]}", "unknown key")
        name = item.get("name")
        if not isinstance(name, str) or not NAME.match(name):
            raise ConfigError(file, f"{where}.name", f"expected [a-z0-9_]+, got {name!r}")
        if name in names:
            raise ConfigError(file, f"{where}.name", f"duplicate source name {name!r}")
        names.add(name)
        fmt = item.get("format")
        if fmt not in FORMATS:
            raise ConfigError(file, f"{where}.format", f"expected one of {', '.join(FORMATS)}, got {fmt!r}")
        cat = item.get("catalog")
        if not isinstance(cat, str) or not cat:
            raise ConfigError(file, f"{where}.catalog", f"expected a path, got {cat!r}")
        cat_path = (path.parent / cat).resolve()
        if not cat_path.is_file():
            raise ConfigError(file, f"{where}.catalog", f"file not found: {cat_path}")
        tz = item.get("timezone", "UTC")
        try:
            ZoneInfo(str(tz))
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(file, f"{where}.timezone", f"unknown time zone {tz!r}") from None
        opts_in = item.get("options") or {}
        if not isinstance(opts_in, dict):
            raise ConfigError(file, f"{where}.options", f"expected a mapping, got {opts_in!r}")
        options: dict[str, Any] = {}
        spec = _OPTIONS[fmt]
        for key, value in opts_in.items():
            if key not in spec:
                raise ConfigError(file, f"{where}.options.{key}",
                                  f"not an option of {fmt} (known: {', '.join(spec) or 'none'})")
            _, check = spec[key]
            if check == "codec":
                try:
                    "".encode(str(value))
                except LookupError:
                    raise ConfigError(file, f"{where}.options.{key}",
                                      f"unknown code page {value!r}") from None
            elif check is bool:
                if not isinstance(value, bool):
                    raise ConfigError(file, f"{where}.options.{key}", f"expected true/false, got {value!r}")
            elif value not in check:
                raise ConfigError(file, f"{where}.options.{key}",
                                  f"expected one of {', '.join(check)}, got {value!r}")
            options[key] = value
        for key, (default, _) in spec.items():
            options.setdefault(key, default)
        thr = item.get("quarantine_threshold", DEFAULT_QUARANTINE_THRESHOLD)
        if not isinstance(thr, (int, float)) or isinstance(thr, bool) or not 0 <= thr <= 1:
            raise ConfigError(file, f"{where}.quarantine_threshold",
                              f"expected a share between 0 and 1, got {thr!r}")
        retention = item.get("mirror_retention", DEFAULT_MIRROR_RETENTION)
        if not isinstance(retention, int) or isinstance(retention, bool) or retention < 1:
            raise ConfigError(file, f"{where}.mirror_retention",
                              f"expected a whole number of nights >= 1, got {retention!r}")
        limit = item.get("mirror_missing_base_limit")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise ConfigError(file, f"{where}.mirror_missing_base_limit",
                              f"expected a whole number >= 0 (or leave it out: no limit), got {limit!r}")
        sources.append(Source(name, fmt, cat_path, str(tz), options, float(thr), retention, limit))
    return Config(path, tuple(sources))
