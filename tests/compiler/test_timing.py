"""Interleaved block timing and its statistics."""

import time

import numpy as np

from compilewatch.compiler import timing


def test_calls_per_block_targets_block_time():
    assert timing.calls_per_block(0.001, 20.0) == 20
    # a call longer than a block: still calls that follow calls (a training step's steady
    # state is launched while the step before it runs)
    assert timing.calls_per_block(1.0, 20.0) == timing.MIN_CALLS_PER_BLOCK == 3
    assert timing.calls_per_block(0.008, 20.0) == 3
    assert timing.calls_per_block(0.0, 20.0) == timing.MAX_CALLS_PER_BLOCK


def test_measure_orders_a_slow_and_a_fast_callable():
    def slow():
        time.sleep(0.02)

    def fast():
        time.sleep(0.002)

    t = timing.time_interleaved(slow, fast, "cpu", rounds=4, block_ms=20.0)
    assert len(t.eager_us) == len(t.compiled_us) == 4
    # a sleep never returns early, and 18 ms of difference survives a loaded machine
    assert np.median(t.eager_us) >= 20_000 and np.median(t.eager_us) > np.median(t.compiled_us)
    assert t.timer == "perf_counter"


def test_a_block_times_calls_that_follow_a_call_of_the_same_callable():
    """The first call after another callable's block is slower (a host that ran other code;
    on a GPU, a device that waited): a block leads with an untimed call, so no timed call is
    such a first one."""
    last: list[str] = []

    def fn(name: str):
        def call() -> None:
            time.sleep(0.03 if last[-1:] != [name] else 0.001)
            last.append(name)
        return call

    t = timing.time_interleaved(fn("e"), fn("c"), "cpu", rounds=4, block_ms=1.0)
    assert max(t.eager_us) < 25_000 and max(t.compiled_us) < 25_000


def test_cpu_blocks_have_no_host_fraction_and_warm_up_runs_for_its_time():
    calls = []
    t = timing.time_interleaved(lambda: None, lambda: calls.append(1), "cpu", rounds=2,
                                block_ms=1.0)
    assert t.host_fraction is None  # launch-bound is a GPU notion
    n = len(calls)
    t0 = time.perf_counter()
    timing.warm_up(lambda: calls.append(1), "cpu", 0.05)
    assert time.perf_counter() - t0 >= 0.05 and len(calls) > n
    timing.warm_up(lambda: calls.append(1), "cpu", 0.0)  # no warm-up asked: no call


def test_a_device_busy_a_moment_ago_needs_only_a_short_warm_up():
    from compilewatch.compiler.timing import warmup_s

    assert warmup_s(0.5, None) == 0.5  # unknown: the whole warm-up
    assert warmup_s(0.5, 30.0) == 0.5  # idle: clocks are down
    assert warmup_s(0.5, 0.01) == 0.1
    assert warmup_s(0.0, 0.01) == 0.0  # a CPU run has none at all


def test_a_reference_is_timed_as_a_third_block_of_every_round_in_alternating_order():
    seen: list[str] = []

    def fn(name: str, seconds: float):
        def call() -> None:
            seen.append(name)
            time.sleep(seconds)
        return call

    t = timing.time_interleaved(fn("e", 0.002), fn("c", 0.0), "cpu", rounds=4, block_ms=1.0,
                                reference=fn("r", 0.02))
    assert len(t.reference_us) == len(t.eager_us) == len(t.compiled_us) == 4
    assert min(t.reference_us) >= 20_000 > max(t.compiled_us)
    # the fewest calls a block (the reference sets k), each block led by an untimed call of
    # its own callable; after the calibration and warm-up blocks, the rounds go e, c, r then
    # r, c, e: each block sits first as often as last
    assert t.calls_per_block == timing.MIN_CALLS_PER_BLOCK
    block = timing.MIN_CALLS_PER_BLOCK + 1
    rounds = "".join(seen[-12 * block:])
    assert rounds == "".join(c * block for c in "ecr" "rce" "ecr" "rce")
    assert timing.time_interleaved(lambda: None, lambda: None, "cpu", rounds=2,
                                block_ms=1.0).reference_us == []
