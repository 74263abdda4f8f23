"""What the shared compile cache did in one run, phase by phase: entries stored, loaded,
missed and refused, and the local hits beside them. The run's terminal summary and its report
both say it in these words."""

from __future__ import annotations

from dataclasses import dataclass

from compilewatch.core.schema import CachePhase, RunResults

PHASES: dict[CachePhase, str] = {"cold": "cold compiles", "warm": "timing processes",
                                 "warm_start": "warm starts", "remote": "remote phases"}


@dataclass(frozen=True)
class PhaseUse:
    """One phase's shared-cache lookups and stores, summed over the run's models."""

    phase: CachePhase
    models: int  # models whose process of this phase used the shared cache
    loaded: int  # FX graphs loaded from it, verified
    local: int  # FX graph hits of the local cache dir in the same processes
    missed: int
    refused: int  # entries it held that were not loaded (unsigned, foreign key, altered)
    stored: int

    def text(self) -> str:
        parts = [f"{self.loaded} loaded ({self.local} local hits)", f"{self.missed} missed",
                 f"{self.refused} refused"] if self.phase == "remote" or self.loaded \
            or self.missed or self.refused else []
        if self.stored:
            parts.append(f"{self.stored} stored")
        return f"{PHASES[self.phase]} of {self.models} model{'s' if self.models != 1 else ''}: " \
               f"{', '.join(parts) or 'nothing'}"


def use_by_phase(results: RunResults) -> list[PhaseUse]:
    """The phases whose processes used the shared cache (a counter recorded, not None)."""
    out = []
    for phase in PHASES:
        used = [c for r in results.results if (c := r.cache.counters.get(phase)) is not None
                and any(v is not None for v in (c.fx_remote_hit, c.fx_remote_put))]
        if used:
            out.append(PhaseUse(phase, len(used), sum(c.fx_remote_hit or 0 for c in used),
                                sum(c.fx_local_hit for c in used),
                                sum(c.fx_remote_miss or 0 for c in used),
                                sum(c.fx_remote_refused or 0 for c in used),
                                sum(c.fx_remote_put or 0 for c in used)))
    return out


def summary(results: RunResults) -> str | None:
    """One line: the run's role and each phase's use; None when the run did not use it."""
    role = results.settings.remote_cache
    uses = use_by_phase(results)
    if role is None and not uses:
        return None
    what = "read and stored" if role == "write" else "read only"
    return f"Shared compile cache ({what}): " + ("; ".join(u.text() for u in uses)
                                                 or "no model reached it")
