"""What the host preflight (``compiler/hostcheck.py``) silences in a comparison.

A run's preflight says which unit was too unsteady to time with: the CPU, the GPU or neither.
Only the timings that unit made lose their verdict ("too noisy to judge", never gating). On a
CPU run the CPU times everything. On a GPU run the GPU times a GPU-bound model's steady state,
and the CPU times compiles and a launch-bound model's calls: a CPU spike silences those, not a
GPU-bound model whose processes agree (on the H200 one preflight read a 91% CPU spread, and
silencing the whole run hid a +26% regression whose processes agreed within 1%). A model's own
processes still decide its interval: a model the noise reached is "too noisy" by its interval.
Peak memory is bytes and never silenced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from compilewatch.core.schema import HostCheck, RunResults
from compilewatch.core.steadiness import noisy_units

Unit = Literal["host", "device"]


@dataclass(frozen=True)
class HostNoise:
    """The units a comparison's preflights found too noisy, and why (for the report)."""

    cpu: bool = False
    gpu: bool = False
    gpu_run: bool = False
    detail: str | None = None

    def silences(self, *units: Unit) -> bool:
        """Whether a timing made on these units is too noisy to judge. ``host``: the CPU's
        own work (compiles, launches); ``device``: what the device timed (on a CPU run, the
        CPU)."""
        if not self.gpu_run:
            return self.cpu
        return any(self.cpu if u == "host" else self.gpu for u in units)

    @property
    def note(self) -> str | None:
        """The report's line: what was unsteady and which verdicts it silenced."""
        if not (self.cpu or self.gpu):
            return None
        if not self.gpu_run or (self.cpu and self.gpu):
            what = "timing and compile-time verdicts say so"
        elif self.cpu:
            what = ("compile-time verdicts and the timing verdicts of launch-bound models (or "
                    "of models not measured GPU-bound) say so; GPU-bound models are judged on "
                    "their own processes")
        else:
            what = "steady-state timing verdicts say so; compile times are judged"
        return f"{self.detail}: {what} and never gate"


def steady_state_units(*launch_bound: bool | None) -> tuple[Unit, ...]:
    """What a compiled-time verdict was timed on, from each side's launch-bound flag: the
    device alone only where every side measured the model GPU-bound; a launch-bound model, or
    one whose kind is unknown, needs the CPU's steadiness too."""
    return ("device",) if all(x is False for x in launch_bound) else ("host", "device")


def _units(host: HostCheck) -> tuple[bool, bool]:
    """The preflight's own word (``noisy``) decides whether anything is silenced; its spreads
    say which unit. A file whose spreads name neither (other limits): both."""
    if not host.noisy:
        return False, False
    cpu, gpu = noisy_units(host.cpu_spread, host.gpu_spread)
    return (cpu, gpu) if cpu or gpu else (True, host.gpu_spread is not None)


def of_check(check: HostCheck | None) -> HostNoise:
    """One preflight's noise (the measuring loop's follow-ups ask it before judging)."""
    if check is None:
        return HostNoise()
    cpu, gpu = _units(check)
    return HostNoise(cpu=cpu, gpu=gpu, gpu_run=check.gpu_spread is not None,
                     detail=check.detail)


def host_noise(base: RunResults, head: RunResults) -> HostNoise:
    """Either side's preflight: a unit unsteady on one side is unsteady for the comparison.
    One preflight taken for both sides (as ``pr`` takes it) is said once, as the host's."""
    checks = [("the host's", base.host)] if base.host == head.host else \
        [("the base run's", base.host), ("the head run's", head.host)]
    read = [(whose, check, of_check(check)) for whose, check in checks if check is not None]
    details = [f"{whose} {_which(check, n)} too noisy to judge ({check.detail})"
               for whose, check, n in read if n.cpu or n.gpu]
    return HostNoise(cpu=any(n.cpu for *_, n in read), gpu=any(n.gpu for *_, n in read),
                     gpu_run=any(n.gpu_run for *_, n in read), detail="; ".join(details) or None)


def _which(check: HostCheck, n: HostNoise) -> str:
    if not any(noisy_units(check.cpu_spread, check.gpu_spread)):
        return "preflight said it was"  # by limits other than these: its own word
    if not n.gpu_run:
        return "CPU was"
    return "CPU and GPU were" if n.cpu and n.gpu else ("CPU was" if n.cpu else "GPU was")


def run_note(check: HostCheck | None) -> str | None:
    """One run's line, where its preflight found the host too noisy: what that means for the
    numbers of a run seen on its own (a comparison says it through its verdicts)."""
    n = of_check(check)
    if check is None or not (n.cpu or n.gpu):
        return None
    timed = ("timings" if not n.gpu_run or n.gpu
             else "compile times and launch-bound models' timings")
    return (f"the host's {_which(check, n)} too noisy during this run ({check.detail}): its "
            f"{timed} may be off by more than a change would move them; a comparison with "
            "this run says \"too noisy to judge\" for them and never gates")


def lanes_note(check: HostCheck | None, paired: bool = True) -> str | None:
    """Where a run of several GPUs timed: its lanes, and each GPU the preflight left out.
    ``paired``: the run measured base and head together (a ``pr`` and its sides), so a
    model's processes of both sides shared its GPU; a ``run`` or ``nightly`` times each
    model on the GPU its name picks (a ``calibrate`` of several sides, each model's processes
    of every side on one GPU, the least busy)."""
    if check is None or len(check.gpus) < 2:
        return None
    kept = [g for g in check.gpus if not g.left_out]
    out = [g for g in check.gpus if g.left_out]
    how = "a model's processes of both sides on one GPU" if paired else (
        "each model's processes on one GPU: the one its name picks where a run measured one "
        "side")
    text = f"timed on GPUs {', '.join(str(g.index) for g in kept)}, one timing lane each ({how})"
    if out and kept:
        low, high = min(g.spread for g in kept), max(g.spread for g in kept)
        others = f"{low:.1%}" if low == high else f"{low:.1%}-{high:.1%}"
        text += "; " + "; ".join(f"GPU {g.index} left out of timing: its preflight spread "
                                 f"{g.spread:.1%} against {others} on the others" for g in out)
    return text


def lanes_notes(base: RunResults, head: RunResults) -> list[str]:
    """``lanes_note`` of a comparison: once where both sides share one preflight (a ``pr``);
    else each side's, as its own run timed (two ``run`` results compared: each model on the
    GPU its name picked, not both sides on one)."""
    if base.host == head.host:
        return [n for n in [lanes_note(base.host, paired=base.settings.side is not None)] if n]
    return [f"{side}: {n}" for side, run in (("base", base), ("head", head))
            if (n := lanes_note(run.host, paired=run.settings.side is not None))]
