"""``sources.yaml`` (SPEC section 2): which sources exist, their format, catalog and options."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml

from decoders import FORMATS, get as get_format
from decoders.catalog import Catalog, codec_problem, load_catalog, read_text_file
from decoders.errors import ConfigError

from .checks import DEFAULT_CHECKS, parse_checks

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "include" / "sources.yaml"
NAME = re.compile(r"[a-z0-9_]+")      # used with fullmatch: "pos_solid\n" is not a name

DEFAULT_QUARANTINE_THRESHOLD = 0.05
DEFAULT_MIRROR_RETENTION = 7        # nights of published/mirror kept (SPEC section 5)
UNKNOWN_TABLES = ("quarantine", "fail")     # SPEC section 4; quarantine is the default
SOURCE_KEYS = {"name", "format", "catalog", "timezone", "options", "quarantine_threshold",
               "unknown_tables", "checks", "mirror_retention",
               "mirror_missing_base_limit"}


@dataclass(frozen=True)
class Source:
    name: str
    format: str
    catalog_path: Path
    timezone: str = "UTC"
    options: dict[str, Any] = field(default_factory=dict)
    quarantine_threshold: float = DEFAULT_QUARANTINE_THRESHOLD         # share of records
    quarantine_threshold_bytes: float = DEFAULT_QUARANTINE_THRESHOLD   # share of bytes
    unknown_tables: str = "quarantine"
    checks: tuple = DEFAULT_CHECKS   # history checks (dblog/checks.py)
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
                "quarantine_threshold_bytes": self.quarantine_threshold_bytes,
                "unknown_tables": self.unknown_tables,
                "checks": [c.to_json() for c in self.checks],
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


def _share(value: Any, file: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(file, key, f"expected a share between 0 and 1, got {value!r}")
    return float(value)


def quarantine_thresholds(value: Any, file: str, key: str) -> tuple[float, float]:
    """``quarantine_threshold``: one share for records and bytes, or ``{records: r, bytes: b}``."""
    if isinstance(value, dict):
        unknown = [k for k in value if k not in ("records", "bytes")]
        if unknown:
            raise ConfigError(file, f"{key}.{unknown[0]}", "unknown key (known: records, bytes)")
        return (_share(value.get("records", DEFAULT_QUARANTINE_THRESHOLD), file, f"{key}.records"),
                _share(value.get("bytes", DEFAULT_QUARANTINE_THRESHOLD), file, f"{key}.bytes"))
    share = _share(value, file, key)
    return share, share


def _parse_yaml(text: str, file: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark else "(file)"
        raise ConfigError(file, where, f"not valid YAML ({getattr(exc, 'problem', exc)})") from exc
    except RecursionError:
        raise ConfigError(file, "(file)", "not a sources file: YAML nested too deep to read") from None


def load_config(path: str | os.PathLike | None = None) -> Config:
    path = config_path(path)
    file = str(path)
    doc = _parse_yaml(read_text_file(path), file)
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
        unknown = sorted((k for k in item if k not in SOURCE_KEYS), key=repr)
        if unknown:
            raise ConfigError(file, f"{where}.{unknown[0]}",
                              f"unknown key (known: {', '.join(sorted(SOURCE_KEYS))})")
        name = item.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ConfigError(file, f"{where}.name", f"expected [a-z0-9_]+, got {name!r}")
        if name in names:
            raise ConfigError(file, f"{where}.name", f"duplicate source name {name!r}")
        names.add(name)
        fmt = item.get("format")
        if not isinstance(fmt, str) or fmt not in FORMATS:
            raise ConfigError(file, f"{where}.format", f"expected one of {', '.join(FORMATS)}, got {fmt!r}")
        cat = item.get("catalog")
        if not isinstance(cat, str) or not cat or "\0" in cat:
            raise ConfigError(file, f"{where}.catalog", f"expected a path, got {cat!r}")
        cat_path = (path.parent / cat).resolve()
        if not cat_path.is_file():
            raise ConfigError(file, f"{where}.catalog", f"file not found: {cat_path}")
        tz = item.get("timezone", "UTC")
        if not isinstance(tz, str):
            raise ConfigError(file, f"{where}.timezone", f"expected a time zone name, got {tz!r}")
        try:
            ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            raise ConfigError(file, f"{where}.timezone", f"unknown time zone {tz!r}") from None
        opts_in = item.get("options") or {}
        if not isinstance(opts_in, dict):
            raise ConfigError(file, f"{where}.options", f"expected a mapping, got {opts_in!r}")
        options: dict[str, Any] = {}
        spec = get_format(fmt).OPTIONS      # per format: option -> (default, check)
        for key, value in opts_in.items():
            if key not in spec:
                raise ConfigError(file, f"{where}.options.{key}",
                                  f"not an option of {fmt} (known: {', '.join(spec) or 'none'})")
            _, check = spec[key]
            if check == "codec":
                problem = codec_problem(value)
                if problem:
                    raise ConfigError(file, f"{where}.options.{key}", f"bad code page: {problem}")
            elif check is bool:
                if not isinstance(value, bool):
                    raise ConfigError(file, f"{where}.options.{key}", f"expected true/false, got {value!r}")
            elif value not in check:
                raise ConfigError(file, f"{where}.options.{key}",
                                  f"expected one of {', '.join(check)}, got {value!r}")
            options[key] = value
        for key, (default, _) in spec.items():
            options.setdefault(key, default)
        thr_records, thr_bytes = quarantine_thresholds(
            item.get("quarantine_threshold", DEFAULT_QUARANTINE_THRESHOLD), file,
            f"{where}.quarantine_threshold")
        unknown_tables = item.get("unknown_tables", "quarantine")
        if not isinstance(unknown_tables, str) or unknown_tables not in UNKNOWN_TABLES:
            raise ConfigError(file, f"{where}.unknown_tables",
                              f"expected one of {', '.join(UNKNOWN_TABLES)}, got {unknown_tables!r}")
        checks = parse_checks(file, f"{where}.checks", item.get("checks"))
        retention = item.get("mirror_retention", DEFAULT_MIRROR_RETENTION)
        if not isinstance(retention, int) or isinstance(retention, bool) or retention < 1:
            raise ConfigError(file, f"{where}.mirror_retention",
                              f"expected a whole number of nights >= 1, got {retention!r}")
        limit = item.get("mirror_missing_base_limit")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise ConfigError(file, f"{where}.mirror_missing_base_limit",
                              f"expected a whole number >= 0 (or leave it out: no limit), got {limit!r}")
        sources.append(Source(name, fmt, cat_path, tz, options, thr_records, thr_bytes,
                              unknown_tables, checks, retention, limit))
    return Config(path, tuple(sources))
