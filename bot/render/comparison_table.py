"""The comparison as a terminal table (rich), for ``compilewatch compare --format table``."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from compilewatch.bot.judge.comparison import Comparison, Delta, Verdict
from compilewatch.bot.render import filters
from compilewatch.bot.render.escape import headline, plain

STYLES = {Verdict.REGRESSION: "bold red", Verdict.IMPROVEMENT: "bold green",
          Verdict.WITHIN_NOISE: "yellow", Verdict.NOISY: "magenta", Verdict.FAILING: "red",
          Verdict.UNCHANGED: "dim"}


def _delta(d: Delta | None, fmt) -> Text:  # type: ignore[no-untyped-def]
    if d is None:
        return Text("—")
    return Text(f"{fmt(d.head)} {filters.pct(d.ratio)}", style=STYLES.get(d.verdict, "") if
                d.verdict else "")


def build_table(c: Comparison) -> Table:
    """Untrusted strings go in as ``Text`` (never parsed as rich markup) and without control
    characters (no terminal escape sequences)."""
    h = c.headline
    table = Table(title=f"regressions {h.regressions}, improvements {h.improvements}, "
                        f"unchanged {h.unchanged}, within noise {h.within_noise}"
                        + (f", too noisy to judge {h.noisy}" if h.noisy else "")
                        + (f", failing on both sides {h.failing}" if h.failing else ""))
    for col in ("model", "verdict", "compiled", "speedup", "cold", "warm", "breaks",
                "recompiles", "why"):
        table.add_column(col, overflow="fold")
    for r in c.rows:
        why = "; ".join(str(x.label) + (": " + ", ".join(headline(i, 120) for i in x.items[:3])
                                         if x.items else "")
                        for x in filters.reasons(r))
        table.add_row(
            Text(plain(f"{r.suite}/{r.model}")),
            Text(str(filters.verdict_label(r)), style=STYLES[r.verdict]),
            Text(r.not_timed) if r.not_timed else _delta(r.compiled_time, filters.us),
            _delta(r.speedup, filters.times),
            _delta(r.cold_compile, filters.secs), _delta(r.warm_compile, filters.secs),
            Text(f"{r.graph_breaks.base} → {r.graph_breaks.head}" if r.graph_breaks else "—"),
            Text(f"{r.recompiles.base} → {r.recompiles.head}" if r.recompiles else "—"),
            Text(plain(why)),
        )
    return table


def render_table(c: Comparison, width: int = 160) -> str:
    """The table as plain text (no colour), for files and tests."""
    console = Console(file=io.StringIO(), width=width, color_system=None, record=True)
    console.print(build_table(c))
    for note in c.notes:
        console.print(Text(plain(f"note: {note}")))
    for title, items in (("newly failing", c.newly_failing), ("newly fixed", c.newly_fixed),
                         ("added", c.added), ("removed", c.removed)):
        if items:
            console.print(Text(plain(f"{title}: " + ", ".join(f"{m.suite}/{m.model}"
                                                              for m in items))))
    return console.export_text()
