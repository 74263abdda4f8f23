"""Where a report contradicted itself: two different "cold compile" numbers, a regression row
whose only visible number improved, 65 example_inputs per key, an unexplained "—" for memory,
and one timestamp for both sides of a comparison."""

from __future__ import annotations

from compilewatch.bot.judge.verdicts import compare
from compilewatch.bot.render.comparison_table import render_table
from compilewatch.bot.render.formats import render_html, render_markdown, render_run_html
from compilewatch.core.schema import CacheKey, Memory
from tests.factories import BASE_COMPONENTS, model_result, run_results
from tests.html_tables import check_markdown_tables, check_tables

NO_MEMORY = "peak memory is measured on cuda"


def _shape_branch():  # type: ignore[no-untyped-def]
    r = model_result("shape_branch", cold_s=8.8, recompiles=["size mismatch"] * 3)
    # the cold process also compiled the shape sweep's recompiles: its phases sum to more
    r.compile = r.compile.model_copy(update={"cold_s": 8.8, "phases": {
        "dynamo": 2.1, "aot_autograd": 3.5, "inductor": 8.0, "total": 13.6}})
    values = {f"example_inputs[{i}]": "TensorMetadata(dtype=torch.float32, shape=(8, 64))"
              for i in range(63)}
    values["example_inputs[63]"] = "TensorMetadata(dtype=torch.float32, shape=(4,))"
    values["example_inputs[64]"] = "TensorMetadata(dtype=torch.float32, shape=(8, 64))"
    comps = {**BASE_COMPONENTS, **{name: f"h{i:014d}" for i, name in enumerate(values)}}
    r.cache = r.cache.model_copy(update={"fx": [CacheKey(key="f" * 40, components=comps,
                                                          values=values)]})
    r.memory = Memory(unknown_reason=NO_MEMORY)
    return r


def test_run_report_says_which_cold_compile_each_number_is() -> None:
    html = render_run_html(run_results([_shape_branch()]))
    (table,) = check_tables(html)
    assert "cold compile (first call)" in table.headers
    assert table.row("shape_branch")["cold compile (first call)"] == "8.80 s"
    assert "all compiles incl. recompiles" in html and "total 13.6 s" in html


def test_run_report_collapses_runs_of_example_inputs() -> None:
    html = render_run_html(run_results([_shape_branch()]))
    assert html.count("example_inputs[") <= 6
    assert "example_inputs[0–62] ×63" in html and "example_inputs[63]" in html
    assert "example_inputs[64]" in html


def test_run_report_says_why_memory_is_missing() -> None:
    html = render_run_html(run_results([_shape_branch()]))
    (table,) = check_tables(html)
    assert NO_MEMORY in table.row("shape_branch")["peak memory eager → compiled"]


def _gating():  # type: ignore[no-untyped-def]
    """A new graph break gates while the compiled time improves a lot."""
    base = run_results([model_result("gpt2", seed=1, compiled_us=250.0),
                        model_result("bert", seed=1)], run_id="base-run-0001")
    head = run_results([model_result("gpt2", seed=2, compiled_us=50.0,
                                     graph_breaks=["Tensor.item()"]),
                        model_result("bert", seed=2)], run_id="head-run-0001")
    return compare(base, head)


def test_a_gating_row_names_its_gating_finding_everywhere() -> None:
    c = _gating()
    html = render_html(c)
    (table, *_) = check_tables(html)
    verdict = table.row("micro/gpt2")["verdict"]
    assert "gating: graph breaks 0 → 1" in verdict
    assert "gpt2 (graph breaks 0 → 1)" in html  # the headline names it too
    md = render_markdown(c)
    flagged = check_markdown_tables(md)[0]
    assert "gating: graph breaks 0 → 1" in flagged.row("gpt2")["verdict"]
    headline = next(line for line in md.splitlines() if "gating regression" in line)
    assert "gpt2" in headline and "graph breaks 0 → 1" in headline
    text = render_table(c)  # the terminal table folds the verdict column
    assert "regression (gating: graph" in text and "breaks 0 → 1)" in text


def test_a_training_step_s_forward_backward_peak_is_named_where_it_gates() -> None:
    def step(seed: int, fwd_bwd: int):  # type: ignore[no-untyped-def]
        r = model_result("gpt2", seed=seed, peak_bytes=400 * 2**20)
        return r.model_copy(update={"memory": r.memory.model_copy(update={
            "eager_fwd_bwd_peak_bytes": 300 * 2**20, "compiled_fwd_bwd_peak_bytes": fwd_bwd})})

    c = compare(run_results([step(1, 200 * 2**20)], run_id="base-run-0001"),
                run_results([step(2, 260 * 2**20)], run_id="head-run-0001"))
    html = render_html(c)
    (table, *_) = check_tables(html)
    row = table.row("micro/gpt2")
    assert "gating: peak memory (forward+backward) +30.0%" in row["verdict"]
    assert "forward+backward 200.0 MiB → 260.0 MiB +30.0%" in row["peak memory"]
    flagged = check_markdown_tables(render_markdown(c))[0]
    assert "peak memory (forward+backward)" in flagged.row("gpt2")["verdict"]


def test_both_sides_started_together_is_said_once() -> None:
    same = _gating()
    html = render_html(same)
    assert "both sides started 2026-11-29T08:00:00+00:00" in html
    base = run_results([model_result("m")], created_at="2026-11-29T08:00:00+00:00")
    head = run_results([model_result("m")], created_at="2026-11-29T09:30:00+00:00")
    html = render_html(compare(base, head))
    assert "started 2026-11-29T08:00:00+00:00" in html
    assert "started 2026-11-29T09:30:00+00:00" in html and "both sides started" not in html
