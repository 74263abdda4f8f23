"""``compilewatch suites``: the suites and their models, as data the CLI prints or dumps."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from compilewatch.bot.measure.harness import side_code, suite_sources
from compilewatch.bot.measure.listing import load_suites
from compilewatch.suites.loader import BUILTIN
from compilewatch.suites.registry import ModelSpec


@dataclass(frozen=True)
class ModelEntry:
    """One registered model, as ``--model`` selects it."""

    name: str
    tags: tuple[str, ...]
    devices: tuple[str, ...]
    requires: tuple[str, ...]
    missing: tuple[str, ...]  # packages of ``requires`` not installed: the model is skipped
    mode: str | dict[str, str] | None
    dtype: str | None
    dynamic: bool | None
    tasks: tuple[str, ...] = ("inference", "training")  # what the model is measured for


@dataclass(frozen=True)
class SuiteEntry:
    name: str
    source: str  # what ``--suite`` takes: a built-in's name, a module or a file's path
    models: tuple[ModelEntry, ...]


def _entry(spec: ModelSpec) -> ModelEntry:
    mode = spec.mode if spec.mode is None or isinstance(spec.mode, str) else dict(spec.mode)
    return ModelEntry(name=spec.name, tags=tuple(spec.tags), devices=tuple(spec.devices),
                      requires=tuple(spec.requires), missing=tuple(spec.missing_packages()),
                      mode=mode, dtype=spec.dtype, dynamic=spec.dynamic,
                      tasks=tuple(spec.tasks))


def default_sources(repo: Path = Path(".")) -> list[str]:
    """The repository's ``[tool.compilewatch] suites`` first (what ``run`` measures by
    default), then every built-in suite they do not name."""
    own = suite_sources((), repo)
    return own + [b for b in BUILTIN if b not in own]


def suites_command(*, suites: list[str], repo: Path = Path(".")) -> list[SuiteEntry]:
    """Every suite asked for (default: ``default_sources``) with its models, a suite file
    listed as ``run`` lists it: by a child that imports it from the repository's own code."""
    listed = load_suites(suites or default_sources(repo), code=side_code(repo))
    return [SuiteEntry(name=s.name, source=s.source,
                       models=tuple(_entry(m) for m in s.models.values())) for s in listed]
