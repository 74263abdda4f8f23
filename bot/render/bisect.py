"""Render a bisection's report: markdown (the comment ``post`` puts on a PR or an issue), a
self-contained HTML page, JSON for machines, plain text for the terminal. Every renderer reads
the one ``BisectReport``; the templates escape every string from it as the comparison's do."""

from __future__ import annotations

import hashlib
from typing import Literal

from markupsafe import Markup

from compilewatch.bot.judge.bisection import BisectReport, Candidate
from compilewatch.bot.render.escape import plain
from compilewatch.bot.render.formats import template

MARKER = "<!-- compilewatch:bisect:{} -->"
BisectFormat = Literal["markdown", "html", "json", "text"]
CALLS = {"good": "🟢 good", "bad": "🔴 bad", "skip": "⏭️ skipped", "unsettled": "🌫️ unsettled"}


def marker(report: BisectReport) -> str:
    """The hidden marker of this bisection's comment: one comment per bisection (metric,
    models, ends) on a thread, edited in place when it runs again."""
    ident = "\0".join([report.mode, report.metric, *report.models, report.good, report.bad])
    return MARKER.format(hashlib.sha256(ident.encode()).hexdigest()[:16])


def headline(report: BisectReport) -> str:
    """One line of what the bisection found, in our own words (names and subjects are the
    renderers' to escape, so they are left out here)."""
    what = "build" if report.mode == "builds" else "commit"
    first = report.candidate(report.first_bad)
    if report.outcome == "found" and first is not None:
        return f"first bad {what}: {first.label}"
    if report.outcome in ("range", "out_of_steps"):
        return f"the first bad {what} is one of {len(report.suspects)}"
    return "the regression does not reproduce between the ends: nothing bisected"


def _context(report: BisectReport) -> dict[str, object]:
    def cand(index: int | None) -> Candidate | None:
        return report.candidate(index)

    return {"r": report, "cand": cand, "calls": CALLS, "headline": headline(report),
            "what": "build" if report.mode == "builds" else "commit",
            "steps_total": len(report.steps), "measured": report.measured}


def render_markdown(report: BisectReport) -> str:
    return template("md", "bisect.md.j2").render(marker=Markup(marker(report)),
                                                 **_context(report))


def render_html(report: BisectReport) -> str:
    return template("html", "bisect.html.j2").render(**_context(report))


def render_json(report: BisectReport) -> str:
    return report.model_dump_json(indent=1) + "\n"


def render_text(report: BisectReport) -> str:
    """For the terminal: a line a step, then the finding."""
    lines = []
    for s in report.steps:
        c = report.candidate(s.candidate)
        where = c.label if c else "?"
        extra = f", {s.processes} processes a side" if s.processes else ""
        flags = f" with {len(s.flags)} flag(s) set" if s.flags else ""
        lines.append(f"step {s.number} ({s.kind}{extra}): {where}{flags}: {s.call.value}")
        for m in s.readings:
            why = f" ({m.why})" if m.why else ""
            lines.append(f"    {m.model}: {m.value}{why}")
        if s.note:
            lines.append(f"    {s.note}")
    lines.append(headline(report))
    first = report.candidate(report.first_bad)
    if first is not None and first.subject and report.outcome == "found":
        lines.append(f"    {first.commit} {first.subject}")
    if report.outcome in ("range", "out_of_steps"):
        lines += [f"    {c.label} {c.subject or ''}".rstrip()
                  for i in report.suspects if (c := report.candidate(i)) is not None]
    if report.compiler is not None:
        f = report.compiler
        lines.append(f"compiler bisector ({f.model}): backend {f.backend or '—'}, subsystem "
                     f"{f.subsystem or '—'}, application {f.bisect_number}"
                     f"{', ' + f.debug_info if f.debug_info else ''}"
                     f"{' (' + f.note + ')' if f.note else ''}")
    if report.flags is not None:
        lines.append(f"inductor config flags: {report.flags.culprit or 'none named'}"
                     f"{' (' + report.flags.note + ')' if report.flags.note else ''}")
    lines += [f"note: {n}" for n in report.notes]
    lines.append(f"{len(report.steps)} measuring steps, {report.measured} "
                 f"{'builds' if report.mode == 'builds' else 'commits'} measured of "
                 f"{len(report.candidates)}")
    return "".join(plain(line) + "\n" for line in lines)


def render(report: BisectReport, fmt: BisectFormat) -> str:
    return {"markdown": render_markdown, "html": render_html, "json": render_json,
            "text": render_text}[fmt](report)
