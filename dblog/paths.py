"""The data root layout (SPEC section 2) and run ids."""

from __future__ import annotations

import datetime as _dt
import os
import re
from dataclasses import dataclass
from pathlib import Path

DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


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
        return self.root / "quarantine"

    @property
    def audit(self) -> Path:
        return self.root / "audit"

    def state(self, source: str) -> Path:
        return self.root / "state" / source

    def reports(self, date: str) -> Path:
        return self.root / "reports" / date
