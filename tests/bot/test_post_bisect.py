"""`compilewatch post` of a bisection's folder: its report as one comment on an issue or a pull
request, rendered again from bisect.json (the folder is data), through the real PyGithub
client against the fake GitHub."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from compilewatch.bot.cli import main
from compilewatch.bot.render.bisect import marker, render_markdown
from tests.bot.render.test_bisect_render import EVIL, report
from tests.bot.test_post import write_outdir
from tests.fakegithub import PR, REPO, TOKEN, FakeGitHub

ISSUE = 12


def bisect_dir(tmp_path: Path, name: str = "bisect", **kw) -> Path:
    out = tmp_path / name
    out.mkdir()
    r = report(**kw)
    (out / "bisect.json").write_text(r.model_dump_json())
    (out / "bisect.md").write_text("@everyone the job's own text, never posted")
    (out / "bisect.html").write_text("<html></html>")
    return out


def post(fake: FakeGitHub, out: Path, *target: str) -> Result:
    args = ["post", str(out), "--repo", REPO, *target, "--github-url", fake.base_url,
            "--retries", "1", "--retry-backoff", "0.01"]
    return CliRunner().invoke(main, args, env={"GITHUB_TOKEN": TOKEN})


def test_the_report_goes_on_an_issue_rendered_here_and_posts_no_check(
        fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake_github.add_issue(REPO, ISSUE)
    out = bisect_dir(tmp_path, subject=EVIL)
    result = post(fake_github, out, "--issue", str(ISSUE))
    assert result.exit_code == 0, result.output
    [comment] = fake_github.issue_comments(REPO, ISSUE)
    assert comment["body"].startswith(marker(report()))
    assert "the job's own text" not in comment["body"]
    assert "<script>" not in comment["body"] and "@octocat" not in comment["body"]
    assert "is one of these 2" in comment["body"]
    assert not fake_github.check_runs and not fake_github.statuses
    assert f"comment created: https://github.example/{REPO}/issues/{ISSUE}" in result.output


def test_running_again_edits_it_and_another_bisection_has_its_own(fake_github: FakeGitHub,
                                                                  tmp_path: Path) -> None:
    assert post(fake_github, bisect_dir(tmp_path), "--pr", str(PR)).exit_code == 0
    again = post(fake_github, bisect_dir(tmp_path, "again", subject="moved"), "--pr", str(PR))
    assert again.exit_code == 0 and "comment updated" in again.output
    other = post(fake_github, bisect_dir(tmp_path, "other", metric="recompiles"),
                 "--pr", str(PR))
    assert other.exit_code == 0
    bodies = [c["body"] for c in fake_github.issue_comments(REPO, PR)]
    assert len(bodies) == 2 and "moved" in bodies[0]


def test_dry_run_prints_the_comment_and_needs_no_token(fake_github: FakeGitHub,
                                                      tmp_path: Path) -> None:
    out = bisect_dir(tmp_path)
    result = CliRunner().invoke(main, ["post", str(out), "--repo", REPO, "--issue", "3",
                                       "--dry-run"], env={"GITHUB_TOKEN": ""})
    assert result.exit_code == 0, result.output
    assert render_markdown(report()).split("\n")[1] in result.output
    assert "nothing posted" in result.output and not fake_github.requests


@pytest.mark.parametrize(("target", "said"), [
    ([], "pass --pr N or --issue N"),
    (["--pr", str(PR), "--issue", "3"], "pass --pr N or --issue N"),
    (["--issue", "3", "--sha", "a" * 40], "--sha names the commit a pr's check goes on"),
])
def test_one_target_and_no_check_commit(fake_github: FakeGitHub, tmp_path: Path, target,
                                        said) -> None:
    result = post(fake_github, bisect_dir(tmp_path), *target)
    assert result.exit_code == 2 and said in result.output
    assert not fake_github.requests


def test_a_pr_output_is_not_posted_on_an_issue(fake_github: FakeGitHub, tmp_path: Path) -> None:
    result = post(fake_github, write_outdir(tmp_path), "--issue", "3")
    assert result.exit_code == 2 and "--issue takes a bisection's output" in result.output
    assert not fake_github.requests


@pytest.mark.parametrize(("change", "said"), [
    (lambda d: (d / "run.sh").write_text("x"), "unexpected entries"),
    (lambda d: (d / "bisect.json").write_text('{"kind": "bisect", "version": 1, "x": 1}'),
     "not a bisection's report"),
    (lambda d: (d / "bisect.json").write_text("[" * 100 + "]" * 100),
     "nested 100 deep"),
    (lambda d: (d / "bisect.json").write_bytes(b"\xff"), "not UTF-8"),
])
def test_a_folder_that_is_not_a_bisection_is_refused_before_any_request(
        fake_github: FakeGitHub, tmp_path: Path, change, said) -> None:
    out = bisect_dir(tmp_path)
    change(out)
    result = post(fake_github, out, "--pr", str(PR))
    assert result.exit_code == 2 and said in result.output, result.output
    assert "Traceback" not in result.output and not fake_github.requests
