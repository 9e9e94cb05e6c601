"""Each expectation suite passes on its good fixture and fails on its bad one.

The fixtures (``expectations/fixtures/<suite>_{good,bad}.json``) hold the *staged* rows a
suite's check dataset is computed from, plus the bits of the run manifest it needs. They go
through the same functions as a night: ``dblog.validate.write_checks`` (Spark) and then one
Checkpoint (``run_checkpoint``) over all suites. A bad fixture declares which expectations
it breaks; together the bad fixtures must break every expectation of every suite, so no
expectation is left that was never seen to fail.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
from pathlib import Path

import pytest

from dblog import validate as V

pytestmark = pytest.mark.spark

FIXTURES = V.EXPECTATIONS_DIR / "fixtures"


def load_fixture(suite: str, kind: str) -> dict:
    return json.loads((FIXTURES / f"{suite}_{kind}.json").read_text())


def _schema(dataset: str):
    from pyspark.sql.types import StructType

    from dblog.decode import spark_event_schema
    from dblog.mirror import DDL as MIRROR_DDL
    from dblog.order import DDL

    if dataset == "events":
        return spark_event_schema()
    return StructType.fromDDL(DDL.get(dataset) or MIRROR_DDL[dataset])


def _row(raw: dict, schema) -> tuple:
    from pyspark.sql.types import TimestampType

    out = []
    for f in schema.fields:
        v = raw.get(f.name)
        if v is not None and isinstance(f.dataType, TimestampType):
            v = _dt.datetime.fromisoformat(v)
        out.append(v)
    return tuple(out)


def stage_fixture(spark, doc: dict, run_dir: Path) -> None:
    """Write the fixture's rows where the pipeline stages them (``<run_dir>/<dataset>/``)."""
    for dataset, rows in doc["datasets"].items():
        unknown = {k for r in rows for k in r if not k.startswith("_")} - set(_schema(dataset).names)
        assert not unknown, f"fixture columns not in the {dataset} schema: {unknown}"
        schema = _schema(dataset)
        spark.createDataFrame([_row(r, schema) for r in rows], schema).coalesce(1) \
            .write.mode("overwrite").parquet(str(run_dir / dataset))


def key(row: dict) -> str:
    column = row["column"]
    return f"{row['expectation']}:{','.join(column) if isinstance(column, list) else column}"


@pytest.fixture(scope="module")
def results(spark, tmp_path_factory):
    """{kind: {suite: [summary rows]}} from one Checkpoint per kind over all suites."""
    out = {}
    for kind in ("good", "bad"):
        base = tmp_path_factory.mktemp(f"suites_{kind}")
        checks = base / "checks"
        for suite in V.SUITES:
            run_dir = base / "runs" / suite
            stage_fixture(spark, load_fixture(suite, kind), run_dir)
            made = V.write_checks(spark, load_fixture(suite, kind)["manifest"], run_dir, (suite,))
            shutil.copytree(made / suite, checks / suite)
        res = V.run_checkpoint(checks, base / "docs", base / "gx", f"fixtures_{kind}")
        success, failures, rows = V.summarize(res, spark, checks)
        out[kind] = {"success": success, "failures": failures,
                     "by_suite": {s: [r for r in rows if r["suite"] == s] for s in V.SUITES},
                     "docs": base / "docs", "checks": checks}
    return out


def test_every_suite_has_a_good_and_a_bad_fixture():
    for suite in V.SUITES:
        assert (V.EXPECTATIONS_DIR / f"{suite}.json").is_file()
        for kind in ("good", "bad"):
            assert (FIXTURES / f"{suite}_{kind}.json").is_file(), f"{suite}_{kind}.json missing"


@pytest.mark.parametrize("suite", V.SUITES)
def test_suite_passes_on_good_fixture(results, suite):
    rows = results["good"]["by_suite"][suite]
    assert rows, f"suite {suite} did not run"
    assert [key(r) for r in rows if not r["success"]] == []


@pytest.mark.parametrize("kind", ("good", "bad"))
def test_check_datasets_are_not_empty(spark, results, kind):
    for suite in V.SUITES:
        assert spark.read.parquet(str(results[kind]["checks"] / suite)).count() > 0, suite


@pytest.mark.parametrize("suite", V.SUITES)
def test_suite_fails_on_bad_fixture_exactly_where_declared(results, suite):
    rows = results["bad"]["by_suite"][suite]
    failed = {key(r) for r in rows if not r["success"]}
    declared = set(load_fixture(suite, "bad")["fails"])
    assert failed == declared


@pytest.mark.parametrize("suite", V.SUITES)
def test_bad_fixture_breaks_every_expectation_of_its_suite(suite):
    suite_doc = json.loads((V.EXPECTATIONS_DIR / f"{suite}.json").read_text())
    every = {key({"expectation": e["type"],
                  "column": e["kwargs"].get("column") or e["kwargs"].get("column_list")})
             for e in suite_doc["expectations"]}
    assert set(load_fixture(suite, "bad")["fails"]) == every


def test_whole_checkpoint_verdicts(results):
    assert results["good"]["success"] is True and results["good"]["failures"] == []
    assert results["bad"]["success"] is False
    assert (results["bad"]["docs"] / "index.html").is_file()


def test_failure_messages_say_why_and_quote_rows(results):
    text = "\n".join(results["bad"]["failures"])
    assert "quarantined / records read <= the source's quarantine_threshold" in text
    assert "source=pos_solid, quarantined=30, records_read=200, share=0.15, threshold=0.05" in text
    assert "keys (source, commit_seq, event_seq) unique" in text
    assert "trx_id=T2" in text      # the transaction that reused commit_seq 1
    assert "unknown_table_rows=1" in text


def _nodes(plan):
    """A physical plan's nodes (py4j), depth first."""
    yield plan
    children = plan.children()
    for i in range(children.size()):
        yield from _nodes(children.apply(i))


def test_the_changes_check_shuffles_no_row_images(spark, tmp_path):
    """``prepare_changes``' window (consecutive changes of a source in commit order) shuffles
    and sorts narrow rows: the row checks that read ``before``/``after`` are computed first
    (at five sources x 1M the row images made this the validation's largest shuffle)."""
    doc = load_fixture("changes", "good")
    stage_fixture(spark, doc, tmp_path)
    df = V.prepare_changes(spark, doc["manifest"], tmp_path)
    plan = df._jdf.queryExecution().executedPlan()
    if plan.nodeName() == "AdaptiveSparkPlan":
        plan = plan.initialPlan()
    exchanges = [n for n in _nodes(plan) if n.nodeName() == "Exchange"]
    assert exchanges, plan.toString()
    for n in exchanges:
        names = {n.output().apply(i).name() for i in range(n.output().size())}
        assert "commit_seq" in names or "source" in names, names
        assert not names & {"before", "after", "ddl"}, (names, plan.toString())
    assert df.count() == len(doc["datasets"]["changes"])
