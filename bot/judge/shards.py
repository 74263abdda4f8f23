"""What a sharded side could not say: the models planned for a shard that is missing or did
not finish, and never measured. They are "insufficient data" in the comparison: not added or
removed, not a pass, and never a gating failure by themselves (docs/scale.md)."""

from __future__ import annotations

from compilewatch.bot.judge.comparison import Insufficient, ShardLine
from compilewatch.core.schema import RunResults

Ident = tuple[str, str, str]


def _ident(text: str) -> Ident | None:
    parts = text.split("/")
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None


def gaps(run: RunResults) -> dict[Ident, str]:
    """ident -> why it has no result on this side: its shard is missing or did not finish."""
    sh = run.shards
    if sh is None or not sh.plan:
        return {}
    measured = set(run.by_ident())
    if sh.index is not None:  # one shard on its own: only its own part is expected of it
        states = {sh.index: "finished" if run.finished_at else "unfinished"}
    else:
        states = {r.index: r.state for r in sh.runs}
    out: dict[Ident, str] = {}
    for index, state in sorted(states.items()):
        if state == "finished":
            continue
        what = "never reported" if state == "missing" else "did not finish"
        why = f"shard {index + 1}/{sh.count} {what}"
        for text in sh.plan[index]:
            ident = _ident(text)
            if ident is not None and ident not in measured:
                out[ident] = why
    return out


def insufficient(base: RunResults, head: RunResults
                 ) -> tuple[list[Insufficient], set[Ident]]:
    """The models one side's shards left without a result, and their idents (compare lists
    them here instead of as added or removed)."""
    b, h = gaps(base), gaps(head)
    rows = []
    for ident in sorted(b.keys() | h.keys()):
        reasons = [f"{side}: {why[ident]}" for side, why in (("base", b), ("head", h))
                   if ident in why]
        rows.append(Insufficient(suite=ident[0], model=ident[1], config=ident[2],
                                 reason="; ".join(reasons)))
    return rows, b.keys() | h.keys()


def shard_lines(base: RunResults, head: RunResults) -> list[ShardLine]:
    """Which shards ran, on which runner, how long each took: one line per side and shard."""
    lines = []
    for side, run in (("base", base), ("head", head)):
        sh = run.shards
        if sh is None:
            continue
        for r in sh.runs:
            lines.append(ShardLine(side=side, index=r.index, count=sh.count, state=r.state,
                                   runner=r.runner, wall_s=r.wall_s, models=r.models,
                                   group=sh.group, balanced_by=sh.balanced_by))
    return lines


def shard_notes(base: RunResults, head: RunResults) -> list[str]:
    """One note per shard of a side that is missing or did not finish: every renderer (the
    terminal table and the HTML report too) shows notes."""
    notes = []
    for side, run in (("base", base), ("head", head)):
        sh = run.shards
        if sh is None:
            continue
        states = ({sh.index: "finished" if run.finished_at else "unfinished"}
                  if sh.index is not None else {r.index: r.state for r in sh.runs})
        for index, state in sorted(states.items()):
            if state != "finished":
                what = "never reported" if state == "missing" else "did not finish"
                notes.append(f"{side}: shard {index + 1}/{sh.count} of group {sh.group} {what}; "
                             f"the models it was to measure and did not are insufficient data "
                             f"(neither judged nor gating)")
    return notes
