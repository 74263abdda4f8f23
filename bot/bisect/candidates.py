"""What a bisection searches: the first-parent history between two commits, or a list of
interpreters (one torch build each, oldest first) for one commit.

Both are resolved and checked before anything is measured: a typo in a ref, a good end that is
not on the bad end's first-parent line, an interpreter that does not exist, each exits 2 with
what to fix.
"""

from __future__ import annotations

import os
from pathlib import Path

from compilewatch.bot.checkout import git as gitutil
from compilewatch.bot.judge.bisection import Candidate
from compilewatch.core.errors import GitError, UsageError

MAX_PYTHONS = 256
_SEP = "\x1f"


def commits_between(repo: Path, good: str, bad: str, within: str | None = None
                    ) -> list[Candidate]:
    """The good end, then every commit of the bad end's first-parent history after it,
    oldest first. ``within``: both ends must be on that ref's history (a workflow bisects
    only what its branch holds)."""
    g, b = gitutil.resolve_commit(repo, good), gitutil.resolve_commit(repo, bad)
    if g == b:
        raise UsageError(f"--good {good} and --bad {bad} are the same commit ({g[:12]}): "
                         "nothing to bisect")
    if within is not None:
        limit = gitutil.resolve_commit(repo, within)
        for flag, ref, commit in (("--good", good, g), ("--bad", bad, b)):
            if not _is_ancestor(repo, commit, limit):
                raise UsageError(f"{flag} {ref} ({commit[:12]}) is not on the history of "
                                 f"{within}: only commits it holds are bisected here")
    if not _is_ancestor(repo, g, b):
        raise UsageError(f"--good {good} ({g[:12]}) is not an ancestor of --bad {bad} "
                         f"({b[:12]}): pass the older commit as --good")
    log = gitutil.git(repo, "log", "--first-parent", "--reverse", "--no-decorate",
                      f"--format=%H{_SEP}%s", f"{g}..{b}")
    rows = [line.split(_SEP, 1) for line in log.splitlines() if line]
    first_parent = gitutil.git(repo, "rev-parse", f"{rows[0][0]}^1") if rows else ""
    if first_parent != g:
        raise UsageError(f"--good {good} ({g[:12]}) is not on the first-parent history of "
                         f"--bad {bad}: it came in through a merge's second parent; pass "
                         "the merge's first parent (or the merge itself) as --good")
    subject = gitutil.git(repo, "log", "-1", "--format=%s", g)
    return [Candidate(index=0, commit=g, subject=subject[:512]),
            *(Candidate(index=i, commit=h, subject=s[:512])
              for i, (h, s) in enumerate(rows, start=1))]


def _is_ancestor(repo: Path, older: str, newer: str) -> bool:
    try:
        gitutil.git(repo, "merge-base", "--is-ancestor", older, newer)
    except GitError:
        return False
    return True


def read_pythons(path: Path) -> list[Candidate]:
    """``--pythons FILE``: one interpreter a line, oldest torch build first (``#`` comments
    and blank lines ignored); each must be an executable file, at least two in all."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--pythons {path}: cannot read it ({e})") from None
    found: list[Candidate] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        python = Path(line).expanduser()
        if not python.is_absolute():
            python = (path.parent / python).absolute()
        if not python.is_file() or not os.access(python, os.X_OK):
            raise UsageError(f"--pythons {path}, line {number}: {line!r} is not an "
                             "executable interpreter")
        found.append(Candidate(index=len(found), python=str(python)[:512]))
    if len(found) < 2:
        raise UsageError(f"--pythons {path}: lists {len(found)} interpreter(s); a bisection "
                         "needs two at least (the good build first, the bad one last)")
    if len(found) > MAX_PYTHONS:
        raise UsageError(f"--pythons {path}: {len(found)} interpreters, more than "
                         f"{MAX_PYTHONS}")
    return found


def with_torch(candidate: Candidate, torch: str) -> Candidate:
    """A build's candidate once its interpreter said which torch it has."""
    return candidate.model_copy(update={"torch": torch[:512]})
