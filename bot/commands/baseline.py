"""``compilewatch baseline update``: rewrite the repository's expectations from a run."""

from __future__ import annotations

from pathlib import Path

from compilewatch.bot.history.sides import load_side
from compilewatch.bot.judge.baseline import update_baseline
from compilewatch.bot.judge.project import load_project_config
from compilewatch.bot.measure.outcome import check_something_measured


def baseline_update_command(*, results: str, repo: Path = Path("."),
                            db_url: str | None = None) -> str:
    """Rewrite the repository's baseline file from a run (a results file or run id); the line
    to print. A run in which nothing was measured is refused: it would expect nothing."""
    project = load_project_config(repo)
    path = project.baseline_path
    run = load_side(results, db_url)
    check_something_measured(run, allow_empty=False)
    n = update_baseline(run, path)
    return f"wrote {n} models to {path}"
