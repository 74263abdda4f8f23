"""The host preflight: the spread it computes and when it calls a host too noisy to judge."""

from __future__ import annotations

import pytest

from compilewatch.compiler import hostcheck
from compilewatch.core import steadiness


def test_spread_ignores_one_descheduled_repeat_but_not_a_host_that_keeps_changing() -> None:
    steady = [10.0] * 39 + [50.0]  # one repeat lost the CPU
    assert hostcheck.spread(steady) == 0.0
    drifting = [10.0 + i * 0.25 for i in range(40)]  # 10 -> 19.75: the clock keeps moving
    assert hostcheck.spread(drifting) > 0.5


@pytest.mark.parametrize(("cpu", "gpu", "noisy"), [
    (0.10, None, False),
    (0.30, None, True),  # a CPU run: its own timings move with the CPU
    (0.33, 0.018, False),  # a quiet H200 runner, as measured: not noisy
    (0.05, 0.08, True),  # GPU clocks moving
    (0.70, 0.01, True),  # a CPU far off disturbs the GPU's launches too
])
def test_noisy_is_judged_on_the_unit_that_times(cpu: float, gpu: float | None,
                                                noisy: bool) -> None:
    assert steadiness.is_noisy(cpu, gpu) is noisy


def test_check_on_a_cpu_reports_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hostcheck, "cpu_spread", lambda: 0.3)
    monkeypatch.setattr(hostcheck, "RETRY_PAUSE_S", 0.0)
    got = hostcheck.check("cpu")
    assert got.gpu_spread is None and got.noisy
    assert "CPU workload spread 30.0%" in got.detail


@pytest.mark.parametrize(("cpu", "gpu", "units"), [
    (0.30, None, (True, False)),  # a CPU run: the CPU times everything
    (0.30, 0.018, (False, False)),  # beside a GPU the CPU has the wider limit
    (0.91, 0.021, (True, False)),  # the H200 reading: the CPU alone
    (0.10, 0.08, (False, True)),
    (0.90, 0.08, (True, True)),
])
def test_noisy_units_name_the_unit_that_was_unsteady(cpu: float, gpu: float | None,
                                                     units: tuple[bool, bool]) -> None:
    assert steadiness.noisy_units(cpu, gpu) == units


@pytest.mark.parametrize(("cpu_reads", "gpu_reads", "tries", "noisy"), [
    ([0.05], [0.01], 1, False),  # quiet at once: one try
    ([0.91, 0.12], [0.02, 0.02], 2, False),  # a burst at the start passes
    ([0.91, 0.85, 0.95], [0.02, 0.02, 0.02], 3, True),  # a host that stays loaded
    ([0.10, 0.10, 0.10], [0.09, 0.03], 2, False),  # GPU clocks settled on the second try
    ([0.10, 0.10, 0.10], [0.09, 0.08, 0.07], 3, True),
])
def test_a_noisy_preflight_is_taken_again_and_each_unit_keeps_its_quietest(
        monkeypatch: pytest.MonkeyPatch, cpu_reads: list[float], gpu_reads: list[float],
        tries: int, noisy: bool) -> None:
    cpu, gpu = iter(cpu_reads), iter(gpu_reads)
    monkeypatch.setattr(hostcheck, "cpu_spread", lambda: next(cpu))
    monkeypatch.setattr(hostcheck, "gpu_spread", lambda: next(gpu))
    monkeypatch.setattr(hostcheck, "RETRY_PAUSE_S", 0.0)
    got = hostcheck.check("cuda")
    assert got.noisy is noisy
    assert got.cpu_spread == min(cpu_reads[:tries]) and got.gpu_spread == min(gpu_reads[:tries])
    assert (f"quietest of {tries} tries" in got.detail) is (tries > 1)


def test_a_loaded_cpu_run_stays_noisy_after_every_try(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = iter([0.5, 0.4, 0.6])
    monkeypatch.setattr(hostcheck, "cpu_spread", lambda: next(reads))
    monkeypatch.setattr(hostcheck, "RETRY_PAUSE_S", 0.0)
    got = hostcheck.check("cpu")
    assert got.noisy and got.cpu_spread == 0.4 and got.gpu_spread is None
    assert got.detail == "CPU workload spread 40.0% (quietest of 3 tries: 50.0%, 40.0%, 60.0%)"
