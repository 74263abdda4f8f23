"""A group's shards merged into one side. Every shard carries the whole plan, so the merge
knows the shards that never sent anything: they are listed as ``missing`` and compare marks
their models "insufficient data" (``bot/judge/shards.py``), never a silent pass."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

from compilewatch.core.errors import ResultsFileError
from compilewatch.core.results_file import load_results, save_results
from compilewatch.core.schema import (
    MAX_FILE_SAMPLES,
    MAX_MODELS,
    ModelResult,
    RunResults,
    Sharding,
    ShardRun,
    check_planned,
    utc_time,
)


def _agree(runs: Sequence[RunResults], what: str, value: Callable[[RunResults], object],
           of: str) -> None:
    values = {repr(value(r)) for r in runs}
    if len(values) > 1:
        raise ResultsFileError(f"the shards disagree on {what} ({', '.join(sorted(values))}): "
                               f"they are not one {of}")


def check_group(runs: Sequence[RunResults]) -> Sharding:
    """The shards must be one group's, each once, with one plan; the first one's record."""
    if not runs:
        raise ResultsFileError("no shard to merge")
    loose = [r.run_id for r in runs if r.shards is None or r.shards.index is None]
    if loose:
        raise ResultsFileError(f"run {loose[0]} is not a shard (no shards.index): merge takes "
                               "the results of `--shard I/N` runs")
    shards = [r.shards for r in runs if r.shards is not None]
    _agree(runs, "the group", lambda r: r.shards and r.shards.group, "group")
    _agree(runs, "the shard count", lambda r: r.shards and r.shards.count, "group")
    _agree(runs, "the plan", lambda r: r.shards and r.shards.plan, "group")
    _agree(runs, "the side", lambda r: r.settings.side, "side")
    _agree(runs, "the commit", lambda r: r.git.commit, "side")
    indexes = [s.index for s in shards]
    twice = sorted({i for i in indexes if indexes.count(i) > 1})
    if twice:
        raise ResultsFileError(f"shard {twice[0] + 1} of group {shards[0].group} is given twice "
                               "(two attempts? merge one results file per shard)")
    for run, shard in zip(runs, shards, strict=True):
        try:
            check_planned(shard, run.results)
        except ValueError as e:
            raise ResultsFileError(f"run {run.run_id}: {e}") from None
    return shards[0]


def check_pair(base: RunResults, head: RunResults) -> None:
    """Base and head of one ``pr``, sharded or merged: ``pr`` plans both sides together, so
    their shards are one group with one plan; anything else is two runs' halves."""
    b, h = base.shards, head.shards
    if b is None and h is None:
        return
    if b is None or h is None:
        which = "base" if h is None else "head"
        raise ResultsFileError(f"only {which} is sharded: base and head of one pr are "
                               "sharded together")
    for what, mine, theirs in (("group", b.group, h.group), ("shard count", b.count, h.count),
                               ("plan", b.plan, h.plan)):
        if mine != theirs:
            shown = f" ({mine} and {theirs})" if what != "plan" else ""
            raise ResultsFileError(f"base and head disagree on the {what}{shown}: their shards "
                                   "are not one pr's")


def merge_runs(runs: Sequence[RunResults]) -> RunResults:
    """One side from the shards that came back (in any order); the others are ``missing``."""
    first = check_group(runs)
    by_index = {r.shards.index: r for r in runs if r.shards is not None}
    ordered = [by_index[i] for i in sorted(by_index)]  # type: ignore[index]
    results, seen = [], set()
    for run in ordered:
        for r in run.results:
            if r.ident in seen:
                raise ResultsFileError(f"{'/'.join(r.ident)} was measured by two shards: the "
                                       "shards do not share one plan")
            seen.add(r.ident)
            results.append(r)
    _check_size(results)
    states = [_state(by_index.get(i), i) for i in range(first.count)]
    finished = [r.finished_at for r in ordered]
    done = all(s.state == "finished" for s in states)
    merged_id = hashlib.sha256(
        "\0".join([first.group, str(ordered[0].settings.side), *(r.run_id for r in ordered)])
        .encode()).hexdigest()[:32]
    head = ordered[0]
    return head.model_copy(update={
        "run_id": merged_id, "results": results,
        # by the time each names, not by its text: shards may write other zones
        "created_at": min((r.created_at for r in ordered), key=utc_time),
        "finished_at": max((f for f in finished if f is not None), key=utc_time) if done
        else None,
        "shards": Sharding(group=first.group, count=first.count, index=None,
                           balanced_by=first.balanced_by, plan=first.plan, runs=states)})


def _check_size(results: list[ModelResult]) -> None:
    """A group is bounded like one file: what compare costs must not grow with the shards."""
    if len(results) > MAX_MODELS:
        raise ResultsFileError(f"the shards hold {len(results)} results together, over the "
                               f"limit of {MAX_MODELS} per side (MAX_MODELS)")
    samples = sum(len(r.latency.eager_us) + len(r.latency.compiled_us)
                  + len(r.latency.reference_us) for r in results if r.latency is not None)
    if samples > MAX_FILE_SAMPLES:
        raise ResultsFileError(f"the shards hold {samples} timing samples together, over the "
                               f"limit of {MAX_FILE_SAMPLES} per side (MAX_FILE_SAMPLES)")


def _state(run: RunResults | None, index: int) -> ShardRun:
    if run is None or run.shards is None:
        return ShardRun(index=index, state="missing")
    own = next((s for s in run.shards.runs if s.index == index), None)
    return ShardRun(index=index, state="finished" if run.finished_at else "unfinished",
                    run_id=run.run_id, runner=own.runner if own else None,
                    wall_s=own.wall_s if own else None, models=len(run.results))


def merge_if_sharded(runs: Sequence[RunResults]) -> RunResults:
    """One run (a shard alone too) as it is; several shards merged into one side."""
    if len(runs) == 1:
        return runs[0]
    return merge_runs(runs)


def merge_files(paths: Sequence[Path], out: Path) -> RunResults:
    """``compilewatch merge``: the shards' results files (strictly validated) as one side."""
    merged = merge_runs([load_results(p) for p in paths])
    save_results(merged, out)
    return merged


def summary(run: RunResults) -> str:
    """One line per shard, then the side: what the CLI prints after a merge."""
    sh = run.shards
    assert sh is not None
    lines = [f"shard {r.index + 1}/{sh.count}: {r.state}"
             + (f", {r.models} model(s), {r.wall_s:.0f} s on {r.runner}"
                if r.state != "missing" and r.wall_s is not None else "")
             for r in sh.runs]
    missing = sum(r.state != "finished" for r in sh.runs)
    lines.append(f"group {sh.group}: {len(run.results)} result(s) from {sh.count - missing} of "
                 f"{sh.count} finished shard(s)")
    return "\n".join(lines)
