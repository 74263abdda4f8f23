"""The baseline CSV: written from a run, read back, and refused with a line number when wrong."""

from __future__ import annotations

import pytest

from compilewatch.bot.judge.baseline import (
    format_baseline,
    load_baseline,
    parse_baseline,
    update_baseline,
)
from compilewatch.core.errors import UsageError
from compilewatch.core.schema import Category
from tests.factories import model_result, run_results

HEADER = "suite,model,config,accuracy,graph_breaks,recompiles\n"


def test_update_writes_outcomes_and_counts_and_reads_back(tmp_path):
    run = run_results([
        model_result("b", graph_breaks=["x", "y"], recompiles=["g"]),
        model_result("a", accuracy_passed=False),
        model_result("c", category=Category.TIMEOUT),
        model_result("d", category=Category.EAGER_NONDETERMINISTIC),
    ])
    path = tmp_path / ".compilewatch" / "baseline.csv"
    assert update_baseline(run, path) == 4
    assert path.read_text() == HEADER + (
        "micro,a,cpu-default-float32-auto,fail_accuracy,0,0\n"
        "micro,b,cpu-default-float32-auto,pass,2,1\n"
        "micro,c,cpu-default-float32-auto,fail_to_run,,\n"
        "micro,d,cpu-default-float32-auto,eager_fail,0,0\n")
    loaded = load_baseline(path)
    exp = loaded.lookup(("micro", "b", "cpu-default-float32-auto"))
    assert (exp.accuracy, exp.graph_breaks, exp.recompiles) == ("pass", 2, 1)
    assert loaded.lookup(("micro", "c", "cpu-default-float32-auto")).graph_breaks is None
    assert parse_baseline(format_baseline(run)).entries == loaded.entries


def test_missing_file_is_no_baseline(tmp_path):
    assert load_baseline(tmp_path / "nope.csv") is None


@pytest.mark.parametrize(("text", "message"), [
    ("model,accuracy\n", "header must be"),
    (HEADER + "micro,m,*,passed,0,0\n", ":2: accuracy 'passed'"),
    (HEADER + "micro,m,*,pass,two,0\n", ":2: 'two' is not a whole number"),
    (HEADER + "micro,m,*,pass,-1,0\n", ":2: -1 is negative"),
    (HEADER + "micro,m,*,pass,0\n", ":2: expected 6 cells"),
    (HEADER + "micro,m,*,pass,0,0\nmicro,m,*,pass,1,0\n", ":3: micro/m/* is listed twice"),
])
def test_bad_baselines_name_the_line(text, message):
    with pytest.raises(UsageError, match=message.replace("*", r"\*").replace("(", r"\(")):
        parse_baseline(text, "b.csv")
