"""The last guard on posted text: mentions and HTML outside code are defused, code is kept."""

from __future__ import annotations

from compilewatch.bot.render.neutralise import ZWSP, neutralise


def test_mentions_outside_code_are_defused() -> None:
    out = neutralise("ping @org/team and @alice, mail a@b.example")
    assert out == f"ping @{ZWSP}org/team and @{ZWSP}alice, mail a@b.example"


def test_html_outside_the_allowlist_is_escaped() -> None:
    out = neutralise('<details><summary>x</summary><img src=x onerror=1><a href="j">'
                     "</details><script>")
    assert out == ('<details><summary>x</summary>&lt;img src=x onerror=1>&lt;a href="j">'
                   "</details>&lt;script>")


def test_code_is_left_as_written() -> None:
    text = "see `@x <img>` here\n```\n@y <class 'torch.Tensor'>\n```\nafter @z"
    assert neutralise(text) == text.replace("after @z", f"after @{ZWSP}z")


def test_marker_survives_but_other_html_comments_do_not() -> None:
    marker = "<!-- compilewatch -->"
    out = neutralise(f"{marker}\nbody <!-- hide the rest", keep=marker)
    assert out == f"{marker}\nbody &lt;!-- hide the rest"


def test_links_with_angle_bracket_destinations_are_kept() -> None:
    text = "[full report](<https://ci.example/run/1>) and <https://ci.example>"
    assert neutralise(text) == text


def test_backslash_escaped_brackets_are_not_escaped_twice() -> None:
    assert neutralise(r"a \<img src\=x\> b") == r"a \<img src\=x\> b"
    assert neutralise(r"a \\<img>") == r"a \\&lt;img>"
