"""Inside one commit (or one torch build): which Inductor config flag made it slower.

The FX cache key records every Inductor config value a graph was compiled with
(``inductor_config[...]``). Where the last good and the first bad candidate compiled the model
with different values, those flags are tried on the last good candidate itself, with the first
bad one's values (``compiler/overrides.py``), beside it as it was: all of them first (the ends:
if that does not regress, the flags do not explain the regression), then the same search over
"the first k flags set", in name order, finds the flag whose setting regressed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from compilewatch.bot.bisect.runner import Ident, Runner
from compilewatch.bot.bisect.search import Search
from compilewatch.bot.judge.bisect_metrics import Call, Reading, combine
from compilewatch.bot.judge.bisection import FlagChange, FlagFinding
from compilewatch.compiler.overrides import literal
from compilewatch.core.schema import ModelResult

PREFIX = "inductor_config["


def config_values(r: ModelResult) -> dict[str, str]:
    """``inductor_config[...]`` values of the model's first cold FX key (config is global:
    every graph of a process is compiled with the same)."""
    key = next((k for k in r.cache.fx if k.phase == "cold"), None)
    if key is None:
        return {}
    return {n: v for n, v in key.values.items() if n.startswith(PREFIX) and n.endswith("]")}


def differing(good: ModelResult, bad: ModelResult) -> tuple[list[FlagChange], list[str]]:
    """The flags whose values differ, and those of them that cannot be set from the key's
    text (not a Python literal, or recorded by hash only)."""
    g, b = config_values(good), config_values(bad)
    changes, not_applied = [], []
    hashed = _hash_only(good, bad, set(g) | set(b))
    for name in sorted(set(g) | set(b)):
        if g.get(name) == b.get(name):
            continue
        ok, _ = literal(b.get(name, ""))
        if name not in b or not ok:
            not_applied.append(name)
            continue
        changes.append(FlagChange(name=name, good=g.get(name, "(absent)"), bad=b[name]))
    return changes, sorted(set(not_applied) | hashed)


def _hash_only(good: ModelResult, bad: ModelResult, readable: set[str]) -> set[str]:
    """Flags whose hashes differ but whose values the key did not keep (too long)."""
    def comps(r: ModelResult) -> dict[str, str]:
        key = next((k for k in r.cache.fx if k.phase == "cold"), None)
        return {} if key is None else {n: h for n, h in key.components.items()
                                       if n.startswith(PREFIX)}
    g, b = comps(good), comps(bad)
    return {n for n in set(g) | set(b) if g.get(n) != b.get(n) and n not in readable}


def setting(changes: list[FlagChange]) -> dict[str, Any]:
    """``inductor_config[triton.cudagraphs]`` -> ``{"triton.cudagraphs": value}``."""
    return {c.name[len(PREFIX):-1]: literal(c.bad)[1] for c in changes}


def bisect_flags(runner: Runner, last_good: int, first_bad: int) -> FlagFinding:
    """The flags of the regressed models that differ between the two candidates, tried on the
    last good one. Several models: the flags of the first that has any."""
    g, b = runner.measured.get(last_good), runner.measured.get(first_bad)
    changes: list[FlagChange] = []
    not_applied: list[str] = []
    for ident in runner.regressed:
        rg, rb = (g.result(ident) if g else None), (b.result(ident) if b else None)
        if rg is not None and rb is not None:
            changes, not_applied = differing(rg, rb)
            if changes:
                break
    if not changes:
        return FlagFinding(not_applied=not_applied[:4096],
                           note="no Inductor config value that can be set differs between "
                                "the last good and the first bad candidate")
    culprit, note = _search(runner, last_good, changes)
    return FlagFinding(flags=changes, culprit=culprit, not_applied=not_applied[:4096],
                       note=note)


def _search(runner: Runner, last_good: int, changes: list[FlagChange]
            ) -> tuple[str | None, str | None]:
    """Prefix k of the flags set on the last good candidate, beside it unset: all of them
    first, then the search. Returns the culprit (None: the flags do not regress it)."""
    search = Search(len(changes) + 1)
    search.record(0, Call.GOOD)
    call = _try(runner, last_good, changes)
    if call is not Call.BAD:
        return None, (f"setting all {len(changes)} flags on the last good candidate did not "
                      f"regress it ({call.value}): the change is not in these flags")
    search.record(len(changes), Call.BAD)
    while (k := search.next()) is not None:
        search.record(k, _try(runner, last_good, changes[:k]))
    if not search.found:
        names = [changes[i - 1].name for i in search.suspects()]
        return None, f"one of {', '.join(names)} (the others between could not be judged)"
    return changes[search.first_bad - 1].name, None


def _try(runner: Runner, last_good: int, applied: list[FlagChange]) -> Call:
    """One flags step: the last good candidate with ``applied`` set, beside it unset, with
    more processes while its verdict is open."""
    cand = runner.candidates[last_good]
    ref = runner.side_of("good", cand)
    step = dataclasses.replace(runner.side_of("step", cand), overrides=setting(applied))
    processes = runner.first_processes
    while True:
        out = runner.measure([ref, step], processes)
        base, m = out["good"], out["step"]
        if base.run is None or m.run is None:
            call = Call.SKIP
            readings: dict[Ident, Reading] = {}
        else:
            readings = {i: runner.judge.call(i, base.result(i), m.result(i), True)
                        for i in runner.regressed}
            call = combine([r.call for r in readings.values()])
        runner.record("flags", last_good, last_good, processes, call,
                       runner.readings_of(readings), [], out,
                       flags=[f"{c.name[len(PREFIX):-1]}={c.bad}"[:512] for c in applied],
                       note=None if readings else f"not measured: {m.failed or base.failed}")
        more = runner.more(processes)
        if call is not Call.UNSETTLED or more is None:
            return call
        processes = more

