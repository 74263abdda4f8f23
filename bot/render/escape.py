"""Escaping of untrusted text (model names, errors, break reasons, keys) for GitHub markdown and
the terminal. HTML uses Jinja2's autoescape instead.

Markdown: every ASCII punctuation character is backslash-escaped (CommonMark allows exactly that,
and it disarms emphasis, links, images, tables, HTML and entities at once). GitHub also turns
plain text into pings and links *after* parsing, so backslashes cannot stop those: a word joiner
(U+2060, invisible) goes after ``@`` (mentions, e-mail), ``#`` (issue references that notify the
other repository) and ``:`` (``https://`` autolinks), and inside ``www.``. Control and format
characters (bidi overrides, zero-width joiners, newlines) become spaces.
"""

from __future__ import annotations

import re
import string
import unicodedata

from markupsafe import Markup

JOINER = "\u2060"
_PUNCT = frozenset(string.punctuation)
_BREAK_AFTER = frozenset("@#:")
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Zl", "Zp"})
_WWW = re.compile(r"(?i)(www)\.")


def clean(text: str) -> str:
    """Control, format and private characters, and line breaks, replaced by spaces."""
    return "".join(" " if unicodedata.category(ch) in _UNSAFE_CATEGORIES else ch for ch in text)


def shorten(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters (an ellipsis marks a cut)."""
    flat = " ".join(clean(text).split())
    return flat if len(flat) <= limit else flat[: max(limit - 1, 0)].rstrip() + "…"


def headline(text: str, limit: int) -> str:
    """The first line, shortened: torch's break and guard messages run to a dozen lines of
    hints, and the first says what happened. Full text stays in the details and the report."""
    first = text.strip().split("\n", 1)[0]
    return shorten(first or text, limit)


def md_escape(text: str) -> str:
    """Untrusted text as inert inline markdown, safe in a paragraph, list item or table cell."""
    out: list[str] = []
    for ch in _WWW.sub(lambda m: m.group(1) + JOINER + ".", clean(text)):
        if ch in _PUNCT:
            out.append("\\" + ch)
        else:
            out.append(ch)
        if ch in _BREAK_AFTER:
            out.append(JOINER)
    return "".join(out)


def md_code(text: str) -> Markup:
    """Untrusted text shown as code. A raw code span would keep ``|`` splitting table cells and
    GitHub would still autolink URLs inside it, so the escaped text goes inside ``<code>``."""
    return Markup(f"<code>{md_escape(text)}</code>")


_SHELL_SAFE = re.compile(r"[A-Za-z0-9_.,:=%+/~^\[\]' -]{1,4000}")


def md_command(text: str) -> Markup:
    """A command line to copy and run: a fenced code block, where nothing is escaped (a
    backslash or a word joiner would be copied with it) and GitHub neither links nor pings.
    Only a line of the characters a quoted command of ours holds is fenced; any other is
    shown escaped, as code."""
    if _SHELL_SAFE.fullmatch(text):
        return Markup(f"\n```\n{text}\n```\n")
    return md_code(text)


def plain(text: str) -> str:
    """For the terminal: no control characters (escape sequences) from a run reach it."""
    return clean(text)
