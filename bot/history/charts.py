"""Trend panels as inline SVG: one panel per metric with data, x the commit order of the branch.

Each point is a run in the order the branch's runs were measured. A year of nightlies is 365
points a panel and seven panels a page, so the points are one path and the panel carries its
values, intervals and run indexes once, as data attributes; the page's small script
(``templates/dashboard.js``) shows a point's value, interval, commit, PR and date on hover and
its run's links (the report, the commit) on click, from the page's list of runs. Every panel
draws a band: each point's interval where the metric has one (the speedup's), else each
segment's mean ± two nights of noise (the noise the step detection scales by), so a reader
sees what moving counts as. A step is a dashed red line before its first run at the new
level, labelled with the commit that introduced it; each segment's mean is a flat orange line.
Counts are drawn on integer axes.

``panel_data`` is the chart as data (pinned by golden files); ``draw_panel`` draws it.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

from compilewatch.bot.history.changepoints import noise_sigma
from compilewatch.bot.history.series import Series
from compilewatch.bot.render import svg

WIDTH, HEIGHT = 420, 210
LEFT, RIGHT, TOP, BOTTOM = 54, 12, 26, 38


BAND_SIGMAS = 2.0  # a segment's band: its mean ± this many nights of noise

Band = tuple[tuple[float, float, float], ...]  # (x index, low, high), left to right


@dataclass(frozen=True)
class PanelData:
    """One panel: its points (x index, value, run index or None), each point's interval where
    the metric has one, its bands, its steps and means."""

    title: str
    unit: str
    integer: bool
    y_ticks: tuple[float, ...]
    y_range: tuple[float, float]
    points: tuple[tuple[int, float, int | None], ...]
    intervals: tuple[tuple[float, float] | None, ...]  # empty: the metric has none
    bands: tuple[Band, ...]  # "interval" bands through the points, or one "noise" a segment
    band_kind: str  # "interval" or "noise"
    steps: tuple[tuple[int, str], ...]  # (index of the first run at the new level, label)
    means: tuple[tuple[int, int, float], ...]  # (first index, last index, mean)
    x_labels: tuple[tuple[int, str, str], ...]  # (index, short commit, month-day)


def _means(s: Series) -> tuple[tuple[int, int, float], ...]:
    bounds = [0, *(st.night for st in s.steps), len(s.values)]
    return tuple((a, b - 1, sum(s.values[a:b]) / (b - a)) for a, b in itertools.pairwise(bounds)
                 if b > a)


def _x_labels(s: Series, n: int = 5) -> tuple[tuple[int, str, str], ...]:
    count = len(s.values)
    idx = sorted({round(k * (count - 1) / (n - 1)) for k in range(n)}) if count > 1 else [0]
    return tuple((i, (s.commits[i] or "?")[:7], s.times[i].strftime("%m-%d")) for i in idx)


def _intervals(s: Series) -> tuple[tuple[float, float] | None, ...]:
    got = tuple(p.interval for p in s.infos)
    return got if any(iv is not None for iv in got) else ()


def _bands(s: Series, intervals: Sequence[tuple[float, float] | None],
           means: Sequence[tuple[int, int, float]]) -> tuple[tuple[Band, ...], str]:
    """Interval bands through the runs of points that have one; else a noise band a segment."""
    if intervals:
        runs = itertools.groupby(enumerate(intervals), key=lambda p: p[1] is not None)
        return tuple(tuple((float(i), iv[0], iv[1]) for i, iv in group if iv is not None)
                     for kept, group in runs if kept), "interval"
    half = BAND_SIGMAS * noise_sigma(s.values) if len(s.values) > 1 else 0.0
    return tuple(((a - 0.4, m - half, m + half), (b + 0.4, m - half, m + half))
                 for a, b, m in means), "noise"


def panel_data(s: Series, run_index: dict[str, int] | None = None) -> PanelData:
    """The panel of one series (``run_index``: run id -> its index in the page's run list)."""
    intervals, means = _intervals(s), _means(s)
    bands, kind = _bands(s, intervals, means)
    lo, hi = _y_range(s, bands)
    ticks = svg.nice_ticks(lo, hi, 4, integer=s.integer)
    lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])
    runs = run_index or {}
    points = tuple((i, v, runs.get(p.run_id or ""))
                   for i, (v, p) in enumerate(zip(s.values, s.infos, strict=True)))
    steps = tuple((st.night, f"step {(st.commit or '?')[:8]} {_pct(st.rel_change)}")
                  for st in s.steps)
    title = s.label + (f" ({s.unit})" if s.unit else "")
    return PanelData(title=title, unit=s.unit, integer=s.integer, y_ticks=tuple(ticks),
                     y_range=(lo, hi), points=points, intervals=intervals, bands=bands,
                     band_kind=kind, steps=steps, means=means, x_labels=_x_labels(s))


def _y_range(s: Series, bands: Sequence[Band] = ()) -> tuple[float, float]:
    """Counts from zero to at least one (a constant 0 is not drawn on -1..1), with a margin
    that holds no tick; other metrics around their values and their bands."""
    if not s.integer:
        edges = [v for band in bands for _, low, high in band for v in (low, high)]
        return svg.padded([*s.values, *edges])
    lo, hi = min(0.0, *s.values), max(1.0, *s.values)
    margin = (hi - lo) * 0.08
    return lo - margin, hi + margin


def _pct(v: float | None) -> str:
    return "" if v is None else f"{v:+.1%}"


def _d(v: float) -> str:
    return f"{v:.1f}"


def draw_panel(p: PanelData) -> Markup:
    """The panel as an ``<svg>`` element: its points one path, its data as attributes."""
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
    for band in p.bands:
        edge = [f"{_d(x(i))} {_d(y(high))}" for i, _, high in band]
        edge += [f"{_d(x(i))} {_d(y(low))}" for i, low, _ in reversed(band)]
        body.append(f'<path class="band {p.band_kind}" d="M{"L".join(edge)}Z"/>')
    for a, b, mean in p.means:
        body.append(svg.line(x(a - 0.4), y(mean), x(b + 0.4), y(mean), svg.COLORS["mean"],
                             width=2))
    # each point's pixels once: a year is 365 points a panel, seven panels a page
    at = [(_d(x(i)), _d(y(v))) for i, v, _ in p.points]
    coords = " ".join(f"{px},{py}" for px, py in at)
    body.append(f'<polyline points="{coords}" fill="none" stroke="{svg.COLORS["line"]}" '
                'stroke-width="1"/>')
    for night, label in p.steps:
        sx = x(night - 0.5)
        body += [svg.line(sx, TOP, sx, HEIGHT - BOTTOM, svg.COLORS["step"], width=1.2,
                          dash="4 3"),
                 f'<text class="step" x="{sx + 3}" y="{TOP + 9}" fill="{svg.COLORS["step"]}" '
                 f'font-size="9">{svg.esc(label)}<title>{svg.esc(label)}</title></text>']
    dots = "".join(f"M{px} {py}h0" for px, py in at)
    body.append(f'<path class="dots" d="{dots}"/>')
    dense = " dense" if len(p.points) > 120 else ""  # smaller dots (dashboard.css)
    chart = svg.svg(WIDTH, HEIGHT, body, p.title, cls="panel" + dense)
    return Markup(str(chart).replace(' role="img"', f' {_data(p, x)} role="img"', 1))


def _data(p: PanelData, x: svg.Scale) -> str:
    """The attributes the page's script reads: where point i is (x0 + i * dx), each value,
    its run's index in the page's list (-1: none), its interval where it has one, the unit."""
    def attr(name: str, value: object) -> str:  # numbers and null only: nothing to escape
        return f'data-{name}="{json.dumps(value, separators=(",", ":"))}"'

    values = [float(f"{v:.4g}") for _, v, _ in p.points]
    runs = [-1 if r is None else r for _, _, r in p.points]
    # point i's x is x0 + i * dx, both unrounded
    x0, dx = x.exact(0), x.exact(1) - x.exact(0)
    out = [f'data-x="{x0:.3f},{dx:.5f}"', attr("v", values), attr("r", runs),
           f'data-u="{svg.esc(p.unit)}"', f'data-int="{int(p.integer)}"']
    if p.intervals:
        out.append(attr("iv", [None if iv is None else [float(f"{iv[0]:.4g}"),
                                                         float(f"{iv[1]:.4g}")]
                               for iv in p.intervals]))
    return " ".join(out)


def panels(series: Sequence[Series], run_index: dict[str, int] | None = None) -> list[Markup]:
    """A panel for every series that has data (none for a metric never measured)."""
    return [draw_panel(panel_data(s, run_index)) for s in series if s.values]
