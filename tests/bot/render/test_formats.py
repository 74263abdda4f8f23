"""Rendering: golden files of realistic comparisons, the 65,536-character limit, the marker,
and hostile strings in the HTML report and the comment (property-based).

Regenerate the golden files after an intended change with
``COMPILEWATCH_UPDATE_GOLDEN=1 python -m pytest tests/bot/render/test_formats.py`` and review
the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compilewatch.bot.judge.comparison import Comparison
from compilewatch.bot.judge.verdicts import compare
from compilewatch.bot.render.comparison_table import render_table
from compilewatch.bot.render.formats import (
    COMMENT_LIMIT,
    MARKER,
    length,
    render_html,
    render_json,
    render_markdown,
)
from compilewatch.core.errors import UsageError
from compilewatch.core.schema import Category, Config
from tests.bot.render.test_escape import GITHUB_AUTO, HOSTILE, MD, parse
from tests.factories import BASE_COMPONENTS, GPU, model_result, run_results

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("COMPILEWATCH_UPDATE_GOLDEN") == "1"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} missing: run with COMPILEWATCH_UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), f"{name} changed; see module docstring"


def _runs(base: list, head: list) -> Comparison:
    return compare(
        run_results(base, commit="1a2b3c4d5e6f7a8b9c0d", ref="main", run_id="base-run-0001"),
        run_results(head, commit="9f8e7d6c5b4a39281706", ref="pr-42", pr=42,
                    run_id="head-run-0001", created_at="2026-11-29T09:00:00+00:00"))


def _steady(name: str, side: int, **kw) -> object:
    """Three timing and three cold processes a side, with a GPU runner's noise."""
    noise = {"processes": 3, "process_spread": 0.007, "spread": 0.01, "cold_processes": 3,
             "cold_spread": 0.03, "config": GPU}
    return model_result(name, seed=side, **{**noise, **kw})


SCENARIOS = {
    "regression": lambda: _runs([_steady("resnet18", 1)],
                                [_steady("resnet18", 2, compiled_us=53.0)]),
    "improvement": lambda: _runs([_steady("bert", 1)], [_steady("bert", 2, compiled_us=45.0)]),
    "new_graph_break": lambda: _runs(
        [_steady("gpt2", 1, graph_breaks=["builtin print"])],
        [_steady("gpt2", 2, graph_breaks=["builtin print",
                                          "Tensor.item() call with capture_scalar_outputs=False"],
                 graphs=[BASE_COMPONENTS, {**BASE_COMPONENTS, "gm": "gm2"}])]),
    "new_recompile": lambda: _runs(
        [_steady("t5", 1)],
        [_steady("t5", 2, recompiles=["tensor 'L['x']' size mismatch at index 0. "
                                      "expected 8, actual 16"])]),
    "cache_key_change": lambda: _runs(
        [_steady("vit", 1)],
        [_steady("vit", 2, components={**BASE_COMPONENTS, "example_inputs[0]": "exin0changed",
                                       "torch_version": "torchvchanged"})]),
    "failing_model": lambda: _runs(
        [_steady("dlrm", 1), _steady("mobilenet", 1)],
        [_steady("dlrm", 2, category=Category.COMPILE_ERROR,
                 error="torch._dynamo.exc.Unsupported: call_function UserDefinedObjectVariable"
                       "\n  File \"model.py\", line 12"),
         _steady("mobilenet", 2, accuracy_passed=False)]),
    "added_removed": lambda: _runs([_steady("lenet", 1), _steady("alexnet", 1)],
                                   [_steady("lenet", 2), _steady("convnext", 2)]),
}


def _mixed() -> Comparison:
    # One suite with every kind of change, as a PR comment on a real suite looks.
    base = [_steady("resnet18", 1), _steady("bert", 1), _steady("gpt2", 1), _steady("t5", 1),
            _steady("vit", 1), _steady("dlrm", 1), _steady("alexnet", 1),
            _steady("lenet", 1, cold_s=12.0)]
    head = [_steady("resnet18", 2, compiled_us=53.0), _steady("bert", 2, compiled_us=45.0),
            _steady("gpt2", 2, graph_breaks=["Tensor.item()"]),
            _steady("t5", 2, recompiles=["L['x'].size()[0] == 8"]),
            _steady("vit", 2, components={**BASE_COMPONENTS, "example_inputs[0]": "changed"}),
            _steady("dlrm", 2, category=Category.OOM, error="CUDA out of memory"),
            _steady("convnext", 2), _steady("lenet", 2, cold_s=24.0)]
    return _runs(base, head)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_markdown_golden(name):
    check_golden(f"{name}.md", render_markdown(SCENARIOS[name]()))


def test_mixed_suite_goldens_in_every_format():
    c = _mixed()
    check_golden("mixed.md", render_markdown(c, report_url="https://ci.example/run/7/report.html",
                                             trend_url="https://dash.example/trend/{model}"))
    check_golden("mixed.html", render_html(c))
    check_golden("mixed.txt", render_table(c))
    check_golden("mixed.json", render_json(c))


def test_golden_contents_say_what_changed():
    md = render_markdown(SCENARIOS["new_graph_break"]())
    assert "Tensor.item() call with capture\\_scalar\\_outputs=False".replace("(", "\\(") \
        .replace(")", "\\)").replace(".", "\\.").replace("=", "\\=") in md
    md = render_markdown(SCENARIOS["cache_key_change"]())
    assert "<code>example\\_inputs\\[0\\]</code>" in md and "torch\\_version" in md
    assert md.startswith(MARKER + "\n## compilewatch: 0 regressions, 0 improvements, 1 unchanged")


def _big() -> Comparison:
    base = [model_result(f"model_{i:03d}", seed=i, graph_breaks=[f"reason {i} " + "x" * 80])
            for i in range(500)]
    head = [model_result(f"model_{i:03d}", seed=1000 + i, compiled_us=53.0,
                         graph_breaks=[f"reason {i} " + "x" * 80, f"new break {i} " + "y" * 80],
                         components={**BASE_COMPONENTS, "torch_version": "next"})
            for i in range(500)]
    return _runs(base, head)


def test_500_model_suite_is_truncated_under_the_limit_with_a_pointer_to_the_report():
    c = _big()
    full = render_markdown(c, max_chars=10**9)
    assert len(full) > COMMENT_LIMIT
    md = render_markdown(c, report_url="https://ci.example/report.html")
    assert length(md) <= COMMENT_LIMIT  # GitHub counts UTF-16 units: never fewer than len()
    assert md.startswith(MARKER) and "## compilewatch: 500 regressions" in md
    assert "Truncated to fit" in md and "[full report](<https://ci.example/report.html>)" in md
    assert md.rstrip().endswith("</sub>") and md.count("<details>") == md.count("</details>")
    check_golden("truncated_500.md", md)


def _one_huge_model(breaks: int = 1024, recompiles: int = 0) -> Comparison:
    """gpt2 with ``breaks`` new graph breaks (and as many graphs), beside two ordinary models."""
    reasons = [f"Tensor.item() at model.py:{i} " + "z" * 300 for i in range(breaks)]
    guards = [f"L['x'].size()[0] == {i} " + "g" * 300 for i in range(recompiles)]
    graphs = [{**BASE_COMPONENTS, "gm": f"gm{i}"} for i in range(min(breaks + 1, 1024))]
    base = [_steady("bert", 1), _steady("gpt2", 1), _steady("t5", 1)]
    head = [_steady("bert", 2, graph_breaks=["print"]),
            _steady("gpt2", 2, graph_breaks=reasons, recompiles=guards, graphs=graphs),
            _steady("t5", 2, recompiles=["L['x'].size()[0] == 8"])]
    return _runs(base, head)


def _details(md: str, model: str) -> str:
    start = md.index(f"#### {model} ")
    return md[start:md.index("\n#### ", start + 1) if "\n#### " in md[start + 1:] else None]


@pytest.mark.parametrize("breaks", [25, 1024])
def test_a_model_with_many_new_breaks_shortens_its_own_lists_not_the_others(breaks):
    c = _one_huge_model(breaks)
    md = render_markdown(c)
    assert length(md) <= COMMENT_LIMIT
    assert "Truncated to fit" not in md
    assert md.count("more, in the full report._") == 2  # gpt2's breaks and its changed keys
    for model in ("bert", "gpt2", "t5"):  # every model keeps its row and its details
        assert f"| **{model}** <sub>" in md and f"#### {model} <sub>" in md
    gpt2 = _details(md, "gpt2")
    assert gpt2.count("<code>Tensor\\.item\\(\\) at model\\.py") == 20
    assert "model\\.py\\:⁠19 " in gpt2 and "model\\.py\\:⁠20 " not in gpt2
    assert f"  - _… and {breaks - 20} more, in the full report._" in gpt2
    assert "<code>print</code>" in _details(md, "bert")
    assert "size\\(\\)\\[0\\] \\=\\= 8" in _details(md, "t5")


def test_where_models_would_be_cut_long_lists_get_shorter_still():
    """1,024 breaks and 1,024 recompiles of 300 characters each, in a 12,000-character space:
    every model still shows, gpt2 with its first three entries of each list."""
    c = _one_huge_model(1024, recompiles=1024)
    md = render_markdown(c, max_chars=12_000)
    assert length(md) <= 12_000
    for model in ("bert", "gpt2", "t5"):
        assert f"| **{model}** <sub>" in md and f"#### {model} <sub>" in md
    gpt2 = _details(md, "gpt2")
    assert gpt2.count("<code>Tensor\\.item\\(\\) at model\\.py") == 3
    assert "  - _… and 1021 more, in the full report._" in gpt2


def test_bad_report_url_is_refused():
    with pytest.raises(UsageError, match="report URL"):
        render_markdown(SCENARIOS["regression"](), report_url="javascript:alert(1)")
    with pytest.raises(UsageError, match="report URL"):
        render_markdown(SCENARIOS["regression"](), report_url="https://x/a> [y](z")


def test_trend_url_callable_quotes_the_model():
    md = render_markdown(SCENARIOS["regression"](), trend_url=lambda m: f"https://d/{m}?x=1")
    assert "[trend](<https://d/resnet18?x=1>)" in md


# Without NUL: the results schema refuses it (no database can store it), so it never reaches a
# renderer (render/escape's own tests still feed it to the escapers).
hostile = st.lists(st.sampled_from(HOSTILE) | st.text(max_size=6), min_size=1,
                   max_size=8).map("".join).map(lambda s: s.replace("\x00", ""))


def _hostile_comparison(s: str) -> Comparison:
    # "same": not measured, its reason naming the files it read (a PR's file names)
    same = model_result("same").model_copy(update={
        "compile_skipped": True, "timing_skipped": "unchanged: it reads " + s})
    base = [model_result("m", seed=1), model_result("gone", seed=1), same]
    head = [model_result("m", seed=2, graph_breaks=["gb " + s], recompiles=["rc " + s],
                         components={**BASE_COMPONENTS, "comp " + s: "h"}),
            model_result("new", seed=2, category=Category.CRASH, error="err " + s), same]
    return compare(run_results(base, ref="ref " + s, run_id="base-run-0001"),
                   run_results(head, run_id="head-run-0001"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile)
def test_hostile_strings_never_escape_the_html_report(s):
    p = _HtmlAttrs()
    p.feed(render_html(_hostile_comparison(s)))
    allowed = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "b", "i",
               "code", "div", "table", "thead", "tbody", "tr", "th", "td", "a", "br", "span",
               "details", "summary", "ul", "li", "pre", "script",
               # the forest plot, drawn by plots.py
               "svg", "text", "line", "rect", "circle"}
    assert set(p.tags) <= allowed and p.tags.count("script") == 1
    assert not [a for a in p.attrs if a[0].startswith("on") or a[0] in ("src", "style")]
    assert all(v.startswith("#m-") for k, v in p.attrs if k == "href")
    text = "".join(p.text)
    assert ("gb " + s).strip() in text or not s.strip()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile)
def test_hostile_strings_never_escape_the_comment(s):
    md = render_markdown(_hostile_comparison(s))
    html = MD.render(md)
    p = parse(html)
    assert "a" not in p.tags and "img" not in p.tags and "script" not in p.tags
    text = "".join(p.text)
    assert not any(rx.search(text) for rx in GITHUB_AUTO), text
    assert html.count("<details>") == 2


class _HtmlAttrs:
    def __init__(self) -> None:
        from html.parser import HTMLParser

        outer = self
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []
        self.text: list[str] = []

        class P(HTMLParser):
            def handle_starttag(self, tag, attrs):
                outer.tags.append(tag)
                outer.attrs.extend((k, v or "") for k, v in attrs)

            def handle_data(self, data):
                outer.text.append(data)

        self._p = P(convert_charrefs=True)

    def feed(self, html: str) -> None:
        self._p.feed(html)
        self._p.close()


@pytest.mark.parametrize("max_chars", [200, 500, 900, 1300, 1550])
def test_headline_cut_stays_within_the_limit_in_utf16_units(max_chars):
    """Below the size of the headline, the comment is cut, and emoji (two UTF-16 units each)
    must not push it over the limit GitHub counts."""
    md = render_markdown(_mixed(), max_chars=max_chars)
    assert length(md) <= max_chars
    assert md.startswith(MARKER) and md.endswith("_(truncated: the full report has everything)_\n")


@pytest.mark.parametrize("name", [*sorted(SCENARIOS), "mixed"])
def test_every_table_has_one_cell_per_header(name):
    from tests.html_tables import check_markdown_tables, check_tables

    c = _mixed() if name == "mixed" else SCENARIOS[name]()
    assert check_tables(render_html(c))
    check_markdown_tables(render_markdown(c))
    if name == "mixed":
        (table, *_) = check_tables(render_html(c))
        assert table.row("micro/gpt2")["graph breaks"].startswith("0 → 1")
        full = check_markdown_tables(render_markdown(c))[-1]
        assert full.row("gpt2")["breaks"] == "0 → 1"


def test_the_table_says_which_config_a_row_is_where_a_model_has_several() -> None:
    """One model measured for inference and training is two rows: the table names each
    row's config; a model on one row stays short."""
    train = Config(task="training")
    rows = [model_result("m", seed=1), model_result("m", seed=1, config=train),
            model_result("solo", seed=1)]
    heads = [model_result("m", seed=2), model_result("m", seed=2, config=train),
             model_result("solo", seed=2)]
    text = render_table(compare(run_results(rows), run_results(heads)))
    assert f"micro/m [{Config().slug}]" in text and f"micro/m [{train.slug}]" in text
    assert "micro/solo " in text and "micro/solo [" not in text
