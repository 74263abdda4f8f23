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
            raise ValueError(f"{metric}.{key}: unknown key (one of {', '.join(FIELDS)})")
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
    confidence: float = Field(0.95, gt=0.5, lt=1.0)
    # a change must also exceed this many between-process standard deviations (the band)
    noise_factor: float = Field(3.0, ge=0.0, le=100.0)
    # an interval wider than this either way (log scale, 0.25 ~ +-28%) is "too noisy to judge"
    noisy_half_width: float = Field(0.25, gt=0.0, le=10.0)

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
        data: dict[str, Any] = {name: getattr(self, name) for name in Thresholds.model_fields}
        for metric, value in overrides.items():
            if metric in SCALARS:
                data[metric] = value
            else:
                data[metric] = MetricThreshold(**{**data[metric].model_dump(),
                                                  **metric_patch(metric, value)})
        return Thresholds.model_validate(data)


class ModelOverride(BaseModel):
    """Per-model partial thresholds: ``[tool.compilewatch.models.gpt2] compiled_time = 0.1``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    compiled_time: dict[str, Any] | float | str | None = None
    compiled_time_launch_bound: dict[str, Any] | float | str | None = None
    cold_compile: dict[str, Any] | float | str | None = None
    warm_compile: dict[str, Any] | float | str | None = None
    memory: dict[str, Any] | float | str | None = None
    graph_breaks: dict[str, Any] | float | str | None = None
    recompiles: dict[str, Any] | float | str | None = None
    accuracy: dict[str, Any] | float | str | None = None
    confidence: float | None = None
    noise_factor: float | None = None
    noisy_half_width: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _check_values(cls, data: Any) -> Any:
        # Checked as written, at load, naming the metric; kept as written for ``merged``.
        if isinstance(data, dict):
            for name, value in data.items():
                if name in cls.model_fields and name not in SCALARS and value is not None:
                    metric_patch(name, value)
        return data


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
                raise ValueError(f"models.{name}.{describe_error(e)}") from None
        return self

    def for_model(self, model: str) -> Thresholds:
        matching = [k for k in self.models if k != model and fnmatch.fnmatchcase(model, k)]
        if model in self.models:
            matching.append(model)
        result = self.default
        for key in matching:
            result = result.merged(self.models[key].model_dump(exclude_none=True))
        return result


def describe_error(e: ValidationError) -> str:
    """The first error as ``where: what``; our own value errors already start with the key
    they refuse (``compiled_time = 5: ...``), so they are joined with a dot."""
    first = e.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    msg = first["msg"]
    if first["type"] == "value_error":
        msg = msg.removeprefix("Value error, ")
        return f"{where}.{msg}" if where else msg
    return f"{where}: {msg}"
