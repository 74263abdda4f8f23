"""What a comparison says of the whole suite: the aggregates over the models both sides ran and
the summary of cache-key changes, computed from the per-model rows ``verdicts`` made."""

from __future__ import annotations

from collections import Counter

from compilewatch.bot.judge.cachediff import BYPASS, collapse
from compilewatch.bot.judge.comparison import Aggregates, CacheSummary, ModelRow
from compilewatch.core.estimates import geomean


def _sum(values: list[float]) -> float | None:
    return sum(values) if values else None


def aggregates(rows: list[ModelRow]) -> Aggregates:
    """Suite-wide numbers over the models both sides ran (geomeans, totals, pass rates)."""
    timed = [r for r in rows if r.ran_both]
    sp = [r.speedup for r in timed if r.speedup and r.speedup.base > 0 and r.speedup.head > 0]
    cold = [r.cold_compile for r in rows if r.cold_compile]
    warm = [r.warm_compile for r in rows if r.warm_compile]
    start = [r.warm_start for r in rows if r.warm_start]
    n = len(rows)
    # every measured row carries both sides' outcome in its accuracy change; a model the
    # change cannot reach was not measured, so it is in no rate
    measured = [r for r in rows if not r.compile_skipped]
    passed_b = sum(r.accuracy is not None and r.accuracy.base == "pass" for r in measured)
    passed_h = sum(r.accuracy is not None and r.accuracy.head == "pass" for r in measured)
    m = len(measured)
    return Aggregates(
        models=n, untouched=n - m,
        geomean_speedup_base=geomean([d.base for d in sp]),
        geomean_speedup_head=geomean([d.head for d in sp]),
        geomean_compiled_ratio=geomean([r.compiled_time.ratio for r in timed
                                        if r.compiled_time and r.compiled_time.ratio]),
        pass_rate_base=passed_b / m if m else None, pass_rate_head=passed_h / m if m else None,
        total_cold_s_base=_sum([d.base for d in cold]),
        total_cold_s_head=_sum([d.head for d in cold]),
        total_warm_s_base=_sum([d.base for d in warm]),
        total_warm_s_head=_sum([d.head for d in warm]),
        total_warm_start_s_base=_sum([d.base for d in start]),
        total_warm_start_s_head=_sum([d.head for d in start]),
    )


def cache_summary(rows: list[ModelRow]) -> CacheSummary:
    """Which cache-key components changed, and in how many models."""
    counts: Counter[str] = Counter()
    keyed = {id(r): [c for c in r.cache_changes if c.status not in BYPASS] for r in rows}
    for r in rows:
        names: set[str] = set()
        for c in keyed[id(r)]:
            if c.status != "changed":
                names.add(f"graph {c.status}")
            names.update(collapse([*c.changed, *c.added, *c.removed], counted=False))
        counts.update(names)
    return CacheSummary(models_with_changes=sum(bool(keyed[id(r)]) for r in rows),
                        models_compared=sum(r.ran_both for r in rows),
                        models_bypassed=sum(any(c.status == "bypassed" for c in r.cache_changes)
                                            for r in rows),
                        components=dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))))
