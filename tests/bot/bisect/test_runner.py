"""The bisection's control flow on made-up results (``Runner(measure_fn=...)``): what each step
measures, when the ends refuse, when a timed step is measured again with more processes, and
the step budget. The same flow on real measurements is in test_bisect_commits.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from compilewatch.bot.bisect.measure import Measured, Setup, Side
from compilewatch.bot.bisect.runner import Judge, Runner
from compilewatch.bot.judge.bisect_metrics import Call, parse_metric
from compilewatch.bot.judge.bisection import Candidate
from compilewatch.bot.judge.thresholds import ThresholdPolicy
from compilewatch.bot.measure.harness import MeasureOptions, Measuring
from tests.factories import model_result, run_results

COMMITS = [f"{i:02x}" * 20 for i in range(9)]


class Made:
    """Results as a step would measure them: ``value(index, processes)`` gives the compiled
    µs (timed) or the graph breaks (deterministic) of a candidate; every call is kept."""

    def __init__(self, compiled: Any = None, breaks: Any = None,
                 noise: Any = None, broken: frozenset[int] = frozenset()) -> None:
        self.compiled, self.breaks, self.noise, self.broken = compiled, breaks, noise, broken
        self.calls: list[tuple[list[str], list[int], Measuring, dict[str, Any]]] = []

    def __call__(self, setup: Setup, sides: list[Side], measuring: Measuring,
                 extra: dict[str, Any]) -> dict[str, Measured]:
        self.calls.append(([s.name for s in sides], [s.candidate.index for s in sides],
                           measuring, dict(extra)))
        out = {}
        for s in sides:
            i = s.candidate.index
            if i in self.broken:
                out[s.name] = Measured(failed="does not load: SyntaxError")
                continue
            p = measuring.timing_processes
            kw: dict[str, Any] = {"seed": len(self.calls) * 10 + i}
            if self.compiled is not None:
                kw |= {"compiled_us": self.compiled(i), "processes": max(p, 1), "spread": 0.01,
                       "process_spread": self.noise(p) if self.noise else 0.01}
            if self.breaks is not None:
                kw["graph_breaks"] = [f"break {k}" for k in range(self.breaks(i))]
            out[s.name] = Measured(run_results([model_result("m", **kw)], commit=s.commit))
        return out


def runner(made: Made, metric: str, **kw: Any) -> Runner:
    candidates = [Candidate(index=i, commit=c) for i, c in enumerate(COMMITS)]
    return Runner(Setup(repo=Path("."), models=("m",)),
                  Judge(parse_metric(metric), ThresholdPolicy()), candidates,
                  MeasureOptions().resolve(), lambda name, c: Side(name, c, commit=c.commit),
                  measure_fn=made, **kw)


def test_a_deterministic_metric_measures_each_candidate_alone_without_timing():
    made = Made(breaks=lambda i: int(i >= 5))
    r = runner(made, "graph-breaks")
    assert r.ends() is None and r.bisect()
    assert r.search.found and r.search.first_bad == 5
    names, indices, measuring, extra = made.calls[0]
    assert names == ["good", "bad"] and indices == [0, 8]  # both ends, one step
    for names, _, measuring, extra in made.calls[1:]:
        assert names == ["step"]
        assert (measuring.cold_processes, measuring.timing_processes) == (1, 0)
        assert extra == {"measure": False}
    assert [s.kind for s in r.steps] == ["ends"] + ["candidate"] * (len(r.steps) - 1)
    assert r.steps[0].reference_readings[0].value == "0"


def test_a_timed_metric_measures_each_candidate_beside_the_good_end():
    made = Made(compiled=lambda i: 500.0 if i >= 3 else 50.0)
    r = runner(made, "compiled-time")
    assert r.ends() is None and r.bisect()
    assert r.search.first_bad == 3 and r.search.found
    for names, indices, _, _ in made.calls[1:]:
        assert names == ["good", "step"] and indices[0] == 0
    assert all(s.reference == 0 for s in r.steps)


def test_an_open_verdict_is_measured_again_with_twice_the_processes():
    """A +30% regression behind 50% noise between processes is open at two and four
    processes a side, and settled at eight (where the host calms down)."""
    made = Made(compiled=lambda i: 65.0 if i >= 6 else 50.0,
                noise=lambda p: 0.5 if p < 8 else 0.005)
    r = runner(made, "compiled-time")
    assert r.ends() is None
    assert [s.processes for s in r.steps] == [2, 4, 8]
    assert [s.call for s in r.steps] == [Call.UNSETTLED, Call.UNSETTLED, Call.BAD]
    assert r.bisect() and r.search.first_bad == 6
    candidate = [s for s in r.steps if s.kind == "candidate"]
    assert candidate[0].processes == 2 and any(s.processes == 8 for s in candidate)


def test_what_stays_open_at_the_most_processes_is_not_guessed():
    made = Made(compiled=lambda i: 52.0 if i >= 6 else 50.0, noise=lambda p: 0.3)
    r = runner(made, "compiled-time", max_processes=4)
    reason = r.ends()
    assert [s.processes for s in r.steps] == [2, 4]
    assert reason is not None and "does not reproduce between the ends" in reason
    assert "unsettled" in reason


def test_ends_that_do_not_differ_are_refused_before_any_candidate():
    made = Made(breaks=lambda i: 1)
    r = runner(made, "graph-breaks")
    reason = r.ends()
    assert reason is not None and "1 (good" in reason
    assert len(made.calls) == 1 and r.search.calls == {}


def test_a_good_end_that_cannot_be_measured_is_refused():
    r = runner(Made(breaks=lambda i: i, broken=frozenset({0})), "graph-breaks")
    reason = r.ends()
    assert reason == "the good end cannot be measured: it does not load: SyntaxError"


def test_a_candidate_that_does_not_build_is_skipped_and_the_search_moves_on():
    made = Made(breaks=lambda i: int(i >= 2), broken=frozenset({4}))
    r = runner(made, "graph-breaks")
    assert r.ends() is None and r.bisect()
    assert r.search.calls[4] is Call.SKIP and r.search.first_bad == 2
    [skipped] = [s for s in r.steps if s.candidate == 4]
    assert skipped.note == "skipped: it does not load: SyntaxError"


def test_the_step_budget_stops_the_search_with_the_suspects_left():
    made = Made(breaks=lambda i: int(i >= 5))
    r = runner(made, "graph-breaks", max_steps=2)
    assert r.ends() is None
    assert not r.bisect()
    assert len(r.steps) == 2 and not r.search.found
    assert 5 in r.search.suspects() and "--max-steps 2" in r.notes[-1]
