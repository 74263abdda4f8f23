"""Steady-state timing of eager vs compiled inside one process, designed for the noise in
docs/measurement.md.

Method ("interleaved-blocks"): calibrate k so a block of k back-to-back calls takes about
``block_ms`` (at least ``MIN_CALLS_PER_BLOCK``); then for each of R rounds time one eager block
and one compiled block, alternating which goes first, with one device sync per block (CUDA
events on GPU, perf_counter on CPU). Each block starts with one untimed call (``lead``): a
user's loop runs calls back to back, so its steady state is a call launched while the previous
one still runs, on a host that just ran the same call. A block of one synchronised call after
another callable's block timed neither: a training step read 13.9 ms where a plain loop of
the same step read 9.7 (docs/verdict-quality.md, "Training against a plain loop").
Samples are per-call times, paired by round, so host drift hits both sides alike. On CUDA each
compiled block also records how long the host took to launch it: when that is close to the GPU
time, the GPU was waiting for the CPU (the model is launch-bound). Noise between processes, where
most of it lives, is handled by running several processes (``compiler/schedule.py``) and by the
process-level intervals of ``core/estimates.py``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

WARMUP_BLOCKS = 2
MIN_CALLS_PER_BLOCK = 3  # what the plain loop of docs/verdict-quality.md times a block
MAX_CALLS_PER_BLOCK = 10_000


@dataclass(frozen=True)
class Timed:
    eager_us: list[float]
    compiled_us: list[float]
    calls_per_block: int
    timer: str
    host_fraction: float | None = None  # median launch time / GPU time of compiled blocks
    reference_us: list[float] = field(default_factory=list)  # the reference, by round
    host_us: float | None = None  # median host time launching one compiled call (cuda)


# time k calls of fn after one untimed lead call: (seconds on the device's clock, seconds the
# host spent launching them)
BlockTimer = Callable[[Callable[[], Any], int], tuple[float, float]]


def _block_timer(device: str) -> tuple[str, BlockTimer]:
    """Return a function timing k calls of fn, synchronising once per block. The lead call
    runs first, untimed: on a GPU the clock starts when the device finishes it, with the
    host already launching the next, as in a loop's steady state."""
    import torch

    if device == "cuda":
        def time_block(fn: Callable[[], Any], k: int) -> tuple[float, float]:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            fn()  # the lead
            start.record()
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            end.record()
            host = time.perf_counter() - t0
            end.synchronize()
            return start.elapsed_time(end) / 1e3, host

        return "cuda_event", time_block

    def time_block_cpu(fn: Callable[[], Any], k: int) -> tuple[float, float]:
        fn()  # the lead: the host's caches hold this call's path, not the other callable's
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        took = time.perf_counter() - t0
        return took, took

    return "perf_counter", time_block_cpu


BUSY_S = 1.0  # a device used this recently is still at its steady clocks
SHORT_WARMUP_S = 0.1


def warmup_s(full_s: float, idle_s: float | None) -> float:
    """The warm-up a timing section needs: all of it after an idle device (or when unknown),
    a short one right after another section (the GPU's clocks are still up): a PR of 13
    models measured in full runs 78 timing processes, 39 s of warm-up at 0.5 s each."""
    if idle_s is not None and idle_s < BUSY_S:
        return min(full_s, SHORT_WARMUP_S)
    return full_s


def warm_up(fn: Callable[[], Any], device: str, seconds: float) -> None:
    """Keep the device busy with ``fn`` for ``seconds`` first, so clocks are at their steady
    state when timing starts (a GPU idle during compiles runs at lower clocks)."""
    if seconds <= 0:
        return
    _, time_block = _block_timer(device)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        time_block(fn, 10)


def calls_per_block(one_call_s: float, block_ms: float) -> int:
    """Timed calls a block: about ``block_ms`` of them, never fewer than
    ``MIN_CALLS_PER_BLOCK``, so a block of slow calls still times calls that follow calls."""
    k = round(block_ms / 1e3 / max(one_call_s, 1e-9))
    return int(min(MAX_CALLS_PER_BLOCK, max(MIN_CALLS_PER_BLOCK, k)))


def time_interleaved(eager: Callable[[], Any], compiled: Callable[[], Any], device: str,
                     rounds: int, block_ms: float, reference: Callable[[], Any] | None = None
                     ) -> Timed:
    """Interleaved block timing of two zero-argument callables (three with ``reference``)."""
    timer, time_block = _block_timer(device)
    fns = [eager, compiled] + ([reference] if reference is not None else [])
    one = max(time_block(fn, 1)[0] for fn in fns)
    k = calls_per_block(one, block_ms)
    for _ in range(WARMUP_BLOCKS):
        for fn in fns:
            time_block(fn, k)
    eager_us: list[float] = []
    compiled_us: list[float] = []
    reference_us: list[float] = []
    fractions: list[float] = []
    hosts: list[float] = []
    order = [(eager, eager_us), (compiled, compiled_us)]
    if reference is not None:
        order.append((reference, reference_us))
    for r in range(rounds):
        for fn, out in order if r % 2 == 0 else order[::-1]:
            took, host = time_block(fn, k)
            out.append(took / k * 1e6)
            if fn is compiled and took > 0:
                fractions.append(host / took)
                hosts.append(host / k * 1e6)
    device = timer == "cuda_event"
    host_fraction = statistics.median(fractions) if fractions and device else None
    host_us = statistics.median(hosts) if hosts and device else None
    return Timed(eager_us, compiled_us, k, timer, host_fraction, reference_us, host_us)
