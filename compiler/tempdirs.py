"""Temp folders that name their owner, so that a SIGKILLed run's are removed by the next run.

Every temp folder compilewatch makes (a run's, a listing's, a download's, the worktrees of a
``pr``) is ``compilewatch-*`` with an ``owner`` file: the pid and start time of the process
that made it. A folder whose owner is gone is removed by ``clean_stale``; one without an owner
file is not ours to remove.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from compilewatch.compiler import proctree

PREFIX = "compilewatch-"
OWNER = "owner"


def owned_tempdir(prefix: str) -> Path:
    """A new temp folder named ``prefix…`` (``prefix`` starts with ``compilewatch-``) that
    names this process as its owner."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    (root / OWNER).write_text(f"{os.getpid()} {proctree.start_time(os.getpid())}")
    return root


@contextlib.contextmanager
def owned_temporary(prefix: str) -> Iterator[Path]:
    """``owned_tempdir``, removed when the block ends."""
    root = owned_tempdir(prefix)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def owner_alive(root: Path) -> bool | None:
    """Whether the process named in ``root/owner`` lives; None without a readable owner."""
    try:
        pid, started = (int(x) for x in (root / OWNER).read_text().split())
    except (OSError, ValueError):
        return None
    return proctree.start_time(pid) == started


def clean_stale(tmp: Path | None = None) -> list[Path]:
    """Remove our temp folders whose owner is gone."""
    removed = []
    for root in Path(tmp or tempfile.gettempdir()).glob(f"{PREFIX}*"):
        if root.is_dir() and not root.is_symlink() and owner_alive(root) is False:
            shutil.rmtree(root, ignore_errors=True)
            removed.append(root)
    return removed
