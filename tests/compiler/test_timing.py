"""Interleaved block timing and its statistics."""

import time

import numpy as np

from compilewatch.compiler import timing


def test_calls_per_block_targets_block_time():
    assert timing.calls_per_block(0.001, 20.0) == 20
    assert timing.calls_per_block(1.0, 20.0) == 1
    assert timing.calls_per_block(0.0, 20.0) == timing.MAX_CALLS_PER_BLOCK


def test_measure_orders_a_slow_and_a_fast_callable():
    def slow():
        time.sleep(0.02)

    def fast():
        time.sleep(0.002)

    t = timing.measure(slow, fast, "cpu", rounds=4, block_ms=20.0)
    assert len(t.eager_us) == len(t.compiled_us) == 4
    # a sleep never returns early, and 18 ms of difference survives a loaded machine
    assert np.median(t.eager_us) >= 20_000 and np.median(t.eager_us) > np.median(t.compiled_us)
    assert t.timer == "perf_counter"


def test_summary_ci_brackets_the_estimate():
    rng = np.random.default_rng(1)
    eager = list(100 * (1 + 0.02 * rng.standard_normal(40)))
    compiled = list(50 * (1 + 0.02 * rng.standard_normal(40)))
    s = timing.summarize(eager, compiled)
    sp = s["speedup"]
    assert sp["ci_low"] < sp["value"] < sp["ci_high"]
    assert 1.9 < sp["value"] < 2.1 and sp["ci_high"] - sp["ci_low"] < 0.2


def test_constant_samples_give_degenerate_interval():
    s = timing.summarize([10.0] * 5, [5.0] * 5)
    assert s["speedup"] == {"value": 2.0, "ci_low": 2.0, "ci_high": 2.0}
