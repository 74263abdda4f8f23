"""Steady-state timing of eager vs compiled, designed for the noise in docs/measurement.md.

Method ("interleaved-blocks"): calibrate k so a block of k back-to-back calls takes about
``block_ms``; then for each of R rounds time one eager block and one compiled block, alternating
which goes first, with one device sync per block (CUDA events on GPU, perf_counter on CPU).
Samples are per-call times, paired by round, so host drift hits both sides alike. Speedup is the
ratio of medians with a paired bootstrap CI.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

WARMUP_BLOCKS = 2
MAX_CALLS_PER_BLOCK = 10_000


@dataclass(frozen=True)
class Timed:
    eager_us: list[float]
    compiled_us: list[float]
    calls_per_block: int
    timer: str


def _block_timer(device: str) -> tuple[str, Callable[[Callable[[], Any], int], float]]:
    """Return a function timing k calls of fn in seconds, synchronising once per block."""
    import torch

    if device == "cuda":
        def time_block(fn: Callable[[], Any], k: int) -> float:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(k):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3

        return "cuda_event", time_block

    def time_block_cpu(fn: Callable[[], Any], k: int) -> float:
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        return time.perf_counter() - t0

    return "perf_counter", time_block_cpu


def calls_per_block(one_call_s: float, block_ms: float) -> int:
    return int(min(MAX_CALLS_PER_BLOCK, max(1, round(block_ms / 1e3 / max(one_call_s, 1e-9)))))


def measure(eager: Callable[[], Any], compiled: Callable[[], Any], device: str, rounds: int,
            block_ms: float) -> Timed:
    """Interleaved block timing of two zero-argument callables."""
    timer, time_block = _block_timer(device)
    one = max(time_block(eager, 1), time_block(compiled, 1))
    k = calls_per_block(one, block_ms)
    for _ in range(WARMUP_BLOCKS):
        time_block(eager, k)
        time_block(compiled, k)
    eager_us: list[float] = []
    compiled_us: list[float] = []
    for r in range(rounds):
        order = ((eager, eager_us), (compiled, compiled_us))
        for fn, out in order if r % 2 == 0 else order[::-1]:
            out.append(time_block(fn, k) / k * 1e6)
    return Timed(eager_us, compiled_us, k, timer)


def bootstrap_ci(stat: Callable[..., float], *samples: np.ndarray, paired: bool = True,
                 confidence: float = 0.95, n_resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float, float]:
    """Point estimate and percentile-bootstrap CI of ``stat`` (scipy.stats.bootstrap)."""
    from scipy import stats

    value = float(stat(*samples))
    if min(len(s) for s in samples) < 3 or all(np.ptp(s) == 0 for s in samples):
        return value, value, value
    # scipy >= 1.15 calls the generator ``rng``; older releases ``random_state``.
    rng_kw = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"
    res = stats.bootstrap(samples, stat, paired=paired, vectorized=False,
                          confidence_level=confidence, n_resamples=n_resamples,
                          method="percentile", **{rng_kw: np.random.default_rng(seed)})
    return value, float(res.confidence_interval.low), float(res.confidence_interval.high)


def ratio_of_medians(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.median(a) / np.median(b))


def summarize(eager_us: list[float], compiled_us: list[float]) -> dict[str, Any]:
    """Medians, speedup (eager/compiled) and the compiled-time CI from per-call samples."""
    e, c = np.asarray(eager_us), np.asarray(compiled_us)
    speed = bootstrap_ci(ratio_of_medians, e, c, paired=len(e) == len(c))
    comp = bootstrap_ci(lambda x: float(np.median(x)), c)
    return {
        "speedup": {"value": speed[0], "ci_low": speed[1], "ci_high": speed[2]},
        "eager_median_us": float(np.median(e)),
        "compiled_median_us": float(np.median(c)),
        "compiled_ci_us": {"value": comp[0], "ci_low": comp[1], "ci_high": comp[2]},
    }
