"""Read what the compiler did, from torch's own records, inside a worker process.

The first source is torch's structured trace (``compiler/trace.py``), captured in-process: graph
breaks with their place, kind and id (``compiler/breaks.py``), every cache lookup with its key
and components (``compiler/cachekeys.py``), every recompile with all its guard failures, and a
``compilation_metrics`` record per compile. Where a torch lacks a piece, the older sources stand
in: ``counters["graph_break"]``, ``get_compilation_metrics()`` (its last 64 compiles), wrappers
around the two cache-key hash functions and the cache counters. Whatever cannot be measured is
recorded in ``unknown`` with the reason; what the sources say that does not add up (two graphs
and no break) is recorded in ``notes``. Nothing here may break a compile or crash a worker.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compilewatch.compiler import breaks, cachekeys, trace
from compilewatch.compiler.cachekeys import counters_now, parse_debug_lines

__all__ = ["CompileProbe", "counters_now", "frame_stats", "graph_breaks", "parse_debug_lines",
           "recompiles"]

MAX_NOTES = 16
NOTE_MAX = 1000
_ACTIVE: CompileProbe | None = None  # the probe installed in this process


def user_path(path: str, suite: str | None = None) -> str:
    """A path of the user's code as a graph break's location shows it: relative to the suite's
    folder or the deepest ``sys.path`` entry holding it (``breaks.short_path``)."""
    roots = [p for p in sys.path if p]
    if suite and suite.endswith(".py"):
        roots.append(str(Path(suite).resolve().parent))
    return breaks.short_path(path, roots)


@dataclass
class CompileProbe:
    """Installed once per worker before the first compile; read after it."""

    trace_dir: str | None = None  # also write torch's raw trace (TORCH_TRACE format) here
    suite: str | None = None  # the suite's source: locations are shown relative to its folder
    unknown: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    capture: trace.Capture | None = None
    wrappers: cachekeys.HashWrappers = field(default_factory=cachekeys.HashWrappers)

    def install(self) -> None:
        global _ACTIVE
        try:
            self.capture = trace.install(self.trace_dir)
        except trace.TraceUnavailable as e:
            self.unknown.append(f"{e}: breaks from counters, keys from hash wrappers")
        except Exception as e:  # a torch that changed under us: measure without it
            self.unknown.append(f"structured trace not captured: {type(e).__name__}: {e}")
        self.wrappers.rehash = self.capture is None
        self.wrappers.install()
        _ACTIVE = self

    @property
    def overhead_s(self) -> float:
        """Seconds of compile time spent on our bookkeeping (the worker subtracts them)."""
        return (self.capture.overhead_s if self.capture else 0.0) + self.wrappers.overhead_s

    def _note(self, text: str) -> None:
        text = text[:NOTE_MAX]
        if text not in self.notes and len(self.notes) < MAX_NOTES:
            self.notes.append(text)

    # --- compiles ----------------------------------------------------------------------------

    def metrics(self) -> list[dict[str, Any]]:
        """One record per compile (forward, backward, runtime), all of them from the trace;
        ``get_compilation_metrics()`` keeps only the last 64."""
        traced = [e.meta for e in self.capture.events if "compilation_metrics" in e.name
                  and isinstance(e.meta, dict)] if self.capture is not None else []
        return traced or _torch_metrics()

    def frame_stats(self) -> dict[str, Any]:
        return _stats(self.metrics())

    # --- graph breaks --------------------------------------------------------------------------

    def graph_breaks(self) -> list[dict[str, Any]]:
        """Distinct breaks (reason, place) with counts, kinds and ids; see ``breaks``."""
        found = self._breaks()
        return breaks.summarise(found, self._shorten)[:1024]

    def _breaks(self) -> list[breaks.Break]:
        metrics = self.metrics()
        counted = _counter("graph_break")
        if self.capture is None:
            return breaks.from_counters(counted) + breaks.from_failures(metrics, set())
        events = self.capture.named("dynamo_graph_break_reason")
        found = breaks.from_events(events)
        found += breaks.from_failures(metrics, {e.compile_id for e in events})
        traced = sum(1 for e in events if e.payload and not breaks.parse(e.payload).frame_skipped)
        total = sum(counted.values())
        if total > traced:  # the counter misses breaks, never the other way round
            if not events:
                found += breaks.from_counters(counted)
            self._note(f"torch counted {total} graph breaks but its trace shows {traced}"
                       + ("; the counter's reasons are used" if not events else ""))
        unplaced = sum(1 for b in found if b.file is None)
        if unplaced:
            self._note(f"{unplaced} graph break(s) without a place in the user's code")
        self._check_frames(found, metrics)
        return found

    def _check_frames(self, found: list[breaks.Break], metrics: list[dict[str, Any]]) -> None:
        """Frames and graphs that no break or recompile explains."""
        stats = _stats(metrics)
        frames = stats["frames"]
        recompiled = sum(1 for m in metrics if m.get("recompile_reason"))
        graphs = stats["graphs"] - stats["compiled_autograd_frames"]
        if not found and (graphs > 1 + recompiled or frames > 1 + recompiled):
            self._note(f"{stats['graphs']} graphs from {frames} compiled frames "
                       f"({recompiled} recompiles) but no graph break was found")

    def _shorten(self, path: str) -> str:
        return user_path(path, self.suite)

    # --- recompiles ----------------------------------------------------------------------------

    def recompiles(self) -> list[dict[str, Any]]:
        """One per recompile: every guard that failed (one per cache entry tried, each led by
        that entry's compile id), and the id of the compile it caused."""
        out: dict[str | None, dict[str, Any]] = {}
        for ev in self.capture.named("recompile_reasons") if self.capture else []:
            reasons = _reasons(ev.payload)
            if reasons:
                out[ev.compile_id] = {"reason": "\n".join(reasons)[:8000],
                                      "compile_id": ev.compile_id}
        for m in self.metrics():  # the first reason of each recompile, where the trace had none
            cid = str(m.get("compile_id") or "")[:256] or None
            if m.get("recompile_reason") and cid not in out:
                if self.capture is not None:
                    self._note(f"recompile {cid} not in torch's trace; its first reason only")
                out[cid] = {"reason": str(m["recompile_reason"]).strip()[:8000], "compile_id": cid}
        return list(out.values())[:1024]

    # --- caches --------------------------------------------------------------------------------

    def cache_keys(self, phase: str) -> dict[str, list[dict[str, Any]]]:
        """Every lookup's key, state and components, per kind (fx, aot)."""
        traced = cachekeys.from_trace(self.capture.events if self.capture else [], phase)
        for text in traced.notes:
            if "not in torch's trace" not in text:
                self._note(text)
            elif text not in self.unknown:
                self.unknown.append(text)
        out: dict[str, list[dict[str, Any]]] = {}
        stages = []
        for kind in ("fx", "aot"):
            got = getattr(traced, kind)
            if got:
                stages.append(kind)
            out[kind] = (got or self.wrappers.lookups(kind, phase))[:1024]
        for text in cachekeys.consistency(traced.tally, counters_now(), stages):
            self._note(text)
        self.unknown.extend(u for u in self.wrappers.unknown if u not in self.unknown)
        return out

    def counters(self) -> dict[str, int]:
        return counters_now()

    def unknown_text(self) -> str | None:
        """What could not be measured, for ``WorkerOutput.cache_unknown``."""
        extra = self.capture.all_notes() if self.capture else []
        return "; ".join(dict.fromkeys([*self.unknown, *extra]))[:8000] or None

    def close(self) -> None:
        """Put torch back as it was (the worker never needs to: its process ends)."""
        global _ACTIVE
        if self.capture is not None:
            self.capture.close()
        self.wrappers.uninstall()
        if _ACTIVE is self:
            _ACTIVE = None


def _reasons(payload: str | None) -> list[str]:
    """``recompile_reasons``: a JSON string (one reason) or list; each ``"0/0: <guard>"``."""
    import json

    try:
        data = json.loads(payload) if payload else []
    except ValueError:
        data = payload
    items = data if isinstance(data, list) else [data]
    return ["\n".join(x.rstrip() for x in str(r).splitlines()) for r in items if r]


def _counter(name: str) -> dict[str, int]:
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return {}
    return {str(k): int(v) for k, v in counters[name].items() if v > 0}


def _torch_metrics() -> list[dict[str, Any]]:
    try:
        from torch._dynamo import utils
    except ImportError:
        return []
    getter = getattr(utils, "get_compilation_metrics", None)
    out = []
    for m in getter() if getter else []:
        with contextlib.suppress(TypeError):
            out.append(dict(vars(m)))
    return out


# torch times Inductor's call of the min-cut partitioner (``compile_fx``'s ``partition_fn``)
# under this name; it keeps every such time in ``compilation_time_metrics``, by name
PARTITIONER_EVENT = "min_cut_rematerialization_partition"
# ... and Inductor's compile of a backward graph under this one: where AOTAutograd compiles the
# backward at once, inside the forward's compile (it does when the backward needs sizes the
# forward saves: dynamic shapes), no lazy backward compile is recorded apart
BACKWARD_EVENT = "compile_fx.<locals>.bw_compiler"


def _timed(event: str) -> float | None:
    """Seconds of every ``dynamo_timed`` section of this name in this process so far (None:
    none ran, or this torch does not time it)."""
    try:
        from torch._dynamo.utils import compilation_time_metrics
    except ImportError:
        return None
    vals = [v for v in compilation_time_metrics.get(event) or [] if isinstance(v, (int, float))]
    return float(sum(vals)) if vals else None


def _compiled_autograd(m: dict[str, Any]) -> bool:
    """A graph compiled autograd captured (its compile ids read ``!<capture>/<frame>/<n>``)."""
    return str(m.get("compile_id") or "").startswith("!")


def _frames(ms: list[dict[str, Any]]) -> int:
    """Frames Dynamo compiled of the model's code: torch also records a backward compile
    (``is_forward`` False), work done at run time (``is_runtime``: on a GPU, Triton autotuning
    and lazily compiled kernels on the first call) and compiled autograd's captures of a
    backward as metrics of their own, and none of them is a frame of the model's code."""
    return sum(1 for m in ms if m.get("is_forward") is not False and not m.get("is_runtime")
               and not _compiled_autograd(m))


def _stats(ms: list[dict[str, Any]]) -> dict[str, Any]:
    """Frames compiled, graphs produced, total guards, and the phase breakdown in seconds."""

    def total_s(name: str, scale: float = 1.0) -> float | None:
        vals = [m.get(name) for m in ms]
        vals = [v for v in vals if isinstance(v, (int, float))]
        return float(sum(vals)) * scale if vals else None

    def total_us(name: str) -> float | None:
        return total_s(name, 1e-6)

    def plus(a: float | None, b: float | None) -> float | None:
        return a if b is None else (a or 0.0) + b

    # A training step's backward is compiled lazily, at the first backward call, and recorded
    # apart (``is_forward`` False): only Inductor's times, inside the backward's own total.
    # It belongs to the frame's total and to the backend (AOTAutograd compiles it).
    backward = total_us("backward_cumulative_compile_time_us")
    frame = plus(total_us("dynamo_cumulative_compile_time_us") or total_s(
        "entire_frame_compile_time_s"), backward)
    backend = plus(total_s("backend_compile_time_s") or total_us(
        "aot_autograd_cumulative_compile_time_us"), backward)
    inductor = total_s("inductor_compile_time_s") or total_us(
        "inductor_cumulative_compile_time_us")
    codegen = total_s("code_gen_time_s") or total_us(
        "inductor_code_gen_cumulative_compile_time_us")

    def minus(a: float | None, b: float | None) -> float | None:
        return None if a is None else max(0.0, a - (b or 0.0))

    # Exclusive times: each phase without the ones nested inside it.
    phases = {
        "total": frame,
        "dynamo": minus(frame, backend),
        "aot_autograd": minus(backend, inductor),
        "inductor": minus(inductor, codegen),
        "codegen": codegen,
        "kernel_compile": total_us("triton_compile_time_us"),  # inside the others: not summed
        # the backward's compile (lazy, or at once inside the forward's), inside the others:
        # not summed
        "backward": backward if backward is not None else _timed(BACKWARD_EVENT),
        # AOTAutograd's min-cut partitioner, inside aot_autograd: not summed
        "partitioner": _timed(PARTITIONER_EVENT),
    }
    guards = [m.get("guard_count") for m in ms]
    guards = [g for g in guards if isinstance(g, int)]
    graphs = _counter("stats").get("unique_graphs", 0)
    return {
        "phases": {k: round(v, 6) for k, v in phases.items() if v is not None and v >= 0},
        "frames": _frames(ms),
        "graphs": int(graphs),
        "compiled_autograd_frames": sum(1 for m in ms if _compiled_autograd(m)
                                        and not m.get("is_runtime")),
        "guard_count": sum(guards) if guards else None,
    }


# --- the process's installed probe, for callers that hold no probe -------------------------------

def frame_stats() -> dict[str, Any]:
    return _ACTIVE.frame_stats() if _ACTIVE is not None else _stats(_torch_metrics())


def graph_breaks() -> list[dict[str, Any]]:
    if _ACTIVE is not None:
        return _ACTIVE.graph_breaks()
    return breaks.summarise(breaks.from_counters(_counter("graph_break")), str)


def recompiles() -> list[dict[str, Any]]:
    return (_ACTIVE or CompileProbe()).recompiles()
