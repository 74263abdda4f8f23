"""A throwaway git repository with a base and a head commit, for the benchmarks that run
``compilewatch pr`` end to end."""

from __future__ import annotations

import subprocess
from pathlib import Path


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def make_repo(root: Path, base: dict[str, str], head: dict[str, str]) -> Path:
    """``main`` holds ``base``'s files; branch ``head`` changes them to ``head``'s."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "bench@example.invalid")
    _git(repo, "config", "user.name", "bench")
    for name, text in base.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    branch(repo, "head", head)
    return repo


def branch(repo: Path, name: str, files: dict[str, str]) -> None:
    """A branch off ``main`` that changes ``files``."""
    _git(repo, "checkout", "-qb", name, "main")
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", name)
    _git(repo, "checkout", "-q", "main")
