"""Timed metrics, judged: steady-state time (compiled, eager, speedup), cold and warm compile
times, and one-value-a-side metrics (peak memory). ``Judging`` is what a model's verdicts need
beside its two results; ``delta`` turns an estimate into a ``Delta``. The method is in
docs/compare.md ("Method for timings", "On a CPU")."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from compilewatch.bot.judge.comparison import Delta, Verdict
from compilewatch.bot.judge.host import HostNoise, Unit, steady_state_units
from compilewatch.bot.judge.stats import NoiseBands, too_wide, too_wide_why, verdict_of
from compilewatch.bot.judge.thresholds import MetricThreshold, Thresholds
from compilewatch.core import estimates, unchanged
from compilewatch.core.estimates import Estimate, Prior
from compilewatch.core.schema import Latency, ModelResult


def delta(est: Estimate | None, base: float, head: float, t: MetricThreshold | None,
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


def timings(b: ModelResult, h: ModelResult, judge: Judging
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
    judged = delta(compiled, compiled_b, compiled_h, threshold, judge,
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
        delta(eager, eager_b, eager_h, None, judge),
        delta(speed, b.speedup.value if b.speedup else 0.0,
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
    return delta(est, *shown, threshold, judge, calibrated=calibrated, timed_on=timed_on,
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


def cold_compile(b: ModelResult, h: ModelResult, t: Thresholds, judge: Judging,
                  concurrent: bool) -> Delta | None:
    """Cold compile time. When the cold compiles ran beside other compiles (several compile
    slots), wall time carries the others' contention and process-tree CPU time carries the
    start-up of Inductor's compile workers (which import torch), and each witness alone has
    called changes that were not there (docs/verdict-quality.md). So both are judged, on pairs
    run side by side, and a change is called only when they agree; shown in wall time."""
    bc, hc = b.compile, h.compile
    wall_b, wall_h = samples(bc.cold_s, bc.cold_samples_s), samples(hc.cold_s,
                                                                      hc.cold_samples_s)
    wall = compile_time(wall_b, wall_h, t.cold_compile, "cold_compile", judge, concurrent)
    if not (wall is not None and concurrent
            and len(bc.cold_cpu_samples_s) == len(wall_b) >= 2
            and len(hc.cold_cpu_samples_s) == len(wall_h) >= 2):
        return wall
    cpu = compile_time(bc.cold_cpu_samples_s, hc.cold_cpu_samples_s, t.cold_compile,
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


def compile_time(base: list[float], head: list[float], t: MetricThreshold, metric: str,
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
        return delta(est, b_med, h_med, None, judge,
                      note="one sample a side: shown, not judged (--cold-processes 3 judges it)",
                      method="one sample a side")
    prior, calibrated = judge.prior(metric)
    paired = len(base) == len(head)
    est = estimates.ratio([[x] for x in base], [[x] for x in head],
                          confidence=judge.thresholds.confidence, prior=prior, paired=paired)
    method = ("pairs run side by side" if concurrent else "pairs run in turn") if paired \
        else "processes"
    if judge.strict and not judge.one_loop and not calibrated:
        return delta(est, b_med, h_med, None, judge, method="processes", note=APART_NOTE)
    return delta(est, b_med, h_med, t, judge, method=method, calibrated=calibrated,
                  timed_on=("host",), timed=True)


def point(base: float | None, head: float | None, t: MetricThreshold | None,
           judge: Judging) -> Delta | None:
    """A deterministic metric with one value per side (peak memory): the ratio, judged against
    the threshold alone (no noise to speak of)."""
    if base is None or head is None or base <= 0 or head <= 0:
        return None
    est = Estimate(head / base, head / base, head / base, 0.0, 0, (1, 1))
    return delta(est, base, head, t, judge, method="one value a side")


def samples(first: float | None, samples: list[float]) -> list[float]:
    """A compile time's samples; a version-1 result has only its one value."""
    return list(samples) or ([first] if first is not None else [])
