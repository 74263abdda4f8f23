"""``--profile-kernels``: a measuring option of every measuring command, through the resolved
options to the loop and into the results' settings."""

from __future__ import annotations

from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.measure.harness import MeasureOptions


def test_profile_kernels_reaches_the_loop_and_the_results_settings() -> None:
    for command in ("run", "pr", "nightly"):
        res = CliRunner().invoke(main, [command, "--help"])
        assert "--profile-kernels" in res.output, command
    m = MeasureOptions(profile_kernels=True).resolve()
    assert m.loop_settings().profile_kernels
    assert m.run_settings(suites=["micro"]).profile_kernels
    off = MeasureOptions().resolve()
    assert not off.loop_settings().profile_kernels and off.loop_settings().profile is None
    assert not off.run_settings(suites=["micro"]).profile_kernels
