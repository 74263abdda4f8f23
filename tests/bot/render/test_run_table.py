"""The terminal summary table: what a maintainer reads at the end of run and nightly."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from compilewatch.bot.render.formats import render_run_html
from compilewatch.bot.render.run_table import summary_table
from compilewatch.core.schema import Category
from tests.factories import model_result, run_results


def _text(results) -> str:  # type: ignore[no-untyped-def]
    console = Console(width=250, record=True, file=io.StringIO())
    console.print(summary_table(results))
    return console.export_text()


def test_warm_start_column_appears_only_when_a_model_has_one() -> None:
    plain = run_results([model_result("mlp", cold_s=10.0), model_result("convnet")])
    assert "warm start s" not in _text(plain)
    started = plain.model_copy(deep=True)
    first = started.results[0]
    first.compile = first.compile.model_copy(update={"warm_start_s": 1.234})
    text = _text(started)
    assert "warm start s" in text
    mlp = next(line for line in text.splitlines() if "micro/mlp" in line)
    assert "1.23" in mlp
    convnet = next(line for line in text.splitlines() if "micro/convnet" in line)
    assert convnet.split("│")[9].strip() == "-"  # the column of the model without one


def test_failed_model_shows_its_category() -> None:
    text = _text(run_results([model_result("mlp", category=Category.COMPILE_ERROR,
                                           error="boom")]))
    assert "error (compile_error)" in text


def _latency_run(processes: list[list[tuple[float, float]]]):  # type: ignore[no-untyped-def]
    """One model whose timing processes timed these (eager, compiled) rounds, with the speedup
    and pooled medians ``compiler/assemble.py`` records."""
    import statistics

    from compilewatch.core import estimates
    from compilewatch.core.schema import Interval

    r = model_result("mlp")
    eager = [e for p in processes for e, _ in p]
    compiled = [c for p in processes for _, c in p]
    speed = estimates.level([[e / c for e, c in p] for p in processes])
    assert r.latency is not None and speed is not None
    lat = r.latency.model_copy(update={
        "eager_us": eager, "compiled_us": compiled, "processes": len(processes),
        "process_sizes": [len(p) for p in processes],
        "eager_median_us": statistics.median(eager),
        "compiled_median_us": statistics.median(compiled)})
    return run_results([r.model_copy(update={"latency": lat, "speedup": Interval(
        value=speed[0], ci_low=speed[1], ci_high=speed[2])})])


def _row(text: str) -> list[str]:
    line = next(line for line in text.splitlines() if "micro/mlp" in line)
    return [c.strip() for c in line.split("│")[1:-1]]


def test_per_call_columns_are_on_the_speedup_s_scale() -> None:
    """Three processes, the second on a host ten times slower with a 4x speedup: the pooled
    medians read 100 µs and 50 µs (2x) beside a 2.52x speedup; each process's median, their
    geometric mean, gives 464.2 and 184.2 (2.52x)."""
    run = _latency_run([[(100.0, 50.0)] * 30, [(10000.0, 2500.0)] * 30, [(100.0, 50.0)] * 30])
    cells = _row(_text(run))
    assert cells[3].startswith("2.52x") and "†" not in cells[3]
    assert (cells[4], cells[5]) == ("464.2", "184.2")


def test_a_host_that_moved_inside_a_process_is_marked_and_explained() -> None:
    """The host slowed the eager blocks of some rounds and both blocks of others: each round's
    ratio is 1x or 10x, their median 1x; the medians of eager and of compiled are 1000 µs and
    100 µs, a ratio of 10x."""
    run = _latency_run([[(100.0, 100.0)] * 10 + [(1000.0, 100.0)] * 10
                        + [(1000.0, 1000.0)] * 11])
    text = _text(run)
    assert _row(text)[3].startswith("1.00x") and _row(text)[3].endswith("†")
    assert _row(text)[4:6] == ["1000.0", "100.0"]
    legend = " ".join(text.split())
    assert "speedup: eager ÷ compiled of the same round" in legend
    assert "†: their ratio is more than 25% from the speedup" in legend
    html = render_run_html(run)
    assert "eager ÷ compiled of the per-call columns is 10.00×, the speedup 1.00×" in html
    steady = _text(_latency_run([[(100.0, 50.0)] * 30]))
    assert "†" not in _row(steady)[3]


@pytest.mark.parametrize("width", [60, 80, 100, 132, 180])
def test_the_summary_fits_the_width_and_names_what_it_left_out(width: int) -> None:
    run = run_results([model_result("bf16_block_dynamic", graph_breaks=["x"]),
                       model_result("mlp")])
    console = Console(width=width, record=True, file=io.StringIO(), force_terminal=True)
    console.print(summary_table(run, width=width))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= width
    header = next(line for line in text.splitlines() if "model" in line)
    for always in ("model", "status", "speedup"):
        assert always in header
    hidden = [c for c in ("config", "eager µs", "compiled µs", "cold s (1st call)", "warm s",
                          "breaks", "recompiles", "accuracy") if c not in header]
    flat = " ".join(text.split())
    if hidden:
        assert f"not shown at {width} columns: {', '.join(hidden)}" in flat
    else:
        assert "not shown" not in flat
    assert bool(hidden) == (width < 180)  # the whole table is 172 columns wide
    # context goes before the findings: breaks and recompiles are the last to go
    if any(c in hidden for c in ("breaks", "recompiles")):
        assert {"config", "eager µs", "warm s", "accuracy"} <= set(hidden)
    if width >= 80:
        assert "breaks" in header and "recompiles" in header


def test_a_noisy_host_is_said_under_the_summary() -> None:
    from compilewatch.core.schema import HostCheck

    run = run_results([model_result("mlp")]).model_copy(update={"host": HostCheck(
        cpu_spread=0.3, noisy=True, detail="CPU workload spread 30.0%")})
    flat = " ".join(_text(run).split())
    assert "noisy host: the host's CPU was too noisy during this run (CPU workload spread " \
           "30.0%)" in flat
    assert "noisy host" not in _text(run_results([model_result("mlp")]))


@pytest.mark.parametrize("width", [80, 100, 120])
def test_the_comparison_table_keeps_breaks_and_recompiles_longest(width: int) -> None:
    from compilewatch.bot.judge.verdicts import compare
    from compilewatch.bot.render.comparison_table import build_table

    base = run_results([model_result("mlp", seed=1)])
    head = run_results([model_result("mlp", seed=2, graph_breaks=["a new break"])])
    console = Console(width=width, record=True, file=io.StringIO(), force_terminal=True)
    console.print(build_table(compare(base, head), width))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= width
    header = next(line for line in text.splitlines() if "model" in line)
    flat = " ".join(text.split())
    if "breaks" not in header:  # gone only after every column of context
        assert all(c not in header for c in ("warm", "speedup", "cold"))
    assert ("not shown" in flat) == any(c not in header for c in ("warm", "speedup", "cold",
                                                                   "breaks", "recompiles"))
