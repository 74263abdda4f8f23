"""`compilewatch run` orchestration: checkpoints after each model, so a killed run keeps what
it measured. No process starts (``FakeLauncher`` stands in for the launcher): the real loop
runs, and what is checked is when files are written."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from compilewatch.bot.cli.base import Collaborators
from compilewatch.bot.commands.run import RunRequest, run_command
from compilewatch.bot.measure.harness import MeasureOptions
from compilewatch.core.results_file import load_results
from tests.factories import FakeLauncher

CHECKOUT = Path(__file__).resolve().parents[2]  # this repository's checkout


def _run(harness_suite: str, out: Path, tmp_path: Path, repo: Path = CHECKOUT,
         raise_on: int | None = None) -> None:
    run_command(RunRequest(
        suites=(harness_suite,), models=("breaks", "branchy"), out=out,
        db_url=f"sqlite:///{tmp_path / 'cw.db'}", repo=repo,
        measure=MeasureOptions(rounds=3, block_ms=2.0, timeout_s=60.0, timing_processes=0,
                               quiet=True)),
        launcher=functools.partial(FakeLauncher, raise_on=raise_on))


def test_a_killed_run_keeps_the_models_it_finished(harness_suite: str, tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    with pytest.raises(KeyboardInterrupt):  # cancelled while the second model runs
        _run(harness_suite, out, tmp_path, raise_on=2)
    partial = load_results(out)
    assert [r.model for r in partial.results] == ["breaks"]
    assert partial.finished_at is None  # says: this run did not finish


def test_a_finished_run_says_so(harness_suite: str, tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    _run(harness_suite, out, tmp_path)
    done = load_results(out)
    assert [r.model for r in done.results] == ["breaks", "branchy"]
    assert done.finished_at is not None


def test_the_git_block_is_the_checkout_or_empty(harness_suite: str, tmp_path: Path) -> None:
    _run(harness_suite, tmp_path / "in.json", tmp_path)  # this repository
    assert load_results(tmp_path / "in.json").git.commit is not None
    plain = tmp_path / "plain"
    plain.mkdir()
    _run(harness_suite, tmp_path / "out.json", tmp_path, repo=plain)  # not a checkout
    assert load_results(tmp_path / "out.json").git.commit is None


@pytest.mark.parametrize("ready", [True, False])
def test_ready_compile_workers_reaches_every_worker_and_the_results(
        harness_suite: str, tmp_path: Path, ready: bool) -> None:
    """The flag changes what a cold compile's time means, so every worker gets it and the
    results file says which way its compiles were timed."""
    from tests.factories import worker_output

    seen: list[bool] = []

    def output(spec, name):  # type: ignore[no-untyped-def]
        seen.append(spec.ready_compile_workers)
        return worker_output(spec)

    out = tmp_path / "results.json"
    run_command(RunRequest(
        suites=(harness_suite,), models=("breaks",), out=out,
        db_url=f"sqlite:///{tmp_path / 'cw.db'}", repo=CHECKOUT,
        measure=MeasureOptions(rounds=3, block_ms=2.0, timeout_s=60.0, timing_processes=1,
                               ready_compile_workers=ready, quiet=True)),
        launcher=functools.partial(FakeLauncher, output=output))
    assert seen and set(seen) == {ready}
    settings = load_results(out).settings
    assert settings.ready_compile_workers is ready
    assert (settings.extra_processes, settings.extra_cold_processes) == (0, 0)  # one side


@pytest.mark.parametrize("how", ["--suite models.py", "--suite sub/models.py",
                                 "[tool.compilewatch] suites"])
def test_a_suite_file_relative_to_the_current_folder_is_found(
        harness_suite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """The listing child runs in a folder of its own: a relative suite file (the README's
    ``--suite`` with a file, or a repository's pyproject suites, run from its root) was looked
    for there and "does not exist"."""
    import shutil

    from click.testing import CliRunner

    from compilewatch.bot.cli import main

    name = "sub/models.py" if "sub" in how else "models.py"
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(harness_suite, tmp_path / name)
    args = ["--suite", name]
    if how.startswith("[tool"):
        (tmp_path / "pyproject.toml").write_text(f'[tool.compilewatch]\nsuites = ["{name}"]\n')
        args = []
    monkeypatch.chdir(tmp_path)
    fake = Collaborators(launcher=functools.partial(FakeLauncher, raise_on=None))
    res = CliRunner().invoke(main, ["run", *args, "--model", "breaks", "--no-warm", "-q",
                                    "--no-db", "--out", str(tmp_path / "r.json")], obj=fake)
    assert res.exit_code == 0, res.output
    (result,) = load_results(tmp_path / "r.json").results
    assert (result.model, result.status.value) == ("breaks", "pass")


def test_no_warm_records_zero_timing_processes(harness_suite: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``--no-warm`` runs no timing process (the first cold process times itself), and the
    results say 0, not 1; without it the device's default is recorded."""
    from click.testing import CliRunner

    from compilewatch.bot.cli import main

    fake = Collaborators(launcher=functools.partial(FakeLauncher, raise_on=None))
    for flags, want in ((["--no-warm"], 0), ([], 2)):
        out = tmp_path / f"r{want}.json"
        res = CliRunner().invoke(main, ["run", "--suite", harness_suite, "--model", "breaks",
                                        *flags, "-q", "--no-db", "--out", str(out)], obj=fake)
        assert res.exit_code == 0, res.output
        assert load_results(out).settings.timing_processes == want
        assert [p for _, _, p in FakeLauncher.launches].count("warm") == want
