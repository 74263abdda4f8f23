"""``compilewatch post``: the privileged half of the PR bot.

The output directory comes from a job that ran untrusted PR code, so it is data to validate, never
text to publish: only ``base.json`` and ``head.json`` are read (strictly, through the results
schema) and the comparison and the comment are computed again here by trusted code. The
``comment.md``/``report.html``/``comparison.json`` the untrusted job wrote are size-checked and
otherwise ignored. Everything is computed before the first write to GitHub.
"""

from __future__ import annotations

import functools
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from github.Repository import Repository

from compilewatch.bot.github.checks import CheckResult, set_check
from compilewatch.bot.github.client import (
    DEFAULT_POLICY,
    Credentials,
    RetryPolicy,
    credentials_from,
    github_errors,
    open_repo,
    split_repo,
)
from compilewatch.bot.github.sticky import CommentResult, fit_comment, upsert_comment
from compilewatch.bot.history.nightly_values import nightly_values
from compilewatch.bot.judge.project import compare_with_project, noise_bands
from compilewatch.bot.outdir import DIAGNOSTICS, FILE_LIMITS, REQUIRED
from compilewatch.bot.render.formats import MARKER, render
from compilewatch.bot.render.neutralise import neutralise
from compilewatch.core.errors import GitHubError, ResultsFileError, UsageError
from compilewatch.core.schema import RunResults, load_results
from compilewatch.db import store_runs

_SHA = re.compile(r"^[0-9a-f]{40}$|^[0-9a-f]{64}$")
_REPO = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
_HEAD_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}:[^\s:~^?*\[\\]{1,255}$")
_URL = re.compile(r"^https?://[^\s<>\"'`]{1,2000}$")


@dataclass(frozen=True)
class Rendered:
    """What trusted code made of the two runs: the comment, the check's line, the verdict."""

    body: str
    title: str
    gating_regression: bool
    marker: str


Renderer = Callable[[RunResults, RunResults, str | None], Rendered]


@dataclass(frozen=True)
class PostReport:
    rendered: Rendered
    comment: CommentResult | None = None
    check: CheckResult | None = None
    ingested: bool = False


def trusted_render(base: RunResults, head: RunResults, report_url: str | None,
                   trends_url: str | None = None, config_dir: Path | None = None,
                   db_url: str | None = None) -> Rendered:
    """compare + render_markdown from this package (the only text ``post`` publishes).

    Thresholds and the baseline come from ``config_dir``, a trusted checkout (the default
    branch), never from the PR: a PR must not be able to loosen its own gate.
    """
    noise = noise_bands(db_url, base) if db_url else None
    comparison = compare_with_project(base, head, config_dir, noise)
    h = comparison.headline
    title = (f"{h.gating} gating regression(s)" if comparison.gating_regression
             else "No gating regression") + f"; {h.regressions} regressed, " \
        f"{h.improvements} improved"
    history = nightly_values(db_url, comparison)  # sparklines: only with a database
    return Rendered(render(comparison, "markdown", report_url, trends_url, history=history),
                    title, comparison.gating_regression, MARKER)


def validate_outdir(outdir: Path) -> tuple[RunResults, RunResults]:
    """Check the artifact's shape and sizes, then load both runs strictly."""
    outdir = Path(outdir)
    if outdir.is_symlink() or not outdir.is_dir():
        raise ResultsFileError(f"{outdir}: not a directory")
    unexpected, too_big = [], []
    for entry in sorted(outdir.iterdir()):
        st = entry.lstat()
        if entry.name == DIAGNOSTICS and stat.S_ISDIR(st.st_mode):
            continue  # for people, from the artifact; never read here
        limit = FILE_LIMITS.get(entry.name)
        if limit is None or not stat.S_ISREG(st.st_mode):
            unexpected.append(entry.name)
        elif st.st_size > limit:
            too_big.append(f"{entry.name} ({st.st_size} bytes > {limit})")
    if unexpected:
        raise ResultsFileError(f"{outdir}: unexpected entries (only regular files named "
                               f"{', '.join(FILE_LIMITS)} and a {DIAGNOSTICS}/ directory are "
                               "allowed): "
                               f"{', '.join(map(repr, unexpected[:10]))}")
    if too_big:
        raise ResultsFileError(f"{outdir}: over the size limit: {', '.join(too_big)}")
    missing = [n for n in REQUIRED if not (outdir / n).is_file()]
    if missing:
        raise ResultsFileError(f"{outdir}: missing {', '.join(missing)}")
    # The schema bounds what compare costs (models, timing samples per result and per file).
    return load_results(outdir / "base.json"), load_results(outdir / "head.json")


def _check_target(repo: str, pr: int | None, sha: str, head: RunResults) -> None:
    """The PR and commit come from the trusted event; the artifact must agree with them."""
    if not _REPO.match(repo):
        raise UsageError(f"--repo {repo!r}: expected OWNER/NAME")
    split_repo(repo)
    if pr is not None and pr < 1:
        raise UsageError(f"--pr {pr}: must be a positive number")
    if not _SHA.match(sha):
        raise UsageError(f"--sha {sha!r}: expected a full lowercase hex commit id")
    commit = head.git.commit
    if commit != sha:
        raise ResultsFileError(f"head.json was measured on {commit or 'an unknown commit'}, "
                               f"not on --sha {sha}: refusing to post results of another "
                               "commit")
    if head.git.pr is not None and pr is not None and head.git.pr != pr:
        raise ResultsFileError(f"head.json is for PR #{head.git.pr}, not --pr {pr}")


def find_pull_request(repository: Repository, sha: str, head_label: str | None) -> int:
    """The open PR whose head is ``sha``. The ``workflow_run`` event names no PR for forks, so
    the PR is looked up by its head (``OWNER:BRANCH``) or by the commit, and must match ``sha``."""
    with github_errors(f"find the pull request with head {sha[:12]}"):
        if head_label:
            candidates = repository.get_pulls(state="open", head=head_label)
        else:
            candidates = repository.get_commit(sha).get_pulls()
        numbers = sorted({p.number for p in candidates if p.head.sha == sha and p.state == "open"})
    if len(numbers) != 1:
        found = ", ".join(f"#{n}" for n in numbers) or "none"
        raise GitHubError(f"no single open pull request has head {sha} (found: {found}); "
                          "pass --pr")
    return numbers[0]


def render_outdir(outdir: Path, *, repo: str, pr: int | None, sha: str,
                  report_url: str | None = None, trends_url: str | None = None,
                  config_dir: Path | None = None, db_url: str | None = None,
                  render: Renderer | None = None) -> tuple[RunResults, RunResults, Rendered]:
    """Validate and render without touching GitHub (also what ``--dry-run`` shows)."""
    for option, url in (("--report-url", report_url), ("--trends-url", trends_url)):
        if url is not None and not _URL.match(url):
            raise UsageError(f"{option} {url[:80]!r}: expected an http(s) URL")
    base, head = validate_outdir(outdir)
    _check_target(repo, pr, sha, head)
    out = (render or functools.partial(trusted_render, trends_url=trends_url,
                                       config_dir=config_dir, db_url=db_url))(
        base, head, report_url)
    body = fit_comment(neutralise(out.body, keep=out.marker))
    return base, head, Rendered(body, neutralise(out.title), out.gating_regression, out.marker)


def _ingest(db_url: str, runs: tuple[RunResults, RunResults]) -> None:
    """Store what a PR job measured as PR runs, whatever the (untrusted) files claim, so that
    they can never pose as nightlies in the trends."""
    store_runs(db_url, *(r.model_copy(update={
        "settings": r.settings.model_copy(update={"trigger": "pr"})}) for r in runs))


def post_outdir(outdir: Path, *, repo: str, pr: int | None, sha: str,
                credentials: Credentials | None, head_label: str | None = None,
                github_url: str | None = None,
                policy: RetryPolicy = DEFAULT_POLICY, only_if_changed: bool = False,
                use_status: bool = False, check_name: str = "compilewatch",
                report_url: str | None = None, trends_url: str | None = None,
                config_dir: Path | None = None, comment_author: str | None = None,
                db_url: str | None = None, dry_run: bool = False,
                render: Renderer | None = None) -> PostReport:
    """Validate ``outdir``, then post one sticky comment and one check (or status).

    ``pr`` None: the PR is the open one whose head is ``sha`` (``head_label`` narrows it).
    """
    if head_label is not None and not _HEAD_LABEL.match(head_label):
        raise UsageError(f"--head-label {head_label[:80]!r}: expected OWNER:BRANCH")
    base, head, rendered = render_outdir(outdir, repo=repo, pr=pr, sha=sha,
                                         report_url=report_url, trends_url=trends_url,
                                         config_dir=config_dir, db_url=db_url,
                                         render=render)
    if dry_run:
        return PostReport(rendered)
    if credentials is None:
        raise UsageError("posting needs credentials (a token or a GitHub App)")
    ingested = False
    if db_url:
        _ingest(db_url, (base, head))
        ingested = True
    repository = open_repo(credentials, repo, base_url=github_url, policy=policy)
    if pr is None:
        pr = find_pull_request(repository, sha, head_label)
        _check_target(repo, pr, sha, head)
    comment = upsert_comment(repository, pr, rendered.body, rendered.marker,
                             only_if_changed=only_if_changed, author=comment_author)
    conclusion = "failure" if rendered.gating_regression else "success"
    try:
        check = set_check(repository, sha, check_name, conclusion, rendered.title,
                          rendered.body, details_url=report_url or comment.url,
                          use_status=use_status)
    except GitHubError as e:
        raise GitHubError(f"the comment was posted ({comment.url}) but the verdict was not: "
                          f"{e}. Run again: the comment is edited in place, not duplicated"
                          ) from e
    return PostReport(rendered, comment, check, ingested)


def post_command(*, outdir: Path, token_env: str, app_id: int | None, app_key_file: Path | None,
                 installation_id: int | None, retries: int, retry_backoff: float, dry_run: bool,
                 **options: Any) -> PostReport:
    """The CLI's ``post``: credentials from the environment; the CLI prints the outcome."""
    credentials = None if dry_run else credentials_from(
        token_env=token_env, app_id=app_id, app_key_file=app_key_file,
        installation_id=installation_id)
    policy = RetryPolicy(retries=retries, backoff_s=retry_backoff)
    return post_outdir(outdir, credentials=credentials, policy=policy, dry_run=dry_run,
                       **options)
