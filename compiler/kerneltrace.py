"""Reading a profiled run's chrome trace (``torch.profiler``'s ``export_chrome_trace``) into
calls: what each profiled step ran, kernel by kernel, and what it cost.

One reader for both devices. Each profiled step is a ``user_annotation`` (``STEP``); each
compiled graph's call is Inductor's ``## Call CompiledFxGraph <key> ##`` annotation. Inside a
graph, a call is the outermost op below the annotation: a C++ kernel as
``cpp.enable_kernel_profile`` names it (``graph_0_cpp_fused_add_0``), a Triton kernel as its
launcher names it under the profiler (``triton_poi_fused_add_0``), or an extern op
(``aten::mm``). Outside every graph, a call is an outermost ``aten::`` op (eager: a graph
break's, the optimizer's). On a CPU a call's time is its own duration; on CUDA it is the time of
the device kernels its launches started (linked by CUPTI's correlation id), and each launch call
is counted. A device kernel whose launch is inside a graph but below no op (a CUDA graph's
replay) is a call of its own, by its own name.
"""

from __future__ import annotations

import bisect
import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

STEP = "compilewatch.step"
_GRAPH = re.compile(r"^## Call CompiledFxGraph (\S+) ##$")
_CPP = re.compile(r"^graph_\d+_(cpp_\w+)$")
HOST = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver")
DEVICE = ("kernel", "gpu_memcpy", "gpu_memset")
# the host calls that start device work: each is one launch (a CUDA graph's replay launches
# all its kernels at once)
LAUNCHES = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
                      "cuLaunchKernelEx", "cudaLaunchCooperativeKernel",
                      "cudaLaunchCooperativeKernelMultiDevice", "cudaGraphLaunch",
                      "cuGraphLaunch"})


@dataclass
class _Event:
    name: str
    cat: str
    ts: float
    dur: float
    args: Mapping[str, Any]
    parent: _Event | None = None

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclass(frozen=True)
class Call:
    """One call of a kernel or op in one step."""

    step: int
    name: str
    kind: str  # generated, extern, eager, device
    graph: str | None  # the compiled graph's FX key (None: outside every graph)
    us: float
    launches: int
    shapes: str | None = None
    gb: float | None = None  # bytes moved per call, where the launcher said (Triton)


@dataclass
class Calls:
    """Every call of the profiled steps, and the steps' own host times."""

    calls: list[Call] = field(default_factory=list)
    step_us: list[float] = field(default_factory=list)
    launches: int = 0  # every launch inside a step
    graphs: list[str] = field(default_factory=list)  # FX keys, in the order first called
    unlinked: int = 0  # device events whose launch was not found (outside the steps)

    @property
    def steps(self) -> int:
        return len(self.step_us)

    def median_step_us(self) -> float:
        return statistics.median(self.step_us) if self.step_us else 0.0


def _events(trace: Mapping[str, Any]) -> tuple[dict[Any, list[_Event]], list[_Event]]:
    """Host events per thread, each with its enclosing event; device events."""
    threads: dict[Any, list[_Event]] = {}
    device: list[_Event] = []
    for raw in trace.get("traceEvents", []):
        if not isinstance(raw, dict) or raw.get("ph") != "X":
            continue
        try:
            ev = _Event(str(raw.get("name", "")), str(raw.get("cat", "")), float(raw["ts"]),
                        float(raw.get("dur", 0.0)), raw.get("args") or {})
        except (KeyError, TypeError, ValueError):
            continue
        if ev.cat in DEVICE:
            device.append(ev)
        elif ev.cat in HOST:
            threads.setdefault((raw.get("pid"), raw.get("tid")), []).append(ev)
    for evs in threads.values():
        evs.sort(key=lambda e: (e.ts, -e.dur))
        stack: list[_Event] = []
        for ev in evs:
            while stack and stack[-1].end <= ev.ts:
                stack.pop()
            ev.parent = stack[-1] if stack else None
            stack.append(ev)
    return threads, device


def _graph_of(ev: _Event) -> tuple[str | None, _Event | None]:
    """The compiled graph ``ev`` runs in, and the outermost op below that graph's annotation
    on the way to ``ev`` (``ev`` itself where it is one)."""
    op = None
    at: _Event | None = ev
    while at is not None:
        m = _GRAPH.match(at.name) if at.cat == "user_annotation" else None
        if m:
            return m.group(1), op
        if at.cat == "cpu_op":
            op = at
        at = at.parent
    return None, None


def _eager_op(ev: _Event) -> _Event | None:
    """The outermost ``aten::`` op around ``ev`` (``ev`` itself included), outside graphs."""
    found = None
    at: _Event | None = ev
    while at is not None:
        if at.cat == "cpu_op" and at.name.startswith("aten::"):
            found = at
        at = at.parent
    return found


def _call_of(ev: _Event) -> tuple[str | None, _Event | None]:
    """(graph key, the op ``ev`` is a part of), either None where it is part of none."""
    graph, op = _graph_of(ev)
    if graph is not None:
        return graph, op
    return None, _eager_op(ev)


def _named(op: _Event, graph: str | None) -> tuple[str, str]:
    """A call's name and kind."""
    if graph is None:
        return op.name, "eager"
    m = _CPP.match(op.name)
    if m:
        return m.group(1), "generated"
    if op.args.get("kernel_backend") == "triton" or op.name.startswith("triton_"):
        return str(op.args.get("kernel_name") or op.name), "generated"
    return op.name, "extern"


def _shapes(op: _Event) -> str | None:
    dims = op.args.get("Input Dims")
    if not isinstance(dims, list) or not dims:
        return None
    parts = ["x".join(str(d) for d in dim) if isinstance(dim, list) else "" for dim in dims]
    text = ", ".join(p for p in parts if p)
    return text[:200] or None


def _gb(op: _Event) -> float | None:
    value = op.args.get("kernel_num_gb")
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


class _Steps:
    """Which profiled step a moment belongs to (the steps' annotations, any thread)."""

    def __init__(self, steps: list[_Event]) -> None:
        self.spans = sorted((e.ts, e.end) for e in steps)
        self.starts = [start for start, _ in self.spans]

    def at(self, ts: float) -> int | None:
        i = bisect.bisect_right(self.starts, ts) - 1  # the last step started by then
        return i if i >= 0 and ts <= self.spans[i][1] else None


def read(trace: Mapping[str, Any]) -> Calls:
    """The calls of every profiled step in ``trace`` (a parsed chrome trace)."""
    threads, device = _events(trace)
    host = [e for evs in threads.values() for e in evs]
    steps = _Steps([e for e in host if e.cat == "user_annotation" and e.name == STEP])
    out = Calls(step_us=[end - start for start, end in steps.spans])
    graphs: dict[str, None] = {}
    cuda = bool(device)
    launched: dict[Any, tuple[_Event, int]] = {}  # correlation id -> its launch, its step
    totals: dict[int, list[Any]] = {}  # id(op) -> [step, graph, op, us, launches]
    for ev in host:
        step = steps.at(ev.ts)
        if step is None:
            continue
        if ev.cat == "user_annotation" and (m := _GRAPH.match(ev.name)):
            graphs.setdefault(m.group(1), None)
            continue
        launch = ev.cat in ("cuda_runtime", "cuda_driver") and ev.name in LAUNCHES
        if launch:
            out.launches += 1
            if "correlation" in ev.args:
                launched[ev.args["correlation"]] = ev, step
        graph, op = _call_of(ev)
        if op is None or (op is not ev and not launch):
            continue
        entry = totals.setdefault(id(op), [step, graph, op, 0.0, 0])
        if launch:
            entry[4] += 1
        elif not cuda:
            entry[3] = op.dur
    _device_time(device, launched, totals, out)
    for step, graph, op, us, launches in totals.values():
        if cuda and not us and not launches:
            continue  # an op of the host alone (an allocation, a view): no kernel
        name, kind = _named(op, graph)
        out.calls.append(Call(step, name, kind, graph, us, launches if cuda else 1,
                              _shapes(op) if kind in ("extern", "eager") else None, _gb(op)))
    out.graphs = list(graphs)
    return out


def _device_time(device: Iterable[_Event], launched: Mapping[Any, tuple[_Event, int]],
                 totals: dict[int, list[Any]], out: Calls) -> None:
    """Each device event's time to the op whose launch started it; a kernel launched below
    no op (a CUDA graph's replay) is a call of its own, with no launch of its own."""
    for ev in device:
        found = launched.get(ev.args.get("correlation"))
        if found is None:
            out.unlinked += 1
            continue
        launch, step = found
        graph, op = _call_of(launch)
        if op is not None and id(op) in totals:
            totals[id(op)][3] += ev.dur
            continue
        kind = "generated" if ev.name.startswith(("triton_", "cpp_")) else "device"
        out.calls.append(Call(step, ev.name, kind, graph, ev.dur, 0))
