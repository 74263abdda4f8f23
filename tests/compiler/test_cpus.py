"""The cores a timing process keeps to itself: its own and their SMT siblings, read from a
real (temporary) sysfs-shaped tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compilewatch.compiler import cpus


def _topology(tmp_path: Path, siblings: dict[int, str]) -> Path:
    for cpu, text in siblings.items():
        d = tmp_path / f"cpu{cpu}" / "topology"
        d.mkdir(parents=True)
        (d / "thread_siblings_list").write_text(text + "\n")
    return tmp_path


@pytest.mark.parametrize(("text", "want"), [("3", {3}), ("3,11", {3, 11}), ("0-3,8", {0, 1, 2,
                                                                                      3, 8})])
def test_cpu_lists(text: str, want: set[int]) -> None:
    assert cpus.parse_list(text) == want


def test_a_timing_core_keeps_its_hyperthread_sibling(tmp_path: Path) -> None:
    topo = _topology(tmp_path, {15: "7,15", 3: "3"})
    assert cpus.reserved([15], topo) == {7, 15}
    assert cpus.reserved([3], topo) == {3}
    assert cpus.reserved([99], topo) == {99}  # no topology: the core alone


def test_compiles_get_the_rest_and_never_nothing(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cpus, "available", lambda: {0, 1, 2, 3})
    topo = _topology(tmp_path, {3: "1,3"})
    assert cpus.others([3], topo) == (0, 2)
    monkeypatch.setattr(cpus, "available", lambda: {1, 3})
    assert cpus.others([3], topo) == (1, 3)  # nothing left: all of them


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two cores and sched_setaffinity")
def test_the_parent_stays_off_the_timing_core_while_measuring() -> None:
    before = os.sched_getaffinity(0)
    last = max(before)
    with cpus.away([last]):
        assert last not in os.sched_getaffinity(0)
    assert os.sched_getaffinity(0) == before


_THREADS = """
import json, os, sys, threading
from compilewatch.compiler import cpus
go = threading.Event()
started = threading.Thread(target=go.wait)
started.start()
core = min(os.sched_getaffinity(0))
if sys.argv[1] == "all":
    cpus.pin_all([core])
else:
    os.sched_setaffinity(0, [core])
seen = {"main": sorted(os.sched_getaffinity(0)),
        "thread": sorted(os.sched_getaffinity(started.native_id)), "core": core}
go.set()
print(json.dumps(seen))
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two cores and sched_setaffinity")
@pytest.mark.parametrize("how", ["all", "calling thread"])
def test_a_timing_process_moves_every_thread_it_started_not_only_its_main_one(how: str) -> None:
    """A thread started before the move (torch's pools, the driver's) goes with ``pin_all``;
    the plain call leaves it on the cores it had, which is what the helper exists for."""
    seen = json.loads(subprocess.run([sys.executable, "-c", _THREADS, how.split()[0]],
                                     capture_output=True, text=True, check=True).stdout)
    assert seen["main"] == [seen["core"]]
    if how == "all":
        assert seen["thread"] == [seen["core"]]
    else:
        assert seen["thread"] == sorted(os.sched_getaffinity(0))


def test_compile_slots_get_equal_groups_of_whole_cores_and_the_rest_is_never_smaller(
        tmp_path: Path) -> None:
    """Eight threads on four cores (i and i+4 siblings), the timing core 7 and its sibling 3
    kept out: three whole cores left. Two slots get one core each (both threads), never half
    a core, and the rest gets as much as a slot."""
    topo = _topology(tmp_path, {i: f"{i % 4},{i % 4 + 4}" for i in range(8)})
    groups = cpus.CoreGroups.of([0, 1, 2, 4, 5, 6], 2, topo)
    assert groups is not None
    assert groups.groups == [(0, 4), (1, 5)] and groups.rest == (2, 6)


@pytest.mark.parametrize(("cores", "slots", "size", "rest"), [
    (15, 4, 3, 3),   # the H200 runner: 16 cores, one for timing
    (16, 4, 3, 4),
    (31, 8, 3, 7),
    (9, 2, 3, 3),
    (5, 4, 1, 1),
])
def test_groups_are_equal_disjoint_and_leave_a_rest(tmp_path: Path, cores: int, slots: int,
                                                    size: int, rest: int) -> None:
    groups = cpus.CoreGroups.of(range(cores), slots, tmp_path)  # no topology: a core alone
    assert groups is not None
    assert [len(g) for g in groups.groups] == [size] * slots and len(groups.rest) == rest
    every = [c for g in groups.groups for c in g] + list(groups.rest)
    assert sorted(every) == list(range(cores))  # disjoint, and nothing left out


@pytest.mark.parametrize(("cores", "slots"), [(1, 1), (3, 4), (4, 4), (7, 0)])
def test_too_few_cores_for_a_group_each_means_no_groups(tmp_path: Path, cores: int,
                                                        slots: int) -> None:
    assert cpus.CoreGroups.of(range(cores), slots, tmp_path) is None


def test_a_group_is_taken_by_one_compile_at_a_time_and_given_back(tmp_path: Path) -> None:
    groups = cpus.CoreGroups.of(range(6), 2, tmp_path)
    assert groups is not None
    a, b = groups.take(), groups.take()
    assert a != b and not groups.free
    groups.give(a)
    groups.give(a)  # twice: still once
    groups.give((99,))  # not one of them: ignored
    assert groups.free == [a]


def test_a_compile_takes_the_first_or_the_last_free_group_in_the_groups_order(
        tmp_path: Path) -> None:
    """Not the longest free: groups given back in the order a pair took them would be taken
    in that order again by the next pair, one side keeping one group."""
    groups = cpus.CoreGroups.of(range(15), 4, tmp_path)
    assert groups is not None
    g = groups.groups
    assert groups.take() == g[0] and groups.take(first=False) == g[3]
    groups.give(g[3])
    groups.give(g[0])  # given back last-first: still taken in the groups' own order
    assert groups.take() == g[0] and groups.take() == g[1]
    assert groups.take(first=False) == g[3] and groups.take() == g[2] and not groups.free


def test_each_timing_lane_gets_a_physical_core_of_its_own(tmp_path: Path) -> None:
    """Eight threads on four cores (thread i beside i + 4): two lanes time on the last two
    cores, one thread each, never two threads of one core; one lane on the last core."""
    topo = _topology(tmp_path, {i: f"{i % 4},{i % 4 + 4}" for i in range(8)})
    assert cpus.timing_cores(range(8), 2, topo) == (6, 7)
    assert cpus.timing_cores(range(8), 1, topo) == (7,)
    assert cpus.timing_cores(range(8), 9, topo) == (4, 5, 6, 7)  # no more than the cores
    assert cpus.timing_cores(range(8), 0, topo) == ()


@pytest.mark.parametrize(("pinned", "lanes", "want"), [
    ((14, 15), 2, [(14,), (15,)]),
    ((12, 13, 14, 15), 2, [(12, 13), (14, 15)]),
    ((13, 14, 15), 2, [(13, 14), (15,)]),  # the first lane takes the odd one
    ((10, 11, 12, 13, 14), 3, [(10, 11), (12, 13), (14,)]),
    ((15,), 2, [(15,), (15,)]),  # fewer cores than lanes: shared (the loop says so)
    ((15,), 1, [(15,)]),
    ((), 3, [(), (), ()]),
])
def test_the_pinned_cores_are_cut_into_one_share_per_lane(
        pinned: tuple[int, ...], lanes: int, want: list[tuple[int, ...]]) -> None:
    assert cpus.per_lane(pinned, lanes) == want
