"""Per-metric thresholds for verdicts, with per-model overrides, as read from the repo under test.

Defaults come from the noise measured in /work/shared/MEASUREMENT.md and are explained in
docs/compare.md. A relative threshold of 0.03 means "3% slower is a regression"; ``min_abs`` is a
floor in the metric's unit below which a change is never flagged (a 40 ms change of a 1 s compile
is not worth a comment); ``gate`` decides whether a regression fails the check.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class MetricThreshold(BaseModel):
    """When one metric's change becomes a verdict, and whether that verdict gates."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    regression: float = Field(0.0, ge=0.0, le=100.0)
    min_abs: float = Field(0.0, ge=0.0)
    gate: bool = True

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        # ``compiled_time = 0.05`` in TOML is short for ``{ regression = 0.05 }``.
        if isinstance(data, int | float) and not isinstance(data, bool):
            return {"regression": data}
        return data


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
    confidence: float = Field(0.95, gt=0.5, lt=1.0)
    # a change must also exceed this many between-process standard deviations (the band)
    noise_factor: float = Field(3.0, ge=0.0, le=100.0)
    # an interval wider than this either way (log scale, 0.25 ~ +-28%) is "too noisy to judge"
    noisy_half_width: float = Field(0.25, gt=0.0, le=10.0)

    @model_validator(mode="before")
    @classmethod
    def _partial_tables(cls, data: Any) -> Any:
        # ``cold_compile = { gate = false }`` keeps cold_compile's own defaults for the rest.
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for name, value in data.items():
            field = cls.model_fields.get(name)
            if field is None or not isinstance(field.default, MetricThreshold):
                continue
            if isinstance(value, int | float) and not isinstance(value, bool):
                value = {"regression": value}
            if isinstance(value, dict):
                out[name] = {**field.default.model_dump(), **value}
        return out

    def merged(self, overrides: dict[str, Any]) -> Thresholds:
        """These thresholds with some metrics' fields replaced (partial tables merge)."""
        data = self.model_dump()
        for metric, value in overrides.items():
            if metric in SCALARS:
                data[metric] = value
            else:
                patch = {"regression": value} if isinstance(value, int | float) else value
                data[metric] = {**data[metric], **patch}
        return Thresholds.model_validate(data)


class ModelOverride(BaseModel):
    """Per-model partial thresholds: ``[tool.compilewatch.models.gpt2] compiled_time = 0.1``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compiled_time: dict[str, Any] | float | None = None
    compiled_time_launch_bound: dict[str, Any] | float | None = None
    cold_compile: dict[str, Any] | float | None = None
    warm_compile: dict[str, Any] | float | None = None
    memory: dict[str, Any] | float | None = None
    graph_breaks: dict[str, Any] | float | None = None
    recompiles: dict[str, Any] | float | None = None
    accuracy: dict[str, Any] | float | None = None
    confidence: float | None = None
    noise_factor: float | None = None
    noisy_half_width: float | None = None


SCALARS = ("confidence", "noise_factor", "noisy_half_width")


class ThresholdPolicy(BaseModel):
    """Defaults plus per-model overrides; keys are model names or shell globs (``hf_*``).

    Globs apply first in file order, then an exact name, so the most specific entry wins.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    default: Thresholds = Thresholds()
    models: dict[str, ModelOverride] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_overrides(self) -> ThresholdPolicy:
        for name in self.models:
            try:  # fail at load, naming the model, not in the middle of a comparison
                self.for_model(name)
            except ValidationError as e:
                first = e.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise ValueError(f"models.{name}.{where}: {first['msg']}") from None
        return self

    def for_model(self, model: str) -> Thresholds:
        matching = [k for k in self.models if k != model and fnmatch.fnmatchcase(model, k)]
        if model in self.models:
            matching.append(model)
        result = self.default
        for key in matching:
            result = result.merged(self.models[key].model_dump(exclude_none=True))
        return result
