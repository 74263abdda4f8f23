"""The report's and the comparison's charts as data (golden), and drawn."""

from __future__ import annotations

import json
from dataclasses import asdict

from compilewatch.bot.judge.verdicts import compare
from compilewatch.bot.render import plotdata
from compilewatch.bot.render.plots import comparison_charts, run_charts
from tests.bot.render.test_formats import check_golden
from tests.factories import model_result, run_results


def _sides():  # type: ignore[no-untyped-def]
    base = run_results([model_result("gpt2", seed=1, processes=3, n=6),
                        model_result("bert", seed=1, processes=2, n=4)], run_id="base-run-0001")
    head = run_results([model_result("gpt2", seed=2, processes=3, n=6, compiled_us=60.0),
                        model_result("bert", seed=2, processes=2, n=4)], run_id="head-run-0001")
    return base, head


def _rounded(x):  # type: ignore[no-untyped-def]
    if isinstance(x, float):
        return round(x, 4)
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_rounded(v) for v in x]
    return x


def test_plot_data_golden() -> None:
    base, head = _sides()
    c = compare(base, head)
    by = {(m.model): (m, n) for m, n in zip(base.results, head.results, strict=True)}
    data = {"forest": [asdict(r) for r in plotdata.forest(c)],
            "strips": {r.model: asdict(plotdata.compared_strip(r, *by[r.model]))  # type: ignore[arg-type]
                       for r in c.rows},
            "phases": [asdict(b) for b in plotdata.phases(base.results[0], "base")]}
    check_golden("plot_data.json", json.dumps(_rounded(data), indent=1, ensure_ascii=False)
                 + "\n")


def test_processes_are_split_as_stored() -> None:
    base, _ = _sides()
    lat = base.results[0].latency
    assert lat is not None
    assert [len(p) for p in plotdata.processes(lat)] == [6, 6, 6]
    old = lat.model_copy(update={"process_sizes": []})  # version 1: equal parts
    assert [len(p) for p in plotdata.processes(old)] == [6, 6, 6]


def test_every_row_gets_its_strip_and_phases_and_the_forest_links_to_them() -> None:
    base, head = _sides()
    forest, charts = comparison_charts(compare(base, head), base, head)
    assert forest is not None and 'href="#m-1"' in forest and forest.count("<circle") == 2
    assert [len(c) for c in charts] == [2, 2]
    assert "base process 1: median" in charts[0][0] and "the verdict&#39;s band" in charts[0][0]
    assert [len(c) for c in run_charts(base)] == [2, 2]
    assert comparison_charts(compare(base, head), None, None)[1] == [[], []]  # no samples


def test_a_phase_bar_stacks_the_exclusive_phases_to_its_compile() -> None:
    """``total`` and ``kernel_compile`` (inside the others) are not stacked: a bar stacked with
    them was twice as long as its compile."""
    r = model_result("gpt2")
    r = r.model_copy(update={"compile": r.compile.model_copy(update={
        "cold_s": 4.0, "phases": {"total": 4.0, "dynamo": 0.5, "aot_autograd": 2.0,
                                  "inductor": 0.5, "codegen": 1.0, "kernel_compile": 0.8,
                                  "backward": 1.2}})})
    (bar,) = [b for b in plotdata.phases(r, "base") if b.compile == "cold"]
    assert [k for k, _ in bar.phases] == ["dynamo", "aot_autograd", "inductor", "codegen"]
    assert sum(v for _, v in bar.phases) == bar.total == 4.0
