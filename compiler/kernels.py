"""The profile process: a model's compiled call run ``STEPS`` times under ``torch.profiler``
on its side's warm cache, after the timing processes, and what each kernel cost
(``core/kernels.py`` ``KernelProfile``).

On CUDA the profiler's CUDA activity times each Triton kernel (its launcher names it while the
profiler runs) and each extern op's kernels, and no setting changes: the process loads the
graphs its side's timing processes ran, from the FX cache. On a CPU a generated C++ kernel is
invisible to the profiler unless compiled with ``cpp.enable_kernel_profile``, which is part of
the FX cache key: there the profile process compiles its own graphs (``own_compile``), on a
copy of the warm cache (``compiler/job.py``), so that nothing it writes reaches a cache another
process reads. Provenance tracking (``trace.provenance_tracking_level``, outside the key) makes
a compile record which post-grad nodes each C++ kernel computes.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compilewatch.compiler import kernelcode, kerneltrace, trace
from compilewatch.compiler.kernelcode import GraphCode
from compilewatch.compiler.kerneltrace import Call, Calls
from compilewatch.core.kernels import MAX_KERNELS, Kernel, KernelOrigin, KernelProfile

STEPS = 20  # profiled calls: the per-step spread of a kernel's time is read over them
WARMUP = 3  # calls before the profile: allocator, caches and clocks settled


def configure(device: str) -> list[str]:
    """The Inductor settings the profile needs, set before anything compiles; notes on what
    could not be set. Only on a CPU does a setting enter the FX key."""
    import torch._inductor.config as inductor_config

    notes: list[str] = []
    try:
        inductor_config.trace.provenance_tracking_level = 1
    except AttributeError:
        notes.append("this torch tracks no kernel provenance: C++ kernels' origins are read "
                     "from their names only")
    if device == "cpu":
        inductor_config.cpp.enable_kernel_profile = True
    return notes


@dataclass
class Capture:
    """The structured-trace events that describe the process's compiled graphs."""

    capture: trace.Capture | None = None
    notes: list[str] = field(default_factory=list)

    @classmethod
    def start(cls) -> Capture:
        try:
            return cls(trace.install(aot_components=False, keep=kernelcode.EVENTS))
        except trace.TraceUnavailable as e:
            return cls(None, [f"kernel origins unknown: {e}"])

    def events(self) -> list[tuple[str, str | None]]:
        if self.capture is None:
            return []
        return [(e.name, e.payload) for e in self.capture.events]

    def compiled_own(self) -> bool:
        """Whether a graph missed the FX cache (or bypassed it) in this process."""
        return any(name.startswith(("fx_graph_cache_miss", "fx_graph_cache_bypass"))
                   for name, _ in self.events())

    def close(self) -> None:
        if self.capture is not None:
            self.capture.close()


def record(call: Callable[[], Any], device: str, trace_path: str, steps: int = STEPS
           ) -> dict[str, Any]:
    """``steps`` calls under the profiler, each inside a ``kerneltrace.STEP`` annotation
    (after ``WARMUP`` unprofiled ones); the chrome trace, written to ``trace_path`` (Perfetto
    and chrome://tracing load it) and parsed."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    for _ in range(WARMUP):
        call()
    sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities, record_shapes=True) as prof:
        for _ in range(steps):
            with record_function(kerneltrace.STEP):
                call()
        sync()
    Path(trace_path).parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(trace_path)
    with open(trace_path, encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def _spread(per_step: Sequence[float]) -> float:
    """p90 - p10 of a kernel's time per step."""
    if len(per_step) < 2:
        return 0.0
    q = statistics.quantiles(per_step, n=10, method="inclusive")
    return max(0.0, q[-1] - q[0])


def _code_of(graphs: Sequence[GraphCode], calls: Calls) -> dict[str | None, GraphCode]:
    """Each profiled graph's code: by its FX key, else (a bypassed graph) the graph whose
    kernels the profile saw it call."""
    by_key = {g.key: g for g in graphs if g.key}
    out: dict[str | None, GraphCode] = {}
    for key in calls.graphs:
        if key in by_key:
            out[key] = by_key[key]
            continue
        names = {c.name for c in calls.calls if c.graph == key and c.kind == "generated"}
        best = max(graphs, key=lambda g: len(names & set(g.kernels)), default=None)
        if best is not None and names & set(best.kernels):
            out[key] = best
    return out


@dataclass
class _Sum:
    """One kernel's calls, summed."""

    call: Call
    graph: GraphCode | None
    calls: int = 0
    launches: int = 0
    us: float = 0.0
    per_step: dict[int, float] = field(default_factory=dict)
    origins: list[KernelOrigin] = field(default_factory=list)

    def add(self, c: Call) -> None:
        self.calls += 1
        self.launches += c.launches
        self.us += c.us
        self.per_step[c.step] = self.per_step.get(c.step, 0.0) + c.us


def _sums(calls: Calls, code: dict[str | None, GraphCode]) -> list[_Sum]:
    """Calls of one kernel summed: a generated kernel by (graph, name), an extern op by its
    call site (the k-th call of that op in a graph's step, which is the graph's k-th call
    site of it: its origins), an eager op by (name, shapes)."""
    sums: dict[tuple[Any, ...], _Sum] = {}
    seen: dict[tuple[Any, ...], int] = {}
    for c in calls.calls:
        graph = code.get(c.graph)
        site = None
        if c.kind == "extern":
            site = seen[(c.step, c.graph, c.name)] = seen.get((c.step, c.graph, c.name), -1) + 1
        s = sums.setdefault((c.graph, c.name, c.kind, c.shapes, site), _Sum(c, graph))
        s.add(c)
        if graph is None or s.origins:
            continue
        if c.kind == "extern":
            sites = [o for op, o in graph.externs if op == c.name]
            s.origins = list(sites[site]) if site is not None and site < len(sites) else []
        else:
            s.origins = list(graph.kernels.get(c.name, []))
    return list(sums.values())


def summarise(calls: Calls, graphs: Sequence[GraphCode], *, activity: str,
              own_compile: bool, notes: Iterable[str] = ()) -> KernelProfile:
    """The profile of one process: each kernel with its time, calls, launches, spread over
    the steps and origins, the longest first (at most ``MAX_KERNELS``; the others' time stays
    in ``device_us``)."""
    steps = max(1, calls.steps)
    code = _code_of(graphs, calls)
    sums = sorted(_sums(calls, code), key=lambda s: -s.us)
    kernels = [_kernel(s, steps) for s in sums[:MAX_KERNELS]]
    device_us = statistics.median([sum(s.per_step.get(i, 0.0) for s in sums)
                                   for i in range(steps)])
    launches = calls.launches if activity == "cuda" else len(calls.calls)
    said = list(notes)
    if calls.unlinked:
        said.append(f"{calls.unlinked} device events had no launch in a profiled step")
    labels = [(code[k].aot_id or k[:12]) if k in code else k[:12] for k in calls.graphs]
    return KernelProfile(activity=activity, steps=steps, step_us=calls.median_step_us(),
                         device_us=device_us, launches_per_step=launches / steps,
                         graphs=labels[:256], kernels=kernels,
                         left_out=max(0, len(sums) - MAX_KERNELS), own_compile=own_compile,
                         notes=said[:16])


def _kernel(s: _Sum, steps: int) -> Kernel:
    c = s.call
    gb = c.gb if c.gb is not None else (s.graph.gb.get(c.name) if s.graph else None)
    per_step = [s.per_step.get(i, 0.0) for i in range(steps)]
    return Kernel(name=c.name[:256], kind=c.kind,  # type: ignore[arg-type]
                  graph=(s.graph.aot_id if s.graph else None), calls=s.calls,
                  launches=s.launches, total_us=s.us, step_us=statistics.median(per_step),
                  step_spread_us=_spread(per_step),
                  shapes=c.shapes, gb=gb, origins=kernelcode.distinct(s.origins))


def profile_of(trace_data: dict[str, Any], capture: Capture, *, activity: str,
               shorten: kernelcode.Shorten, notes: Iterable[str] = ()) -> KernelProfile:
    """The process's profile from its chrome trace and its compiles' trace events."""
    calls = kerneltrace.read(trace_data)
    graphs = kernelcode.graphs(capture.events(), shorten)
    notes = [*notes, *capture.notes]
    if calls.steps == 0:
        notes.append("no profiled step was found in the trace")
    return summarise(calls, graphs, activity=activity, own_compile=capture.compiled_own(),
                     notes=notes)
