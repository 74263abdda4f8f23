"""Cache lookups (FX graph and AOTAutograd): the key, hit / miss / bypass, and the key's
components, so that a comparison can say *which* component changed.

Torch describes a key by one line per component, ``[component-hash] name: value``. The
structured trace carries them in the payload of every ``fx_graph_cache_{hit,miss,bypass}`` and
``aotautograd_cache_{hit,miss,bypass}`` event (on torch 2.13 the AOTAutograd lines only when its
logger is at DEBUG: see ``trace._aot_debug_lines``). Where a torch emits no such event the
fallback reads the same lines from wrappers around the two hash functions, with each key's
state from the lookup's own verdict (FX) or from the counter deltas until the next key.

Values are kept where a reader can use them (``example_inputs[0]: float32[8, 16]
stride=(16, 1) cpu``, config values, the torch version); the graph and anything unprintable keep
their hash only. A real model has thousands of inputs (its parameters): long runs of consecutive
same-valued components become one (``example_inputs[3..262]``) with a combined hash, and if
that is not enough, consecutive blocks, so that a key always fits the results schema.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compilewatch.compiler.trace import Event

MAX_COMPONENTS = 4000  # the schema allows 4096 per key: keep a margin
VALUE_MAX = 240
NAME_MAX = 256
RUN_MIN = 3  # shorter runs of equal values stay as they are
STATES = ("hit", "miss", "bypass")
_LINE = re.compile(r"^\[(?P<hash>[^\]]+)\] (?P<name>[^:]+): (?P<value>.*)$", re.S)
_INDEXED = re.compile(r"^(?P<base>[^\[\]]+)\[(?P<i>\d+)\]$")
_TENSOR = re.compile(r"dtype=torch\.(?P<dtype>\w+), shape=torch\.Size\(\[(?P<shape>[^\]]*)\]\), "
                     r"stride=\((?P<stride>[^)]*)\), device=device\(type='(?P<device>\w+)'")
_NO_VALUE = ("gm", "autograd_config", "system_info")  # graph code, pickles, host hashes
_COUNTERS = {
    "fx_hit": ("inductor", "fxgraph_cache_hit"),
    "fx_miss": ("inductor", "fxgraph_cache_miss"),
    "fx_bypass": ("inductor", "fxgraph_cache_bypass"),
    "aot_hit": ("aot_autograd", "autograd_cache_hit"),
    "aot_miss": ("aot_autograd", "autograd_cache_miss"),
    "aot_bypass": ("aot_autograd", "autograd_cache_bypass"),
}


def counters_now() -> dict[str, int]:
    """Torch's own cache counters (``CacheCounters`` fields)."""
    from torch._dynamo.utils import counters

    return {k: int(counters[a][b]) for k, (a, b) in _COUNTERS.items()}


def _safe_hash(h: str) -> str:
    return re.sub(r"[^A-Za-z0-9_\-]", "_", h)[:128] or "_"


def compact(value: str) -> str:
    """``TensorMetadata(dtype=torch.float32, ...)`` -> ``float32[8, 32] stride=(32, 1) cpu``."""
    m = _TENSOR.search(value)
    if not m:
        return value
    return f"{m['dtype']}[{m['shape']}] stride=({m['stride']}) {m['device']}"


def _readable(name: str, value: str) -> str | None:
    if name.startswith(_NO_VALUE):
        return None
    if name == "torch_version":  # torch hashes its build: show the version it names
        return _torch_version()
    first = value.splitlines()[0] if value else ""
    if not first.isprintable() or "\ufffd" in first:
        return None
    return compact(first)[:VALUE_MAX]


def _torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    git = getattr(torch.version, "git_version", None)
    return f"{torch.__version__} ({str(git)[:12]})" if git else torch.__version__


def parse_debug_lines(lines: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Torch's key lines into ``{component: hash}`` and readable ``{component: value}``."""
    components: dict[str, str] = {}
    values: dict[str, str] = {}
    for line in lines:
        m = _LINE.match(str(line))
        if not m:
            continue
        name = m["name"].strip()[:NAME_MAX]
        n = 2
        while name in components:  # never let a repeated name hide a component
            name, n = f"{m['name'].strip()[:NAME_MAX - 8]}#{n}", n + 1
        components[name] = _safe_hash(m["hash"])
        value = _readable(name, m["value"])
        if value is not None:
            values[name] = value
    return components, values


def _combined(hashes: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(hashes).encode()).hexdigest()[:52]


def _merge(items: Sequence[tuple[str, str]], values: Mapping[str, str], start: int, end: int,
           base: str) -> tuple[str, str, str | None]:
    """Components ``items[start:end]`` (of one indexed family) as one."""
    first, last = (int(_INDEXED.match(items[k][0])["i"]) for k in (start, end - 1))  # type: ignore[index]
    name = f"{base}[{first}..{last}]"
    vals = [values.get(items[k][0]) for k in range(start, end)]
    if len(set(vals)) == 1:
        value = vals[0]
    else:
        common = Counter(v or "?" for v in vals).most_common()
        value = f"{len(common)} values: " + ", ".join(f"{v} ×{c}" for v, c in common)
    return name, _combined(h for _, h in items[start:end]), \
        value[:VALUE_MAX] if value is not None else None


def _runs(items: Sequence[tuple[str, str]], same: Callable[[int, int], bool]) -> list[range]:
    """Consecutive members of one indexed family for which ``same(first, k)`` holds."""
    out, i = [], 0
    while i < len(items):
        m = _INDEXED.match(items[i][0])
        j = i + 1
        while m and j < len(items):
            m2 = _INDEXED.match(items[j][0])
            if not m2 or m2["base"] != m["base"] or int(m2["i"]) != int(m["i"]) + (j - i) \
                    or not same(i, j):
                break
            j += 1
        out.append(range(i, j))
        i = j
    return out


def _collapse(items: list[tuple[str, str]], values: Mapping[str, str],
              same: Callable[[int, int], bool], min_run: int
              ) -> tuple[list[tuple[str, str]], dict[str, str]]:
    out: list[tuple[str, str]] = []
    out_values: dict[str, str] = {}
    for r in _runs(items, same):
        if len(r) >= min_run:
            base = _INDEXED.match(items[r.start][0])["base"]  # type: ignore[index]
            name, h, value = _merge(items, values, r.start, r.stop, base)
            out.append((name, h))
            if value is not None:
                out_values[name] = value
            continue
        for k in r:
            out.append(items[k])
            if items[k][0] in values:
                out_values[items[k][0]] = values[items[k][0]]
    return out, out_values


def _blocks(items: list[tuple[str, str]], values: Mapping[str, str], size: int
            ) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """Stretches of consecutive indexed components longer than ``size`` as blocks of ``size``;
    shorter stretches (the first inputs, those between runs) stay as they are."""
    out: list[tuple[str, str]] = []
    out_values: dict[str, str] = {}
    for r in _runs(items, lambda i, j: True):
        starts = range(r.start, r.stop, size) if len(r) > size else range(r.start, r.stop)
        for a in starts:
            b = min(a + size, r.stop) if len(r) > size else a + 1
            if b - a == 1:
                out.append(items[a])
                if items[a][0] in values:
                    out_values[items[a][0]] = values[items[a][0]]
                continue
            base = _INDEXED.match(items[a][0])["base"]  # type: ignore[index]
            name, h, value = _merge(items, values, a, b, base)
            out.append((name, h))
            if value is not None:
                out_values[name] = value
    return out, out_values


def summarise(components: Mapping[str, str], values: Mapping[str, str],
              limit: int = MAX_COMPONENTS) -> tuple[dict[str, str], dict[str, str]]:
    """At most ``limit`` components: runs of consecutive same-valued indexed components become
    one; if that is not enough, long stretches of the rest become blocks, as small as fit."""
    items = list(components.items())
    if len(items) <= limit:
        return dict(components), dict(values)
    merged, vals = _collapse(items, values,
                             lambda i, j: items[i][0] in values
                             and values.get(items[j][0]) == values[items[i][0]], RUN_MIN)
    size = 2
    blocked, blocked_vals = merged, vals
    while len(blocked) > limit and size <= len(merged):
        blocked, blocked_vals = _blocks(merged, vals, size)
        size = max(size + 1, int(size * 1.25))
    kept = dict(blocked[:limit])
    return kept, {k: v for k, v in blocked_vals.items() if k in kept}


BYPASS_REASON_CHARS = 1000


def lookup(kind: str, key: str | None, lines: Iterable[str], state: str,
           phase: str, bypass_reason: Any = None) -> dict[str, Any]:
    """One ``CacheKey`` (as a dict)."""
    comps, values = summarise(*parse_debug_lines(lines))
    state = state if state in STATES else "unknown"
    reason = None
    if state == "bypass" and bypass_reason:
        reason = str(bypass_reason).replace("\x00", "").strip()[:BYPASS_REASON_CHARS] or None
    return {"key": _safe_hash(str(key)) if key else "unkeyed", "components": comps,
            "values": values, "hit": {"hit": True, "miss": False}.get(state), "state": state,
            "phase": phase, "bypass_reason": reason}


@dataclass
class TraceLookups:
    """Lookups read from the trace's cache events."""

    fx: list[dict[str, Any]] = field(default_factory=list)
    aot: list[dict[str, Any]] = field(default_factory=list)
    tally: Counter[str] = field(default_factory=Counter)  # "fx_hit": n, as torch counts
    notes: list[str] = field(default_factory=list)


def from_trace(events: Iterable[Event], phase: str) -> TraceLookups:
    out = TraceLookups()
    seen: set[tuple[str, str]] = set()
    for ev in events:
        if not ev.name.startswith(("fx_graph_cache_", "fx_graph_bundled_cache_",
                                   "aotautograd_cache_")):
            continue
        kind = "aot" if ev.name.startswith("aotautograd") else "fx"
        try:
            p = json.loads(ev.payload) if ev.payload else {}
        except ValueError:
            p = {}
        p = p if isinstance(p, dict) else {}
        state = str(p.get("cache_state") or ev.name.rsplit("_", 1)[-1])
        if not ev.name.startswith("fx_graph_bundled"):  # torch does not count those
            out.tally[f"{kind}_{state}"] += 1
        if state == "bypass" and p.get("cache_bypass_reason"):
            out.notes.append(f"{kind} cache bypassed: {str(p['cache_bypass_reason'])[:500]}")
        entry = lookup(kind, p.get("key"), p.get("components") or [], state, phase,
                       p.get("cache_bypass_reason"))
        if (kind, entry["key"]) in seen and entry["key"] != "unkeyed":
            continue  # the same graph looked up again (a recompile to an equal graph)
        seen.add((kind, entry["key"]))
        if kind == "aot" and not entry["components"] and state != "bypass":
            out.notes.append("aot cache key components not in torch's trace")
        getattr(out, kind).append(entry)
    out.notes = list(dict.fromkeys(out.notes))
    return out


def consistency(tally: Mapping[str, int], counts: Mapping[str, int],
                stages: Iterable[str]) -> list[str]:
    """Where the trace's lookups disagree with torch's counters, say so."""
    notes = []
    for stage in stages:
        for state in STATES:
            k = f"{stage}_{state}"
            if tally.get(k, 0) != counts.get(k, 0):
                notes.append(f"{stage} cache {state}: torch counted {counts.get(k, 0)}, "
                             f"its trace shows {tally.get(k, 0)}")
    return notes


# --- the fallback: wrappers around the hash functions ------------------------------------------

@dataclass
class KeyEvent:
    kind: str  # "fx" | "aot"
    key: str
    lines: list[str]
    before: dict[str, int]
    state: str = "unknown"


@dataclass
class HashWrappers:
    """Keys and their lines straight from ``compiled_fx_graph_hash`` / ``autograd_cache_key``,
    for a torch whose trace has no cache events. ``rehash``: AOTAutograd gave no lines, hash
    again at DEBUG (its time goes to ``overhead_s``); not needed while the trace capture has
    that logger at DEBUG already."""

    rehash: bool = True
    events: list[KeyEvent] = field(default_factory=list)
    fx_states: dict[str, str] = field(default_factory=dict)  # key -> the lookup's own verdict
    unknown: list[str] = field(default_factory=list)
    overhead_s: float = 0.0
    undo: list[tuple[Any, str, Any]] = field(default_factory=list)

    def install(self) -> None:
        self._wrap("torch._inductor.codecache", "compiled_fx_graph_hash", "fx")
        self._wrap("torch._functorch._aot_autograd.autograd_cache", "autograd_cache_key", "aot")
        self._wrap_fx_lookup()

    def _wrap_fx_lookup(self) -> None:
        """An AOTAutograd hit loads its FX graphs without hashing them: the counter window
        alone would give that hit to the previous key."""
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
                if state in STATES:
                    self.fx_states[str(key)] = state
            except Exception as e:  # never let bookkeeping break a compile
                self.unknown.append(f"fx lookup state not read: {type(e).__name__}: {e}")
            return result

        self.undo.append((FxGraphCache, "load_with_key", FxGraphCache.__dict__["load_with_key"]))
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
                lines = list(lines)
                if not lines and self.rehash:
                    lines = self._lines_again(original, module, args, kwargs, str(key))
                self.events.append(KeyEvent(kind, str(key), lines, counters_now()))
            except Exception as e:  # never let bookkeeping break a compile
                self.unknown.append(f"{kind} key not read: {type(e).__name__}: {e}")
            return result

        self.undo.append((module, attr, original))
        setattr(module, attr, wrapper)

    def uninstall(self) -> None:
        while self.undo:
            setattr(*self.undo.pop())

    def _lines_again(self, original: Any, module: Any, args: Any, kwargs: Any,
                     key: str) -> list[str]:
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
        """Each key's state: the FX lookup's own verdict where seen, else the counter delta
        until the next key of its kind."""
        final = counters_now()
        for kind in ("fx", "aot"):
            evs = [e for e in self.events if e.kind == kind]
            for i, ev in enumerate(evs):
                if kind == "fx" and ev.key in self.fx_states:
                    ev.state = self.fx_states[ev.key]
                    continue
                after = evs[i + 1].before if i + 1 < len(evs) else final
                ev.state = next((s for s in STATES
                                 if after[f"{kind}_{s}"] > ev.before[f"{kind}_{s}"]), "unknown")

    def lookups(self, kind: str, phase: str) -> list[dict[str, Any]]:
        self.resolve_states()
        out, seen = [], set()
        for ev in self.events:
            if ev.kind != kind or ev.key in seen:
                continue
            seen.add(ev.key)
            out.append(lookup(kind, ev.key, ev.lines, ev.state, phase))
        return out
