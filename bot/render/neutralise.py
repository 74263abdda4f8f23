"""Last guard before text reaches GitHub: no @-mention pings, no HTML beyond a small allowlist.

The renderer already escapes every string from a results file; this pass makes a slip there
harmless instead of a ping to ``@org/team`` or a raw ``<img>`` in a comment. Code (fenced blocks
and inline spans) is left alone: GitHub shows it literally and never pings from it.
"""

from __future__ import annotations

import re

ALLOWED_TAGS = frozenset({
    "b", "br", "code", "del", "details", "div", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
    "i", "kbd", "li", "ol", "p", "pre", "s", "span", "strong", "sub", "summary", "sup", "table",
    "tbody", "td", "th", "thead", "tr", "ul",
})
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
# A tag or an HTML comment; not an autolink or link destination such as <https://...>.
# ``\<`` (an odd number of backslashes) is already a literal "<" in CommonMark.
_TAG = re.compile(r"(\\*)<(?:!--|/?([A-Za-z][A-Za-z0-9-]*)(?![A-Za-z0-9+.-]*:))")
_MENTION = re.compile(r"(?<![\w`/.+-])@(?=[A-Za-z0-9])")
ZWSP = "\u200b"


def _text(part: str) -> str:
    def tag(m: re.Match[str]) -> str:
        slashes, name = m.group(1), (m.group(2) or "").lower()
        if len(slashes) % 2 or name in ALLOWED_TAGS:
            return m.group(0)
        return slashes + "&lt;" + m.group(0)[len(slashes) + 1:]

    return _MENTION.sub("@" + ZWSP, _TAG.sub(tag, part))


def _line(line: str) -> str:
    out, pos = [], 0
    for m in _CODE_SPAN.finditer(line):
        out += [_text(line[pos:m.start()]), m.group(0)]
        pos = m.end()
    return "".join(out) + _text(line[pos:])


def neutralise(markdown: str, keep: str = "") -> str:
    """Defuse mentions and unexpected HTML outside code; ``keep`` (the marker) passes as is."""
    if keep and keep in markdown:
        return keep.join(neutralise(part) for part in markdown.split(keep))
    lines, fence = [], ""
    for line in markdown.split("\n"):
        m = _FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = ""
            lines.append(line)
        elif m:
            fence = m.group(1)
            lines.append(line)
        else:
            lines.append(_line(line))
    return "\n".join(lines)
