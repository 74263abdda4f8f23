"""Thin wrappers over the git CLI: errors become ``GitError`` with git's own message."""

from __future__ import annotations

import subprocess
from pathlib import Path

from compilewatch.compiler.errors import GitError


def git(repo: str | Path, *args: str) -> str:
    try:
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                             check=True, timeout=120)
    except FileNotFoundError:
        raise GitError("git is not installed or not on PATH") from None
    except subprocess.CalledProcessError as e:
        msg = (e.stderr or e.stdout or "").strip().splitlines()
        raise GitError(f"git {' '.join(args)} failed in {repo}: "
                       f"{msg[-1] if msg else e.returncode}") from None
    return out.stdout.strip()


def is_repo(path: str | Path) -> bool:
    try:
        git(path, "rev-parse", "--git-dir")
    except GitError:
        return False
    return True


def head_info(repo: str | Path) -> dict[str, object]:
    """Commit, branch and dirtiness of a checkout (for the results' ``git`` block)."""
    commit = git(repo, "rev-parse", "HEAD")
    ref = git(repo, "rev-parse", "--abbrev-ref", "HEAD")
    dirty = bool(git(repo, "status", "--porcelain", "--untracked-files=no"))
    return {"commit": commit, "ref": None if ref == "HEAD" else ref, "dirty": dirty}
