"""Draw the report's and the comparison's charts (``plotdata.py``) as inline SVG.

A strip plot of each timing process's samples (a box of its middle half and its median, the
samples as dots, on a log axis when they spread over decades), the compile phases as stacked
bars, and the forest plot of every model's change. Hover text is an SVG ``<title>``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from markupsafe import Markup

from compilewatch.bot.judge.comparison import Comparison
from compilewatch.bot.render import plotdata, svg
from compilewatch.bot.render.plotdata import ForestRow, PhaseBar, Process, Strip
from compilewatch.core.schema import ModelResult, RunResults

WIDTH = 640
BIG = 1e300  # an axis ends here: valid but absurd timings must not overflow the drawing
ROW = 18
LABEL = 70


def _us(v: float) -> str:
    return f"{v / 1000:.3g} ms" if v >= 1000 else f"{v:.3g} µs"


def _quartiles(xs: Sequence[float]) -> tuple[float, float, float]:
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, q2, q3


def _x_scale(values: Sequence[float], left: float, right: float) -> tuple[svg.Scale, list[float]]:
    finite = [v for v in values if math.isfinite(v)] or [0.0]
    lo, hi = min(finite), min(max(finite), BIG)
    if lo > 0 and hi / lo > 20:  # bimodal or wild: decades, not a squashed linear axis
        lo, hi = lo / 1.3, min(hi * 1.3, BIG)
        return svg.Scale(lo, hi, left, right, log=True), svg.log_ticks(lo, hi)
    lo, hi = svg.padded([lo, hi])
    ticks = svg.nice_ticks(lo, hi, 5)
    return svg.Scale(min(lo, ticks[0]), max(hi, ticks[-1]), left, right), ticks


def _process(p: Process, x: svg.Scale, y: float) -> list[str]:
    q1, med, q3 = _quartiles(sorted(p.samples))
    color = svg.COLORS["head" if p.side == "head" else "base"]
    label = f"process {p.index}" if p.side == "run" else f"{p.side} {p.index}"
    tip = (f"{'' if p.side == 'run' else p.side + ' '}process {p.index}: median {_us(med)}, "
           f"middle half {_us(q1)}–{_us(q3)}, {len(p.samples)} samples")
    out = [svg.text(LABEL - 6, y + 4, label, anchor="end", color=color, size=10),
           svg.rect(x(q1), y - 6, x(q3) - x(q1), 12, color, opacity=0.18, stroke=color,
                    title=tip),
           svg.line(x(med), y - 7, x(med), y + 7, color, width=2)]
    out += [svg.dot(x(v), y + ((k % 5) - 2) * 1.6, 1.8, color, opacity=0.7)
            for k, v in enumerate(p.samples)]
    return out


def strip_svg(s: Strip, title: str) -> Markup:
    """Each timing process on its own row, base above head, the verdict's band shaded."""
    values = [v for p in s.processes for v in p.samples] + list(s.band or ())
    top, height = 8, 8 + ROW * len(s.processes) + 32
    x, ticks = _x_scale(values, LABEL, WIDTH - 14)
    bottom = top + ROW * len(s.processes)
    body = svg.x_axis(x, ticks, bottom, top, label="per-call compiled time (µs)",
                      tick_label=_us)
    if s.band is not None and s.reference is not None:
        body += [svg.rect(x(s.band[0]), top, x(s.band[1]) - x(s.band[0]), bottom - top,
                          svg.COLORS["band"], opacity=0.9,
                          title=f"the verdict's band around base's {_us(s.reference)}: "
                                f"{_us(s.band[0])}–{_us(s.band[1])}"),
                 svg.line(x(s.reference), top, x(s.reference), bottom, "#0969da", dash="3 3")]
    for i, p in enumerate(s.processes):
        body += _process(p, x, top + ROW * i + ROW / 2)
    return svg.svg(WIDTH, height, body, title)


def _phase_colors(bars: Sequence[PhaseBar]) -> dict[str, str]:
    names: dict[str, str] = {}
    for b in bars:
        for name, _ in b.phases:
            names.setdefault(name, svg.PHASE_COLORS[len(names) % len(svg.PHASE_COLORS)])
    return names


def phases_svg(bars: Sequence[PhaseBar], title: str) -> Markup:
    """One stacked bar per compile (and side); a legend of the phases below."""
    colors = _phase_colors(bars)
    left = 130
    ends = [min(max(sum(v for _, v in b.phases), b.total or 0.0), BIG) for b in bars]
    x = svg.Scale(0, max(ends) or 1.0, left, WIDTH - 14)
    ticks = svg.nice_ticks(0, max(ends) or 1.0, 5)
    x = svg.Scale(0, max(max(ends), ticks[-1]) or 1.0, left, WIDTH - 14)
    bottom = 8 + ROW * len(bars)
    body = svg.x_axis(x, ticks, bottom, 8, label="seconds")
    for i, b in enumerate(bars):
        y, at = 8 + ROW * i + 3, 0.0
        label = b.compile if b.side == "run" else f"{b.side}: {b.compile}"
        body.append(svg.text(left - 6, y + 10, label, anchor="end", size=10))
        whole = sum(v for _, v in b.phases) or 1.0
        for name, v in b.phases:
            body.append(svg.rect(x(at), y, x(at + v) - x(at), ROW - 6, colors[name],
                                 title=f"{label} · {name} {v:.3g} s ({v / whole:.0%})"))
            at += v
        if b.total is not None:
            body.append(svg.line(x(b.total), y - 2, x(b.total), y + ROW - 4, "#1f2328",
                                 width=1.5))
    legend_y, lx = bottom + 40, left
    for name, color in colors.items():
        body += [svg.rect(lx, legend_y - 9, 10, 10, color), svg.text(lx + 14, legend_y, name,
                                                                     size=10)]
        lx += 24 + 6.5 * len(name)
        if lx > WIDTH - 80:
            lx, legend_y = left, legend_y + 14
    return svg.svg(WIDTH, legend_y + 8, body, title)


def _clip(v: float, reach: float) -> float:
    return max(-reach, min(reach, v))


def _forest_row(r: ForestRow, x: svg.Scale, y: float, reach: float) -> str:
    color = svg.COLORS.get(r.verdict, svg.COLORS["unchanged"])
    parts = []
    if r.band:
        lo, hi = _clip(-r.band, reach), _clip(r.band, reach)
        parts.append(svg.rect(x(lo), y - 6, x(hi) - x(lo), 12, svg.COLORS["band"]))
    if r.low is not None and r.high is not None:  # an interval past the axis ends at its edge
        parts.append(svg.line(x(_clip(r.low, reach)), y, x(_clip(r.high, reach)), y, color,
                              width=2))
    interval = (f" [{r.low:+.1%}, {r.high:+.1%}]" if r.low is not None and r.high is not None
                else "")
    band = f", band ±{r.band:.1%}" if r.band else ""
    tip = f"{r.label}: {r.change:+.1%}{interval}{band}; {r.verdict.replace('_', ' ')}"
    name = r.label if len(r.label) <= 48 else r.label[:47] + "…"
    parts += [svg.text(x.a - 8, y + 4, name, anchor="end", size=10),
              svg.dot(x(_clip(r.change, reach)), y, 4, color, title=tip)]
    return f'<a href="#{svg.esc(r.anchor)}">' + "".join(parts) + "</a>"


def forest_svg(rows: Sequence[ForestRow], title: str, width: int = 1000) -> Markup:
    """Every model's change of compiled time: point, interval, band; 0 % marked."""
    # the axis spans the changes and bands; a wild interval (a bimodal model's) is cut at
    # its edge rather than squashing every other model into a line
    # (and so is a band wider than ±50 %, a host too noisy to judge)
    changes = [abs(r.change) for r in rows] + [r.band for r in rows if r.band and r.band <= 0.5]
    reach = min(max([0.05, *changes]) * 1.6, 10.0)
    x = svg.Scale(-reach, reach, 340, width - 20)
    top, bottom = 8, 8 + ROW * len(rows)
    body = svg.x_axis(x, svg.nice_ticks(-reach, reach, 8), bottom, top,
                      label="compiled time, head vs base (left is faster)",
                      tick_label=lambda t: f"{t:+.0%}" if abs(t) >= 0.01 or t == 0
                      else f"{t:+.1%}")
    body.append(svg.line(x(0), top, x(0), bottom, "#1f2328"))
    body += [_forest_row(r, x, top + ROW * i + ROW / 2, reach) for i, r in enumerate(rows)]
    return svg.svg(width, bottom + 34, body, title)


def _by_key(run: RunResults | None) -> dict[tuple[str, str, str], ModelResult]:
    return {} if run is None else {(m.suite, m.model, m.config.slug): m for m in run.results}


def comparison_charts(comparison: Comparison, base: RunResults | None,
                      head: RunResults | None) -> tuple[Markup | None, list[list[Markup]]]:
    """The forest plot, and per row of the comparison its strip plot and phase bars (drawn
    only where the sides' results are given: the comparison alone has no samples)."""
    rows = plotdata.forest(comparison)
    top = forest_svg(rows, "compiled time change per model, with intervals") if rows else None
    b, h = _by_key(base), _by_key(head)
    per_row = []
    for r in comparison.rows:
        key = (r.suite, r.model, r.config)
        charts = []
        if (s := plotdata.compared_strip(r, b.get(key), h.get(key))) is not None:
            charts.append(strip_svg(s, f"timing processes of {r.model}"))
        if bars := plotdata.phases(b.get(key), "base") + plotdata.phases(h.get(key), "head"):
            charts.append(phases_svg(bars, f"compile phases of {r.model}"))
        per_row.append(charts)
    return top, per_row


def run_charts(run: RunResults) -> list[list[Markup]]:
    """Per result of a run: its strip plot and its phase bars, where measured."""
    out = []
    for m in run.results:
        charts = []
        if (s := plotdata.strip(m)) is not None:
            charts.append(strip_svg(s, f"timing processes of {m.model}"))
        if bars := plotdata.phases(m, "run"):
            charts.append(phases_svg(bars, f"compile phases of {m.model}"))
        out.append(charts)
    return out
