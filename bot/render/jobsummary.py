"""What a command tells GitHub's job summary (``$GITHUB_STEP_SUMMARY``), the page Actions users
read first: for a comparison the comment itself (headline, flagged rows, links); for the
others a short section of what they did. Builders return markdown; ``append`` writes it."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from compilewatch.bot.judge.comparison import Comparison
from compilewatch.bot.render.escape import md_escape
from compilewatch.bot.render.formats import SUMMARY_LIMIT, render_markdown

ENV = "GITHUB_STEP_SUMMARY"


def target(environ: Mapping[str, str] | None = None) -> Path | None:
    """The summary file of this step, or None outside GitHub Actions."""
    value = (os.environ if environ is None else environ).get(ENV, "").strip()
    return Path(value) if value else None


def append(markdown: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Append ``markdown`` (cut to GitHub's limit on a step's summary) where Actions reads
    it; the reason it could not be written, or None (written, or no summary here). A summary
    that cannot be written never fails the command that measured."""
    where = target(environ)
    if where is None:
        return None
    text = markdown if len(markdown) <= SUMMARY_LIMIT else markdown[:SUMMARY_LIMIT - 40] + \
        "\n\n_(cut at GitHub's summary limit)_\n"
    try:
        with where.open("a", encoding="utf-8") as f:
            f.write(text.rstrip("\n") + "\n\n")
    except OSError as e:
        return f"{ENV} {where}: {e.strerror or e}"
    return None


def of_comparison(comparison: Comparison, report_url: str | None = None) -> str:
    """A comparison's summary: the PR comment, whole (its headline and flagged rows first)."""
    return render_markdown(comparison, report_url=report_url, max_chars=SUMMARY_LIMIT)


def _link(url: str) -> str:
    """A URL (an http(s) option, checked where it was read) that cannot end its link early."""
    return url.replace(" ", "%20").replace("(", "%28").replace(")", "%29").replace("<", "%3C")


def section(title: str, lines: Iterable[str],
            links: Mapping[str, str | None] | None = None) -> str:
    """A short section: a title, one bullet a line (escaped: names come from the repository
    under test), then the links that are known."""
    out = [f"### compilewatch: {md_escape(title)}", ""]
    out += [f"- {md_escape(line)}" for line in lines if line.strip()]
    out += [f"- [{md_escape(name)}]({_link(url)})" for name, url in (links or {}).items()
            if url]
    return "\n".join(out) + "\n"
