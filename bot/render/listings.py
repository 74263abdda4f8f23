"""The ``--json`` output of ``runs``, ``suites`` and ``doctor``: one object each, of a shape
documented in docs/cli.md and kept stable (``version`` changes when a field changes meaning
or goes; new fields may appear), so scripts read it instead of the columns people read."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from rich.text import Text

from compilewatch.bot.render.escape import plain
from compilewatch.db import RunInfo

VERSION = 1


def _dump(kind: str, body: dict[str, Any]) -> str:
    return json.dumps({"kind": kind, "version": VERSION, **body}, indent=1) + "\n"


def _time(t: Any) -> str | None:
    return None if t is None else f"{t.isoformat(timespec='seconds')}Z"


def runs_json(runs: list[RunInfo], *, stored: int, database: str) -> str:
    """The runs that matched (newest first), how many the database holds, and which one."""
    return _dump("runs", {"database": database, "stored": stored, "runs": [{
        "run_id": r.run_id, "started_at": _time(r.started_at),
        "finished_at": _time(r.finished_at), "trigger": r.trigger, "side": r.side,
        "ref": r.ref, "commit": r.commit, "repository": r.repository, "pr": r.pr,
        "suites": list(r.suites), "models": r.n_results, "passed": r.n_pass,
        "status": r.status} for r in runs]})


def suites_json(suites: list[Any]) -> str:
    """``bot/commands/suites.py``'s entries: each suite with its models."""
    return _dump("suites", {"suites": [{
        "name": s.name, "source": s.source,
        "models": [{**asdict(m), "tags": list(m.tags), "devices": list(m.devices),
                    "requires": list(m.requires), "missing": list(m.missing)}
                   for m in s.models]} for s in suites]})


def suites_text(suites: list[Any]) -> Text:
    """A suite per block, a model per line with its tags and the packages it needs. Names
    come from users' suite files: plain text, never rich markup."""
    out = Text()
    for s in suites:
        out.append(plain(s.name), style="bold")
        out.append(f"  ({plain(s.source)})\n")
        for m in s.models:
            out.append(f"  {plain(m.name)}")
            extra = [", ".join(m.tags)] if m.tags else []
            if m.requires:
                extra.append("needs " + ", ".join(m.requires)
                             + (" (not installed: will be skipped)" if m.missing else ""))
            if extra:
                out.append("  " + plain("; ".join(extra)), style="dim")
            out.append("\n")
    out.rstrip()
    return out


def doctor_json(report: Any) -> str:
    """``bot/commands/doctor.py``'s report: every check, and whether the main job can run here."""
    return _dump("doctor", {"can_run": report.can_run, "checks": [
        {"name": c.name, "status": c.status, "detail": c.detail} for c in report.checks]})
