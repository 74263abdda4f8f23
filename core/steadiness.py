"""When a host is too unsteady to time with: the limits on the preflight's spreads
(``compiler/hostcheck.py`` measures them) and which unit they silence, shared by the preflight
and the judge (``bot/judge/host.py``)."""

from __future__ import annotations

CPU_NOISY = 0.25  # a CPU run: its timings are this CPU's
# A GPU run: its timings are the GPU's (judged by GPU_NOISY); the CPU only disturbs them when
# it is far off (why 0.6 and not 0.25: docs/verdict-quality.md, "The host preflight").
CPU_NOISY_BESIDE_GPU = 0.6
GPU_NOISY = 0.05


def noisy_units(cpu: float, gpu: float | None) -> tuple[bool, bool]:
    """(CPU too noisy, GPU too noisy). A CPU run's CPU times everything (its limit is
    ``CPU_NOISY``); beside a GPU the CPU times compiles and launches (``CPU_NOISY_BESIDE_GPU``)."""
    if gpu is None:
        return cpu > CPU_NOISY, False
    return cpu > CPU_NOISY_BESIDE_GPU, gpu > GPU_NOISY


def is_noisy(cpu: float, gpu: float | None) -> bool:
    """Too noisy to judge something: the spread of either unit past its limit."""
    return any(noisy_units(cpu, gpu))
