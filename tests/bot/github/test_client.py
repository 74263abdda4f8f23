"""The client's retries and error wrapping, with the real PyGithub against the fake."""

from __future__ import annotations

import time

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from github.Repository import Repository

from compilewatch.bot.github.client import (
    Credentials,
    RetryPolicy,
    credentials_from,
    open_repo,
)
from compilewatch.bot.github.sticky import upsert_comment
from compilewatch.core.errors import GitHubError, UsageError
from tests.bot.conftest import FAST
from tests.fakegithub import APP_BOT, PR, REPO, FakeGitHub

MARK = "<!-- test-marker -->"


def test_502_twice_then_200_posts_once(fake_github: FakeGitHub, gh_repo: Repository) -> None:
    fake_github.fail_next(2, status=502, method="POST", path=r"/comments$")
    upsert_comment(gh_repo, PR, "hello", MARK)
    posts = fake_github.calls("POST", r"/issues/\d+/comments$")
    assert [p.status for p in posts] == [502, 502, 201]
    assert len(fake_github.issue_comments(REPO, PR)) == 1


def test_edits_are_retried_too(fake_github: FakeGitHub, gh_repo: Repository) -> None:
    fake_github.add_comment(REPO, PR, f"{MARK}\nold")
    fake_github.fail_next(1, status=500, method="PATCH")
    upsert_comment(gh_repo, PR, "new", MARK)
    assert [p.status for p in fake_github.calls("PATCH", "comments")] == [500, 200]
    assert fake_github.issue_comments(REPO, PR)[0]["body"] == f"{MARK}\nnew"


@pytest.mark.parametrize("kind", ["secondary", "429"])
def test_retry_after_is_honoured(fake_github: FakeGitHub, gh_repo: Repository,
                                 kind: str) -> None:
    fake_github.rate_limit_next(1, kind=kind, retry_after=1, method="GET", path="comments$")
    start = time.monotonic()
    upsert_comment(gh_repo, PR, "hello", MARK)
    assert time.monotonic() - start >= 0.95
    gets = fake_github.calls("GET", r"/comments$")
    assert [g.status for g in gets][:2] == [403 if kind == "secondary" else 429, 200]


def test_primary_rate_limit_waits_for_reset(fake_github: FakeGitHub,
                                            gh_repo: Repository) -> None:
    fake_github.rate_limit_next(1, kind="primary", reset_in=1, method="GET")
    start = time.monotonic()
    upsert_comment(gh_repo, PR, "hello", MARK)
    assert time.monotonic() - start >= 1.0
    assert len(fake_github.issue_comments(REPO, PR)) == 1


def test_rate_limit_longer_than_allowed_fails_fast(fake_github: FakeGitHub,
                                                   gh_repo: Repository) -> None:
    fake_github.rate_limit_next(1, kind="primary", reset_in=600)
    start = time.monotonic()
    with pytest.raises(GitHubError, match="rate limited"):
        upsert_comment(gh_repo, PR, "hello", MARK)
    assert time.monotonic() - start < 5


def test_github_down_is_a_clear_error(fake_github: FakeGitHub, gh_repo: Repository) -> None:
    fake_github.down(502)
    with pytest.raises(GitHubError, match=r"unavailable \(502\) after retries"):
        upsert_comment(gh_repo, PR, "hello", MARK)
    assert [r.status for r in fake_github.requests[1:]] == [502] * (1 + FAST.retries)
    assert fake_github.issue_comments(REPO, PR) == []


def test_unreachable_host_is_a_clear_error(fake_github: FakeGitHub) -> None:
    url = fake_github.base_url
    fake_github.stop()
    policy = RetryPolicy(retries=1, backoff_s=0.01, timeout_s=2)
    with pytest.raises(GitHubError, match="unreachable"):
        open_repo(Credentials(token="x"), REPO, base_url=url, policy=policy)


def test_bad_token_is_not_retried(fake_github: FakeGitHub) -> None:
    with pytest.raises(GitHubError, match="credentials were refused"):
        open_repo(Credentials(token="wrong"), REPO, base_url=fake_github.base_url, policy=FAST)
    assert [r.status for r in fake_github.requests] == [401]


def _rsa_pem() -> tuple[str, bytes]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return private, public


@pytest.mark.parametrize("installation_id", [None, 4242])
def test_github_app_installation_auth(fake_github: FakeGitHub,
                                      installation_id: int | None) -> None:
    private, public = _rsa_pem()
    fake_github.register_app(1234, public, 4242, REPO)
    creds = Credentials(app_id=1234, private_key=private, installation_id=installation_id)
    repo = open_repo(creds, REPO, base_url=fake_github.base_url, policy=FAST)
    upsert_comment(repo, PR, "from the app", MARK)
    assert fake_github.calls("POST", r"/app/installations/4242/access_tokens$")
    assert bool(fake_github.calls("GET", r"/installation$")) == (installation_id is None)
    [comment] = fake_github.issue_comments(REPO, PR)
    assert comment["user"]["login"] == APP_BOT["login"]


def test_app_key_signed_by_another_key_is_refused(fake_github: FakeGitHub) -> None:
    fake_github.register_app(1234, _rsa_pem()[1], 4242, REPO)
    creds = Credentials(app_id=1234, private_key=_rsa_pem()[0], installation_id=4242)
    with pytest.raises(GitHubError, match="credentials were refused"):
        open_repo(creds, REPO, base_url=fake_github.base_url, policy=FAST)


def test_credentials_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_TOKEN", " ghp_abc \n")
    assert credentials_from(token_env="MY_TOKEN").token == "ghp_abc"
    assert "ghp_abc" not in repr(credentials_from(token_env="MY_TOKEN"))
    monkeypatch.delenv("MY_TOKEN")
    with pytest.raises(UsageError, match=r"\$MY_TOKEN"):
        credentials_from(token_env="MY_TOKEN")
    with pytest.raises(UsageError, match="--app-key-file"):
        credentials_from(app_id=1)
