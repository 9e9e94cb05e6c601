"""The real UI: start Airflow (standalone, embedded SQLite) on a free port in a temporary
AIRFLOW_HOME, drive headless Chromium (Debian ``chromium`` + ``chromium-driver``, Selenium)
to log in, trigger a run and create a backfill from the Trigger dialog, wait through the
REST API, and check that every run succeeded and ``published/`` holds the three nights,
equal to what the generator wrote. Screenshots of the grid go to ``test-artifacts/browser/``.

Dates: three consecutive nights N1..N3 ending a week ago. The single run is triggered for N1
(logical date typed into the form); the backfill N1..N3 with "Missing Runs" then creates the
other two (and must not redo N1). The DAG runs with a midnight schedule here so that the
logical dates are the dates typed in.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from dblog.airflow_sqlite import BUSY_TIMEOUT_S

from .airflow_local import (BIN, REPO, airflow_env, check_night, chosen_sources, free_port,
                            kill_leftovers, prepare, stop, synth, write_config)

pytestmark = pytest.mark.browser
ARTIFACTS = REPO / "test-artifacts" / "browser"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync",
               "--window-size=1600,1000"]
# Three nights take about 7 min on an idle 2-core machine, 13-15 min next to the other
# pytest worker. The wait gives up when nothing moved for STALL_TIMEOUT (a hang) or after
# RUNS_TIMEOUT in all (too slow), and then says where each run stood.
RUNS_TIMEOUT = 45 * 60
STALL_TIMEOUT = 15 * 60
# a run the UI asked for may wait for SQLite's write lock as long as Airflow's busy timeout
# (dblog.airflow_sqlite) before the API shows it: wait longer than that
CREATE_TIMEOUT = BUSY_TIMEOUT_S + 60


def wait_for(what: str, check, timeout: float, every: float = 2.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last = exc
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


class Api:
    def __init__(self, base: str, user: str, password: str):
        import requests

        self.base, self.s = base, requests.Session()
        r = self.s.post(f"{base}/auth/token", json={"username": user, "password": password}, timeout=30)
        r.raise_for_status()
        self.s.headers["Authorization"] = f"Bearer {r.json()['access_token']}"

    def get(self, path: str, **params):
        r = self.s.get(f"{self.base}/api/v2{path}", params=params, timeout=30)
        r.raise_for_status()
        return r.json()

    def runs(self) -> list[dict]:
        return self.get("/dags/dblog_nightly/dagRuns", limit=100, order_by="logical_date")["dag_runs"]

    def task_instances(self, run_id: str) -> list[dict]:
        return self.get(f"/dags/dblog_nightly/dagRuns/{run_id}/taskInstances",
                        limit=100)["task_instances"]


def progress(api: Api) -> tuple[list[dict], tuple]:
    """The runs, and a fingerprint of where their tasks are (changes whenever one moves)."""
    runs = api.runs()
    marks = []
    for r in runs:
        for ti in api.task_instances(r["dag_run_id"]):
            marks.append((r["dag_run_id"], ti["task_id"], ti.get("map_index", -1), ti["state"],
                          ti.get("try_number")))
    return runs, tuple(sorted(marks, key=str))


def _log_text(line: str) -> str:
    """A task log line (JSON in Airflow 3) as its time and message."""
    try:
        rec = json.loads(line)
        return f"{rec.get('timestamp', '')[11:19]} {rec.get('level', '')}: {rec.get('event', '')}"
    except (ValueError, AttributeError):
        return line


def where_runs_stand(api: Api, home: Path, log: Path, lines: int = 15) -> str:
    """What a failed wait reports: every run and its tasks (state, try, seconds), the end of
    the log of each task that failed, is retrying or still runs, and the standalone log's
    last errors."""
    out = []
    try:
        for r in api.runs():
            out.append(f"run {r['dag_run_id']} ({r['logical_date'][:10]}): {r['state']}")
            for ti in sorted(api.task_instances(r["dag_run_id"]), key=lambda t: t.get("start_date") or "~"):
                if ti["state"] is None:
                    continue
                dur = ti.get("duration")
                out.append(f"  {ti['task_id']}[{ti.get('map_index', -1)}] {ti['state']} "
                           f"try {ti.get('try_number')} {'' if dur is None else f'{dur:.0f} s'}")
                if ti["state"] in ("failed", "up_for_retry", "running", "upstream_failed") or \
                        (ti.get("try_number") or 0) > 1:
                    pattern = f"dag_id=dblog_nightly/run_id={r['dag_run_id']}/task_id={ti['task_id']}/**/attempt=*.log"
                    for f in sorted(home.glob("logs/" + pattern))[-2:]:
                        tail = [_log_text(t) for t in f.read_text(errors="replace").splitlines()[-lines:]]
                        out.append(f"    --- {f.relative_to(home)} (last {len(tail)} lines)")
                        out.extend("    " + t[:300] for t in tail)
    except Exception as exc:  # noqa: BLE001 - the report must not hide the failure
        out.append(f"(could not ask the API: {exc!r})")
    try:
        errors = [t for t in log.read_text(errors="replace").splitlines()
                  if "http.access" not in t and any(k in t for k in ("[error", "Traceback", "rror:", "killed", "Killed"))]
        out.append(f"--- standalone.log: {len(errors)} error lines, the last {min(lines, len(errors))}")
        out.extend(t[:300] for t in errors[-lines:])
    except OSError as exc:
        out.append(f"(no standalone log: {exc!r})")
    return "\n".join(out)


# what `airflow standalone` prints when a component's main loop died (it is not restarted)
COMPONENT_DIED = ("Exception when executing SchedulerJob", "Exception when executing TriggererJob")


def component_died(log: Path) -> str | None:
    """The standalone log's first line saying the scheduler's or triggerer's loop died."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return None
    return next((line[:300] for line in text.splitlines() if any(k in line for k in COMPONENT_DIED)), None)


def wait_for_runs(api: Api, home: Path, log: Path, expected: int) -> list[dict]:
    """Wait until every run finished. Fails at once when a run failed or an Airflow component
    died, when nothing moved for STALL_TIMEOUT, or after RUNS_TIMEOUT, with where each run
    stood."""
    start = moved = time.monotonic()
    last = None
    while True:
        try:
            runs, marks = progress(api)
        except Exception:  # noqa: BLE001 - the API busy for a moment: ask again
            runs, marks = None, last
        now = time.monotonic()
        if marks != last:
            last, moved = marks, now
        if runs is not None and len(runs) == expected and all(r["state"] == "success" for r in runs):
            return runs
        why = None
        if runs is not None and any(r["state"] == "failed" for r in runs):
            why = "a run failed"
        elif died := component_died(log):
            why = f"an Airflow component stopped: {died}"
        elif now - moved > STALL_TIMEOUT:
            why = f"no task moved for {STALL_TIMEOUT / 60:.0f} min"
        elif now - start > RUNS_TIMEOUT:
            why = f"the runs did not finish in {RUNS_TIMEOUT / 60:.0f} min"
        if why:
            raise AssertionError(f"{why} ({now - start:.0f} s after the backfill):\n"
                                 + where_runs_stand(api, home, log))
        time.sleep(10)


@pytest.fixture
def airflow_server(tmp_path):
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("needs Debian's chromium and chromium-driver (make browser-deps)")
    port = free_port()
    home = tmp_path / "airflow_home"
    data = tmp_path / "data"
    env = airflow_env(home, data, write_config(tmp_path, chosen_sources()), port=port,
                      AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="False",  # really log in
                      AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE="False",  # only our runs
                      DBLOG_SCHEDULE="0 0 * * *", DBLOG_SHUFFLE_PARTITIONS="2")
    prepare(env)
    log = open(tmp_path / "standalone.log", "w")
    proc = subprocess.Popen([str(BIN / "airflow"), "standalone"], env=env, cwd=REPO, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://localhost:{port}"
    try:
        import requests

        wait_for("the api-server", lambda: requests.get(f"{base}/api/v2/monitor/health", timeout=5).ok,
                 240)
        pw_file = home / "simple_auth_manager_passwords.json.generated"
        password = wait_for("the admin password", lambda: json.loads(pw_file.read_text())["admin"], 60)
        api = Api(base, "admin", password)
        wait_for("the DAG to be parsed", lambda: api.get("/dags/dblog_nightly"), 240)
        yield {"base": base, "password": password, "api": api, "data": data, "env": env,
               "home": home, "log": tmp_path / "standalone.log"}
    finally:
        stop(proc)
        kill_leftovers(str(home))
        log.close()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / "standalone.log", ARTIFACTS / "standalone.log")


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for a in CHROME_ARGS + [f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.implicitly_wait(2)
    try:
        yield driver
    finally:
        driver.quit()


class Ui:
    def __init__(self, driver, base: str):
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys

        self.d, self.base, self.By, self.Keys = driver, base, By, Keys
        ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def find(self, css: str, timeout: float = 30):
        return wait_for(css, lambda: next(e for e in self.d.find_elements(self.By.CSS_SELECTOR, css)
                                          if e.is_displayed()), timeout, 0.5)

    def find_text(self, text: str, timeout: float = 30):
        t = json.dumps(text)  # the innermost element whose whole text is ``text``
        xp = f"//*[normalize-space(.)={t} and not(*[normalize-space(.)={t}])]"
        return wait_for(text, lambda: next(e for e in self.d.find_elements(self.By.XPATH, xp)
                                           if e.is_displayed()), timeout, 0.5)

    def shot(self, name: str) -> None:
        self.d.save_screenshot(str(ARTIFACTS / f"{name}.png"))

    def login(self, user: str, password: str) -> None:
        self.d.get(self.base + "/")
        self.find("input[name=username]").send_keys(user)
        self.find("input[name=password]").send_keys(password)
        self.find("button[type=submit]").click()
        wait_for("the home page", lambda: "/auth/login" not in self.d.current_url, 60, 0.5)

    def open_trigger(self, mode: str) -> None:
        self.d.get(self.base + "/dags/dblog_nightly")
        self.find("[data-testid=trigger-dag-button]", 60).click()
        self.find(f"label[id$='radio:{mode}']").click()
        time.sleep(1)

    def set_datetime(self, index: int, day: dt.date, at: str = "00:00") -> None:
        """Fill the index-th date-time field of the dialog (a popover with date and time)."""
        fields = "[role=dialog] [data-testid=datetime-input]"
        self.d.find_elements(self.By.CSS_SELECTOR, fields)[index].click()
        popover = "[data-scope=popover][data-part=content] "
        for css, value in ((popover + "input[placeholder='YYYY/MM/DD']", day.strftime("%Y/%m/%d")),
                           (popover + "input[placeholder='HH:mm']", at)):
            self.type_into(css, value)
        self.find("[role=dialog] h2, [role=dialog] header").click()  # close the popover
        # the field found again at each look: the dialog re-renders it when a value changes
        wait_for(f"date field {index} to show {day}",
                 lambda: (lambda text: day.strftime("%b %-d, %Y") in text and at in text)(
                     self.d.find_elements(self.By.CSS_SELECTOR, fields)[index].text), 10, 0.5)

    def type_into(self, css: str, value: str, attempts: int = 3) -> None:
        """Replace the text of the input ``css`` with ``value`` (then TAB). The popover
        re-renders its inputs when one changes (a ``StaleElementReferenceException`` on the
        next one, seen once in CI): the input is found again and the typing redone."""
        from selenium.common.exceptions import StaleElementReferenceException

        for attempt in range(attempts):
            el = self.find(css)
            try:
                el.click()
                el.send_keys(self.Keys.CONTROL, "a")
                el.send_keys(self.Keys.BACKSPACE)
                el.send_keys(value)
                el.send_keys(self.Keys.TAB)
                return
            except StaleElementReferenceException:
                if attempt == attempts - 1:
                    raise

    def ensure_unpause_checked(self) -> None:
        label = self.find_text("Unpause dblog_nightly on trigger").find_element(
            self.By.XPATH, "ancestor::label[1]")
        box = label.find_element(self.By.CSS_SELECTOR, "input[type=checkbox]")
        if not box.is_selected():
            label.click()

    def grid(self, name: str) -> None:
        self.d.get(self.base + "/dags/dblog_nightly")
        self.find("[data-testid=grid-view-button]", 60)
        time.sleep(3)
        self.shot(name)


def test_trigger_and_backfill_through_the_ui(airflow_server, browser):
    try:
        _trigger_and_backfill(airflow_server, browser)
    except BaseException:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "99_failure.png"))
        raise


def _trigger_and_backfill(airflow_server, browser):
    srv, api = airflow_server, airflow_server["api"]
    today = dt.datetime.now(dt.timezone.utc).date()
    nights = [today - dt.timedelta(days=d) for d in (9, 8, 7)]
    synth(srv["env"], nights[0].isoformat(), 3)
    t0 = time.monotonic()
    ui = Ui(browser, srv["base"])
    ui.login("admin", srv["password"])
    ui.shot("01_logged_in")

    # 1. a single run, for the first night
    ui.open_trigger("single")
    ui.set_datetime(0, nights[0])
    ui.ensure_unpause_checked()
    ui.shot("02_trigger_form")
    ui.find("[data-testid=trigger-dag-submit]").click()
    wait_for("the triggered run", lambda: len(api.runs()) == 1, CREATE_TIMEOUT)

    # 2. a backfill over the three nights: "Missing Runs" adds the two not run yet
    ui.open_trigger("backfill")
    ui.set_datetime(0, nights[0])
    ui.set_datetime(1, nights[-1])
    ui.find_text("Missing Runs").click()
    ui.find_text("2 runs will be triggered.", 60)
    ui.shot("03_backfill_form")
    ui.find_text("Run Backfill").click()
    wait_for("the backfill's runs", lambda: len(api.runs()) == 3, CREATE_TIMEOUT)
    ui.grid("04_grid_running")
    ui.d.get("about:blank")   # while waiting: the grid's polling would cost the api-server CPU

    runs = wait_for_runs(api, srv["home"], srv["log"], expected=3)
    took = time.monotonic() - t0
    ui.grid("05_grid_finished")
    assert [(r["run_type"], r["state"]) for r in runs] == [
        ("manual", "success"), ("backfill", "success"), ("backfill", "success")], runs
    assert [r["logical_date"][:10] for r in runs] == [n.isoformat() for n in nights]
    assert not api.get("/dags/dblog_nightly")["is_paused"]

    # published/ holds the three nights, equal to what the generator wrote, numbered on
    for source in chosen_sources():
        last = 0
        for night in nights:
            rows = check_night(srv["data"], source, night.isoformat())
            assert rows[0]["commit_seq"] == last + 1
            last = rows[-1]["commit_seq"]

    # the data-quality report: linked from the report task, served by the api-server
    last_run = runs[-1]["dag_run_id"]
    links = api.get(f"/dags/dblog_nightly/dagRuns/{last_run}/taskInstances/report/links")
    url = links["extra_links"]["Data-quality report"]
    assert url.endswith(f"/dblog-reports/{nights[-1].isoformat()}/index.html"), links
    ui.d.get(srv["base"] + url if url.startswith("/") else url)
    ui.find_text(f"dblog nightly report {nights[-1].isoformat()}", 30)
    ui.shot("06_report")
    # a source's page from the report's own link: checks against history, 30-night charts
    source = chosen_sources()[0]
    ui.find(f"a[href='{source}.html']").click()
    ui.find_text("Checks against history (0 flagged)", 30)
    assert len(ui.d.find_elements(ui.By.CSS_SELECTOR, "svg.chart")) == 4
    ui.d.set_window_size(1366, 2400)
    ui.shot("07_report_source")
    print(f"UI trigger + 2-run backfill, 3 nights: {took:.0f} s")
