"""Airflow plugin: serve the nightly data-quality reports (``<data root>/reports/``) from the
api-server at ``/dblog-reports/<date>/index.html`` (the ``report`` task links there), with
a "Data-quality reports" entry in the UI's navigation."""

from __future__ import annotations

import html
import os
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from airflow.plugins_manager import AirflowPlugin

PREFIX = "/dblog-reports"


def reports_dir() -> Path:
    return Path(os.environ.get("DBLOG_DATA_ROOT") or "data").resolve() / "reports"


app = FastAPI(title="dblog data-quality reports")


@app.get("/", response_class=HTMLResponse)
def index() -> str:
    base = reports_dir()
    dates = sorted((p.name for p in base.iterdir() if (p / "index.html").is_file()),
                   reverse=True) if base.is_dir() else []
    items = "".join(f'<li><a href="{PREFIX}/{html.escape(d)}/index.html">{html.escape(d)}</a></li>'
                    for d in dates) or "<li>no reports yet</li>"
    return (f"<!doctype html><title>dblog reports</title><h1>Data-quality reports</h1>"
            f"<p>{html.escape(str(base))}</p><ul>{items}</ul>")


app.mount("/", StaticFiles(directory=str(reports_dir()), html=True, check_dir=False), name="reports")


class DblogReportsPlugin(AirflowPlugin):
    name = "dblog_reports"
    fastapi_apps = [{"app": app, "url_prefix": PREFIX, "name": "dblog data-quality reports"}]
    external_views = [{"name": "Data-quality reports", "href": f"{PREFIX}/", "destination": "nav",
                       "url_route": "dblog_reports"}]
