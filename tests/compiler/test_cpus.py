"""The cores a timing process keeps to itself: its own and their SMT siblings, read from a
real (temporary) sysfs-shaped tree."""

from __future__ import annotations

import os
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
