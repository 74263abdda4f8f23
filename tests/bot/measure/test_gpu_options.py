"""Which GPUs a run times on: ``--gpus``, else every GPU torch sees, less those the preflight
leaves out; one GPU alone is the current device, as ever."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.measure import harness
from compilewatch.bot.measure.harness import MeasureOptions, preflight
from compilewatch.core.errors import UsageError
from compilewatch.core.schema import GpuSpread, HostCheck
from tests.factories import environment


def _host(*spreads: tuple[int, float, bool]) -> HostCheck:
    return HostCheck(cpu_spread=0.05, gpu_spread=0.01,
                     gpus=[GpuSpread(index=i, spread=s, left_out=out) for i, s, out in spreads])


@pytest.mark.parametrize(("asked", "visible", "host", "lanes"), [
    (None, 1, None, ()),  # one GPU: the current device, no lanes
    (None, 1, HostCheck(cpu_spread=0.05, gpu_spread=0.01), ()),
    (None, 4, _host((0, .01, False), (1, .01, False), (2, .01, False), (3, .01, False)),
     (0, 1, 2, 3)),
    (None, 4, _host((0, .01, False), (1, .09, True), (2, .01, False), (3, .01, False)),
     (0, 2, 3)),  # the noisy one left out
    (None, 2, _host((0, .09, True), (1, .01, False)), (1,)),  # the other GPU, by its index
    ((1, 3), 4, _host((1, .01, False), (3, .01, False)), (1, 3)),
    ((2,), 4, _host((2, .01, False)), (2,)),  # one GPU asked for: that one, by index
    ((0, 1), 2, None, (0, 1)),  # no preflight: what was asked
])
def test_the_timing_lanes_are_the_gpus_asked_for_less_those_left_out(
        asked: tuple[int, ...] | None, visible: int, host: HostCheck | None,
        lanes: tuple[int, ...]) -> None:
    m = MeasureOptions(device="cuda", pin_cpus=(), gpus=asked).resolve()
    m.check_gpus(visible)
    assert m.lanes(host, visible).gpus == lanes
    assert m.lanes(host, visible).loop_settings().gpus == lanes


def test_a_cpu_run_has_no_lanes() -> None:
    m = MeasureOptions().resolve()
    assert m.lanes(None, 0).gpus == () and m.lanes(None, 0).loop_settings().gpus == ()


@pytest.mark.parametrize(("options", "visible", "message"), [
    (MeasureOptions(gpus=(0,)), 1, "--gpus needs --device cuda"),
    (MeasureOptions(device="cuda", pin_cpus=(), gpus=(0, 0)), 2, "each GPU once"),
    (MeasureOptions(device="cuda", pin_cpus=(), gpus=(0, 4)), 2,
     "--gpus [4]: torch sees GPUs 0-1 here"),
    (MeasureOptions(device="cuda", pin_cpus=(), gpus=(0,)), 0, "torch sees no GPU here"),
])
def test_gpus_that_cannot_be_used_are_refused_before_measuring(
        options: MeasureOptions, visible: int, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("]", r"\]")):
        options.resolve().check_gpus(visible)


def test_the_preflight_reads_the_gpus_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[int, ...] | None] = []

    def check(device, python, gpus=None):  # type: ignore[no-untyped-def]
        asked.append(gpus)
        return _host((1, .01, False), (2, .09, True))

    monkeypatch.setattr(harness, "host_check", check)
    env = environment().model_copy(update={"gpu_count": 4})
    host, m = preflight(MeasureOptions(device="cuda", pin_cpus=(), gpus=(1, 2)).resolve(), env)
    assert asked == [(1, 2)] and m.gpus == (1,) and host is not None
    with pytest.raises(UsageError):
        preflight(MeasureOptions(device="cuda", pin_cpus=(), gpus=(7,)).resolve(), env)
    assert asked == [(1, 2)]  # refused before any preflight ran


def test_the_gpus_flag_is_parsed_and_a_bad_one_is_exit_2() -> None:
    import click

    for name in ("run", "pr", "nightly", "calibrate"):
        command = main.commands[name]
        [gpus] = [p for p in command.params if p.name == "gpus"]
        with click.Context(command) as ctx:
            assert gpus.process_value(ctx, "0, 2") == (0, 2)
            assert gpus.process_value(ctx, None) is None
    for command in ("run", "pr", "nightly", "calibrate"):
        assert "--gpus N[,N...]" in CliRunner().invoke(main, [command, "--help"]).output
    got = CliRunner().invoke(main, ["run", "--device", "cuda", "--gpus", "zero"])
    assert got.exit_code == 2 and "--gpus" in got.output and "Traceback" not in got.output


def test_each_timing_lane_times_on_a_core_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """By default one GPU times on the last core; with four lanes each has a core (the last
    four); cores named with --pin-cpus must be at least one a lane, said before measuring."""
    monkeypatch.setattr(harness, "available_cpus", lambda: set(range(16)))
    four = _host(*((i, .01, False) for i in range(4)))
    m = MeasureOptions(device="cuda").resolve()
    assert m.pin_cpus == (15,)
    assert m.lanes(None, 1).pin_cpus == (15,)
    assert m.lanes(four, 4).pin_cpus == (12, 13, 14, 15)
    assert m.lanes(four, 4).run_options().pin_cpus == (12, 13, 14, 15)
    named = MeasureOptions(device="cuda", pin_cpus=(10, 11, 12, 13)).resolve()
    assert named.lanes(four, 4).pin_cpus == (10, 11, 12, 13)
    with pytest.raises(UsageError, match=r"--pin-cpus names 1 core\(s\) for 4 GPU timing lanes"):
        MeasureOptions(device="cuda", pin_cpus=(15,)).resolve().lanes(four, 4)


def test_too_few_pin_cpus_for_the_lanes_asked_is_refused_before_the_preflight(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two cores for three GPUs is refused whatever the preflight would find (it could leave a
    noisy GPU out and make the cores enough: a run must not pass or fail on that)."""
    monkeypatch.setattr(harness, "available_cpus", lambda: set(range(16)))
    m = MeasureOptions(device="cuda", pin_cpus=(14, 15)).resolve()
    with pytest.raises(UsageError, match=r"names 2 core\(s\) for 3 GPU timing lanes"):
        m.check_gpus(3)
    m.check_gpus(2)  # one core a lane
    MeasureOptions(device="cuda", pin_cpus=(14, 15), gpus=(0, 2)).resolve().check_gpus(3)


@pytest.mark.parametrize(("flag", "value", "said"), [
    ("--pin-cpus", "1,x", "a comma-separated list of core numbers"),
    ("--gpus", "zero", "a comma-separated list of GPU indices"),
    ("--allow-installed", "my-pkg", "'my-pkg' is not a top-level module name"),
])
def test_a_measuring_flag_that_does_not_parse_is_exit_2_naming_it(flag: str, value: str,
                                                                   said: str) -> None:
    for command in ("run", "pr", "nightly", "calibrate"):
        got = CliRunner().invoke(main, [command, flag, value])
        assert got.exit_code == 2, (command, got.output)
        assert flag in got.output and said in got.output and "Traceback" not in got.output
