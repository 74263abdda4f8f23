"""One model's worker outputs (cold, timing, warm-start, remote processes) into one
``ModelResult``.

A mapping, not a translation: the outputs already hold the schema's types. What is decided here
is which process speaks for what: the first cold process for the compile's anatomy (breaks,
recompiles, keys, phases, accuracy), every cold process for the cold compile time, every timing
process for steady state and the warm compile time.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from compilewatch.compiler.protocol import WorkerOutput
from compilewatch.core import estimates
from compilewatch.core.kernels import KernelProfile
from compilewatch.core.schema import MAX_ORIGINS, STATUS_OF, Category, ModelResult

LAUNCH_BOUND = 0.8  # host launch time / GPU time above which the GPU waits for the CPU


@dataclass
class Outputs:
    """What the processes of one (model, config) on one side produced."""

    cold: list[WorkerOutput] = field(default_factory=list)
    timing: list[WorkerOutput] = field(default_factory=list)
    warm_start: WorkerOutput | None = None
    remote: WorkerOutput | None = None  # empty cache dir, the shared compile cache read
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    timing_skipped: str | None = None
    scan: WorkerOutput | None = None  # what the model reads of its checkout, when asked
    compile_skipped: bool = False  # not compiled either: the change touches nothing it reads
    cold_concurrent: bool = False
    trace: str | None = None  # the first cold compile's trace, kept (a relative path)
    profile: WorkerOutput | None = None  # the profile process (``compiler/kernels.py``)
    kernel_trace: str | None = None  # its chrome trace, kept (a relative path)

    def all(self) -> list[WorkerOutput]:
        return [*([self.scan] if self.scan else []), *self.cold, *self.timing,
                *([self.warm_start] if self.warm_start else []),
                *([self.remote] if self.remote else []),
                *([self.profile] if self.profile else [])]

    def kernels(self, device: str) -> KernelProfile | None:
        """The profile process's kernels; where it failed, a profile that says why (the diff
        shows it)."""
        p = self.profile
        if p is None or p.ok:
            return p.kernels if p else None
        return KernelProfile(activity="cuda" if device == "cuda" else "cpu",
                             unknown_reason=f"the profile process failed ({p.category.value})")

    def diagnostics(self) -> dict[str, str] | None:
        kept = {"trace": self.trace, "kernel_trace": self.kernel_trace}
        return {k: v for k, v in kept.items() if v} or None


def _status(o: Outputs) -> tuple[Category, str | None]:
    first = o.cold[0]
    if not first.ok:
        return first.category, first.error
    for i, out in enumerate(o.cold[1:], 2):
        if not out.ok:
            return out.category, f"cold compile process {i}: {out.error}"
    for i, out in enumerate(o.timing, 1):
        if not out.ok:
            return out.category, f"timing process {i}: {out.error}"
    acc = first.accuracy
    if acc is not None and acc.eager_deterministic is False:
        return Category.EAGER_NONDETERMINISTIC, (
            "eager does not repeat its own output within the tolerance (max abs err between "
            "two eager calls above atol/rtol): random or nondeterministic output is not judged")
    if acc is not None and acc.passed is False and acc.failure == "uncomparable":
        return Category.ACCURACY_UNCOMPARABLE, f"compiled output not judged: {acc.reason}"
    if acc is not None and acc.passed is False:
        why = acc.reason or f"max abs err {acc.max_abs_err} (atol {acc.atol}, rtol {acc.rtol})"
        return Category.ACCURACY, f"compiled output differs from eager: {why}"
    return Category.OK, None


def _latency(outs: Sequence[WorkerOutput]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    lats = [o.latency for o in outs if o.ok and o.latency is not None]
    if not lats:
        return None, None
    eager = [x for lat in lats for x in lat.eager_us]
    compiled = [x for lat in lats for x in lat.compiled_us]
    fractions = [lat.host_fraction for lat in lats if lat.host_fraction is not None]
    host = statistics.median(fractions) if fractions else None
    hosts = [lat.host_us for lat in lats if lat.host_us is not None]
    comp = estimates.level([lat.compiled_us for lat in lats])
    speed = estimates.level([[e / c for e, c in zip(lat.eager_us, lat.compiled_us, strict=False)
                              if c > 0] for lat in lats])
    latency = {
        "method": "interleaved-blocks", "timer": lats[0].timer,
        "calls_per_block": lats[0].calls_per_block, "eager_us": eager, "compiled_us": compiled,
        "eager_median_us": statistics.median(eager), "compiled_median_us": statistics.median(
            compiled), "processes": len(lats), "process_sizes": [len(x.compiled_us)
                                                                  for x in lats],
        "compiled_ci_us": _interval(comp), "host_fraction": host,
        "compiled_host_us": statistics.median(hosts) if hosts else None,
        "launch_bound": None if host is None else host >= LAUNCH_BOUND,
        "pinned_cpus": sorted({c for lat in lats for c in lat.cpus}),
        # per process, where every process said (one that did not leaves the pairing unknown)
        "gpus": [lat.gpu.model_dump() for lat in lats if lat.gpu is not None]
        if all(lat.gpu is not None for lat in lats) else [],
    }
    if any(lat.reference_us for lat in lats):
        latency["reference_us"] = [x for lat in lats for x in lat.reference_us]
        latency["reference_sizes"] = [len(lat.reference_us) for lat in lats]
    return latency, _interval(speed)


def _interval(v: tuple[float, float, float] | None) -> dict[str, float] | None:
    return None if v is None else {"value": v[0], "ci_low": v[1], "ci_high": v[2]}


def _harness(outs: Sequence[WorkerOutput]) -> dict[str, float]:
    total: dict[str, float] = {}
    for o in outs:
        for k, v in o.harness_s.items():
            total[k] = total.get(k, 0.0) + v
    return {k: round(v, 6) for k, v in total.items()}


def _modules(outs: Sequence[WorkerOutput]) -> dict[str, Any]:
    """Where the model's imports came from, over its processes (each builds it: a module
    only one of them imported, lazily, counts too)."""
    found: dict[str, Any] = {}
    for o in outs:
        for name, origin in o.modules.items():
            found.setdefault(name, origin)
    return dict(sorted(found.items())[:MAX_ORIGINS])


def _median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def assemble(base: dict[str, Any], o: Outputs, cache_dir_was_empty: bool) -> ModelResult:
    """The schema-valid result of one (model, config); an output that cannot be recorded
    becomes that model's ``infra`` error, never an exception that stops the run."""
    try:
        return ModelResult.model_validate(_result(base, o, cache_dir_was_empty))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<top>"
        error = (f"the measurements of this model do not fit the results schema "
                 f"({where}: {first['msg']}); recorded as an error, the run goes on")
        return ModelResult(**base, status=STATUS_OF[Category.INFRA], category=Category.INFRA,
                           error=error, duration_s=o.seconds, notes=o.notes[:64])


def _result(base: dict[str, Any], o: Outputs, was_empty: bool) -> dict[str, Any]:
    if o.compile_skipped:  # ran (its scan built and ran it) but was not measured
        return {**base, "status": STATUS_OF[Category.OK], "category": Category.OK,
                "notes": list(o.notes), "duration_s": o.seconds, "harness_s": _harness(o.all()),
                "timing_skipped": o.timing_skipped, "compile_skipped": True,
                "modules": _modules(o.all())}
    category, error = _status(o)
    result: dict[str, Any] = {**base, "status": STATUS_OF[category], "category": category,
                              "error": error, "notes": list(o.notes), "duration_s": o.seconds,
                              "harness_s": _harness(o.all()), "modules": _modules(o.all()),
                              "diagnostics": o.diagnostics(),
                              "kernels": o.kernels(base["config"].device)}
    c = o.cold[0]
    result["notes"] = [*o.notes, *c.notes][:64]  # the worker's own: what its probes doubt
    if not c.ok or c.compile is None:
        return result
    colds = [x.compile for x in o.cold if x.ok and x.compile is not None]
    warms = [x.compile for x in o.timing if x.ok and x.compile is not None]
    w = next((x for x in o.timing if x.ok and x.compile is not None), None)
    s = o.warm_start if o.warm_start is not None and o.warm_start.ok else None
    r = o.remote if o.remote is not None and o.remote.ok else None
    timed = o.timing or [c]
    latency, speedup = _latency(timed) if o.timing_skipped is None else (None, None)
    counters = {"cold": c.counters} | ({"warm": w.counters} if w else {}) \
        | ({"warm_start": s.counters} if s else {}) | ({"remote": r.counters} if r else {})
    others = [x for x in (w, s, r) if x is not None]
    cold_s = _median([x.wall_s for x in colds])
    result.update(
        latency=latency, speedup=speedup, timing_skipped=o.timing_skipped,
        compile={"cold_s": cold_s, "warm_s": _median([x.wall_s for x in warms]),
                 "cold_samples_s": [x.wall_s for x in colds],
                 "cold_cpu_samples_s": [x.cpu_s for x in colds if x.cpu_s is not None],
                 "warm_samples_s": [x.wall_s for x in warms],
                 "cold_concurrent": o.cold_concurrent, "import_s": c.import_s,
                 "first_output_s": (c.import_s + cold_s if c.import_s is not None
                                    and cold_s is not None else None),
                 "phases": c.compile.phases, "warm_phases": warms[0].phases if warms else {},
                 "frames": c.compile.frames, "graphs": c.compile.graphs,
                 "compiled_autograd_frames": c.compile.compiled_autograd_frames,
                 "guard_count": c.compile.guard_count,
                 "warm_start_s": s.compile.wall_s if s and s.compile else None,
                 "warm_start_phases": s.compile.phases if s and s.compile else {},
                 "remote_s": r.compile.wall_s if r and r.compile else None,
                 "remote_phases": r.compile.phases if r and r.compile else {},
                 # instruction counts vary less from the host than time: the minimum of repeats
                 "cold_instructions": min((x.instructions for x in colds
                                           if x.instructions is not None), default=None),
                 "cache_dir_was_empty": was_empty},
        graph_breaks=c.graph_breaks, recompiles=c.recompiles,
        cache={"fx": [*c.cache.fx, *(x for o2 in others for x in o2.cache.fx)][:1024],
               "aot": [*c.cache.aot, *(x for o2 in others for x in o2.cache.aot)][:1024],
               "counters": {k: v for k, v in counters.items() if v is not None},
               "unknown_reason": c.cache_unknown},
        accuracy=c.accuracy, training=c.training,
        memory=next((x.memory for x in timed if x.ok and x.memory is not None), None)
        or {"unknown_reason": "not measured"},
    )
    return result
