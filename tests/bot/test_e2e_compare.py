"""End to end on CPU: two states of a model measured for real, compared, rendered."""

from __future__ import annotations

import pytest

from compilewatch.bot.judge.verdicts import compare
from compilewatch.bot.render.escape import md_escape
from compilewatch.bot.render.formats import render_markdown
from compilewatch.compiler.plan import Job
from compilewatch.core.schema import Config, Status
from compilewatch.suites.loader import load_suite
from tests.factories import run_results
from tests.one_job import RunOptions, run_job


@pytest.mark.slow
def test_new_break_and_input_shape_change_are_named(harness_suite, tmp_path):
    suite = load_suite(harness_suite)
    job = Job(suite, suite.models["branchy"], Config())
    sides = []
    for name, env in (("base", {"CW_TEST_ROWS": "8"}),
                      ("head", {"CW_TEST_ROWS": "6", "CW_TEST_BREAK": "1"})):
        opts = RunOptions(rounds=3, block_ms=2.0, timing_processes=0, cache_root=tmp_path / name,
                          extra_env=env)
        result = run_job(job, opts)
        assert result.status is Status.PASS, result.error
        sides.append(run_results([result]))
    base, head = sides
    comparison = compare(base, head)
    comment = render_markdown(comparison)
    [row] = comparison.rows
    assert any("item()" in r for r in row.graph_breaks.new_reasons)
    assert any(ch.changed and "example_inputs[0]" in ch.changed
               for ch in row.cache_changes), row.cache_changes
    assert md_escape("example_inputs[0]") in comment
    assert md_escape("Tensor.item()") in comment
