"""Thin wrappers over the git CLI: errors become ``GitError`` with git's own message."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from compilewatch.core.errors import GitError


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
    """Commit, branch, repository and dirtiness of a checkout (for the results' ``git``
    block); empty outside a git checkout (a run of an unversioned directory records no git
    block)."""
    if not is_repo(repo):
        return {}
    commit = git(repo, "rev-parse", "HEAD")
    ref = git(repo, "rev-parse", "--abbrev-ref", "HEAD")
    dirty = bool(git(repo, "status", "--porcelain", "--untracked-files=no"))
    return {"commit": commit, "ref": None if ref == "HEAD" else ref, "dirty": dirty,
            "repository": repository_of(repo)}


MAX_REPOSITORY = 256  # characters: the schema's Short


def repository_name(remote_url: str) -> str | None:
    """OWNER/NAME of a remote URL (https, ssh, scp-like ``git@host:owner/name.git``, a path):
    its last two path parts, without ``.git``."""
    url = remote_url.strip().rstrip("/")
    if "://" not in url and ":" in url and not url.startswith("/"):
        url = url.split(":", 1)[1]  # scp-like: git@github.com:owner/name.git
    elif "://" in url:
        url = url.split("://", 1)[1].split("/", 1)[-1] if "/" in url.split("://", 1)[1] else ""
    parts = [p for p in url.removesuffix(".git").split("/") if p and p not in (".", "..")]
    return "/".join(parts[-2:]) if len(parts) >= 2 else (parts[0] if parts else None)


def repository_of(repo: str | Path) -> str | None:
    """What a checkout measures, so that runs of different repositories sharing one database
    stay apart: OWNER/NAME of its ``origin`` remote, else the checkout's own path."""
    try:
        name = repository_name(git(repo, "remote", "get-url", "origin"))
    except GitError:
        name = None
    if name is None:
        try:
            name = git(repo, "rev-parse", "--show-toplevel")
        except GitError:
            return None
    return name[-MAX_REPOSITORY:]


def repository_filter(value: str | None) -> str | None:
    """A ``--repo`` filter of ``runs`` and ``trends``: OWNER/NAME as stored, or a checkout
    directory (``--repo .``) standing for the repository it measures."""
    if value is None or value == "*":
        return None
    if Path(value).is_dir():
        name = repository_of(value) if is_repo(value) else None
        if name is None:
            raise GitError(f"--repo {value}: a directory that is not a git checkout; pass "
                           "OWNER/NAME")
        return name
    return value


def resolve_commit(repo: str | Path, ref: str) -> str:
    """Full commit id of ``ref``; a typo fails here, before anything is measured."""
    if not is_repo(repo):
        raise GitError(f"{repo} is not a git repository; pass --repo with a checkout")
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except GitError:
        raise GitError(f"{ref!r} is not a commit, branch or tag in {repo}; check the name or "
                       "fetch it first") from None


def merge_base(repo: str | Path, base: str, head: str) -> str:
    """Where ``head`` forked from ``base``: measuring there shows only what the PR changed."""
    try:
        return git(repo, "merge-base", base, head)
    except GitError:
        raise GitError(f"{base[:12]} and {head[:12]} share no history in {repo}") from None


def fetch_pr_head(repo: str | Path, number: int, remote: str = "origin") -> str:
    """Commit of PR ``number``: ``refs/pull/N/head`` fetched once into ``refs/compilewatch/pr/N``.

    GitHub publishes every PR (forks included) under ``refs/pull/N/head`` on the base
    repository, but a clone does not fetch those refs by default.
    """
    local = f"refs/compilewatch/pr/{number}"
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{local}^{{commit}}")
    except GitError:
        pass
    git(repo, "fetch", "--no-tags", remote, f"+refs/pull/{number}/head:{local}")
    return resolve_commit(repo, local)


def changed_paths(repo: str | Path, base: str, head: str) -> list[tuple[str, str]]:
    """``(status, path)`` for every file that differs between two commits (``A``dded,
    ``D``eleted, ``M``odified, ``T`` type changed; a rename is a delete and an add)."""
    try:
        out = subprocess.run(["git", "-C", str(repo), "diff", "--name-status", "--no-renames",
                              "--no-ext-diff", "--no-textconv", "-z", base, head],
                             capture_output=True, check=True, timeout=120).stdout
    except FileNotFoundError:
        raise GitError("git is not installed or not on PATH") from None
    except subprocess.CalledProcessError as e:
        raise GitError(f"git diff {base[:12]} {head[:12]} failed in {repo}: "
                       f"{os.fsdecode(e.stderr).strip()[-500:]}") from None
    fields = [os.fsdecode(f) for f in out.split(b"\0") if f]
    return list(zip(fields[::2], fields[1::2], strict=False))
