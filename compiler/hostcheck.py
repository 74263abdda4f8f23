"""A preflight of the host's own noise: ``python -m compilewatch.compiler.hostcheck DEVICE``
prints a ``HostCheck`` as JSON.

A fixed pure-Python workload is timed over repeats (what a loaded or throttled CPU does to
launch-bound models and to compile times), and on CUDA a fixed matmul with CUDA events (GPU clock
stability). The spread is (p90 - p10) / median: robust to one descheduled repeat, sensitive to a
host that keeps changing speed. Stored with the run and shown in the report; a spread above the
limits below marks the run ``noisy``, and the judge silences the timings of the unit that was
unsteady (``noisy_units``): on a GPU run an unsteady CPU silences compile times and launch-bound
models, not what the GPU timed.

On a host of several GPUs each GPU is read (``--gpus``, else every one torch sees): a GPU
whose spread is past the limit while another's is not is left out of timing (``left_out``),
and ``gpu_spread`` is the noisiest of those kept. Only where every GPU is noisy is the run
noisy for it.

A noisy reading is taken again, up to ``ATTEMPTS`` times, and each unit keeps its quietest:
the preflight lasts a second or two of a run of minutes, and one bad reading would silence
every verdict of a run. A host that stays loaded is noisy in every attempt.

Both are warmed up first and each sample lasts milliseconds: an idle GPU clocks up slowly, and
short samples measured that ramp, not the host (docs/verdict-quality.md, "The host
preflight").
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time

from compilewatch.core.schema import GpuSpread, HostCheck
from compilewatch.core.steadiness import is_noisy, noisy_units

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


def gpu_spread(repeats: int = REPEATS, index: int | None = None) -> float | None:
    """The fixed GPU workload's spread on GPU ``index`` (None: the current device)."""
    import torch

    if not torch.cuda.is_available():
        return None
    with torch.cuda.device(index) if index is not None else contextlib.nullcontext():
        return _gpu_spread(repeats)


def _gpu_spread(repeats: int) -> float:
    import torch

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


def _detail(cpu: list[float], gpus: dict[int | None, list[float]], kept: set[int | None]
            ) -> str:
    def unit(name: str, xs: list[float]) -> str:
        earlier = f" (quietest of {len(xs)} tries: {', '.join(f'{x:.1%}' for x in xs)})" \
            if len(xs) > 1 else ""
        return f"{name} spread {min(xs):.1%}{earlier}"

    read = {i: xs for i, xs in gpus.items() if xs}
    if list(read) in ([], [None]):
        return ", ".join([unit("CPU workload", cpu), *(unit("GPU matmul", xs)
                                                       for xs in read.values())])
    tries = max(len(xs) for xs in read.values())
    each = ", ".join(f"{i}: {min(xs):.1%}" + ("" if i in kept else " (left out of timing)")
                     for i, xs in read.items())
    text = (f"{unit('CPU workload', cpu)}, GPU matmul spread by GPU "
            f"{each}{f' (quietest of {tries} tries)' if tries > 1 else ''}")
    return text if len(text) <= 256 else text[:253] + "..."


def leave_out(spreads: dict[int | None, float]) -> set[int | None]:
    """The GPUs too noisy to time on: past the GPU limit, while another GPU is not (where
    every GPU is noisy, none is left out: the run is noisy for them all)."""
    noisy = {i for i, s in spreads.items() if noisy_units(0.0, s)[1]}
    return noisy if noisy != set(spreads) else set()


def check(device: str, attempts: int = ATTEMPTS,
          indices: tuple[int, ...] | None = None) -> HostCheck:
    """The preflight, taken again while it reads noisy (each unit keeps its quietest try);
    on cuda each of ``indices`` (None: every GPU torch sees; one GPU: the current device)."""
    cpus: list[float] = []
    which: list[int | None] = [None] if device == "cuda" else []
    if device == "cuda" and (indices is not None or _gpu_count() > 1):
        which = list(indices if indices is not None else range(_gpu_count()))
    gpus: dict[int | None, list[float]] = {i: [] for i in which}
    for attempt in range(attempts):
        if attempt:
            time.sleep(RETRY_PAUSE_S)
        cpus.append(cpu_spread())
        for i in which:
            got = gpu_spread(index=i)
            if got is not None:
                gpus[i].append(got)
        # a GPU that reads noisy is read again too, left out or not: one burst should not
        # cost a lane
        quietest = [min(xs) for xs in gpus.values() if xs]
        if not is_noisy(min(cpus), max(quietest) if quietest else None):
            break
    cpu = min(cpus)
    quietest = {i: min(xs) for i, xs in gpus.items() if xs}
    out = leave_out(quietest)
    kept = [s for i, s in quietest.items() if i not in out]
    gpu = max(kept) if kept else None
    per_gpu = [GpuSpread(index=i, spread=s, left_out=i in out)
               for i, s in quietest.items() if i is not None]
    return HostCheck(cpu_spread=cpu, gpu_spread=gpu, noisy=is_noisy(cpu, gpu),
                     detail=_detail(cpus, gpus, set(quietest) - out), gpus=per_gpu)


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def main(argv: list[str]) -> None:
    """``DEVICE [--gpus N,N...]``: the preflight as JSON on stdout."""
    device = argv[0] if argv else "cpu"
    indices = tuple(int(x) for x in argv[2].split(",") if x) \
        if len(argv) > 2 and argv[1] == "--gpus" else None
    print(check(device, indices=indices).model_dump_json())


if __name__ == "__main__":
    main(sys.argv[1:])
