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


def render_runs(runs: list[RunInfo]) -> str:
    """A header line and one line per run, columns padded to their widest cell."""
    rows = [COLUMNS, *(_cells(r) for r in runs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in rows)
