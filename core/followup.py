"""The question the measuring loop asks the judge about a model (``bot/judge/followup.py``
answers it, ``compiler/pairing.py`` asks it), in a home both may import."""

from __future__ import annotations

from collections.abc import Callable

from compilewatch.core.schema import ModelResult

# (base's result so far, head's) -> why more processes (timing processes, or cold compiles)
# would settle it, or None
FollowUp = Callable[[ModelResult, ModelResult], str | None]
