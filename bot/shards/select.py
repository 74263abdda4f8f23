"""One shard's jobs: the group's plan from the stored durations, and this shard's part of it.
A filter on the job list before the measuring loop; the loop itself knows nothing of shards."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from compilewatch.bot.shards.plan import ShardOptions, default_group, plan, record
from compilewatch.compiler.plan import Job
from compilewatch.core.results_file import load_results
from compilewatch.core.schema import RunResults
from compilewatch.db import connect, model_durations
from compilewatch.db.durations import ident_of
from compilewatch.db.engine import resolve_url, sqlite_file


def job_ident(job: Job) -> str:
    return ident_of(job.suite.name, job.spec.name, job.config.slug)


def stored_durations(db_url: str | None, group: str | None, fingerprint: str | None = None
                     ) -> dict[str, float]:
    """Durations from the database, or none (an even split by count) where there is no
    database yet. Every shard of a group must read the same history: runs of the group itself
    are left out (``model_durations``; ``group`` None: none left out)."""
    path = sqlite_file(resolve_url(db_url))
    if path is not None and not path.is_file():
        return {}  # a server that cannot be reached is an error: shards must agree on the plan
    with connect(db_url, must_exist=True) as db:
        return model_durations(db, fingerprint=fingerprint, exclude_group=group)


@dataclass
class ShardPlan:
    """This shard's place in its group, and the clock its record reports."""

    opts: ShardOptions
    group: str
    shards: list[list[str]]
    balanced_by: str
    started: float = field(default_factory=time.monotonic)

    @property
    def mine(self) -> set[str]:
        return set(self.shards[self.opts.index])

    def keep(self, jobs: Sequence[Job]) -> list[Job]:
        mine = self.mine
        return [j for j in jobs if job_ident(j) in mine]

    def stamp(self, results: RunResults) -> RunResults:
        """``results`` with this shard's record (``finished_at`` says whether it ended)."""
        finished = results.finished_at is not None
        rec = record(self.opts, self.group, self.shards, self.balanced_by,
                     run_id=results.run_id, wall_s=round(time.monotonic() - self.started, 3),
                     models=len(results.results), finished=finished)
        return results.model_copy(update={"shards": rec})


def file_durations(paths: Iterable[str]) -> dict[str, float]:
    """``suite/model/config`` -> ``duration_s`` from results files (strictly validated; the
    last file that has a job wins), for a runner that has no database."""
    out: dict[str, float] = {}
    for path in paths:
        for r in load_results(path).results:
            if r.duration_s > 0:
                out[ident_of(r.suite, r.model, r.config.slug)] = r.duration_s
    return out


def plan_shard(opts: ShardOptions, jobs: Iterable[Sequence[Job]], *, db_url: str | None,
               no_db: bool = False, group_parts: Sequence[str] = ()) -> ShardPlan | None:
    """The group's plan over the union of ``jobs`` (one list per side: a model a change adds is
    planned like the others), or None when not sharded."""
    if not opts.on:
        return None
    group = opts.group or default_group(None, *group_parts, str(opts.count))
    idents = {job_ident(j) for side in jobs for j in side}
    durations = file_durations(opts.durations) if opts.durations \
        else {} if no_db else stored_durations(db_url, group)
    shards, by = plan(idents, opts.count, durations)
    return ShardPlan(opts, group, shards, by)


def stamped(shard: ShardPlan | None, results: RunResults) -> RunResults:
    """``results`` with the shard's record, or as they are when not sharded."""
    return results if shard is None else shard.stamp(results)


def empty_shard(results: RunResults) -> bool:
    """A shard the plan gave no job (more shards than jobs): measuring nothing is its due."""
    sh = results.shards
    return sh is not None and sh.index is not None and not sh.plan[sh.index]
