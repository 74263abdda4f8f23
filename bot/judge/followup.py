"""Which first verdicts are close enough that more processes would settle them.

Three processes a side cannot always tell a 10% change from noise, and lowering the band would
call more false alarms; what settles such a model is more evidence. Only models whose verdict
is undecided *and* whose estimate is past the threshold get more timing processes a side (on
the warm cache, seconds each), so a quiet suite costs nothing. Cold compiles likewise: a
cold-compile verdict still open with its estimate past two thirds of the threshold gets a few
more cold compiles a side, and so does every change called on the first pairs (pairs run one
after another share the host's state and sometimes agree by chance); either is judged again on
all of them. The measurements behind both rules: docs/verdict-quality.md, "The measurements
behind the judging rules".
"""

from __future__ import annotations

import math

from compilewatch.bot.judge.comparison import Delta, Verdict
from compilewatch.bot.judge.host import HostNoise, steady_state_units
from compilewatch.bot.judge.stats import NoiseBands
from compilewatch.bot.judge.thresholds import ThresholdPolicy, Thresholds
from compilewatch.bot.judge.verdicts import compare_model
from compilewatch.core.followup import FollowUp
from compilewatch.core.schema import ModelResult

UNDECIDED = (Verdict.WITHIN_NOISE, Verdict.NOISY)
# a cold-compile estimate this far towards its threshold is worth more cold compiles
COLD_REACH = 2 / 3


def more_processes(base: ModelResult, head: ModelResult, thresholds: Thresholds,
                   noise: NoiseBands | None = None, host: HostNoise | None = None
                   ) -> str | None:
    """Why this model needs more timing processes (None: its first verdict stands).

    Undecided (within noise, or too noisy to judge) with the estimate at or past the
    threshold: a change may be there, and the processes so far disagree too much to say. Not
    where the band the verdict needs (three times the spread between processes) is more than
    twice the estimate: more processes narrow the interval, not the spread, so they would not
    get there (docs/verdict-quality.md). Nor where the host
    preflight found the unit that times this model too noisy: its verdict will say so, and
    more processes on that host would not change it.
    """
    if host is not None and base.latency is not None and head.latency is not None and \
            host.silences(*steady_state_units(base.latency.launch_bound,
                                              head.latency.launch_bound)):
        return None
    d = compare_model(base, head, thresholds, noise=noise).compiled_time
    reach = _open(d, 1.0)
    if d is None or reach is None:
        return None
    if d.band is not None and reach < math.log1p(d.band) / 2:
        return None  # the band is more than twice the change: three more will not get there
    return _said(d, "compiled time", "past")


def cold_unsettled(d: Delta | None) -> str | None:
    """Why more cold compiles would settle this cold-compile verdict (None: it stands, or one
    sample a side was only shown): undecided, with the estimate at or past ``COLD_REACH`` of the
    threshold either way; or a change called on the first pairs, however far past the threshold
    (pairs run one after another share the host's state, so three of them can agree by chance:
    the second look, later in the run, confirms the call or takes it back)."""
    if d is None:
        return None
    if _open(d, COLD_REACH) is not None:
        return _said(d, "cold compile", "near")
    if _called(d):
        return _said(d, "cold compile", "called on them, to be confirmed against")
    return None


def _called(d: Delta) -> bool:
    """A regression or improvement judged against a threshold (not one only shown)."""
    return d.threshold is not None and \
        d.verdict in (Verdict.REGRESSION, Verdict.IMPROVEMENT)


def _open(d: Delta | None, share: float) -> float | None:
    """The estimate's size (|log ratio|) where the verdict is undecided and the estimate is at
    or past ``share`` of the threshold; None otherwise (decided, shown only, or too small)."""
    if d is None or d.verdict not in UNDECIDED or d.ratio is None or d.threshold is None:
        return None
    reach = abs(math.log(d.ratio))
    return reach if reach >= math.log1p(d.threshold * share) else None


def _said(d: Delta, what: str, where: str) -> str:
    """The follow-up's reason, as its note says it."""
    assert d.ratio is not None and d.verdict is not None and d.threshold is not None
    interval = "" if d.ci_low is None or d.ci_high is None else \
        f" [{d.ci_low - 1:+.1%}, {d.ci_high - 1:+.1%}]"
    return (f"the first {d.samples[0] if d.samples else '?'} a side gave {what} "
            f"{d.ratio - 1:+.1%}{interval}, {d.verdict.value.replace('_', ' ')}, {where} the "
            f"{d.threshold:.0%} threshold")


def more_cold(base: ModelResult, head: ModelResult, thresholds: Thresholds,
              noise: NoiseBands | None = None, host: HostNoise | None = None) -> str | None:
    """Why this model needs more cold compiles (None: its cold-compile verdict stands). Not
    where the host preflight found the CPU, which compiles, too noisy: the verdict says so
    whatever more compiles would show."""
    if host is not None and host.silences("host"):
        return None
    return cold_unsettled(compare_model(base, head, thresholds, noise=noise).cold_compile)


def cold_asker(policy: ThresholdPolicy, noise: NoiseBands, host: HostNoise | None = None
               ) -> FollowUp:
    """The measuring loop's question once a model's cold compiles are in, judged with the
    thresholds, noise and host preflight the comparison will use."""
    def ask(base: ModelResult, head: ModelResult) -> str | None:
        return more_cold(base, head, policy.for_model(base.model), noise, host)

    return ask


def profiled(base: ModelResult, head: ModelResult, thresholds: Thresholds,
             noise: NoiseBands | None = None, host: HostNoise | None = None) -> str | None:
    """Why this model gets a profile process a side (None: it does not): its compiled time
    is a regression or an improvement, and the question is which kernels moved."""
    d = compare_model(base, head, thresholds, noise=noise, host=host).compiled_time
    if d is None or d.ratio is None or d.verdict not in (Verdict.REGRESSION,
                                                         Verdict.IMPROVEMENT):
        return None
    return f"compiled time {d.ratio - 1:+.1%}, {d.verdict.value}"


def profile_asker(policy: ThresholdPolicy, noise: NoiseBands, host: HostNoise | None = None
                  ) -> FollowUp:
    """The measuring loop's question once a model's processes are all in: does it get a
    profile process a side (``compiler/kernels.py``)?"""
    def ask(base: ModelResult, head: ModelResult) -> str | None:
        return profiled(base, head, policy.for_model(base.model), noise, host)

    return ask


def asker(policy: ThresholdPolicy, noise: NoiseBands, host: HostNoise | None = None
          ) -> FollowUp:
    """The measuring loop's question after a model's first timing processes, judged with the
    thresholds, noise and host preflight the comparison will use (``pr`` passes the base
    checkout's)."""
    def ask(base: ModelResult, head: ModelResult) -> str | None:
        return more_processes(base, head, policy.for_model(base.model), noise, host)

    return ask
