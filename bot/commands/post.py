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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from github.Repository import Repository

from compilewatch.bot.bisect.posting import is_bisect_dir, load_bisect_dir, render_comment
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
from compilewatch.bot.github.outdir import DIAGNOSTICS, FILE_LIMITS, REQUIRED
from compilewatch.bot.github.sticky import CommentResult, fit_comment, upsert_comment
from compilewatch.bot.history.nightly_values import nightly_values
from compilewatch.bot.history.noise import noise_bands
from compilewatch.bot.judge.project import compare_with_project
from compilewatch.bot.render.formats import MARKER, render
from compilewatch.bot.render.neutralise import neutralise
from compilewatch.bot.shards.merge import check_pair, merge_if_sharded
from compilewatch.core.errors import GitHubError, ResultsFileError, UsageError
from compilewatch.core.results_file import load_results
from compilewatch.core.schema import MAX_SHARDS, RunResults
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
    bisection: bool = False  # a bisection's report: a comment, no check


@dataclass(frozen=True)
class PostRequest:
    """What to post where: the output folder of a ``pr`` job and the trusted event's target
    (``pr`` None: the open PR whose head is ``sha``, narrowed by ``head_label``), with how the
    comment is judged and linked and how the verdict is reported."""

    outdir: Path | Sequence[Path]  # several: the shards of one group, merged per side
    repo: str
    sha: str | None = None  # a pr's head, which the check goes on (a bisection posts none)
    pr: int | None = None
    issue: int | None = None  # a bisection's report may go on an issue instead of a PR
    head_label: str | None = None
    report_url: str | None = None
    trends_url: str | None = None
    config_dir: Path | None = None  # a trusted checkout whose thresholds and baseline judge
    db_url: str | None = None
    github_url: str | None = None
    check_name: str = "compilewatch"
    use_status: bool = False
    only_if_changed: bool = False
    comment_author: str | None = None
    dry_run: bool = False


@dataclass(frozen=True)
class Auth:
    """Where ``post`` finds its credentials (never a token on the command line) and how it
    retries GitHub."""

    token_env: str = "GITHUB_TOKEN"
    app_id: int | None = None
    app_key_file: Path | None = None
    installation_id: int | None = None
    retries: int = 5
    retry_backoff: float = 2.0


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


def validate_outdirs(outdirs: Path | Sequence[Path]) -> tuple[RunResults, RunResults]:
    """One output directory, or one per shard of a group (``pr --shard``): each checked as
    above, then each side's shards merged (a shard that sent nothing is insufficient data)."""
    dirs = [outdirs] if isinstance(outdirs, Path | str) else list(outdirs)
    if not 1 <= len(dirs) <= MAX_SHARDS:
        raise UsageError(f"post takes 1 to {MAX_SHARDS} output directories, not {len(dirs)}")
    pairs = [validate_outdir(Path(d)) for d in dirs]
    base, head = merge_if_sharded([b for b, _ in pairs]), merge_if_sharded([h for _, h in pairs])
    check_pair(base, head)  # both sides one pr's shards: one group, one plan
    return base, head


def _check_repo(repo: str) -> None:
    if not _REPO.match(repo):
        raise UsageError(f"--repo {repo!r}: expected OWNER/NAME")
    split_repo(repo)


def _check_target(repo: str, pr: int | None, sha: str | None, head: RunResults) -> None:
    """The PR and commit come from the trusted event; the artifact must agree with them."""
    _check_repo(repo)
    if pr is not None and pr < 1:
        raise UsageError(f"--pr {pr}: must be a positive number")
    if sha is None:
        raise UsageError("--sha is required to post a pr's output (the commit its check goes "
                         "on)")
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


def _check_urls(req: PostRequest) -> None:
    for option, url in (("--report-url", req.report_url), ("--trends-url", req.trends_url)):
        if url is not None and not _URL.match(url):
            raise UsageError(f"{option} {url[:80]!r}: expected an http(s) URL")


def render_outdir(req: PostRequest, render: Renderer | None = None
                  ) -> tuple[RunResults, RunResults, Rendered]:
    """Validate and render without touching GitHub (also what ``--dry-run`` shows)."""
    _check_urls(req)
    if req.issue is not None:
        raise UsageError("--issue takes a bisection's output (bisect.json); a pr's output "
                         "goes on its pull request (--pr)")
    base, head = validate_outdirs(req.outdir)
    _check_target(req.repo, req.pr, req.sha, head)
    out = (render or functools.partial(trusted_render, trends_url=req.trends_url,
                                       config_dir=req.config_dir, db_url=req.db_url))(
        base, head, req.report_url)
    body = fit_comment(neutralise(out.body, keep=out.marker))
    return base, head, Rendered(body, neutralise(out.title), out.gating_regression, out.marker)


def _ingest(db_url: str, runs: tuple[RunResults, RunResults]) -> None:
    """Store what a PR job measured as PR runs, whatever the (untrusted) files claim, so that
    they can never pose as nightlies in the trends."""
    store_runs(db_url, *(r.model_copy(update={
        "settings": r.settings.model_copy(update={"trigger": "pr"})}) for r in runs))


def _bisect_dir(req: PostRequest) -> Path | None:
    """The folder, where ``req.outdir`` is one bisection's output."""
    dirs = [req.outdir] if isinstance(req.outdir, Path | str) else list(req.outdir)
    if len(dirs) == 1 and is_bisect_dir(Path(dirs[0])):
        return Path(dirs[0])
    return None


def render_bisect(req: PostRequest, outdir: Path) -> Rendered:
    """A bisection's comment, validated and rendered here; its one target checked."""
    _check_repo(req.repo)
    _check_urls(req)
    if req.sha is not None:
        raise UsageError("--sha names the commit a pr's check goes on; a bisection's report "
                         "is a comment only: leave it out")
    if (req.pr is None) == (req.issue is None):
        raise UsageError("a bisection's report goes on one pull request or issue: pass --pr N "
                         "or --issue N")
    body, title, mark = render_comment(load_bisect_dir(outdir))
    return Rendered(fit_comment(body), title, False, mark)


def _post_bisect(req: PostRequest, outdir: Path, credentials: Credentials | None,
                 policy: RetryPolicy) -> PostReport:
    rendered = render_bisect(req, outdir)
    if req.dry_run:
        return PostReport(rendered, bisection=True)
    if credentials is None:
        raise UsageError("posting needs credentials (a token or a GitHub App)")
    repository = open_repo(credentials, req.repo, base_url=req.github_url, policy=policy)
    number = req.issue if req.issue is not None else req.pr
    assert number is not None
    comment = upsert_comment(repository, number, rendered.body, rendered.marker,
                             only_if_changed=req.only_if_changed, author=req.comment_author)
    return PostReport(rendered, comment, bisection=True)


def post_outdir(req: PostRequest, *, credentials: Credentials | None,
                policy: RetryPolicy = DEFAULT_POLICY, render: Renderer | None = None
                ) -> PostReport:
    """Validate ``req.outdir``, then post one sticky comment and one check (or status); a
    bisection's folder: its comment alone, on ``req.pr`` or ``req.issue``."""
    bisect = _bisect_dir(req)
    if bisect is not None:
        return _post_bisect(req, bisect, credentials, policy)
    if req.head_label is not None and not _HEAD_LABEL.match(req.head_label):
        raise UsageError(f"--head-label {req.head_label[:80]!r}: expected OWNER:BRANCH")
    base, head, rendered = render_outdir(req, render)
    if req.dry_run:
        return PostReport(rendered)
    if credentials is None:
        raise UsageError("posting needs credentials (a token or a GitHub App)")
    ingested = False
    if req.db_url:
        _ingest(req.db_url, (base, head))
        ingested = True
    repository = open_repo(credentials, req.repo, base_url=req.github_url, policy=policy)
    pr = req.pr
    if pr is None:
        assert req.sha is not None  # _check_target refused a pr's output without one
        pr = find_pull_request(repository, req.sha, req.head_label)
        _check_target(req.repo, pr, req.sha, head)
    comment = upsert_comment(repository, pr, rendered.body, rendered.marker,
                             only_if_changed=req.only_if_changed, author=req.comment_author)
    conclusion = "failure" if rendered.gating_regression else "success"
    assert req.sha is not None
    try:
        check = set_check(repository, req.sha, req.check_name, conclusion, rendered.title,
                          rendered.body, details_url=req.report_url or comment.url,
                          use_status=req.use_status)
    except GitHubError as e:
        raise GitHubError(f"the comment was posted ({comment.url}) but the verdict was not: "
                          f"{e}. Run again: the comment is edited in place, not duplicated"
                          ) from e
    return PostReport(rendered, comment, check, ingested)


def post_command(req: PostRequest, auth: Auth = Auth()) -> PostReport:
    """The CLI's ``post``: credentials from the environment; the CLI prints the outcome."""
    credentials = None if req.dry_run else credentials_from(
        token_env=auth.token_env, app_id=auth.app_id, app_key_file=auth.app_key_file,
        installation_id=auth.installation_id)
    policy = RetryPolicy(retries=auth.retries, backoff_s=auth.retry_backoff)
    return post_outdir(req, credentials=credentials, policy=policy)
