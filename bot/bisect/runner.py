"""The bisection's steps: the ends first, then one candidate a step until the search is over.

Both ends are measured together in the first step: the good end's values are what every
later step is called against, and a regression that does not reproduce between the ends is
refused before any step is spent on it. A deterministic metric then measures one candidate
alone per step; a timed one measures each candidate beside the good end again (the verdict
compares processes measured together, as a ``pr`` measures base beside head), and a verdict
still open measures the step again with twice the processes, up to a limit, instead of
guessing. Every step's runs are stored; the report records every reading.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from compilewatch.bot.bisect.measure import Measured, Setup, Side, measure_step, with_processes
from compilewatch.bot.bisect.search import Search
from compilewatch.bot.judge.bisect_metrics import (
    Call,
    Metric,
    Reading,
    check_component,
    combine,
    deterministic_call,
    timed_call,
    value_of,
)
from compilewatch.bot.judge.bisection import Candidate, ModelReading, Step
from compilewatch.bot.judge.host import HostNoise
from compilewatch.bot.judge.stats import NoiseBands
from compilewatch.bot.judge.thresholds import ThresholdPolicy
from compilewatch.bot.measure.harness import Measuring

Ident = tuple[str, str, str]


def label(ident: Ident) -> str:
    return f"{ident[0]}/{ident[1]} [{ident[2]}]"


@dataclass
class Judge:
    """How steps are called: the metric, the thresholds, the noise, the host."""

    metric: Metric
    policy: ThresholdPolicy
    noise: NoiseBands = field(default_factory=NoiseBands)
    host: HostNoise = field(default_factory=HostNoise)

    def call(self, ident: Ident, ref: Any, r: Any, same_environment: bool) -> Reading:
        t = self.policy.for_model(ident[1])
        if self.metric.timed:
            return timed_call(self.metric, ref, r, t, self.noise, self.host, same_environment)
        return deterministic_call(self.metric, ref, r, t)


class OutOfSteps(Exception):
    """The step budget is spent."""


@dataclass
class Runner:
    """One bisection's state: its candidates, the search, the steps so far."""

    setup: Setup
    judge: Judge
    candidates: list[Candidate]
    measuring: Measuring
    side_of: Callable[[str, Candidate], Side]
    max_steps: int = 32
    max_processes: int = 8
    fixed: str = ""  # the commit every build measures (--pythons); '' for commits
    # how a step is measured (``measure_step``); a parameter so that the decisions can be
    # checked on made-up results without compiling anything
    measure_fn: Callable[..., dict[str, Measured]] = measure_step
    steps: list[Step] = field(default_factory=list)
    measured: dict[int, Measured] = field(default_factory=dict)
    regressed: list[Ident] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.search = Search(len(self.candidates))

    # --- how a step measures ----------------------------------------------------------------
    @property
    def first_processes(self) -> int:
        m = self.measuring
        return m.cold_processes if self.judge.metric.name == "cold-compile" \
            else m.timing_processes

    def _options(self, processes: int) -> tuple[Measuring, dict[str, Any]]:
        """The loop's options for a step: one cold compile and no timing for a deterministic
        metric (a timing process for peak memory, which is read there)."""
        if self.judge.metric.timed:
            return with_processes(self.measuring, self.judge.metric.name, processes), {}
        timing = 1 if self.judge.metric.kind == "memory" else 0
        m = dataclasses.replace(self.measuring, cold_processes=1, timing_processes=timing)
        return m, {} if timing else {"measure": False}

    def measure(self, sides: list[Side], processes: int) -> dict[str, Measured]:
        if len(self.steps) >= self.max_steps:
            raise OutOfSteps
        measuring, extra = self._options(processes)
        return self.measure_fn(self.setup, sides, measuring, extra)

    def _same(self, a: Side, b: Side) -> bool:
        return a.python == b.python

    # --- the ends ---------------------------------------------------------------------------
    def ends(self) -> str | None:
        """Measure both ends; the models that regressed between them are bisected. Returns
        why the bisection is refused (None: it goes on)."""
        good = self.side_of("good", self.candidates[0])
        bad = self.side_of("bad", self.candidates[-1])
        processes = self.first_processes
        while True:
            out = self.measure([good, bad], processes)
            g, b = out["good"], out["bad"]
            self.measured[0], self.measured[len(self.candidates) - 1] = g, b
            if g.run is None or b.run is None:
                which, m = ("good", g) if g.run is None else ("bad", b)
                self.record("ends", len(self.candidates) - 1, 0, processes, Call.SKIP, [],
                             [], out, note=f"the {which} end {m.failed}")
                return f"the {which} end cannot be measured: it {m.failed}"
            check_component(self.judge.metric, [*g.run.results, *b.run.results])
            readings = {i: self.judge.call(i, g.result(i), b.result(i), self._same(good, bad))
                        for i in g.idents()}
            call = combine([r.call for r in readings.values()])
            self.record("ends", len(self.candidates) - 1, 0, processes, call,
                         self.readings_of(readings), self._values(g, readings), out)
            if call is Call.UNSETTLED and self.more(processes) is not None:
                processes = self.more(processes) or processes
                continue
            break
        self.regressed = [i for i, r in readings.items() if r.call is Call.BAD]
        kept = [label(i) for i, r in readings.items() if r.call is not Call.BAD]
        if not self.regressed:
            return ("the regression does not reproduce between the ends: "
                    + "; ".join(f"{label(i)}: {r.value} ({r.call.value}"
                                f"{', ' + r.why if r.why else ''})"
                                for i, r in readings.items()))
        if kept:
            self.notes.append(f"not bisected (no regression between the ends): "
                              f"{', '.join(kept)}")
        self.search.record(0, Call.GOOD)
        self.search.record(len(self.candidates) - 1, Call.BAD)
        return None

    def more(self, processes: int) -> int | None:
        """The next process count of a timed step whose verdict is open (None: no more)."""
        if not self.judge.metric.timed:
            return None
        nxt = max(2, processes * 2)
        return nxt if nxt <= self.max_processes and nxt > processes else None

    # --- the steps between ------------------------------------------------------------------
    def bisect(self) -> bool:
        """Steps until the search is over; False where the budget ran out first."""
        try:
            while (i := self.search.next()) is not None:
                self.search.record(i, self.step(i))
        except OutOfSteps:
            self.notes.append(f"stopped after {len(self.steps)} steps (--max-steps "
                              f"{self.max_steps}): the first bad is among the suspects")
            return False
        return True

    def step(self, index: int) -> Call:
        """One candidate: alone (deterministic), or beside the good end, measured again with
        more processes while its verdict is open (timed)."""
        cand = self.side_of("step", self.candidates[index])
        if not self.judge.metric.timed:
            out = self.measure([cand], 0)
            return self._called(index, None, 0, out, cand, cand)
        ref = self.side_of("good", self.candidates[0])
        processes = self.first_processes
        while True:
            out = self.measure([ref, cand], processes)
            call = self._called(index, 0, processes, out, ref, cand)
            more = self.more(processes)
            if call is not Call.UNSETTLED or more is None:
                return call
            processes = more

    def _called(self, index: int, reference: int | None, processes: int,
                out: dict[str, Measured], ref: Side, cand: Side) -> Call:
        m = out["step"]
        self.measured[index] = m
        base = out["good"] if reference is not None else self.measured[0]
        if m.run is None or base.run is None:
            why = m.failed if m.run is None else f"the good end beside it {base.failed}"
            self.record("candidate", index, reference, processes, Call.SKIP, [], [], out,
                         note=f"skipped: it {why}")
            return Call.SKIP
        readings = {i: self.judge.call(i, base.result(i), m.result(i), self._same(ref, cand))
                    for i in self.regressed}
        call = combine([r.call for r in readings.values()])
        refs = self._values(base, readings) if reference is not None else []
        self.record("candidate", index, reference, processes, call,
                     self.readings_of(readings), refs, out)
        return call

    # --- the record -------------------------------------------------------------------------
    def readings_of(self, readings: dict[Ident, Reading]) -> list[ModelReading]:
        return [ModelReading(model=label(i)[:512], value=r.value[:512], call=r.call,
                             why=r.why[:8000]) for i, r in readings.items()]

    def _values(self, m: Measured, readings: dict[Ident, Reading]) -> list[ModelReading]:
        """The reference side's own values, for the report (timed: the base of each ratio)."""
        return [ModelReading(model=label(i)[:512], value=value_of(self.judge.metric, r)[:512],
                             call=Call.GOOD)
                for i in readings if (r := m.result(i)) is not None]

    def record(self, kind: str, candidate: int, reference: int | None, processes: int,
                call: Call, readings: list[ModelReading], refs: list[ModelReading],
                out: dict[str, Measured], note: str | None = None,
                flags: list[str] | None = None) -> None:
        self.steps.append(Step(
            number=len(self.steps) + 1, kind=kind, candidate=candidate, reference=reference,
            processes=processes if self.judge.metric.timed else 0, call=call,
            readings=readings, reference_readings=refs,
            run_ids=[m.run.run_id for m in out.values() if m.run is not None],
            flags=flags or [], note=note[:8000] if note else None))
