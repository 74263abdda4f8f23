"""Trend panels as inline SVG: one panel per metric with data, x the commit order of the branch.

Each point is a run in the order the branch's runs were measured; its hover text (an SVG
``<title>``) is the value, its interval where there is one, the commit, the PR and the date
(UTC),
and its ``data-i`` indexes the page's list of runs, whose links (the run's report, the commit)
the page's small script shows on click. A step is a dashed red line before its first run at
the new level, labelled with the commit that introduced it; each segment's mean is a flat
orange line. Counts are drawn on integer axes.

``panel_data`` is the chart as data (pinned by golden files); ``draw_panel`` draws it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

from compilewatch.bot.history.series import Series
from compilewatch.bot.render import svg

WIDTH, HEIGHT = 420, 210
LEFT, RIGHT, TOP, BOTTOM = 54, 12, 26, 38


@dataclass(frozen=True)
class PanelData:
    """One panel: its points (x index, value, hover text, run index), its steps and means."""

    title: str
    integer: bool
    y_ticks: tuple[float, ...]
    y_range: tuple[float, float]
    points: tuple[tuple[int, float, str, int | None], ...]
    steps: tuple[tuple[int, str], ...]  # (index of the first run at the new level, label)
    means: tuple[tuple[int, int, float], ...]  # (first index, last index, mean)
    x_labels: tuple[tuple[int, str, str], ...]  # (index, short commit, month-day)


def hover(s: Series, i: int) -> str:
    """A point's hover text: value, interval, commit, PR and date."""
    info = s.info(i)
    unit = f" {s.unit}" if s.unit and s.unit != "×" else s.unit
    value = f"{s.values[i]:.0f}" if s.integer else f"{s.values[i]:.4g}"
    parts = [f"{value}{unit}"]
    if info.interval is not None:
        parts.append(f"{svg.fmt(info.interval[0])}–{svg.fmt(info.interval[1])}")
    parts.append(f"commit {(s.commits[i] or '?')[:8]}")
    if info.pr is not None:
        parts.append(f"PR #{info.pr}")
    parts.append(s.times[i].strftime("%Y-%m-%d %H:%M"))
    return " · ".join(parts)


def _means(s: Series) -> tuple[tuple[int, int, float], ...]:
    bounds = [0, *(st.night for st in s.steps), len(s.values)]
    return tuple((a, b - 1, sum(s.values[a:b]) / (b - a)) for a, b in itertools.pairwise(bounds)
                 if b > a)


def _x_labels(s: Series, n: int = 5) -> tuple[tuple[int, str, str], ...]:
    count = len(s.values)
    idx = sorted({round(k * (count - 1) / (n - 1)) for k in range(n)}) if count > 1 else [0]
    return tuple((i, (s.commits[i] or "?")[:7], s.times[i].strftime("%m-%d")) for i in idx)


def panel_data(s: Series, run_index: dict[str, int] | None = None) -> PanelData:
    """The panel of one series (``run_index``: run id -> its index in the page's run list)."""
    lo, hi = _y_range(s)
    ticks = svg.nice_ticks(lo, hi, 4, integer=s.integer)
    lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])
    runs = run_index or {}
    points = tuple((i, v, hover(s, i), runs.get(s.info(i).run_id or ""))
                   for i, v in enumerate(s.values))
    steps = tuple((st.night, f"step {(st.commit or '?')[:8]} {_pct(st.rel_change)}")
                  for st in s.steps)
    title = s.label + (f" ({s.unit})" if s.unit else "")
    return PanelData(title=title, integer=s.integer, y_ticks=tuple(ticks), y_range=(lo, hi),
                     points=points, steps=steps, means=_means(s), x_labels=_x_labels(s))


def _y_range(s: Series) -> tuple[float, float]:
    """Counts from zero to at least one (a constant 0 is not drawn on -1..1), with a margin
    that holds no tick; other metrics around their values."""
    if not s.integer:
        return svg.padded(s.values)
    lo, hi = min(0.0, *s.values), max(1.0, *s.values)
    margin = (hi - lo) * 0.08
    return lo - margin, hi + margin


def _pct(v: float | None) -> str:
    return "" if v is None else f"{v:+.1%}"


def draw_panel(p: PanelData) -> Markup:
    """The panel as an ``<svg>`` element."""
    n = max(len(p.points), 1)
    x = svg.Scale(-0.5, n - 0.5, LEFT, WIDTH - RIGHT)
    y = svg.Scale(p.y_range[0], p.y_range[1], HEIGHT - BOTTOM, TOP)
    body = [svg.text(LEFT - 44, 15, p.title, size=12, weight="600")]
    body += svg.y_axis(y, p.y_ticks, LEFT, WIDTH - RIGHT)
    last = p.x_labels[-1][0] if p.x_labels else 0
    for i, label, day in p.x_labels:
        anchor = "start" if i == 0 and last else "end" if i == last and last else "middle"
        body += [svg.text(x(i), HEIGHT - BOTTOM + 12, label, anchor=anchor, color="#57606a",
                          size=9),
                 svg.text(x(i), HEIGHT - BOTTOM + 22, day, anchor=anchor, color="#8c959f",
                          size=8)]
    body.append(svg.text((LEFT + WIDTH - RIGHT) / 2, HEIGHT - 4,
                         "commits in order, oldest left", anchor="middle", color="#57606a",
                         size=9))
    for a, b, mean in p.means:
        body.append(svg.line(x(a - 0.4), y(mean), x(b + 0.4), y(mean), svg.COLORS["mean"],
                             width=2))
    coords = " ".join(f"{x(i)},{y(v)}" for i, v, _, _ in p.points)
    body.append(f'<polyline points="{coords}" fill="none" stroke="{svg.COLORS["line"]}" '
                'stroke-width="1"/>')
    for night, label in p.steps:
        sx = x(night - 0.5)
        body += [svg.line(sx, TOP, sx, HEIGHT - BOTTOM, svg.COLORS["step"], width=1.2,
                          dash="4 3"),
                 f'<text class="step" x="{sx + 3}" y="{TOP + 9}" fill="{svg.COLORS["step"]}" '
                 f'font-size="9">{svg.esc(label)}<title>{svg.esc(label)}</title></text>']
    body += [_point(x(i), y(v), tip, run) for i, v, tip, run in p.points]
    dense = " dense" if len(p.points) > 120 else ""  # smaller dots (dashboard.css)
    return svg.svg(WIDTH, HEIGHT, body, p.title, cls="panel" + dense)


def _point(cx: float, cy: float, tip: str, run: int | None) -> str:
    data = f' data-i="{run}"' if run is not None else ""
    return f'<circle cx="{cx}" cy="{cy}" r="2.5"{data}><title>{svg.esc(tip)}</title></circle>'


def panels(series: Sequence[Series], run_index: dict[str, int] | None = None) -> list[Markup]:
    """A panel for every series that has data (none for a metric never measured)."""
    return [draw_panel(panel_data(s, run_index)) for s in series if s.values]
