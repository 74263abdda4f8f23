"""The ``compilewatch bisect`` command line that reproduces a finding locally, for a flagged
row of a comparison and for a bisection's own report. Every argument is shell-quoted here;
each renderer escapes the line for its medium (a code span in markdown, HTML's autoescape)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from compilewatch.bot.judge.bisect_metrics import CACHE
from compilewatch.bot.judge.comparison import Comparison, ModelRow, Verdict

# which regressed metric a row's command follows, first match wins: deterministic metrics
# need one measurement a step, so they are the cheaper and surer bisection
PREFERENCE = ("graph-breaks", "recompiles", "accuracy", "cache", "peak-memory",
              "compiled-time", "cold-compile", "warm-compile")
# a changed key component worth bisecting before the others: the graph, then its inputs
COMPONENTS = ("gm", "example_inputs")
# a component name from a results file (the PR's) put in a command only when it is plainly one
_SAFE_COMPONENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]{0,100}(\[[A-Za-z0-9_.\-]{1,100}\])?$")


def bisect_line(*, good: str, bad: str, models: Iterable[str], metric: str,
                pythons: str | None = None, commit: str | None = None,
                suites: Iterable[str] = (), device: str = "cpu",
                tasks: Iterable[str] = (), repo: str | None = None) -> str:
    """``compilewatch bisect ...`` with every value quoted for a POSIX shell."""
    parts = ["compilewatch", "bisect"]
    if repo not in (None, ".", ""):
        parts += ["--repo", str(repo)]
    if pythons is not None:
        parts += ["--pythons", pythons] + (["--commit", commit] if commit else [])
    else:
        parts += ["--good", good, "--bad", bad]
    for m in models:
        parts += ["--model", m]
    parts += ["--metric", metric]
    for s in suites:
        parts += ["--suite", s]
    if device != "cpu":
        parts += ["--device", device]
    for t in tasks:
        parts += ["--task", t]
    return shlex.join(parts)


def _regressed(row: ModelRow) -> dict[str, bool]:
    return {
        "graph-breaks": row.graph_breaks is not None
        and row.graph_breaks.verdict is Verdict.REGRESSION,
        "recompiles": row.recompiles is not None
        and row.recompiles.verdict is Verdict.REGRESSION,
        "accuracy": row.accuracy is not None and row.accuracy.verdict is Verdict.REGRESSION,
        "peak-memory": any(d is not None and d.verdict is Verdict.REGRESSION
                           for d in (row.memory, row.fwd_bwd_memory)),
        "compiled-time": row.compiled_time is not None
        and row.compiled_time.verdict is Verdict.REGRESSION,
        "cold-compile": row.cold_compile is not None
        and row.cold_compile.verdict is Verdict.REGRESSION,
        "warm-compile": row.warm_compile is not None
        and row.warm_compile.verdict is Verdict.REGRESSION,
    }


def _component(row: ModelRow) -> str | None:
    """The changed key component a row's command follows: the graph or an input first."""
    changed = [n for ch in row.cache_changes if ch.status == "changed" for n in ch.changed
               if _SAFE_COMPONENT.fullmatch(n)]
    for prefix in COMPONENTS:
        for name in changed:
            if name == prefix or name.startswith(prefix + "["):
                return name
    return changed[0] if changed else None


def row_metric(row: ModelRow) -> str | None:
    """The ``--metric`` that bisects what this row flags (None: nothing to bisect)."""
    regressed = _regressed(row)
    for name in PREFERENCE:
        if name == "cache":
            component = _component(row)
            if component is not None:
                return f"{CACHE}{component}"
        elif regressed[name]:
            return name
    return None


def row_bisect(c: Comparison, row: ModelRow) -> str | None:
    """The command that finds which commit between base and head brought this row's
    finding; None without both commits or anything to bisect."""
    metric = row_metric(row)
    if metric is None or not c.base.commit or not c.head.commit \
            or c.base.commit == c.head.commit:
        return None
    device = row.config.split("-", 1)[0]
    tasks = ("training",) if row.config.endswith("-training") else ()
    return bisect_line(good=c.base.commit, bad=c.head.commit, models=[row.model],
                       metric=metric, device=device if device == "cuda" else "cpu",
                       tasks=tasks)
