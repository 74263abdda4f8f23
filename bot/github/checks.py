"""The verdict on the commit: a check run, or a commit status where checks are not allowed.

A check run carries the whole summary; a token without ``checks: write`` (GitHub answers 403)
falls back to a commit status, which carries only a 140-character description. Re-running on the
same commit edits the check run of the same name instead of stacking a new one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from github.Repository import Repository

from compilewatch.bot.github.client import github_errors, status_of
from compilewatch.core.errors import GitHubError

Conclusion = Literal["success", "failure", "neutral"]
MAX_SUMMARY_CHARS = 65535
MAX_TITLE_CHARS = 255
MAX_STATUS_DESCRIPTION = 140
STATUS_STATE = {"success": "success", "failure": "failure", "neutral": "success"}


@dataclass(frozen=True)
class CheckResult:
    kind: Literal["check", "status"]
    conclusion: Conclusion
    url: str | None
    fell_back: bool = False


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def set_check(repo: Repository, sha: str, name: str, conclusion: Conclusion, title: str,
              summary: str, *, details_url: str | None = None,
              use_status: bool = False) -> CheckResult:
    """Publish the verdict on ``sha``: a check run, else (403 or ``use_status``) a status."""
    if conclusion not in STATUS_STATE:
        raise ValueError(f"conclusion {conclusion!r} is not one of {sorted(STATUS_STATE)}")
    if not use_status:
        try:
            url = _upsert_check_run(repo, sha, name, conclusion, _cut(title, MAX_TITLE_CHARS),
                                    _cut(summary, MAX_SUMMARY_CHARS), details_url)
            return CheckResult("check", conclusion, url)
        except GitHubError as e:
            if status_of(e) != 403:
                raise
    state = STATUS_STATE[conclusion]
    with github_errors(f"set the commit status {name!r} on {sha[:12]}"):
        repo.get_commit(sha).create_status(
            state=state, context=name, description=_cut(title, MAX_STATUS_DESCRIPTION),
            **({"target_url": details_url} if details_url else {}),
        )
    return CheckResult("status", conclusion, details_url, fell_back=not use_status)


def _upsert_check_run(repo: Repository, sha: str, name: str, conclusion: Conclusion,
                      title: str, summary: str, details_url: str | None) -> str:
    output = {"title": title, "summary": summary}
    extra = {"details_url": details_url} if details_url else {}
    with github_errors(f"set the check run {name!r} on {sha[:12]}"):
        existing = next(iter(repo.get_commit(sha).get_check_runs(check_name=name)), None)
        if existing is not None:
            existing.edit(status="completed", conclusion=conclusion, output=output, **extra)
            return existing.html_url
        run = repo.create_check_run(name=name, head_sha=sha, status="completed",
                                    conclusion=conclusion, output=output, **extra)
        return run.html_url
