"""What to measure: suites x models x configs, expanded into jobs (one (model, config) each)."""

from __future__ import annotations

import fnmatch
import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from compilewatch.core.errors import UsageError
from compilewatch.core.names import unmatched_models
from compilewatch.core.schema import DYNAMIC, Config
from compilewatch.suites.loader import BUILTIN, Suite
from compilewatch.suites.registry import ModelSpec


@dataclass(frozen=True)
class Job:
    """One (model, config) of a suite: the unit every measurement is keyed by."""

    suite: Suite
    spec: ModelSpec
    config: Config



def plan_jobs(suites: list[Suite], *, device: str, models: Iterable[str] = (),
              modes: Iterable[str] = (), dtypes: Iterable[str] = (),
              dynamics: Iterable[str] = (), tasks: Iterable[str] = ("inference",),
              strict: bool = True, training_builtin_only: bool = False) -> list[Job]:
    """Expand suites x models x configs x tasks; empty sweeps mean each model's own default.
    A task a model does not take (``tasks=`` on ``@model``: a function without parameters
    cannot train) is left out for that model. ``training_builtin_only`` (tasks by the
    device's default, not asked for): only the built-in suites train, a repository's own
    models are measured for inference until it asks (``--task``, ``[tool.compilewatch]
    tasks``).

    ``strict``: a ``models`` pattern that matches nothing is an error (``pr`` checks the union
    of its two sides instead: a model the change adds exists on one side only).
    """
    patterns = list(models)
    jobs: list[Job] = []
    matched: set[str] = set()
    untaken: list[str] = []  # matched, but measured for none of the tasks asked
    for suite in suites:
        for spec in suite.models.values():
            if patterns and not any(fnmatch.fnmatchcase(spec.name, p) for p in patterns):
                continue
            matched.add(spec.name)
            taken = [t for t in tasks if t in spec.tasks and not (
                t == "training" and training_builtin_only and suite.source not in BUILTIN)]
            if not taken:
                untaken.append(spec.name)
            combos = itertools.product(
                list(modes) or [spec.default_mode(device)],
                list(dtypes) or [spec.dtype or "float32"],
                [DYNAMIC[d] for d in dynamics] or [spec.dynamic])
            seen: set[str] = set()
            for (mode, dtype, dynamic), task in itertools.product(combos, taken):
                cfg = Config(device=device, mode=mode, dtype=dtype, dynamic=dynamic, task=task)
                if cfg.slug not in seen:
                    seen.add(cfg.slug)
                    jobs.append(Job(suite, spec, cfg))
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(m, p) for m in matched)]
    if unmatched and strict:
        raise UsageError(unmatched_models(unmatched, [n for s in suites for n in s.models],
                                          ", ".join(s.name for s in suites)))
    if untaken and not jobs and strict:
        raise UsageError(f"nothing to measure for task {', '.join(tasks)}: no model asked "
                         f"for takes it ({', '.join(untaken[:10])}); a model without "
                         "parameters does not train, and tasks= on @model says which it takes")
    return jobs
