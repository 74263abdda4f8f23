"""The search over candidates: how many steps it takes, how it moves off skipped ones, and what
the calls prove when some could not be measured."""

from __future__ import annotations

import pytest

from compilewatch.bot.bisect.search import Search
from compilewatch.bot.judge.bisect_metrics import Call


def run(n: int, first_bad: int, skipped: frozenset[int] = frozenset()) -> tuple[Search, int]:
    """The search with both ends known, each candidate called by where it lies."""
    s = Search(n, {0: Call.GOOD, n - 1: Call.BAD})
    steps = 0
    while (i := s.next()) is not None:
        steps += 1
        s.record(i, Call.SKIP if i in skipped else Call.BAD if i >= first_bad else Call.GOOD)
    return s, steps


@pytest.mark.parametrize("first_bad", range(1, 65))
def test_among_64_commits_after_the_good_end_six_steps_find_any_first_bad(first_bad):
    """65 candidates: the good end and 64 commits. With the ends' step, at most 7 steps."""
    s, steps = run(65, first_bad)
    assert s.found and s.first_bad == first_bad and s.last_good == first_bad - 1
    assert steps <= 6
    assert Search(65, {0: Call.GOOD, 64: Call.BAD}).worst_case() == 6


def test_a_skipped_middle_moves_to_its_neighbour_and_still_finds_the_commit():
    s, steps = run(30, 6, skipped=frozenset({8, 9}))
    assert steps <= 7  # one more than without the skip
    assert s.found and s.first_bad == 6
    assert s.calls[8] is Call.SKIP  # the middle was tried, then its neighbour
    assert 9 not in s.calls or s.calls[9] is Call.SKIP


def test_skipped_commits_next_to_the_first_bad_leave_a_range():
    s, _ = run(20, 10, skipped=frozenset({8, 9}))
    assert not s.found
    assert s.suspects() == [8, 9, 10] and s.first_bad == 10 and s.last_good == 7


def test_unsettled_calls_are_not_measured_again_and_end_in_a_range():
    s = Search(4, {0: Call.GOOD, 3: Call.BAD})
    s.record(1, Call.GOOD)
    s.record(2, Call.UNSETTLED)
    assert s.next() is None and s.suspects() == [2, 3]


def test_nothing_between_the_ends_means_the_bad_end_is_the_first_bad():
    s = Search(2, {0: Call.GOOD, 1: Call.BAD})
    assert s.next() is None and s.found and s.first_bad == 1


def test_a_search_needs_two_candidates_and_calls_among_them():
    with pytest.raises(ValueError):
        Search(1)
    with pytest.raises(ValueError):
        Search(3).record(3, Call.GOOD)
