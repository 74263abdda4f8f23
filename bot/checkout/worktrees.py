"""Temporary detached worktrees, so each side is measured from its own files.

A worktree shares the object store (no clone), and ``git worktree remove`` plus ``prune``
leaves the user's repository as it was, also when measuring failed.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

from compilewatch.bot.checkout.git import git
from compilewatch.compiler.tempdirs import owned_tempdir
from compilewatch.core.errors import GitError


@contextmanager
def worktrees(repo: Path, commits: Mapping[str, str]) -> Iterator[dict[str, Path]]:
    """Check out each ``name -> commit`` detached under one temp dir; always removed after."""
    root = owned_tempdir("compilewatch-pr-").resolve()
    made: list[Path] = []
    try:
        paths: dict[str, Path] = {}
        for name, commit in commits.items():
            path = root / name
            git(repo, "worktree", "add", "--detach", "--quiet", str(path), commit)
            made.append(path)
            paths[name] = path
        yield paths
    finally:
        _remove(repo, made, root)


def _remove(repo: Path, made: list[Path], root: Path) -> None:
    """Best effort: a cleanup failure must not hide the error that got us here."""
    for path in made:
        with suppress(GitError):
            git(repo, "worktree", "remove", "--force", str(path))
    shutil.rmtree(root, ignore_errors=True)
    with suppress(GitError):
        git(repo, "worktree", "prune")
