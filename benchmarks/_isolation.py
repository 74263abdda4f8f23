"""Do fork and spawn measure the same thing? From two runs' results files (the same scenario,
one per isolation): per model-side, the FX/AOT cache keys with their hit/miss state per phase,
frames and graphs must be equal, and the cold and warm compile medians close. Printed by
``pr_wall.py`` when it runs both isolations; numbers in docs/performance.md."""

from __future__ import annotations

import json
import math
import statistics


def _cache(result: dict) -> list[tuple[str, str | None, str, str | None]]:
    cache = result.get("cache") or {}
    return sorted((kind, e.get("phase"), e["key"], e.get("state"))
                  for kind in ("fx", "aot") for e in cache.get(kind) or [])


def _shape(result: dict) -> tuple:
    c = result.get("compile") or {}
    return (result.get("status"), c.get("frames"), c.get("graphs"), _cache(result))


def agreement(fork: list[dict], spawn: list[dict]) -> str:
    """A line per difference and a summary line: model-sides with equal keys, states, frames
    and graphs, and spawn/fork of the cold and warm compile medians (geometric mean and range)
    over the model-sides both measured."""
    def index(sides: list[dict]) -> dict[tuple[str, str, str], dict]:
        return {(data["settings"].get("side") or "?", r["model"],
                 json.dumps(r.get("config"), sort_keys=True)): r
                for data in sides for r in data["results"]}

    a, b = index(fork), index(spawn)
    both = sorted(set(a) & set(b))
    lines, same = [], 0
    ratios: dict[str, list[float]] = {"cold_s": [], "warm_s": []}
    for key in both:
        fa, sb = _shape(a[key]), _shape(b[key])
        if fa == sb:
            same += 1
        else:
            lines.append(f"differs: {key[0]} {key[1]}: fork {fa[:3]}, spawn {sb[:3]}")
        for metric, got in ratios.items():
            x, y = ((a[key].get("compile") or {}).get(metric),
                    (b[key].get("compile") or {}).get(metric))
            if x and y:
                got.append(y / x)
    summary = [f"fork vs spawn: {same} of {len(both)} model-sides with equal cache keys, "
               f"hit/miss states, frames and graphs"
               + (f" ({len(a) - len(both)} fork-only, {len(b) - len(both)} spawn-only)"
                  if len(a) != len(both) or len(b) != len(both) else "")]
    for metric, got in ratios.items():
        if got:
            geo = math.exp(statistics.fmean(math.log(r) for r in got))
            summary.append(f"{metric} spawn/fork: geometric mean {geo:.3f} "
                           f"[{min(got):.2f}, {max(got):.2f}] over {len(got)}")
    return "\n".join(lines + summary)
