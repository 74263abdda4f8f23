"""Why a model needs no measurement in a pull request: the same code runs on both sides by
construction. Two rules, both applied by the measuring loop (``compiler/pairing.py``) only
when both sides run in one environment, and neither with ``--measure-all``:

- ``by_files``: before anything is compiled, the change touches nothing the model reads
  (``compiler/reads.py``), so nothing about it can differ;
- ``by_keys``: after one cold compile a side, one frame and one graph with equal FX and
  AOTAutograd keys, so the compiled code is the same and nothing is left to time.
"""

from __future__ import annotations

from compilewatch.compiler.protocol import Reads, WorkerOutput
from compilewatch.compiler.reads import ChangedFiles, touched


def by_files(base: Reads, head: Reads, changed: ChangedFiles) -> str | None:
    """Why a model is the same on both sides without measuring it, or None.

    Both sides read the same files of their checkouts, listed the same folders and looked for
    the same modules, and the change reaches none of it (``touched``), so with the same
    interpreter and environment the same code runs on the same data.
    """
    if _record(base) != _record(head):
        return None
    if touched(base, changed) or touched(head, changed):
        return None
    shown = ", ".join(base.files[:5]) + (f" and {len(base.files) - 5} more"
                                         if len(base.files) > 5 else "")
    n = len(base.files)
    what = (f"none of the {n} files of the repository it reads ({shown})" if n > 1
            else f"not the one file of the repository it reads ({shown})" if n
            else "no file it reads (it reads none of the repository's)")
    return (f"unchanged by construction: the change touches {what}, and both sides run in "
            "the same environment, so the same code runs; not measured (--measure-all "
            "measures it)")


def _record(reads: Reads) -> tuple[list[str], ...]:
    """What must be the same on both sides. Not the import system's listings: the harness
    lists every folder at the top of a checkout (``suites/imports.py``), so a folder on one
    side only is listed on that side only, and where imports looked is in ``sought``."""
    return reads.files, reads.listed, reads.sought


def by_keys(base: WorkerOutput, head: WorkerOutput, *, same_environment: bool) -> str | None:
    """Why the compiled code of both sides is the same by construction, or None.

    One frame and one graph (no graph break, so no eager Python runs between graphs), equal FX
    graph and AOTAutograd cache keys (the keys hash the graph, its inputs, the config and the
    torch build), and the same environment: the same code runs, so there is nothing to time.
    """
    if not (same_environment and base.ok and head.ok and base.compile and head.compile):
        return None
    for out in (base, head):
        if out.compile.frames != 1 or out.compile.graphs != 1 or out.graph_breaks \
                or out.recompiles:
            return None
    fx = [[k.key for k in o.cache.fx] for o in (base, head)]
    aot = [[k.key for k in o.cache.aot] for o in (base, head)]
    if not fx[0] or fx[0] != fx[1] or aot[0] != aot[1]:
        return None
    return ("unchanged by construction: one frame, one graph, no graph break, equal FX graph "
            "and AOTAutograd cache keys and the same environment on both sides, so the same "
            "compiled code runs; not timed (--measure-all times it)")
