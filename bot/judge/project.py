"""``[tool.compilewatch]`` of the repository under test, validated once into a frozen object.

Unknown keys are warned about, not ignored silently: a typo in a threshold must not pass unseen.
"""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from compilewatch.bot.judge.baseline import load_baseline
from compilewatch.bot.judge.comparison import Comparison
from compilewatch.bot.judge.stats import NoiseBands
from compilewatch.bot.judge.thresholds import (
    ModelOverride,
    ThresholdPolicy,
    Thresholds,
    describe_error,
)
from compilewatch.bot.judge.verdicts import compare
from compilewatch.compiler import signing
from compilewatch.core.errors import DatabaseError, UsageError
from compilewatch.core.schema import RunResults
from compilewatch.db import connect, load_noise_bands

DEFAULT_BASELINE = Path(".compilewatch/baseline.csv")


class ProjectConfig(BaseModel):
    """What a repository says about how compilewatch should measure and judge it."""

    model_config = ConfigDict(extra="allow", frozen=True)

    suites: tuple[str, ...] = ()
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
            msg = e.errors()[0]["msg"].removeprefix("Value error, ")
            raise UsageError(f"tool.compilewatch.{msg}") from None

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


KNOWN_KEYS = {"suites", "thresholds", "models", "baseline", "cache_public_keys", "pythonpath"}


def load_project_config(repo: str | Path = ".") -> ProjectConfig:
    """Read ``repo/pyproject.toml``; a missing file or table gives the defaults."""
    root = Path(repo)
    path = root / "pyproject.toml"
    if not path.is_file():
        return ProjectConfig(root=root)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"{path}: cannot parse: {e}") from None
    table = data.get("tool", {}).get("compilewatch", {})
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.compilewatch] must be a table")
    for key in sorted(set(table) - KNOWN_KEYS):
        warnings.warn(f"{path}: unknown key tool.compilewatch.{key} ignored", stacklevel=2)
    project = data.get("project", {})
    name = project.get("name") if isinstance(project, dict) else None
    try:
        config = ProjectConfig(**{k: v for k, v in table.items() if k in KNOWN_KEYS},
                               root=root, distribution=name if isinstance(name, str) else None)
    except ValidationError as e:
        raise UsageError(f"{path}: tool.compilewatch.{describe_error(e)}") from None
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


def noise_bands(db_url: str | None, run: RunResults) -> NoiseBands:
    """The noise ``compilewatch calibrate`` learned for the base run's environment, from the
    database (none: the defaults). Read-only: a missing database file is not created."""
    return noise_bands_of(db_url, run.environment.fingerprint)


def noise_bands_of(db_url: str | None, fingerprint: str) -> NoiseBands:
    """``noise_bands`` for an environment fingerprint, before any run of it exists."""
    try:
        with connect(db_url, must_exist=True) as db:
            bands = load_noise_bands(db, fingerprint)
    except DatabaseError:
        return NoiseBands()
    return NoiseBands(bands, source="calibrate") if bands else NoiseBands()
