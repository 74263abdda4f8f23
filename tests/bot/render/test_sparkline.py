"""The PR comment's sparklines and diagnostics links."""

from __future__ import annotations

from compilewatch.bot.judge.verdicts import compare
from compilewatch.bot.render.formats import render_markdown
from compilewatch.bot.render.sparkline import BARS, sparkline
from tests.factories import model_result, run_results


def test_sparkline_spans_the_eight_levels_between_its_own_min_and_max() -> None:
    assert sparkline([1, 2, 3, 4, 5, 6, 7, 8]) == BARS
    assert sparkline([5.0, 5.0, 5.0]) == "▁▁▁"  # flat is flat, not noise blown up
    assert sparkline([3.0]) == "" and sparkline([]) == ""
    assert len(sparkline(range(100))) == 30  # the newest 30 nights


def _flagged():  # type: ignore[no-untyped-def]
    base = run_results([model_result("gpt2", seed=1), model_result("bert", seed=1)],
                       run_id="base-run-0001")
    head = run_results([model_result("gpt2", seed=2, compiled_us=65.0),
                        model_result("bert", seed=2)], run_id="head-run-0001")
    c = compare(base, head)
    rows = [r.model_copy(update={"diagnostics": {"trace (head)": "diagnostics/gpt2/head.json",
                                                 "odd": "../../etc/passwd"}})
            if r.model == "gpt2" else r for r in c.rows]
    return c.model_copy(update={"rows": rows})


def test_a_flagged_model_has_its_sparkline_and_its_diagnostics_are_links() -> None:
    c = _flagged()
    history = {("micro", "gpt2", c.rows[0].config): ("compiled time", [50.0, 51, 50, 49, 65])}
    md = render_markdown(c, history=history, report_url="https://ci.example/pr-7/report.html")
    row = next(line for line in md.splitlines() if "**gpt2**" in line)
    assert "<br>▁▂▁▁█ <sub>compiled time, last 5 nightlies</sub>" in row
    assert "[trace \\(head\\)](<https://ci.example/pr-7/diagnostics/gpt2/head.json>)" in md \
        or "[trace (head)](<https://ci.example/pr-7/diagnostics/gpt2/head.json>)" in md
    assert "etc\\/passwd</code>" in md and "https://ci.example/etc" not in md  # no link


def test_without_history_or_report_url_nothing_is_drawn_and_paths_stay_paths() -> None:
    md = render_markdown(_flagged())
    assert not any(b in md for b in BARS[1:]) and "nightlies" not in md
    assert "diagnostics, in the run's artifact" in md and "gpt2\\/head\\.json</code>" in md
