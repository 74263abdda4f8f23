"""Fixtures for the GitHub-facing tests: a fresh fake GitHub per test and a fast client."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from github.Repository import Repository

from compilewatch.bot.github.client import Credentials, RetryPolicy, open_repo
from tests.fakegithub import HEAD_SHA, PR, REPO, TOKEN, FakeGitHub

# Short waits so that retry tests stay fast; Retry-After in tests is 1 s at most.
FAST = RetryPolicy(retries=3, backoff_s=0.02, max_wait_s=5.0, timeout_s=5.0)


@pytest.fixture
def fake_github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(token=TOKEN).start()
    fake.add_pull(REPO, PR, HEAD_SHA)
    yield fake
    fake.stop()


@pytest.fixture
def gh_repo(fake_github: FakeGitHub) -> Repository:
    """The real PyGithub client, talking to the fake through ``base_url``."""
    return open_repo(Credentials(token=TOKEN), REPO, base_url=fake_github.base_url, policy=FAST)
