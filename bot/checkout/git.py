"""Thin wrappers over the git CLI: errors become ``GitError`` with git's own message.

Every call runs with hooks, filters, diff drivers and fsmonitor off and an allow-listed
environment (``gitenv.py`` says how and why).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from compilewatch.bot.checkout import gitenv
from compilewatch.core.errors import GitError


class UnsafeRepository(GitError):
    """git refused a repository another user owns (its ``safe.directory`` check)."""


def _run(repo: str | Path, args: tuple[str, ...], network: bool = False) -> bytes:
    """git's stdout; any failure as ``GitError`` with the last line git wrote."""
    try:
        env = gitenv.environment(repo, network)
        out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True,
                             timeout=gitenv.TIMEOUT_S, env=env, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise GitError("git is not installed or not on PATH") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args)} in {repo} took more than "
                       f"{gitenv.TIMEOUT_S} s") from None
    except subprocess.CalledProcessError as e:
        text = os.fsdecode(e.stderr or e.stdout or b"").strip()
        if "detected dubious ownership" in text:
            raise UnsafeRepository(
                f"git refuses {repo}: it is owned by another user, and its configuration "
                "could run that user's commands. If you trust it, add it to your git "
                f"configuration: git config --global --add safe.directory {repo}") from None
        msg = text.splitlines()
        raise GitError(f"git {' '.join(args)} failed in {repo}: "
                       f"{msg[-1][-500:] if msg else e.returncode}") from None
    return out.stdout


def git(repo: str | Path, *args: str, network: bool = False) -> str:
    """git's stdout as text; ``network``: the call reaches a remote (a fetch)."""
    return os.fsdecode(_run(repo, args, network)).strip()


def git_bytes(repo: str | Path, *args: str) -> bytes:
    """git's stdout as it is (a file's bytes from ``git show``)."""
    return _run(repo, args)


def is_repo(path: str | Path) -> bool:
    """A git checkout; one git refuses for its owner is an error, not "no checkout"."""
    try:
        git(path, "rev-parse", "--git-dir")
    except UnsafeRepository:
        raise
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
    git(repo, "fetch", "--no-tags", remote, f"+refs/pull/{number}/head:{local}", network=True)
    return resolve_commit(repo, local)


def changed_paths(repo: str | Path, base: str, head: str) -> list[tuple[str, str]]:
    """``(status, path)`` for every file that differs between two commits (``A``dded,
    ``D``eleted, ``M``odified, ``T`` type changed; a rename is a delete and an add)."""
    out = _run(repo, ("diff", "--name-status", "--no-renames", "--no-ext-diff", "--no-textconv",
                      "-z", base, head))
    fields = [os.fsdecode(f) for f in out.split(b"\0") if f]
    return list(zip(fields[::2], fields[1::2], strict=False))
