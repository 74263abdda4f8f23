"""The "nothing measured" rule: a run in which no model was measured fails, naming why the
models were skipped, unless the user asked for an empty run (``--allow-empty``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.outcome import check_something_measured, nothing_measured
from compilewatch.core.errors import NothingMeasured
from compilewatch.core.schema import Category, save_results
from tests.factories import model_result, run_results

NO_GPU = ("device cuda requested but torch.cuda.is_available() is False on this machine")


def _all_skipped(n: int = 7):  # type: ignore[no-untyped-def]
    return run_results([model_result(f"m{i}", category=Category.UNSUPPORTED, error=NO_GPU)
                        for i in range(n)], run_id="0123456789abcdef")


@pytest.mark.parametrize(("results", "empty"), [
    ([], True),
    ([model_result("a", category=Category.UNSUPPORTED, error=NO_GPU)], True),
    ([model_result("a", category=Category.PACKAGE_MISSING, error="skipped: package not "
                   "installed: timm")], True),
    ([model_result("a", category=Category.INFRA, error="could not start a worker")], True),
    # the factory raised before anything was compiled (e.g. CUDA unusable in the worker)
    ([model_result("a", category=Category.BUILD_ERROR, error="Cannot re-initialize CUDA")],
     True),
    ([model_result("a", category=Category.UNSUPPORTED), model_result("b")], False),
    ([model_result("a", accuracy_passed=False)], False),  # measured, found a failure
    ([model_result("a", category=Category.COMPILE_ERROR, error="boom")], False),
    ([model_result("a", category=Category.TIMEOUT)], False),
])
def test_what_counts_as_measured(results, empty) -> None:  # type: ignore[no-untyped-def]
    assert (nothing_measured(run_results(results)) is not None) is empty


def test_the_message_names_why_the_models_were_skipped() -> None:
    run = run_results([*(model_result(f"m{i}", category=Category.UNSUPPORTED, error=NO_GPU)
                         for i in range(5)),
                       model_result("t", category=Category.PACKAGE_MISSING,
                                    error="skipped: package not installed: timm")],
                      run_id="0123456789abcdef")
    with pytest.raises(NothingMeasured) as e:
        check_something_measured(run, allow_empty=False)
    msg = str(e.value)
    assert "nothing was measured in run 0123456789ab" in msg
    assert "all 6 models were skipped" in msg
    assert "5 unsupported" in msg and NO_GPU in msg
    assert "1 package missing" in msg and "timm" in msg
    assert "--allow-empty" in msg
    assert e.value.exit_code == 2
    check_something_measured(run, allow_empty=True)  # asked for: no error
    check_something_measured(run_results([model_result("ok")]), allow_empty=False)


def test_compare_refuses_a_side_with_nothing_measured(tmp_path: Path) -> None:
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    save_results(run_results([model_result("m0")]), base)
    save_results(_all_skipped(), head)
    cli = CliRunner()
    res = cli.invoke(main, ["compare", str(base), str(head), "--repo", str(tmp_path)])
    assert res.exit_code == 2 and "head: nothing was measured" in res.output
    assert "7 unsupported" in res.output
    res = cli.invoke(main, ["compare", str(base), str(head), "--repo", str(tmp_path),
                            "--allow-empty"])
    assert res.exit_code == 0, res.output


def test_baseline_update_refuses_an_empty_run(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    save_results(_all_skipped(), path)
    res = CliRunner().invoke(main, ["baseline", "update", str(path), "--repo", str(tmp_path)])
    assert res.exit_code == 2 and "nothing was measured" in res.output
    assert not (tmp_path / ".compilewatch").exists()


def test_run_fails_when_nothing_was_measured_even_quietly(tmp_path: Path,
                                                         harness_suite: str) -> None:
    """``--device cuda`` on this machine (no GPU): every model is skipped by its worker; the run
    exits 2 saying why, even with -q, and stores nothing."""
    out = tmp_path / "r.json"
    db = tmp_path / "cw.db"
    args = ["run", "--suite", harness_suite, "--model", "breaks", "--device", "cuda",
            "--no-warm", "-q", "--out", str(out), "--db", f"sqlite:///{db}"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2 and "nothing was measured" in res.output
    assert "torch.cuda.is_available() is False" in res.output
    assert out.is_file()  # the results file keeps every model's reason
    assert not db.exists()  # the empty run is not stored
    assert CliRunner().invoke(main, [*args, "--allow-empty"]).exit_code == 0
