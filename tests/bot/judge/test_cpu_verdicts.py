"""What a CPU run's verdicts may claim: the quickstart's two runs replayed (two real runs of
the micro suite on a loaded 2-core machine, their cache-key values trimmed), an A/A of CPU runs
measured apart, the strict rule, and intervals too wide to print as numbers."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from compilewatch.bot.judge.comparison import Delta, Verdict
from compilewatch.bot.judge.stats import too_wide, verdict_of
from compilewatch.bot.judge.thresholds import MetricThreshold
from compilewatch.bot.judge.timings import APART_NOTE
from compilewatch.bot.judge.verdicts import compare
from compilewatch.bot.render.comparison_table import render_table
from compilewatch.bot.render.filters import speedup_ci
from compilewatch.bot.render.formats import render_markdown
from compilewatch.bot.render.run_table import summary_table
from compilewatch.core.estimates import Estimate
from compilewatch.core.schema import Interval, RunResults
from tests.factories import model_result, one_loop, run_results

DATA = Path(__file__).parent / "data"
CHANGES = (Verdict.REGRESSION, Verdict.IMPROVEMENT)
INTERVAL = re.compile(r"\[([+-]\d+\.\d)%, ([+-]\d+\.\d)%\]")


def _quickstart(n: int) -> RunResults:
    return RunResults.model_validate_json(gzip.decompress((DATA / f"quickstart_{n}.json.gz")
                                                          .read_bytes()))


def _deltas(row) -> list[Delta]:  # type: ignore[no-untyped-def]
    return [d for d in (row.compiled_time, row.eager_time, row.speedup, row.cold_compile,
                        row.warm_compile, row.warm_start, row.memory) if d is not None]


@pytest.mark.parametrize("paired", [False, True], ids=["runs apart", "as one pr's sides"])
def test_the_quickstart_s_two_runs_claim_no_change(paired: bool) -> None:
    base, head = _quickstart(1), _quickstart(2)
    if paired:
        base, head = one_loop(base, head)
    c = compare(base, head)
    assert c.headline.regressions == c.headline.improvements == 0 and not c.gating_regression
    for row in c.rows:
        for d in _deltas(row):
            assert d.verdict not in CHANGES, (row.model, d)
            if too_wide(d.ci_low, d.ci_high):
                assert d.verdict in (None, Verdict.NOISY) and "not judged: too noisy" in d.note
        if not paired:  # compile times of two CPU runs apart: shown, never judged
            assert row.cold_compile is None or row.cold_compile.verdict is None
            assert row.warm_compile is not None and row.warm_compile.verdict is None
            assert row.warm_compile.note == APART_NOTE
    # every interval a reader is shown bounds something: none spans a factor over 4
    for text in (render_table(c), render_markdown(c)):
        for low, high in INTERVAL.findall(text):
            assert not too_wide(1 + float(low) / 100, 1 + float(high) / 100), (low, high)


def test_a_run_s_speedup_interval_that_bounds_nothing_is_said_not_printed() -> None:
    from rich.console import Console

    run = _quickstart(2)
    console = Console(width=200, record=True, color_system=None)
    console.print(summary_table(run, 200))
    text = console.export_text()
    assert "too noisy" in text and "0.01," not in text  # bf16_block_dynamic: [0.01, 58.29]
    wide = next(r.speedup for r in run.results if r.model == "bf16_block_dynamic")
    assert str(speedup_ci(wide, 2)) == ("not judged: too noisy (the 95% interval from 2 timing "
                                        "processes spans a factor of 6,126)")
    assert str(speedup_ci(Interval(value=2.0, ci_low=1.8, ci_high=2.2))) == "[1.80, 2.20]"
    assert "reaches zero" in str(speedup_ci(Interval(value=1.0, ci_low=0.0, ci_high=9.0)))


def _warm(seed: int, samples: list[float]):  # type: ignore[no-untyped-def]
    r = model_result("m", seed=seed, processes=2)
    return r.model_copy(update={"compile": r.compile.model_copy(update={
        "warm_s": sorted(samples)[0], "warm_samples_s": samples})})


def test_cpu_runs_apart_never_call_a_compile_time_change() -> None:
    """A sharded run against an unsharded one of the same commit read a warm compile -42.7%:
    two CPU runs apart, whose host speed differed, not the compiler."""
    base = run_results([_warm(1, [2.00, 2.05])])
    head = run_results([_warm(2, [1.15, 1.17])], created_at="2026-11-29T09:00:00+00:00")
    [row] = compare(base, head).rows
    assert row.warm_compile is not None and row.warm_compile.verdict is None
    assert row.warm_compile.ratio == pytest.approx(0.575, abs=0.01)
    assert "not judged" in row.warm_compile.note and row.verdict not in CHANGES
    # the same two sides measured in one loop: judged (strictly)
    b, h = one_loop(base, head)
    [row] = compare(b, h).rows
    assert row.warm_compile is not None and row.warm_compile.verdict is not None


@pytest.mark.parametrize(("low", "high", "strict", "want"), [
    (1.05, 1.35, False, Verdict.REGRESSION),   # the interval excludes no change: called
    (1.05, 1.35, True, Verdict.WITHIN_NOISE),  # ...but reaches inside the band: not on a CPU
    (1.12, 1.30, True, Verdict.REGRESSION),    # wholly past the band
    (0.70, 0.95, True, Verdict.WITHIN_NOISE),
    (0.70, 0.85, True, Verdict.IMPROVEMENT),
])
def test_a_cpu_calls_a_change_only_where_the_interval_lies_past_the_band(
        low: float, high: float, strict: bool, want: Verdict) -> None:
    ratio = (low * high) ** 0.5
    est = Estimate(ratio, low, high, 0.01, 10, (3, 3))
    t = MetricThreshold(regression=0.10)
    got, band = verdict_of(est, t, base=100.0, head=100.0 * ratio, noise_factor=3.0,
                           noisy_half_width=0.25, strict=strict)
    assert band == pytest.approx(0.10) and got is want
