"""The "nothing measured" rule: a run in which no model was measured fails, naming why the
models were skipped, unless the user asked for an empty run (``--allow-empty``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.measure.outcome import check_something_measured, nothing_measured
from compilewatch.core.errors import NothingMeasured
from compilewatch.core.results_file import load_results, save_results
from compilewatch.core.schema import Category
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
    """``--device cuda`` on this machine (no GPU): refused before anything starts, with one
    message (no note about compile slots first), even with -q: nothing written, nothing
    stored, and no run id named (``runs`` would not list it)."""
    out = tmp_path / "r.json"
    db = tmp_path / "cw.db"
    args = ["run", "--suite", harness_suite, "--model", "breaks", "--device", "cuda",
            "--no-warm", "-q", "--out", str(out), "--db", f"sqlite:///{db}"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("compilewatch: error: --device cuda: ")
    assert "torch.cuda.is_available() is False" in res.output and "--device cpu" in res.output
    assert "note:" not in res.output and not re.search(r"\b[0-9a-f]{12}\b", res.output)
    assert not out.exists() and not db.exists()


def test_an_accepted_empty_run_names_only_a_stored_id(tmp_path: Path, harness_suite: str
                                                      ) -> None:
    """With --allow-empty the skipped run is recorded: it is written, stored, and ``runs``
    lists it."""
    out, url = tmp_path / "r.json", f"sqlite:///{tmp_path / 'cw.db'}"
    res = CliRunner().invoke(main, ["run", "--suite", harness_suite, "--model", "breaks",
                                    "--device", "cuda", "--no-warm", "--out", str(out),
                                    "--db", url, "--allow-empty"])
    assert res.exit_code == 0, res.output
    run_id = load_results(out).run_id
    listed = CliRunner().invoke(main, ["runs", "--db", url, "--json"])
    assert [r["run_id"] for r in json.loads(listed.stdout)["runs"]] == [run_id]
    named = set(re.findall(r"\b[0-9a-f]{12}\b", res.output))
    assert named <= {run_id[:12]}


def test_a_run_refused_after_measuring_names_its_file_not_an_unstored_id(
        tmp_path: Path, harness_suite: str) -> None:
    """Every model skipped for another reason (here: a package the model needs is missing):
    the file is written for its reasons, the run is not stored, and the message names the file
    instead of a run id that ``runs`` would not list."""
    suite = tmp_path / "needs.py"
    suite.write_text("from compilewatch.suites import model\n\n"
                     "@model('needy', requires=('surely_not_installed_pkg',))\n"
                     "def needy():\n    import torch\n"
                     "    return torch.nn.Linear(2, 2), (torch.randn(1, 2),)\n",
                     encoding="utf-8")
    out, db = tmp_path / "r.json", tmp_path / "cw.db"
    res = CliRunner().invoke(main, ["run", "--suite", str(suite), "--no-warm", "-q",
                                    "--out", str(out), "--db", f"sqlite:///{db}"])
    assert res.exit_code == 2, res.output
    assert f"the results are in {out}; the run is not stored" in res.output
    assert load_results(out).run_id[:12] not in res.output
    assert "surely_not_installed_pkg" in res.output and not db.exists()
