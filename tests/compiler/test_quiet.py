"""The GPU lock between timing sections and every other worker's GPU work: real processes on
real lock files; the log of who held it when must never show a timing section beside anything."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from compilewatch.compiler.quiet import QuietLock, guard_benchmarks


def _hold(path: str, log: str, mode: str, seconds: float, wait_for: int,
          repeat: int = 1) -> None:
    """Hold the lock ``repeat`` times for ``seconds`` each, once ``wait_for`` shared sections
    have begun (so the order does not depend on how fast each process starts)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _began(log, "s") < wait_for:
        time.sleep(0.005)
    lock = QuietLock(path)
    for _ in range(repeat):
        section = lock.exclusive() if mode == "x" else lock.shared()
        with section:
            with open(log, "a") as f:
                f.write(f"{mode} in {time.monotonic()}\n")
            time.sleep(seconds)
            with open(log, "a") as f:
                f.write(f"{mode} out {time.monotonic()}\n")


def _began(log: str, mode: str) -> int:
    try:
        return sum(1 for line in Path(log).read_text().splitlines()
                   if line.startswith(f"{mode} in"))
    except FileNotFoundError:
        return 0


def _run(tmp_path: Path, plans: list[tuple[str, float, int, int]]) -> list[tuple[str, str]]:
    path, log = str(tmp_path / "gpu.lock"), str(tmp_path / "log")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hold, args=(path, log, mode, secs, wait_for, n))
             for mode, secs, wait_for, n in plans]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    return [(line.split()[0], line.split()[1]) for line in Path(log).read_text().splitlines()]


def _overlaps(events: list[tuple[str, str]]) -> list[str]:
    """Problems: a timing section (x) that began or ran while anything else held the lock."""
    inside: list[str] = []
    problems = []
    for mode, what in events:
        if what == "in":
            if "x" in inside or (mode == "x" and inside):
                problems.append(f"{mode} entered beside {inside}")
            inside.append(mode)
        else:
            inside.remove(mode)
    return problems


def test_a_timing_section_never_runs_beside_other_gpu_work(tmp_path: Path) -> None:
    """The second shared holder starts once the first is in: they share; the timing section
    asks once both are in, and a third asks after that: it waits for the timing section."""
    events = _run(tmp_path, [("s", 0.4, 0, 2), ("s", 0.4, 1, 2), ("x", 0.2, 2, 1),
                             ("s", 0.1, 2, 3)])
    assert _overlaps(events) == []
    assert sum(1 for m, w in events if m == "s" and w == "in") == 7
    inside, most = 0, 0
    for mode, what in events:
        if mode == "s":
            inside += 1 if what == "in" else -1
            most = max(most, inside)
    assert most >= 2  # shared sections do run side by side


def test_a_waiting_timing_section_is_not_starved(tmp_path: Path) -> None:
    """Two processes hold the lock shared in turns that overlap, so it is never free; the
    timing section still gets in, because new shared sections queue behind it."""
    events = _run(tmp_path, [("s", 0.15, 0, 12), ("s", 0.15, 1, 12), ("x", 0.05, 3, 1)])
    assert _overlaps(events) == []
    order = [m for m, w in events if w == "in"]
    assert order.index("x") < len(order) - 4  # it did not wait for the shared ones to end


def _free_for(lock: QuietLock, how: int) -> bool:
    """Whether another process (another open file) could take the lock ``how`` now."""
    import fcntl

    with open(lock.path, "a+") as f:
        try:
            fcntl.flock(f, how | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
        return True


def test_shared_is_reentrant_and_a_no_op_inside_the_own_timing_section(tmp_path: Path) -> None:
    import fcntl

    lock = QuietLock(str(tmp_path / "gpu.lock"))
    with lock.shared():
        with lock.shared():
            assert not _free_for(lock, fcntl.LOCK_EX)
        assert not _free_for(lock, fcntl.LOCK_EX)  # leaving the inner one keeps it held
    assert _free_for(lock, fcntl.LOCK_EX)
    with lock.exclusive():
        with lock.shared():  # e.g. an autotuning benchmark inside a timing section
            assert not _free_for(lock, fcntl.LOCK_SH)
        assert not _free_for(lock, fcntl.LOCK_SH)  # still exclusive, not turned shared
    assert _free_for(lock, fcntl.LOCK_SH)


def test_a_timing_section_knows_how_long_the_device_was_idle(tmp_path: Path) -> None:
    lock = QuietLock(str(tmp_path / "gpu.lock"))
    with lock.exclusive() as idle:
        assert idle is None  # the first one
    time.sleep(0.05)
    with QuietLock(lock.path).exclusive() as idle:
        assert idle is not None and 0.04 < idle < 5.0


@pytest.mark.skipif(not hasattr(__import__("torch._inductor.runtime.benchmarking",
                                           fromlist=["x"]), "set_gpu_benchmark_lock_context"),
                    reason="this torch has no Inductor benchmark lock hook (the wrapping path "
                           "is tested below)")
def test_inductor_benchmarks_take_the_lock_through_its_hook(tmp_path: Path) -> None:
    from torch._inductor.runtime import benchmarking

    lock = QuietLock(str(tmp_path / "gpu.lock"))
    previous = benchmarking.set_gpu_benchmark_lock_context(None)
    try:
        assert guard_benchmarks(lock) == "inductor hook"
        with benchmarking.maybe_gpu_benchmark_lock():
            assert lock._depth == 1
        assert lock._depth == 0
    finally:
        benchmarking.set_gpu_benchmark_lock_context(previous)


def test_without_the_hook_the_benchmarkers_gpu_methods_are_wrapped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torch._inductor.runtime import benchmarking

    class Bench:
        def __init__(self) -> None:
            self.depths: list[int] = []

        def benchmark_gpu(self, fn: object) -> float:
            self.depths.append(lock._depth)
            return 1.0

    lock = QuietLock(str(tmp_path / "gpu.lock"))
    bench = Bench()
    monkeypatch.delattr(benchmarking, "set_gpu_benchmark_lock_context", raising=False)
    monkeypatch.setattr(benchmarking, "benchmarker", bench)
    from torch._inductor import utils

    if hasattr(utils, "do_bench_using_profiling"):
        monkeypatch.setattr(utils, "do_bench_using_profiling", utils.do_bench_using_profiling)
    how = guard_benchmarks(lock)
    assert how.startswith("wrapped benchmark_gpu")
    assert bench.benchmark_gpu(lambda: None) == 1.0 and bench.depths == [1]
    assert lock._depth == 0


def test_time_waiting_for_a_quiet_gpu_is_its_own_phase(tmp_path: Path) -> None:
    """A build that waited 0.2 s for another process's timing section spent that in
    ``wait_gpu``, not in ``build`` (the harness's own cost would look larger than it is)."""
    from compilewatch.compiler.protocol import WorkerSpec
    from compilewatch.compiler.worker import Harness
    from compilewatch.core.schema import Config

    spec = WorkerSpec(suite="micro", model="m", config=Config(), phase="cold", large=False,
                      rounds=1, block_ms=1.0, out="", status_file=str(tmp_path / "status"))
    h = Harness(spec)
    h.quiet = QuietLock(str(tmp_path / "gpu.lock"))
    with h.phase("build"):
        time.sleep(0.25)
        h.quiet.waited_s += 0.2  # as ``shared`` records a wait
    assert h.seconds["wait_gpu"] == pytest.approx(0.2)
    assert h.seconds["build"] > 0.0  # what was left of it
    assert h.seconds["build"] + h.seconds["wait_gpu"] >= 0.25  # nothing lost
