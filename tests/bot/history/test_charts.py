"""The trend panels as data, pinned by a golden file; and how they are drawn."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime, timedelta

from compilewatch.bot.history.charts import draw_panel, panel_data, panels
from compilewatch.bot.history.series import PointInfo, make_series
from tests.bot.render.test_formats import check_golden

START = datetime(2026, 10, 1, 3, 17, tzinfo=UTC)


def _series(metric: str, values: list[float]):  # type: ignore[no-untyped-def]
    points = [(START + timedelta(days=i), f"{i:02d}" + "c" * 38, v) for i, v in enumerate(values)]
    info = [PointInfo(run_id=f"run-{i}", pr=100 + i if i % 4 == 0 else None,
                      interval=(v * 0.98, v * 1.02) if metric == "speedup" else None)
            for i, v in enumerate(values)]
    return make_series(metric, points, info=info)


COLD = [10.0, 10.2, 9.9, 10.1, 10.0, 9.8, 10.1, 15.2, 14.9, 15.1, 15.0, 14.8, 15.2, 15.1]
BREAKS = [0.0] * 7 + [1.0] * 7


def test_panel_data_golden() -> None:
    runs = {f"run-{i}": i for i in range(len(COLD))}
    data = [asdict(panel_data(_series(m, v), runs)) for m, v in
            (("cold_s", COLD), ("graph_breaks", BREAKS), ("speedup", [2.0, 2.01, 1.99, 2.02]))]
    check_golden("trend_panels.json", json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def test_counts_are_on_an_integer_axis_from_zero() -> None:
    p = panel_data(_series("graph_breaks", [0.0] * 10))
    assert p.integer and p.y_ticks == (0.0, 1.0) and p.y_range[0] < 0 < 1 < p.y_range[1]


def test_the_step_is_marked_with_its_commit_and_points_hover_with_everything() -> None:
    p = panel_data(_series("cold_s", COLD), {"run-7": 7})
    assert p.steps == ((7, "step 07cccccc +50.2%"),)
    i, value, tip, run = p.points[7]
    assert (i, run) == (7, 7) and value == 15.2
    assert tip == "15.2 s · commit 07cccccc · 2026-10-08 03:17"
    assert _series("speedup", [2.0, 2.5]).values and \
        panel_data(_series("speedup", [2.0, 2.5])).points[0][2] == \
        "2× · 1.96–2.04 · commit 00cccccc · PR #100 · 2026-10-01 03:17"
    svg = draw_panel(p)
    assert svg.count("<circle") == len(COLD) and 'data-i="7"' in svg
    assert "<title>15.2 s · commit 07cccccc" in svg


def test_a_metric_without_data_has_no_panel() -> None:
    assert len(panels([_series("cold_s", COLD), _series("warm_start_s", [])])) == 1
