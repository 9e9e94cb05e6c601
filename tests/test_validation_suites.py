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


def test_the_changes_check_shuffles_no_row_images_and_sorts_no_whole_source(spark, tmp_path):
    """``prepare_changes`` shuffles narrow rows: the row checks that read ``before``/``after``
    are computed first (at five sources x 1M the row images made this the validation's
    largest shuffle); and the commit-order check is aggregations over transactions, no
    window (a window over a source sorted its whole night in one task: 21 s at 10M)."""
    doc = load_fixture("changes", "good")
    stage_fixture(spark, doc, tmp_path)
    df = V.prepare_changes(spark, doc["manifest"], tmp_path)
    plan = df._jdf.queryExecution().executedPlan()
    if plan.nodeName() == "AdaptiveSparkPlan":
        plan = plan.initialPlan()
    nodes = list(_nodes(plan))
    assert not [n for n in nodes if n.nodeName() == "Window"], plan.toString()  # no whole source
    exchanges = [n for n in nodes if n.nodeName() == "Exchange"]
    assert exchanges, plan.toString()
    for n in exchanges:
        names = {n.output().apply(i).name() for i in range(n.output().size())}
        assert "commit_seq" in names or "source" in names, names
        assert not names & {"before", "after", "ddl"}, (names, plan.toString())
    assert df.count() == len(doc["datasets"]["changes"])


def _commit_order_night(rnd, case: int) -> tuple[list[tuple], str]:
    """One random night (1-2 sources, up to 7 transactions of 1-3 changes) with a right
    sequence, then maybe one damage -> (rows, what was done)."""
    rows, what = [], "intact"
    for src in range(rnd.randint(1, 2)):
        source, base = f"c{case}s{src}", rnd.choice([0, 0, 5, 1000])
        n = rnd.randint(1, 7)
        # positions may tie (trx_id breaks the tie); ids need not sort like positions
        keys = sorted((f"{rnd.randint(1, 9):04X}", f"T{t}") for t in rnd.sample(range(10, 99), n))
        for i, (pos, trx) in enumerate(keys):
            for ev in range(1, rnd.randint(1, 3) + 1):
                rows.append([source, trx, base + i + 1, pos, base, ev])
    if rnd.random() < 0.7:
        r = rnd.randrange(len(rows))
        kind = rnd.choice(["seq", "seq", "pos", "trx", "null_seq", "null_trx", "swap", "base"])
        what = f"{kind} of row {r}"
        row = rows[r]
        if kind == "seq":
            row[2] = row[2] + rnd.choice([-2, -1, 1, 2])
        elif kind == "pos":
            row[3] = f"{rnd.randint(0, 10):04X}"
        elif kind == "trx":
            row[1] = rnd.choice([x[1] for x in rows] + ["T00", "T77"])
        elif kind == "null_seq":
            row[2] = None
        elif kind == "null_trx":
            row[1] = None
        elif kind == "swap":         # two transactions' sequence numbers exchanged
            a, b = row[1], rnd.choice(rows)[1]
            sa = next(x[2] for x in rows if x[1] == a and x[0] == row[0])
            sb = next((x[2] for x in rows if x[1] == b and x[0] == row[0]), sa)
            for x in rows:
                if x[0] == row[0] and x[1] in (a, b):
                    x[2] = sb if x[1] == a else sa
        else:                        # the manifest's seq_base for that source
            for x in rows:
                if x[0] == row[0]:
                    x[4] += rnd.choice([-1, 1])
    return [tuple(r) for r in rows], what


def _commit_order_reference(rows: list[tuple]) -> bool:
    """The rule as the old window applied it, row by row: per source, in (commit_position,
    trx_id, event_seq) order, the first change has seq_base + 1, a change of the same
    transaction as the one before has its commit_seq, another transaction the next one; and
    a transaction has one commit position and an id."""
    by_source: dict = {}
    for r in rows:
        by_source.setdefault(r[0], []).append(r)
    for source_rows in by_source.values():
        if any(r[1] is None or r[2] is None for r in source_rows):
            return False
        if len({(r[1], r[3]) for r in source_rows}) != len({r[1] for r in source_rows}):
            return False
        prev = None
        for r in sorted(source_rows, key=lambda r: (r[3], r[1], r[5])):
            want = r[4] + 1 if prev is None else prev[2] if prev[1] == r[1] else prev[2] + 1
            if r[2] != want:
                return False
            prev = r
    return True


def test_commit_order_check_agrees_with_the_rule_row_by_row(spark):
    """``with_commit_order_check`` (aggregations, no window) gives the verdict of the rule
    applied row by row in commit order, on 300 random nights of which ~70% carry one damage
    (a commit_seq moved, a position or transaction id changed, two transactions' numbers
    swapped, the source's seq_base off by one, nulls); on an intact night every row passes."""
    import random

    from pyspark.sql import functions as F

    rnd = random.Random(20261128)
    nights = [_commit_order_night(rnd, case) for case in range(300)]
    rows = [r for night, _ in nights for r in night]
    df = spark.createDataFrame(rows, "source STRING, trx_id STRING, commit_seq LONG, "
                                     "commit_position STRING, seq_base LONG, event_seq INT")
    got = V.with_commit_order_check(df).withColumn("case", F.regexp_extract("source", r"^c(\d+)s", 1)) \
        .groupBy("case").agg(F.min(F.col("seq_follows_commit_order").cast("int")).alias("ok"),
                             F.count(F.lit(1)).alias("n")).collect()
    verdict = {int(r["case"]): (bool(r["ok"]), r["n"]) for r in got}
    damaged = 0
    for case, (night, what) in enumerate(nights):
        want = _commit_order_reference(night)
        damaged += not want
        assert verdict[case] == (want, len(night)), (case, what, sorted(night, key=str))
        if what == "intact":
            assert want, night
    assert 60 < damaged < 240, damaged        # both verdicts well represented
