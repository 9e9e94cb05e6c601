"""Checks of a night's metrics against their own history (SPEC section 5, ``checks``).

A check compares one metric of tonight (``dblog/metrics.py``) with the same metric over a
window of earlier nights, the way Deequ's anomaly checks and dbt's warn/error thresholds do:

``max_ratio: R``      tonight over R x the median of the window, or under median / R, is
                      flagged (``direction: up`` or ``down`` judges one side only)
``max_increase: X``   tonight more than X above the median (for shares: 0.01 = one point)
``min``, ``max``      absolute bounds on tonight's value (need no history)

``severity: error`` fails the night's validation like a failed expectation (nothing is
published, ``dblog run`` exits 1, the message names the metric, tonight's value and the
nights it was compared with); ``warn`` only reports; ``off`` switches a check off.

History is the **published** metrics of the ``window`` calendar nights before tonight
(``metrics.history``: one path per night of the window, so the cost is bounded by the
window, never by the history; nights that failed validation were not published and are not
history). The median and increase bounds judge only once at least ``min_history`` of those
nights are published (default 7, or the window when it is shorter); until then the check
reports "not enough history". Absolute bounds judge from the first night.

Every source gets ``DEFAULT_CHECKS``; a configured check with the same ``name`` replaces a
default (``{name: volume_explosion, severity: off}`` switches it off).
"""

from __future__ import annotations

import datetime as _dt
import re
import statistics
from dataclasses import asdict, dataclass, field, replace

from decoders.errors import ConfigError

from . import metrics as M

SEVERITIES = ("warn", "error", "off")
DIRECTIONS = ("both", "up", "down")
KEYS = ("name", "metric", "table", "max_ratio", "direction", "max_increase", "min", "max",
        "window", "min_history", "severity")
DEFAULT_WINDOW = 14
DEFAULT_MIN_HISTORY = 7
MAX_WINDOW = 366
_NAME = re.compile(r"^[a-z0-9_]+$")


@dataclass(frozen=True)
class Check:
    name: str
    metric: str
    severity: str = "error"
    table: str | None = None          # a table id of the catalog: that table's metric
    max_ratio: float | None = None
    direction: str = "both"
    max_increase: float | None = None
    min: float | None = None
    max: float | None = None
    window: int = DEFAULT_WINDOW
    min_history: int = DEFAULT_MIN_HISTORY

    @property
    def needs_history(self) -> bool:
        return self.max_ratio is not None or self.max_increase is not None

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, doc: dict) -> "Check":
        return cls(**{k: doc[k] for k in KEYS if k in doc})

    def rule(self) -> str:
        """The check's bounds in words (for the report)."""
        parts = []
        if self.max_ratio is not None:
            r = _fmt(self.max_ratio)
            parts.append({"both": f"within 1/{r}..{r} x median",
                          "up": f"at most {r} x median",
                          "down": f"at least 1/{r} of median"}[self.direction])
        if self.max_increase is not None:
            parts.append(f"at most median + {_fmt(self.max_increase)}")
        if self.min is not None:
            parts.append(f">= {_fmt(self.min)}")
        if self.max is not None:
            parts.append(f"<= {_fmt(self.max)}")
        return "; ".join(parts)


DEFAULT_CHECKS = (
    # an archive that did not arrive, a feed that stopped: the night is refused
    Check("volume_collapse", "records_read", "error", max_ratio=5, direction="down"),
    # a batch job, a reload: worth a look, not a reason to hold the night back
    Check("volume_explosion", "records_read", "warn", max_ratio=5, direction="up"),
    # the quarantined share one point above its usual level (the threshold still fails at 5%)
    Check("quarantine_share_jump", "quarantine_share", "warn", max_increase=0.01),
    # a transaction open for more than 3 nights holds its changes back from the stream
    Check("open_transaction_age", "open_trx_oldest_age_nights", "warn", max=3),
)


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if float(x).is_integer():
        return f"{int(x):d}"
    return f"{x:.4g}"


# ----------------------------------------------------------------- configuration

def _number(file: str, key: str, value, *, positive: bool = False, above: float | None = None):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(file, key, f"expected a number, got {value!r}")
    if value != value or value in (float("inf"), float("-inf")):
        raise ConfigError(file, key, f"expected a finite number, got {value!r}")
    if positive and value < 0:
        raise ConfigError(file, key, f"expected a number >= 0, got {value!r}")
    if above is not None and value <= above:
        raise ConfigError(file, key, f"expected a number above {above:g}, got {value!r}")
    return float(value)


def _integer(file: str, key: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(file, key, f"expected a whole number of nights from {lo} to {hi}, got {value!r}")
    return value


def parse_check(file: str, where: str, item, defaults: dict[str, Check]) -> Check:
    if not isinstance(item, dict):
        raise ConfigError(file, where, f"expected a mapping, got {type(item).__name__}")
    unknown = sorted(set(item) - set(KEYS))
    if unknown:
        raise ConfigError(file, f"{where}.{unknown[0]}",
                          f"unknown key (known: {', '.join(KEYS)})")
    name = item.get("name")
    if name is not None and (not isinstance(name, str) or not _NAME.match(name)):
        raise ConfigError(file, f"{where}.name", f"expected [a-z0-9_]+, got {name!r}")
    base = defaults.get(name) if name else None
    metric = item.get("metric", base.metric if base else None)
    if not isinstance(metric, str) or not metric:
        raise ConfigError(file, f"{where}.metric", "missing: the metric to check "
                          f"(e.g. records_read, changes, quarantine_share), got {metric!r}")
    table = item.get("table", base.table if base else None)
    if table is not None and (not isinstance(table, str) or not table):
        raise ConfigError(file, f"{where}.table", f"expected a table id of the catalog, got {table!r}")
    allowed = M.TABLE_METRICS if table is not None else M.SOURCE_METRICS
    if metric not in allowed:
        raise ConfigError(file, f"{where}.metric",
                          f"unknown {'table ' if table else ''}metric {metric!r} "
                          f"(known: {', '.join(allowed)})")
    severity = item.get("severity", base.severity if base else "error")
    if severity not in SEVERITIES:
        raise ConfigError(file, f"{where}.severity",
                          f"expected one of {', '.join(SEVERITIES)}, got {severity!r}")
    if base is not None and set(item) <= {"name", "severity"}:
        return replace(base, severity=severity)   # a default, switched off or re-graded
    kw: dict = {}
    if "max_ratio" in item:
        kw["max_ratio"] = _number(file, f"{where}.max_ratio", item["max_ratio"], above=1)
    if "direction" in item:
        if "max_ratio" not in item:
            raise ConfigError(file, f"{where}.direction", "only applies with max_ratio")
        if item["direction"] not in DIRECTIONS:
            raise ConfigError(file, f"{where}.direction",
                              f"expected one of {', '.join(DIRECTIONS)}, got {item['direction']!r}")
        kw["direction"] = item["direction"]
    if "max_increase" in item:
        kw["max_increase"] = _number(file, f"{where}.max_increase", item["max_increase"], positive=True)
    for k in ("min", "max"):
        if k in item:
            kw[k] = _number(file, f"{where}.{k}", item[k])
    if not any(k in kw for k in ("max_ratio", "max_increase", "min", "max")):
        raise ConfigError(file, where, "a check needs at least one of max_ratio, max_increase, "
                                       "min, max")
    if "min" in kw and "max" in kw and kw["min"] > kw["max"]:
        raise ConfigError(file, f"{where}.min", f"min {kw['min']:g} is above max {kw['max']:g}")
    window = _integer(file, f"{where}.window", item.get("window", DEFAULT_WINDOW), 1, MAX_WINDOW)
    min_history = _integer(file, f"{where}.min_history",
                           item.get("min_history", min(DEFAULT_MIN_HISTORY, window)), 1, window)
    kind = "ratio" if "max_ratio" in kw else "increase" if "max_increase" in kw else "bounds"
    return Check(name or f"{metric}_{kind}" + (f"_{_slug(table)}" if table else ""), metric,
                 severity, table, window=window, min_history=min_history, **kw)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def parse_checks(file: str, where: str, value) -> tuple[Check, ...]:
    """The checks of one source: the defaults, replaced or extended by ``value`` (the
    ``checks:`` list of ``sources.yaml``). Errors name the file, the key and the reason."""
    if value is None:
        value = []
    if not isinstance(value, list):
        raise ConfigError(file, where, f"expected a list of checks, got {type(value).__name__}")
    defaults = {c.name: c for c in DEFAULT_CHECKS}
    out = dict(defaults)
    seen: set[str] = set()
    for i, item in enumerate(value):
        check = parse_check(file, f"{where}[{i}]", item, defaults)
        if check.name in seen:
            raise ConfigError(file, f"{where}[{i}].name", f"duplicate check name {check.name!r}")
        seen.add(check.name)
        out[check.name] = check
    return tuple(out.values())


# ----------------------------------------------------------------- judging

@dataclass
class CheckResult:
    source: str
    name: str
    metric: str
    table: str | None
    severity: str
    status: str                   # ok | flagged | not_enough_history | no_value
    rule: str
    tonight: float | None
    median: float | None = None
    history: dict[str, float] = field(default_factory=dict)   # date -> value, oldest first
    window: int = 0
    min_history: int = 0
    window_first: str | None = None
    window_last: str | None = None
    reason: str = ""
    message: str = ""

    @property
    def flagged(self) -> bool:
        return self.status == "flagged"

    @property
    def failed(self) -> bool:
        """Flagged at severity ``error``: fails validation."""
        return self.flagged and self.severity == "error"

    @property
    def verdict(self) -> int:
        """The value of the ``check:<name>`` metric: 0 passed, 1 warn, 2 error."""
        return 0 if not self.flagged else (2 if self.severity == "error" else 1)

    def to_json(self) -> dict:
        return {**asdict(self), "flagged": self.flagged, "failed": self.failed}


def judge(check: Check, source: str, date: str, tonight: float | None,
          history: dict[str, float]) -> CheckResult:
    """Judge one check: ``history`` holds the metric on the published nights of its window."""
    day = _dt.date.fromisoformat(date)
    res = CheckResult(source, check.name, check.metric, check.table, check.severity, "ok",
                      check.rule(), tonight, history=dict(sorted(history.items())),
                      window=check.window, min_history=check.min_history,
                      window_first=(day - _dt.timedelta(days=check.window)).isoformat(),
                      window_last=(day - _dt.timedelta(days=1)).isoformat())
    what = check.metric + (f" of table {check.table}" if check.table else "")
    if tonight is None:
        res.status, res.reason = "no_value", f"no value of {what} tonight"
        return res
    reasons = []
    if check.min is not None and tonight < check.min:
        reasons.append(f"under the bound {_fmt(check.min)}")
    if check.max is not None and tonight > check.max:
        reasons.append(f"over the bound {_fmt(check.max)}")
    enough = len(history) >= check.min_history
    if check.needs_history and enough:
        med = statistics.median(history.values())
        res.median = med
        if check.max_ratio is not None:
            r = check.max_ratio
            if check.direction in ("both", "up") and tonight > r * med:
                reasons.append(f"over {_fmt(r)} x the median {_fmt(med)}")
            if check.direction in ("both", "down") and tonight < med / r:
                reasons.append(f"under 1/{_fmt(r)} of the median {_fmt(med)}")
        if check.max_increase is not None and tonight - med > check.max_increase:
            reasons.append(f"more than {_fmt(check.max_increase)} above the median {_fmt(med)}")
    if reasons:
        res.status = "flagged"
        res.reason = " and ".join(reasons)
    elif check.needs_history and not enough:
        res.status = "not_enough_history"
        res.reason = (f"not enough history: {len(history)} of the {check.min_history} published "
                      f"nights needed in the {check.window} nights before {date}")
    hist = ", ".join(f"{d[5:]}={_fmt(v)}" for d, v in res.history.items()) or "none"
    res.message = (f"history check {check.name} ({check.severity}) of {source}: {what} is "
                   f"{_fmt(tonight)} tonight ({date}), "
                   + (res.reason if res.reason else "within " + check.rule())
                   + f"; compared with {len(history)} published nights "
                   f"{res.window_first}..{res.window_last}: {hist}")
    return res


def run_checks(manifest: dict, tonight: dict[str, list[dict]], root,
               base=None) -> list[CheckResult]:
    """Judge every source's checks (from the manifest) against tonight's metrics and the
    published history. ``tonight`` is ``{source: metric rows}`` (``metrics.compute``)."""
    date = manifest["date"]
    out: list[CheckResult] = []
    for s in manifest["sources"]:
        checks = [Check.from_json(c) for c in s.get("checks") or []] \
            if s.get("checks") is not None else list(DEFAULT_CHECKS)
        checks = [c for c in checks if c.severity != "off"]
        if not checks:
            continue
        window = max(c.window for c in checks)
        wanted = {c.metric for c in checks}
        past = M.history(root, s["name"], date, window, wanted, base=base)
        rows = tonight.get(s["name"], [])
        day = _dt.date.fromisoformat(date)
        for c in checks:
            first = (day - _dt.timedelta(days=c.window)).isoformat()
            hist = {}
            for d, r in past.items():
                if d < first:
                    continue
                v = M.value_of(r, c.metric, c.table)
                if v is not None:
                    hist[d] = v
            out.append(judge(c, s["name"], date, M.value_of(rows, c.metric, c.table), hist))
    return out


def verdict_rows(results: list[CheckResult], run_id: str) -> dict[str, list[dict]]:
    """The ``check:<name>`` metric rows of the judged checks, per source."""
    out: dict[str, list[dict]] = {}
    for r in results:
        if r.status in ("ok", "flagged"):
            out.setdefault(r.source, []).append(
                M.metric_row(M.CHECK_PREFIX + r.name, r.verdict, run_id))
    return out


# ----------------------------------------------------------------- inside the validate stage

@dataclass
class NightChecks:
    """Tonight's metrics (staged) and the verdicts of the history checks."""
    metrics: dict[str, list[dict]]
    results: list[CheckResult]

    @property
    def failures(self) -> list[str]:
        return [r.message for r in self.results if r.failed]

    @property
    def warnings(self) -> list[str]:
        return [r.message for r in self.results if r.flagged and not r.failed]


def history_stage(spark, manifest: dict, run_dir, root) -> NightChecks:
    """Stage tonight's metrics and judge every source's checks against the published
    history (called by the validate stage, beside the one Great Expectations checkpoint)."""
    tonight = M.write_metrics(spark, manifest, run_dir)
    return NightChecks(tonight, run_checks(manifest, tonight, root))


def finish_night(run_dir, manifest: dict, night: NightChecks, validate_seconds: float) -> None:
    """Stage the rest of tonight's metrics: the check verdicts and the validate stage's seconds."""
    rows = verdict_rows(night.results, manifest["run_id"])
    for s in manifest["sources"]:
        rows.setdefault(s["name"], []).append(
            M.metric_row("seconds_validate", round(validate_seconds, 3), manifest["run_id"]))
        for r in rows[s["name"]]:
            night.metrics.setdefault(s["name"], []).append(r)
    M.add_rows(run_dir, manifest, rows, "1")
