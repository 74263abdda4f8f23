"""Which first verdicts are close enough that more timing processes would settle them.

Three processes a side cannot tell a 10% change from noise when those processes happen to
disagree by 5%: on the H200 a compiler-side +9.8% change came out "within noise" with the
interval [+2.4%, +17.8%] because its band, three times the run's spread, was 10.5%. Lowering
the band would have called it, and would have called three times as many false alarms
(docs/verdict-quality.md). What settles such a model is more evidence: a few more timing
processes a side, on the warm cache (seconds each). Only models whose steady-state verdict is
undecided *and* whose estimate is past the threshold get them, so a quiet suite costs nothing.
"""

from __future__ import annotations

import math

from compilewatch.bot.judge.comparison import Verdict
from compilewatch.bot.judge.host import HostNoise, steady_state_units
from compilewatch.bot.judge.stats import NoiseBands
from compilewatch.bot.judge.thresholds import ThresholdPolicy, Thresholds
from compilewatch.bot.judge.verdicts import compare_model
from compilewatch.compiler.schedule import FollowUp
from compilewatch.core.schema import ModelResult

UNDECIDED = (Verdict.WITHIN_NOISE, Verdict.NOISY)


def more_processes(base: ModelResult, head: ModelResult, thresholds: Thresholds,
                   noise: NoiseBands | None = None, host: HostNoise | None = None
                   ) -> str | None:
    """Why this model needs more timing processes (None: its first verdict stands).

    Undecided (within noise, or too noisy to judge) with the estimate at or past the
    threshold: a change may be there, and the processes so far disagree too much to say. Not
    where the band the verdict needs (three times the spread between processes) is more than
    twice the estimate: more processes narrow the interval, not the spread, so they would not
    get there (on the H200: a launch-bound model at +19% with a 66% band). Nor where the host
    preflight found the unit that times this model too noisy: its verdict will say so, and
    more processes on that host would not change it.
    """
    if host is not None and base.latency is not None and head.latency is not None and \
            host.silences(*steady_state_units(base.latency.launch_bound,
                                              head.latency.launch_bound)):
        return None
    d = compare_model(base, head, thresholds, noise=noise).compiled_time
    if d is None or d.verdict not in UNDECIDED or d.ratio is None or d.threshold is None:
        return None
    reach = abs(math.log(d.ratio))
    if reach < math.log1p(d.threshold):
        return None
    if d.band is not None and reach < math.log1p(d.band) / 2:
        return None  # the band is more than twice the change: three more will not get there
    verdict = d.verdict.value.replace("_", " ")
    interval = "" if d.ci_low is None or d.ci_high is None else \
        f" [{d.ci_low - 1:+.1%}, {d.ci_high - 1:+.1%}]"
    return (f"the first {d.samples[0] if d.samples else '?'} a side gave compiled time "
            f"{d.ratio - 1:+.1%}{interval}, {verdict}, past the {d.threshold:.0%} threshold")


def asker(policy: ThresholdPolicy, noise: NoiseBands, host: HostNoise | None = None
          ) -> FollowUp:
    """The measuring loop's question after a model's first timing processes, judged with the
    thresholds, noise and host preflight the comparison will use (``pr`` passes the base
    checkout's)."""
    def ask(base: ModelResult, head: ModelResult) -> str | None:
        return more_processes(base, head, policy.for_model(base.model), noise, host)

    return ask
