"""``compilewatch trends``: load the stored history and write the static dashboard.

An empty dashboard is refused (``NothingMeasured``) unless asked for: after the quickstart, the
default filters (nightlies of main) match none of the stored runs (trigger ``local``, the
checkout's branch), and a blank page with exit status 0 hides that. The message says which
filter excluded the stored runs and what would match.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from compilewatch.bot.checkout.git import repository_filter
from compilewatch.bot.history.dashboard import PAGE_BUDGET, write_site
from compilewatch.bot.history.series import load_trends
from compilewatch.bot.render.formats import check_url
from compilewatch.bot.render.sitemap import Links
from compilewatch.core.errors import NothingMeasured
from compilewatch.db import RunInfo, connect, list_runs


@dataclass(frozen=True)
class TrendsReport:
    """What the command wrote, and a warning when no stored run matched the filters."""

    index: Path
    summary: str
    warning: str | None = None


@dataclass(frozen=True)
class Filters:
    """The run filters of ``trends``; None lifts a filter."""

    ref: str | None = "main"
    trigger: str | None = "nightly"
    suite: str | None = None
    repository: str | None = None
    since: datetime | None = None

    def describe(self) -> str:
        parts = [f"ref {self.ref or '*'}", f"trigger {self.trigger or '*'}"]
        parts += [f"suite {self.suite}"] if self.suite else []
        parts += [f"repository {self.repository}"] if self.repository else []
        parts += [f"since {self.since:%Y-%m-%d}"] if self.since else []
        return ", ".join(parts)

    def checks(self) -> dict[str, Callable[[RunInfo], bool]]:
        """Option name -> does a run pass that filter (only the filters that are set)."""
        out: dict[str, Callable[[RunInfo], bool]] = {}
        if self.trigger is not None:
            out[f"--trigger {self.trigger}"] = lambda r: r.trigger == self.trigger
        if self.ref is not None:
            out[f"--ref {self.ref}"] = lambda r: r.ref == self.ref
        if self.suite is not None:
            out[f"--suite {self.suite}"] = lambda r: self.suite in r.suites
        if self.repository is not None:
            out[f"--repo {self.repository}"] = lambda r: r.repository == self.repository
        if self.since is not None:
            out[f"--since {self.since:%Y-%m-%d}"] = lambda r: r.started_at >= self.since
        return out


def _stored(runs: list[RunInfo], option: str) -> str:
    """What the stored runs hold for the field an option filters on, most common first."""
    values: Counter[str] = Counter()
    for r in runs:
        if option.startswith("--trigger"):
            values[r.trigger] += 1
        elif option.startswith("--ref"):
            values[r.ref or "no ref"] += 1
        elif option.startswith("--suite"):
            values.update(r.suites)
        elif option.startswith("--repo"):
            values[r.repository or "none recorded"] += 1
        else:
            return f"newest {max(r.started_at for r in runs):%Y-%m-%d}"
    noun = {"--trigger": "triggers", "--ref": "refs", "--suite": "suites", "--repo":
            "repositories"}[option.split()[0]]
    return f"{noun} stored: " + ", ".join(f"{v} ×{n}" for v, n in values.most_common(5))


def explain_empty(runs: list[RunInfo], filters: Filters, db_url: str) -> str:
    """Why no run matched: each filter that excludes the stored runs, with what they hold, and
    the trigger and ref of the newest run that the other filters keep."""
    head = f"no run matched ({filters.describe()})"
    if not runs:
        return (f"{head}: the database at {db_url} holds no runs yet (`compilewatch run`, "
                "`nightly` and `pr --db` store them)")
    checks = filters.checks()
    excluding = [opt for opt, ok in checks.items() if not any(ok(r) for r in runs)]
    if not excluding:  # each filter matches some run, but no run matches them all together
        excluding = list(checks)
    reasons = "; ".join(f"{opt} excludes them ({_stored(runs, opt)})" for opt in excluding)
    text = f"{head}: the database at {db_url} holds {len(runs)} runs; {reasons}"
    keep = [r for r in runs if all(ok(r) for opt, ok in checks.items()
                                   if not opt.startswith(("--trigger", "--ref")))]
    if keep:
        newest = keep[0]  # list_runs: newest first
        ref = newest.ref if newest.ref is not None else "'*'"
        text += f"; try --trigger {newest.trigger} --ref {ref}"
    return text


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class TrendsRequest:
    """Which stored runs to draw (None: any ref, any trigger) and where the dashboard goes."""

    out: Path
    db_url: str | None = None
    suite: str | None = None
    ref: str | None = "main"
    trigger: str | None = "nightly"
    since: datetime | None = None
    repo: str | None = None  # OWNER/NAME, or "." for this checkout's
    allow_empty: bool = False
    # where a run's report is, ``{run_id}`` in it replaced: the charts' points link to it
    report_url: str | None = None


def trends_command(req: TrendsRequest) -> TrendsReport:
    """Load the history from the database and write the dashboard into ``req.out``.

    No matching run raises ``NothingMeasured`` saying why (nothing is written), unless
    ``allow_empty``: then the empty dashboard is written and the reason is the warning.
    """
    if req.report_url is not None:  # a chart's points link there: http(s) only
        check_url(req.report_url, "--report-url")
    filters = Filters(ref=req.ref, trigger=req.trigger, suite=req.suite, since=req.since,
                      repository=repository_filter(req.repo))
    with connect(req.db_url, must_exist=True) as db:
        trends = load_trends(db, suite=req.suite, ref=req.ref, trigger=req.trigger,
                             since=req.since, repository=filters.repository)
        why = None if trends.suites else explain_empty(list_runs(db, limit=None), filters,
                                                       db.url)
    if why is not None and not req.allow_empty:
        raise NothingMeasured(f"{why}; nothing written (pass --allow-empty to write an empty "
                              "dashboard anyway)")
    repository = trends.repositories[0] if len(trends.repositories) == 1 else None
    site = write_site(trends, req.out, Links.for_repository(repository, req.report_url))
    index = site.index
    n_models = sum(len(s.models) for s in trends.suites)
    n_steps = sum(len(m.steps) for s in trends.suites for m in s.models)
    summary = (f"compilewatch: wrote {index} ({_count(len(trends.suites), 'suite')}, "
               f"{_count(n_models, 'model config')}, {_count(n_steps, 'model step')}; "
               f"{_count(site.pages, 'page')}, the largest {site.largest_page / 1024:.0f} KiB)")
    warning = f"compilewatch: {why}" if why else None
    if site.largest_page > PAGE_BUDGET:
        warning = (f"compilewatch: the largest page is {site.largest_page / 1024:.0f} KiB, over "
                   f"the {PAGE_BUDGET / 1000:.0f} KB budget (docs/trends.md); --since shortens "
                   "the history drawn")
    if filters.repository is None and len(trends.repositories) > 1:
        names = ", ".join(r or "(none recorded)" for r in trends.repositories)
        warning = (f"compilewatch: runs of {len(trends.repositories)} repositories are drawn "
                   f"together ({names}); pass --repo OWNER/NAME (or --repo . for this "
                   "checkout's) to draw one")
    return TrendsReport(index, summary, warning)
