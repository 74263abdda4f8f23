"""``compilewatch compare``: load two sides, judge them, render, write."""

from __future__ import annotations

from pathlib import Path

from compilewatch.bot.diagnostics import relink
from compilewatch.bot.history.nightly_values import nightly_values
from compilewatch.bot.judge.comparison import Comparison
from compilewatch.bot.judge.project import compare_with_project, noise_bands
from compilewatch.bot.outcome import check_something_measured
from compilewatch.bot.render.formats import Format, render
from compilewatch.bot.sides import load_side, results_root
from compilewatch.core.files import write_atomic


def compare_command(*, base: str, head: str, fmt: Format = "markdown", out: Path | None = None,
                    repo: Path = Path("."), db_url: str | None = None,
                    report_url: str | None = None, trends_url: str | None = None,
                    allow_empty: bool = False) -> tuple[Comparison, str]:
    """Compare two sides with the repository's thresholds and baseline, and render it; the
    rendering is written to ``out`` when given (the CLI prints it otherwise, and raises on a
    gating regression after either, so CI keeps the report).

    A side in which nothing was measured is refused unless ``allow_empty``.
    """
    sides = {"base": load_side(base, db_url), "head": load_side(head, db_url)}
    for name, side in sides.items():
        check_something_measured(side, allow_empty, label=name)
    comparison = compare_with_project(sides["base"], sides["head"], repo,
                                      noise_bands(db_url, sides["base"]))
    if fmt == "html":  # links that work from where the page is (a pipe: the current folder)
        roots = {"base": results_root(base, sides["base"]),
                 "head": results_root(head, sides["head"])}
        comparison = relink(comparison, roots, out if out is not None else Path("compare.html"))
    history = nightly_values(db_url, comparison) if fmt == "markdown" else None
    text = render(comparison, fmt, report_url, trends_url, (sides["base"], sides["head"]),
                  history)
    if out is not None:
        write_atomic(out, text)
    return comparison, text
