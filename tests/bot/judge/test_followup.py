"""When a first verdict asks for more timing processes or cold compiles
(``bot/judge/followup.py``), from the H200 case that motivated it: a compiler-side +9.8% change
whose three processes a side disagreed; and cold compiles that spread 5-8% within a side."""

from __future__ import annotations

import math
import random
from pathlib import Path

from compilewatch.bot.judge.comparison import Delta, Verdict
from compilewatch.bot.judge.followup import (
    asker,
    cold_asker,
    cold_unsettled,
    more_cold,
    more_processes,
)
from compilewatch.bot.judge.host import HostNoise
from compilewatch.bot.judge.project import load_project_config
from compilewatch.bot.judge.stats import NoiseBands
from compilewatch.bot.judge.thresholds import ThresholdPolicy, Thresholds
from compilewatch.bot.judge.verdicts import compare_model
from compilewatch.core.schema import Category, ModelResult
from tests.factories import GPU, cold_result, model_result, timed_result

T = Thresholds()
# per-process compiled medians (µs) of compiler_side, repeat 6 on the H200
BASE = [195.2, 203.3, 204.9]
HEAD = [208.7, 231.7, 222.7]


def _r(medians: list[float], seed: int) -> ModelResult:
    return timed_result("compiler_side", medians, seed)


def test_the_h200_case_asks_for_more_and_more_settles_it():
    b, h = _r(BASE, 1), _r(HEAD, 2)
    first = compare_model(b, h, T).compiled_time
    assert first is not None and first.verdict is Verdict.WITHIN_NOISE
    why = more_processes(b, h, T)
    assert why is not None and "+9.8%" in why and "within noise" in why and "3%" in why
    # three more processes a side that agree, as repeats 5 and 7 did
    b6, h6 = _r([*BASE, 199.0, 201.5, 198.2], 3), _r([*HEAD, 214.0, 217.9, 212.6], 4)
    settled = compare_model(b6, h6, T).compiled_time
    assert settled is not None and settled.verdict is Verdict.REGRESSION


def test_decided_small_or_out_of_reach_first_verdicts_stand():
    """Each case is first checked to be what its name says, so none passes for another
    reason."""
    cases = {
        "regression": (_r([200.0, 200.5, 199.6], 1), _r([220.1, 219.5, 220.6], 2),
                       Verdict.REGRESSION),
        "unchanged": (_r([200.0, 200.5, 199.6], 1), _r([200.2, 199.9, 200.4], 2),
                      Verdict.UNCHANGED),
        "undecided but under the threshold": (_r(BASE, 1), _r([196.0, 206.1, 202.0], 2),
                                              Verdict.WITHIN_NOISE),
        # launch_bound's medians in repeat 5 on the H200: +19% with a band of 71%
        "undecided, its band more than twice the estimate": (
            _r([322.0, 461.0, 705.0], 1), _r([501.0, 569.0, 620.0], 2), Verdict.WITHIN_NOISE),
    }
    for name, (b, h, first) in cases.items():
        d = compare_model(b, h, T).compiled_time
        assert d is not None and d.verdict is first, name
        assert more_processes(b, h, T) is None, name
    far = compare_model(*cases["undecided, its band more than twice the estimate"][:2],
                        T).compiled_time
    assert far.ratio > 1.15 and far.band > 2 * (far.ratio - 1)


def test_an_undecided_improvement_asks_too():
    b, h = _r(HEAD, 1), _r(BASE, 2)
    assert compare_model(b, h, T).compiled_time.verdict is Verdict.WITHIN_NOISE
    assert "-9.0%" in (more_processes(b, h, T) or "")


def test_models_that_failed_or_were_not_timed_are_not_followed_up():
    b = _r(BASE, 1)
    for category in (Category.CRASH, Category.COMPILE_ERROR, Category.TIMEOUT):
        assert more_processes(b, model_result("compiler_side", seed=2, category=category),
                              T) is None
    untimed = _r(HEAD, 2).model_copy(update={"latency": None})
    assert more_processes(b, untimed, T) is None


def test_the_loop_asks_with_the_base_checkouts_thresholds(tmp_path: Path):
    """The base checkout sets the threshold (the PR cannot loosen its own gate): at 20% the
    +9.8% case is not worth more processes."""
    (tmp_path / "pyproject.toml").write_text(
        "[tool.compilewatch.thresholds]\ncompiled_time = 0.2\n")
    b, h = _r(BASE, 1), _r(HEAD, 2)
    assert asker(load_project_config(tmp_path).threshold_policy(), NoiseBands())(b, h) is None
    assert asker(ThresholdPolicy(default=T), NoiseBands())(b, h) is not None


def _first(r: ModelResult, k: int) -> ModelResult:
    """The result as it stood after its first ``k`` timing processes."""
    lat = r.latency
    assert lat is not None
    sizes = lat.process_sizes[:k]
    n = sum(sizes)
    return r.model_copy(update={"latency": lat.model_copy(update={
        "process_sizes": sizes, "processes": k, "compiled_us": lat.compiled_us[:n],
        "eager_us": lat.eager_us[:n]})})


def _two_stage(spread: float, change: float, n: int = 300) -> tuple[int, int]:
    """Flagged models out of ``n`` (regressions, and improvements under A/A) with three
    processes a side, and with three more where ``more_processes`` asks."""
    once = twice = 0
    for i in range(n):
        kw = {"processes": 6, "process_spread": spread, "spread": 0.01, "config": GPU}
        b = model_result(f"m{i}", seed=i, **kw)
        h = model_result(f"m{i}", seed=i + 5000, compiled_us=50.0 * (1 + change), **kw)
        flags = (Verdict.REGRESSION,) if change else (Verdict.REGRESSION, Verdict.IMPROVEMENT)
        b3, h3 = _first(b, 3), _first(h, 3)
        first = compare_model(b3, h3, T).compiled_time.verdict
        final = compare_model(b, h, T).compiled_time.verdict if more_processes(b3, h3, T) \
            else first
        once += first in flags
        twice += final in flags
    return once, twice


def test_asking_for_more_finds_more_without_more_false_alarms():
    """Two looks at the data are a sequential test: the follow-up must not buy detections
    with false alarms. Synthetic models with 2% and 4% process noise (on the H200 the SD of
    GPU-bound models' process medians was under 1%, and 5% for compiler_side's head in
    repeat 6)."""
    for spread in (0.02, 0.04):
        once, twice = _two_stage(spread, 0.0)
        assert twice <= once + 1, spread
    once, twice = _two_stage(0.04, 0.10)
    # 165 -> 218 of 300 when this was written; 184 before six processes narrowed the band
    assert twice >= once + 40


def _cold(samples: list[float], seed: int = 1) -> ModelResult:
    return cold_result("m", samples, seed)


def test_cold_compile_follow_ups_ask_only_where_more_compiles_could_settle_it():
    """Each case is first checked to be what its name says."""
    cases = {
        # the scaled check's kind of miss on the H200: +17.6% with one side spread 8%
        "undecided past the threshold": ([3.0, 3.3, 2.8], [3.5, 3.3, 3.9], Verdict.WITHIN_NOISE,
                                          True),
        "undecided, an improvement": ([3.5, 3.3, 3.9], [3.0, 3.3, 2.8], Verdict.WITHIN_NOISE,
                                      True),
        # three pairs of the same code can agree by chance: every call is looked at again on
        # all the pairs, its interval reaching inside the threshold or not
        "a regression, its interval reaching inside": ([3.0, 3.05, 2.98], [3.6, 3.62, 3.58],
                                                        Verdict.REGRESSION, True),
        # the H200's A/A pair called +28.1% [+17.9%, +39.2%] on three pairs (+2% on the next
        # three): an interval wholly past the threshold is no proof either
        "an A/A regression by chance, past the threshold": (
            [3.08, 3.24, 3.05], [3.99, 4.2, 3.83], Verdict.REGRESSION, True),
        "a regression past doubt": ([3.0, 3.05, 2.98], [4.2, 4.25, 4.18], Verdict.REGRESSION,
                                    True),
        "an improvement, its interval reaching inside": ([3.6, 3.62, 3.58], [3.0, 3.05, 2.98],
                                                         Verdict.IMPROVEMENT, True),
        # the H200's A/A pair called -14.9% on three pairs (-8% on its six)
        "an A/A improvement by chance": ([4.05, 4.46, 4.4], [3.7, 3.67, 3.61],
                                         Verdict.IMPROVEMENT, True),
        "an improvement past doubt": ([4.2, 4.25, 4.18], [3.0, 3.05, 2.98], Verdict.IMPROVEMENT,
                                      True),
        "unchanged": ([3.0, 3.3, 2.8], [3.05, 3.2, 2.9], Verdict.UNCHANGED, False),
        "undecided, far under the threshold": ([3.0, 3.3, 2.8], [3.3, 2.9, 3.3],
                                               Verdict.WITHIN_NOISE, False),
    }
    for name, (b, h, first, asks) in cases.items():
        d = compare_model(_cold(b, 1), _cold(h, 2), T).cold_compile
        assert d is not None and d.verdict is first, (name, d)
        why = more_cold(_cold(b, 1), _cold(h, 2), T)
        assert (why is not None) is asks, name
    why = more_cold(_cold([3.0, 3.3, 2.8], 1), _cold([3.5, 3.3, 3.9], 2), T)
    assert why is not None and "+17.6%" in why and "15% threshold" in why
    why = more_cold(_cold([3.0, 3.05, 2.98], 1), _cold([3.6, 3.62, 3.58], 2), T)
    assert why is not None and "regression, called on them, to be confirmed against the 15% " \
        "threshold" in why
    one = model_result("m", seed=1, cold_s=3.0), model_result("m", seed=2, cold_s=3.6)
    assert compare_model(*one, T).cold_compile.verdict is None  # one a side: shown only
    assert more_cold(*one, T) is None
    reused = _cold([3.0, 3.3, 2.8], 1).model_copy(deep=True)
    reused.compile.cache_dir_was_empty = False  # not cold: no cold-compile verdict at all
    assert more_cold(reused, _cold([3.5, 3.3, 3.9], 2), T) is None


def test_every_cold_call_is_looked_at_again_and_nothing_else_is():
    """The confirmation's edge: a regression or improvement judged against a threshold asks,
    wherever its interval lies (inside the threshold, just past it, far past it); a verdict
    only shown (one sample a side: no threshold), a decided "unchanged", and no verdict do
    not."""
    def d(verdict: Verdict | None, ratio: float, low: float, high: float,
          threshold: float | None = 0.15) -> Delta:
        return Delta(base=3.0, head=3.0 * ratio, ratio=ratio, ci_low=low, ci_high=high,
                     verdict=verdict, threshold=threshold, samples=(3, 3))

    reg, imp = Verdict.REGRESSION, Verdict.IMPROVEMENT
    cases = [(d(reg, 1.25, 1.14, 1.40), True), (d(reg, 1.25, 1.151, 1.40), True),
             (d(reg, 1.60, 1.45, 1.75), True),
             (d(imp, 0.80, 0.70, 0.87), True), (d(imp, 0.80, 0.70, 0.86), True),
             (d(imp, 0.55, 0.50, 0.60), True),
             (d(Verdict.UNCHANGED, 1.01, 0.95, 1.07), False),
             (d(reg, 1.2, 1.0, 1.4, threshold=None), False),
             (d(None, 1.2, 1.0, 1.4), False),
             (None, False)]
    for delta, asks in cases:
        why = cold_unsettled(delta)
        assert (why is not None) is asks, delta
        if asks:
            assert "called on them, to be confirmed against the 15% threshold" in why


def test_no_more_cold_compiles_where_the_host_preflight_silences_compile_times():
    """A noisy CPU (which compiles) makes every compile-time verdict say "too noisy to judge":
    more cold compiles on that host settle nothing. A noisy GPU alone does not touch them."""
    b, h = _cold([3.0, 3.3, 2.8], 1), _cold([3.5, 3.3, 3.9], 2)
    cases = [(HostNoise(), True), (HostNoise(cpu=True, gpu_run=True), False),
             (HostNoise(gpu=True, gpu_run=True), True), (HostNoise(cpu=True), False)]
    for host, asks in cases:
        assert (more_cold(b, h, T, host=host) is not None) is asks, host
        assert (cold_asker(ThresholdPolicy(default=T), NoiseBands(), host)(b, h)
                is not None) is asks, host


def test_the_cold_asker_judges_with_the_base_checkouts_thresholds(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.compilewatch.thresholds]\ncold_compile = 0.5\n")
    b, h = _cold([3.0, 3.3, 2.8], 1), _cold([3.5, 3.3, 3.9], 2)
    assert cold_asker(load_project_config(tmp_path).threshold_policy(), NoiseBands())(b, h) \
        is None
    assert cold_asker(ThresholdPolicy(default=T), NoiseBands())(b, h) is not None


def _cold_two_stage(sd: float, change: float, n: int = 400, window: float = 0.0
                    ) -> tuple[int, int]:
    """Flagged models out of ``n`` with three cold compiles a side, and with three more where
    ``more_cold`` asks (drawn with a within-side noise ``sd``, the log's standard deviation).
    ``window``: the standard deviation of an offset one side's first three compiles share (the
    host's state while they ran), drawn once a model; the three later ones are free of it."""
    rng = random.Random(11)
    once = twice = 0
    flags = (Verdict.REGRESSION,) if change != 1 else (Verdict.REGRESSION, Verdict.IMPROVEMENT)
    for _ in range(n):
        b = [3.0 * math.exp(rng.gauss(0, sd)) for _ in range(6)]
        h = [3.0 * change * math.exp(rng.gauss(0, sd)) for _ in range(6)]
        shift = math.exp(rng.gauss(0, window)) if window else 1.0
        h[:3] = [x * shift for x in h[:3]]
        b3, h3 = _cold(b[:3], 1), _cold(h[:3], 2)
        first = compare_model(b3, h3, T).cold_compile.verdict
        final = compare_model(_cold(b, 1), _cold(h, 2), T).cold_compile.verdict \
            if more_cold(b3, h3, T) else first
        once += first in flags
        twice += final in flags
    return once, twice


def test_more_cold_compiles_find_more_and_take_back_chance_calls():
    """The two looks are a sequential test: at the 6-8% within-side noise measured on the
    H200, +20% is found far more often, and A/A pairs are flagged less often than on three
    pairs (a chance call is looked at again and taken back)."""
    for sd in (0.04, 0.06, 0.08):
        once, twice = _cold_two_stage(sd, 1.0)
        assert twice <= once, (sd, once, twice)
    once, twice = _cold_two_stage(0.08, 1.0)
    # A/A at 8%: 5 -> 0 of 400 when this was written (6%: 2 -> 0)
    assert once >= 3 and twice <= 1, (once, twice)
    once, twice = _cold_two_stage(0.06, 1.2)
    # 290 -> 330 of 400 when this was written (4%: 347 -> 382; 8%: 236 -> 261)
    assert twice >= once + 30 and twice >= 0.8 * 400, (once, twice)


def test_a_call_made_in_one_window_of_host_state_is_taken_back():
    """Pairs run one after another share the host's state of the moment: on the H200 an A/A
    model's first three head compiles ran 26-30% slower than base's, a +28.1% call with its
    interval [+17.9%, +39.2%] wholly past the threshold, and the next three pairs said +2%.
    Drawn so (one side's first three compiles share an offset of 15%), three pairs call
    about a third of A/A models; confirming every call on all six takes nearly all of them
    back (confirming only calls whose interval reaches inside the threshold: 50 of 400 stay),
    and costs +20% few detections."""
    once, twice = _cold_two_stage(0.04, 1.0, window=0.15)
    # 145 -> 4 of 400 when this was written
    assert once >= 100 and twice <= 10, (once, twice)
    once_, twice_ = _cold_two_stage(0.04, 1.2, window=0.15)
    assert twice_ >= once_, (once_, twice_)  # 250 -> 270
