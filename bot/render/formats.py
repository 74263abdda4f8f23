"""Render a ``Comparison``: PR comment (markdown), report (HTML), JSON and the job summary.

Templates live in ``compilewatch.templates``. The markdown environment escapes every ``{{ }}``
value that is not explicitly ``Markup`` (Jinja2's ``finalize`` hook), so a template that forgets a
filter still cannot inject markdown; the HTML environment uses Jinja2's autoescape.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal
from urllib.parse import quote, urljoin

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from compilewatch.bot.judge.comparison import Comparison, ModelRow
from compilewatch.bot.judge.host import lanes_note, run_note
from compilewatch.bot.judge.timings import shown_per_call
from compilewatch.bot.render import filters, plots, run_table, sharedcache, sitemap
from compilewatch.bot.render.comparison_table import render_table
from compilewatch.bot.render.escape import headline, md_code, md_command, md_escape, shorten
from compilewatch.bot.render.run_table import disagrees
from compilewatch.bot.render.sparkline import sparkline
from compilewatch.core.errors import UsageError
from compilewatch.core.estimates import geomean
from compilewatch.core.schema import RunResults, Status

MARKER = "<!-- compilewatch:pr-comment -->"
COMMENT_LIMIT = 65_536  # GitHub's limit on an issue comment, in characters
SUMMARY_LIMIT = 1024 * 1024  # GitHub's limit on one step's job summary
# Entries of one model's list (its new breaks, recompiles, changed keys) the comment shows,
# then "and K more": one model with 1,024 new breaks must not crowd out every other model
# (the cut for the size limit shortens the lists of models, and this keeps it from emptying
# them). The report has every entry.
ITEMS_PER_MODEL = 20
FEW_ITEMS = 3  # when models would be cut to fit with ITEMS_PER_MODEL
_URL = re.compile(r"^https?://[^\s<>\"'`\\]+$")

TrendUrl = Callable[[str], str] | str | None
# (suite, model, config slug) -> (the metric's name, its last nightly values)
History = Mapping[tuple[str, str, str], tuple[str, Sequence[float]]]
Format = Literal["markdown", "html", "json", "table"]


def length(text: str) -> int:
    """Length in UTF-16 code units, what a browser or GitHub's API may count: an emoji is 2.
    Never less than the number of characters, so a comment within it is within GitHub's limit."""
    return len(text.encode("utf-16-le")) // 2


def _md_finalize(value: Any) -> str:
    if isinstance(value, Markup):
        return str(value)
    if value is None:
        return ""
    return md_escape(str(value))


@cache
def _env(kind: str) -> Environment:
    common: dict[str, Any] = {
        "loader": PackageLoader("compilewatch.templates", "."),
        "undefined": StrictUndefined, "trim_blocks": True, "lstrip_blocks": True,
        "keep_trailing_newline": True,
    }
    if kind == "md":
        env = Environment(autoescape=False, finalize=_md_finalize, **common)
        env.filters.update(code=md_code, short=lambda s, n=300: shorten(s, n),
                           headline=headline, command=md_command)
    else:
        env = Environment(autoescape=True, **common)
        env.filters.update(short=lambda s, n=300: shorten(s, n))
    env.filters.update(filters.FILTERS)
    env.globals.update(filters.GLOBALS)
    return env


def template(kind: Literal["md", "html"], name: str) -> Any:
    """A template of ``compilewatch.templates`` in the environment of its medium: markdown,
    where every value is escaped unless it is ``Markup``, or autoescaped HTML."""
    return _env(kind).get_template(name)


def check_url(url: str, what: str) -> str:
    """A link we put in a comment: http(s) only, nothing that could end the markdown link."""
    if not _URL.match(url):
        raise UsageError(f"{what}: {url!r} is not an http(s) URL without spaces or quotes")
    return url


def _trend_link(trend_url: TrendUrl) -> Callable[..., Markup | None]:
    """A template with ``{suite}`` or ``{config}`` is the dashboard's scheme (bot/render/sitemap.py:
    ``trend_url_template``) and gets its path parts; otherwise ``{model}`` is URL-quoted."""

    def link(model: str, suite: str = "", config: str = "") -> Markup | None:
        if trend_url is None:
            return None
        name = quote(model, safe="")
        if callable(trend_url):
            url = trend_url(name)
        elif "{suite}" in trend_url or "{config}" in trend_url:
            url = sitemap.fill(trend_url, suite=suite, model=model, config=config)
        else:
            url = trend_url.replace("{model}", name)
        return Markup(f"[trend](<{check_url(url, 'trend URL')}>)")

    return link


def _diagnostic_link(report_url: str | None) -> Callable[[str, str], Markup | None]:
    """A diagnostic's link beside the published report (its path is relative to the report's
    folder); None without a report URL, or for a path that is not a plain relative one."""

    def link(what: str, path: str) -> Markup | None:
        parts = path.split("/")
        if report_url is None or path.startswith("/") or ".." in parts or "\\" in path \
                or ":" in path:
            return None
        url = urljoin(report_url, quote(path, safe="/._-"))
        return Markup(f"[{md_escape(what)}](<{check_url(url, 'diagnostics URL')}>)")

    return link


def _spark(history: History | None) -> Callable[[ModelRow], Markup]:
    """The row's sparkline of its last nightly values, with what they are ('' without)."""

    def spark(row: ModelRow) -> Markup:
        name, values = (history or {}).get((row.suite, row.model, row.config), ("", ()))
        bars = sparkline(values)
        if not bars:
            return Markup("")
        return Markup(f"<br>{bars} <sub>{md_escape(name)}, last {len(bars)} nightlies</sub>")

    return spark


@dataclass(frozen=True)
class _Beside:
    """What the comment links and draws beside each flagged model."""

    trend_url: TrendUrl = None
    history: History | None = None


def _render_md(comparison: Comparison, limit: int | None, report_url: str | None,
               beside: _Beside, per_model: int = ITEMS_PER_MODEL) -> str:
    report = Markup(f"[full report](<{report_url}>)") if report_url else None
    return _env("md").get_template("pr_comment.md.j2").render(
        c=comparison, marker=Markup(MARKER), limit=limit, report_link=report,
        trend=_trend_link(beside.trend_url), comment_limit=COMMENT_LIMIT, per_model=per_model,
        spark=_spark(beside.history), diagnostic=_diagnostic_link(report_url),
    )


def render_markdown(comparison: Comparison, *, report_url: str | None = None,
                    trend_url: TrendUrl = None, max_chars: int = COMMENT_LIMIT,
                    history: History | None = None) -> str:
    """The PR comment. Each model's lists show ``ITEMS_PER_MODEL`` entries; over ``max_chars``
    the lists of models are cut (the longest prefix that fits, found by bisection) and a note
    points to the full report. Where models are cut and some model's own lists are long,
    those are shortened to ``FEW_ITEMS`` too if that shows more models, so that a model with
    huge lists never empties the comment of the others. ``history``: (suite, model, config) ->
    (metric, its last nightly values), drawn as a sparkline beside each flagged model."""
    if report_url is not None:
        check_url(report_url, "report URL")
    beside = _Beside(trend_url, history)
    full = _render_md(comparison, None, report_url, beside)
    if length(full) <= max_chars:
        return full
    best, shown = _longest_prefix(comparison, full, max_chars, report_url, beside,
                                  ITEMS_PER_MODEL)
    if shown < filters.row_count(comparison) and filters.longest_list(comparison) > FEW_ITEMS:
        few = _render_md(comparison, None, report_url, beside, FEW_ITEMS)
        if length(few) <= max_chars:
            return few
        fewer, more = _longest_prefix(comparison, few, max_chars, report_url, beside,
                                      FEW_ITEMS)
        if more > shown or best is None:
            best, shown = fewer, more
    if best is None:  # even the headline alone is too long: cut it, keep the marker
        note = "\n\n_(truncated: the full report has everything)_\n"
        # cut in UTF-16 units, as GitHub (and ``length``) count: emoji take two
        room = 2 * max(0, max_chars - length(note))
        head = full.encode("utf-16-le")[:room].decode("utf-16-le", errors="ignore")
        best = head.rsplit("\n", 1)[0] + note
    return best


def _longest_prefix(comparison: Comparison, full: str, max_chars: int, report_url: str | None,
                    beside: _Beside, per_model: int) -> tuple[str | None, int]:
    """The comment with the most entries per list that fits, and that number (-1: none)."""
    rows = filters.row_count(comparison)
    lo, hi, best = _bracket(comparison, rows, length(full), max_chars, report_url, beside,
                            per_model)
    shown = lo - 1 if best is not None else -1
    while lo <= hi:
        mid = (lo + hi) // 2
        text = _render_md(comparison, mid, report_url, beside, per_model)
        if length(text) <= max_chars:
            best, shown, lo = text, mid, mid + 1
        else:
            hi = mid - 1
    return best, shown


def _bracket(comparison: Comparison, rows: int, full: int, max_chars: int,
             report_url: str | None, beside: _Beside,
             per_model: int) -> tuple[int, int, str | None]:
    """Where the longest fitting prefix lies: rows cost about the same each, so the answer is
    near ``rows * room / full``; two renders check a bracket of +-15% around that guess, and
    the bisection runs inside it (four or five renders instead of ten for 500 models).
    Returns (lo, hi, the render at lo - 1 when it fits)."""
    guess = int(rows * max_chars / full)
    lo, hi = int(guess * 0.85), min(rows, int(guess * 1.15) + 1)
    low = _render_md(comparison, lo, report_url, beside, per_model)
    if length(low) > max_chars:
        return 0, lo - 1, None
    if length(_render_md(comparison, hi, report_url, beside, per_model)) <= max_chars:
        return hi, rows, None
    return lo + 1, hi - 1, low


def render_html(comparison: Comparison, base: RunResults | None = None,
                head: RunResults | None = None) -> str:
    """The full report: one self-contained page (inline CSS and JS, no network). With the
    sides' results, each model's timing processes and compile phases are drawn too."""
    forest, charts = plots.comparison_charts(comparison, base, head)
    return _env("html").get_template("report.html.j2").render(c=comparison, forest=forest,
                                                              charts=charts)


def render_run_html(results: RunResults) -> str:
    """One run on its own (no base to compare with): every model's numbers and reasons."""
    models = results.results
    passed = sum(m.status is Status.PASS for m in models)
    summary = {
        "total": len(models),
        "passed": passed,
        "pass_rate": passed / len(models) if models else None,
        "geomean_speedup": geomean([m.speedup.value for m in models if m.speedup]),
        "cold_total": sum(m.compile.cold_s or 0.0 for m in results.results),
        "warm_total": sum(m.compile.warm_s or 0.0 for m in results.results),
        "warm_start_total": sum(starts) if (starts := [
            m.compile.warm_start_s for m in results.results
            if m.compile.warm_start_s is not None]) else None,
        "remote_total": sum(remote) if (remote := [
            m.compile.remote_s for m in results.results
            if m.compile.remote_s is not None]) else None,
        "shared": sharedcache.summary(results),
        "breaks": sum(m.break_count for m in results.results),
        "recompiles": sum(len(m.recompiles) for m in results.results),
    }
    per_call = [shown_per_call(m.latency) if m.latency and m.latency.compiled_us
                else (None, None) for m in models]
    return _env("html").get_template("run.html.j2").render(
        r=results, s=summary, host_note=run_note(results.host),
        lanes_note=lanes_note(results.host, paired=results.settings.side is not None),
        per_call=per_call,
        charts=plots.run_charts(results),
        disagrees=[disagrees(m) for m in models], legend=run_table.LEGEND, mark=run_table.MARK)


def render_json(comparison: Comparison) -> str:
    return comparison.model_dump_json(indent=1) + "\n"


def render(comparison: Comparison, fmt: Format, report_url: str | None = None,
           trends_url: str | None = None,
           sides: tuple[RunResults, RunResults] | None = None,
           history: History | None = None) -> str:
    """The comparison in one of the four formats every command offers (``sides``: base's
    and head's results, which the HTML page draws; ``history``: the flagged models' last
    nightly values, which the comment draws as sparklines)."""
    if fmt == "markdown":
        trend = sitemap.trend_url_template(trends_url) if trends_url else None
        return render_markdown(comparison, report_url=report_url, trend_url=trend,
                               history=history)
    if fmt == "html":
        return render_html(comparison, *(sides or (None, None)))
    if fmt == "json":
        return render_json(comparison)
    return render_table(comparison)
