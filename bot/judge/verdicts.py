"""Base against head: per-model verdicts, aggregates and headline. Computes only: no I/O, no
printing (asv's compare both computed and printed; renderers read the ``Comparison`` instead).

The method (medians, bootstrap intervals, the eager witness, thresholds) is in docs/compare.md.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter

from compilewatch.bot.judge.baseline import Baseline, Expected, outcome
from compilewatch.bot.judge.cachediff import collapse, diff_cache
from compilewatch.bot.judge.comparison import (
    AccuracyChange,
    Aggregates,
    CacheSummary,
    Comparison,
    CountDelta,
    Delta,
    Headline,
    ModelRef,
    ModelRow,
    Side,
    Verdict,
)
from compilewatch.bot.judge.stats import RatioEstimate, judge, ratio_of_medians, seed_for
from compilewatch.bot.judge.thresholds import MetricThreshold, ThresholdPolicy, Thresholds
from compilewatch.core.errors import RegressionFound
from compilewatch.core.estimates import geomean
from compilewatch.core.schema import Category, ModelResult, RunResults, Status

FAILED = {"fail_accuracy", "fail_to_run", "eager_fail"}
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_SPACE = re.compile(r"\s+")
_ORDER = (Verdict.REGRESSION, Verdict.IMPROVEMENT, Verdict.WITHIN_NOISE, Verdict.UNCHANGED)


def _policy(thresholds: Thresholds | ThresholdPolicy | None) -> ThresholdPolicy:
    if isinstance(thresholds, ThresholdPolicy):
        return thresholds
    return ThresholdPolicy(default=thresholds or Thresholds())


def _ran(r: ModelResult) -> bool:
    """Compiled and executed (an accuracy failure still ran and was timed)."""
    return r.status in (Status.PASS, Status.FAIL)


def _delta(est: RatioEstimate | None, base: float, head: float, t: MetricThreshold | None,
           note: str | None = None) -> Delta:
    if est is None:
        return Delta(base=base, head=head, note=note)
    verdict = judge(est, t, base=base, head=head) if t is not None else None
    return Delta(base=base, head=head, ratio=est.ratio, ci_low=est.low, ci_high=est.high,
                 verdict=verdict, gating=verdict is Verdict.REGRESSION and t is not None and t.gate,
                 threshold=t.regression if t is not None else None, note=note)


def _point(base: float | None, head: float | None, t: MetricThreshold | None) -> Delta | None:
    """A metric with one sample per side (compile time, peak memory); ``t`` None: shown only."""
    if base is None or head is None:
        return None
    est = ratio_of_medians([base], [head])
    return _delta(est, base, head, t)


def _timings(b: ModelResult, h: ModelResult, t: Thresholds) -> tuple[Delta, ...] | None:
    """Compiled time (judged), eager time (the host witness) and speedup (context)."""
    bl, hl = b.latency, h.latency
    if bl is None or hl is None or not bl.compiled_us or not hl.compiled_us:
        return None
    seed = seed_for(*b.ident)
    kw = {"confidence": t.confidence, "base_processes": bl.processes,
          "head_processes": hl.processes, "seed": seed}
    compiled = ratio_of_medians(bl.compiled_us, hl.compiled_us, **kw)
    eager = ratio_of_medians(bl.eager_us, hl.eager_us, **kw)
    note = None
    if compiled is not None and eager is not None and eager.excludes_one():
        # Eager is not what a compiler PR changes: if it moved, the host (or the model) did, and
        # the compiled interval must allow for the same drift before blaming the compiler.
        compiled = compiled.widened(max(eager.ratio, 1 / eager.ratio))
        note = (f"eager time moved {eager.ratio - 1:+.1%} (host drift or a model change); "
                "compiled-time interval widened by as much")
    bs = [e / c for e, c in zip(bl.eager_us, bl.compiled_us, strict=False) if c > 0]
    hs = [e / c for e, c in zip(hl.eager_us, hl.compiled_us, strict=False) if c > 0]
    speed = ratio_of_medians(bs, hs, seed=seed, confidence=t.confidence) if bs and hs else None
    return (
        _delta(compiled, bl.compiled_median_us, hl.compiled_median_us, t.compiled_time, note),
        _delta(eager, bl.eager_median_us, hl.eager_median_us, None),
        _delta(speed, b.speedup.value if b.speedup else statistics.median(bs or [0.0]),
               h.speedup.value if h.speedup else statistics.median(hs or [0.0]), None),
    )


def _key(reason: str) -> str:
    return _SPACE.sub(" ", _ADDRESS.sub("0x…", reason)).strip()


def _new(base: list[str], head: list[str]) -> tuple[list[str], list[str]]:
    bk, hk = {_key(r) for r in base}, {_key(r) for r in head}
    new = list(dict.fromkeys(r for r in head if _key(r) not in bk))
    gone = list(dict.fromkeys(r for r in base if _key(r) not in hk))
    return new, gone


def _counts(base: int, head: int, expected: int | None, t: MetricThreshold,
            reasons: tuple[list[str], list[str]]) -> CountDelta:
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


def compare_model(b: ModelResult, h: ModelResult, t: Thresholds,
                  expected: Expected | None = None) -> ModelRow:
    """One model present on both sides."""
    exp = expected or Expected()
    both = _ran(b) and _ran(h)
    timings = _timings(b, h, t) if both else None
    compiled, eager, speedup = timings or (None, None, None)
    gb = rc = None
    if both:
        gb = _counts(b.break_count, h.break_count, exp.graph_breaks,
                     t.graph_breaks, ([x.reason for x in b.graph_breaks],
                                      [x.reason for x in h.graph_breaks]))
        rc = _counts(len(b.recompiles), len(h.recompiles), exp.recompiles, t.recompiles,
                     ([x.reason for x in b.recompiles], [x.reason for x in h.recompiles]))
    # A compile on a reused cache dir is not a cold compile: no verdict against a real one.
    really_cold = b.compile.cache_dir_was_empty and h.compile.cache_dir_was_empty
    cold = _point(b.compile.cold_s, h.compile.cold_s, t.cold_compile) \
        if both and really_cold else None
    warm = _point(b.compile.warm_s, h.compile.warm_s, t.warm_compile) if both else None
    warm_start = _point(b.compile.warm_start_s, h.compile.warm_start_s, None) if both else None
    memory = (_point(b.memory.compiled_peak_bytes, h.memory.compiled_peak_bytes, t.memory)
              if both else None)
    acc = _accuracy(b, h, exp.accuracy, t.accuracy)
    judged = [compiled, cold, warm, memory, gb, rc, acc]
    present = [d for d in judged if d is not None]
    return ModelRow(
        suite=b.suite, model=b.model, config=b.config.slug, base_status=b.status.value,
        head_status=h.status.value, head_category=h.category.value, head_error=h.error,
        ran_both=timings is not None, verdict=_overall([d.verdict for d in present]),
        gating=any(d.gating for d in present), compiled_time=compiled, eager_time=eager,
        speedup=speedup, cold_compile=cold, warm_compile=warm, warm_start=warm_start,
        memory=memory, graph_breaks=gb, recompiles=rc, accuracy=acc,
        cache_changes=diff_cache(b.cache, h.cache) if both else [],
        notes=[n for n in [compiled.note if compiled else None, _warm_start_note(b, h)] if n],
    )


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
                created_at=run.created_at, torch=env.torch, device=env.gpu or env.cpu)


def _sum(values: list[float]) -> float | None:
    return sum(values) if values else None


def _aggregates(rows: list[ModelRow]) -> Aggregates:
    timed = [r for r in rows if r.ran_both]
    sp = [r.speedup for r in timed if r.speedup and r.speedup.base > 0 and r.speedup.head > 0]
    cold = [r.cold_compile for r in rows if r.cold_compile]
    warm = [r.warm_compile for r in rows if r.warm_compile]
    start = [r.warm_start for r in rows if r.warm_start]
    n = len(rows)
    # every row carries both sides' outcome in its accuracy change
    passed_b = sum(r.accuracy is not None and r.accuracy.base == "pass" for r in rows)
    passed_h = sum(r.accuracy is not None and r.accuracy.head == "pass" for r in rows)
    return Aggregates(
        models=n,
        geomean_speedup_base=geomean([d.base for d in sp]),
        geomean_speedup_head=geomean([d.head for d in sp]),
        geomean_compiled_ratio=geomean([r.compiled_time.ratio for r in timed
                                        if r.compiled_time and r.compiled_time.ratio]),
        pass_rate_base=passed_b / n if n else None, pass_rate_head=passed_h / n if n else None,
        total_cold_s_base=_sum([d.base for d in cold]),
        total_cold_s_head=_sum([d.head for d in cold]),
        total_warm_s_base=_sum([d.base for d in warm]),
        total_warm_s_head=_sum([d.head for d in warm]),
        total_warm_start_s_base=_sum([d.base for d in start]),
        total_warm_start_s_head=_sum([d.head for d in start]),
    )


def _cache_summary(rows: list[ModelRow]) -> CacheSummary:
    counts: Counter[str] = Counter()
    for r in rows:
        names: set[str] = set()
        for c in r.cache_changes:
            if c.status != "changed":
                names.add(f"graph {c.status}")
            names.update(collapse([*c.changed, *c.added, *c.removed], counted=False))
        counts.update(names)
    return CacheSummary(models_with_changes=sum(bool(r.cache_changes) for r in rows),
                        models_compared=sum(r.ran_both for r in rows),
                        components=dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))))


def compare(base: RunResults, head: RunResults, *,
            thresholds: Thresholds | ThresholdPolicy | None = None,
            baseline: Baseline | None = None) -> Comparison:
    """Compare two runs model by model; see docs/compare.md for the method."""
    policy = _policy(thresholds)
    bb, hh = base.by_ident(), head.by_ident()
    common = sorted(bb.keys() & hh.keys())
    rows = [compare_model(bb[i], hh[i], policy.for_model(i[1]),
                          baseline.lookup(i) if baseline else None)
            for i in common if Status.SKIP not in (bb[i].status, hh[i].status)]
    failing = [hh[i] for i in common if outcome(bb[i]) == "pass" and outcome(hh[i]) in FAILED]
    # A model that passed on base and is skipped on head must not leave the gate quietly: the
    # head's suite decides what is skipped, and the head is the untrusted side.
    skipped = [hh[i] for i in common
               if bb[i].status is Status.PASS and hh[i].status is Status.SKIP]
    failing += skipped
    fixed = [hh[i] for i in common if outcome(bb[i]) in FAILED and outcome(hh[i]) == "pass"]
    verdicts = Counter(r.verdict for r in rows)
    notes = []
    if base.environment.fingerprint != head.environment.fingerprint:
        notes.append(f"base and head ran in different environments (torch "
                     f"{base.environment.torch} vs {head.environment.torch}); "
                     "differences may come from the environment, not the change")
    for name, run in (("base", base), ("head", head)):
        if run.finished_at is None:  # a checkpoint of a run that was killed (or still going)
            notes.append(f"the {name} run did not finish: it holds the {len(run.results)} "
                         f"model(s) measured before it stopped; models missing from it are "
                         f"listed as added or removed")
    headline = Headline(regressions=verdicts[Verdict.REGRESSION],
                        improvements=verdicts[Verdict.IMPROVEMENT],
                        unchanged=verdicts[Verdict.UNCHANGED],
                        within_noise=verdicts[Verdict.WITHIN_NOISE],
                        gating=sum(r.gating for r in rows) + len(skipped))
    return Comparison(
        base=_side(base), head=_side(head), rows=rows,
        added=[_ref(hh[i]) for i in sorted(hh.keys() - bb.keys())],
        removed=[_ref(bb[i]) for i in sorted(bb.keys() - hh.keys())],
        newly_failing=[_ref(r) for r in failing], newly_fixed=[_ref(r) for r in fixed],
        aggregates=_aggregates(rows),
        headline=headline,
        cache=_cache_summary(rows),
        gating_regression=headline.gating > 0, notes=notes,
    )


def raise_on_gating(comparison: Comparison) -> None:
    """Exit 1 for CI; called after every output is written so the report survives."""
    if comparison.gating_regression:
        # a model that passed on base and is skipped on head gates too (compare's rule)
        names = ", ".join([*(r.model for r in comparison.rows if r.gating),
                           *(m.model for m in comparison.newly_failing if m.status == "skip")])
        raise RegressionFound(f"{comparison.headline.gating} model(s) with a gating "
                              f"regression: {names}")
