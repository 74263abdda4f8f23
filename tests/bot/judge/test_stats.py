"""The statistics behind verdicts, held to the bar in MEASUREMENT.md: no alarm when base and head
are the same code, a real 5% slowdown found, with the noise where it lives (between processes).

Synthetic samples with known process effects: each timing process's host state shifts all its
samples (eager and compiled alike); samples within a process add 1-2% on top.
"""

from __future__ import annotations

import math
import random
import statistics

import numpy as np
import pytest

from compilewatch.bot.judge.comparison import Verdict
from compilewatch.bot.judge.stats import NoiseBands, verdict_of
from compilewatch.bot.judge.thresholds import MetricThreshold
from compilewatch.bot.judge.verdicts import compare
from compilewatch.core.estimates import Estimate, Prior, geomean, ratio
from compilewatch.core.schema import Config, HostCheck, ModelResult
from tests.factories import GPU, model_result, run_results

# the H200's noise (1-2% range), on a GPU config: a CPU's timings are judged strictly
GPU_BOUND = {"processes": 3, "process_spread": 0.007, "spread": 0.01,
             "config": Config(device="cuda")}
LAUNCH_BOUND = {"processes": 3, "process_spread": 0.02, "spread": 0.02, "launch_bound": True,
                "config": Config(device="cuda")}


def _side(level: float, rng: random.Random, k: int, between: float, within: float,
          n: int = 20) -> list[list[float]]:
    out = []
    for _ in range(k):
        shift = level * (1 + rng.gauss(0, between))
        out.append([shift * (1 + rng.gauss(0, within)) for _ in range(n)])
    return out


def _hierarchical_bootstrap(base: list[list[float]], head: list[list[float]],
                            rng: np.random.Generator, n: int = 1000) -> tuple[float, float]:
    """Resample processes, then samples within them: the textbook alternative."""
    def medians(groups: list[list[float]]) -> np.ndarray:
        arr = np.array(groups)
        pick = rng.integers(0, len(groups), size=(n, len(groups)))
        idx = rng.integers(0, arr.shape[1], size=(n, len(groups), arr.shape[1]))
        return np.median(arr[pick[:, :, None], idx].reshape(n, -1), axis=1)

    logs = np.log(medians(head)) - np.log(medians(base))
    lo, hi = np.quantile(logs, [0.025, 0.975])
    return math.exp(lo), math.exp(hi)


def test_process_intervals_keep_their_coverage_where_a_cluster_bootstrap_does_not():
    """Three processes a side, 2% between processes, 1% within, no real change: the interval
    must exclude 1 about 5% of the time (95% confidence). A bootstrap over three clusters sees
    ten distinct resamples per side and excludes 1 far more often: why the verdicts do not use
    one."""
    rng, gen = random.Random(11), np.random.default_rng(11)
    ours = boot = 0
    trials = 300
    for _ in range(trials):
        b, h = _side(100, rng, 3, 0.02, 0.01), _side(100, rng, 3, 0.02, 0.01)
        est = ratio(b, h)
        assert est is not None
        ours += est.excludes_one()
        lo, hi = _hierarchical_bootstrap(b, h, gen)
        boot += lo > 1 or hi < 1
    assert ours / trials <= 0.08
    assert boot / trials >= 2 * ours / trials and boot / trials > 0.1


def test_interval_covers_a_real_change_and_is_deterministic():
    rng = random.Random(3)
    b, h = _side(100, rng, 3, 0.01, 0.01), _side(110, rng, 3, 0.01, 0.01)
    est = ratio(b, h)
    assert est is not None and est.low < 1.10 < est.high and est.low > 1.0
    assert ratio(b, h) == est
    assert est.processes == (3, 3) and est.df == 4


def test_one_process_a_side_leans_on_the_prior():
    rng = random.Random(4)
    b, h = _side(100, rng, 1, 0.0, 0.01), _side(105, rng, 1, 0.0, 0.01)
    alone = ratio(b, h)
    assert alone is not None and alone.df == 0  # no evidence of process noise at all
    with_prior = ratio(b, h, prior=Prior(0.015, 2))
    assert with_prior is not None and with_prior.df == 2
    assert with_prior.half_width > 3 * alone.half_width


def test_paired_intervals_cancel_drift_shared_by_each_pair():
    """Pairs that ran side by side share their host's speed: a drift of +-10% between pairs
    cancels in the pair's ratio, a 20% change stands out."""
    rng = random.Random(5)
    drift = [1 + rng.gauss(0, 0.10) for _ in range(3)]
    base = [[10 * d * (1 + rng.gauss(0, 0.01))] for d in drift]
    head = [[12 * d * (1 + rng.gauss(0, 0.01))] for d in drift]
    paired = ratio(base, head, paired=True, prior=Prior(0.05, 4))
    unpaired = ratio(base, head, prior=Prior(0.05, 4))
    assert paired is not None and unpaired is not None and paired.paired
    assert paired.low > 1.0 and paired.half_width < unpaired.half_width


def test_undefined_ratios_give_none():
    assert ratio([], [[1.0]]) is None
    assert ratio([[0.0, 0.0]], [[1.0, 1.0]]) is None


T = MetricThreshold(regression=0.03)


def _est(r: float, lo: float, hi: float, sd: float = 0.005) -> Estimate:
    return Estimate(r, lo, hi, sd, 6, (3, 3))


@pytest.mark.parametrize(("est", "expected"), [
    (_est(1.05, 1.04, 1.06), Verdict.REGRESSION),
    (_est(1.05, 1.01, 1.09), Verdict.REGRESSION),  # past the band and significant
    (_est(1.05, 0.98, 1.12), Verdict.WITHIN_NOISE),  # past the band, not significant
    (_est(1.05, 1.01, 1.09, sd=0.02), Verdict.WITHIN_NOISE),  # noisy model: band is 6%
    (_est(1.01, 0.99, 1.04), Verdict.WITHIN_NOISE),  # straddles the threshold
    (_est(1.01, 0.99, 1.02), Verdict.UNCHANGED),
    (_est(0.95, 0.94, 0.96), Verdict.IMPROVEMENT),
    (_est(1.10, 0.60, 1.80), Verdict.NOISY),  # nothing can be concluded
    (_est(3.00, 1.50, 6.00, sd=0.2), Verdict.REGRESSION),  # a loud change shows through noise
])
def test_verdict_of(est, expected):
    verdict, band = verdict_of(est, T, base=100, head=100 * est.ratio, noise_factor=3.0,
                               noisy_half_width=0.25)
    assert verdict is expected
    assert band == max(0.03, 3 * est.sd)


@pytest.mark.parametrize(("processes", "factor"), [
    ((3, 3), 1.0), ((1, 1), 1.0), ((2, 3), 1.0), ((6, 6), 0.5 ** 0.25), ((12, 12), 0.25 ** 0.25),
    ((3, 6), (3 / 4) ** 0.25),  # the harmonic mean of 3 and 6 is 4
])
def test_more_processes_narrow_the_band_and_fewer_never_widen_it(processes, factor):
    est = Estimate(1.05, 1.02, 1.08, 0.02, 10, processes)
    _, band = verdict_of(est, T, base=100, head=105, noise_factor=3.0, noisy_half_width=0.25)
    assert band == pytest.approx(3 * 0.02 * factor)


def test_six_processes_a_side_settle_the_h200_compiler_side_change():
    """Repeat 8 on the H200: +9.2% [+4.8%, +13.7%], process SD 3.2%, 6+6 processes after a
    follow-up. Three SDs (9.7%) held it within noise; the narrowed band (8.2%) does not, and
    the same numbers from 3+3 processes still do."""
    six = Estimate(1.0916, 1.048, 1.137, 0.0324, 10, (6, 6))
    verdict, band = verdict_of(six, T, base=200.0, head=218.3, noise_factor=3.0,
                               noisy_half_width=0.25)
    assert (verdict, round(band, 3)) == (Verdict.REGRESSION, 0.082)
    three = Estimate(1.0916, 1.048, 1.137, 0.0324, 4, (3, 3))
    assert verdict_of(three, T, base=200.0, head=218.3, noise_factor=3.0,
                      noisy_half_width=0.25)[0] is Verdict.WITHIN_NOISE


def test_changes_under_the_absolute_floor_are_unchanged():
    t = MetricThreshold(regression=0.1, min_abs=0.5)
    est = Estimate(1.5, 1.4, 1.6, 0.01, 6, (3, 3))
    assert verdict_of(est, t, base=0.4, head=0.6, noise_factor=3,
                      noisy_half_width=0.25)[0] is Verdict.UNCHANGED
    assert verdict_of(est, t, base=4, head=6, noise_factor=3,
                      noisy_half_width=0.25)[0] is Verdict.REGRESSION


def _suite(n: int, seed: int, **kw: object) -> list:
    return [model_result(f"m{i}", seed=seed * 1000 + i, **kw) for i in range(n)]


@pytest.mark.parametrize("noise", [GPU_BOUND, LAUNCH_BOUND], ids=["gpu-bound", "launch-bound"])
def test_aa_flags_nothing_over_200_models(noise):
    c = compare(run_results(_suite(200, seed=1, **noise)), run_results(_suite(200, seed=2,
                                                                             **noise)))
    assert c.headline.regressions == c.headline.improvements == 0
    assert not c.gating_regression


def test_a_noisier_gpu_bound_model_keeps_its_band_of_three_times_its_own_spread():
    """GPU-bound models whose processes spread 2% (compiler_side on the H200 spread 5% in one
    repeat). The band counts the run's own spread although the interval already does: with the
    band at the threshold alone, A/A flagged 13 of 300 such models (this rule: 4) for +10%
    found in 200 of 200 instead of 195."""
    noisy = {**GPU_BOUND, "process_spread": 0.02}
    aa = compare(run_results(_suite(300, seed=1, **noisy)), run_results(_suite(300, seed=2,
                                                                               **noisy)))
    assert aa.headline.regressions + aa.headline.improvements <= 6
    bands = [r.compiled_time.band for r in aa.rows]
    assert max(bands) > 0.05  # some runs spread enough to need more than the 3% threshold
    up = compare(run_results(_suite(200, seed=3, **noisy)),
                 run_results(_suite(200, seed=4, compiled_us=55.0, **noisy)))
    assert [r.compiled_time.verdict for r in up.rows].count(Verdict.REGRESSION) >= 190


def test_a_5_percent_slowdown_of_gpu_bound_models_is_found():
    c = compare(run_results(_suite(100, seed=3, **GPU_BOUND)),
                run_results(_suite(100, seed=4, compiled_us=52.5, **GPU_BOUND)))
    found = [r.compiled_time.verdict for r in c.rows].count(Verdict.REGRESSION)
    assert found >= 95
    assert c.headline.improvements == 0


def test_a_10_percent_slowdown_of_launch_bound_models_is_found():
    c = compare(run_results(_suite(100, seed=5, **LAUNCH_BOUND)),
                run_results(_suite(100, seed=6, compiled_us=55.0, **LAUNCH_BOUND)))
    found = [r.compiled_time.verdict for r in c.rows].count(Verdict.REGRESSION)
    assert found >= 90
    assert {r.compiled_time.threshold for r in c.rows} == {0.06}


def test_a_5_percent_speedup_is_an_improvement():
    c = compare(run_results(_suite(20, seed=7, **GPU_BOUND)),
                run_results(_suite(20, seed=8, compiled_us=47.5, **GPU_BOUND)))
    assert {r.compiled_time.verdict for r in c.rows} == {Verdict.IMPROVEMENT}


def test_one_process_a_side_does_not_flag_5_percent():
    """Without seeing the noise between processes, 5% is not evidence: the interval assumes the
    default noise and says so."""
    c = compare(run_results(_suite(20, seed=9)), run_results(_suite(20, seed=10,
                                                                     compiled_us=52.5)))
    assert c.headline.regressions == 0
    assert all("one timing process a side" in (r.compiled_time.note or "") for r in c.rows)


def test_a_model_change_is_judged_on_compiled_time_whatever_eager_did():
    """A PR made the model 12% bigger: eager moved +12% because of the change. The old rule
    widened the compiled interval by eager's move and missed it; eager is never used when the
    graph or the inputs changed."""
    base = [model_result("m", seed=1, **LAUNCH_BOUND)]
    changed = {"gm": "gmhash0000000000", "example_inputs[0]": "longer0000000000"}
    head = [model_result("m", seed=2, eager_us=112, compiled_us=56, components=changed,
                         **LAUNCH_BOUND)]
    row = compare(run_results(base), run_results(head)).rows[0]
    assert row.compiled_time.verdict is Verdict.REGRESSION
    assert row.compiled_time.method == "processes"


def test_an_unchanged_launch_bound_model_on_a_slower_host_is_not_flagged():
    """Same model both sides, head's processes ran on a host 15% slower: eager and compiled both
    moved. Judged on compiled/eager per round, the host cancels."""
    base = [model_result("m", seed=1, **LAUNCH_BOUND)]
    head = [model_result("m", seed=2, host_speed=1.15, **LAUNCH_BOUND)]
    row = compare(run_results(base), run_results(head)).rows[0]
    assert row.compiled_time.verdict is not Verdict.REGRESSION
    assert row.compiled_time.method == "processes, eager-normalised"


def test_a_noisy_host_is_said_not_judged():
    noisy = HostCheck(cpu_spread=1.1, noisy=True, detail="CPU workload spread 110.0%")
    base = run_results(_suite(5, seed=11, **GPU_BOUND))
    head = run_results(_suite(5, seed=12, compiled_us=80.0, **GPU_BOUND))
    c = compare(base, head.model_copy(update={"host": noisy}))
    assert {r.compiled_time.verdict for r in c.rows} == {Verdict.NOISY}
    assert not c.gating_regression and c.headline.noisy == 5
    assert any("too noisy to judge (CPU workload spread 110.0%)" in n for n in c.notes)


def test_cold_compile_needs_several_samples_and_pairs_find_20_percent():
    one = compare(run_results([model_result("m", seed=1, cold_s=10, config=GPU)]),
                  run_results([model_result("m", seed=2, cold_s=20, config=GPU)])).rows[0]
    assert one.cold_compile.verdict is None and "not judged" in one.cold_compile.note
    three = compare(run_results([model_result("m", seed=3, cold_s=10, cold_processes=3,
                                              cold_spread=0.03, config=GPU)]),
                    run_results([model_result("m", seed=4, cold_s=12, cold_processes=3,
                                              cold_spread=0.03, config=GPU)])).rows[0]
    assert three.cold_compile.verdict is Verdict.REGRESSION and three.cold_compile.gating
    assert three.cold_compile.samples == (3, 3)
    # A/A with 5% independent noise per compile: the band (15%) sits 3.7 standard errors out,
    # so false alarms are rare, not impossible (about 1 in 2,000 comparisons).
    aa = [compare(run_results([model_result("m", seed=s, cold_processes=3, config=GPU)]),
                  run_results([model_result("m", seed=s + 1000, cold_processes=3,
                                            config=GPU)])).rows[0]
          for s in range(100)]
    assert len([r for r in aa if r.cold_compile.verdict is Verdict.REGRESSION]) <= 1


def test_calibrated_noise_replaces_the_default_band():
    ident = ("micro", "m", "cuda-default-float32-auto")
    loud = NoiseBands({ident: {"compiled_time": Prior(0.05, 20)}}, source="calibrate")
    base, head = (run_results([model_result("m", seed=s, compiled_us=us, **GPU_BOUND)])
                  for s, us in ((1, 50.0), (2, 52.5)))
    quiet = compare(base, head).rows[0].compiled_time
    calibrated = compare(base, head, noise=loud).rows[0].compiled_time
    assert quiet.verdict is Verdict.REGRESSION and not quiet.calibrated
    assert calibrated.calibrated and calibrated.band == pytest.approx(0.15, rel=0.2)
    assert calibrated.verdict is not Verdict.REGRESSION


def _side_shifted(n: int, change: float, shared: float | None) -> int:
    """Flagged of ``n`` models whose sides each draw a 2% shift all their three processes
    share (processes 0.5% apart), judged without a shared band or with one calibrated."""
    rng, flagged = random.Random(11), 0
    flags = (Verdict.REGRESSION,) if change else (Verdict.REGRESSION, Verdict.IMPROVEMENT)
    kw = {"processes": 3, "process_spread": 0.005, "spread": 0.01, "config": GPU}
    for i in range(n):
        b = model_result(f"m{i}", seed=i, compiled_us=50.0 * math.exp(rng.gauss(0, 0.02)), **kw)
        h = model_result(f"m{i}", seed=i + 5000, **kw,
                         compiled_us=50.0 * (1 + change) * math.exp(rng.gauss(0, 0.02)))
        noise = None if shared is None else NoiseBands(
            {b.ident: {"compiled_time_shared": Prior(shared, 4)}}, source="calibrate")
        flagged += compare(run_results([b]), run_results([h]),
                           noise=noise).rows[0].compiled_time.verdict in flags
    return flagged


def test_noise_a_side_shares_is_a_false_alarm_until_calibrated():
    """On the H200 a model's processes agreed within 1% a side while its two sides, the same
    code, differed by 3.1%. Processes cannot see that: A/A flags 91 of 300 such models. With
    the shared band ``calibrate`` learns across sides, 1; +10% is still found in 195."""
    assert _side_shifted(300, 0.0, None) >= 60
    assert _side_shifted(300, 0.0, 0.02) <= 3
    assert _side_shifted(300, 0.10, 0.02) >= 170


def test_a_calibrated_shared_band_is_said_in_the_verdict():
    b, h = model_result("m", seed=1, **GPU_BOUND), model_result("m", seed=2, **GPU_BOUND)
    noise = NoiseBands({b.ident: {"compiled_time_shared": Prior(0.015, 4)}}, source="calibrate")
    d = compare(run_results([b]), run_results([h]), noise=noise).rows[0].compiled_time
    assert "1.5% of noise a side's processes share (calibrated)" in (d.note or "")
    assert compare(run_results([b]), run_results([h])).rows[0].compiled_time.note is None


def test_geomean():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([]) is None


def test_spread_is_the_noise_the_interval_pools() -> None:
    """``spread`` (what calibrate stores) is the between-process SD of log medians, the same
    quantity ``ratio`` pools: with it as the only evidence, the interval's SD matches."""
    from compilewatch.core.estimates import spread

    rng = random.Random(5)
    procs = []
    for _ in range(6):  # a process effect of 5%, samples within a process 1% apart
        level = 100 * math.exp(rng.gauss(0.0, 0.05))
        procs.append([level * math.exp(rng.gauss(0.0, 0.01)) for _ in range(9)])
    band = spread(procs)
    assert band is not None and band.df == 5
    logs = [math.log(statistics.median(p)) for p in procs]
    assert band.sd == pytest.approx(statistics.stdev(logs))
    est = ratio(tuple(map(tuple, procs[:3])), tuple(map(tuple, procs[3:])))
    base, head = spread(procs[:3]), spread(procs[3:])
    assert est is not None and base is not None and head is not None
    assert est.sd == pytest.approx(math.sqrt((base.sd ** 2 + head.sd ** 2) / 2))
    assert spread([[1.0]]) is None and spread([[], [2.0]]) is None  # fewer than two processes


# A launch-bound model on the H200: whole processes run up to 1.6x slower on the host side
# (docs/verdict-quality.md), eager, compiled and any other model in the process alike; compiled
# over eager of one process still moves by 3% (linear32's calibrated band).
HOST_BOUND = {"processes": 6, "process_spread": 0.25, "spread": 0.02, "launch_bound": True,
              "reference_spread": 0.03, "config": GPU}
CHANGED = {"gm": "gmhash0000000000", "example_inputs[0]": "longer0000000000"}


@pytest.mark.parametrize(("change", "referenced", "most", "least"), [
    (1.10, 6, 100, 90),   # +10%, every process a side referenced (3 + 3 follow-ups): found
    (1.00, 6, 0, 0),      # no change in speed (the model changed, its time did not)
    (0.90, 6, 0, 0),      # -10%: never a regression...
    (1.10, 0, 30, 0),     # ...and without the reference the host's spread hides +10%
])
def test_a_changed_launch_bound_model_is_judged_against_base_eager_in_the_same_rounds(
        change: float, referenced: int, most: int, least: int) -> None:
    """The model changed, so its own eager moved with the change and cannot witness the host;
    base's eager model, timed in the same rounds on both sides, can: the host's 25% spread
    between processes cancels, a 10% change is found and an equal time is not flagged."""
    base = [model_result(f"m{i}", seed=100 + i, eager_us=50, compiled_us=50, reference_us=50,
                         referenced=referenced, **HOST_BOUND) for i in range(100)]
    head = [model_result(f"m{i}", seed=300 + i, eager_us=50 * change, compiled_us=50 * change,
                         reference_us=50, referenced=referenced, components=CHANGED,
                         **HOST_BOUND) for i in range(100)]
    rows = compare(run_results(base), run_results(head)).rows
    found = [r.compiled_time.verdict for r in rows].count(Verdict.REGRESSION)
    assert least <= found <= most
    if referenced:
        assert {r.compiled_time.method for r in rows} == {"processes, base-eager-normalised"}
        assert "6 and 6 processes" in (rows[0].compiled_time.note or "")
    if change == 1.00 and referenced:
        assert [r.compiled_time.verdict for r in rows].count(Verdict.IMPROVEMENT) == 0


def _cpu_processes(model: str, eager: list[float], compiled: list[float], seed: int,
                   components: dict[str, str] | None = None) -> ModelResult:
    """A CPU result whose timing processes have these eager and compiled medians (µs)."""
    r = model_result(model, seed=seed, processes=len(eager), spread=0.01, eager_us=100.0,
                     compiled_us=100.0, components=components)
    assert r.latency is not None
    e_out: list[float] = []
    c_out: list[float] = []
    for (e, c), me, mc in zip(r.latency.per_process(), eager, compiled, strict=True):
        e_out += [x * me / 100.0 for x in e]
        c_out += [x * mc / 100.0 for x in c]
    return r.model_copy(update={"latency": r.latency.model_copy(update={
        "eager_us": e_out, "compiled_us": c_out})})


CHANGED_MODEL = {"gm": "gmhash0000000000", "example_inputs[0]": "longer0000000000"}


@pytest.mark.parametrize(("case", "head_eager", "head_compiled", "components", "want"), [
    # as on a loaded 2-core machine (an A/A pair of shape_branch: compiled +36%, eager +40%):
    # head's processes ran on a host 40% slower
    ("host slower on head, same code", [11.2, 11.3], [28.0, 28.3], None, Verdict.WITHIN_NOISE),
    ("compiler-side slowdown, eager steady", [8.0, 8.1], [24.0, 24.3], None,
     Verdict.REGRESSION),
    ("compiler-side speedup, eager steady", [8.0, 8.1], [16.0, 16.2], None,
     Verdict.IMPROVEMENT),
    # the model changed: its eager moved because of the change and is never the witness
    ("a changed model, eager moved with it", [11.2, 11.3], [28.0, 28.3], CHANGED_MODEL,
     Verdict.REGRESSION),
    # compiled alone is judged where it calls no change, whatever eager did
    ("eager moved, compiled steady", [8.8, 8.9], [20.0, 20.2], None, Verdict.WITHIN_NOISE),
])
def test_a_cpu_run_calls_an_unchanged_models_change_only_where_compiled_over_eager_agrees(
        case: str, head_eager: list[float], head_compiled: list[float],
        components: dict[str, str] | None, want: Verdict) -> None:
    base = _cpu_processes("shape_branch", [8.0, 8.1], [20.0, 20.2], seed=1)
    head = _cpu_processes("shape_branch", head_eager, head_compiled, seed=2,
                          components=components)
    row = compare(run_results([base]), run_results([head])).rows[0]
    assert row.compiled_time is not None
    assert row.compiled_time.verdict is want, (case, row.compiled_time)
    disagreed = "disagree, so the host's speed moved" in (row.compiled_time.note or "")
    assert disagreed is (case == "host slower on head, same code")


def _gpu_launch_bound(model: str, eager: list[float], compiled: list[float],
                     seed: int) -> ModelResult:
    r = _cpu_processes(model, eager, compiled, seed)
    assert r.latency is not None
    return r.model_copy(update={"config": Config(device="cuda", mode="reduce-overhead"),
                                "latency": r.latency.model_copy(update={"launch_bound": True})})


@pytest.mark.parametrize(("case", "head_eager", "head_compiled", "want"), [
    # linear32 (CUDA graphs) in an H200 A/A repeat: head's eager launches ran 2.2 times
    # slower, its graph replays +31%: compiled/eager alone read -42%
    ("eager's launches slowed, graph replays less", [1954, 1812, 1943], [329, 220, 270],
     Verdict.NOISY),
    ("compiler-side slowdown, eager steady", [880, 790, 870], [262, 206, 254],
     Verdict.REGRESSION),
    ("compiler-side speedup, eager steady", [880, 790, 870], [182, 143, 176],
     Verdict.IMPROVEMENT),
])
def test_a_gpu_launch_bound_models_compiled_over_eager_is_witnessed_by_compiled_time(
        case: str, head_eager: list[float], head_compiled: list[float], want: Verdict) -> None:
    base = _gpu_launch_bound("linear32", [909, 779, 879], [227, 173, 220], seed=1)
    head = _gpu_launch_bound("linear32", head_eager, head_compiled, seed=2)
    row = compare(run_results([base]), run_results([head])).rows[0]
    assert row.compiled_time is not None
    assert row.compiled_time.method.startswith("processes, eager-normalised"), case
    assert row.compiled_time.verdict is want, (case, row.compiled_time)
    disagreed = "disagree, so the host's speed moved" in (row.compiled_time.note or "")
    assert disagreed is (want is Verdict.NOISY)
    assert bool(row.gating_findings) is (want is Verdict.REGRESSION)


def test_the_eager_witness_is_the_cpus_alone():
    """On a GPU a GPU-bound model's eager is the host's noise, not a witness of the kernels."""
    cuda = Config(device="cuda")
    base = _cpu_processes("m", [8.0, 8.1], [20.0, 20.2], seed=1)
    head = _cpu_processes("m", [11.2, 11.3], [28.0, 28.3], seed=2)
    row = compare(run_results([base.model_copy(update={"config": cuda})]),
                  run_results([head.model_copy(update={"config": cuda})])).rows[0]
    assert row.compiled_time.verdict is Verdict.REGRESSION
    assert "witnessed" not in row.compiled_time.method


def test_the_eager_witness_needs_one_environment_on_both_sides():
    """A different torch build moves eager by itself: there the compiled time is judged
    alone (the comparison's note says the environments differ)."""
    from tests.factories import environment

    base = _cpu_processes("m", [8.0, 8.1], [20.0, 20.2], seed=1)
    head = _cpu_processes("m", [11.2, 11.3], [28.0, 28.3], seed=2)
    other = environment(fingerprint="e" * 32, torch="2.14.1+cpu")
    c = compare(run_results([base]), run_results([head], env=other))
    assert c.rows[0].compiled_time.verdict is Verdict.REGRESSION
    assert any("different environments" in n for n in c.notes)


@pytest.mark.parametrize(("sd", "pairs", "least"), [
    (0.02, 3, 0.98),  # a quiet compile: three pairs are plenty
    (0.03, 3, 0.90),  # the noise the +20% target needs at the default three pairs
    (0.04, 5, 0.88),  # or five pairs at 4%
])
def test_cold_compile_pairs_find_20_percent_where_the_noise_allows_and_never_flag_aa(
        sd: float, pairs: int, least: float) -> None:
    """Cold compiles with a known within-side noise (one compile's log standard deviation;
    5-8% measured on the H200, benchmarks/cold_power.py has the whole table): +20% is found
    in at least ``least`` of the draws, and an A/A draw is flagged at most once in 300."""
    rng = random.Random(7)

    def side(change: float) -> ModelResult:
        colds = [3.0 * change * math.exp(rng.gauss(0.0, sd)) for _ in range(pairs)]
        r = model_result("m", seed=1, config=GPU)
        return r.model_copy(update={"compile": r.compile.model_copy(update={
            "cold_samples_s": colds, "cold_s": statistics.median(colds)})})

    def judged(change: float) -> Verdict | None:
        row = compare(run_results([side(1.0)]), run_results([side(change)])).rows[0]
        assert row.cold_compile is not None and row.cold_compile.samples == (pairs, pairs)
        return row.cold_compile.verdict

    found = [judged(1.2) for _ in range(300)]
    aa = [judged(1.0) for _ in range(300)]
    assert found.count(Verdict.REGRESSION) >= least * 300
    assert sum(v in (Verdict.REGRESSION, Verdict.IMPROVEMENT) for v in aa) <= 1


def _on_gpus(r: ModelResult, uuids: list[str]) -> ModelResult:
    from compilewatch.core.schema import GpuIdentity

    assert r.latency is not None
    gpus = [GpuIdentity(index=i, uuid=u, name="NVIDIA H200") for i, u in enumerate(uuids)]
    return r.model_copy(update={"config": Config(device="cuda"),
                                "latency": r.latency.model_copy(update={"gpus": gpus})})


def test_samples_of_two_different_gpus_are_never_compared() -> None:
    """Base timed on one GPU, head on another: compiled time is shown, not judged, and the
    row says why; where some processes share a GPU, only those are paired."""
    base = _on_gpus(model_result("m", seed=1, **GPU_BOUND), ["GPU-a"] * 3)
    slower = model_result("m", seed=2, compiled_us=60.0, **GPU_BOUND)
    row = compare(run_results([base]), run_results([_on_gpus(slower, ["GPU-b"] * 3)])).rows[0]
    assert row.compiled_time is not None and row.compiled_time.verdict is None
    assert row.compiled_time.method == "not compared: different GPUs"
    assert any("samples of two GPUs are never compared" in n for n in row.notes)
    assert not row.gating_findings and row.speedup is None
    mixed = compare(run_results([base]),
                    run_results([_on_gpus(slower, ["GPU-a", "GPU-b", "GPU-a"])])).rows[0]
    assert mixed.compiled_time.verdict is Verdict.REGRESSION
    assert mixed.compiled_time.samples == (3, 2)
    assert "(3 of 3 and 2 of 3)" in (mixed.compiled_time.note or "")
    same = compare(run_results([base]),
                   run_results([_on_gpus(slower, ["GPU-a"] * 3)])).rows[0]
    assert same.compiled_time.verdict is Verdict.REGRESSION
    assert "GPU" not in (same.compiled_time.note or "")
