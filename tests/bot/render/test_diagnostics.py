"""What travels with a flagged model: the tlparse report, or the reason it is missing.

tlparse was only a test extra, so after the quickstart every tlparse report was missing and
nothing said so. It is a dependency now; where it is still unavailable (another interpreter,
an install without dependencies) or fails, the comment, the report and ``doctor`` say why."""

from __future__ import annotations

import gzip
import html
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.commands.doctor import doctor
from compilewatch.bot.judge.verdicts import compare
from compilewatch.bot.render import diagnostics
from compilewatch.bot.render.formats import render_html, render_markdown
from compilewatch.core.schema import Diagnostics, RunResults
from tests.factories import environment, model_result, run_results

ROOT = Path(__file__).resolve().parents[3]


def test_tlparse_is_a_dependency_not_an_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert any(d.startswith("tlparse") for d in project["dependencies"])
    assert not any(d.startswith("tlparse") for extra in project["optional-dependencies"].values()
                   for d in extra)
    assert diagnostics.find_tlparse() is not None  # installed with compilewatch here


def _flagged(root: Path) -> dict[str, RunResults]:
    """A model with a new graph break on head, each side's trace in ``root``."""
    runs = {}
    for side, breaks in (("base", None), ("head", ["data-dependent branch"])):
        trace = root / "diagnostics" / side / "m" / "cold.trace.gz"
        trace.parent.mkdir(parents=True)
        with gzip.open(trace, "wt") as f:
            f.write("not a structured trace line\n")
        r = model_result("m", graph_breaks=breaks).model_copy(update={
            "diagnostics": Diagnostics(trace=str(trace.relative_to(root)))})
        runs[side] = run_results([r], run_id=f"{side}-run-0001")
    return runs


def _script(tmp_path: Path, body: str) -> str:
    exe = tmp_path / "fake-tlparse"
    exe.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    exe.chmod(0o755)
    return str(exe)


@pytest.mark.parametrize("case", ["missing", "fails", "works"])
def test_a_flagged_model_has_its_tlparse_report_or_says_why_not(tmp_path: Path,
                                                               case: str) -> None:
    runs = _flagged(tmp_path)
    find = {"missing": lambda: None,
            "fails": lambda: _script(tmp_path, "echo 'cannot read the log' >&2; exit 3"),
            "works": diagnostics.find_tlparse}[case]
    first = compare(runs["base"], runs["head"])
    attached = diagnostics.attach(first, runs, tmp_path, find=find)
    row = compare(attached["base"], attached["head"]).rows[0]
    why = {"missing": f"no tlparse report: tlparse is not installed beside {sys.executable} "
                      "nor on PATH (it is a dependency of compilewatch: pip install tlparse)",
           "fails": "no tlparse report: tlparse failed (exit 3): cannot read the log",
           "works": None}[case]
    notes = [n for n in row.notes if "tlparse" in n]
    assert notes == ([why] if why else [])
    comment = render_markdown(compare(attached["base"], attached["head"]))
    page = html.unescape(render_html(compare(attached["base"], attached["head"])))
    if why:
        assert "tlparse report (head)" not in row.diagnostics
        assert why in page and "no tlparse report" in comment
    else:
        assert (tmp_path / row.diagnostics["tlparse report (head)"]).is_file()
        assert "no tlparse report" not in page


def test_one_side_without_its_report_is_named(tmp_path: Path) -> None:
    runs = _flagged(tmp_path)
    calls = iter([diagnostics.find_tlparse(), None])  # base gets one, head does not
    attached = diagnostics.attach(compare(runs["base"], runs["head"]), runs, tmp_path,
                                  find=lambda: next(calls))
    row = compare(attached["base"], attached["head"]).rows[0]
    assert "tlparse report (base)" in row.diagnostics
    assert [n for n in row.notes if "tlparse" in n] == [
        f"no tlparse report (head): tlparse is not installed beside {sys.executable} nor on "
        "PATH (it is a dependency of compilewatch: pip install tlparse)"]


@pytest.mark.parametrize(("find", "status", "words"), [
    ("found", "ok", ["tlparse 0.", "writes a report of each flagged model"]),
    ("missing", "warn", ["nor on PATH", "pip install tlparse", "its comment says why"]),
    ("broken", "warn", ["does not run", "no tlparse report"]),
])
def test_doctor_says_whether_tlparse_reports_will_be_made(tmp_path: Path, find: str,
                                                          status: str, words: list[str]
                                                          ) -> None:
    finders = {"found": diagnostics.find_tlparse, "missing": lambda: None,
               "broken": lambda: _script(tmp_path, "exit 1")}
    report = doctor(db_url=f"sqlite:///{tmp_path / 'cw.db'}", token_env="CW_DOCTOR_TEST_TOKEN",
                    environment=lambda _python: environment(), which=lambda n: f"/usr/bin/{n}",
                    tlparse=finders[find])
    line = next(c for c in report.checks if c.name == "tlparse")
    assert line.status == status and all(w in line.detail for w in words), line.detail
    assert report.can_run  # the main job does not need it


def test_doctor_shows_the_tlparse_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["doctor", "--db", f"sqlite:///{tmp_path / 'cw.db'}",
                                    "--token-env", "CW_DOCTOR_TEST_TOKEN"])
    assert res.exit_code == 0 and "tlparse" in res.output


@pytest.mark.parametrize("works", [True, False])
def test_a_compare_of_two_runs_links_a_tlparse_report_of_each_flagged_trace(
        tmp_path: Path, works: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two results files (not a pr's folder, which has its reports): the page links tlparse's
    view of each side's trace, written beside the page, or says why there is none."""
    from compilewatch.core.results_file import save_results

    runs = _flagged(tmp_path)
    for side, run in runs.items():
        save_results(run, tmp_path / f"{side}.json")
    if not works:
        monkeypatch.setattr(diagnostics, "find_tlparse", lambda: None)
    page = tmp_path / "pages" / "c.html"
    page.parent.mkdir()
    res = CliRunner().invoke(main, ["compare", str(tmp_path / "base.json"),
                                    str(tmp_path / "head.json"), "--repo", str(tmp_path),
                                    "--format", "html", "--out", str(page)])
    assert res.exit_code == 0, res.output
    text = html.unescape(page.read_text(encoding="utf-8"))
    for side in ("base", "head"):
        report = page.parent / "c.tlparse" / "micro-m-cpu-default-float32-auto" / side
        if works:
            assert f'href="c.tlparse/{report.parent.name}/{side}/index.html">tlparse report ' \
                   f'({side})' in text
            assert (report / "index.html").is_file()
        else:
            assert f"tlparse report ({side}): tlparse is not installed" in text
            assert not report.exists()
