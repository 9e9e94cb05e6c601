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


def _physical(df):
    plan = df._jdf.queryExecution().executedPlan()
    return plan.initialPlan() if plan.nodeName() == "AdaptiveSparkPlan" else plan


def test_the_changes_checks_shuffle_no_row_images_and_sort_no_whole_source(spark, tmp_path):
    """The ``changes`` check dataset is each row's own checks: nothing is shuffled but the
    catalog's few ids (broadcast). ``commit_order`` shuffles narrow rows (no row images: at
    five sources x 1M they made the validation's largest shuffle) and has no window (a
    window over a source sorted its whole night in one task: 21 s spilling 1.4 GB at 10M)."""
    doc = load_fixture("changes", "good")
    stage_fixture(spark, doc, tmp_path)
    stage_fixture(spark, load_fixture("commit_order", "good"), tmp_path / "co")
    changes = V.prepare_changes(spark, doc["manifest"], tmp_path)
    names = [n.nodeName() for n in _nodes(_physical(changes))]
    assert "Exchange" not in names and "BroadcastExchange" in names, names
    assert changes.count() == len(doc["datasets"]["changes"])
    order = V.prepare_commit_order(spark, doc["manifest"], tmp_path / "co")
    nodes = list(_nodes(_physical(order)))
    assert not [n for n in nodes if n.nodeName() == "Window"], _physical(order).toString()
    exchanges = [n for n in nodes if n.nodeName() == "Exchange"]
    assert exchanges
    for n in exchanges:
        cols = {n.output().apply(i).name() for i in range(n.output().size())}
        assert not cols & {"before", "after", "ddl"}, (cols, _physical(order).toString())


def _commit_order_night(rnd, case: int) -> tuple[list[list], list[list], str]:
    """One random night (1-2 sources, up to 7 transactions of 1-3 changes) numbered right,
    then maybe one damage -> (changes, transactions, what was done). A change is [source,
    trx_id, commit_seq, commit_position, event_seq]; a transaction [source, trx_id,
    commit_seq, commit_position, event_count, seq_base]."""
    changes, trx, what = [], [], "intact"
    for src in range(rnd.randint(1, 2)):
        source, base = f"c{case}s{src}", rnd.choice([0, 0, 5, 1000])
        n = rnd.randint(1, 7)
        # positions may tie (the id decides); ids need not sort like positions
        keys = sorted((f"{rnd.randint(1, 9):04X}", f"T{t}") for t in rnd.sample(range(10, 99), n))
        for i, (pos, tid) in enumerate(keys):
            k = rnd.randint(1, 3)
            trx.append([source, tid, base + i + 1, pos, k, base])
            changes += [[source, tid, base + i + 1, pos, ev] for ev in range(1, k + 1)]
    if rnd.random() < 0.75:
        kind = rnd.choice(["seq", "seq", "pos", "trx", "null_seq", "null_trx", "null_pos", "swap",
                           "base", "t_seq", "t_pos", "t_count", "t_drop", "t_dup", "t_swap"])
        r, t = rnd.choice(changes), rnd.choice(trx)
        what = f"{kind}: {r if kind[:2] != 't_' else t}"
        if kind == "seq":
            r[2] += rnd.choice([-2, -1, 1, 2])
        elif kind == "pos":
            r[3] = f"{rnd.randint(0, 10):04X}"
        elif kind == "trx":
            r[1] = rnd.choice([x[1] for x in changes] + ["T00", "T77"])
        elif kind == "null_seq":
            r[2] = None
        elif kind == "null_trx":
            r[1] = None
        elif kind == "null_pos":
            r[3] = None
        elif kind in ("swap", "t_swap"):   # two transactions' numbers exchanged (changes or both)
            u = rnd.choice([x for x in trx if x[0] == t[0]])
            a, b = t[2], u[2]
            for x in changes + trx if kind == "t_swap" else changes:
                if x[0] == t[0] and x[1] in (t[1], u[1]):
                    x[2] = b if x[1] == t[1] else a
        elif kind == "base":
            for x in trx:
                if x[0] == t[0]:
                    x[5] += rnd.choice([-1, 1])
        elif kind == "t_seq":
            t[2] += rnd.choice([-1, 1])
        elif kind == "t_pos":
            t[3] = f"{rnd.randint(0, 10):04X}"
        elif kind == "t_count":
            t[4] += rnd.choice([-1, 1])
        elif kind == "t_drop":
            trx.remove(t)
        else:
            trx.append(list(t))
    return changes, trx, what


def _commit_order_reference(changes: list[list], trx: list[list]) -> bool:
    """The rule applied change by change, as the window over a source did: in
    (commit_position, trx_id, event_seq) order the first change has seq_base + 1, a change
    of the same transaction as the one before has its commit_seq, another transaction's the
    next one; every change has a commit_seq and a transaction, a transaction one position;
    and the transactions are exactly those of the changes (id, commit_seq, position,
    number of changes), one row each."""
    sources = {x[0] for x in changes} | {x[0] for x in trx}
    for source in sources:
        rows = [x for x in changes if x[0] == source]
        held = [x for x in trx if x[0] == source]
        if any(None in (x[1], x[2], x[3]) for x in rows) or not held:
            return False
        if len({(x[1], x[3]) for x in rows}) != len({x[1] for x in rows}):
            return False
        base = held[0][5]
        if any(x[5] != base for x in held):
            return False
        prev = None
        for x in sorted(rows, key=lambda x: (x[3], x[1], x[4])):
            want = base + 1 if prev is None else prev[2] if prev[1] == x[1] else prev[2] + 1
            if x[2] != want:
                return False
            prev = x
        derived = sorted({(x[1], x[2], x[3], sum(y[1] == x[1] for y in rows)) for x in rows})
        if sorted((x[1], x[2], x[3], x[4]) for x in held) != derived:
            return False
    return True


def test_commit_order_check_agrees_with_the_rule_change_by_change(spark):
    """``commit_order`` (aggregations per commit_seq, no window over a source) and its
    per-source summary give the verdict of the rule applied change by change in commit order, on 400 random nights of
    which ~75% carry one damage (a change's commit_seq, position or transaction changed or
    null, two transactions' numbers swapped, the source's seq_base off by one; a
    transaction's commit_seq, position or count changed, a transaction lost or listed
    twice); on an intact night nothing is out of order or unmatched. A night's verdict is
    the summary's, with the two expectations of other suites that cover what has no commit_seq row:
    changes' commit_seq not null, transactions unique per (source, trx_id)."""
    import random

    from pyspark.sql import functions as F

    rnd = random.Random(20261128)
    nights = [_commit_order_night(rnd, case) for case in range(400)]
    changes = spark.createDataFrame(
        [x for c, _, _ in nights for x in c],
        "source STRING, trx_id STRING, commit_seq LONG, commit_position STRING, event_seq INT")
    trx = spark.createDataFrame(
        [x for _, t, _ in nights for x in t],
        "source STRING, trx_id STRING, commit_seq LONG, commit_position STRING, "
        "event_count LONG, seq_base LONG")
    summary = V.commit_order_summary(V.commit_order(changes, trx)).collect()
    verdict: dict[int, bool] = {}
    for r in summary:
        case = int(r["source"][1:].split("s")[0])
        verdict[case] = verdict.get(case, True) and r["out_of_order"] == r["unmatched"] == 0
        assert (r["first_out_of_order"] is None) == (r["out_of_order"] == 0), r
        assert (r["first_unmatched"] is None) == (r["unmatched"] == 0), r
    damaged = 0
    for case, (c, t, what) in enumerate(nights):
        want = _commit_order_reference(c, t)
        damaged += not want
        other_suites = (all(x[2] is not None for x in c)
                        and len({(x[0], x[1]) for x in t}) == len(t))
        assert (verdict.get(case, True) and other_suites) == want, (case, what, c, t)
        if what == "intact":
            assert want and verdict[case], (c, t)
    assert 100 < damaged < 320, damaged        # both verdicts well represented
