"""Presentation helpers shared by the markdown and HTML templates: number formats, verdict
labels and the "why is this row flagged" list.

Labels built here contain only our own words and numbers, so they are ``Markup``; untrusted
strings (reasons, component names) travel separately as ``Reason.items`` and are escaped by each
template for its medium.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from markupsafe import Markup

from compilewatch.bot.judge.cachediff import BYPASS, collapse
from compilewatch.bot.judge.comparison import (
    Comparison,
    CountDelta,
    Delta,
    GraphKeyChange,
    KernelLine,
    ModelRow,
    Verdict,
)
from compilewatch.bot.judge.stats import too_wide, too_wide_why
from compilewatch.bot.render.commands import row_bisect
from compilewatch.core.schema import Interval

DASH = Markup("—")
FWD_BWD = "peak memory (forward+backward)"
_INPUT = re.compile(r"^example_inputs\[(\d+)\]$")
ICONS = {Verdict.REGRESSION: "🔴", Verdict.IMPROVEMENT: "🟢", Verdict.WITHIN_NOISE: "⚪",
         Verdict.NOISY: "🌫️", Verdict.FAILING: "✖️", Verdict.UNCHANGED: "·"}
LABELS = {Verdict.WITHIN_NOISE: "within noise", Verdict.NOISY: "too noisy to judge",
          Verdict.FAILING: "failing on both sides"}


@dataclass(frozen=True)
class Reason:
    label: Markup
    items: list[str] = field(default_factory=list)
    kind: str = "metric"  # metric, count, accuracy, cache, bypass, kernels
    items_label: str = "new"


def pct(ratio: float | None) -> Markup:
    return DASH if ratio is None else Markup(f"{ratio - 1:+.1%}")


def ci(d: Delta | None) -> Markup:
    """A change's 95% interval; one too wide to bound anything is not printed as numbers."""
    if d is None or d.ci_low is None or d.ci_high is None or d.ci_low == d.ci_high:
        return Markup("")
    if too_wide(d.ci_low, d.ci_high):
        return Markup("too noisy to bound")
    return Markup(f"[{d.ci_low - 1:+.1%}, {d.ci_high - 1:+.1%}]")


def speedup_ci(sp: Interval | None, processes: int | None = None) -> Markup:
    """A run's speedup interval: "[low, high]", or why it is not shown as one."""
    if sp is None:
        return Markup("")
    if too_wide(sp.ci_low, sp.ci_high):
        return Markup.escape(too_wide_why(sp.ci_low, sp.ci_high, processes))
    return Markup(f"[{sp.ci_low:.2f}, {sp.ci_high:.2f}]")


def us(x: float | None) -> Markup:
    if x is None:
        return DASH
    return Markup(f"{x / 1000:.2f} ms" if x >= 1000 else f"{x:.1f} µs")


def dus(x: float | None) -> Markup:
    """A signed change of time: ``+120.3 µs``, ``-1.20 ms``."""
    if x is None:
        return DASH
    return Markup(f"{x / 1000:+.2f} ms" if abs(x) >= 1000 else f"{x:+.1f} µs")


def secs(x: float | None) -> Markup:
    return DASH if x is None else Markup(f"{x:.1f} s" if x >= 10 else f"{x:.2f} s")


def mib(x: float | None) -> Markup:
    return DASH if x is None else Markup(f"{x / 2**20:.1f} MiB")


def times(x: float | None) -> Markup:
    return DASH if x is None else Markup(f"{x:.2f}×")


def rate(x: float | None) -> Markup:
    return DASH if x is None else Markup(f"{x:.1%}")


def label(v: Verdict | None) -> Markup:
    return DASH if v is None else Markup(LABELS.get(v, v.value))


def icon(v: Verdict | None) -> Markup:
    return Markup(ICONS.get(v, "")) if v is not None else Markup("")


def _metric(name: str, d: Delta | None) -> Reason | None:
    if d is None or d.verdict in (None, Verdict.UNCHANGED):
        return None
    text = f"{name} {pct(d.ratio)} {ci(d)}".rstrip()
    if d.verdict in LABELS:
        text += f" ({LABELS[d.verdict]})"
    return Reason(Markup(text + band(d)))


def band(d: Delta | None) -> Markup:
    """The evidence a verdict stood on: the change it needed and the processes behind it."""
    if d is None or d.band is None:
        return Markup("")
    where = "calibrated noise" if d.calibrated else "default noise"
    n = f", {d.samples[0]}+{d.samples[1]} {d.method or 'processes'}" if d.samples else ""
    return Markup(f"; needed ±{d.band:.1%} ({where} {d.noise or 0:.1%}{n})")


def _count(name: str, d: CountDelta | None) -> Reason | None:
    if d is None or (d.verdict is Verdict.UNCHANGED and not d.new_reasons):
        return None
    text = f"{name} {d.base} → {d.head}"
    if d.expected is not None:
        text += f" (baseline expects {d.expected})"
    return Reason(Markup(text), d.new_reasons, kind="count")


def cache_items(changes: list[GraphKeyChange]) -> list[str]:
    """The components that changed, with base -> head values where readable. Graphs added or
    removed are not components: ``cache_label`` counts them."""
    items: list[str] = []
    for c in key_changes(changes):
        if c.status != "changed":
            continue
        for n in c.summary or ["(components not recorded)"]:
            pair = c.values.get(n)
            text = f"{n}: {pair[0] or '—'} → {pair[1] or '—'}" if pair else n
            if text not in items:
                items.append(text)
    return items


CACHE_NAMES = {"fx": "FX graph cache", "aot": "AOTAutograd cache"}
BYPASS_COST = {
    "fx": "not keyed: Inductor compiles them from scratch in every process, so a warm start "
          "costs a cold compile",
    "aot": "not keyed: AOTAutograd traces and partitions them again in every process (Inductor "
           "may still find its own graphs in the FX cache)",
}


def key_changes(changes: list[GraphKeyChange]) -> list[GraphKeyChange]:
    """The graphs whose keys differ; a bypass is a finding of its own (``bypass_reasons``)."""
    return [c for c in changes if c.status not in BYPASS]


def bypass_reasons(row: ModelRow) -> list[Reason]:
    """One reason per cache and direction: "FX graph cache bypassed on head", with what it
    costs (a warm start compiles from scratch, the warm compile's numbers) and torch's
    reasons as items."""
    out: list[Reason] = []
    for status, side in BYPASS_SIDES:
        for kind, name in CACHE_NAMES.items():
            found = [c for c in row.cache_changes if c.status == status and c.kind == kind]
            if not found:
                continue
            graphs = f"{len(found)} graph{'s' * (len(found) != 1)}"
            cost = (" ".join([BYPASS_COST[kind], _warm(row.warm_compile)]).strip()
                    if status == "bypassed" else "keyed again: a warm start can load them")
            out.append(Reason(Markup(f"{name} {side} ({graphs}): {cost}"),
                              list(dict.fromkeys(c.reason or "" for c in found)),
                              kind="bypass", items_label="torch's reason"))
    return out


BYPASS_SIDES = (("bypassed", "bypassed on head"), ("cached again", "no longer bypassed"))


def _warm(d: Delta | None) -> str:
    if d is None or d.base is None or d.head is None:
        return ""
    return f"(warm compile {d.base:.2f} s → {d.head:.2f} s)"


def cache_label(changes: list[GraphKeyChange]) -> Markup:
    counts = {s: sum(c.status == s for c in changes) for s in ("changed", "added", "removed")}
    parts = [f"{n} key{'s' * (n != 1)} changed" if s == "changed" else
             f"{n} graph{'s' * (n != 1)} {s}" for s, n in counts.items() if n]
    return Markup("cache: " + ", ".join(parts))


KERNEL_STATUS = {"same": "", "changed": "fuses other ops", "split": "split", "merged": "merged",
                 "new": "new", "gone": "gone"}


def kernel_names(line: KernelLine) -> str:
    """A line's kernels, base → head where they differ: ``a_0 → a_1``, ``a_0 → b_0 + c_1``;
    untrusted text (a custom op's name), escaped by each template."""
    base, head = " + ".join(line.base), " + ".join(line.head)
    if not base or not head or base == head:
        return head or base
    return f"{base} → {head}"


def kernel_status(line: KernelLine) -> Markup:
    said = KERNEL_STATUS[line.status]
    if not line.beyond_noise:
        said = f"{said}, within noise" if said else "within noise"
    return Markup(said or "—")


def finding(line: str | None) -> Markup:
    """A kernel diff's host finding: our words and numbers only (``bot/judge/kernels.py``
    composes it from counts and times), so not escaped into backslashes."""
    return Markup(Markup.escape(line or ""))


def kernel_reason(row: ModelRow) -> Reason | None:
    """The kernels that moved beyond their noise, or stopped being one kernel to one, and a
    change in launches a step: the three largest by their change a step."""
    k = row.kernels
    if k is None:
        return None
    moved = [x for x in k.lines if x.beyond_noise or x.status != "same"]
    if not moved and not k.host.finding:
        return None
    label = Markup(f"kernels ({len(moved)} of {len(k.lines)} moved)")
    if k.host.finding:
        label += Markup("; ") + finding(k.host.finding)
    items = [f"{kernel_names(x)} {dus(x.delta_us)}"
             + (f" ({KERNEL_STATUS[x.status]})" if KERNEL_STATUS[x.status] else "")
             for x in moved[:3]]  # what a row shows: the rest is in the details' table
    return Reason(label, items, kind="kernels", items_label="largest")


def reasons(row: ModelRow) -> list[Reason]:
    """Why a row is in the flagged table, most important first."""
    out: list[Reason | None] = []
    acc = row.accuracy
    if row.verdict is Verdict.FAILING:
        lines = (row.head_error or "").strip().splitlines()
        out.append(Reason(Markup("fails on both sides (head: {})").format(
            row.head_category.replace("_", " ")), lines[-1:], kind="accuracy",
            items_label="error"))
    elif acc is not None and (acc.verdict is not Verdict.UNCHANGED or acc.base != acc.head):
        exp = f" (baseline expects {acc.expected})" if acc.expected else ""
        out.append(Reason(Markup(f"accuracy {acc.base} → {acc.head}{exp}"), kind="accuracy"))
    compiled = "compiled time (launch-bound)" if row.launch_bound else "compiled time"
    out += [_metric(compiled, row.compiled_time), _count("graph breaks", row.graph_breaks),
            _count("recompiles", row.recompiles), _metric("cold compile", row.cold_compile),
            _metric("warm compile", row.warm_compile), _metric("peak memory", row.memory),
            _metric(FWD_BWD, row.fwd_bwd_memory)]
    out += bypass_reasons(row)
    keys = key_changes(row.cache_changes)
    if keys:
        out.append(Reason(cache_label(keys), cache_items(keys),
                          kind="cache", items_label="components"))
    out.append(kernel_reason(row))
    return [r for r in out if r is not None]


def gating_findings(row: ModelRow) -> list[Markup]:
    """The findings that make a row gate (a gating row may show other numbers that improved:
    a new graph break gates while compiled time drops)."""
    out: list[Markup] = []
    for name, d in (("compiled time", row.compiled_time), ("cold compile", row.cold_compile),
                    ("warm compile", row.warm_compile), ("peak memory", row.memory),
                    (FWD_BWD, row.fwd_bwd_memory)):
        if d is not None and d.gating:
            out.append(Markup(f"{name} {pct(d.ratio)}"))
    for name, c in (("graph breaks", row.graph_breaks), ("recompiles", row.recompiles)):
        if c is not None and c.gating:
            out.append(Markup(f"{name} {c.base} → {c.head}"))
    if row.accuracy is not None and row.accuracy.gating:
        out.append(Markup(f"accuracy {row.accuracy.base} → {row.accuracy.head}"))
    return out


def gating(c: Comparison, limit: int = 5) -> tuple[list[tuple[str, Markup]], int]:
    """(model, what gates) for the headline, at most ``limit``, and how many more: gating
    rows, then models that passed on base and are skipped on head (which gate too)."""
    out = [(r.model, Markup(", ").join(gating_findings(r))) for r in c.rows if r.gating]
    out += [(m.model, Markup("skipped on head")) for m in c.newly_failing if m.status == "skip"]
    return out[:limit], len(out) - len(out[:limit])


def verdict_label(row: ModelRow) -> Markup:
    """``regression (gating: graph breaks 0 → 1)``: the verdict and, when it gates, why."""
    text = label(row.verdict)
    if row.gating:
        text += Markup(" (gating: ") + Markup("; ").join(gating_findings(row)) + Markup(")")
    return text


def input_runs(values: dict[str, str], limit: int = 4) -> tuple[list[tuple[str, str]], int]:
    """A key's ``example_inputs[i]`` values, consecutive equal ones as one entry
    (``example_inputs[0–62] ×63``); at most ``limit`` entries and the number left out."""
    runs: list[tuple[int, int, str]] = []
    for name, value in values.items():
        m = _INPUT.match(name)
        if m is None:
            continue
        i = int(m.group(1))
        if runs and runs[-1][2] == value and runs[-1][1] == i - 1:
            runs[-1] = (runs[-1][0], i, value)
        else:
            runs.append((i, i, value))
    shown = [(f"example_inputs[{a}]" if a == b else f"example_inputs[{a}–{b}] ×{b - a + 1}", v)
             for a, b, v in runs[:limit]]
    return shown, len(runs) - len(shown)


def detailed(c: Comparison) -> list[ModelRow]:
    """Rows with something to say beyond a number: flagged, new reasons or changed keys."""
    return [r for r in c.rows if reasons(r) or r.notes]


def longest_list(c: Comparison) -> int:
    """The longest of the per-model lists the comment's details show (new breaks, recompiles,
    changed keys)."""
    return max((max([len(x.items) for x in reasons(r) if x.kind != "kernels"]
                    + [len(r.cache_changes)]) for r in detailed(c)), default=0)


def row_count(c: Comparison) -> int:
    return max(len(c.rows), len(c.added), len(c.removed), len(c.newly_failing),
               len(c.newly_fixed), 1)


FILTERS = {"pct": pct, "ci": ci, "speedup_ci": speedup_ci, "us": us, "secs": secs,
           "mib": mib, "times": times, "rate": rate, "label": label, "icon": icon,
           "band": band, "dus": dus, "finding": finding}
GLOBALS = {"reasons": reasons, "detailed": detailed, "gating": gating,
           "row_bisect": row_bisect,
           "key_changes": key_changes, "kernel_names": kernel_names,
           "kernel_status": kernel_status, "KERNELS_SHOWN": 5,
           "verdict_label": verdict_label, "gating_findings": gating_findings,
           "input_runs": input_runs, "collapse": collapse,
           **FILTERS}
