"""The data root layout (SPEC section 2) and run ids."""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
INDEX_FILE = "_index.json"     # published/state/<source>/_index.json: latest night, nights kept
NIGHT_FILE = "night.json"      # published/state/<source>/<date>/night.json: that night's record


def data_root_path(explicit: str | os.PathLike | None = None) -> Path:
    if explicit:
        return Path(explicit).resolve()
    env = os.environ.get("DBLOG_DATA_ROOT")
    return Path(env).resolve() if env else Path("data").resolve()


def check_date(text: str) -> str:
    if not DATE.match(text or ""):
        raise ValueError(f"logical date must be YYYY-MM-DD, got {text!r}")
    _dt.date.fromisoformat(text)
    return text


def safe_run_id(run_id: str) -> str:
    """Airflow run ids hold ':' and '+'; keep them readable but path-safe."""
    return re.sub(r"[^A-Za-z0-9_.=-]", "_", run_id)


def new_run_id(date: str) -> str:
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    return f"dblog_{date}_{now}"


@dataclass(frozen=True)
class DataRoot:
    root: Path

    @classmethod
    def of(cls, explicit: str | os.PathLike | None = None) -> "DataRoot":
        return cls(data_root_path(explicit))

    @property
    def landing(self) -> Path:
        return self.root / "landing"

    def landing_night(self, source: str, date: str) -> Path:
        return self.landing / source / date

    def staging(self, run_id: str) -> Path:
        return self.root / "staging" / run_id

    @property
    def published(self) -> Path:
        return self.root / "published"

    @property
    def versions(self) -> Path:
        return self.root / ".published"

    @property
    def quarantine(self) -> Path:
        return self.published / "quarantine"

    @property
    def audit(self) -> Path:
        return self.published / "audit"

    def state(self, source: str) -> Path:
        """The published state of a source: ``published/state/<source>/<date>/`` per night."""
        return self.published / "state" / source

    def reports(self, date: str) -> Path:
        return self.root / "reports" / date


# ----------------------------------------------------------------- the published nights of a source
# Small JSON documents the publish writes inside each version (dblog/publish.py): reading
# them costs the same whatever the number of nights published.

def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_index(version: Path, source: str) -> dict | None:
    """``state/<source>/_index.json`` of a version (or of ``published``): latest night, nights kept."""
    return _read(Path(version) / "state" / source / INDEX_FILE)


def night_record(version: Path, source: str, date: str) -> dict | None:
    """``state/<source>/<date>/night.json``: the run, the night it continued from (``prev``),
    the published night before it (``before``), the paths it published."""
    return _read(Path(version) / "state" / source / date / NIGHT_FILE)


def published_dates(root: DataRoot, source: str, after: str) -> list[str]:
    """The published nights of ``source`` later than ``after`` (latest first): walks back
    from the latest night, so the cost is the number of nights returned."""
    version = Path(os.path.realpath(root.published))
    out, d = [], (read_index(version, source) or {}).get("latest")
    while d is not None and d > after and len(out) < 1_000_000:
        out.append(d)
        d = (night_record(version, source, d) or {}).get("before")
    return out


def previous_state(root: DataRoot, source: str, date: str) -> Path | None:
    """The state night ``date`` continues from: for a night published before, the one its
    first run read; else the latest published night before it (None: there is none)."""
    version = Path(os.path.realpath(root.published))
    index = read_index(version, source)
    if index is None:
        return None
    own = night_record(version, source, date)
    if own is not None:
        prev = own.get("prev")
    else:
        prev = index.get("latest")
        while prev is not None and prev >= date:
            prev = (night_record(version, source, prev) or {}).get("before")
    return root.state(source) / prev if prev else None
