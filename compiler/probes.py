"""Read what the compiler did, from torch's own bookkeeping, inside a worker process.

Torch internals move between versions, so every probe checks for its hook first and records
"unknown" with a reason rather than crashing. Sources (torch >= 2.8):
- cache keys: ``codecache.compiled_fx_graph_hash`` and ``autograd_cache.autograd_cache_key``
  both return ``(key, debug_lines)``, one line per key component: ``[hash] name: value``;
- hit/miss: ``torch._dynamo.utils.counters`` (``inductor.fxgraph_cache_*``,
  ``aot_autograd.autograd_cache_*``), attributed to each key by the counter delta until the
  next key of the same kind (lookups run right after hashing);
- graph breaks: ``counters["graph_break"]``; recompiles and guard counts:
  ``get_compilation_metrics()`` (``recompile_reason``, ``guard_count``, phase times).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_LINE = re.compile(r"^\[(?P<hash>[^\]]+)\] (?P<name>[^:]+): (?P<value>.*)$", re.S)
# Components whose values help a reader (shapes, versions); the rest keep only their hash.
_VALUE_PREFIXES = ("example_inputs", "fx_kwargs", "default_dtype", "deterministic")
_VALUE_MAX = 240
_COUNTERS = {
    "fx_hit": ("inductor", "fxgraph_cache_hit"),
    "fx_miss": ("inductor", "fxgraph_cache_miss"),
    "fx_bypass": ("inductor", "fxgraph_cache_bypass"),
    "aot_hit": ("aot_autograd", "autograd_cache_hit"),
    "aot_miss": ("aot_autograd", "autograd_cache_miss"),
    "aot_bypass": ("aot_autograd", "autograd_cache_bypass"),
}


_TENSOR = re.compile(r"dtype=torch\.(?P<dtype>\w+), shape=torch\.Size\(\[(?P<shape>[^\]]*)\]\), "
                     r"stride=\((?P<stride>[^)]*)\), device=device\(type='(?P<device>\w+)'")


def _compact(value: str) -> str:
    """``TensorMetadata(dtype=torch.float32, ...)`` -> ``float32[8, 32] stride=(32, 1) cpu``."""
    m = _TENSOR.search(value)
    if not m:
        return value
    return f"{m['dtype']}[{m['shape']}] stride=({m['stride']}) {m['device']}"


def parse_debug_lines(lines: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Split torch's key debug lines into ``{component: hash}`` and short readable values."""
    components: dict[str, str] = {}
    values: dict[str, str] = {}
    for line in lines:
        m = _LINE.match(line)
        if not m:
            continue
        name = m["name"].strip()[:256]
        components[name] = m["hash"][:128]
        if name.startswith(_VALUE_PREFIXES):
            value = m["value"].splitlines()[0] if m["value"] else ""
            values[name] = _compact(value)[:_VALUE_MAX]
    return components, values


def counters_now() -> dict[str, int]:
    from torch._dynamo.utils import counters

    return {k: int(counters[a][b]) for k, (a, b) in _COUNTERS.items()}


@dataclass
class KeyEvent:
    kind: str  # "fx" | "aot"
    key: str
    components: dict[str, str]
    values: dict[str, str]
    before: dict[str, int]
    state: str = "unknown"


@dataclass
class CompileProbe:
    """Installed once per worker; collects cache-key events and reads torch's counters."""

    events: list[KeyEvent] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    overhead_s: float = 0.0
    fx_states: dict[str, str] = field(default_factory=dict)  # key -> the lookup's own verdict

    def install(self) -> None:
        self._wrap("torch._inductor.codecache", "compiled_fx_graph_hash", "fx")
        self._wrap("torch._functorch._aot_autograd.autograd_cache", "autograd_cache_key", "aot")
        self._wrap_fx_lookup()

    def _wrap_fx_lookup(self) -> None:
        """Record each FX lookup's own verdict (``cache_info["cache_state"]``) by key.

        Counter windows alone can misattribute: an AOTAutograd hit loads its FX graph without
        hashing it, so its hit would land in the window of the previous key.
        """
        try:
            from torch._inductor.codecache import FxGraphCache

            original = FxGraphCache.load_with_key
        except (ImportError, AttributeError) as e:
            self.unknown.append(f"fx lookup states from counters only: {e}")
            return

        def load_with_key(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            try:
                key = args[0] if args else kwargs["key"]
                state = result[1].get("cache_state")
                if state in ("hit", "miss", "bypass"):
                    self.fx_states[str(key)] = state
            except Exception as e:  # never let bookkeeping break a compile
                self.unknown.append(f"fx lookup state not read: {type(e).__name__}: {e}")
            return result

        FxGraphCache.load_with_key = staticmethod(load_with_key)  # type: ignore[method-assign]

    def _wrap(self, module_name: str, attr: str, kind: str) -> None:
        import importlib

        try:
            module = importlib.import_module(module_name)
            original = getattr(module, attr)
        except (ImportError, AttributeError) as e:
            self.unknown.append(f"{kind} cache keys unavailable in this torch: {e}")
            return

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            try:
                key, lines = result
                before = counters_now()
                if not lines:
                    lines = self._debug_lines_again(original, module, args, kwargs, str(key))
                comps, values = parse_debug_lines(list(lines))
                self.events.append(KeyEvent(kind, str(key), comps, values, before))
            except Exception as e:  # never let bookkeeping break a compile
                self.unknown.append(f"{kind} key not parsed: {type(e).__name__}: {e}")
            return result

        setattr(module, attr, wrapper)

    def _debug_lines_again(self, original: Any, module: Any, args: Any, kwargs: Any,
                           key: str) -> list[str]:
        """Rehash at DEBUG log level (AOTAutograd only then hashes components one by one).

        The time it takes is added to ``overhead_s``, which the worker subtracts from the
        measured compile time, so bookkeeping never inflates a compile-time number.
        """
        import logging
        import time

        logger = getattr(module, "log", None)
        if not isinstance(logger, logging.Logger):
            return []
        t0 = time.perf_counter()
        level = logger.level
        logger.setLevel(logging.DEBUG)
        try:
            again, lines = original(*args, **kwargs)
        finally:
            logger.setLevel(level)
            self.overhead_s += time.perf_counter() - t0
        return list(lines) if str(again) == key else []

    def resolve_states(self) -> None:
        """Each key's hit/miss/bypass: the FX lookup's own verdict where it was seen, else the
        counter delta to the next key of the same kind (AOTAutograd keys)."""
        final = counters_now()
        for kind in ("fx", "aot"):
            evs = [e for e in self.events if e.kind == kind]
            for i, ev in enumerate(evs):
                if kind == "fx" and ev.key in self.fx_states:
                    ev.state = self.fx_states[ev.key]
                    continue
                after = evs[i + 1].before if i + 1 < len(evs) else final
                for state in ("hit", "miss", "bypass"):
                    name = f"{kind}_{state}"
                    if after[name] > ev.before[name]:
                        ev.state = state
                        break

    def cache_keys(self, phase: str) -> dict[str, list[dict[str, Any]]]:
        self.resolve_states()
        out: dict[str, list[dict[str, Any]]] = {"fx": [], "aot": []}
        seen: set[tuple[str, str]] = set()
        for ev in self.events:
            if (ev.kind, ev.key) in seen:  # the same graph hashed twice (e.g. a retry)
                continue
            seen.add((ev.kind, ev.key))
            out[ev.kind].append({
                "key": re.sub(r"[^A-Za-z0-9_\-]", "_", ev.key)[:128],
                "components": ev.components, "values": ev.values,
                "hit": {"hit": True, "miss": False}.get(ev.state), "state": ev.state,
                "phase": phase,
            })
        return out




def graph_breaks() -> list[dict[str, Any]]:
    """Distinct graph-break reasons with their counts."""
    from torch._dynamo.utils import counters

    return [{"reason": str(r)[:8000], "count": int(n)}
            for r, n in counters["graph_break"].items() if n > 0]


def _metrics() -> list[Any]:
    from torch._dynamo import utils

    getter = getattr(utils, "get_compilation_metrics", None)
    return list(getter()) if getter else []


def recompiles() -> list[dict[str, Any]]:
    out = []
    for m in _metrics():
        reason = getattr(m, "recompile_reason", None)
        if reason:
            out.append({"reason": str(reason)[:8000],
                        "compile_id": str(getattr(m, "compile_id", "") or "")[:256] or None})
    return out


def frame_stats() -> dict[str, Any]:
    """Frames compiled, graphs produced, total guards, and the phase breakdown in seconds."""
    from torch._dynamo.utils import counters

    ms = _metrics()

    def total_s(name: str, scale: float = 1.0) -> float | None:
        vals = [getattr(m, name, None) for m in ms]
        vals = [v for v in vals if v is not None]
        return float(sum(vals)) * scale if vals else None

    def total_us(name: str) -> float | None:
        return total_s(name, 1e-6)

    frame = total_us("dynamo_cumulative_compile_time_us") or total_s(
        "entire_frame_compile_time_s")
    backend = total_s("backend_compile_time_s") or total_us(
        "aot_autograd_cumulative_compile_time_us")
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
    }
    guards = [getattr(m, "guard_count", None) for m in ms]
    guards = [g for g in guards if g is not None]
    return {
        "phases": {k: round(v, 6) for k, v in phases.items() if v is not None and v >= 0},
        "frames": len(ms),
        "graphs": int(counters["stats"]["unique_graphs"]),
        "guard_count": sum(guards) if guards else None,
    }
