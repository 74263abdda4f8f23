"""``[tool.compilewatch]`` of the repository under test, validated once into a frozen object.

Unknown keys are warned about, not ignored silently: a typo in a threshold must not pass unseen.
"""

from __future__ import annotations

import contextvars
import logging
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from compilewatch.bot.judge.baseline import load_baseline
from compilewatch.bot.judge.comparison import Comparison
from compilewatch.bot.judge.config_errors import did_you_mean, explain
from compilewatch.bot.judge.pyproject import project_name, read_pyproject, tool_table
from compilewatch.bot.judge.stats import NoiseBands
from compilewatch.bot.judge.thresholds import (
    ModelOverride,
    ThresholdPolicy,
    Thresholds,
)
from compilewatch.bot.judge.verdicts import compare
from compilewatch.core import signing
from compilewatch.core.errors import UsageError
from compilewatch.core.schema import RunResults, Task

DEFAULT_BASELINE = Path(".compilewatch/baseline.csv")


class ProjectConfig(BaseModel):
    """What a repository says about how compilewatch should measure and judge it."""

    model_config = ConfigDict(extra="allow", frozen=True)

    suites: tuple[str, ...] = ()
    tasks: tuple[Task, ...] = ()  # what each model is measured for; empty: the device's default
    thresholds: Thresholds = Thresholds()
    models: dict[str, ModelOverride] = Field(default_factory=dict)
    baseline: Path = DEFAULT_BASELINE  # relative to ``root``
    cache_public_keys: tuple[str, ...] = ()  # who may publish the cache artifacts we load
    # folders (relative to ``root``) put first on sys.path with the root, as pytest's
    # ``pythonpath``; None: ``src`` where it exists (suites/imports.py)
    pythonpath: tuple[str, ...] | None = None
    root: Path = Field(default=Path("."), exclude=True)
    distribution: str | None = Field(default=None, exclude=True)  # ``[project] name``

    def threshold_policy(self) -> ThresholdPolicy:
        """Defaults merged with ``thresholds`` and the per-model overrides, checked once."""
        try:
            return ThresholdPolicy(default=self.thresholds, models=self.models)
        except ValidationError as e:
            raise UsageError(explain(e, ThresholdPolicy, "tool.compilewatch")) from None

    @property
    def baseline_path(self) -> Path:
        return self.baseline if self.baseline.is_absolute() else self.root / self.baseline


    def import_paths(self) -> list[Path]:
        """The folders a side's processes put first on ``sys.path``: ``pythonpath`` (or
        ``src`` where it exists), then the checkout's root."""
        chosen = self.pythonpath if self.pythonpath is not None else (
            ("src",) if (self.root / "src").is_dir() else ())
        return [*(self.root / p for p in chosen), self.root]

    @field_validator("pythonpath")
    @classmethod
    def _folders(cls, paths: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for p in paths or ():
            if not p or Path(p).is_absolute() or ".." in Path(p).parts:
                raise ValueError(f"pythonpath: {p!r} must be a folder inside the repository, "
                                 "relative to its root")
        return paths

    @field_validator("cache_public_keys")
    @classmethod
    def _keys(cls, keys: tuple[str, ...]) -> tuple[str, ...]:
        for k in keys:
            try:
                signing.parse_public_key(k)
            except UsageError as e:
                raise ValueError(str(e)) from None
        return keys


KNOWN_KEYS = set(ProjectConfig.model_fields) - {"root", "distribution"}
log = logging.getLogger(__name__)  # the CLI shows these on stderr
# an unknown key refused instead of ignored (the command line's --strict)
STRICT: contextvars.ContextVar[bool] = contextvars.ContextVar("strict_config", default=False)
_WARNED: set[tuple[str, str]] = set()  # (file, key) already said
# The keys that change what a side measures: which suites and tasks, and where its code is
# imported from. The others judge or vouch (thresholds, models, baseline, cache_public_keys),
# and ``pr`` reads them from the base side only, never from the pull request's.
MEASURING_KEYS = ("suites", "tasks", "pythonpath")


def measuring_settings(root: Path) -> dict[str, Any]:
    """What of ``root/pyproject.toml`` changes what is measured, as parsed values (a comment
    or a reordering changes none): ``MEASURING_KEYS`` of ``[tool.compilewatch]`` and
    ``[project] name`` (the installed copy a side must not import, ``suites/imports.py``).
    A version, the dependencies, the build's or another tool's tables are not in it."""
    path = root / "pyproject.toml"
    data = read_pyproject(path, root)
    table = tool_table(data, path, "compilewatch") if data else {}
    return {**{f"tool.compilewatch.{k}": table.get(k) for k in MEASURING_KEYS},
            "project.name": project_name(data)}


def _unknown_key(path: Path, key: str) -> None:
    """An unknown top-level key: one line, once per file and key however often the file is
    read, naming the closest known key; with ``STRICT`` (``--strict``) a usage error."""
    text = f"{path}: unknown key tool.compilewatch.{key}"
    hint = did_you_mean(key, KNOWN_KEYS)
    if STRICT.get():
        raise UsageError(f"{text}{hint} (--strict refuses it)")
    if (str(path), key) not in _WARNED:
        _WARNED.add((str(path), key))
        log.warning("%s ignored%s", text, hint)


def load_project_config(repo: str | Path = ".") -> ProjectConfig:
    """Read ``repo/pyproject.toml``; a missing file or table gives the defaults. Every error
    names the file and the key, and says what was expected (``config_errors``)."""
    root = Path(repo)
    path = root / "pyproject.toml"
    data = read_pyproject(path, root)
    table = tool_table(data, path, "compilewatch") if data else {}
    for key in sorted(set(table) - KNOWN_KEYS):
        _unknown_key(path, key)
    known = {k: v for k, v in table.items() if k in KNOWN_KEYS}
    try:
        config = ProjectConfig.model_validate({**known, "root": root,
                                               "distribution": project_name(data)})
    except ValidationError as e:
        raise UsageError(f"{path}: {explain(e, ProjectConfig, 'tool.compilewatch')}") from None
    try:
        config.threshold_policy()
    except UsageError as e:
        raise UsageError(f"{path}: {e}") from None
    return config


def compare_with_project(base: RunResults, head: RunResults, config_dir: Path | None,
                         noise: NoiseBands | None = None) -> Comparison:
    """``compare`` with the thresholds and baseline of the project checked out at
    ``config_dir`` (None: the built-in defaults), and the noise learned on the runner (``noise``,
    see ``noise_bands``). ``compare``, ``pr`` and ``post`` all judge this way; ``pr`` and
    ``post`` pass a trusted checkout, never the PR's."""
    if config_dir is None:
        return compare(base, head, noise=noise)
    project = load_project_config(config_dir)
    return compare(base, head, thresholds=project.threshold_policy(),
                   baseline=load_baseline(project.baseline_path), noise=noise)
