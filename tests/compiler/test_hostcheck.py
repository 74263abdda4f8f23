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
    monkeypatch.setattr(hostcheck, "gpu_spread", lambda index=None: next(gpu))
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


@pytest.mark.parametrize(("reads", "left_out", "spread", "noisy", "tries"), [
    ({0: [0.01], 1: [0.012], 2: [0.015]}, [], 0.015, False, 1),  # all quiet: the noisiest
    ({0: [0.01] * 3, 1: [0.09] * 3, 2: [0.012] * 3}, [1], 0.012, False, 3),  # one left out
    ({0: [0.01] * 2, 1: [0.09, 0.02], 2: [0.012] * 2}, [], 0.02, False, 2),  # a burst: kept
    ({0: [0.08] * 3, 1: [0.09] * 3, 2: [0.07] * 3}, [], 0.09, True, 3),  # all noisy: none out
])
def test_each_gpu_is_read_and_a_noisy_one_is_left_out_of_timing(
        monkeypatch: pytest.MonkeyPatch, reads: dict[int, list[float]], left_out: list[int],
        spread: float, noisy: bool, tries: int) -> None:
    """A GPU past the limit while another is not is left out, and the run stays quiet for
    the GPUs kept; where every GPU is noisy, none is left out and the run is noisy."""
    its = {i: iter(xs) for i, xs in reads.items()}
    monkeypatch.setattr(hostcheck, "cpu_spread", lambda: 0.05)
    monkeypatch.setattr(hostcheck, "gpu_spread", lambda index=None: next(its[index]))
    monkeypatch.setattr(hostcheck, "_gpu_count", lambda: len(reads))
    monkeypatch.setattr(hostcheck, "RETRY_PAUSE_S", 0.0)
    got = hostcheck.check("cuda")
    assert [g.index for g in got.gpus] == list(reads)
    assert [g.index for g in got.gpus if g.left_out] == left_out
    assert got.timing_gpus() == tuple(i for i in reads if i not in left_out)
    assert got.gpu_spread == spread and got.noisy is noisy
    for i in left_out:
        assert f"{i}: 9.0% (left out of timing)" in got.detail
    assert (f"quietest of {tries} tries" in got.detail) is (tries > 1)


def test_only_the_gpus_asked_for_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int | None] = []
    monkeypatch.setattr(hostcheck, "cpu_spread", lambda: 0.05)
    monkeypatch.setattr(hostcheck, "gpu_spread", lambda index=None: asked.append(index) or 0.01)
    monkeypatch.setattr(hostcheck, "_gpu_count", lambda: 4)
    got = hostcheck.check("cuda", indices=(1, 3))
    assert asked == [1, 3] and got.timing_gpus() == (1, 3)
    asked.clear()
    monkeypatch.setattr(hostcheck, "_gpu_count", lambda: 1)
    got = hostcheck.check("cuda")  # one GPU: the current device, no lanes
    assert asked == [None] and got.gpus == [] and got.gpu_spread == 0.01
