"""Inline SVG from Python: scales, ticks and a few marks, escaped, no library and no script.

Every chart of the report, the comparison and the dashboard is drawn with these, server side,
so pages stay static and work offline; hover text is an SVG ``<title>`` (the browser's own
tooltip), links are ``<a href>``. Every string that reaches the SVG goes through ``esc``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

FONT = 'font-family="system-ui,sans-serif"'
COLORS = {"base": "#6e7781", "head": "#0969da", "regression": "#cf222e",
          "improvement": "#1a7f37", "within_noise": "#9a6700", "noisy": "#8c959f",
          "unchanged": "#57606a", "failing": "#8250df", "band": "#ddf4ff",
          "step": "#d62728", "mean": "#ff7f0e", "line": "#1f77b4", "grid": "#eaeef2"}
PHASE_COLORS = ("#0969da", "#bf8700", "#1a7f37", "#8250df", "#cf222e", "#57606a", "#bc4c00",
                "#1b7c83", "#9a6700", "#6639ba")


def esc(text: object) -> str:
    return str(escape(str(text)))


def fmt(v: float) -> str:
    """A compact number for a label: 3 significant digits, integers as integers."""
    if v == 0:
        return "0"
    if float(v).is_integer() and abs(v) < 1e6:
        return f"{v:.0f}"
    return f"{v:.3g}"


@dataclass(frozen=True)
class Scale:
    """Data ``lo..hi`` onto pixels ``a..b``; ``log`` for values spread over decades."""

    lo: float
    hi: float
    a: float
    b: float
    log: bool = False

    def __call__(self, v: float) -> float:
        """``v``'s pixel, to a tenth (what a drawing writes)."""
        return round(self.exact(v), 1)

    def exact(self, v: float) -> float:
        """``v``'s pixel unrounded: a step between points a script multiplies out (a
        rounded step drifts by a point over hundreds of them)."""
        lo, hi, v = ((math.log10(x) for x in (self.lo, self.hi, max(v, 1e-300))) if self.log
                     else (self.lo, self.hi, v))
        span = (hi - lo) or 1.0
        return self.a + (v - lo) / span * (self.b - self.a)


def nice_ticks(lo: float, hi: float, n: int = 5, *, integer: bool = False) -> list[float]:
    """About ``n`` round values covering ``lo..hi`` (whole numbers only when ``integer``)."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    if integer:
        step = max(1.0, round(step))
    first = math.ceil(lo / step - 1e-9) * step
    count = int((hi - first) / step + 1e-9) + 1
    return [round(first + i * step, 12) for i in range(count)]


def log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten (and 2×, 5× when few decades) within ``lo..hi``."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    decades = range(first, last + 1, max(1, (last - first) // 8))  # at most ~9 labels
    mults = (1, 2, 5) if len(decades) <= 3 else (1,)
    return [m * 10.0 ** d for d in decades for m in mults if lo <= m * 10.0 ** d <= hi]


def padded(values: Iterable[float], *, zero: bool = False, pad: float = 0.06,
           integer: bool = False) -> tuple[float, float]:
    """A data range around ``values`` with a margin (from zero when ``zero``)."""
    vs = list(values)
    lo, hi = (min(vs), max(vs)) if vs else (0.0, 1.0)
    if zero:
        lo = min(lo, 0.0)
    if hi - lo < 1e-12:
        margin = 1.0 if integer or lo == 0 else abs(lo) * 0.05
        return lo - margin, hi + margin
    margin = (hi - lo) * pad
    return (lo if zero and lo == 0 else lo - margin), min(hi + margin, sys.float_info.max)


def svg(width: int, height: int, body: Sequence[str], label: str, cls: str = "chart") -> Markup:
    """The ``<svg>`` element with its accessible name; ``body`` is already escaped markup."""
    return Markup(f'<svg class="{cls}" role="img" aria-label="{esc(label)}" width="{width}" '
                  f'height="{height}" viewBox="0 0 {width} {height}" '
                  f'xmlns="http://www.w3.org/2000/svg" {FONT} font-size="11">'
                  + "".join(body) + "</svg>")


def text(x: float, y: float, s: object, *, anchor: str = "start", color: str = "#1f2328",
         size: int = 11, weight: str = "normal") -> str:
    w = f' font-weight="{weight}"' if weight != "normal" else ""
    return (f'<text x="{x}" y="{y}" text-anchor="{anchor}" fill="{color}" '
            f'font-size="{size}"{w}>{esc(s)}</text>')


def line(x1: float, y1: float, x2: float, y2: float, color: str, *, width: float = 1,
         dash: str | None = None) -> str:
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{color}" '
            f'stroke-width="{width}"{d}/>')


def rect(x: float, y: float, w: float, h: float, color: str, *, title: str | None = None,
         opacity: float = 1.0, stroke: str | None = None) -> str:
    op = f' fill-opacity="{opacity}"' if opacity != 1.0 else ""
    st = f' stroke="{stroke}"' if stroke else ""
    tip = f"<title>{esc(title)}</title>" if title else ""
    return (f'<rect x="{x}" y="{y}" width="{max(w, 0.0):.1f}" height="{max(h, 0.0):.1f}" '
            f'fill="{color}"{op}{st}>{tip}</rect>')


def dot(x: float, y: float, r: float, color: str, *, title: str | None = None,
        href: str | None = None, opacity: float = 1.0) -> str:
    op = f' fill-opacity="{opacity}"' if opacity != 1.0 else ""
    tip = f"<title>{esc(title)}</title>" if title else ""
    mark = f'<circle class="pt" cx="{x}" cy="{y}" r="{r}" fill="{color}"{op}>{tip}</circle>'
    return f'<a href="{esc(href)}">{mark}</a>' if href else mark


def x_axis(scale: Scale, ticks: Sequence[float], y: float, top: float, *,
           label: str = "", tick_label: Callable[[float], str] = fmt) -> list[str]:
    """Grid lines from ``top`` down to ``y`` and tick labels under ``y``."""
    out = []
    for t in ticks:
        x = scale(t)
        out += [line(x, top, x, y, COLORS["grid"]),
                text(x, y + 13, tick_label(t), anchor="middle", color="#57606a", size=10)]
    if label:
        out.append(text((scale.a + scale.b) / 2, y + 27, label, anchor="middle",
                        color="#57606a", size=10))
    return out


def y_axis(scale: Scale, ticks: Sequence[float], x: float, right: float,
           unit: str = "") -> list[str]:
    """Grid lines from ``x`` to ``right`` and tick labels left of ``x``."""
    out = []
    for t in ticks:
        y = scale(t)
        out += [line(x, y, right, y, COLORS["grid"]),
                text(x - 4, y + 3.5, fmt(t) + unit, anchor="end", color="#57606a", size=10)]
    return out
