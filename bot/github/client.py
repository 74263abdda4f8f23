"""PyGithub client factory: authentication, retries, and the one place GitHub errors are wrapped.

Retries are PyGithub's own ``GithubRetry`` (a urllib3 ``Retry``): 5xx, 429 and rate-limit 403s are
retried with exponential backoff, ``Retry-After`` is honoured, and a primary rate limit waits for
``X-RateLimit-Reset``. Writes (POST/PATCH) are retried too: the sticky comment removes a duplicate
that a retried POST may leave. Anything that still fails becomes ``GitHubError`` with a message
that says what to do next.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import github
import requests
from github import Auth, GithubException, GithubRetry
from github.GithubException import RateLimitExceededExceedsMaxWait
from github.Repository import Repository

from compilewatch.core.errors import GitHubError, UsageError

DEFAULT_API_URL = "https://api.github.com"
RETRY_METHODS = frozenset({"GET", "HEAD", "POST", "PATCH", "PUT", "DELETE"})


@dataclass(frozen=True)
class Credentials:
    """A token, or a GitHub App (id + private key) acting through one installation."""

    token: str | None = None
    app_id: int | None = None
    private_key: str | None = None
    installation_id: int | None = None

    def __repr__(self) -> str:  # never print secrets
        kind = "app" if self.app_id is not None else "token"
        return f"Credentials({kind})"


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try before giving up; ``backoff_s`` doubles per consecutive failure."""

    retries: int = 5
    backoff_s: float = 2.0
    max_wait_s: float = 300.0
    timeout_s: float = 30.0
    # Pause between writes. A run makes a handful, and a secondary rate limit, if hit, is
    # retried after its Retry-After; raise this for bulk publishing.
    write_interval_s: float = 0.0


DEFAULT_POLICY = RetryPolicy()


def credentials_from(*, token_env: str = "GITHUB_TOKEN", app_id: int | None = None,
                     app_key_file: Path | None = None,
                     installation_id: int | None = None) -> Credentials:
    """Read credentials from the environment or a key file, never from the command line."""
    if app_id is not None:
        if app_key_file is None:
            raise UsageError("--app-id needs --app-key-file (the App's private key, PEM)")
        try:
            key = Path(app_key_file).read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"{app_key_file}: cannot read the App key: {e.strerror}") from None
        return Credentials(app_id=app_id, private_key=key, installation_id=installation_id)
    token = os.environ.get(token_env, "").strip()
    if not token:
        raise UsageError(f"no GitHub token: set ${token_env} (or use --app-id/--app-key-file)")
    return Credentials(token=token)


def make_retry(policy: RetryPolicy) -> GithubRetry:
    wait = policy.max_wait_s
    return GithubRetry(
        total=policy.retries, backoff_factor=policy.backoff_s / 2, backoff_max=wait,
        status_forcelist=[*range(500, 600), 429], allowed_methods=RETRY_METHODS,
        respect_retry_after_header=True, retry_after_max=int(wait), raise_on_status=False,
        max_rate_limit_wait=wait, secondary_rate_wait=min(60.0, wait),
    )


def connect(credentials: Credentials, *, repo: str, base_url: str | None = None,
            policy: RetryPolicy = DEFAULT_POLICY) -> github.Github:
    """A client for ``base_url`` (GitHub Enterprise: ``https://HOST/api/v3``)."""
    url = (base_url or DEFAULT_API_URL).rstrip("/")
    common = dict(base_url=url, retry=make_retry(policy), timeout=int(policy.timeout_s),
                  per_page=100, seconds_between_requests=None,
                  seconds_between_writes=policy.write_interval_s or None)
    if credentials.token is not None:
        return github.Github(auth=Auth.Token(credentials.token), **common)  # type: ignore[arg-type]
    assert credentials.app_id is not None and credentials.private_key is not None
    app = Auth.AppAuth(credentials.app_id, credentials.private_key)
    installation = credentials.installation_id
    if installation is None:
        owner, name = split_repo(repo)
        integration = github.GithubIntegration(auth=app, **common)  # type: ignore[arg-type]
        with github_errors(f"find the App installation on {repo}"):
            installation = integration.get_repo_installation(owner, name).id
    return github.Github(auth=app.get_installation_auth(installation), **common)  # type: ignore[arg-type]


def open_repo(credentials: Credentials, repo: str, *, base_url: str | None = None,
              policy: RetryPolicy = DEFAULT_POLICY) -> Repository:
    """Connect and fetch ``repo``: the first request, so bad credentials or URLs fail here."""
    gh = connect(credentials, repo=repo, base_url=base_url, policy=policy)
    with github_errors(f"open repository {repo}"):
        return gh.get_repo(repo)


def split_repo(repo: str) -> tuple[str, str]:
    owner, sep, name = repo.partition("/")
    if not sep or not owner or not name or "/" in name:
        raise UsageError(f"--repo {repo!r}: expected OWNER/NAME")
    return owner, name


def _explain(status: int, message: str) -> str:
    if status == 401:
        return "the credentials were refused (401): check the token or the App key"
    if status == 403:
        return (f"forbidden (403: {message}): the token lacks a permission "
                "(pull-requests: write, checks: write or contents: write)")
    if status == 404:
        return "not found (404): check --repo, --pr and that the token can see the repository"
    if status == 422:
        return f"GitHub rejected the request (422: {message})"
    if status == 429 or message.lower().startswith(("api rate limit", "you have exceeded")):
        return f"still rate limited after retries ({status}: {message}); run again later"
    if status >= 500:
        return f"GitHub stayed unavailable ({status}) after retries; run again later"
    return f"GitHub answered {status}: {message}"


def status_of(exc: GitHubError) -> int | None:
    """The HTTP status behind a wrapped error (None for a network failure)."""
    cause = exc.__cause__
    return cause.status if isinstance(cause, GithubException) else None


@contextlib.contextmanager
def github_errors(action: str) -> Iterator[None]:
    """Wrap PyGithub and network errors raised while doing ``action`` into ``GitHubError``."""
    try:
        yield
    except RateLimitExceededExceedsMaxWait as e:
        raise GitHubError(f"cannot {action}: rate limited for {e.wait:.0f}s more, over the "
                          "allowed wait; run again later") from e
    except GithubException as e:
        message = e.message or (e.data.get("message", "") if isinstance(e.data, dict) else "")
        raise GitHubError(f"cannot {action}: {_explain(e.status, str(message))}") from e
    except requests.RequestException as e:
        raise GitHubError(f"cannot {action}: GitHub is unreachable ({type(e).__name__}: "
                          f"{_short(str(e))}); check --github-url and the network") from e


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def open_github(repo: str, token_env: str, github_url: str | None) -> Repository:
    """``OWNER/NAME`` opened with the token in ``token_env`` (never a token on the command line)."""
    return open_repo(credentials_from(token_env=token_env), repo, base_url=github_url)
