"""OpenLineage run events (dblog/lineage.py): valid against the OpenLineage JSON schema,
written as JSON lines under lineage/<date>/, sent to $OPENLINEAGE_URL, never in the way.

The schema files are the OpenLineage specification's (tests/openlineage_spec/, see its
README): the installed openlineage-python names them by ``$id``; its wheel does not ship them.
"""

from __future__ import annotations

import json
import threading
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dblog import lineage as L

SPEC = Path(__file__).resolve().parent / "openlineage_spec"


@pytest.fixture(autouse=True)
def _patient(monkeypatch):
    """These tests check what is written, not how fast: a loaded machine may take a while to
    import the client (the bounded wait itself is tested with a server that is down)."""
    monkeypatch.setenv("DBLOG_LINEAGE_TIMEOUT", "300")


@lru_cache(maxsize=1)
def _registry():
    from referencing import Registry, Resource

    docs = [json.loads(p.read_text()) for p in [SPEC / "OpenLineage.json",
                                                 *sorted((SPEC / "facets").glob("*.json")),
                                                 L.SCHEMAS_DIR / "DblogRunFacet.json"]]
    return Registry().with_resources((d["$id"], Resource.from_contents(d)) for d in docs), \
        {d["$id"] for d in docs}


def _validator(schema: dict):
    from jsonschema import Draft202012Validator

    registry, _ = _registry()
    return Draft202012Validator(schema, registry=registry,
                                format_checker=Draft202012Validator.FORMAT_CHECKER)


def _facets(event: dict):
    """Every facet of an event, with where it sits."""
    yield from (("run", k, v) for k, v in (event["run"].get("facets") or {}).items())
    yield from (("job", k, v) for k, v in (event["job"].get("facets") or {}).items())
    for side in ("inputs", "outputs"):
        for ds in event.get(side) or []:
            for group in ("facets", "inputFacets", "outputFacets"):
                yield from ((f"{side}:{ds['name']}", k, v) for k, v in (ds.get(group) or {}).items())


def validate_event(event: dict) -> None:
    """Validate one event against the core schema, and each facet against the schema its
    ``_schemaURL`` names (every facet must have one we hold)."""
    _, ids = _registry()
    _validator({"$ref": event["schemaURL"].split("#")[0]}).validate(event)
    assert event["schemaURL"].startswith("https://openlineage.io/spec/2-0-2/OpenLineage.json")
    for where, name, facet in _facets(event):
        url = facet["_schemaURL"]
        base = url.split("#")[0]
        assert base in ids, f"{where} facet {name}: no schema for {url}"
        _validator({"$ref": url}).validate(facet)


# ----------------------------------------------------------------- a staged run, without Spark

def staged_run(tmp_path: Path, sources=("pos_solid", "erp_db2"), date="2026-11-01") -> tuple[dict, Path]:
    root = tmp_path / "data"
    run_id = f"dblog_{date}_test"
    run_dir = root / "staging" / run_id
    manifest = {"run_id": run_id, "date": date, "data_root": str(root), "sources": []}
    for i, s in enumerate(sources):
        archives = [{"file": f"{s}/{date}/a{k}.bin", "size": 100 * (k + 1)} for k in range(i + 2)]
        manifest["sources"].append({"name": s, "format": "soliddb", "archives": archives})
        for ds, n in (("changes", 5 + i), ("transactions", 2 + i), ("audit", len(archives))):
            part = run_dir / ds / f"source={s}" / f"date={date}"
            part.mkdir(parents=True)
            pq.write_table(pa.table({"x": list(range(n))}), part / "part-0.parquet")
        part = run_dir / "tables" / s / "ERP.ORDERS" / f"date={date}"
        part.mkdir(parents=True)
        pq.write_table(pa.table({"x": [1, 2, 3]}), part / "part-0.parquet")
        from dblog import metrics as M

        M.write_rows(run_dir / "metrics", s, date, [M.metric_row("records_read", 40 + i, run_id)], "0")
    return manifest, run_dir


def read_events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def test_the_schemas_are_the_ones_the_installed_client_names():
    from openlineage.client.event_v2 import RunEvent
    from openlineage.client.facet_v2 import (
        error_message_run,
        input_statistics_input_dataset,
        job_type_job,
        nominal_time_run,
        output_statistics_output_dataset,
        processing_engine_run,
    )

    _, ids = _registry()
    for cls in (error_message_run.ErrorMessageRunFacet, nominal_time_run.NominalTimeRunFacet,
                input_statistics_input_dataset.InputStatisticsInputDatasetFacet,
                output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet,
                job_type_job.JobTypeJobFacet, processing_engine_run.ProcessingEngineRunFacet):
        assert cls._get_schema().split("#")[0] in ids, cls
    assert RunEvent._get_schema().split("#")[0] in ids


def test_start_complete_and_fail_events_validate_and_count_what_was_published(tmp_path):
    manifest, run_dir = staged_run(tmp_path)
    lin = L.Lineage(manifest).start(run_dir)
    lin.end(True, run_dir, {"stage": 1.5, "publish": 0.2}, [], ["a warning"])
    events = read_events(lin.path)
    assert lin.path == Path(manifest["data_root"]) / "lineage" / "2026-11-01" / f"{manifest['run_id']}.jsonl"
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    for e in events:
        validate_event(e)
    start, end = events
    assert start["run"]["runId"] == end["run"]["runId"] == L.run_uuid(manifest["run_id"])
    assert start["outputs"] == []
    inputs = {i["name"]: i["inputFacets"]["inputStatistics"] for i in end["inputs"]}
    root = manifest["data_root"]
    assert inputs[f"{root}/landing/pos_solid/2026-11-01"] == {
        **inputs[f"{root}/landing/pos_solid/2026-11-01"], "fileCount": 2, "size": 300, "rowCount": 40}
    assert inputs[f"{root}/landing/erp_db2/2026-11-01"]["fileCount"] == 3
    outs = {o["name"]: o["outputFacets"]["outputStatistics"] for o in end["outputs"]}
    assert outs[f"{root}/published/changes"]["rowCount"] == 5 + 6
    assert outs[f"{root}/published/transactions"]["rowCount"] == 2 + 3
    assert outs[f"{root}/published/tables"]["rowCount"] == 6
    assert outs[f"{root}/published/metrics"]["rowCount"] == 2
    assert outs[f"{root}/published/quarantine"]["rowCount"] == 0
    facet = end["run"]["facets"]["dblog"]
    assert facet["published"] is True and facet["seconds"] == {"stage": 1.5, "publish": 0.2}
    assert facet["warnings"] == ["a warning"]

    lin2 = L.Lineage({**manifest, "run_id": manifest["run_id"] + "_2"}).start(run_dir)
    lin2.end(False, run_dir, {}, ["changes: commit_seq out of order"], [])
    events = read_events(lin2.path)
    assert [e["eventType"] for e in events] == ["START", "FAIL"]
    for e in events:
        validate_event(e)
    assert "commit_seq out of order" in events[1]["run"]["facets"]["errorMessage"]["message"]
    assert events[1]["outputs"] == []


def test_a_run_that_raises_writes_fail_with_the_error(tmp_path):
    manifest, run_dir = staged_run(tmp_path, sources=("pos_solid",))

    @L.observed
    def run():
        L.Lineage(manifest).start(run_dir)
        raise MemoryError("Java heap space in the order stage")

    with pytest.raises(MemoryError):
        run()
    events = read_events(L.Lineage(manifest).path)
    assert [e["eventType"] for e in events] == ["START", "FAIL"]
    validate_event(events[1])
    err = events[1]["run"]["facets"]["errorMessage"]
    assert "Java heap space" in err["message"] and "MemoryError" in err["stackTrace"]


def test_a_lineage_failure_never_fails_the_night(tmp_path, caplog):
    manifest, run_dir = staged_run(tmp_path, sources=("pos_solid",))
    (Path(manifest["data_root"]) / "lineage").write_text("a file where the folder should be")
    lin = L.Lineage(manifest).start(run_dir)
    lin.end(True, run_dir, {}, [], [])          # must not raise
    assert lin.errors and "not written" in caplog.text
    assert L.emit_now("START", manifest) is False


class _Collector(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((self.path, json.loads(body)))
        self.send_response(201)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_events_go_to_openlineage_url_when_set(tmp_path, monkeypatch):
    manifest, run_dir = staged_run(tmp_path, sources=("pos_solid",))
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("OPENLINEAGE_URL", f"http://127.0.0.1:{server.server_port}")
        _Collector.received = []
        L.Lineage(manifest).start(run_dir).end(True, run_dir, {"publish": 0.1}, [], [])
    finally:
        server.shutdown()
        thread.join(5)
    assert [p for p, _ in _Collector.received] == ["/api/v1/lineage"] * 2
    sent = [e for _, e in _Collector.received]
    assert [e["eventType"] for e in sent] == ["START", "COMPLETE"]
    for e in sent:
        validate_event(e)
    assert sent == read_events(L.Lineage(manifest).path)        # the same events, file and server


def test_a_lineage_server_down_costs_a_bounded_wait(tmp_path, monkeypatch):
    import socket
    import time

    manifest, run_dir = staged_run(tmp_path, sources=("pos_solid",))
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                          # nothing listens there
    monkeypatch.setenv("OPENLINEAGE_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("DBLOG_LINEAGE_TIMEOUT", "5")
    t0 = time.monotonic()
    L.Lineage(manifest).start(run_dir).end(True, run_dir, {}, [], [])
    assert time.monotonic() - t0 < 8
    assert [e["eventType"] for e in read_events(L.Lineage(manifest).path)] == ["START", "COMPLETE"]


def test_the_dag_writes_complete_or_fail_from_its_report_task(tmp_path):
    """``airflow_tasks.lineage_end`` (the report task): COMPLETE when every source published,
    else FAIL with the validation's failures; stage seconds recorded by the tasks."""
    from dblog import airflow_tasks as at
    from dblog.metrics import record_seconds

    manifest, run_dir = staged_run(tmp_path)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    (run_dir / "validation.json").write_text(json.dumps(
        {"success": False, "failures": ["history check volume_collapse (error) of erp_db2: ..."],
         "warnings": []}))
    for stage, secs in (("stage.pos_solid", 1.0), ("stage.erp_db2", 2.0), ("decode", 3.0)):
        record_seconds(run_dir, stage, secs)
    plan_out = {"run_dir": str(run_dir), "sources": ["pos_solid", "erp_db2"], "date": manifest["date"],
                "data_root": manifest["data_root"]}
    assert at.lineage_end(plan_out, ["pos_solid"]) is True
    [fail] = read_events(L.Lineage(manifest).path)
    validate_event(fail)
    assert fail["eventType"] == "FAIL" and "volume_collapse" in fail["run"]["facets"]["errorMessage"]["message"]
    assert fail["run"]["facets"]["dblog"]["seconds"] == {"stage": 2.0, "decode": 3.0}
    assert at.lineage_end(plan_out, ["erp_db2", "pos_solid"]) is True
    events = read_events(L.Lineage(manifest).path)
    assert [e["eventType"] for e in events] == ["FAIL", "COMPLETE"]
    validate_event(events[-1])
    assert at.lineage_end({**plan_out, "run_dir": str(tmp_path / "nowhere")}, []) is False
