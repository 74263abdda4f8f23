"""The kernel diff in the comment (each model's five kernels that moved most, escaped, within
GitHub's limit however many kernels and models) and in the report (every kernel)."""

from __future__ import annotations

import re

from compilewatch.bot.judge.comparison import Comparison
from compilewatch.bot.judge.verdicts import compare
from compilewatch.bot.render.escape import md_escape
from compilewatch.bot.render.formats import COMMENT_LIMIT, length, render_html, render_markdown
from compilewatch.core.kernels import MAX_KERNELS, Kernel, KernelOrigin, KernelProfile
from compilewatch.core.schema import ModelResult
from tests.factories import BASE_COMPONENTS, model_result, run_results

HOSTILE_CODE = "y = x | @octocat <img src=x onerror=alert(1)> [link](https://evil.example)"


def _profile(n: int, heavy: int | None = None, extra: float = 0.0, long: int = 0) -> KernelProfile:
    """``n`` Triton-like kernels; kernel ``heavy`` takes ``extra`` µs more a step."""
    kernels = []
    for i in range(n):
        us = 10.0 + i % 7 + (extra if i == heavy else 0.0)
        kernels.append(Kernel(
            name=f"triton_poi_fused_op{i}_{'x' * long}{i}", kind="generated", graph="0_forward",
            calls=20, launches=20, total_us=us * 20, step_us=us, step_spread_us=0.1,
            origins=[KernelOrigin(node=f"op{i}", aten=f"aten.op{i}", location=f"models.py:{i}",
                                  code=HOSTILE_CODE if i == heavy else f"y{i} = f(x)")]))
    return KernelProfile(activity="cuda", steps=20, step_us=500.0,
                         device_us=sum(k.step_us for k in kernels), launches_per_step=n,
                         graphs=["0_forward"], kernels=kernels)


def _with(r: ModelResult, p: KernelProfile) -> ModelResult:
    return r.model_copy(update={"kernels": p})


def _comparison(models: int, kernels: int, long: int = 0) -> Comparison:
    base = [_with(model_result(f"model_{i:03d}", seed=i, compiled_us=50.0), _profile(kernels))
            for i in range(models)]
    head = [_with(model_result(f"model_{i:03d}", seed=1000 + i, compiled_us=60.0,
                               components={**BASE_COMPONENTS, "gm": "changed"}),
                  _profile(kernels, heavy=3, extra=40.0, long=long)) for i in range(models)]
    return compare(run_results(base, run_id="base-run-0001"),
                   run_results(head, run_id="head-run-0001"))


def test_the_comment_shows_a_models_five_kernels_that_moved_most_escaped() -> None:
    c = _comparison(1, 12)
    (row,) = c.rows
    assert row.kernels is not None and row.kernels.lines[0].head == ["triton_poi_fused_op3_3"]
    md = render_markdown(c)
    table = md[md.index("| kernel | | fuses |"):]
    rows = [line for line in table.splitlines() if line.startswith("| <code>")]
    assert len(rows) == 5  # of 12
    assert "triton" in rows[0] and "op3" in rows[0] and "+40.0 µs" in rows[0]
    assert md_escape(HOSTILE_CODE)[:60] in rows[0]
    assert HOSTILE_CODE not in md and "@octocat" not in md  # inert: escaped, no mention
    assert "<img" not in md.replace("\\<img", "")
    assert "within noise" in rows[1]  # the others moved by nothing
    assert re.search(r"kernels \(1 of 12 moved\)", md)  # the row's reason names the top one
    assert "the 5 that moved most of 12" in md


def test_many_models_with_many_kernels_stay_within_the_comment_limit() -> None:
    """100 models of as many kernels as a profile holds (``MAX_KERNELS``), names 200
    characters long: the comment fits GitHub's limit, each model shown still has its five
    lines, and the cut points to the report."""
    c = _comparison(100, MAX_KERNELS, long=200)
    md = render_markdown(c, report_url="https://ci.example/report.html")
    assert length(md) <= COMMENT_LIMIT
    assert "Truncated to fit" in md
    shown = md.count("| kernel | | fuses |")
    assert shown >= 1
    assert md.count("| <code>triton") == 5 * shown
    assert md.count("<details>") == md.count("</details>")


def test_the_report_holds_every_kernel_and_the_host_side() -> None:
    c = _comparison(1, 40)
    page = render_html(c)
    for i in range(40):
        assert f"triton_poi_fused_op{i}_{i}" in page
    assert "kernel launches a step 40 → 40" in page
    assert "onerror=alert" not in page.replace("onerror=alert(1)&gt;", "")  # escaped


def test_a_runs_own_report_lists_each_profiled_models_longest_kernels() -> None:
    """``run --profile-kernels`` has no base: its report lists a model's 20 longest kernels."""
    from compilewatch.bot.render.formats import render_run_html

    page = render_run_html(run_results([_with(model_result("m"), _profile(30))]))
    assert "triton_poi_fused_op0_0" in page and "10 more kernels in the results file" in page
    assert "30 launches" in page and "models.py:0" in page
