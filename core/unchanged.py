"""Whether a model is the same code on both sides, by its cache keys: a rule the measuring loop
(``compiler/pairing.py``: whether to time base's eager model beside a changed one) and the
judge (``bot/judge/verdicts.py``: what a speedup is judged over) share. The rules that skip a
model unchanged by construction read worker outputs and live beside the loop
(``compiler/unchanged.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from compilewatch.core.schema import CacheKey


def same_model(base: Sequence[CacheKey], head: Sequence[CacheKey]) -> bool:
    """The model itself is the same on both sides: the graph and inputs (the ``gm`` and
    ``example_inputs`` components) of every cold FX key are equal. A change is then on the
    compiler's side, and eager, untouched by it, witnesses the host's speed. False where a side
    recorded no components (nothing to tell by)."""
    def parts(keys: Sequence[CacheKey]) -> list[dict[str, str]]:
        return [{k: v for k, v in key.components.items()
                 if k == "gm" or k.startswith("example_inputs")}
                for key in keys if key.phase == "cold"]

    pb, ph = parts(base), parts(head)
    return bool(pb) and pb == ph and all(pb)
