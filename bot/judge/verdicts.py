"""Base against head: per-model verdicts, aggregates and headline. Computes only: no I/O, no
printing (asv's compare both computed and printed; renderers read the ``Comparison`` instead).

The method (medians, bootstrap intervals, the eager witness, thresholds) is in docs/compare.md.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass, field

from compilewatch.bot.judge.aggregates import aggregates, cache_summary
from compilewatch.bot.judge.baseline import Baseline, Expected, outcome
from compilewatch.bot.judge.cachediff import diff_cache
from compilewatch.bot.judge.code import code_notes
from compilewatch.bot.judge.comparison import (
    AccuracyChange,
    Comparison,
    CountDelta,
    Delta,
    GraphKeyChange,
    Headline,
    ModelRef,
    ModelRow,
    Side,
    Verdict,
)
from compilewatch.bot.judge.host import (
    HostNoise,
    Unit,
    host_noise,
    lanes_notes,
    steady_state_units,
)
from compilewatch.bot.judge.kernels import diff as kernel_diff
from compilewatch.bot.judge.shards import insufficient, shard_lines, shard_notes
from compilewatch.bot.judge.stats import NoiseBands, too_wide, too_wide_why, verdict_of
from compilewatch.bot.judge.thresholds import MetricThreshold, ThresholdPolicy, Thresholds
from compilewatch.core import estimates, unchanged
from compilewatch.core.errors import RegressionFound
from compilewatch.core.estimates import Estimate, Prior
from compilewatch.core.schema import (
    Category,
    GraphBreak,
    Latency,
    ModelResult,
    RunResults,
    Status,
)

FAILED = {"fail_accuracy", "fail_to_run", "eager_fail"}
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_SPACE = re.compile(r"\s+")
_ORDER = (Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.NOISY, Verdict.WITHIN_NOISE,
          Verdict.FAILING, Verdict.UNCHANGED)


def _policy(thresholds: Thresholds | ThresholdPolicy | None) -> ThresholdPolicy:
    if isinstance(thresholds, ThresholdPolicy):
        return thresholds
    return ThresholdPolicy(default=thresholds or Thresholds())


def _ran(r: ModelResult) -> bool:
    """Compiled and executed (an accuracy failure still ran and was timed)."""
    return r.status in (Status.PASS, Status.FAIL)


def _delta(est: Estimate | None, base: float, head: float, t: MetricThreshold | None,
           judge: Judging, *, note: str | None = None, method: str | None = None,
           calibrated: bool = False, timed_on: tuple[Unit, ...] = (),
           timed: bool = False) -> Delta:
    """One metric, judged (``t`` given) or only shown. ``timed_on``: the units whose steadiness
    the metric needs (``bot/judge/host.py``); a preflight that found one of them too noisy
    makes the verdict say so. ``timed``: a timing (not a count or a peak), which a CPU
    judges strictly (``Judging.strict``). An interval too wide to bound anything is never a
    number a reader is asked to trust: the note says so, and a judged one is too noisy."""
    if est is None:
        return Delta(base=base, head=head, note=note, method=method)
    verdict, band = (None, None)
    if t is not None:
        verdict, band = verdict_of(est, t, base=base, head=head,
                                   noise_factor=judge.thresholds.noise_factor,
                                   noisy_half_width=judge.thresholds.noisy_half_width,
                                   strict=timed and judge.strict)
        if timed_on and judge.host.silences(*timed_on) and verdict in (
                Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.WITHIN_NOISE):
            verdict = Verdict.NOISY  # the preflight found that unit too noisy: never judged
    if too_wide(est.low, est.high):
        why = too_wide_why(est.low, est.high, min(est.processes) or None)
        note = f"{why}; {note}" if note else why
        if verdict is not None and verdict is not Verdict.UNCHANGED:
            verdict = Verdict.NOISY
    return Delta(base=base, head=head, ratio=est.ratio, ci_low=est.low, ci_high=est.high,
                 verdict=verdict, gating=verdict is Verdict.REGRESSION and t is not None
                 and t.gate, threshold=t.regression if t is not None else None, note=note,
                 band=band, noise=est.sd, calibrated=calibrated, samples=est.processes,
                 method=method or ("paired processes" if est.paired else "processes"))


@dataclass(frozen=True)
class Judging:
    """What judging one model needs beside its two results."""

    thresholds: Thresholds
    ident: tuple[str, str, str]
    noise: NoiseBands
    host: HostNoise = field(default_factory=HostNoise)
    same_environment: bool = True
    # both sides measured in one loop (a ``pr``, a bisection's steps), not two runs apart
    one_loop: bool = True

    def prior(self, metric: str) -> tuple[Prior, bool]:
        return self.noise.prior(self.ident, metric)

    @property
    def strict(self) -> bool:
        """A CPU timing: the default noise bands were learned on GPUs and a CPU's speed moves
        by far more (docs/compare.md, "On a CPU"), so a change is called only where the whole
        interval lies past the band."""
        return self.ident[2].startswith("cpu-")


HOST_SATURATED = 0.97  # host launch time / GPU time: the GPU waited for the host all along


def _host_saturated(judged: Delta, bl: Latency, hl: Latency) -> Delta:
    """A changed model whose compiled call kept the GPU waiting for the host in every block
    timed the host's launches, not the GPU's work: more GPU work up to the host's margin
    cannot show (on the H200 a +25% heavier training step read +0.8%). "Unchanged" or "within
    noise" would claim what was not measured, so the verdict is "too noisy to judge", saying
    why; a change found stands (docs/compare.md, "Host-bound calls")."""
    sides = [(name, lat) for name, lat in (("base", bl), ("head", hl))
             if lat.host_fraction is not None and lat.host_fraction >= HOST_SATURATED]
    if not sides or judged.verdict not in (Verdict.UNCHANGED, Verdict.WITHIN_NOISE):
        return judged
    said = "; ".join(f"{name}: the host took {_ms(lat.compiled_host_us)} to launch a call of "
                     f"{_ms(shown_per_call(lat)[1])}" for name, lat in sides)
    note = (f"host-bound ({said}): the GPU waited for the host in every block, so a change "
            "in the GPU's work can hide under the host's time; not judged on compiled time "
            "(benchmarks/plain_loop.py times the call without the harness)")
    return judged.model_copy(update={
        "verdict": Verdict.NOISY, "gating": False,
        "note": f"{judged.note}; {note}" if judged.note else note})


def _ms(us: float | None) -> str:
    return "?" if us is None else f"{us / 1e3:.2f} ms"


def _model_unchanged(b: ModelResult, h: ModelResult) -> bool:
    """The model itself is the same on both sides (``unchanged.same_model``)."""
    return unchanged.same_model(b.cache.fx, h.cache.fx)


def shown_per_call(lat: Latency) -> tuple[float, float]:
    """(eager, compiled) µs per call as shown beside a ratio: each timing process's median,
    their geometric mean, the scale every ratio is taken on (``estimates.process_mean``). The
    median pooled over all samples (``compiled_median_us``) mixes processes that ran at
    different host speeds: on a loaded 2-core machine it read 559 µs -> 847 µs beside a
    judged -48.9%."""
    per = lat.per_process()
    return (estimates.process_mean([e for e, _ in per]) or 0.0,
            estimates.process_mean([c for _, c in per]) or 0.0)


def _timings(b: ModelResult, h: ModelResult, judge: Judging
             ) -> tuple[Delta | None, Delta | None, Delta | None]:
    """Compiled time (judged), eager time (the host witness) and speedup (context).

    Compiled time is judged on processes: each timing process's median, the interval from their
    spread (``core/estimates.py``). Where the model is unchanged and launch-bound, per-process
    compiled/eager ratios are judged instead, since eager then moves only with the host; where
    the model changed, its own eager moved because of the change and is never used, but the
    processes that also timed base's eager model (the same code on both sides: every timing
    process of a GPU model that changed) are judged on compiled over that reference when the
    model is launch-bound. Both ratios borrow the noise band of compiled/eager, which A/A
    calibration measures: there base's eager model is the model's own.
    """
    bl, hl = b.latency, h.latency
    if bl is None or hl is None or not bl.compiled_us or not hl.compiled_us:
        return None, None, None
    gpus = _same_gpus(bl, hl)
    if isinstance(gpus, str):  # no GPU both sides timed on: nothing to pair
        shown = shown_per_call(bl)[1], shown_per_call(hl)[1]
        return Delta(base=shown[0], head=shown[1], note=gpus,
                     method="not compared: different GPUs"), None, None
    bl, hl, gpu_note = gpus
    t = judge.thresholds
    launch_bound = bool(bl.launch_bound or hl.launch_bound)
    threshold = t.compiled_time_launch_bound if launch_bound else t.compiled_time
    raw_b = [c for _, c in bl.per_process()]
    raw_h = [c for _, c in hl.per_process()]
    groups_b, groups_h = raw_b, raw_h
    method, note, metric = "processes", None, "compiled_time"
    refs_b, refs_h = bl.referenced_per_process(), hl.referenced_per_process()
    if launch_bound and _model_unchanged(b, h):
        groups_b, groups_h = bl.normalised_per_process(), hl.normalised_per_process()
        method, metric = "processes, eager-normalised", "compiled_time_normalised"
        note = ("launch-bound and the model is unchanged: judged on compiled/eager per round, "
                "which the host's speed cancels out of")
    elif launch_bound and min(len(refs_b), len(refs_h)) >= 2:
        groups_b, groups_h = refs_b, refs_h
        method, metric = "processes, base-eager-normalised", "compiled_time_normalised"
        note = (f"launch-bound and the model changed: judged on compiled time over base's eager "
                f"model timed in the same rounds ({len(refs_b)} and {len(refs_h)} processes), "
                "which the host's speed cancels out of")
    if gpu_note:
        note = ((note + "; ") if note else "") + gpu_note
    prior, calibrated = judge.prior(metric)
    if min(len(groups_b), len(groups_h)) == 1 and not calibrated:
        note = ((note + "; ") if note else "") + (
            "one timing process a side: the interval assumes the default noise between "
            "processes (--processes 3 measures it)")
    shared, shared_calibrated = judge.prior(f"{metric}_shared")
    if shared_calibrated and shared.sd > 0:
        note = ((note + "; ") if note else "") + (
            f"the interval includes {shared.sd:.1%} of noise a side's processes share "
            "(calibrated)")
    compiled = estimates.ratio(groups_b, groups_h, confidence=t.confidence, prior=prior,
                               shared=shared)
    eager = estimates.ratio([e for e, _ in bl.per_process()], [e for e, _ in hl.per_process()],
                            confidence=t.confidence, prior=prior)
    speed = estimates.ratio([[e / c for e, c in zip(pe, pc, strict=False) if c > 0]
                             for pe, pc in bl.per_process()],
                            [[e / c for e, c in zip(pe, pc, strict=False) if c > 0]
                             for pe, pc in hl.per_process()], confidence=t.confidence)
    (eager_b, compiled_b), (eager_h, compiled_h) = shown_per_call(bl), shown_per_call(hl)
    judged = _delta(compiled, compiled_b, compiled_h, threshold, judge,
                    note=note, method=method, calibrated=calibrated,
                    timed_on=steady_state_units(bl.launch_bound, hl.launch_bound), timed=True)
    if metric == "compiled_time" and b.config.device == "cpu" and _model_unchanged(b, h) \
            and judge.same_environment:
        normalised = _view(bl.normalised_per_process(), hl.normalised_per_process(),
                           "compiled_time_normalised", (compiled_b, compiled_h), threshold,
                           judge, timed_on=("host", "device"))
        judged = _witnessed(judged, normalised, ("compiled time", "compiled/eager"),
                            "timed on the CPU and the model is unchanged")
    elif method == "processes, eager-normalised":
        raw = _view(raw_b, raw_h, "compiled_time", (compiled_b, compiled_h), threshold, judge)
        judged = _witnessed(judged, raw, ("compiled/eager", "compiled time"), opposite_only=True)
    if not _model_unchanged(b, h):
        judged = _host_saturated(judged, bl, hl)
    return (
        judged,
        _delta(eager, eager_b, eager_h, None, judge),
        _delta(speed, b.speedup.value if b.speedup else 0.0,
               h.speedup.value if h.speedup else 0.0, None, judge),
    )


def _same_gpus(bl: Latency, hl: Latency) -> tuple[Latency, Latency, str | None] | str:
    """Both sides' timing processes on the GPUs both used (a verdict never pairs samples of
    two GPUs), with a note where some were left out; a string, why nothing can be paired,
    where the two sides share no GPU. Results that record no GPU are paired as they are."""
    ub, uh = bl.gpu_uuids(), hl.gpu_uuids()
    if not ub or not uh or ub == uh:
        return bl, hl, None
    common = ub & uh
    if not common:
        return (f"timed on different GPUs (base {_gpu_names(bl)}, head {_gpu_names(hl)}): "
                "samples of two GPUs are never compared")
    kb, kh = bl.on_gpus(common), hl.on_gpus(common)
    return kb, kh, (f"only the timing processes on the GPU both sides used are compared "
                    f"({kb.processes} of {bl.processes} and {kh.processes} of {hl.processes})")


def _gpu_names(lat: Latency) -> str:
    return ", ".join(sorted({f"{g.name or 'GPU'} {(g.uuid or '')[:12]}".strip()
                             for g in lat.gpus}))


def _view(groups_b: list[list[float]], groups_h: list[list[float]], metric: str,
          shown: tuple[float, float], threshold: MetricThreshold, judge: Judging,
          timed_on: tuple[Unit, ...] = ()) -> Delta:
    """A second view of the same timing processes (per-process groups of ``metric``), judged
    with that metric's noise band: the witness of ``_witnessed``."""
    prior, calibrated = judge.prior(metric)
    est = estimates.ratio(groups_b, groups_h, confidence=judge.thresholds.confidence,
                          prior=prior)
    return _delta(est, *shown, threshold, judge, calibrated=calibrated, timed_on=timed_on,
                  timed=True)


def _witnessed(judged: Delta, witness: Delta, names: tuple[str, str], why: str = "",
               opposite_only: bool = False) -> Delta:
    """A change called on an unchanged model stands only where a second view of the same
    processes agrees; else the host's speed moved between processes.

    On the CPU compiled time is judged and compiled/eager witnesses, and must call the same
    change (the CPU times both alike: on a loaded 2-core machine an A/A pair's compiled time
    moved +35.8% [+4.8%, +76.0%] while eager moved +40% with it and compiled/eager +1.7%).
    On a GPU a launch-bound model is judged on compiled/eager and, with ``opposite_only``,
    compiled time must not point the other way: where compiled runs as a CUDA graph, eager's
    launches carry host noise its replays do not (an H200 A/A pair of linear32 read -42.0% on
    compiled/eager, eager +120% and compiled +31% between the sides; docs/verdict-quality.md,
    repeat 41), while a real compiler-side change moves both the same way, however wide
    compiled time's own interval.

    Only a called change is questioned ("unchanged" stands whatever the witness says); a
    witness that points the opposite way makes it too noisy to judge."""
    called = judged.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)
    if not called or witness.verdict is None or witness.ratio is None or judged.ratio is None:
        return judged
    opposite = (witness.ratio - 1) * (judged.ratio - 1) < 0
    if opposite_only and not opposite:
        return judged
    if witness.verdict is judged.verdict:
        return judged
    noisy = opposite_only or witness.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT,
                                                 Verdict.NOISY)
    verdict = Verdict.NOISY if noisy else Verdict.WITHIN_NOISE
    note = ((f"{why}: " if why else "") + f"{names[0]} {_pct(judged.ratio)} and {names[1]} "
            f"{_pct(witness.ratio)} disagree, so the host's speed moved between processes")
    return judged.model_copy(update={
        "verdict": verdict, "gating": False,
        "band": max(judged.band or 0.0, witness.band or 0.0),
        "note": note if not judged.note else f"{judged.note}; {note}",
        "method": f"{judged.method}, witnessed by {names[1]}"})


def _cold_compile(b: ModelResult, h: ModelResult, t: Thresholds, judge: Judging,
                  concurrent: bool) -> Delta | None:
    """Cold compile time. When the cold compiles ran beside other compiles (several compile
    slots), wall time carries the others' contention and process-tree CPU time carries the
    start-up of Inductor's compile workers (which import torch), and each witness alone has
    called changes that were not there (docs/verdict-quality.md). So both are judged, on pairs
    run side by side, and a change is called only when they agree; shown in wall time."""
    bc, hc = b.compile, h.compile
    wall_b, wall_h = _samples(bc.cold_s, bc.cold_samples_s), _samples(hc.cold_s,
                                                                      hc.cold_samples_s)
    wall = _compile_time(wall_b, wall_h, t.cold_compile, "cold_compile", judge, concurrent)
    if not (wall is not None and concurrent
            and len(bc.cold_cpu_samples_s) == len(wall_b) >= 2
            and len(hc.cold_cpu_samples_s) == len(wall_h) >= 2):
        return wall
    cpu = _compile_time(bc.cold_cpu_samples_s, hc.cold_cpu_samples_s, t.cold_compile,
                        "cold_compile", judge, concurrent)
    if cpu is None or cpu.ratio is None:
        return wall
    verdict = _agreed(wall.verdict, cpu.verdict)
    note = None if verdict is wall.verdict else (
        f"wall time {_pct(wall.ratio)} and CPU time {_pct(cpu.ratio)} disagree: "
        f"{(wall.verdict or Verdict.UNCHANGED).value.replace('_', ' ')} by wall, "
        f"{(cpu.verdict or Verdict.UNCHANGED).value.replace('_', ' ')} by CPU")
    return wall.model_copy(update={
        "verdict": verdict, "gating": verdict is Verdict.REGRESSION and t.cold_compile.gate,
        "band": max(wall.band or 0.0, cpu.band or 0.0), "note": note,
        "method": f"wall and CPU time agree, {wall.method}"})


def _agreed(wall: Verdict | None, cpu: Verdict | None) -> Verdict | None:
    """Two witnesses of one change: a change only where both see it; otherwise the less
    certain of the two."""
    if wall is cpu:
        return wall
    changes = (Verdict.REGRESSION, Verdict.IMPROVEMENT)
    if wall in changes or cpu in changes:
        return Verdict.WITHIN_NOISE
    for v in (Verdict.NOISY, Verdict.WITHIN_NOISE, Verdict.UNCHANGED):
        if v in (wall, cpu):
            return v
    return wall


def _pct(ratio: float | None) -> str:
    return "?" if ratio is None else f"{ratio - 1:+.1%}"


APART_NOTE = ("shown, not judged: two CPU runs measured apart (a CPU's speed moves between runs "
              "by more than any band; a `pr` measures both sides in one loop, and "
              "`compilewatch calibrate` learns this runner's noise)")


def _compile_time(base: list[float], head: list[float], t: MetricThreshold, metric: str,
                  judge: Judging, concurrent: bool) -> Delta | None:
    """A compile time from one sample per process. Paired when both sides ran the same number
    of processes (pair i of base and head ran side by side, or one after the other): host drift
    then cancels. One sample a side is shown, never judged: one compile says nothing of the
    noise of the next."""
    if not base or not head:
        return None
    b_med, h_med = statistics.median(base), statistics.median(head)
    if min(len(base), len(head)) < 2:
        est = estimates.ratio([base], [head], confidence=judge.thresholds.confidence)
        return _delta(est, b_med, h_med, None, judge,
                      note="one sample a side: shown, not judged (--cold-processes 3 judges it)",
                      method="one sample a side")
    prior, calibrated = judge.prior(metric)
    paired = len(base) == len(head)
    est = estimates.ratio([[x] for x in base], [[x] for x in head],
                          confidence=judge.thresholds.confidence, prior=prior, paired=paired)
    method = ("pairs run side by side" if concurrent else "pairs run in turn") if paired \
        else "processes"
    if judge.strict and not judge.one_loop and not calibrated:
        return _delta(est, b_med, h_med, None, judge, method="processes", note=APART_NOTE)
    return _delta(est, b_med, h_med, t, judge, method=method, calibrated=calibrated,
                  timed_on=("host",), timed=True)


def _point(base: float | None, head: float | None, t: MetricThreshold | None,
           judge: Judging) -> Delta | None:
    """A deterministic metric with one value per side (peak memory): the ratio, judged against
    the threshold alone (no noise to speak of)."""
    if base is None or head is None or base <= 0 or head <= 0:
        return None
    est = Estimate(head / base, head / base, head / base, 0.0, 0, (1, 1))
    return _delta(est, base, head, t, judge, method="one value a side")


def _where(b: GraphBreak) -> str:
    """A break's reason as shown: with torch's id and the user's file:line when known."""
    tags = [t for t in (b.gb_id, f"at {b.location}" if b.location else None) if t]
    return f"{b.reason} [{', '.join(tags)}]" if tags else b.reason


def _key(reason: str) -> str:
    """What makes two reasons the same: the text without addresses. A break's place is not
    part of it (a PR that moves a break down a few lines has not added one)."""
    return _SPACE.sub(" ", _ADDRESS.sub("0x…", reason)).strip()


# a reason as (what makes it the same on both sides, how it is shown)
Reason = tuple[str, str]


def _breaks(result: ModelResult) -> list[Reason]:
    return [(_key(b.reason), _where(b)) for b in result.graph_breaks]


def _recompiles(result: ModelResult) -> list[Reason]:
    return [(_key(r.reason), r.reason) for r in result.recompiles]


def _new(base: list[Reason], head: list[Reason]) -> tuple[list[str], list[str]]:
    bk, hk = {k for k, _ in base}, {k for k, _ in head}
    new = list(dict.fromkeys(shown for k, shown in head if k not in bk))
    gone = list(dict.fromkeys(shown for k, shown in base if k not in hk))
    return new, gone


def _counts(base: int, head: int, expected: int | None, t: MetricThreshold,
            reasons: tuple[list[Reason], list[Reason]]) -> CountDelta:
    ref = base if expected is None else expected
    verdict = Verdict.UNCHANGED
    if head > ref + t.regression:
        verdict = Verdict.REGRESSION
    elif head < ref:
        verdict = Verdict.IMPROVEMENT
    new, gone = _new(*reasons)
    return CountDelta(base=base, head=head, expected=expected, verdict=verdict,
                      gating=verdict is Verdict.REGRESSION and t.gate,
                      new_reasons=new, gone_reasons=gone)


def _accuracy(b: ModelResult, h: ModelResult, expected: str | None,
              t: MetricThreshold) -> AccuracyChange:
    base, head = outcome(b), outcome(h)
    ref = base if expected is None else expected
    verdict = Verdict.UNCHANGED
    if head != ref and h.category is Category.EAGER_NONDETERMINISTIC:
        # eager itself gave two answers: nothing to blame the compiler (or the change) for
        return AccuracyChange(base=base, head=head, expected=expected,
                              verdict=Verdict.WITHIN_NOISE, gating=False)
    if head != ref and ref == "pass" and head in FAILED:
        verdict = Verdict.REGRESSION
    elif head != ref and head == "pass":
        verdict = Verdict.IMPROVEMENT
    return AccuracyChange(base=base, head=head, expected=expected, verdict=verdict,
                          gating=verdict is Verdict.REGRESSION and t.gate)


def _overall(verdicts: list[Verdict | None]) -> Verdict:
    present = {v for v in verdicts if v is not None}
    return next((v for v in _ORDER if v in present), Verdict.UNCHANGED)


def _samples(first: float | None, samples: list[float]) -> list[float]:
    """A compile time's samples; a version-1 result has only its one value."""
    return list(samples) or ([first] if first is not None else [])


def compare_model(b: ModelResult, h: ModelResult, t: Thresholds,
                  expected: Expected | None = None, noise: NoiseBands | None = None,
                  host: HostNoise | None = None, same_environment: bool = True,
                  one_loop: bool = True) -> ModelRow:
    """One model present on both sides (``same_environment``: both ran on one torch build;
    ``one_loop``: both were measured in one loop, not as two runs apart)."""
    if b.compile_skipped or h.compile_skipped:
        return _not_measured(b, h)
    exp = expected or Expected()
    judge = Judging(t, b.ident, noise or NoiseBands(), host or HostNoise(), same_environment,
                    one_loop)
    both = _ran(b) and _ran(h)
    compiled, eager, speedup = _timings(b, h, judge) if both else (None, None, None)
    gb = rc = None
    if both:
        gb = _counts(b.break_count, h.break_count, exp.graph_breaks, t.graph_breaks,
                     (_breaks(b), _breaks(h)))
        rc = _counts(len(b.recompiles), len(h.recompiles), exp.recompiles, t.recompiles,
                     (_recompiles(b), _recompiles(h)))
    # A compile on a reused cache dir is not a cold compile: no verdict against a real one.
    really_cold = b.compile.cache_dir_was_empty and h.compile.cache_dir_was_empty
    concurrent = b.compile.cold_concurrent and h.compile.cold_concurrent
    cold = _cold_compile(b, h, t, judge, concurrent) if both and really_cold else None
    warm = _compile_time(_samples(b.compile.warm_s, b.compile.warm_samples_s),
                         _samples(h.compile.warm_s, h.compile.warm_samples_s),
                         t.warm_compile, "warm_compile", judge, False) if both else None
    warm_start = _compile_time(_samples(b.compile.warm_start_s, []),
                               _samples(h.compile.warm_start_s, []), t.warm_compile,
                               "warm_compile", judge, False) if both else None
    memory = (_point(b.memory.compiled_peak_bytes, h.memory.compiled_peak_bytes, t.memory,
                     judge) if both else None)
    # a training step's peak when its backward ended: what the partitioner saved shows there,
    # where the optimizer's own peak may set the whole step's
    fwd_bwd = (_point(b.memory.compiled_fwd_bwd_peak_bytes,
                      h.memory.compiled_fwd_bwd_peak_bytes, t.memory, judge) if both else None)
    first = _point(b.compile.first_output_s, h.compile.first_output_s, None, judge) \
        if both else None
    acc = _accuracy(b, h, exp.accuracy, t.accuracy)
    keys = diff_cache(b.cache, h.cache) if both else []
    judged = {"compiled time": compiled, "cold compile": cold, "warm compile": warm,
              "peak memory": memory, "peak memory (forward+backward)": fwd_bwd,
              "graph breaks": gb, "recompiles": rc, "accuracy": acc}
    present = [d for d in judged.values() if d is not None]
    verdict = _overall([d.verdict for d in present] + [_bypass_verdict(keys)])
    if verdict is Verdict.UNCHANGED and not _ran(b) and not _ran(h) and acc.expected is None:
        # no number on either side: "unchanged" would claim a comparison that never happened
        verdict = Verdict.FAILING
    notes = [n for n in [compiled.note if compiled and compiled.verdict is not
                         Verdict.UNCHANGED else None, _warm_start_note(b, h)] if n]
    if both and memory is None and h.memory.unknown_reason:
        notes.append(f"peak memory: {h.memory.unknown_reason}")
    notes += _tlparse_missing(b, h) + _training_setup(b, h)
    launch_bound = (b.latency.launch_bound or h.latency.launch_bound) \
        if b.latency and h.latency else None
    return ModelRow(
        suite=b.suite, model=b.model, config=b.config.slug, base_status=b.status.value,
        head_status=h.status.value, head_category=h.category.value, head_error=h.error,
        ran_both=both, verdict=verdict,
        gating=any(d.gating for d in present), compiled_time=compiled, eager_time=eager,
        speedup=speedup, cold_compile=cold, warm_compile=warm, warm_start=warm_start,
        first_output=first,
        memory=memory, fwd_bwd_memory=fwd_bwd, graph_breaks=gb, recompiles=rc, accuracy=acc,
        cache_changes=keys, notes=notes,
        gating_findings=[name for name, d in judged.items() if d is not None and d.gating],
        timing_skipped=(h.timing_skipped or b.timing_skipped) if both else None,
        launch_bound=launch_bound, diagnostics=_diagnostics(b, h),
        kernels=kernel_diff(b.kernels, h.kernels, band=compiled.band if compiled else None,
                            launch_bound=launch_bound,
                            breaks=(sum(g.count for g in b.graph_breaks),
                                    sum(g.count for g in h.graph_breaks))),
    )


def _bypass_verdict(keys: list[GraphKeyChange]) -> Verdict | None:
    """A graph that head no longer keys is a regression users pay on every warm start (no
    noise to judge: the cache either keys it or not); one keyed again, an improvement."""
    statuses = {k.status for k in keys}
    if "bypassed" in statuses:
        return Verdict.REGRESSION
    return Verdict.IMPROVEMENT if "cached again" in statuses else None


def _training_setup(b: ModelResult, h: ModelResult) -> list[str]:
    """A training step set up differently on the two sides (a result from before train mode,
    another optimizer): its numbers compare two different steps, which the note says. How
    many dropouts were zeroed is the model's own (a PR that adds one changed the model, not
    the step's setup)."""
    if b.training is None or h.training is None:
        return []
    own = {"dropouts_zeroed"}
    bd, hd = b.training.model_dump(exclude=own), h.training.model_dump(exclude=own)
    if bd == hd:
        return []
    diff = ", ".join(f"{k} {bd[k]} → {hd[k]}" for k in bd if bd[k] != hd[k])
    return [f"the training step differs between the sides ({diff}): its numbers compare two "
            "different steps"]


def _not_measured(b: ModelResult, h: ModelResult) -> ModelRow:
    """A model the change cannot reach (it reads none of the changed files): unchanged, and no
    number on either side, so none is shown (a count of 0 breaks would be a claim)."""
    return ModelRow(
        suite=b.suite, model=b.model, config=b.config.slug, base_status=b.status.value,
        head_status=h.status.value, head_category=h.category.value, head_error=h.error,
        ran_both=False, verdict=Verdict.UNCHANGED, gating=False, compile_skipped=True,
        timing_skipped=h.timing_skipped or b.timing_skipped)


def _diagnostics(b: ModelResult, h: ModelResult) -> dict[str, str]:
    """Where each side's kept files are (paths inside the output directory)."""
    out: dict[str, str] = {}
    for side, r in (("base", b), ("head", h)):
        d = r.diagnostics
        if d is None:
            continue
        if d.tlparse:
            out[f"tlparse report ({side})"] = f"{d.tlparse}/index.html"
        if d.trace:
            out[f"trace ({side})"] = d.trace
        if d.kernel_trace:
            out[f"kernel profile ({side})"] = d.kernel_trace
    d = h.diagnostics
    if d is not None and d.code_diff:
        out["generated code diff"] = d.code_diff
    if d is not None and d.recompiles:
        out["graph breaks and recompiles"] = d.recompiles
    return out


def _tlparse_missing(b: ModelResult, h: ModelResult) -> list[str]:
    """Why a flagged model has no tlparse report: once when both sides say the same."""
    why = {side: r.diagnostics.tlparse_missing for side, r in (("base", b), ("head", h))
           if r.diagnostics is not None and r.diagnostics.tlparse_missing}
    if len(set(why.values())) == 1 and len(why) == 2:
        return [f"no tlparse report: {why['head']}"]
    return [f"no tlparse report ({side}): {text}" for side, text in why.items()]


def _warm_start_note(b: ModelResult, h: ModelResult) -> str | None:
    """Head's warm start from the published artifact missed the cache where base's hit: after
    this change, whoever starts from that artifact compiles those graphs cold."""
    bc, hc = b.cache.counters.get("warm_start"), h.cache.counters.get("warm_start")
    if bc is None or hc is None or hc.fx_miss == 0 or bc.fx_miss > 0:
        return None
    what = "this graph" if hc.fx_miss == 1 else "these graphs"
    return (f"warm start from the published cache artifact: {hc.fx_miss} FX graph cache "
            f"miss{'es' * (hc.fx_miss != 1)} on head, none on base; after this change, a warm "
            f"start from that artifact compiles {what} cold")


def _ref(r: ModelResult) -> ModelRef:
    return ModelRef(suite=r.suite, model=r.model, config=r.config.slug, status=r.status.value,
                    category=r.category.value, error=r.error)


def _side(run: RunResults) -> Side:
    env = run.environment
    return Side(run_id=run.run_id, commit=run.git.commit, ref=run.git.ref,
                created_at=run.created_at, finished_at=run.finished_at, torch=env.torch,
                device=env.gpu or env.cpu)


def same_run_note(run_id: str) -> str:
    """What a comparison of a run with itself says, first: nothing in it is a finding."""
    return (f"base and head are the same run ({run_id[:12]}): every difference is zero by "
            "construction and says nothing about a change; compare two different runs "
            "(compilewatch runs lists them)")


def one_loop(base: RunResults, head: RunResults) -> bool:
    """Both sides of one ``pr`` (measured interleaved, in one loop), not two runs apart."""
    return (base.settings.trigger == head.settings.trigger == "pr"
            and base.settings.side == "base" and head.settings.side == "head"
            and base.created_at == head.created_at)


def compare(base: RunResults, head: RunResults, *,
            thresholds: Thresholds | ThresholdPolicy | None = None,
            baseline: Baseline | None = None, noise: NoiseBands | None = None) -> Comparison:
    """Compare two runs model by model; see docs/compare.md for the method. ``noise``: the
    bands ``compilewatch calibrate`` learned on this runner (default priors otherwise)."""
    policy = _policy(thresholds)
    bb, hh = base.by_ident(), head.by_ident()
    common = sorted(bb.keys() & hh.keys())
    host = host_noise(base, head)
    same_env = base.environment.fingerprint == head.environment.fingerprint
    loop = one_loop(base, head)
    rows = [compare_model(bb[i], hh[i], policy.for_model(i[1]),
                          baseline.lookup(i) if baseline else None, noise, host, same_env, loop)
            for i in common if Status.SKIP not in (bb[i].status, hh[i].status)]
    failing = [hh[i] for i in common if outcome(bb[i]) == "pass" and outcome(hh[i]) in FAILED]
    # A model that passed on base and is skipped on head must not leave the gate quietly: the
    # head's suite decides what is skipped, and the head is the untrusted side.
    skipped = [hh[i] for i in common
               if bb[i].status is Status.PASS and hh[i].status is Status.SKIP]
    failing += skipped
    fixed = [hh[i] for i in common if outcome(bb[i]) in FAILED and outcome(hh[i]) == "pass"]
    verdicts = Counter(r.verdict for r in rows)
    notes = ([host.note] if host.note else []) + lanes_notes(base, head)
    if base.run_id == head.run_id:
        notes.insert(0, same_run_note(base.run_id))
    if not same_env:
        notes.append(f"base and head ran in different environments (torch "
                     f"{base.environment.torch} vs {head.environment.torch}); "
                     "differences may come from the environment, not the change")
    notes += code_notes(base, head)
    missing, gap = insufficient(base, head)
    notes += shard_notes(base, head)
    for name, run in (("base", base), ("head", head)):
        if run.finished_at is None and run.shards is None:  # a killed run's checkpoint
            notes.append(f"the {name} run did not finish: it holds the {len(run.results)} "
                         f"model(s) measured before it stopped; models missing from it are "
                         f"listed as added or removed")
    headline = Headline(regressions=verdicts[Verdict.REGRESSION],
                        improvements=verdicts[Verdict.IMPROVEMENT],
                        unchanged=verdicts[Verdict.UNCHANGED],
                        within_noise=verdicts[Verdict.WITHIN_NOISE],
                        noisy=verdicts[Verdict.NOISY],
                        failing=verdicts[Verdict.FAILING],
                        gating=sum(r.gating for r in rows) + len(skipped),
                        insufficient=len(missing))
    return Comparison(
        base=_side(base), head=_side(head), rows=rows,
        added=[_ref(hh[i]) for i in sorted(hh.keys() - bb.keys() - gap)],
        removed=[_ref(bb[i]) for i in sorted(bb.keys() - hh.keys() - gap)],
        newly_failing=[_ref(r) for r in failing], newly_fixed=[_ref(r) for r in fixed],
        aggregates=aggregates(rows),
        headline=headline,
        cache=cache_summary(rows),
        gating_regression=headline.gating > 0, notes=notes,
        insufficient=missing, shards=shard_lines(base, head),
    )


def raise_on_gating(comparison: Comparison) -> None:
    """Exit 1 for CI; called after every output is written so the report survives."""
    if comparison.gating_regression:
        # a model that passed on base and is skipped on head gates too (compare's rule)
        names = ", ".join([*(r.model for r in comparison.rows if r.gating),
                           *(m.model for m in comparison.newly_failing if m.status == "skip")])
        raise RegressionFound(f"{comparison.headline.gating} model(s) with a gating "
                              f"regression: {names}")
