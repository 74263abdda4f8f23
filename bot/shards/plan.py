"""The split of a suite's jobs over N shards, computed by every shard alone.

Longest-processing-time first (Graham's LPT): jobs sorted by their stored duration, longest
first, each given to the shard with the least work so far. LPT's makespan is at most 4/3 of the
optimum; with many more jobs than shards it is close to total / N. Jobs without a stored
duration get the median of those with one; with none stored at all, the split is even by count
(round-robin over the sorted idents). Ties are broken by the ident, then the lowest shard index,
so the same idents and durations give every shard the same plan.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import re
import socket
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from compilewatch.core.errors import UsageError
from compilewatch.core.schema import MAX_SHARDS, Sharding, ShardRun

_SHARD = re.compile(r"^(\d{1,3})/(\d{1,3})$")
_GROUP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


@dataclass(frozen=True)
class ShardOptions:
    """``--shard I/N`` (I counted from 1, as a matrix's ``strategy.job-index`` + 1) and
    ``--group ID``; ``count`` 0: not sharded."""

    index: int = 0  # from 0
    count: int = 0
    group: str | None = None
    # results files whose durations plan the split (and the order models start in) instead of
    # the database (a runner without one: a PR's, with the nightly's results.json)
    durations: tuple[str, ...] = ()

    @property
    def on(self) -> bool:
        return self.count > 0


def parse_shard(text: str | None, group: str | None = None,
                durations: tuple[str, ...] = ()) -> ShardOptions:
    """``"2/4"`` -> the second of four shards (index 1)."""
    if text is None:  # unsharded, durations still order the loop (longest first)
        if group is not None:
            raise UsageError("--group needs --shard I/N")
        return ShardOptions(durations=tuple(durations))
    m = _SHARD.match(text.strip())
    if not m:
        raise UsageError(f"--shard {text!r}: expected I/N, e.g. 2/4 (the second of four)")
    i, n = int(m[1]), int(m[2])
    if not 1 <= i <= n or n > MAX_SHARDS:
        raise UsageError(f"--shard {text}: I must be 1..N and N at most {MAX_SHARDS}")
    if group is not None and not _GROUP.match(group):
        raise UsageError(f"--group {group[:80]!r}: 1-128 letters, digits, '.', '_' or '-'")
    return ShardOptions(index=i - 1, count=n, group=group, durations=tuple(durations))


def default_group(environ: Mapping[str, str] | None = None, *parts: str) -> str:
    """The workflow run (``GITHUB_RUN_ID``-``GITHUB_RUN_ATTEMPT``), the same in every job of a
    matrix; elsewhere a hash of ``parts`` (the commits and the shard count), the same in every
    local shard process of one run."""
    env = os.environ if environ is None else environ
    run_id = env.get("GITHUB_RUN_ID", "")
    if run_id.isdigit():
        attempt = env.get("GITHUB_RUN_ATTEMPT", "1")
        return f"gh-{run_id}-{attempt if attempt.isdigit() else '1'}"
    return "local-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def runner_name(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return (env.get("RUNNER_NAME") or socket.gethostname() or "unknown")[:128]


def plan(idents: Iterable[str], count: int, durations: Mapping[str, float] | None = None
         ) -> tuple[list[list[str]], str]:
    """Split ``idents`` over ``count`` shards: (per shard, its idents in the given order), and
    "duration" or "count" for what balanced them."""
    items = sorted(set(idents))
    known = {i: float(durations[i]) for i in items
             if durations and durations.get(i) is not None and durations[i] > 0}
    if not known:
        return [items[k::count] for k in range(count)], "count"
    fill = statistics.median(known.values())
    cost = {i: known.get(i, fill) for i in items}
    heap = [(0.0, k) for k in range(count)]
    shards: list[list[str]] = [[] for _ in range(count)]
    for ident in sorted(items, key=lambda i: (-cost[i], i)):
        load, k = heapq.heappop(heap)
        shards[k].append(ident)
        heapq.heappush(heap, (load + cost[ident], k))
    return [sorted(s) for s in shards], "duration"


def loads(shards: Sequence[Sequence[str]], durations: Mapping[str, float]) -> list[float]:
    """Each shard's total stored duration (what the plan expects it to take)."""
    return [sum(durations.get(i, 0.0) for i in s) for s in shards]


def contiguous(idents: Sequence[str], count: int) -> list[list[str]]:
    """PyTorch's split (``get_benchmark_indices`` in benchmarks/dynamo/common.py): contiguous
    slices of the list by model count, the last shard taking the remainder."""
    per = len(idents) // count
    out = [list(idents[k * per:(k + 1) * per]) for k in range(count - 1)]
    return [*out, list(idents[(count - 1) * per:])]


def record(opts: ShardOptions, group: str, shards: list[list[str]], balanced_by: str,
           *, run_id: str, wall_s: float | None, models: int, finished: bool) -> Sharding:
    """What one shard writes into its results: the whole plan, and itself."""
    run = ShardRun(index=opts.index, state="finished" if finished else "unfinished",
                   run_id=run_id, runner=runner_name(), wall_s=wall_s, models=models)
    return Sharding(group=group, count=opts.count, index=opts.index,
                    balanced_by=balanced_by,  # type: ignore[arg-type]
                    plan=shards, runs=[run])
