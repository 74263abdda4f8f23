"""The "nothing measured" rule, in one place for every command.

A run in which no model was measured (every model skipped, or the harness could not start one)
is not a result: ``--device cuda`` on a machine without a GPU used to exit 0 with every model
"skip (unsupported)", the reason only in the JSON, the empty run stored, and with ``-q`` not a
word. Commands call ``check_something_measured`` on each run they produce or read; the user
can accept an empty run with ``--allow-empty``.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from compilewatch.core.errors import NothingMeasured
from compilewatch.core.schema import Category, Environment, ModelResult, RunResults, Status
from compilewatch.suites.imports import ForeignCode

SHORT_ID = 12  # characters of a run id in messages (any unique prefix selects the run)


def _measured(r: ModelResult) -> bool:
    """A compile was attempted on the model: it passed, failed, errored, timed out or crashed
    (each of those is a finding). Skips, harness failures and models whose factory raised
    (nothing was compiled) are not measurements."""
    return r.status is not Status.SKIP and r.category not in (
        Category.INFRA, Category.BUILD_ERROR, Category.FOREIGN_CODE)


def nothing_measured(results: RunResults, written_to: Path | None = None) -> str | None:
    """Why nothing was measured in a run (None: something was): the models' reasons, grouped.
    ``written_to``: a run refused before it was stored is named by its results file, never by
    an id that ``compilewatch runs`` would not list."""
    models = results.results
    if any(_measured(r) for r in models):
        return None
    where = (f"nothing was measured in run {results.run_id[:SHORT_ID]}" if written_to is None
             else f"nothing was measured (the results are in {written_to}; the run is not "
                  "stored)")
    if not models:
        return f"{where}: it holds no model results"
    groups: dict[str, list[ModelResult]] = defaultdict(list)
    for r in models:
        groups[r.category.value.replace("_", " ")].append(r)
    verb = "were skipped" if all(r.status is Status.SKIP for r in models) else "were not run"
    parts = []
    for category, rs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        first = next((r for r in rs if r.error), rs[0])
        why = (first.error or "no reason recorded").strip().splitlines()[0][:300]
        parts.append(f"{len(rs)} {category} (e.g. {first.suite}/{first.model}: {why})")
    return f"{where}: all {len(models)} models {verb}: {'; '.join(parts)}"


def check_something_measured(results: RunResults, allow_empty: bool, *,
                             label: str | None = None, written_to: Path | None = None) -> None:
    """Raise ``NothingMeasured`` (exit 2) for a run in which nothing was measured, unless the
    user asked for that (``allow_empty``). ``label`` names the run in the message ("head")."""
    why = nothing_measured(results, written_to)
    if why is not None and not allow_empty:
        raise NothingMeasured(f"{label + ': ' if label else ''}{why}. Fix the cause, or pass "
                              "--allow-empty to accept a run without measurements")


def check_device_available(env: Environment, device: str, allow_empty: bool,
                           python: str) -> None:
    """``--device cuda`` where the interpreter sees no GPU: every model would be skipped, so
    refuse before anything starts (nothing written, nothing stored, no run id), unless the user
    asked to record the skips (``allow_empty``)."""
    if device != "cuda" or env.gpu_count or allow_empty:
        return
    build = " (a CPU-only build)" if env.cuda is None else ""
    raise NothingMeasured(
        f"--device cuda: torch {env.torch}{build} in {python} sees no GPU "
        "(torch.cuda.is_available() is False), so every model would be skipped; nothing was "
        "measured, written or stored. Use --device cpu, run on a machine with a GPU "
        "(compilewatch doctor shows what this one has), or pass --allow-empty to record the "
        "skipped run")


def check_own_code(*runs: RunResults) -> None:
    """Raise ``ForeignCode`` (exit 2) when a model of any run imported the repository's code
    from outside its side's checkout (``suites/imports.py``): its numbers are another
    checkout's, and a comparison built on them would say so nowhere. Called once every file
    is written, so the message has the results beside it."""
    for run in runs:
        for r in run.results:
            if r.category is Category.FOREIGN_CODE:
                side = f"{run.settings.side}: " if run.settings.side else ""
                raise ForeignCode(f"{side}{r.suite}/{r.model}: {r.error}")
