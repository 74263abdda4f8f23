"""Per-metric thresholds for verdicts, with per-model overrides, as read from the repo under test.

Defaults come from the noise measured in /work/shared/MEASUREMENT.md and are explained in
docs/compare.md. A relative threshold of 0.03 means "3% slower is a regression" (written
``0.03`` or ``"3%"``; a bare number of 1 or more is refused, because ``compiled_time = 5`` meant
5% and was read as 500%); ``min_abs`` is a floor in the metric's unit below which a change is
never flagged (a 40 ms change of a 1 s compile is not worth a comment); ``gate`` decides whether
a regression fails the check. Counts (graph breaks, recompiles) take a whole number of extra
occurrences.
"""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from compilewatch.bot.judge.config_errors import did_you_mean

# The bounds of each field, shared by full thresholds and by per-model overrides, so that an
# override valid on its own is valid merged onto any defaults.
Regression = Annotated[float, Field(ge=0.0, le=100.0)]
Floor = Annotated[float, Field(ge=0.0)]
Confidence = Annotated[float, Field(gt=0.5, lt=1.0)]
NoiseFactor = Annotated[float, Field(ge=0.0, le=100.0)]
HalfWidth = Annotated[float, Field(gt=0.0, le=10.0)]


class MetricThreshold(BaseModel):
    """When one metric's change becomes a verdict, and whether that verdict gates."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    regression: Regression = 0.0
    min_abs: Floor = 0.0
    gate: bool = True

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        # ``compiled_time = 0.05`` in TOML is short for ``{ regression = 0.05 }``.
        if isinstance(data, int | float) and not isinstance(data, bool):
            return {"regression": data}
        return data


RELATIVE = ("compiled_time", "compiled_time_launch_bound", "cold_compile", "warm_compile",
            "memory")
COUNTS = {"graph_breaks": "graph breaks", "recompiles": "recompiles"}
FIELDS = ("regression", "min_abs", "gate")


def _shown(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str | bool) else str(value)


def _relative(metric: str, value: Any) -> float:
    """A fraction: ``0.05`` or ``"5%"``; a bare number >= 1 is refused (5 meant 5%)."""
    percent = isinstance(value, str) and value.strip().endswith("%")
    try:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError
        number = float(value.strip().removesuffix("%")) if isinstance(value, str) else value
    except ValueError:
        raise ValueError(f"{metric} = {_shown(value)}: write a fraction like 0.05 or a "
                         'percentage like "5%"') from None
    if number < 0:
        raise ValueError(f"{metric} = {_shown(value)}: must not be negative")
    if percent:
        return number / 100
    if number >= 1:
        hint = "" if number == 5 else f", {number / 100:g} for {number:g}%"
        raise ValueError(f"{metric} = {_shown(value)}: a relative threshold is a fraction: "
                         f"write 0.05 for 5%{hint} (or \"{number * 100:g}%\" if you mean "
                         f"{number * 100:g}%)")
    return float(number)


def _count(metric: str, value: Any) -> int:
    """A whole number of extra occurrences tolerated."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and value < 0:
        raise ValueError(f"{metric} = {_shown(value)}: must not be negative")
    if not ok or value != int(value):
        raise ValueError(f"{metric} = {_shown(value)}: a whole number of extra "
                         f"{COUNTS[metric]} tolerated (0, 1, 2, ...)")
    return int(value)


def metric_patch(metric: str, value: Any) -> dict[str, Any]:
    """One metric's threshold as written in TOML (a number, a percentage string or a table)
    as fields of ``MetricThreshold``, ``regression`` read by the metric's kind. Raises
    ``ValueError`` naming the metric and saying what to write."""
    patch = dict(value) if isinstance(value, dict) else {"regression": value}
    for key in patch:
        if key not in FIELDS:
            raise ValueError(f"{metric}.{key}: unknown key{did_you_mean(key, FIELDS)}; known "
                             f"keys: {', '.join(FIELDS)}")
    if "regression" in patch:
        if metric in RELATIVE:
            patch["regression"] = _relative(metric, patch["regression"])
        elif metric in COUNTS:
            patch["regression"] = _count(metric, patch["regression"])
    return patch


def _t(regression: float, min_abs: float = 0.0, gate: bool = True) -> MetricThreshold:
    return MetricThreshold(regression=regression, min_abs=min_abs, gate=gate)


class Thresholds(BaseModel):
    """One full set of thresholds. Counts (graph breaks, recompiles) use ``regression`` as the
    number of extra occurrences tolerated; accuracy only uses ``gate``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compiled_time: MetricThreshold = _t(0.03)  # fraction, judged on process-level intervals
    # models whose GPU waits for the CPU (launch-bound): their time follows the host's speed
    compiled_time_launch_bound: MetricThreshold = _t(0.06)
    cold_compile: MetricThreshold = _t(0.15, min_abs=0.25)  # fraction; seconds floor
    warm_compile: MetricThreshold = _t(0.50, min_abs=0.5, gate=False)
    memory: MetricThreshold = _t(0.10, min_abs=1024 * 1024)  # fraction; bytes floor
    graph_breaks: MetricThreshold = _t(0)
    recompiles: MetricThreshold = _t(0)
    accuracy: MetricThreshold = _t(0)
    confidence: Confidence = 0.95
    # a change must also exceed this many between-process standard deviations (the band)
    noise_factor: NoiseFactor = 3.0
    # an interval wider than this either way (log scale, 0.25 ~ +-28%) is "too noisy to judge"
    noisy_half_width: HalfWidth = 0.25

    @model_validator(mode="before")
    @classmethod
    def _partial_tables(cls, data: Any) -> Any:
        # ``cold_compile = { gate = false }`` keeps cold_compile's own defaults for the rest;
        # values as written (numbers, "5%", tables) are read by ``metric_patch``.
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for name, value in data.items():
            field = cls.model_fields.get(name)
            if field is None or not isinstance(field.default, MetricThreshold):
                continue
            if not isinstance(value, MetricThreshold):
                out[name] = {**field.default.model_dump(), **metric_patch(name, value)}
        return out

    def merged(self, overrides: dict[str, Any]) -> Thresholds:
        """These thresholds with some metrics' fields replaced (partial tables merge);
        ``overrides`` as written in TOML."""
        return self.with_override(ModelOverride.model_validate(overrides))

    def with_override(self, override: ModelOverride) -> Thresholds:
        """These thresholds with the fields ``override`` sets replaced. Both are validated
        with the same bounds, so the result needs no second validation (one merge is a few
        microseconds: 20,000 overrides load in well under a second)."""
        data: dict[str, Any] = dict(self)
        for name, value in override:
            if isinstance(value, MetricPatch):
                data[name] = data[name].model_copy(update=value.model_dump(exclude_none=True))
            elif value is not None:
                data[name] = value
        return Thresholds.model_construct(**data)


class MetricPatch(BaseModel):
    """Some fields of one metric's threshold, as a per-model override sets them; ``regression``
    already read by the metric's kind (``metric_patch``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    regression: Regression | None = None
    min_abs: Floor | None = None
    gate: bool | None = None


class ModelOverride(BaseModel):
    """Per-model partial thresholds: ``[tool.compilewatch.models.gpt2] compiled_time = 0.1``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compiled_time: MetricPatch | None = None
    compiled_time_launch_bound: MetricPatch | None = None
    cold_compile: MetricPatch | None = None
    warm_compile: MetricPatch | None = None
    memory: MetricPatch | None = None
    graph_breaks: MetricPatch | None = None
    recompiles: MetricPatch | None = None
    accuracy: MetricPatch | None = None
    confidence: Confidence | None = None
    noise_factor: NoiseFactor | None = None
    noisy_half_width: HalfWidth | None = None

    @model_validator(mode="before")
    @classmethod
    def _read_values(cls, data: Any) -> Any:
        # Numbers, "5%" and tables read as ``metric_patch`` reads them, naming the metric;
        # what is left (types, bounds, unknown keys) pydantic checks at its full key path.
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for name, value in data.items():
            if name in cls.model_fields and name not in SCALARS and value is not None \
                    and not isinstance(value, MetricPatch):
                out[name] = metric_patch(name, value)
        return out


SCALARS = ("confidence", "noise_factor", "noisy_half_width")
GLOB_CHARS = re.compile(r"[*?\[]")


class ThresholdPolicy(BaseModel):
    """Defaults plus per-model overrides; keys are model names or shell globs (``hf_*``).

    Globs apply first in file order, then an exact name, so the most specific entry wins.
    An exact name is a dictionary lookup and only globs are matched one by one, so a suite
    of n models with n exact overrides is judged in O(n), not O(n^2).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    default: Thresholds = Thresholds()
    models: dict[str, ModelOverride] = Field(default_factory=dict)
    _globs: tuple[str, ...] = PrivateAttr(default=())

    def model_post_init(self, context: Any, /) -> None:
        self._globs = tuple(k for k in self.models if GLOB_CHARS.search(k))

    def for_model(self, model: str) -> Thresholds:
        result = self.default
        for key in self._globs:
            if key != model and fnmatch.fnmatchcase(model, key):
                result = result.with_override(self.models[key])
        if model in self.models:
            result = result.with_override(self.models[model])
        return result
