"""The comparison object: what ``compare`` computes and every renderer (markdown, HTML, JSON,
terminal) reads. Plain data, no I/O; ``--format json`` is ``model_dump_json`` of it.

Strings copied from a run (errors, break reasons, component names) stay raw here; renderers
escape them for their medium.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Verdict(StrEnum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    WITHIN_NOISE = "within_noise"
    NOISY = "noisy"  # the host (or the model) was too noisy to judge: never gates
    FAILING = "failing"  # fails on both sides: nothing to compare, never gates


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Delta(_Data):
    """One metric, base → head. ``ratio`` is head/base with its confidence interval (for a
    single sample per side the interval is the point). Higher is worse unless the metric says
    otherwise (speedup, shown for context, is never judged)."""

    base: float
    head: float
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    verdict: Verdict | None = None
    gating: bool = False
    threshold: float | None = None
    note: str | None = None
    band: float | None = None  # the relative change a verdict needed: max(threshold, k * noise)
    noise: float | None = None  # between-process SD of the log value the interval used
    calibrated: bool = False  # the noise was learned for this model (compilewatch calibrate)
    samples: tuple[int, int] | None = None  # processes (or samples) per side, base and head
    method: str | None = None  # how the interval was made (docs/compare.md)


class CountDelta(_Data):
    """Graph breaks or recompiles: counts, the expectation from the baseline file if any, and
    the reasons head has that base (and the baseline) did not."""

    base: int
    head: int
    expected: int | None = None
    verdict: Verdict = Verdict.UNCHANGED
    gating: bool = False
    new_reasons: list[str] = Field(default_factory=list)
    gone_reasons: list[str] = Field(default_factory=list)


class AccuracyChange(_Data):
    """Outcome words as in the baseline file: pass, fail_accuracy, fail_to_run, skip."""

    base: str
    head: str
    expected: str | None = None
    verdict: Verdict = Verdict.UNCHANGED
    gating: bool = False


class GraphKeyChange(_Data):
    """One compiled graph whose FX or AOTAutograd cache key differs between the sides."""

    kind: Literal["fx", "aot"]
    index: int  # position among the head's (or, when removed, the base's) graphs of this kind
    # "bypassed": keyed on base, not keyed on head (the cache was bypassed: every process
    # compiles the graph from scratch); "cached again": the other way round
    status: Literal["changed", "added", "removed", "bypassed", "cached again"]
    reason: str | None = None  # torch's reason for the bypass
    base_key: str | None = None
    head_key: str | None = None
    changed: list[str] = Field(default_factory=list)
    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    summary: list[str] = Field(default_factory=list)  # changed names, long families collapsed
    # component -> [base value, head value] where a value is short and readable (shapes,
    # dtypes, strides, config values); the rest are told apart by their hashes only
    values: dict[str, list[str | None]] = Field(default_factory=dict)


class KernelLine(_Data):
    """One kernel base → head (or the kernels one was split into, or merged from), per step of
    the profile processes (``bot/judge/kernels.py``). Times are each kernel's median over the
    profiled steps."""

    # same: one kernel on each side (its index may have moved); changed: one each, fusing
    # other ops; split: one base kernel became several; merged: the other way; new, gone
    status: Literal["same", "changed", "split", "merged", "new", "gone"]
    kind: str  # generated, extern, eager, device
    base: list[str] = Field(default_factory=list)  # the kernels' names on each side
    head: list[str] = Field(default_factory=list)
    graph: str | None = None  # Inductor's graph id ("0_forward"), head's where it has one
    base_us: float = 0.0
    head_us: float = 0.0
    base_share: float = 0.0  # of the step's device time
    head_share: float = 0.0
    base_calls: float = 0.0  # calls a step
    head_calls: float = 0.0
    base_launches: float = 0.0  # host launches a step
    head_launches: float = 0.0
    fuses: list[str] = Field(default_factory=list)  # the ATen ops it computes
    where: list[str] = Field(default_factory=list)  # the user's lines: "models.py:17: y = ..."
    noise_us: float = 0.0  # the change it would take to be more than noise
    beyond_noise: bool = False
    bandwidth_gbs: tuple[float | None, float | None] | None = None  # achieved, base and head

    @property
    def delta_us(self) -> float:
        return self.head_us - self.base_us


class KernelHost(_Data):
    """The host side of a step: launches and host time a step, compiled graphs, and what a
    change in launches means."""

    base_launches: float = 0.0
    head_launches: float = 0.0
    base_host_us: float = 0.0
    head_host_us: float = 0.0
    base_graphs: int = 0
    head_graphs: int = 0
    finding: str | None = None  # "12 → 15 kernel launches a step: ...", where they moved


class KernelDiff(_Data):
    """Which kernels moved: base's profile process against head's, the lines sorted by how
    much each contributes to the step's change (``bot/judge/kernels.py``)."""

    activity: str  # cpu, cuda
    steps: tuple[int, int] = (0, 0)
    base_device_us: float = 0.0  # every kernel's time a step
    head_device_us: float = 0.0
    lines: list[KernelLine] = Field(default_factory=list)
    host: KernelHost = KernelHost()
    notes: list[str] = Field(default_factory=list)

    def top(self, n: int = 5) -> list[KernelLine]:
        return self.lines[:n]

    @property
    def structural(self) -> list[KernelLine]:
        """The lines that are no longer one kernel to one: split, merged, new, gone."""
        return [x for x in self.lines if x.status in ("split", "merged", "new", "gone")]


class ModelRef(_Data):
    suite: str
    model: str
    config: str
    status: str
    category: str
    error: str | None = None


class ModelRow(_Data):
    """A model present on both sides."""

    suite: str
    model: str
    config: str
    base_status: str
    head_status: str
    head_category: str
    head_error: str | None = None
    ran_both: bool  # timed on both sides: the only rows that enter aggregates
    verdict: Verdict
    gating: bool
    compiled_time: Delta | None = None  # per-call µs; the yardstick of a compiler change
    eager_time: Delta | None = None  # host witness, never judged
    speedup: Delta | None = None  # eager / compiled, context
    cold_compile: Delta | None = None
    warm_compile: Delta | None = None
    warm_start: Delta | None = None  # empty cache dir + a published artifact: shown, not judged
    first_output: Delta | None = None  # compiler-stack import + cold compile: shown, not judged
    memory: Delta | None = None
    fwd_bwd_memory: Delta | None = None  # a training step's peak when its backward ended
    graph_breaks: CountDelta | None = None
    recompiles: CountDelta | None = None
    accuracy: AccuracyChange | None = None
    cache_changes: list[GraphKeyChange] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    gating_findings: list[str] = Field(default_factory=list)  # which metrics gate, by name
    timing_skipped: str | None = None  # not timed: the same compiled code by construction
    compile_skipped: bool = False  # not measured at all: the change touches nothing it reads
    launch_bound: bool | None = None
    diagnostics: dict[str, str] = Field(default_factory=dict)  # what -> path in the output
    kernels: KernelDiff | None = None  # both sides' profile processes, diffed

    @property
    def not_timed(self) -> str | None:
        """What the compiled-time cell says instead of a number, if anything."""
        if self.compile_skipped:
            return "not measured: untouched"
        return "not timed: same code" if self.timing_skipped and not self.compiled_time \
            else None


class Insufficient(_Data):
    """A model a sharded side has no result for: its shard is missing or did not finish."""

    suite: str
    model: str
    config: str
    reason: str


class ShardLine(_Data):
    """One shard of a side: did it report, where it ran, how long it took."""

    side: str
    index: int  # from 0
    count: int
    state: str  # finished, unfinished, missing
    runner: str | None = None
    wall_s: float | None = None
    models: int = 0
    group: str
    balanced_by: str


class Aggregates(_Data):
    """Over models that ran on both sides only (added, removed and failing models excluded)."""

    models: int
    untouched: int = 0  # not measured: the change touches no file they read
    geomean_speedup_base: float | None = None
    geomean_speedup_head: float | None = None
    geomean_compiled_ratio: float | None = None
    pass_rate_base: float | None = None
    pass_rate_head: float | None = None
    total_cold_s_base: float | None = None
    total_cold_s_head: float | None = None
    total_warm_s_base: float | None = None
    total_warm_s_head: float | None = None
    total_warm_start_s_base: float | None = None
    total_warm_start_s_head: float | None = None


class Headline(_Data):
    regressions: int = 0
    improvements: int = 0
    unchanged: int = 0
    within_noise: int = 0
    noisy: int = 0
    failing: int = 0  # fails on both sides: not counted as unchanged
    gating: int = 0
    insufficient: int = 0  # no result on a side: its shard is missing or did not finish


class Side(_Data):
    run_id: str
    commit: str | None = None
    ref: str | None = None
    created_at: str
    finished_at: str | None = None
    torch: str
    device: str | None = None


class CacheSummary(_Data):
    """The answer to "will this PR make every user compile cold?"."""

    models_with_changes: int = 0
    models_compared: int = 0
    models_bypassed: int = 0  # a graph keyed on base is not keyed on head (cache bypassed)
    components: dict[str, int] = Field(default_factory=dict)  # collapsed name -> models


class Comparison(_Data):
    base: Side
    head: Side
    rows: list[ModelRow]
    added: list[ModelRef] = Field(default_factory=list)
    removed: list[ModelRef] = Field(default_factory=list)
    newly_failing: list[ModelRef] = Field(default_factory=list)
    newly_fixed: list[ModelRef] = Field(default_factory=list)
    aggregates: Aggregates
    headline: Headline
    cache: CacheSummary = CacheSummary()
    gating_regression: bool
    notes: list[str] = Field(default_factory=list)
    insufficient: list[Insufficient] = Field(default_factory=list)  # never gating
    shards: list[ShardLine] = Field(default_factory=list)  # empty: neither side was sharded

    @property
    def same_run(self) -> bool:
        """Base and head are one run: the comparison can find nothing (its notes say so)."""
        return self.base.run_id == self.head.run_id

    def flagged(self) -> list[ModelRow]:
        """Rows worth a line in the comment's table: anything but unchanged."""
        return [r for r in self.rows if r.verdict is not Verdict.UNCHANGED]
