"""GitHub's job summary: what compare, merge, trends, pr and nightly append to
``$GITHUB_STEP_SUMMARY`` when it is set, and that nothing is written (or fails) otherwise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.render import jobsummary
from compilewatch.core.results_file import save_results
from compilewatch.db import connect, ingest
from tests.factories import model_result, nightly_history, run_results


def _sides(tmp_path: Path) -> tuple[Path, Path]:
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    save_results(run_results([model_result("steady", seed=1), model_result("slowed", seed=1)],
                             run_id="base-run-0001"), base)
    save_results(run_results([model_result("steady", seed=2),
                              model_result("slowed", seed=3, compiled_us=60)],
                             run_id="head-run-0001"), head)
    return base, head


def _invoke(args: list[str], summary: Path | None):
    env = {jobsummary.ENV: str(summary)} if summary is not None else {jobsummary.ENV: ""}
    return CliRunner().invoke(main, args, env=env, catch_exceptions=False)


def test_compare_appends_its_comment_each_time_and_nothing_outside_actions(
        tmp_path: Path) -> None:
    base, head = _sides(tmp_path)
    summary = tmp_path / "summary.md"
    summary.write_text("# an earlier step\n")  # kept: a step's summary follows the last one
    args = ["compare", str(base), str(head), "--repo", str(tmp_path), "--out",
            str(tmp_path / "c.md"), "--report-url", "https://ci.example/report.html"]
    assert _invoke(args, summary).exit_code == 0
    text = summary.read_text()
    assert text.startswith("# an earlier step\n<!-- compilewatch:pr-comment -->")
    assert text.count("## compilewatch:") == 1 and "1 regression" in text
    assert "slowed" in text and "https://ci.example/report.html" in text
    assert _invoke(args, summary).exit_code == 0  # a second step's summary follows the first
    assert summary.read_text().count("## compilewatch:") == 2
    other = tmp_path / "never.md"
    assert _invoke(args, None).exit_code == 0 and not other.exists()


def test_a_summary_that_cannot_be_written_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    base, head = _sides(tmp_path)
    r = _invoke(["compare", str(base), str(head), "--repo", str(tmp_path), "--out",
                 str(tmp_path / "c.md")], tmp_path)  # a folder: no file to append to
    assert r.exit_code == 0, r.output
    assert "warning: the job summary was not written" in r.stderr
    assert (tmp_path / "c.md").exists()


def test_merge_of_results_files_says_what_it_joined(tmp_path: Path) -> None:
    from tests.bot.shards.test_merge import group

    files = []
    for i, run in enumerate(group("head")):
        files.append(tmp_path / f"shard-{i}.json")
        save_results(run, files[-1])
    summary = tmp_path / "summary.md"
    r = _invoke(["merge", *map(str, files), "--out", str(tmp_path / "merged.json")], summary)
    assert r.exit_code == 0, r.output
    text = summary.read_text()
    assert text.startswith("### compilewatch: merged 3 shards into")
    assert text.count("\n- ") == len([ln for ln in r.stdout.splitlines() if ln.strip()])


def test_trends_says_what_it_drew(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with connect(url) as db:
        for run in nightly_history(4, models=("mlp",)):
            ingest(db, run)
    summary = tmp_path / "summary.md"
    r = _invoke(["trends", "--db", url, "--out", str(tmp_path / "site")], summary)
    assert r.exit_code == 0, r.output
    text = summary.read_text()
    assert text.startswith("### compilewatch: trends") and "index\\.html" in text


@pytest.mark.parametrize("hostile", ["<img src=x onerror=alert(1)>", "@maintainers", "| a |"])
def test_a_section_shows_names_as_text(hostile: str) -> None:
    text = jobsummary.section(hostile, [hostile], {"report": "https://x.example/a b)"})
    assert re.search(r"(?<!\\)<img", text) is None
    assert "\\|" in jobsummary.section("x", ["| a |"])
    assert "(https://x.example/a%20b%29)" in text
    if hostile.startswith("@"):
        assert "@maintainers" not in text.replace("\\@", "")  # no ping


def test_a_summary_over_github_s_limit_is_cut(tmp_path: Path) -> None:
    where = tmp_path / "s.md"
    assert jobsummary.append("x" * (jobsummary.SUMMARY_LIMIT + 10), {jobsummary.ENV: str(where)}) \
        is None
    text = where.read_text()
    assert len(text) <= jobsummary.SUMMARY_LIMIT and "cut at GitHub's summary limit" in text
