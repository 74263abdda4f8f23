"""``compilewatch compare``: load two sides, judge them, render, write."""

from __future__ import annotations

import sys
from pathlib import Path

from compilewatch.bot.judge.comparison import Comparison
from compilewatch.bot.judge.project import compare_with_project, noise_bands
from compilewatch.bot.judge.verdicts import raise_on_gating
from compilewatch.bot.outcome import check_something_measured
from compilewatch.bot.render.formats import Format, render
from compilewatch.bot.sides import load_side
from compilewatch.core.files import write_atomic


def compare_command(*, base: str, head: str, fmt: Format = "markdown", out: Path | None = None,
                    fail_on_regression: bool = False, repo: Path = Path("."),
                    db_url: str | None = None, report_url: str | None = None,
                    trends_url: str | None = None, allow_empty: bool = False) -> Comparison:
    """Compare two sides with the repository's thresholds and baseline; write the rendering.

    A side in which nothing was measured is refused unless ``allow_empty``. The output is
    written before a gating regression is raised, so CI keeps the report.
    """
    sides = {"base": load_side(base, db_url), "head": load_side(head, db_url)}
    for name, side in sides.items():
        check_something_measured(side, allow_empty, label=name)
    comparison = compare_with_project(sides["base"], sides["head"], repo,
                                      noise_bands(db_url, sides["base"]))
    text = render(comparison, fmt, report_url, trends_url)
    if out is None:
        sys.stdout.write(text)
    else:
        write_atomic(out, text)
    if fail_on_regression:
        raise_on_gating(comparison)
    return comparison
