"""The terminal summary table of one run (rich), with the legend that says what each number
is, fitted to the width it is printed at (``fit.py``)."""

from __future__ import annotations

import math

from rich.console import Group
from rich.text import Text

from compilewatch.bot.judge.host import run_note
from compilewatch.bot.judge.stats import TOO_WIDE, too_wide
from compilewatch.bot.judge.timings import shown_per_call
from compilewatch.bot.render.escape import plain
from compilewatch.bot.render.fit import Column, fitted_table, left_out
from compilewatch.bot.render.sharedcache import summary as shared_summary
from compilewatch.core.schema import ModelResult, RunResults, Status

STYLE = {Status.PASS: "green", Status.FAIL: "red", Status.ERROR: "red", Status.TIMEOUT: "red",
         Status.CRASH: "red", Status.SKIP: "yellow"}
WIDE = 180  # a log's width (no terminal, no COLUMNS)
DISAGREE = 1.25  # eager/compiled of the shown medians this far from speedup gets a mark
MARK = "†"
LEGEND = ("speedup: eager ÷ compiled of the same round (timed back to back, so the host's speed "
          "cancels), median per timing process, geometric mean over the processes; the 95% "
          "interval is from their spread. eager µs, compiled µs: each process's median per "
          f"call, geometric mean over the processes. {MARK}: their ratio is more than 25% from "
          "the speedup, because the host's speed moved inside a process; read the speedup. "
          f"too noisy: the interval reaches zero or spans more than a factor of {TOO_WIDE:.0f}, "
          "so it bounds nothing (more timing processes, or a quieter host, narrow it).")
# context goes first (warm, config, accuracy, eager), the findings last: graph breaks and
# recompiles are what a narrow terminal must still show
COLUMNS = (Column("model", justify="left"), Column("config", drop=4, justify="left"),
           Column("status", justify="left"), Column("speedup [95% CI]"),
           Column("eager µs", drop=3), Column("compiled µs", drop=2),
           Column("cold s (1st call)", drop=2), Column("warm s", drop=5),
           Column("warm start s", drop=5), Column("remote s", drop=5), Column("breaks", drop=1),
           Column("recompiles", drop=1), Column("accuracy", drop=4))


def _s(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def disagrees(r: ModelResult) -> float | None:
    """eager ÷ compiled of the shown per-call values, where it is more than ``DISAGREE`` from
    the speedup (None otherwise): a host whose speed moved inside a process."""
    if r.latency is None or r.speedup is None or not r.latency.compiled_us:
        return None
    eager, compiled = shown_per_call(r.latency)
    if eager <= 0 or compiled <= 0 or r.speedup.value <= 0:
        return None
    ratio = eager / compiled
    return ratio if abs(math.log(ratio / r.speedup.value)) > math.log(DISAGREE) else None


def _row(r: ModelResult, starts: bool, remote: bool) -> list[str | Text]:
    sp = r.speedup
    speed = "-" if sp is None else (
        f"{sp.value:.2f}x too noisy" if too_wide(sp.ci_low, sp.ci_high)
        else f"{sp.value:.2f}x [{sp.ci_low:.2f}, {sp.ci_high:.2f}]")
    if sp is not None and disagrees(r) is not None:
        speed += f" {MARK}"
    eager, compiled = shown_per_call(r.latency) if r.latency and r.latency.compiled_us \
        else (None, None)
    acc = "-" if r.accuracy is None or r.accuracy.passed is None else (
        "ok" if r.accuracy.passed else "FAIL")
    status = r.status.value if r.category.value == "ok" else \
        f"{r.status.value} ({r.category.value})"
    return [Text(plain(f"{r.suite}/{r.model}")), r.config.slug,
            f"[{STYLE[r.status]}]{status}[/]", speed, _s(eager, "{:.1f}"),
            _s(compiled, "{:.1f}"), _s(r.compile.cold_s), _s(r.compile.warm_s),
            *((_s(r.compile.warm_start_s),) if starts else ()),
            *((_s(r.compile.remote_s),) if remote else ()), str(r.break_count),
            str(len(r.recompiles)), acc]


def summary_table(results: RunResults, width: int = WIDE) -> Group:
    """The table, then what a reader needs beside it: the host's noise, the legend, and the
    columns a narrow terminal left out."""
    # Warm start (empty cache dir + a portable cache artifact) only when some model has one.
    starts = any(r.compile.warm_start_s is not None for r in results.results)
    # the remote phase (empty cache dir + the shared compile cache) likewise
    remote = any(r.compile.remote_s is not None for r in results.results)
    columns = [c for c in COLUMNS if (starts or c.header != "warm start s")
               and (remote or c.header != "remote s")]
    table, hidden = fitted_table(
        f"compilewatch run {results.run_id[:12]} (torch {results.environment.torch}, "
        f"{results.environment.gpu or 'cpu'})", columns,
        [_row(r, starts, remote) for r in results.results], width)
    lines: list[Text] = []
    if (note := run_note(results.host)) is not None:
        lines.append(Text(f"noisy host: {note}", style="yellow"))
    if (shared := shared_summary(results)) is not None:
        lines.append(Text(plain(shared)))
    if any(r.speedup for r in results.results):
        lines.append(Text(LEGEND, style="dim"))
    if (out := left_out(hidden, width, "widen the terminal, or see the run's report.html")):
        lines.append(out)
    return Group(table, *lines)
