"""A preflight of the host's own noise: ``python -m compilewatch.compiler.hostcheck DEVICE``
prints a ``HostCheck`` as JSON.

A fixed pure-Python workload is timed over repeats (what a loaded or throttled CPU does to
launch-bound models and to compile times), and on CUDA a fixed matmul with CUDA events (GPU clock
stability). The spread is (p90 - p10) / median: robust to one descheduled repeat, sensitive to a
host that keeps changing speed. Stored with the run and shown in the report; a spread above the
limits below marks the run ``noisy``, and the judge silences the timings of the unit that was
unsteady (``noisy_units``): on a GPU run an unsteady CPU silences compile times and launch-bound
models, not what the GPU timed.

A noisy reading is taken again, up to ``ATTEMPTS`` times, and each unit keeps its quietest:
the preflight lasts a second or two of a run of minutes, and one bad reading would silence
every verdict of a run. A host that stays loaded is noisy in every attempt.

Both are warmed up first and each sample lasts milliseconds: an idle GPU clocks up slowly, and
short samples measured that ramp, not the host (docs/verdict-quality.md, "The host
preflight").
"""

from __future__ import annotations

import statistics
import sys
import time

from compilewatch.core.schema import HostCheck
from compilewatch.core.steadiness import is_noisy

REPEATS = 40
WARMUP_S = 0.5  # as long as the GPU warm-up before timing (``gpu_warmup_s``)
ATTEMPTS = 3
RETRY_PAUSE_S = 1.0
CPU_ITERS = 200_000  # 10-30 ms of pure Python a sample
GPU_MATMULS = 20  # 4096² bf16 matmuls a sample: a few ms on an H100/H200


def spread(times: list[float]) -> float:
    xs = sorted(times)
    lo, hi = xs[len(xs) // 10], xs[-1 - len(xs) // 10]
    med = statistics.median(xs)
    return (hi - lo) / med if med > 0 else 0.0


def cpu_work() -> float:
    """One sample of the fixed pure-Python workload: its seconds on this core, now."""
    t0 = time.perf_counter()
    acc = 0
    for i in range(CPU_ITERS):
        acc ^= i * i
    return time.perf_counter() - t0


def cpu_spread(repeats: int = REPEATS) -> float:
    end = time.perf_counter() + WARMUP_S
    while time.perf_counter() < end:
        cpu_work()
    return spread([cpu_work() for _ in range(repeats)])


def gpu_spread(repeats: int = REPEATS) -> float | None:
    import torch

    if not torch.cuda.is_available():
        return None
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    until = time.perf_counter() + WARMUP_S  # clocks up before measuring them
    while time.perf_counter() < until:
        for _ in range(GPU_MATMULS):
            a @ a
        torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(GPU_MATMULS):
            a @ a
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return spread(times)


def _detail(cpu: list[float], gpu: list[float]) -> str:
    def unit(name: str, xs: list[float]) -> str:
        earlier = f" (quietest of {len(xs)} tries: {', '.join(f'{x:.1%}' for x in xs)})" \
            if len(xs) > 1 else ""
        return f"{name} spread {min(xs):.1%}{earlier}"
    return ", ".join([unit("CPU workload", cpu), *([unit("GPU matmul", gpu)] if gpu else [])])


def check(device: str, attempts: int = ATTEMPTS) -> HostCheck:
    """The preflight, taken again while it reads noisy (each unit keeps its quietest try)."""
    cpus: list[float] = []
    gpus: list[float] = []
    for i in range(attempts):
        if i:
            time.sleep(RETRY_PAUSE_S)
        cpus.append(cpu_spread())
        gpu = gpu_spread() if device == "cuda" else None
        if gpu is not None:
            gpus.append(gpu)
        if not is_noisy(min(cpus), min(gpus) if gpus else None):
            break
    cpu, gpu = min(cpus), (min(gpus) if gpus else None)
    return HostCheck(cpu_spread=cpu, gpu_spread=gpu, noisy=is_noisy(cpu, gpu),
                     detail=_detail(cpus, gpus))


if __name__ == "__main__":
    print(check(sys.argv[1] if len(sys.argv) > 1 else "cpu").model_dump_json())
