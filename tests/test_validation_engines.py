"""Great Expectations' pandas engine (small check datasets) and its Spark engine give the
same verdicts.

``dblog.validate.run_checkpoint`` validates a check dataset of at most ``pandas_rows`` rows
with GX's pandas engine, from a one-file copy read and written with pyarrow, and a bigger one
with GX's Spark engine. Oracle: the suites' good and bad fixtures (``expectations/fixtures``)
go through ``write_checks`` once and then through one Checkpoint per engine; every
expectation of every suite must get the same verdict from both, and the bad fixtures must
still fail exactly where they declare.
"""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dblog import validate as V
from tests.test_validation_suites import key, load_fixture, stage_fixture


@pytest.fixture(scope="module")
def checks(spark, tmp_path_factory):
    """{kind: checks folder} with every suite's check dataset of the fixtures of ``kind``."""
    out = {}
    for kind in ("good", "bad"):
        base = tmp_path_factory.mktemp(f"engines_{kind}")
        for suite in V.SUITES:
            run_dir = base / "runs" / suite
            stage_fixture(spark, load_fixture(suite, kind), run_dir)
            made = V.write_checks(spark, load_fixture(suite, kind)["manifest"], run_dir, (suite,))
            shutil.copytree(made / suite, base / "checks" / suite)
        out[kind] = base
    return out


def rows_of(base) -> dict[str, int]:
    return {s: sum(pq.ParquetFile(f).metadata.num_rows for f in (base / "checks" / s).glob("*.parquet"))
            for s in V.SUITES}


def verdicts(spark, base, engine: str) -> tuple[bool, dict[str, bool], list[str]]:
    """One Checkpoint over all suites: ``spark`` (every suite on GX's Spark engine),
    ``pandas`` (every suite on its pandas engine) or ``mixed`` (the suites with the fewest
    rows on pandas, the others on Spark, in the same Checkpoint)."""
    project = base / f"gx_{engine}"
    rows = rows_of(base)
    limit = {"spark": 0, "pandas": 10**9, "mixed": min(rows.values())}[engine]
    res = V.run_checkpoint(base / "checks", base / f"docs_{engine}", project, f"oracle_{engine}",
                           pandas_rows=limit)
    copies = sorted(p.name for p in (project / V.PANDAS_DIR).glob("*.parquet")) \
        if (project / V.PANDAS_DIR).is_dir() else []
    assert copies == sorted(f"gx-{s}.parquet" for s in V.SUITES if rows[s] <= limit)
    if engine == "mixed":
        assert 0 < len(copies) < len(V.SUITES)
    success, failures, rows = V.summarize(res, spark, base / "checks")
    assert (base / f"docs_{engine}" / "index.html").is_file()
    # the project defines no config variable: GX's scaffolded file (re-parsed on every
    # configuration access) is gone, and the Checkpoint ran without it
    assert not (project / "gx" / "uncommitted" / "config_variables.yml").exists()
    assert (project / "gx" / "great_expectations.yml").is_file()
    return success, {f"{r['suite']}:{key(r)}": r["success"] for r in rows}, failures


@pytest.mark.spark
@pytest.mark.parametrize("kind", ("good", "bad"))
def test_pandas_and_spark_engines_give_the_same_verdicts(spark, checks, kind):
    s_ok, s_rows, s_fail = verdicts(spark, checks[kind], "spark")
    p_ok, p_rows, p_fail = verdicts(spark, checks[kind], "pandas")
    every = {f"{s}:{key({'expectation': e['type'], 'column': e['kwargs'].get('column') or e['kwargs'].get('column_list')})}"
             for s in V.SUITES
             for e in json.loads((V.EXPECTATIONS_DIR / f"{s}.json").read_text())["expectations"]}
    assert set(s_rows) == set(p_rows) == every
    assert p_rows == s_rows
    assert p_ok == s_ok == (kind == "good")
    assert p_fail == s_fail          # the same messages, with the same quoted rows
    if kind == "bad":
        declared = {f"{s}:{k}" for s in V.SUITES for k in load_fixture(s, "bad")["fails"]}
        assert {k for k, ok in p_rows.items() if not ok} == declared
        # both engines in one Checkpoint (a night with some big check datasets)
        m_ok, m_rows, m_fail = verdicts(spark, checks[kind], "mixed")
        assert (m_ok, m_rows, m_fail) == (s_ok, s_rows, s_fail)


def _dataset(path, rows_per_file: list[int]) -> None:
    path.mkdir(parents=True)
    for i, n in enumerate(rows_per_file):
        pq.write_table(pa.table({"source": [f"s{i}"] * n, "ok": [True] * n}),
                       path / f"part-{i:05d}.parquet")
    (path / "_SUCCESS").write_text("")


def test_small_check_copies_by_rows_from_the_footers(tmp_path):
    checks = tmp_path / "checks"
    _dataset(checks / "small", [2, 3])            # 5 rows in two files: one file of 5 rows
    _dataset(checks / "big", [4, 4])              # 8 rows: left to the Spark engine
    (checks / "empty_dir").mkdir()                # no Parquet at all: Spark reports it
    copies = V.small_check_copies(checks, ("small", "big", "empty_dir"), 5, tmp_path / "out")
    assert copies == {"small": tmp_path / "out" / "gx-small.parquet"}
    table = pq.read_table(copies["small"])
    assert table.num_rows == 5 and sorted(table.column("source").to_pylist()) == \
        ["s0", "s0", "s1", "s1", "s1"]
    assert V.small_check_copies(checks, ("small", "big"), 0, tmp_path / "none") == {}
    assert not (tmp_path / "none").exists()


def test_pandas_rows_setting(monkeypatch):
    monkeypatch.delenv(V.PANDAS_ROWS_ENV, raising=False)
    assert V.pandas_max_rows() == V.PANDAS_MAX_ROWS
    monkeypatch.setenv(V.PANDAS_ROWS_ENV, "0")
    assert V.pandas_max_rows() == 0
    for bad in ("many", "-1"):
        monkeypatch.setenv(V.PANDAS_ROWS_ENV, bad)
        with pytest.raises(ValueError, match=V.PANDAS_ROWS_ENV):
            V.pandas_max_rows()


def test_the_validation_runs_with_its_own_partition_size_and_restores_the_sessions(spark, monkeypatch):
    """``validate_stage`` runs its queries with ``VALIDATE_PARTITION_SIZE`` as adaptive
    execution's target partition size and gives the session its own back afterwards, also
    when the stage fails."""
    key = V.PARTITION_SIZE_KEY
    before = spark.conf.get(key)
    seen = []

    def stage(spark_, manifest, run_dir, root):
        seen.append(spark_.conf.get(key))
        if manifest.get("fail"):
            raise RuntimeError("a failed stage")
        return "result"

    monkeypatch.setattr(V, "_validate_stage", stage)
    assert V.validate_stage(spark, {}, None, None) == "result"
    with pytest.raises(RuntimeError, match="a failed stage"):
        V.validate_stage(spark, {"fail": True}, None, None)
    assert seen == [V.VALIDATE_PARTITION_SIZE] * 2 and V.VALIDATE_PARTITION_SIZE != before
    assert spark.conf.get(key) == before
