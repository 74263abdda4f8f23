"""Base against head: per-model verdicts, aggregates and headline. Computes only: no I/O, no
printing (asv's compare both computed and printed; renderers read the ``Comparison`` instead).

The method (medians, bootstrap intervals, the eager witness, thresholds) is in docs/compare.md.
"""

from __future__ import annotations

import re
from collections import Counter

from compilewatch.bot.judge.aggregates import aggregates, cache_summary
from compilewatch.bot.judge.baseline import Baseline, Expected, outcome
from compilewatch.bot.judge.cachediff import diff_cache
from compilewatch.bot.judge.code import code_notes
from compilewatch.bot.judge.comparison import (
    AccuracyChange,
    Comparison,
    CountDelta,
    GraphKeyChange,
    Headline,
    ModelRef,
    ModelRow,
    Side,
    Verdict,
)
from compilewatch.bot.judge.host import (
    HostNoise,
    host_noise,
    lanes_notes,
)
from compilewatch.bot.judge.kernels import diff as kernel_diff
from compilewatch.bot.judge.shards import insufficient, shard_lines, shard_notes
from compilewatch.bot.judge.stats import NoiseBands
from compilewatch.bot.judge.thresholds import MetricThreshold, ThresholdPolicy, Thresholds
from compilewatch.bot.judge.timings import (
    Judging,
    cold_compile,
    compile_time,
    point,
    samples,
    timings,
)
from compilewatch.core.errors import RegressionFound
from compilewatch.core.schema import (
    Category,
    GraphBreak,
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
    compiled, eager, speedup = timings(b, h, judge) if both else (None, None, None)
    gb = rc = None
    if both:
        gb = _counts(b.break_count, h.break_count, exp.graph_breaks, t.graph_breaks,
                     (_breaks(b), _breaks(h)))
        rc = _counts(len(b.recompiles), len(h.recompiles), exp.recompiles, t.recompiles,
                     (_recompiles(b), _recompiles(h)))
    # A compile on a reused cache dir is not a cold compile: no verdict against a real one.
    really_cold = b.compile.cache_dir_was_empty and h.compile.cache_dir_was_empty
    concurrent = b.compile.cold_concurrent and h.compile.cold_concurrent
    cold = cold_compile(b, h, t, judge, concurrent) if both and really_cold else None
    warm = compile_time(samples(b.compile.warm_s, b.compile.warm_samples_s),
                         samples(h.compile.warm_s, h.compile.warm_samples_s),
                         t.warm_compile, "warm_compile", judge, False) if both else None
    warm_start = compile_time(samples(b.compile.warm_start_s, []),
                               samples(h.compile.warm_start_s, []), t.warm_compile,
                               "warm_compile", judge, False) if both else None
    memory = (point(b.memory.compiled_peak_bytes, h.memory.compiled_peak_bytes, t.memory,
                     judge) if both else None)
    # a training step's peak when its backward ended: what the partitioner saved shows there,
    # where the optimizer's own peak may set the whole step's
    fwd_bwd = (point(b.memory.compiled_fwd_bwd_peak_bytes,
                      h.memory.compiled_fwd_bwd_peak_bytes, t.memory, judge) if both else None)
    first = point(b.compile.first_output_s, h.compile.first_output_s, None, judge) \
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
