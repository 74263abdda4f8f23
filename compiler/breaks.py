"""Graph breaks as torch reports them: where in the user's code (file:line), why (the first line
of torch's reason), which kind (torch's ``gb_type``) and its stable id (``GB0170``...).

The authoritative source is the structured trace's ``dynamo_graph_break_reason`` artifact: one
event per break, data-dependent branching and frames skipped whole included (``counters
["graph_break"]`` misses both). A frame that fell back to eager without such an event (torch
< 2.11 without the ``graph_breaks`` logger, the recompile limit) still leaves a
``compilation_metrics`` record with ``fail_type``; those are breaks too. Payload formats:

- 2.9+: ``Graph break in user code at FILE:LINE`` / ``Graph Break Reason: ...`` (a preamble, then
  the gb_type on its own line), a doc link ``.../gb/gbNNNN.html``, ``User code traceback:``;
- 2.8: the same without the link, the gb_type on the ``Graph Break Reason:`` line;
- 2.8-2.10 frame skips: ``Graph break: skip: from user code at:`` and a Python traceback that
  ends with ``torch._dynamo.exc.Unsupported: <gb_type>``.

A break inside an inlined callee is reported twice, once by the caller's frame and once by the
callee's own frame (compiled right after, at the same file:line and with the same user stack);
it is one break in the user's code and is counted once.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compilewatch.compiler.trace import Event

SHIPPED_IDS = Path(__file__).with_name("graph_break_ids.json")
REASON_MAX = 8000
_LOC_FIRST = re.compile(r"^Graph break in user code at (.+):(\d+)\s*$")
_FILE_LINE = re.compile(r'^\s*File "(.+)", line (\d+), in (.+)$')
_GB_LINK = re.compile(r"compile-graph-break-site/gb/gb(\d+)\.html")
_EXC_LINE = re.compile(r"^(?:[\w.]+\.)?(?:Unsupported|SkipFrame|\w+Error): (.+)$")
_PREAMBLES = ("Encountered graph break when attempting to trace",
              "Failed to handle graph break gracefully")
_SKIPPED = ("Skipping the function and falling back to eager", "Graph break: skip:",
            "results in a skip")
_END_OF_REASON = ("User code traceback:", "Traceback (most recent call last)",
                  "from user code", "Graph break: skip:")


@functools.cache
def registry() -> Mapping[str, str]:
    """gb_type -> GB id: the running torch's own registry (2.8+), then the copy shipped here
    (2.13's), which knows types older torch lacks; the ids are the same across versions."""
    ids: dict[str, str] = {}
    try:
        import torch

        own = Path(torch.__file__).parent / "_dynamo" / "graph_break_registry.json"
        for gb_id, entries in json.loads(own.read_text(encoding="utf-8")).items():
            for entry in entries:
                ids.setdefault(str(entry["Gb_type"]), str(gb_id))
    except (ImportError, OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # torch < 2.8 has no registry: the shipped copy alone
    shipped = json.loads(SHIPPED_IDS.read_text(encoding="utf-8"))["ids"]
    for gb_type, gb_id in shipped.items():
        ids.setdefault(gb_type, gb_id)
    return ids


@dataclass(frozen=True)
class Break:
    """One break event, parsed."""

    reason: str  # the first line of torch's reason (its gb_type where it has one)
    kind: str | None  # the registered gb_type
    gb_id: str | None
    file: str | None
    line: int | None
    stack: tuple[tuple[str, int], ...]  # the user stack, outermost first
    frame_skipped: bool
    frame_id: int | None = None
    compile_id: str | None = None


def _reason_lines(lines: list[str]) -> list[str]:
    out = []
    for ln in lines[1:]:
        if ln.strip().startswith(_END_OF_REASON):
            break
        out.append(ln)
    return out


def _first_reason(reason_lines: list[str], lines: list[str]) -> str | None:
    for i, ln in enumerate(reason_lines):
        if ln.startswith("Graph Break Reason:"):
            rest = ln[len("Graph Break Reason:"):].strip()
            if rest and not rest.startswith(_PREAMBLES):
                return rest
            return next((x.strip() for x in reason_lines[i + 1:] if x.strip()), rest or None)
    # 2.8-2.10 frame skips: the reason is the exception at the end of torch's traceback
    for ln in lines:
        m = _EXC_LINE.match(ln.strip())
        if m and "Traceback" not in ln:
            return m.group(1).strip()
    return None


def _stack(lines: list[str]) -> tuple[tuple[str, int], ...]:
    frames: list[tuple[str, int]] = []
    inside = False
    for ln in lines:
        s = ln.strip()
        if s.startswith("User code traceback:") or "from user code" in s:
            inside, frames = True, []
            continue
        if inside:
            if s.startswith("Traceback (most recent call last)"):
                break
            m = _FILE_LINE.match(ln)
            if m:
                frames.append((m.group(1), int(m.group(2))))
    return tuple(frames)


def _kind(reason: str | None, reason_lines: list[str], ids: Mapping[str, str]) -> str | None:
    if reason in ids:
        return reason
    for ln in reason_lines:
        s = ln.strip()
        if s.startswith("Graph Break Reason:"):
            s = s[len("Graph Break Reason:"):].strip()
        if s in ids:
            return s
    return None


@functools.lru_cache(maxsize=1024)
def parse(payload: str) -> Break:
    """One ``dynamo_graph_break_reason`` payload."""
    ids = registry()
    lines = payload.splitlines()
    reason_lines = _reason_lines(lines)
    reason = _first_reason(reason_lines, lines)
    kind = _kind(reason, reason_lines, ids)
    links = _GB_LINK.findall(payload)
    gb_id = f"GB{int(links[0]):04d}" if links else (ids.get(kind) if kind else None)
    stack = _stack(lines)
    m = _LOC_FIRST.match(lines[0]) if lines else None
    file, line = (m.group(1), int(m.group(2))) if m else (stack[-1] if stack else (None, None))
    if reason is None:
        reason = next((x.strip() for x in lines if x.strip()), "graph break (no reason given)")
    return Break(reason=reason[:REASON_MAX], kind=kind, gb_id=gb_id, file=file, line=line,
                 stack=stack, frame_skipped=any(s in payload for s in _SKIPPED))


def from_events(events: Iterable[Event]) -> list[Break]:
    """The breaks of the trace's events, one per break in the user's code and compile."""
    out: list[Break] = []
    per_compile: set[tuple[str | None, Any, Any]] = set()
    first_frame: dict[tuple[Any, ...], int | None] = {}
    for ev in events:
        if ev.name != "dynamo_graph_break_reason" or not ev.payload:
            continue
        b = parse(ev.payload)
        site = (b.file, b.line)
        # a later attempt of the same compile failing at the same place (e.g. a
        # reconstruction failure after the break) is the same break
        if (ev.compile_id, *site) in per_compile:
            continue
        per_compile.add((ev.compile_id, *site))
        # the callee's own frame reporting the break its caller already reported
        key = (*site, b.stack)
        if b.stack and key in first_frame and first_frame[key] != ev.frame_id:
            continue
        first_frame.setdefault(key, ev.frame_id)
        out.append(Break(**{**b.__dict__, "frame_id": ev.frame_id,
                            "compile_id": ev.compile_id}))
    return out


def from_failures(metrics: Iterable[Mapping[str, Any]], covered: set[str | None]) -> list[Break]:
    """Frames that fell back to eager (``fail_type`` set) without a break event."""
    ids = registry()
    out = []
    for m in metrics:
        if not m.get("fail_type") or m.get("compile_id") in covered:
            continue
        text = str(m.get("fail_reason") or m["fail_type"])
        first = next((x.strip() for x in text.splitlines() if x.strip()), str(m["fail_type"]))
        links = _GB_LINK.findall(text)
        kind = first if first in ids else None
        file, line = m.get("fail_user_frame_filename"), m.get("fail_user_frame_lineno")
        out.append(Break(reason=first[:REASON_MAX], kind=kind,
                         gb_id=f"GB{int(links[0]):04d}" if links else ids.get(first),
                         file=str(file) if file else None,
                         line=int(line) if isinstance(line, int) else None, stack=(),
                         frame_skipped=True, compile_id=m.get("compile_id")))
    return out


def from_counters(counts: Mapping[str, int]) -> list[Break]:
    """``counters["graph_break"]``: reason -> count, without places (the last resort)."""
    ids = registry()
    out = []
    for reason, n in counts.items():
        first = next((x.strip() for x in str(reason).splitlines() if x.strip()), str(reason))
        kind = first if first in ids else None
        out += [Break(reason=first[:REASON_MAX], kind=kind, gb_id=ids.get(first) if kind else None,
                      file=None, line=None, stack=(), frame_skipped=False)] * int(n)
    return out


def summarise(found: Iterable[Break], shorten: Callable[[str], str]) -> list[dict[str, Any]]:
    """Distinct breaks (place and reason) with how often each happened, in order found."""
    grouped: dict[tuple[str | None, str], dict[str, Any]] = {}
    for b in found:
        where = f"{shorten(b.file)}:{b.line}" if b.file and b.line is not None else None
        entry = grouped.setdefault((where, b.reason), {
            "reason": b.reason, "count": 0, "gb_id": b.gb_id, "kind": b.kind,
            "location": where[-256:] if where else None})
        entry["count"] += 1
    return list(grouped.values())


def short_path(path: str, roots: Iterable[str]) -> str:
    """``path`` relative to the deepest of ``roots`` that holds it (the suite's folder, then
    ``sys.path``: site-packages gives ``transformers/models/...``), else as it is. The same
    source reads the same on both sides of a comparison, whatever folder each checkout is in."""
    p = Path(path)
    best: Path | None = None
    for root in roots:
        r = Path(root)
        if r.is_absolute() and p.is_relative_to(r) and (best is None or
                                                         len(r.parts) > len(best.parts)):
            best = r
    return p.relative_to(best).as_posix() if best is not None and p != best else path
