"""What the report's and the comparison's charts show, as data (golden files pin it).

- ``strip``: a model's per-call compiled times, each timing process's samples apart (base and
  head side by side in a comparison), and the band the verdict needed around base's value;
- ``phases``: the compile phases of the cold, warm and warm-start compiles, as stacked bars;
- ``forest``: every model's change of compiled time with its interval, the summary on top of
  a comparison.

Pure functions of the schema's results and the comparison: no drawing (``plots.py``), no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from compilewatch.bot.judge.comparison import Comparison, ModelRow
from compilewatch.core.schema import Latency, ModelResult


@dataclass(frozen=True)
class Process:
    side: str  # "base", "head", or "run" on a run's own page
    index: int  # 1-based, in the order the processes ran
    samples: tuple[float, ...]  # per-call µs


@dataclass(frozen=True)
class Strip:
    processes: tuple[Process, ...]
    band: tuple[float, float] | None = None  # µs: base's value × (1 ± the verdict's band)
    reference: float | None = None  # µs: the base's value the band is around
    verdict: str | None = None


@dataclass(frozen=True)
class PhaseBar:
    compile: str  # "cold", "warm" or "warm start"
    side: str  # "base", "head" or "run"
    phases: tuple[tuple[str, float], ...]  # (phase, seconds), in the order recorded
    total: float | None  # the compile's own time (the table's value), where measured


@dataclass(frozen=True)
class ForestRow:
    label: str
    anchor: str  # the id of the model's details on the page
    change: float  # head / base - 1
    low: float | None
    high: float | None
    band: float | None
    verdict: str


def processes(latency: Latency) -> list[tuple[float, ...]]:
    """The compiled samples split into their timing processes (stored one after the other;
    results of schema version 1 have no sizes: equal parts)."""
    samples = list(latency.compiled_us)
    sizes = list(latency.process_sizes)
    if sum(sizes) != len(samples):
        n = max(1, latency.processes)
        sizes = [len(samples) // n + (1 if i < len(samples) % n else 0) for i in range(n)]
    out, at = [], 0
    for size in sizes:
        if size:
            out.append(tuple(samples[at:at + size]))
        at += size
    return out


def _procs(side: str, result: ModelResult | None) -> list[Process]:
    if result is None or result.latency is None:
        return []
    return [Process(side, i, s) for i, s in enumerate(processes(result.latency), 1)]


def strip(result: ModelResult) -> Strip | None:
    """One run's model: its timing processes."""
    procs = _procs("run", result)
    return Strip(tuple(procs)) if procs else None


def compared_strip(row: ModelRow, base: ModelResult | None,
                   head: ModelResult | None) -> Strip | None:
    """A compared model: base's processes, then head's, with the verdict's band."""
    procs = _procs("base", base) + _procs("head", head)
    if not procs:
        return None
    d = row.compiled_time
    band = reference = None
    if d is not None and d.band is not None and d.base > 0:
        reference, band = d.base, (d.base * (1 - d.band), d.base * (1 + d.band))
    return Strip(tuple(procs), band=band, reference=reference, verdict=row.verdict.value)


# the phases that add up to a compile's total; ``kernel_compile`` and a training step's
# ``backward`` are inside them, and ``total`` is the bar's length (docs/results-schema.md)
STACKED = ("dynamo", "aot_autograd", "inductor", "codegen")


def phases(result: ModelResult | None, side: str) -> list[PhaseBar]:
    """Cold, warm and warm-start compile phases of one result (only those recorded), stacked:
    the exclusive phases only, so a bar is as long as its compile."""
    if result is None:
        return []
    c = result.compile
    bars = [("cold", c.phases, c.cold_s), ("warm", c.warm_phases, c.warm_s),
            ("warm start", c.warm_start_phases, c.warm_start_s)]
    return [PhaseBar(name, side, tuple((k, float(ph[k])) for k in STACKED if k in ph), total)
            for name, ph, total in bars if any(k in ph for k in STACKED)]


def forest(comparison: Comparison) -> list[ForestRow]:
    """Every compared model with a compiled-time change, in the table's order."""
    rows = []
    for i, r in enumerate(comparison.rows, 1):
        d = r.compiled_time
        if d is None or d.ratio is None:
            continue
        rows.append(ForestRow(
            label=f"{r.suite}/{r.model} · {r.config}", anchor=f"m-{i}", change=d.ratio - 1,
            low=None if d.ci_low is None else d.ci_low - 1,
            high=None if d.ci_high is None else d.ci_high - 1, band=d.band,
            verdict=r.verdict.value))
    return rows
