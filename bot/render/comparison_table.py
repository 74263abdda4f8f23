"""The comparison as a terminal table (rich), for ``compilewatch compare --format table``."""

from __future__ import annotations

import io
from collections import Counter

from rich.console import Console, Group
from rich.text import Text

from compilewatch.bot.judge.comparison import Comparison, Delta, ModelRow, Verdict
from compilewatch.bot.render import filters
from compilewatch.bot.render.escape import headline, plain
from compilewatch.bot.render.fit import Column, fitted_table, left_out

STYLES = {Verdict.REGRESSION: "bold red", Verdict.IMPROVEMENT: "bold green",
          Verdict.WITHIN_NOISE: "yellow", Verdict.NOISY: "magenta", Verdict.FAILING: "red",
          Verdict.UNCHANGED: "dim"}


def _delta(d: Delta | None, fmt) -> Text:  # type: ignore[no-untyped-def]
    if d is None:
        return Text("—")
    return Text(f"{fmt(d.head)} {filters.pct(d.ratio)}", style=STYLES.get(d.verdict, "") if
                d.verdict else "")


COLUMNS = (Column("model", justify="left"), Column("verdict", justify="left", fold_to=20),
           Column("compiled", justify="left"), Column("speedup", drop=3, justify="left"),
           Column("cold", drop=2, justify="left"), Column("warm", drop=4, justify="left"),
           Column("breaks", drop=1, justify="left"), Column("recompiles", drop=1,
                                                              justify="left"),
           Column("why", justify="left", fold_to=30))
WIDE = 160  # a file's or a log's width
LEGEND = ("compiled: head's µs per call (each timing process's median, geometric mean over the "
          "processes) and head ÷ base on that scale, which is what is judged; speedup: head's "
          "eager ÷ compiled of the same round (per process, geometric mean) and its change, "
          "context only; cold, warm: head's compile seconds and their change.")


def _row(r: ModelRow, configs: bool = False) -> list[Text]:
    """A row; ``configs``: a model is on several rows (its tasks, modes, dtypes), so each
    says which config it is."""
    why = "; ".join(str(x.label) + (": " + ", ".join(headline(i, 120) for i in x.items[:3])
                                     if x.items else "")
                    for x in filters.reasons(r))
    return [
        Text(plain(f"{r.suite}/{r.model}" + (f" [{r.config}]" if configs else ""))),
        Text(str(filters.verdict_label(r)), style=STYLES[r.verdict]),
        Text(r.not_timed) if r.not_timed else _delta(r.compiled_time, filters.us),
        _delta(r.speedup, filters.times),
        _delta(r.cold_compile, filters.secs), _delta(r.warm_compile, filters.secs),
        Text(f"{r.graph_breaks.base} → {r.graph_breaks.head}" if r.graph_breaks else "—"),
        Text(f"{r.recompiles.base} → {r.recompiles.head}" if r.recompiles else "—"),
        Text(plain(why)),
    ]


def build_table(c: Comparison, width: int = WIDE) -> Group:
    """The table fitted to ``width``, then the comparison's notes, the models not on both
    sides, the legend and the columns left out. Untrusted strings go in as ``Text`` (never
    parsed as rich markup) and without control characters (no terminal escape sequences)."""
    h = c.headline
    title = (f"regressions {h.regressions}, improvements {h.improvements}, "
             f"unchanged {h.unchanged}, within noise {h.within_noise}"
             + (f", too noisy to judge {h.noisy}" if h.noisy else "")
             + (f", failing on both sides {h.failing}" if h.failing else ""))
    seen = Counter((r.suite, r.model) for r in c.rows)
    table, hidden = fitted_table(title, COLUMNS,
                                 [_row(r, seen[(r.suite, r.model)] > 1) for r in c.rows], width)
    lines = [Text(plain(f"note: {note}")) for note in c.notes]
    for name, items in (("newly failing", c.newly_failing), ("newly fixed", c.newly_fixed),
                        ("added", c.added), ("removed", c.removed)):
        if items:
            lines.append(Text(plain(f"{name}: " + ", ".join(f"{m.suite}/{m.model}"
                                                            for m in items))))
    if c.rows:
        lines.append(Text(LEGEND, style="dim"))
    if (out := left_out(hidden, width, "--format html shows every column")):
        lines.append(out)
    return Group(table, *lines)


def render_table(c: Comparison, width: int = WIDE) -> str:
    """The table as plain text (no colour), for files, pipes and tests."""
    console = Console(file=io.StringIO(), width=width, color_system=None, record=True)
    console.print(build_table(c, width))
    return console.export_text()
