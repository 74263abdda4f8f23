"""How much cold-compile noise can the verdict take and still find +20%? Numbers in
docs/verdict-quality.md.

    python benchmarks/cold_power.py --trials 2000

Draws cold compiles of one model on both sides with a known within-side noise (the standard
deviation of the log of one compile, as measured on the H200: 5-8% with per-slot cores), the
head side slower by ``--change``, pairs run side by side, and judges each draw with the rule
``compare`` uses for one witness (wall time; the CPU-time witness must agree as well, which only
lowers these rates). Prints, per noise and number of pairs a side, how often the change is
found and how often an A/A draw (no change) is flagged either way; the last columns with the
follow-up a ``pr`` on a GPU makes (``--extra-cold-processes``, 3: a draw whose verdict is
undecided near the threshold, or a change called on the first pairs,
gets that many more pairs and is judged again,
``bot/judge/followup.py``). Synthetic, so it runs anywhere in seconds; it says what noise the
+20% target needs, not what a runner has.
"""

from __future__ import annotations

import argparse
import math
import random

from compilewatch.bot.judge.followup import cold_unsettled
from compilewatch.bot.judge.stats import NoiseBands
from compilewatch.bot.judge.thresholds import Thresholds
from compilewatch.bot.judge.timings import Judging, compile_time


def rates(pairs: int, change: float, sd: float, trials: int, seed: int = 0,
          extra: int = 0) -> dict[str, float]:
    """Fractions of draws judged regression and improvement; with ``extra``, a first verdict
    the follow-up rule finds unsettled (``cold_unsettled``: undecided near the threshold, or a
    change called) gets ``extra`` more pairs, as in a ``pr``."""
    rng = random.Random(seed)
    t = Thresholds()
    judge = Judging(thresholds=t, ident=("power", "cold", "default"), noise=NoiseBands())
    seen = {"regression": 0, "improvement": 0}

    def draw(n: int) -> tuple[list[float], list[float]]:
        return ([3.0 * math.exp(rng.gauss(0.0, sd)) for _ in range(n)],
                [3.0 * change * math.exp(rng.gauss(0.0, sd)) for _ in range(n)])

    for _ in range(trials):
        base, head = draw(pairs)
        d = compile_time(base, head, t.cold_compile, "cold_compile", judge, True)
        if extra and cold_unsettled(d):
            more_b, more_h = draw(extra)
            d = compile_time(base + more_b, head + more_h, t.cold_compile, "cold_compile",
                              judge, True)
        if d is not None and d.verdict is not None and d.verdict.value in seen:
            seen[d.verdict.value] += 1
    return {k: v / trials for k, v in seen.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--change", type=float, default=1.2)
    ap.add_argument("--sd", type=float, action="append", default=None)
    ap.add_argument("--pairs", type=int, action="append", default=None)
    ap.add_argument("--extra", type=int, default=3,
                    help="Pairs a follow-up adds (the pr default on cuda).")
    args = ap.parse_args()
    change = f"{args.change - 1:+.0%}"
    print(f"| within-side noise | pairs a side | {change} found | A/A flagged | "
          f"with {args.extra} more where unsettled: {change} found | A/A flagged |")
    print("| --- | --- | --- | --- | --- | --- |")
    for sd in args.sd or [0.02, 0.03, 0.04, 0.06, 0.08]:
        for n in args.pairs or [3, 5, 6]:
            cells = []
            for extra in (0, args.extra):
                found = rates(n, args.change, sd, args.trials, extra=extra)["regression"]
                aa = sum(rates(n, 1.0, sd, args.trials, seed=1, extra=extra).values())
                cells += [f"{found:.0%}", f"{aa:.1%}"]
            print(f"| {sd:.0%} | {n} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
