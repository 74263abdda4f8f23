"""Which kernel on head is which on base.

Inductor names a kernel for what it fuses and numbers it in its graph
(``triton_poi_fused_add_gelu_0``): a kernel added before it moves its number, so names are
matched without the number, by what the kernel computes. In turn:

1. the same kernel: the same kind, name without its number, graph role (forward, backward,
   inference), ATen ops (and inputs' shapes, for an extern or eager op); several such are
   paired by how alike their origins are, then in order;
   a kernel one side runs more often, from the very same origins (one more layer calling
   the same attention), joins its pair: one line, so many of it a side;
2. split: one base kernel whose origins (ops, the user's lines) several head kernels share
   between them, each mostly inside it; merged: the other way round;
3. changed: one to one, by the most origins in common (a kernel that fuses another op); then
   an extern or eager op of the same name and inputs' shapes whose origins all moved;
4. what is left is new (head only) or gone (base only).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from compilewatch.core.kernels import Kernel

_INDEX = re.compile(r"_(\d+)$")
SIMILAR = 0.3  # origins in common (Jaccard) for two kernels to be one that changed
INSIDE = 0.6  # share of a part's origins inside the whole, and of the whole the parts cover

Status = Literal["same", "changed", "split", "merged", "new", "gone"]


@dataclass(frozen=True, eq=False)
class Unit:
    """One side's kernel, with what it is matched by."""

    kernel: Kernel

    @property
    def index(self) -> int:
        m = _INDEX.search(self.kernel.name)
        return int(m.group(1)) if m and self.kernel.kind == "generated" else 0

    @cached_property
    def stem(self) -> str:
        k = self.kernel
        return _INDEX.sub("", k.name) if k.kind == "generated" else k.name

    @cached_property
    def role(self) -> str:
        graph = self.kernel.graph or ""
        return graph.rsplit("_", 1)[-1] if "_" in graph else graph

    @cached_property
    def ops(self) -> tuple[str, ...]:
        """The ATen ops it computes (from its origins; else its name's fused ops)."""
        found = sorted({o.aten for o in self.kernel.origins if o.aten})
        if found:
            return tuple(found)
        if self.kernel.kind == "generated" and "fused_" in self.stem:
            return tuple(sorted(set(self.stem.split("fused_", 1)[1].split("_"))))
        return (self.kernel.name,)

    @cached_property
    def features(self) -> frozenset[str]:
        """What it is made of: its ops, the user's lines (place and code), source nodes."""
        out = {f"op:{op}" for op in self.ops}
        for o in self.kernel.origins:
            out.update(x for x in (o.location and f"at:{o.location}",
                                   o.code and f"code:{o.code}",
                                   o.node and f"node:{_INDEX.sub('', o.node)}") if x)
        return frozenset(out)

    @cached_property
    def key(self) -> tuple[object, ...]:
        k = self.kernel
        shapes = k.shapes if k.kind in ("extern", "eager") else None
        return k.kind, self.stem, self.role, self.ops, shapes


@dataclass(frozen=True)
class Match:
    status: Status
    base: tuple[Unit, ...] = ()
    head: tuple[Unit, ...] = ()


def similarity(a: Unit, b: Unit) -> float:
    union = a.features | b.features
    return len(a.features & b.features) / len(union) if union else 0.0


def _inside(part: Unit, whole: Unit) -> float:
    return len(part.features & whole.features) / len(part.features) if part.features else 0.0


def _same(base: list[Unit], head: list[Unit]) -> list[Match]:
    """Step 1: kernels with one key on both sides; among several, the most alike first, then
    in their order."""
    heads: dict[tuple[object, ...], list[Unit]] = {}
    for u in head:
        heads.setdefault(u.key, []).append(u)
    bases: dict[tuple[object, ...], list[Unit]] = {}
    for u in base:
        bases.setdefault(u.key, []).append(u)
    out: list[Match] = []
    for key, bs in bases.items():
        hs = heads.get(key, [])
        if len(bs) == 1 and len(hs) == 1:
            out.append(Match("same", (bs[0],), (hs[0],)))
            continue
        more, bs, hs = _more_calls(bs, hs)
        out += more
        pairs = sorted(((b, h) for b in bs for h in hs),
                       key=lambda p: (-similarity(*p), abs(p[0].index - p[1].index),
                                      p[0].index, p[1].index))
        used: set[int] = set()
        for b, h in pairs:
            if id(b) in used or id(h) in used:
                continue
            used.update((id(b), id(h)))
            out.append(Match("same", (b,), (h,)))
    return out


def _more_calls(bs: list[Unit], hs: list[Unit]
                ) -> tuple[list[Match], list[Unit], list[Unit]]:
    """A kernel one side runs more often: instances of one key from the very same origins
    (each layer of a stack calling the same attention from one line) cannot be told apart,
    so where the two sides run a different number of them they are one line, saying how many
    each side ran (a seventh layer's call is not "new"). The rest, and instances from other
    lines of the user's code, are paired one to one."""
    by_b: dict[frozenset[str], list[Unit]] = {}
    for u in bs:
        by_b.setdefault(u.features, []).append(u)
    by_h: dict[frozenset[str], list[Unit]] = {}
    for u in hs:
        by_h.setdefault(u.features, []).append(u)
    out: list[Match] = []
    taken: set[int] = set()
    for features, group in by_b.items():
        twins = by_h.get(features, [])
        if twins and len(twins) != len(group):
            out.append(Match("same", tuple(group), tuple(twins)))
            taken.update(id(u) for u in (*group, *twins))
    return (out, [u for u in bs if id(u) not in taken], [u for u in hs if id(u) not in taken])


class _Index:
    """The units of one side by feature: what may be alike is what shares a feature (a
    suite's kernels share few), so no pass compares every pair."""

    def __init__(self, units: Sequence[Unit]) -> None:
        self.alive = {id(u): u for u in units}
        self.by: dict[str, list[Unit]] = {}
        for u in units:
            for f in u.features:
                self.by.setdefault(f, []).append(u)

    def near(self, u: Unit) -> list[Unit]:
        """The units (still there) that share a feature with ``u``, of its role and kind."""
        seen: dict[int, Unit] = {}
        for f in u.features:
            for v in self.by.get(f, ()):
                seen.setdefault(id(v), v)
        return [v for v in seen.values() if id(v) in self.alive and v.role == u.role
                and v.kernel.kind == u.kernel.kind]

    @property
    def units(self) -> list[Unit]:
        return list(self.alive.values())

    def has(self, u: Unit) -> bool:
        return id(u) in self.alive

    def remove(self, u: Unit) -> None:
        del self.alive[id(u)]


def _parts(whole: Unit, others: _Index) -> list[Unit]:
    """The units of ``others`` that are mostly inside ``whole``, if two or more of them cover
    most of it: a split (or, from the other side, a merge)."""
    parts = [c for c in others.near(whole) if _inside(c, whole) >= INSIDE]
    if len(parts) < 2:
        return []
    covered = frozenset().union(*(p.features for p in parts)) & whole.features
    if len(covered) < INSIDE * len(whole.features):
        return []
    return sorted(parts, key=lambda u: (u.index, u.kernel.name))


def _split_merged(base: _Index, head: _Index) -> list[Match]:
    """Step 2: one kernel on one side, several on the other."""
    out: list[Match] = []
    for b in list(base.units):
        parts = _parts(b, head)
        if parts:
            out.append(Match("split", (b,), tuple(parts)))
            base.remove(b)
            for p in parts:
                head.remove(p)
    for h in list(head.units):
        parts = _parts(h, base)
        if parts:
            out.append(Match("merged", tuple(parts), (h,)))
            head.remove(h)
            for p in parts:
                base.remove(p)
    return out


def _changed(base: _Index, head: _Index) -> list[Match]:
    """Step 3: one to one by the most in common, at least ``SIMILAR``."""
    pairs = sorted(((similarity(b, h), b, h) for b in base.units for h in head.near(b)),
                   key=lambda p: -p[0])
    out: list[Match] = []
    for sim, b, h in pairs:
        if sim < SIMILAR or not base.has(b) or not head.has(h):
            continue
        base.remove(b)
        head.remove(h)
        out.append(Match("changed", (b,), (h,)))
    return out


def _same_op(base: _Index, head: _Index) -> list[Match]:
    """Step 3b: an extern or eager op (``aten::mm``) of the same inputs' shapes whose origins
    all moved (a recompute calls the same product from another graph): the same op, changed,
    not one gone and one new."""
    out: list[Match] = []
    for b in list(base.units):
        k = b.kernel
        if k.kind not in ("extern", "eager") or not k.shapes:
            continue
        h = next((h for h in head.units if (h.kernel.kind, h.kernel.name, h.kernel.shapes)
                  == (k.kind, k.name, k.shapes)), None)
        if h is not None:
            base.remove(b)
            head.remove(h)
            out.append(Match("changed", (b,), (h,)))
    return out


def match(base: Sequence[Kernel], head: Sequence[Kernel]) -> list[Match]:
    """Every kernel of both sides in exactly one match."""
    bs, hs = [Unit(k) for k in base], [Unit(k) for k in head]
    same = _same(bs, hs)
    matched = {id(u) for m in same for u in (*m.base, *m.head)}
    left_b = _Index([u for u in bs if id(u) not in matched])
    left_h = _Index([u for u in hs if id(u) not in matched])
    out = same + _split_merged(left_b, left_h) + _changed(left_b, left_h)
    out += _same_op(left_b, left_h)
    out += [Match("gone", (b,)) for b in left_b.units]
    return out + [Match("new", (), (h,)) for h in left_h.units]
