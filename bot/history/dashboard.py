"""Write the static trend dashboard: charts, an index, a page per model, and trends.json.

The site is self-contained (CSS inlined, charts as files beside the pages, no scripts, nothing
fetched) so it can be opened from disk or served by GitHub Pages. Paths follow
bot/render/sitemap.py.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from compilewatch.bot.history import charts
from compilewatch.bot.history.series import ModelTrend, Trends
from compilewatch.bot.render import sitemap
from compilewatch.core.files import write_atomic


@cache
def _env() -> Environment:
    env = Environment(loader=PackageLoader("compilewatch.templates", "."), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=_num, pct=lambda v: "—" if v is None else f"{v:+.1%}",
                       day=lambda t: t.strftime("%Y-%m-%d"), short=lambda c: (c or "?")[:10],
                       passing=lambda v: "—" if v is None else ("yes" if v >= 1 else "no"))
    env.globals.update(model_page=sitemap.model_page, suite_chart=sitemap.suite_chart)
    return env


def _num(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.0f}" if float(v).is_integer() and abs(v) >= 1 else f"{v:.3g}"


def _rel(target: str, page: str) -> str:
    """``target`` relative to the directory of ``page`` (both relative to the site root)."""
    return os.path.relpath(target, os.path.dirname(page) or ".").replace(os.sep, "/")


def _model_page(out: Path, m: ModelTrend, generated: str) -> None:
    page = sitemap.model_page(m.suite, m.model, m.config)
    stem = page.removesuffix(".html")
    charts.draw(m.series, out / stem, f"{m.model} · {m.suite} · {m.config}")
    chart = Path(stem).name
    html = _env().get_template("model.html.j2").render(
        m=m, png=chart + ".png", svg=chart + ".svg", index=_rel("index.html", page),
        generated=generated)
    write_atomic(out / page, html)


def render_index(trends: Trends, generated: str) -> str:
    """The dashboard's index page (``generated``: the time shown as the page's date)."""
    return _env().get_template("dashboard.html.j2").render(t=trends, generated=generated)


def write_site(trends: Trends, out: Path) -> Path:
    """Draw every chart, write every page; return the index."""
    out.mkdir(parents=True, exist_ok=True)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    for s in trends.suites:
        charts.draw(s.series, out / sitemap.suite_chart(s.suite), f"suite {s.suite}")
        for m in s.models:
            _model_page(out, m, generated)
    write_atomic(out / "trends.json", json.dumps(to_data(trends), indent=1, default=str))
    index = out / "index.html"
    write_atomic(index, render_index(trends, generated))
    return index


def to_data(trends: Trends) -> dict[str, Any]:
    """The dashboard as data: every series with its points and steps (times as ISO strings)."""
    return {"ref": trends.ref, "trigger": trends.trigger,
            "repositories": list(trends.repositories),
            "suites": [asdict(s) for s in trends.suites]}
