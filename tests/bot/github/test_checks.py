"""The verdict on the commit: check runs, their re-use, and the commit-status fallback."""

from __future__ import annotations

import pytest
from github.Repository import Repository

from compilewatch.bot.github.checks import MAX_SUMMARY_CHARS, set_check
from compilewatch.core.errors import GitHubError
from tests.fakegithub import HEAD_SHA, FakeGitHub


def test_regression_gives_a_failing_check_run(fake_github: FakeGitHub,
                                              gh_repo: Repository) -> None:
    result = set_check(gh_repo, HEAD_SHA, "compilewatch", "failure", "1 gating regression",
                       "details")
    [run] = fake_github.check_runs.values()
    assert (result.kind, result.conclusion, result.fell_back) == ("check", "failure", False)
    assert (run["head_sha"], run["status"], run["conclusion"]) == (HEAD_SHA, "completed",
                                                                  "failure")
    assert run["output"]["title"] == "1 gating regression"
    assert run["output"]["summary"] == "details"


def test_rerun_edits_the_check_run_of_the_same_name(fake_github: FakeGitHub,
                                                    gh_repo: Repository) -> None:
    set_check(gh_repo, HEAD_SHA, "compilewatch", "failure", "bad", "s")
    set_check(gh_repo, HEAD_SHA, "other-check", "success", "ok", "s")
    set_check(gh_repo, HEAD_SHA, "compilewatch", "success", "fixed", "s")
    runs = {r["name"]: r for r in fake_github.check_runs.values()}
    assert len(fake_github.check_runs) == 2
    assert runs["compilewatch"]["conclusion"] == "success"
    assert runs["compilewatch"]["output"]["title"] == "fixed"


def test_forbidden_checks_fall_back_to_a_commit_status(fake_github: FakeGitHub,
                                                       gh_repo: Repository) -> None:
    fake_github.deny_checks = True
    result = set_check(gh_repo, HEAD_SHA, "compilewatch", "failure", "t" * 500, "s",
                       details_url="https://ci.example/run/1")
    [status] = fake_github.statuses
    assert (result.kind, result.fell_back) == ("status", True)
    assert (status["sha"], status["state"], status["context"]) == (HEAD_SHA, "failure",
                                                                   "compilewatch")
    assert len(status["description"]) == 140
    assert status["target_url"] == "https://ci.example/run/1"


def test_status_mode_writes_no_check_run(fake_github: FakeGitHub, gh_repo: Repository) -> None:
    result = set_check(gh_repo, HEAD_SHA, "cw", "success", "ok", "s", use_status=True)
    assert (result.kind, result.fell_back) == ("status", False)
    assert fake_github.calls("POST", "check-runs") == []
    assert fake_github.statuses[0]["state"] == "success"


def test_long_summary_is_cut_to_the_limit(fake_github: FakeGitHub, gh_repo: Repository) -> None:
    set_check(gh_repo, HEAD_SHA, "cw", "success", "ok", "y" * 200_000)
    [run] = fake_github.check_runs.values()
    assert len(run["output"]["summary"]) == MAX_SUMMARY_CHARS


def test_server_errors_do_not_fall_back(fake_github: FakeGitHub, gh_repo: Repository) -> None:
    fake_github.fail_next(100, status=500, path="check-runs")
    with pytest.raises(GitHubError, match="unavailable"):
        set_check(gh_repo, HEAD_SHA, "cw", "failure", "bad", "s")
    assert fake_github.statuses == []


def test_unknown_conclusion_is_a_programming_error(gh_repo: Repository) -> None:
    with pytest.raises(ValueError, match="conclusion"):
        set_check(gh_repo, HEAD_SHA, "cw", "maybe", "t", "s")  # type: ignore[arg-type]
