"""``compilewatch report``: one run (a results file or a run id) as a self-contained page."""

from __future__ import annotations

from pathlib import Path

from compilewatch.bot.history.sides import load_side
from compilewatch.bot.render.formats import render_run_html
from compilewatch.core.files import write_atomic


def run_report_command(*, results: str, out: Path, db_url: str | None = None) -> Path:
    """One run (a results file or a run id) as a self-contained HTML page."""
    write_atomic(out, render_run_html(load_side(results, db_url)))
    return out
