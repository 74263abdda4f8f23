"""Write the static trend dashboard: an index, a page per model (and its data beside it), a
regressions page, and trends.json (the suites' series and where each model's data is).

The site is self-contained (CSS, charts as inline SVG and a small script inlined, nothing
fetched) so it can be opened from disk or served by GitHub Pages. Paths follow
bot/render/sitemap.py. Each page carries the list of its runs (commit, date, PR, links) once,
as JSON; a point's ``data-i`` indexes it, and the script shows that run's links on click.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from compilewatch.bot.history import charts
from compilewatch.bot.history.regressions import all_steps
from compilewatch.bot.history.series import ModelTrend, Series, Trends
from compilewatch.bot.render import sitemap
from compilewatch.bot.render.sitemap import Links
from compilewatch.core.files import write_atomic

PAGE_BUDGET = 200 * 1000  # bytes per page: a year of nightlies of one model fits (docs/trends.md)


@cache
def _env() -> Environment:
    env = Environment(loader=PackageLoader("compilewatch.templates", "."), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=_num, pct=lambda v: "—" if v is None else f"{v:+.1%}",
                       day=lambda t: t.strftime("%Y-%m-%d"), short=lambda c: (c or "?")[:10],
                       passing=lambda v: "—" if v is None else ("yes" if v >= 1 else "no"))
    env.globals.update(model_page=sitemap.model_page)
    return env


def _num(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.0f}" if float(v).is_integer() and abs(v) >= 1 else f"{v:.3g}"


def _rel(target: str, page: str) -> str:
    """``target`` relative to the directory of ``page`` (both relative to the site root)."""
    return os.path.relpath(target, os.path.dirname(page) or ".").replace(os.sep, "/")


def run_list(series: tuple[Series, ...], links: Links) -> tuple[list[dict[str, Any]],
                                                               dict[str, int]]:
    """Every run drawn in ``series`` once, in order, with its links; and run id -> index."""
    runs: dict[str, dict[str, Any]] = {}
    for s in series:
        for t, commit, info in zip(s.times, s.commits, s.infos, strict=True):
            if info.run_id is None or info.run_id in runs:
                continue
            runs[info.run_id] = {
                "commit": commit, "date": t.strftime("%Y-%m-%d %H:%M"),
                "pr": info.pr,
                "report": _fill(links.report, "{run_id}", info.run_id),
                "commit_url": _fill(links.commit, "{commit}", commit),
                "pr_url": _fill(links.pr, "{pr}", info.pr)}
    order = sorted(runs, key=lambda r: runs[r]["date"])
    return [runs[r] for r in order], {r: i for i, r in enumerate(order)}


def _fill(template: str | None, key: str, value: object) -> str | None:
    return None if template is None or value is None else template.replace(key, str(value))


def _json_script(data: object) -> Markup:
    """JSON safe inside a ``<script type="application/json">``: no ``<`` can close it."""
    text = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    return Markup(text.replace(">", "\\u003e").replace("&", "\\u0026"))


def _charts(series: tuple[Series, ...], links: Links) -> tuple[list[Markup], Markup]:
    runs, index = run_list(series, links)
    return charts.panels(series, index), _json_script(runs)


def _model_page(out: Path, m: ModelTrend, generated: str, links: Links) -> int:
    page = sitemap.model_page(m.suite, m.model, m.config)
    panels, runs = _charts(m.series, links)
    html = _env().get_template("model.html.j2").render(
        m=m, panels=panels, runs=runs, index=_rel("index.html", page),
        regressions=_rel("regressions.html", page), generated=generated)
    # pages are rewritten whole every run: no fsync each (a year's 100 pages spent a second)
    write_atomic(out / page, html, durable=False)
    write_atomic(out / sitemap.model_data(m.suite, m.model, m.config),
                 json.dumps(model_data(m), separators=(",", ":")), durable=False)
    return len(html.encode())


def render_index(trends: Trends, generated: str, links: Links | None = None) -> str:
    """The dashboard's index page (``generated``: the time shown as the page's date)."""
    suites = [(s, *_charts(s.series, links or Links())) for s in trends.suites]
    return _env().get_template("dashboard.html.j2").render(t=trends, suites=suites,
                                                           generated=generated)


def render_regressions(trends: Trends, generated: str, links: Links | None = None) -> str:
    """Every step found, newest first, with filters by suite, model, metric and size."""
    return _env().get_template("regressions.html.j2").render(
        t=trends, steps=all_steps(trends, links or Links()), generated=generated)


@dataclass(frozen=True)
class SiteReport:
    index: Path
    pages: int
    largest_page: int  # bytes


def write_site(trends: Trends, out: Path, links: Links | None = None) -> SiteReport:
    """Write every page; return the index and the pages' count and largest size."""
    if links is None:
        links = Links.for_repository(trends.repositories[0] if len(trends.repositories) == 1
                                     else None)
    out.mkdir(parents=True, exist_ok=True)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    sizes = [_model_page(out, m, generated, links) for s in trends.suites for m in s.models]
    write_atomic(out / "trends.json", json.dumps(to_data(trends), separators=(",", ":")))
    for name, html in (("regressions.html", render_regressions(trends, generated, links)),
                       ("index.html", render_index(trends, generated, links))):
        write_atomic(out / name, html)
        sizes.append(len(html.encode()))
    return SiteReport(out / "index.html", len(sizes), max(sizes))


def _run_key(s: Series, i: int) -> str:
    """The run of a series' value ``i``; a value of no known run is a run of its own."""
    return s.infos[i].run_id or f"#{s.metric}-{i}"


def _columns(series: tuple[Series, ...]) -> tuple[dict[str, list[Any]], dict[str, int]]:
    """The runs every series of a page draws, once, column by column: a year of a model is
    365 runs, not 365 per metric."""
    runs: dict[str, tuple[datetime, str | None, int | None]] = {}
    for s in series:
        for i, (t, commit, info) in enumerate(zip(s.times, s.commits, s.infos, strict=True)):
            runs.setdefault(_run_key(s, i), (t, commit, info.pr))
    order = sorted(runs, key=lambda r: runs[r][0])
    cols = {"runs": [None if r.startswith("#") else r for r in order],
            "times": [runs[r][0].isoformat() for r in order],
            "commits": [runs[r][1] for r in order], "prs": [runs[r][2] for r in order]}
    return cols, {r: i for i, r in enumerate(order)}


def _series_data(s: Series, index: dict[str, int]) -> dict[str, Any]:
    """One series: for each value the index of its run in the page's columns."""
    at = [index[_run_key(s, i)] for i in range(len(s.values))]
    out: dict[str, Any] = {"metric": s.metric, "label": s.label, "unit": s.unit,
                           "at": at, "values": list(s.values),
                           "steps": [{**asdict(st), "time": st.time.isoformat()}
                                     for st in s.steps]}
    if any(p.interval for p in s.infos):
        out["intervals"] = [list(p.interval) if p.interval else None for p in s.infos]
    return out


def _page_data(series: tuple[Series, ...]) -> dict[str, Any]:
    cols, index = _columns(series)
    return {**cols, "series": [_series_data(x, index) for x in series]}


def model_data(m: ModelTrend) -> dict[str, Any]:
    """One model's page as data: its runs' columns and each series' values and steps."""
    return {"suite": m.suite, "model": m.model, "config": m.config, **_page_data(m.series)}


def to_data(trends: Trends) -> dict[str, Any]:
    """The dashboard as data: each suite's series with their steps, and for each model where
    its page and its data are (``models/.../<config>.json``, written beside its page)."""
    return {"ref": trends.ref, "trigger": trends.trigger,
            "repositories": list(trends.repositories),
            "suites": [{"suite": s.suite, "runs": s.runs, "dates": s.dates,
                        **_page_data(s.series),
                        "models": [{"suite": m.suite, "model": m.model, "config": m.config,
                                    "page": sitemap.model_page(m.suite, m.model, m.config),
                                    "data": sitemap.model_data(m.suite, m.model, m.config),
                                    "steps": len(m.steps)}
                                   for m in s.models]}
                       for s in trends.suites]}
