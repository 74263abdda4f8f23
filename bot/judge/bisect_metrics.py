"""What a bisection follows: one row per metric, and how one measured step is called (good,
bad, skipped, or not settled yet) against the good end.

Deterministic metrics (graph breaks, recompiles, accuracy, a cache-key component, peak memory)
are read from one measurement: a commit is bad when its value is worse than the good end's.
Timed metrics (compiled time, cold and warm compile) are judged as ``compare`` judges them
(``verdicts.compare_model``: several processes, the model's noise band, the host preflight):
a step is measured beside the good end, and a verdict still open is not a call but a reason
to measure again with more processes. Pure: no I/O (docs/bisect.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from compilewatch.bot.judge.baseline import outcome
from compilewatch.bot.judge.comparison import Delta, Verdict
from compilewatch.bot.judge.config_errors import did_you_mean
from compilewatch.bot.judge.host import HostNoise
from compilewatch.bot.judge.stats import NoiseBands
from compilewatch.bot.judge.thresholds import Thresholds
from compilewatch.bot.judge.timings import shown_per_call
from compilewatch.bot.judge.verdicts import FAILED, compare_model
from compilewatch.core.errors import UsageError
from compilewatch.core.schema import Category, ModelResult, Status

Kind = Literal["timed", "count", "accuracy", "cache", "memory"]
CACHE = "cache:"
_COMPONENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*(\[[^\]\s]{1,200}\])*$")


class Call(StrEnum):
    """What one step says of a commit (or build), as ``git bisect`` words it."""

    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"  # it does not build or run: ``git bisect skip``
    UNSETTLED = "unsettled"  # a timed verdict still open: measure again, more processes


@dataclass(frozen=True)
class Metric:
    """One metric a bisection can follow. ``delta``: the ``ModelRow`` field whose verdict
    calls a timed (or memory) step."""

    name: str
    label: str
    kind: Kind
    delta: str | None = None
    component: str | None = None

    @property
    def timed(self) -> bool:
        return self.kind == "timed"


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("compiled-time", "compiled time", "timed", "compiled_time"),
    Metric("cold-compile", "cold compile", "timed", "cold_compile"),
    Metric("warm-compile", "warm compile", "timed", "warm_compile"),
    Metric("graph-breaks", "graph breaks", "count"),
    Metric("recompiles", "recompiles", "count"),
    Metric("accuracy", "accuracy", "accuracy"),
    Metric("peak-memory", "peak memory", "memory", "memory"),
)}
SPELLINGS = (*METRICS, "cache:COMPONENT")


def parse_metric(text: str) -> Metric:
    """``--metric`` as typed: a name of ``METRICS`` (``_`` for ``-`` too), or
    ``cache:COMPONENT`` (an FX or AOTAutograd cache-key component: ``cache:gm``,
    ``cache:example_inputs[0]``, ``cache:inductor_config[max_autotune]``)."""
    value = text.strip()
    if value.lower().startswith(CACHE):
        component = value[len(CACHE):]
        if not _COMPONENT.fullmatch(component):
            raise UsageError(f"--metric {text!r}: {component!r} is not a cache-key component "
                             "name (e.g. cache:gm, cache:example_inputs[0])")
        return Metric(f"{CACHE}{component}", f"cache key component {component}", "cache",
                      component=component)
    name = value.lower().replace("_", "-").replace(" ", "-")
    if name in METRICS:
        return METRICS[name]
    raise UsageError(f"--metric {text!r} is not a metric a bisection follows"
                     f"{did_you_mean(name, METRICS)}; one of {', '.join(SPELLINGS)}")


@dataclass(frozen=True)
class Reading:
    """One model at one step: the value shown, the call, and why."""

    value: str
    call: Call
    why: str = ""


# failures that say nothing of the metric: the step is skipped, as ``git bisect skip`` does
NOT_THE_METRIC = frozenset({
    Category.EAGER_ERROR, Category.BUILD_ERROR, Category.INFRA, Category.FOREIGN_CODE,
    Category.OOM, Category.TIMEOUT, Category.EAGER_NONDETERMINISTIC,
    Category.ACCURACY_UNCOMPARABLE, Category.PACKAGE_MISSING, Category.UNSUPPORTED})


def _unmeasured(r: ModelResult | None, metric: Metric) -> Reading | None:
    """A result no value can be read from: missing, or it did not build or run. For
    accuracy a compile error or a crash of the compiled model is the finding itself."""
    if r is None:
        return Reading("—", Call.SKIP, "the model is not at this commit")
    if r.category not in NOT_THE_METRIC and (
            metric.kind == "accuracy" or r.status in (Status.PASS, Status.FAIL)):
        return None
    why = (r.error or "").strip().splitlines()[0][:200] if r.error else ""
    return Reading(r.status.value, Call.SKIP,
                   f"{r.category.value.replace('_', ' ')}{': ' + why if why else ''}")


def count_of(r: ModelResult, metric: Metric) -> int:
    return r.break_count if metric.name == "graph-breaks" else len(r.recompiles)


def component_of(r: ModelResult, component: str) -> tuple[str, ...]:
    """The component's hash in each of the model's cold FX and AOTAutograd keys, in compile
    order (a graph that lacks it: '-'); () when no key of the model has it."""
    keys = [k for k in (*r.cache.fx, *r.cache.aot) if k.phase == "cold"]
    found = tuple(k.components.get(component, "-") for k in keys)
    return found if any(h != "-" for h in found) else ()


def check_component(metric: Metric, results: list[ModelResult]) -> None:
    """A ``cache:COMPONENT`` that no cold cache key of the ends has is a typo, not a
    finding: refused, naming the components they have."""
    if metric.kind != "cache" or metric.component is None:
        return
    names = {c for r in results for k in (*r.cache.fx, *r.cache.aot) if k.phase == "cold"
             for c in k.components}
    if metric.component in names or not any(r.cache.fx or r.cache.aot for r in results):
        return
    shown = sorted(n for n in names if "[" not in n or n.startswith("example_inputs"))
    raise UsageError(f"--metric {metric.name}: no cache key of the measured models has a "
                     f"component {metric.component!r}{did_you_mean(metric.component, names)}; "
                     f"they have {', '.join(shown[:20])} and {len(names) - len(shown[:20])} "
                     "more (inductor_config[...], fx_kwargs[...]: docs/bisect.md)")


def _shown_hashes(hashes: tuple[str, ...]) -> str:
    return ", ".join(h[:10] for h in hashes) if hashes else "not keyed"


def _component_value(r: ModelResult, component: str) -> str:
    """The readable value of a component where torch records one (a shape), else hashes."""
    for k in (*r.cache.fx, *r.cache.aot):
        if k.phase == "cold" and component in k.values:
            return k.values[component][:160]
    return _shown_hashes(component_of(r, component))


def deterministic_call(metric: Metric, good: ModelResult, r: ModelResult | None,
                       thresholds: Thresholds | None = None) -> Reading:
    """One measurement against the good end's: worse is bad (more breaks or recompiles, an
    accuracy failure, another hash of the component, a peak past the memory threshold)."""
    skip = _unmeasured(r, metric)
    if skip is not None or r is None:
        return skip or Reading("—", Call.SKIP)
    if metric.kind == "count":
        n, ref = count_of(r, metric), count_of(good, metric)
        return Reading(str(n), Call.BAD if n > ref else Call.GOOD,
                       f"{n - ref:+d} against the good end's {ref}" if n != ref else "")
    if metric.kind == "accuracy":
        word = outcome(r)
        bad = word in FAILED and outcome(good) not in FAILED
        return Reading(word, Call.BAD if bad else Call.GOOD,
                       (r.error or "").strip().splitlines()[0][:200] if bad and r.error else "")
    if metric.kind == "cache":
        assert metric.component is not None
        mine, ref = component_of(r, metric.component), component_of(good, metric.component)
        value = _component_value(r, metric.component)
        if mine == ref:
            return Reading(value, Call.GOOD)
        return Reading(value, Call.BAD, f"was {_component_value(good, metric.component)} at "
                                        "the good end")
    return memory_call(good, r, thresholds or Thresholds())


def memory_call(good: ModelResult, r: ModelResult, thresholds: Thresholds) -> Reading:
    """Peak memory: one value a side, judged against the memory threshold alone."""
    d = compare_model(good, r, thresholds).memory
    if d is None:
        why = r.memory.unknown_reason or good.memory.unknown_reason or "not measured"
        return Reading("—", Call.SKIP, f"peak memory: {why}")
    return Reading(_bytes(d.head), Call.BAD if d.verdict is Verdict.REGRESSION else Call.GOOD,
                   _ratio(d))


def timed_call(metric: Metric, ref: ModelResult, r: ModelResult | None, thresholds: Thresholds,
               noise: NoiseBands | None = None, host: HostNoise | None = None,
               same_environment: bool = True) -> Reading:
    """A step measured beside the good end (``ref``), judged by the verdict: a regression is
    bad; unchanged, an improvement, or an interval whose upper end stays within the
    threshold is good; anything else (within noise past the threshold, too noisy to judge)
    unsettled. A model the loop did not time because its compiled code is the good end's by
    construction is good."""
    skip = _unmeasured(r, metric) or _unmeasured(ref, metric)
    if skip is not None or r is None:
        return skip or Reading("—", Call.SKIP)
    if r.timing_skipped and metric.name == "compiled-time":
        return Reading("same code", Call.GOOD, r.timing_skipped[:200])
    row = compare_model(ref, r, thresholds, noise=noise, host=host,
                        same_environment=same_environment)
    d: Delta | None = getattr(row, metric.delta or "")
    if d is None:
        return Reading("—", Call.SKIP, f"{metric.label}: not measured")
    value = f"{_amount(metric, d.base)} → {_amount(metric, d.head)} {_ratio(d)}"
    if d.verdict is Verdict.REGRESSION:
        return Reading(value, Call.BAD, d.note or "")
    if d.verdict in (Verdict.UNCHANGED, Verdict.IMPROVEMENT):
        return Reading(value, Call.GOOD, d.note or "")
    if d.verdict is Verdict.WITHIN_NOISE and d.threshold is not None \
            and d.ci_high is not None and d.ci_high <= 1 + d.threshold:
        # only the upper side matters here: not slower by the threshold, however noisy below
        return Reading(value, Call.GOOD, f"not past the {d.threshold:.0%} threshold")
    said = "shown, not judged" if d.verdict is None else d.verdict.value.replace("_", " ")
    return Reading(value, Call.UNSETTLED, f"{said}{'; ' + d.note if d.note else ''}")


def combine(calls: list[Call]) -> Call:
    """A step over several models: bad where any model is bad, else unsettled, else skipped
    where any could not be read, else good."""
    for c in (Call.BAD, Call.UNSETTLED, Call.SKIP):
        if c in calls:
            return c
    return Call.GOOD


def value_of(metric: Metric, r: ModelResult) -> str:
    """A result's value of a deterministic metric, as the report shows it (an end, say)."""
    if metric.kind == "count":
        return str(count_of(r, metric))
    if metric.kind == "accuracy":
        return outcome(r)
    if metric.kind == "cache":
        assert metric.component is not None
        return _component_value(r, metric.component)
    if metric.kind == "memory":
        return _bytes(r.memory.compiled_peak_bytes)
    if metric.name == "compiled-time" and r.latency is not None and r.latency.compiled_us:
        return _amount(metric, shown_per_call(r.latency)[1])
    seconds = r.compile.cold_s if metric.name == "cold-compile" else r.compile.warm_s
    return _amount(metric, seconds)


def _amount(metric: Metric, x: float | None) -> str:
    if x is None:
        return "—"
    if metric.name == "compiled-time":
        return f"{x / 1000:.2f} ms" if x >= 1000 else f"{x:.1f} µs"
    return f"{x:.2f} s"


def _bytes(x: float | None) -> str:
    return "—" if x is None else f"{x / 2**20:.1f} MiB"


def _ratio(d: Delta) -> str:
    if d.ratio is None:
        return ""
    ci = "" if d.ci_low is None or d.ci_high is None or d.ci_low == d.ci_high else \
        f" [{d.ci_low - 1:+.1%}, {d.ci_high - 1:+.1%}]"
    return f"({d.ratio - 1:+.1%}{ci})"


# a comparison row's metric (``ModelRow.gating_findings``' names) -> --metric
ROW_METRICS = {"compiled time": "compiled-time", "cold compile": "cold-compile",
               "warm compile": "warm-compile", "peak memory": "peak-memory",
               "peak memory (forward+backward)": "peak-memory", "graph breaks": "graph-breaks",
               "recompiles": "recompiles", "accuracy": "accuracy"}
