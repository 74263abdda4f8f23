"""Which generated kernel got slower: base's profile process against head's, kernel by kernel
(matched by ``bot/judge/kernelmatch.py``), each line's change in time a step and in share of
the step, sorted by how much it contributes to the step's change; and the host side: kernel
launches and host time a step, so that a change from more launches (a lost fusion, a graph
break) is named as such.

A line is beyond its noise when it moved by more than each of: its own spread over the
profiled steps (p90 - p10, the two sides' mean), the band the model's compiled-time verdict
needed (a kernel can move no less than the whole call's noise allows) of its own time, and
``FLOOR`` of the step (one process a side cannot tell a kernel of a few microseconds in a step
of milliseconds from noise). docs/measurement.md, "Kernel profiles", says what was measured.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from compilewatch.bot.judge.comparison import KernelDiff, KernelHost, KernelLine
from compilewatch.bot.judge.kernelmatch import Match, Unit, match
from compilewatch.core.kernels import Kernel, KernelProfile

FLOOR = 0.002  # of the step's device time: below it no kernel's change is beyond noise
BAND = 0.03  # the band a line needs where the model's verdict gave none
WHERE = 3  # of the user's lines a line shows
MORE_LAUNCHES = 0.05  # a change in launches a step worth a finding (and at least one)


def _ops(units: Iterable[Unit]) -> list[str]:
    seen: dict[str, None] = {}
    for u in units:
        for op in u.ops:
            seen.setdefault(op.removeprefix("aten."), None)
    return list(seen)


def _where(units: Iterable[Unit]) -> list[str]:
    seen: dict[str, None] = {}
    for u in units:
        for o in u.kernel.origins:
            if o.location:
                seen.setdefault(f"{o.location}: {o.code}" if o.code else o.location, None)
    return list(seen)[:WHERE]


def _bandwidth(units: Sequence[Unit], steps: int) -> float | None:
    """GB/s a single kernel achieved, where Inductor estimated the bytes it moves."""
    if len(units) != 1 or units[0].kernel.gb is None or not units[0].kernel.calls:
        return None
    k = units[0].kernel
    per_call_s = k.step_us / (k.calls / steps) / 1e6
    return k.gb / per_call_s if per_call_s > 0 else None


def _side(units: Sequence[Unit], p: KernelProfile) -> tuple[float, float, float, float, float]:
    """(time, share, calls, launches, spread) a step of these kernels on one side."""
    ks: list[Kernel] = [u.kernel for u in units]
    us = sum(k.step_us for k in ks)
    return (us, us / p.device_us if p.device_us else 0.0,
            sum(k.calls for k in ks) / p.steps, sum(k.launches for k in ks) / p.steps,
            sum(k.step_spread_us for k in ks))


def _line(m: Match, base: KernelProfile, head: KernelProfile, band: float) -> KernelLine:
    bu, bs, bc, bl, bsp = _side(m.base, base)
    hu, hs, hc, hl, hsp = _side(m.head, head)
    units = (*m.head, *m.base)
    step = max(base.device_us, head.device_us)
    noise = max((bsp + hsp) / 2, band * max(bu, hu), FLOOR * step)
    bw = (_bandwidth(m.base, base.steps), _bandwidth(m.head, head.steps))
    return KernelLine(
        status=m.status, kind=units[0].kernel.kind, base=[u.kernel.name for u in m.base],
        head=[u.kernel.name for u in m.head],
        graph=next((u.kernel.graph for u in units if u.kernel.graph), None),
        base_us=bu, head_us=hu, base_share=bs, head_share=hs, base_calls=bc, head_calls=hc,
        base_launches=bl, head_launches=hl, fuses=_ops(units), where=_where(units),
        noise_us=noise, beyond_noise=abs(hu - bu) > noise,
        bandwidth_gbs=bw if any(x is not None for x in bw) else None)


def _host(base: KernelProfile, head: KernelProfile, lines: Sequence[KernelLine],
          launch_bound: bool | None, breaks: tuple[int, int] | None) -> KernelHost:
    host = KernelHost(base_launches=base.launches_per_step, head_launches=head.launches_per_step,
                      base_host_us=base.step_us, head_host_us=head.step_us,
                      base_graphs=len(base.graphs), head_graphs=len(head.graphs))
    return host.model_copy(update={"finding": _launches(host, lines, launch_bound, breaks)})


def _launches(h: KernelHost, lines: Sequence[KernelLine], launch_bound: bool | None,
              breaks: tuple[int, int] | None = None) -> str | None:
    """What a change in launches a step says: which way, and why (graphs, fusions). A graph
    break is named only where the model's breaks changed too: the graphs counted are the FX
    graphs a step called by their keys, and a training step calls a forward and a backward,
    or a graph torch does not key (a bypassed cache) is not counted at all."""
    more = h.head_launches - h.base_launches
    if abs(more) < max(1.0, MORE_LAUNCHES * h.base_launches):
        return None
    why: list[str] = []
    if h.head_graphs != h.base_graphs:
        what = ""
        if breaks is not None and breaks[1] != breaks[0]:
            what = " (a graph break)" if breaks[1] > breaks[0] else " (a graph break gone)"
        why.append(f"{h.base_graphs} → {h.head_graphs} compiled graphs{what}")
    split = sum(x.status == "split" for x in lines)
    merged = sum(x.status == "merged" for x in lines)
    if split and more > 0:
        why.append(f"{split} kernel{'s' * (split != 1)} split (a lost fusion)")
    if merged and more < 0:
        why.append(f"{merged} kernel{'s' * (merged != 1)} merged (a fusion)")
    eager = sum(x.status == "new" and x.kind == "eager" for x in lines)
    if eager and more > 0:
        why.append(f"{eager} new eager op{'s' * (eager != 1)} outside the compiled graphs")
    text = (f"{'more' if more > 0 else 'fewer'} kernel launches a step: "
            f"{h.base_launches:.0f} → {h.head_launches:.0f}")
    if why:
        text += f", from {'; '.join(why)}"
    text += f"; host time a step {_us(h.base_host_us)} → {_us(h.head_host_us)}"
    if launch_bound:
        text += ("; the model is launch-bound (the GPU waits for the host), so its time "
                 "follows its launches")
    return text


def _us(x: float) -> str:
    return f"{x / 1000:.2f} ms" if x >= 1000 else f"{x:.1f} µs"


def diff(base: KernelProfile | None, head: KernelProfile | None, *,
         band: float | None = None, launch_bound: bool | None = None,
         breaks: tuple[int, int] | None = None) -> KernelDiff | None:
    """Base's kernels against head's (None: a side has no profile). ``band``: the relative
    change the model's compiled-time verdict needed; ``breaks``: the model's graph breaks
    on each side, where known."""
    if base is None or head is None:
        return None
    failed = [f"{side}'s kernel profile: {p.unknown_reason}" for side, p in
              (("base", base), ("head", head)) if p.unknown_reason]
    if failed or base.activity != head.activity:
        notes = failed or [f"the kernel profiles timed different devices ({base.activity} "
                           f"and {head.activity}): not compared"]
        return KernelDiff(activity=head.activity, notes=notes)
    lines = [_line(m, base, head, band or BAND) for m in match(base.kernels, head.kernels)]
    lines.sort(key=lambda x: (-abs(x.delta_us), -max(x.base_us, x.head_us)))
    notes = [f"{side}: {n}" for side, p in (("base", base), ("head", head)) for n in p.notes]
    for side, p in (("base", base), ("head", head)):
        if p.left_out:
            notes.append(f"{side}: {p.left_out} of the shortest kernels left out (in the "
                         "step's total only)")
    return KernelDiff(activity=head.activity, steps=(base.steps, head.steps),
                      base_device_us=base.device_us, head_device_us=head.device_us,
                      lines=lines, host=_host(base, head, lines, launch_bound, breaks),
                      notes=notes)
