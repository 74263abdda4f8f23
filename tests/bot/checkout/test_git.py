"""The repository a run measured: OWNER/NAME of ``origin``, else the checkout's path."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from compilewatch.bot.checkout.git import head_info, repository_filter, repository_name
from compilewatch.core.errors import GitError


@pytest.mark.parametrize(("url", "name"), [
    ("https://github.com/pytorch/pytorch.git", "pytorch/pytorch"),
    ("https://github.com/pytorch/pytorch", "pytorch/pytorch"),
    ("https://ghe.example/api/x/acme/models/", "acme/models"),
    ("git@github.com:acme/models.git", "acme/models"),
    ("ssh://git@github.com:22/acme/models.git", "acme/models"),
    ("/srv/git/acme/models.git", "acme/models"),
    ("file:///srv/git/models.git", "git/models"),
])
def test_repository_name_of_a_remote_url(url: str, name: str) -> None:
    assert repository_name(url) == name


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "checkout"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.email=a@b.c", "-c", "user.name=a", "commit", "-q", "--allow-empty",
         "-m", "A")
    return repo


def test_head_info_records_the_repository(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    assert head_info(repo)["repository"] == str(repo.resolve())  # no remote: its path
    _git(repo, "remote", "add", "origin", "git@github.com:acme/models.git")
    info = head_info(repo)
    assert info["repository"] == "acme/models" and info["ref"] == "main"
    assert head_info(tmp_path) == {}  # not a checkout


def test_repo_filter_takes_a_name_or_a_checkout(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _git(repo, "remote", "add", "origin", "https://github.com/acme/models")
    assert repository_filter("acme/models") == "acme/models"
    assert repository_filter(str(repo)) == "acme/models"
    assert repository_filter(None) is None and repository_filter("*") is None
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(GitError, match="not a git checkout"):
        repository_filter(str(plain))
