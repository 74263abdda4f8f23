"""``compilewatch compare``: load two sides, judge them, render, write."""

from __future__ import annotations

import sys
from pathlib import Path

from compilewatch.bot.judge.comparison import Comparison
from compilewatch.bot.judge.project import compare_with_project
from compilewatch.bot.judge.verdicts import raise_on_gating
from compilewatch.bot.render.formats import Format, render
from compilewatch.bot.sides import load_side
from compilewatch.core.files import write_atomic


def compare_command(*, base: str, head: str, fmt: Format = "markdown", out: Path | None = None,
                    fail_on_regression: bool = False, repo: Path = Path("."),
                    db_url: str | None = None, report_url: str | None = None,
                    trends_url: str | None = None) -> Comparison:
    """Compare two sides with the repository's thresholds and baseline; write the rendering.

    The output is written before a gating regression is raised, so CI keeps the report.
    """
    comparison = compare_with_project(load_side(base, db_url), load_side(head, db_url), repo)
    text = render(comparison, fmt, report_url, trends_url)
    if out is None:
        sys.stdout.write(text)
    else:
        write_atomic(out, text)
    if fail_on_regression:
        raise_on_gating(comparison)
    return comparison
