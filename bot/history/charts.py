"""Draw trend series with matplotlib, headless: one figure of small panels, PNG and SVG.

Each panel is one metric over the nights; a detected step is a dashed vertical line at its night,
annotated with the commit, and each segment between steps carries its mean as a flat line.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from compilewatch.bot.history.series import Series

if TYPE_CHECKING:
    from matplotlib.axes import Axes

STEP_COLOR, LINE_COLOR, MEAN_COLOR = "#d62728", "#1f77b4", "#ff7f0e"


def _pyplot():  # type: ignore[no-untyped-def]
    """pyplot on the Agg backend, chosen here and not at import: no display, no side effects."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _segment_means(ax: Axes, s: Series) -> None:
    bounds = [0, *(st.night for st in s.steps), len(s.values)]
    for a, b in itertools.pairwise(bounds):
        seg = s.values[a:b]
        mean = sum(seg) / len(seg)
        ax.hlines(mean, s.times[a], s.times[b - 1], colors=MEAN_COLOR, linewidth=2, alpha=0.8)


def draw_panel(ax: Axes, s: Series) -> None:
    ax.set_title(s.label + (f" ({s.unit})" if s.unit else ""), fontsize=9, loc="left")
    ax.tick_params(labelsize=7)
    ax.grid(True, alpha=0.3)
    if not s.values:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
        return
    ax.plot(s.times, s.values, marker="o", markersize=3, color=LINE_COLOR, linewidth=1)
    _segment_means(ax, s)
    for st in s.steps:
        ax.axvline(st.time, color=STEP_COLOR, linestyle="--", linewidth=1.2)
        ax.annotate(f"step {(st.commit or '?')[:8]}", xy=(st.time, 1.0),
                    xycoords=("data", "axes fraction"), xytext=(3, -10),
                    textcoords="offset points", fontsize=7, color=STEP_COLOR)


def draw(series: Sequence[Series], stem: Path, title: str, cols: int = 3) -> list[Path]:
    """Write ``stem``.png and ``stem``.svg with one panel per series; return both paths."""
    plt = _pyplot()
    rows = -(-len(series) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 2.8 * rows), squeeze=False,
                             layout="constrained")
    for ax, s in zip(axes.flat, series, strict=False):
        draw_panel(ax, s)
    for ax in list(axes.flat)[len(series):]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=11)
    fig.autofmt_xdate()
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    try:
        fig.savefig(paths[0], dpi=80)
        fig.savefig(paths[1])
    finally:
        plt.close(fig)
    return paths
