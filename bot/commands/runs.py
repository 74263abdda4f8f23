"""``compilewatch runs``: the stored runs, newest first, with the ids compare and report take."""

from __future__ import annotations

from dataclasses import dataclass

from compilewatch.bot.checkout.git import repository_filter
from compilewatch.db import RunInfo, connect, count_runs, list_runs


@dataclass(frozen=True)
class RunListing:
    """The runs that matched and how many the database holds (to say why a list is empty)."""

    runs: list[RunInfo]
    stored: int
    db_url: str


def runs_command(*, db_url: str | None = None, limit: int = 20, trigger: str | None = None,
                 ref: str | None = None, repo: str | None = None) -> RunListing:
    """The newest ``limit`` runs matching the filters; never creates a database."""
    with connect(db_url, must_exist=True) as db:
        runs = list_runs(db, limit=limit, trigger=trigger, ref=ref,
                         repository=repository_filter(repo))
        return RunListing(runs, count_runs(db), db.url)
