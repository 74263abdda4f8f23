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


def test_the_step_is_marked_with_its_commit_and_each_point_carries_its_data() -> None:
    p = panel_data(_series("cold_s", COLD), {"run-7": 7})
    assert p.steps == ((7, "step 07cccccc +50.2%"),)
    assert p.points[7] == (7, 15.2, 7) and p.points[6][2] is None  # run 6: not on the page
    svg = draw_panel(p)
    assert 'data-v="[10.0,10.2,9.9,' in svg and 'data-r="[-1,-1,-1,-1,-1,-1,-1,7,' in svg
    assert 'data-u="s"' in svg and "data-iv" not in svg  # a compile time has no interval
    assert svg.count("h0") == len(COLD)  # the points: one path, a dot each
    speed = draw_panel(panel_data(_series("speedup", [2.0, 2.5])))
    assert 'data-iv="[[1.96,2.04],[2.45,2.55]]"' in speed


def test_every_panel_draws_a_band() -> None:
    """The speedup's per-run intervals, else each segment's mean ± two nights of noise; a
    step's two segments get a band each."""
    speed = panel_data(_series("speedup", [2.0, 2.01, 1.99, 2.02]))
    assert speed.band_kind == "interval" and len(speed.bands) == 1
    assert speed.bands[0][0] == (0.0, 1.96, 2.04) and len(speed.bands[0]) == 4
    cold = panel_data(_series("cold_s", COLD))
    assert cold.band_kind == "noise" and len(cold.bands) == 2  # before and after the step
    (a0, lo0, hi0), (a1, _, _) = cold.bands[0]
    assert (a0, a1) == (-0.4, 6.4) and lo0 < 10.0 < hi0 and hi0 - lo0 < 2.0
    assert cold.y_range[0] <= lo0 and cold.y_range[1] >= cold.bands[1][0][2]
    for p in (speed, cold, panel_data(_series("graph_breaks", BREAKS))):
        assert draw_panel(p).count('class="band') == len(p.bands) >= 1


def test_a_metric_without_data_has_no_panel() -> None:
    assert len(panels([_series("cold_s", COLD), _series("warm_start_s", [])])) == 1


def test_the_pointer_finds_the_last_point_of_a_year() -> None:
    """The page's script maps the pointer to point i by ``data-x`` (x0, dx): with the step
    rounded as a pixel is, the 365th point sat a point off."""
    import re

    year = _series("cold_s", [10.0 + (i % 7) * 0.1 for i in range(365)])
    svg = str(draw_panel(panel_data(year)))
    x0, dx = map(float, re.search(r'data-x="([^,]+),([^"]+)"', svg).group(1, 2))  # type: ignore[union-attr]
    last = float(re.findall(r"M([\d.]+) [\d.]+h0", svg)[-1])
    assert round((last - x0) / dx) == 364
