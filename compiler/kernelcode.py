"""Inductor's own view of its kernels, read from the structured trace a compile (or a cache hit)
writes: for each compiled graph, its generated code (``inductor_output_code``), its post-grad
graph (``inductor_post_grad_graph``, each node under the ``# File: path:line ... code:`` line
it came from) and, where the compile tracked provenance (``trace.provenance_tracking_level``),
which post-grad nodes each kernel computes. Each graph's events end with its FX cache lookup,
whose key names the graph in the profile (``## Call CompiledFxGraph <key> ##``).

Where each source says it:
- a Triton kernel: the comment above its definition (``# Topologically Sorted Source Nodes:
  [...], Original ATen: [...]`` and ``# Source node to ATen node mapping:``, ``src => nodes``);
- a C++ kernel: provenance's ``cppCodeToPost`` (its definition carries no comment), trusted
  only for kernels that graph's code defines (a backward graph's provenance can repeat
  another graph's);
- an extern op: the comment above its call in ``call()``, and provenance's
  ``extern_kernels.mm:N``, matched to the profile's calls in the order they run;
- every post-grad node: its ATen op, and the user's line, from the post-grad graph.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from compilewatch.core.kernels import MAX_KERNEL_ORIGINS, KernelOrigin

EVENTS = ("inductor_output_code", "inductor_post_grad_graph",
          "inductor_provenance_tracking_node_mappings",
          "inductor_provenance_tracking_kernel_stack_traces", "fx_graph_cache_")
_AOT_ID = re.compile(r"^# AOT ID: \['([^']+)'\]", re.M)
_DEFINED = re.compile(r"^(\w+) = async_compile\.(triton|cpp_pybinding|cpp)\(", re.M)
_METADATA = re.compile(r"^\s*# (?:Topologically Sorted|Unsorted) Source Nodes: \[(.*?)\], "
                       r"Original ATen: \[(.*?)\]\s*$")
_MAPPING = re.compile(r"^#\s+(\S+) => (.+)$")
_NUM_GB = re.compile(r"'kernel_num_gb': ([0-9.eE+-]+)")
_FILE = re.compile(r"^\s*# File: (.+?):(\d+) in \S+, code: (.*)$")
_NODE = re.compile(r"^\s*(\w+): \S.*? = torch\.ops\.(aten\.\w+|\w+\.\w+)\.\w+\(")
_EXTERN = re.compile(r"\bextern_kernels\.(\w+)\(|\btorch\.ops\.(\w+)\.(\w+)\.\w+\("
                     r"|\baten\.(\w+)\.\w+\(")
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in \S+\n\s*(.*)')

Shorten = Callable[[str], str]


@dataclass(frozen=True)
class Node:
    """A post-grad node: its ATen op, the user's line it came from."""

    aten: str | None = None
    location: str | None = None
    code: str | None = None


@dataclass
class GraphCode:
    """One compiled graph as Inductor described it."""

    key: str | None = None  # its FX graph cache key (None: bypassed)
    aot_id: str | None = None  # "0_forward", "1_backward", "0_inference"
    kernels: dict[str, list[KernelOrigin]] = field(default_factory=dict)  # defined here
    gb: dict[str, float] = field(default_factory=dict)  # bytes a call moves (Triton, GB)
    externs: list[tuple[str, list[KernelOrigin]]] = field(default_factory=list)  # in call order


def _metadata_origins(comment: Sequence[str], nodes: dict[str, Node]) -> list[KernelOrigin]:
    """Origins from a kernel's comment block: the source node → post-grad nodes mapping, else
    the source nodes and ATen ops it lists."""
    out: list[KernelOrigin] = []
    mapped = [m for line in comment if (m := _MAPPING.match(line))]
    for m in mapped:
        for post in (p.strip() for p in m.group(2).split(",")):
            n = nodes.get(post, Node())
            out.append(KernelOrigin(node=m.group(1), aten=n.aten, location=n.location,
                                    code=n.code))
    if out:
        return out
    for line in comment:
        m = _METADATA.match(line)
        if m:
            sources = [s.strip() for s in m.group(1).split(",") if s.strip()]
            atens = [a.strip() for a in m.group(2).split(",") if a.strip()]
            if len(sources) == 1:  # one node: every op is its
                out += [KernelOrigin(node=sources[0], aten=a) for a in atens or [None]]
            else:
                out += [KernelOrigin(node=s) for s in sources] + \
                    [KernelOrigin(aten=a) for a in atens]
    return out


def post_grad_nodes(graph: str, shorten: Shorten) -> dict[str, Node]:
    """Each post-grad node's ATen op and the user's line above it."""
    nodes: dict[str, Node] = {}
    where: tuple[str, str] | None = None
    for line in graph.splitlines():
        if not line.strip():
            where = None
            continue
        m = _FILE.match(line)
        if m:
            where = (f"{shorten(m.group(1))}:{m.group(2)}"[-256:], m.group(3).strip()[:256])
            continue
        n = _NODE.match(line)
        if n:
            nodes[n.group(1)] = Node(n.group(2), *(where or (None, None)))
    return nodes


def _definitions(code: str, nodes: dict[str, Node], graph: GraphCode) -> None:
    """The kernels the code defines, each with the origins its comment gives."""
    lines = code.splitlines()
    at = {m.start(): m for m in _DEFINED.finditer(code)}
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    for i, start in enumerate(offsets):
        m = at.get(start)
        if m is None:
            continue
        comment: list[str] = []
        j = i - 1
        while j >= 0 and lines[j].lstrip().startswith("#"):
            comment.insert(0, lines[j])
            j -= 1
        graph.kernels[m.group(1)] = _metadata_origins(comment, nodes)
        end = code.find("'''", code.find("'''", m.end()) + 3)
        gb = _NUM_GB.search(code, m.end(), end if end > 0 else len(code))
        if gb:
            graph.gb[m.group(1)] = float(gb.group(1))


def _extern_calls(code: str, nodes: dict[str, Node]) -> list[tuple[str, list[KernelOrigin]]]:
    """The extern ops ``call()`` runs, in order, each with the comment above it."""
    at = code.rfind("def call(")
    body = code[at:] if at >= 0 else code
    out: list[tuple[str, list[KernelOrigin]]] = []
    comment: list[str] = []
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            comment.append(stripped)
            continue
        m = _EXTERN.search(line)
        if m and "async_compile" not in line:
            op = f"{m.group(2)}::{m.group(3)}" if m.group(2) else \
                f"aten::{m.group(1) or m.group(4)}"
            out.append((op, _metadata_origins(comment, nodes)))
        if stripped:
            comment = []
    return out


def _provenance(graph: GraphCode, mappings: dict[str, Any], stacks: dict[str, Any],
                nodes: dict[str, Node], shorten: Shorten) -> None:
    """Origins from provenance: for kernels this graph defines whose comments gave none, and
    for its extern calls, each op's handles in order to its call sites in order (on a CPU the
    comment above an extern call can hold the nodes of the kernel before it too)."""
    posts = mappings.get("cppCodeToPost") or {}
    pre = mappings.get("postToPre") or {}
    sites: dict[str, list[int]] = {}
    for i, (op, _) in enumerate(graph.externs):
        sites.setdefault(op, []).append(i)
    for handle, names in sorted(posts.items(), key=lambda kv: _handle_order(kv[0])):
        kernel = handle.rsplit(":", 1)[0]
        found = [KernelOrigin(node=(pre.get(n) or [n])[0], aten=nodes.get(n, Node()).aten,
                              location=nodes.get(n, Node()).location,
                              code=nodes.get(n, Node()).code) for n in names]
        if not any(o.location for o in found):
            found += _frames(stacks.get(handle) or [], shorten)
        op = _extern_op(kernel)
        if kernel in graph.kernels and not graph.kernels[kernel]:
            graph.kernels[kernel] = found
        elif op is not None and sites.get(op):
            i = sites[op].pop(0)
            graph.externs[i] = (graph.externs[i][0], found)


def _extern_op(handle: str) -> str | None:
    """The op a provenance handle of an extern call names: ``extern_kernels.mm`` is
    ``aten::mm``, ``torch.ops.mylib.fence.default`` is ``mylib::fence``."""
    if handle.startswith("extern_kernels."):
        return f"aten::{handle[15:]}"
    parts = handle.split(".")
    if len(parts) == 5 and parts[:2] == ["torch", "ops"]:
        return f"{parts[2]}::{parts[3]}"
    return None


def _handle_order(handle: str) -> int:
    tail = handle.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _frames(frames: Iterable[Any], shorten: Shorten) -> list[KernelOrigin]:
    out = []
    for frame in frames:
        m = _FRAME.search(str(frame))
        if m:
            out.append(KernelOrigin(location=f"{shorten(m.group(1))}:{m.group(2)}",
                                    code=m.group(3).strip()[:256]))
    return out


def _json(payload: str | None) -> dict[str, Any]:
    try:
        data = json.loads(payload or "{}")
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def graphs(events: Iterable[tuple[str, str | None]], shorten: Shorten) -> list[GraphCode]:
    """Each compiled graph of a process, from its trace events ``(name, payload)`` in order:
    a graph's events end with its FX cache lookup."""
    out: list[GraphCode] = []
    pending: dict[str, str | None] = {}
    for name, payload in events:
        if not name.startswith("fx_graph_cache_"):
            pending[name] = payload
            continue
        if "inductor_output_code" in pending:
            out.append(_graph(pending, _json(payload).get("key"), shorten))
        pending = {}
    if "inductor_output_code" in pending:
        out.append(_graph(pending, None, shorten))
    return out


def _graph(parts: dict[str, str | None], key: Any, shorten: Shorten) -> GraphCode:
    code = parts.get("inductor_output_code") or ""
    nodes = post_grad_nodes(parts.get("inductor_post_grad_graph") or "", shorten)
    m = _AOT_ID.search(code)
    graph = GraphCode(key=str(key) if key else None, aot_id=m.group(1) if m else None)
    _definitions(code, nodes, graph)
    graph.externs = _extern_calls(code, nodes)
    _provenance(graph, _json(parts.get("inductor_provenance_tracking_node_mappings")),
                _json(parts.get("inductor_provenance_tracking_kernel_stack_traces")), nodes,
                shorten)
    return graph


def distinct(origins: Iterable[KernelOrigin]) -> list[KernelOrigin]:
    """Each origin once, in order, at most ``MAX_KERNEL_ORIGINS``; a bare node name is left
    out where another origin says more of the same node."""
    seen: dict[tuple[Any, ...], KernelOrigin] = {}
    for o in origins:
        seen.setdefault((o.node, o.aten, o.location, o.code), o)
    said = {o.node for o in seen.values() if o.aten or o.location}
    kept = [o for o in seen.values() if o.aten or o.location or o.node not in said]
    return kept[:MAX_KERNEL_ORIGINS]
