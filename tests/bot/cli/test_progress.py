"""Measuring's progress as the CLI shows it: a line per finished model and each note in a log,
nothing with --quiet, and the bar closed when the command fails."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from compilewatch.bot.cli.progress import ProgressDisplay
from compilewatch.bot.measure.harness import MeasureProgress


def _log() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=120, color_system=None), out


def test_a_log_gets_a_line_per_finished_model_and_each_note() -> None:
    console, out = _log()
    with ProgressDisplay(console=console) as show:
        show(MeasureProgress("note", text="workers are spawned, not forked", total=2))
        show(MeasureProgress("phase", "[base] micro/pointwise [cpu]", "cold 1", total=2))
        show(MeasureProgress("done", "[base] micro/pointwise [cpu]", status="pass",
                             duration_s=12.4, finished=1, total=2))
        show(MeasureProgress("done", "[head] micro/pointwise [cpu]", status="fail",
                             duration_s=3.0, finished=2, total=2))
    text = out.getvalue()
    assert "note: workers are spawned, not forked" in text
    assert "[1/2] [base] micro/pointwise [cpu]: pass (12 s)" in text
    assert "[2/2] [head] micro/pointwise [cpu]: fail (3 s)" in text


def test_quiet_shows_nothing() -> None:
    console, out = _log()
    with ProgressDisplay(quiet=True, console=console) as show:
        show(MeasureProgress("note", text="a note"))
        show(MeasureProgress("done", "m", status="pass", finished=1, total=1))
    assert out.getvalue() == ""


def test_the_bar_stops_when_the_command_fails() -> None:
    console, _ = _log()
    display = ProgressDisplay(console=console)
    with pytest.raises(RuntimeError), display as show:
        show(MeasureProgress("phase", "m", "cold 1", total=1))
        raise RuntimeError("measuring failed")
    assert display._bar is not None and not display._bar.live.is_started
