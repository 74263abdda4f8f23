"""``compilewatch compare``: load two sides, judge them, render, write."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from compilewatch.bot.history.noise import noise_bands
from compilewatch.bot.history.sides import load_side, results_root
from compilewatch.bot.judge.comparison import Comparison
from compilewatch.bot.judge.project import compare_with_project
from compilewatch.bot.measure.outcome import check_something_measured
from compilewatch.bot.render.diagnostics import relink
from compilewatch.bot.render.formats import Format, render
from compilewatch.core.files import write_atomic


@dataclass(frozen=True)
class CompareRequest:
    """Two sides (results files or run ids) and how to judge, render and link them."""

    base: str
    head: str
    fmt: Format = "markdown"
    out: Path | None = None  # None: the caller prints the rendering
    repo: Path = Path(".")  # whose thresholds and baseline judge
    db_url: str | None = None
    report_url: str | None = None
    trends_url: str | None = None
    allow_empty: bool = False  # a side in which nothing was measured is refused otherwise


def compare_command(req: CompareRequest) -> tuple[Comparison, str]:
    """Compare two sides with the repository's thresholds and baseline, and render it; the
    rendering is written to ``req.out`` when given (the CLI prints it otherwise, and raises on
    a gating regression after either, so CI keeps the report)."""
    base, head, out, db_url = req.base, req.head, req.out, req.db_url
    sides = {"base": load_side(base, db_url), "head": load_side(head, db_url)}
    for name, side in sides.items():
        check_something_measured(side, req.allow_empty, label=name)
    comparison = compare_with_project(sides["base"], sides["head"], req.repo,
                                      noise_bands(db_url, sides["base"]))
    if req.fmt == "html":  # links that work from where the page is (a pipe: the current folder)
        roots = {"base": results_root(base, sides["base"]),
                 "head": results_root(head, sides["head"])}
        comparison = relink(comparison, roots, out if out is not None else Path("compare.html"))
    text = render(comparison, req.fmt, req.report_url, req.trends_url)
    if out is not None:
        write_atomic(out, text)
    return comparison, text
