"""Untrusted text never escapes the markdown it is put in (property-based, with hypothesis),
checked by rendering the result with a CommonMark parser (markdown-it, raw HTML allowed, as
GitHub allows a safe subset) and by the patterns GitHub links after parsing."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from compilewatch.bot.render.escape import JOINER, clean, md_code, md_escape, plain, shorten

HOSTILE = ["@", "@octocat", "@org/team", "#1", "org/repo#2", "GH-3", "<script>alert(1)</script>",
           "<img src=x onerror=alert(1)>", "](https://e.vil)", "![x](https://e.vil/i.png)",
           "[a]: https://e.vil", "https://e.vil/x", "HTTP://E.VIL", "www.e.vil", "WwW.e.vil",
           "x@y.com", "mailto:x@y.com", "javascript:alert(1)", "|", "\\", "`", "```", "*", "_",
           "~~", "&amp;", "&#64;octocat", "&lt;b&gt;", "<!--", "-->", "\n", "\r\n", "\t",
           "<details>", "</td>", "{{ x }}", "\u202e", JOINER, "\x1b[31m", "\x00", "  ", "-",
           "1.", ">", "<", "<https://e.vil>", "[x][1]", ":+1:", "$$x$$", "\\|"]
hostile = st.lists(st.sampled_from(HOSTILE) | st.text(max_size=8), max_size=12).map("".join)

MD = MarkdownIt("commonmark", {"html": True}).enable("table")
# What GitHub turns into a link or a notification after parsing the markdown.
GITHUB_AUTO = [re.compile(p) for p in (r"@[A-Za-z0-9]", r"#[A-Za-z0-9]", r"://",
                                       r"(?i)www\.", r"(?i)\b(?:mailto|javascript|xmpp):[^\u2060]")]


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)

    def handle_comment(self, data):
        self.tags.append("!--")


def parse(html: str) -> _Tags:
    p = _Tags()
    p.feed(html)
    p.close()
    return p


def _cell(inline: str) -> tuple[_Tags, str]:
    """Tags of the whole table, and the text of the body cell."""
    html = MD.render(f"| h |\n| --- |\n| {inline} |\n")
    body = re.search(r"<td>(.*)</td>", html, re.DOTALL)
    return parse(html), "".join(parse(body.group(1)).text) if body else ""


def _flat(s: str) -> str:
    return clean(s).strip()


@settings(max_examples=150, deadline=None)
@given(hostile)
def test_escaped_text_stays_one_table_cell_of_plain_text(s):
    p, text = _cell(md_escape(s))
    assert p.tags == ["table", "thead", "tr", "th", "tbody", "tr", "td"]
    assert text.replace(JOINER, "").strip() == _flat(s)


@settings(max_examples=150, deadline=None)
@given(hostile)
def test_escaped_text_in_a_paragraph_creates_no_element_and_nothing_github_links(s):
    p = parse(MD.render(f"Reason: {md_escape(s)}\n"))
    assert p.tags == ["p"]
    text = "".join(p.text)
    assert not any(rx.search(text) for rx in GITHUB_AUTO), text


@settings(max_examples=150, deadline=None)
@given(hostile)
def test_code_helper_is_one_code_element_in_a_table_cell(s):
    p, text = _cell(md_code(s))
    assert p.tags == ["table", "thead", "tr", "th", "tbody", "tr", "td", "code"]
    assert text.replace(JOINER, "").strip() == _flat(s)
    assert not any(rx.search(text) for rx in GITHUB_AUTO)


def test_examples():
    assert md_escape("@octocat") == "\\@" + JOINER + "octocat"
    assert md_escape("a|b") == "a\\|b"
    assert md_escape("line\nbreak") == "line break"
    assert md_escape("<b>") == "\\<b\\>" and "](" not in md_escape("[x](y)")
    assert plain("red\x1b[31m") == "red [31m"


def test_shorten():
    assert shorten("a\n  b", 10) == "a b"
    assert shorten("x" * 20, 5) == "xxxx…"
