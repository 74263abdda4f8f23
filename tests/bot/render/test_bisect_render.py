"""A bisection's report in every format, hostile strings included, and the bisect command a
flagged row of a comparison gives (markdown and HTML)."""

from __future__ import annotations

import json
import shlex

from hypothesis import given, settings
from markupsafe import Markup

from compilewatch.bot.judge.bisect_metrics import Call
from compilewatch.bot.judge.bisection import (
    BisectReport,
    Candidate,
    CompilerFinding,
    FlagChange,
    FlagFinding,
    ModelReading,
    Step,
)
from compilewatch.bot.judge.verdicts import compare
from compilewatch.bot.render.bisect import marker, render_html, render_markdown, render_text
from compilewatch.bot.render.commands import bisect_line, row_bisect, row_metric
from compilewatch.bot.render.escape import md_command
from compilewatch.bot.render.formats import render_html as comparison_html
from compilewatch.bot.render.formats import render_markdown as comparison_markdown
from tests.bot.render.test_escape import GITHUB_AUTO, HOSTILE, MD, hostile, parse
from tests.factories import BASE_COMPONENTS, model_result, run_results

EVIL = "@octocat <script>alert(1)</script> [x](https://e.vil) #1"


def report(subject: str = "fix the relu", model: str = "gpt2", **kw) -> BisectReport:
    cands = [Candidate(index=i, commit=f"{i:x}" * 40, subject=f"{subject} {i}")
             for i in range(5)]
    steps = [Step(number=1, kind="ends", candidate=4, reference=0, call=Call.BAD,
                  readings=[ModelReading(model=f"micro/{model} [cpu]", value="2",
                                         call=Call.BAD, why=subject)],
                  reference_readings=[ModelReading(model=f"micro/{model} [cpu]", value="0",
                                                   call=Call.GOOD)]),
             Step(number=2, kind="candidate", candidate=2, call=Call.SKIP,
                  note=f"skipped: it does not load: {subject}"),
             Step(number=3, kind="candidate", candidate=3, call=Call.BAD,
                  readings=[ModelReading(model=f"micro/{model} [cpu]", value="2",
                                         call=Call.BAD)]),
             Step(number=4, kind="candidate", candidate=1, call=Call.GOOD,
                  readings=[ModelReading(model=f"micro/{model} [cpu]", value="0",
                                         call=Call.GOOD)])]
    base = dict(mode="commits", metric="graph-breaks", metric_label="graph breaks",
                models=[model], good="v1", bad="main", candidates=cands, steps=steps,
                outcome="range", first_bad=None, last_good=1, suspects=[2, 3],
                command=bisect_line(good="1" * 40, bad="4" * 40, models=[model],
                                    metric="graph-breaks"))
    return BisectReport(**{**base, **kw})


def test_the_markdown_names_the_range_every_step_and_the_command_to_run():
    md = render_markdown(report())
    assert md.startswith(marker(report()))
    assert "is one of these 2" in md and "(ends)" in md and "0 → 2" in md
    assert "\n```\ncompilewatch bisect --good 1111" in md  # a fence: copied as it is
    assert "skipped" in md


def test_a_found_commit_is_the_headline_with_the_compiler_and_flag_findings():
    r = report(outcome="found", first_bad=3, suspects=[3],
               compiler=CompilerFinding(candidate=3, model="micro/gpt2 [cpu]",
                                        backend="inductor", subsystem="lowerings",
                                        bisect_number=1, debug_info="relu"),
               flags=FlagFinding(flags=[FlagChange(name="inductor_config[cpp.simdlen]",
                                                   good="None", bad="1")],
                                 culprit="inductor_config[cpp.simdlen]"))
    md = render_markdown(r)
    assert "## compilewatch bisect: first bad commit <code>3333333333</code>" in md
    assert "backend **inductor**, subsystem **lowerings**, application 1" in md
    assert "Setting **inductor\\_config\\[cpp\\.simdlen\\]**" in md
    text = render_text(r)
    assert "first bad commit: 3333333333" in text and "subsystem lowerings" in text
    page = render_html(r)
    assert "<b>inductor</b>" in page and "cpp.simdlen" in page


def test_the_marker_is_one_per_bisection():
    assert marker(report()) == marker(report(subject="other"))
    assert marker(report()) != marker(report(metric="recompiles"))


def test_hostile_subjects_and_names_are_inert_in_markdown_and_html():
    r = report(subject=EVIL, models=[EVIL], notes=[EVIL])
    html = MD.render(render_markdown(r))
    tags = set(parse(html).tags)
    assert "script" not in tags and "a" not in tags
    text = "".join(parse(html).text)
    for pattern in GITHUB_AUTO:
        assert not pattern.search(text), pattern
    page = render_html(r)
    assert "<script>alert" not in page and "&lt;script&gt;" in page


@settings(max_examples=40, deadline=None)
@given(hostile)
def test_any_subject_stays_text_in_the_comment(s):
    tags = parse(MD.render(render_markdown(report(subject=s)))).tags
    assert not {"script", "img", "a", "iframe"} & set(tags)


def test_only_a_plain_command_is_fenced_anything_else_is_escaped_code():
    assert md_command("compilewatch bisect --good 'HEAD~2'").startswith("\n```\n")
    for s in HOSTILE:
        out = md_command(f"compilewatch bisect --model {s}")
        if "```" in out:
            assert not set(s) & set("`$;&|<>\"\\\n@#")


def test_the_json_is_the_report_and_reads_back():
    r = report()
    assert BisectReport.model_validate_json(r.model_dump_json()) == r
    assert json.loads(r.model_dump_json())["kind"] == "bisect"


def _comparison(base_components=None, **head):
    base = run_results([model_result("bert", seed=1, components=base_components)],
                       commit="a" * 40, run_id="b" * 32)
    return compare(base, run_results([model_result("bert", seed=2, **head)], commit="c" * 40,
                                     run_id="d" * 32))


def test_a_flagged_row_gives_the_command_that_bisects_its_finding():
    c = _comparison(graph_breaks=["print"], compiled_us=60.0)
    [row] = c.rows
    assert row_metric(row) == "graph-breaks"  # one measurement a step: the surer first
    cmd = row_bisect(c, row)
    assert shlex.split(cmd) == ["compilewatch", "bisect", "--good", "a" * 40, "--bad",
                                "c" * 40, "--model", "bert", "--metric", "graph-breaks"]
    assert f"\n```\n{cmd}\n```\n" in comparison_markdown(c)
    assert cmd in comparison_html(c)


def test_a_changed_input_shape_gives_the_cache_component_quoted():
    c = _comparison(components={**BASE_COMPONENTS, "example_inputs[0]": "exin0changed"})
    cmd = row_bisect(c, c.rows[0])
    assert cmd.endswith("--metric 'cache:example_inputs[0]'")


def test_no_command_without_a_finding_or_with_a_component_name_from_a_stranger():
    c = _comparison()
    assert row_bisect(c, c.rows[0]) is None
    c = _comparison({**BASE_COMPONENTS, "x$(reboot)": "h0"},
                    components={**BASE_COMPONENTS, "x$(reboot)": "h1"})
    assert c.rows[0].cache_changes[0].changed == ["x$(reboot)"]
    assert row_metric(c.rows[0]) is None


def test_markup_of_our_own_is_not_escaped_twice():
    assert isinstance(md_command("compilewatch bisect"), Markup)
