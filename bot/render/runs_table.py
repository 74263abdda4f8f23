"""The list of stored runs (``compilewatch runs``) as plain text columns."""

from __future__ import annotations

from compilewatch.db import RunInfo

SHORT_ID = 12  # characters of a run id shown; any unique prefix of 6 or more selects the run
COLUMNS = ("run id", "started (UTC)", "ref", "commit", "trigger", "suites", "models",
           "repository")


def _cells(r: RunInfo) -> tuple[str, ...]:
    return (r.run_id[:SHORT_ID], f"{r.started_at:%Y-%m-%d %H:%M}", r.ref or "-",
            (r.commit or "-")[:10], r.trigger + (f" ({r.side})" if r.side else ""),
            ",".join(r.suites) or "-", f"{r.n_pass}/{r.n_results} pass", r.repository or "-")


DROP_FIRST = ("repository", "suites", "commit", "models")  # on a narrow terminal, in order


def render_runs(runs: list[RunInfo], width: int | None = None) -> str:
    """A header line and one line per run, columns padded to their widest cell. Wider than
    ``width``: the secondary columns go (``DROP_FIRST``), and the last line names them."""
    rows = [COLUMNS, *(_cells(r) for r in runs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    kept = list(range(len(COLUMNS)))
    for name in DROP_FIRST:
        if width is None or sum(widths[i] + 2 for i in kept) - 2 <= width:
            break
        kept.remove(COLUMNS.index(name))
    lines = ["  ".join(row[i].ljust(widths[i]) for i in kept).rstrip() for row in rows]
    hidden = [c for i, c in enumerate(COLUMNS) if i not in kept]
    if hidden:
        lines.append(f"(not shown at {width} columns: {', '.join(hidden)}; --json has every "
                     "field)")
    return "\n".join(lines)
