"""The host preflight: the spread it computes and when it calls a host too noisy to judge."""

from __future__ import annotations

import pytest

from compilewatch.compiler import hostcheck


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
    assert hostcheck.is_noisy(cpu, gpu) is noisy


def test_check_on_a_cpu_reports_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hostcheck, "cpu_spread", lambda: 0.3)
    got = hostcheck.check("cpu")
    assert got.gpu_spread is None and got.noisy
    assert "CPU workload spread 30.0%" in got.detail
