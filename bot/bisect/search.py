"""The search itself: which candidate to measure next, and what the calls so far prove.

Candidates are indices ``0..n-1`` in history order, 0 the good end and ``n-1`` the bad end,
both known once the ends are measured. Every call narrows ``(last good, first bad]``; the next
candidate is the middle of what is left, or, where the middle was skipped (it does not build
or run) or stayed unsettled, the untested one nearest to it, alternately above and below, as
``git bisect skip`` moves off a skipped commit. When nothing testable is left between the last
good and the first bad, the first bad is found (nothing skipped between) or is one of the
skipped candidates and the first bad after them (a range). Pure: no measuring, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from compilewatch.bot.judge.bisect_metrics import Call


@dataclass
class Search:
    """The calls made so far over ``n`` candidates."""

    n: int
    calls: dict[int, Call] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.n < 2:
            raise ValueError("a bisection needs two ends")

    def record(self, index: int, call: Call) -> None:
        if not 0 <= index < self.n:
            raise ValueError(f"candidate {index} is not among 0..{self.n - 1}")
        self.calls[index] = call

    @property
    def last_good(self) -> int:
        """The newest candidate called good below the first bad (0 before any call)."""
        bad = self.first_bad
        goods = [i for i, c in self.calls.items() if c is Call.GOOD and i < bad]
        return max(goods, default=0)

    @property
    def first_bad(self) -> int:
        """The oldest candidate called bad (the bad end before any call)."""
        return min((i for i, c in self.calls.items() if c is Call.BAD), default=self.n - 1)

    def untested(self) -> list[int]:
        """Candidates strictly between the last good and the first bad that no call has
        decided (skipped and unsettled ones are decided: measured, and not to be again)."""
        lo, hi = self.last_good, self.first_bad
        return [i for i in range(lo + 1, hi) if i not in self.calls]

    def next(self) -> int | None:
        """The candidate to measure next; None when the search is over."""
        left = self.untested()
        if not left:
            return None
        lo, hi = self.last_good, self.first_bad
        middle = (lo + hi) / 2
        return min(left, key=lambda i: (abs(i - middle), -i if i > middle else i))

    def suspects(self) -> list[int]:
        """Where the first bad is: one candidate once found, else the skipped (or
        unsettled) ones after the last good, and the first bad."""
        return list(range(self.last_good + 1, self.first_bad + 1))

    @property
    def found(self) -> bool:
        return len(self.suspects()) == 1

    def worst_case(self) -> int:
        """Measuring steps at most still needed with no skip: ceil(log2(untested + 1))."""
        return (len(self.untested())).bit_length()
