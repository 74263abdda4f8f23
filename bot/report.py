"""The ``compare`` and ``baseline update`` commands: load, compare, render, write."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from compilewatch.bot.baseline import load_baseline, update_baseline
from compilewatch.bot.compare import compare
from compilewatch.bot.comparison import Comparison
from compilewatch.bot.project import load_project_config
from compilewatch.bot.sides import load_side
from compilewatch.compiler.errors import RegressionFound
from compilewatch.compiler.schema import RunResults, write_atomic

Format = Literal["markdown", "html", "json", "table"]


def compare_with_project(base: RunResults, head: RunResults,
                         config_dir: Path | None) -> Comparison:
    """``compare`` with the thresholds and baseline of the project checked out at
    ``config_dir`` (None: the built-in defaults). ``compare``, ``pr`` and ``post`` all judge
    this way; ``pr`` and ``post`` pass a trusted checkout, never the PR's."""
    if config_dir is None:
        return compare(base, head)
    project = load_project_config(config_dir)
    return compare(base, head, thresholds=project.threshold_policy(),
                   baseline=load_baseline(project.baseline_path))


def render(comparison: Comparison, fmt: Format, report_url: str | None = None,
           trends_url: str | None = None) -> str:
    from compilewatch.bot import render as r
    from compilewatch.bot.sitemap import trend_url_template

    if fmt == "markdown":
        trend = trend_url_template(trends_url) if trends_url else None
        return r.render_markdown(comparison, report_url=report_url, trend_url=trend)
    if fmt == "html":
        return r.render_html(comparison)
    if fmt == "json":
        return r.render_json(comparison)
    from compilewatch.bot.table import render_table

    return render_table(comparison)


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


def run_report_command(*, results: str, out: Path, db_url: str | None = None) -> Path:
    """One run (a results file or a run id) as a self-contained HTML page."""
    from compilewatch.bot.render import render_run_html

    write_atomic(out, render_run_html(load_side(results, db_url)))
    return out


def raise_on_gating(comparison: Comparison) -> None:
    """Exit 1 for CI; called after every output is written so the report survives."""
    if comparison.gating_regression:
        # a model that passed on base and is skipped on head gates too (compare's rule)
        names = ", ".join([*(r.model for r in comparison.rows if r.gating),
                           *(m.model for m in comparison.newly_failing if m.status == "skip")])
        raise RegressionFound(f"{comparison.headline.gating} model(s) with a gating "
                              f"regression: {names}")


def baseline_update_command(*, results: str, repo: Path = Path("."),
                            db_url: str | None = None) -> Path:
    """Rewrite the repository's baseline file from a run (a results file or run id)."""
    project = load_project_config(repo)
    path = project.baseline_path
    n = update_baseline(load_side(results, db_url), path)
    print(f"wrote {n} models to {path}")
    return path
