"""Which components of a compiled graph's cache key changed between base and head.

A changed FX or AOTAutograd key means every user compiles that graph cold after the PR lands;
the components say why (``example_inputs[0]``: an input's shape or dtype, ``gm``: the graph
itself, ``inductor_config[...]``: a config default, ``torch_version``: any torch change).

Graphs are matched within a kind (fx, aot), among the keys of the cold phase, in two passes:
first identical keys pair up (those graphs did not change), then the rest pair by compile order.
A graph has no name that survives a change (its key *is* what changed), while Dynamo compiles the
frames of the same program in the same order; the first pass keeps a graph added in the middle
(a new graph break) from shifting every later pair.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

from compilewatch.bot.judge.comparison import GraphKeyChange
from compilewatch.core.schema import Cache, CacheKey

BYPASS = ("bypassed", "cached again")  # statuses of a graph keyed on one side only
COLLAPSE_AT = 4  # more changed names than this in one family are shown as one entry
READABLE = 160  # longer values are left to their hashes
MAX_VALUES = 32  # value pairs kept per changed graph
_FAMILY = re.compile(r"^([^\[\]]+)\[.*\]$", re.DOTALL)


def family(name: str) -> str:
    """``inductor_config[max_autotune]`` -> ``inductor_config``; other names are their own."""
    m = _FAMILY.match(name)
    return m.group(1) if m else name


def collapse(names: Iterable[str], limit: int = COLLAPSE_AT, counted: bool = True) -> list[str]:
    """Names for display: a family with more than ``limit`` members becomes ``family[…] ×N``
    (``family[…]`` without ``counted``, to count models across a suite)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for n in sorted(set(names)):
        groups[family(n)].append(n)
    out: list[str] = []
    for fam, members in groups.items():
        if len(members) > limit:
            out.append(f"{fam}[…] ×{len(members)}" if counted else f"{fam}[…]")
        else:
            out.extend(members)
    return out


def _cold(keys: Sequence[CacheKey]) -> list[CacheKey]:
    return [k for k in keys if k.phase == "cold"]


def _pair(base: list[CacheKey], head: list[CacheKey]) -> list[tuple[int | None, int | None]]:
    """Index pairs (base, head): identical keys first, then the rest in order."""
    free_base = list(range(len(base)))
    pairs: list[tuple[int | None, int | None]] = []
    rest_head: list[int] = []
    for j, h in enumerate(head):
        i = next((i for i in free_base if base[i].key == h.key), None)
        if i is None:
            rest_head.append(j)
        else:
            free_base.remove(i)
            pairs.append((i, j))
    for i, j in zip(free_base, rest_head, strict=False):
        pairs.append((i, j))
    pairs.extend((i, None) for i in free_base[len(rest_head):])
    pairs.extend((None, j) for j in rest_head[len(free_base):])
    return pairs


def _bypassed(k: CacheKey) -> bool:
    return k.state == "bypass"


def _diff(kind: str, b: CacheKey | None, h: CacheKey | None, index: int) -> GraphKeyChange:
    if b is None or h is None:
        return GraphKeyChange(kind=kind, index=index, status="added" if b is None else "removed",
                              base_key=b.key if b else None, head_key=h.key if h else None)
    if _bypassed(b) != _bypassed(h):
        # a graph that is not keyed has no components to compare: "not keyed (bypassed)",
        # never every component of the keyed side as gone
        bypassed = h if _bypassed(h) else b
        return GraphKeyChange(
            kind=kind, index=index, status="bypassed" if _bypassed(h) else "cached again",
            base_key=None if _bypassed(b) else b.key, head_key=None if _bypassed(h) else h.key,
            reason=bypassed.bypass_reason or "torch gave no reason")
    changed = sorted(n for n in b.components.keys() & h.components.keys()
                     if b.components[n] != h.components[n])
    added = sorted(h.components.keys() - b.components.keys())
    removed = sorted(b.components.keys() - h.components.keys())
    return GraphKeyChange(kind=kind, index=index, status="changed", base_key=b.key,
                          head_key=h.key, changed=changed, added=added, removed=removed,
                          summary=collapse([*changed, *added, *removed]),
                          values=_values(b, h, [*changed, *added, *removed]))


def _values(b: CacheKey, h: CacheKey, names: list[str]) -> dict[str, list[str | None]]:
    """base -> head values of changed components, where both are short enough to read
    (``float32[128, 128]`` -> ``float32[96, 96]``)."""
    out: dict[str, list[str | None]] = {}
    for n in names:
        old, new = b.values.get(n), h.values.get(n)
        if (old or new) and old != new and all(v is None or len(v) <= READABLE
                                               for v in (old, new)):
            out[n] = [old, new]
        if len(out) >= MAX_VALUES:
            break
    return out


def diff_cache(base: Cache, head: Cache) -> list[GraphKeyChange]:
    """Every cold-phase graph whose key differs, with the components that changed."""
    out: list[GraphKeyChange] = []
    for kind in ("fx", "aot"):
        b, h = _cold(getattr(base, kind)), _cold(getattr(head, kind))
        for i, j in _pair(b, h):
            bk = b[i] if i is not None else None
            hk = h[j] if j is not None else None
            if bk is not None and hk is not None and (
                    bk.key == hk.key or (_bypassed(bk) and _bypassed(hk))):
                continue
            out.append(_diff(kind, bk, hk, j if j is not None else i or 0))
    return sorted(out, key=lambda c: (c.kind != "fx", c.index))
