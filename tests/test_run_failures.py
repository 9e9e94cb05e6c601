"""``dblog run`` exits 3 when the run itself fails (SPEC section 6): nothing is published and
the message names the stage and the run."""

from __future__ import annotations

import pytest

from dblog.pipeline import describe_error

from .conftest import write_config
from .test_pipeline import run, synth

pytestmark = pytest.mark.spark


def _run_with_a_file_in_the_way(tmp_path, capsys, run_id: str, folder: str):
    """A night whose run dir has a file where a stage writes the folder ``folder``: the
    Spark write fails (a real I/O error of the run, not a verdict on the data). Returns
    (exit code, stderr, data root, run dir)."""
    config = write_config(tmp_path, [{"name": "pos_solid", "format": "soliddb"}])
    root = tmp_path / "data"
    synth(config, root, "2026-11-01", trx=20, seed=3)
    run_dir = root / "staging" / run_id
    run_dir.mkdir(parents=True)
    (run_dir / folder).write_text("not a directory")
    capsys.readouterr()
    rc = run(config, root, "2026-11-01", "--run-id", run_id)
    return rc, capsys.readouterr().err, root, run_dir


def test_a_failing_stage_exits_3_says_where_and_publishes_nothing(spark, tmp_path, capsys):
    # the ordering stage writes its work datasets under <run_dir>/ordering/
    rc, err, root, run_dir = _run_with_a_file_in_the_way(tmp_path, capsys, "broken", "ordering")
    assert rc == 3
    assert "the run failed in the order stage of run broken" in err, err
    assert str(run_dir) in err and "nothing was published" in err
    assert not (root / "published").exists()
    assert not (root / "state").exists()


def test_a_failing_step_beside_another_fails_the_night_and_is_named(spark, tmp_path, capsys):
    # the typed tables and the mirrors run side by side after the ordering: the mirror
    # step failing (its staging folder is a file here, a real I/O error) still fails the
    # night, names the stage and the step, and publishes nothing
    rc, err, root, run_dir = _run_with_a_file_in_the_way(tmp_path, capsys, "broken-mirror",
                                                         "mirror_prev")
    assert rc == 3
    assert "the run failed in the order stage (mirror step) of run broken-mirror" in err, err
    assert "NotADirectoryError" in err and "nothing was published" in err
    assert not (root / "published").exists()
    # the step beside it ran to its end (nothing is left half-submitted behind the failure)
    assert any((run_dir / "tables").rglob("*.parquet"))


def test_side_by_side_returns_every_result_and_names_the_failed_step():
    import threading

    from dblog.sparkio import StepFailed, side_by_side

    started, release = threading.Event(), threading.Event()
    done = []

    def slow():
        started.set()
        assert release.wait(10)
        done.append("slow")
        return 1

    def fails():
        assert started.wait(10)     # both run at once: the slow step is under way
        release.set()
        raise OSError("disk full")

    with pytest.raises(StepFailed) as err:
        side_by_side({"slow": slow, "broken": fails})
    assert err.value.step == "broken" and isinstance(err.value.cause, OSError)
    assert "the broken step failed: OSError: disk full" in str(err.value)
    assert done == ["slow"]                 # the other step ran to its end
    assert side_by_side({"a": lambda: 1, "b": lambda: "x"}) == {"a": 1, "b": "x"}
    with pytest.raises(StepFailed, match="the only step failed: ValueError"):
        side_by_side({"only": lambda: int("x")})


def test_out_of_memory_is_named_as_such():
    text = ("An error occurred while calling o412.parquet.\n: org.apache.spark.SparkException: "
            "Job aborted due to stage failure: Task 0 in stage 15.0 failed 1 times, most recent "
            "failure: Lost task 0.0 in stage 15.0 (TID 49) (executor driver): "
            "java.lang.OutOfMemoryError: Java heap space\n\tat java.base/java.util.Arrays.copyOf")
    msg = describe_error(RuntimeError(text))
    assert msg.startswith("out of memory (java.lang.OutOfMemoryError: Java heap space)")
    assert "DBLOG_DRIVER_MEMORY" in msg
    assert describe_error(ValueError("bad\nthings")) == "ValueError: bad"
