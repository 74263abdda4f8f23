"""The terminal summary table: what a maintainer reads at the end of run and nightly."""

from __future__ import annotations

import io

from rich.console import Console

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
