"""The terminal summary table of one run (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from compilewatch.core.schema import RunResults, Status

STYLE = {Status.PASS: "green", Status.FAIL: "red", Status.ERROR: "red", Status.TIMEOUT: "red",
         Status.CRASH: "red", Status.SKIP: "yellow"}


def log_console() -> Console:
    """stderr; in logs and CI (no terminal) wide, so the summary table is not squeezed to 80
    columns."""
    console = Console(stderr=True)
    if not console.is_terminal:
        console.width = 180
    return console


def _s(x: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def summary_table(results: RunResults) -> Table:
    table = Table(title=f"compilewatch run {results.run_id[:12]} "
                        f"(torch {results.environment.torch}, "
                        f"{results.environment.gpu or 'cpu'})")
    # Warm start (empty cache dir + a portable cache artifact) only when some model has one.
    starts = any(r.compile.warm_start_s is not None for r in results.results)
    for col in ("model", "config", "status", "speedup [95% CI]", "eager µs", "compiled µs",
                "cold s (1st call)", "warm s", *(("warm start s",) if starts else ()), "breaks",
                "recompiles", "accuracy"):
        table.add_column(col, justify="left" if col in ("model", "config", "status") else "right")
    for r in results.results:
        sp = r.speedup
        speed = "-" if sp is None else f"{sp.value:.2f}x [{sp.ci_low:.2f}, {sp.ci_high:.2f}]"
        lat = r.latency
        acc = "-" if r.accuracy is None or r.accuracy.passed is None else (
            "ok" if r.accuracy.passed else "FAIL")
        status = r.status.value if r.category.value == "ok" else \
            f"{r.status.value} ({r.category.value})"
        table.add_row(
            f"{r.suite}/{r.model}", r.config.slug, f"[{STYLE[r.status]}]{status}[/]", speed,
            _s(lat and lat.eager_median_us, "{:.1f}"), _s(lat and lat.compiled_median_us,
                                                          "{:.1f}"),
            _s(r.compile.cold_s), _s(r.compile.warm_s),
            *((_s(r.compile.warm_start_s),) if starts else ()),
            str(r.break_count), str(len(r.recompiles)), acc)
    return table
