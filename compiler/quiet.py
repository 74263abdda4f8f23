"""The device lock of a GPU run: one timing section at a time, and while one process times
steady state, no other worker of the run puts work on the GPU.

With compiles running beside GPU timing (``overlap``), the other workers' GPU work lands inside
the timed blocks: CUDA events measure elapsed GPU time, and the GPU time-slices between
processes. The worst of it is Inductor's autotuning in cold compiles, which runs each candidate
kernel back to back for tens of milliseconds (docs/verdict-quality.md, "The device lock").

So every worker's GPU sections take a shared lock, and a timing section takes it exclusively:
a reader-writer lock made of two ``flock`` files, with a turnstile so that a waiting timing
section is not starved (sections that want the lock shared queue behind it; those already in
finish first). The sections are short (a build, an eager call, an accuracy check, one autotuning
benchmark), so a timing section waits for milliseconds. The compile itself runs on; only its
benchmarks queue, reached through Inductor's own hook where torch has it
(``set_gpu_benchmark_lock_context``, torch 2.12 and later) and by wrapping the benchmarker's
GPU methods where it has not. The time a compile spends waiting is subtracted from its wall
time (``waited_s``). The lock file also holds when the last timing section ended, so one that
follows at once needs only a short warm-up (``exclusive`` yields the idle seconds).
"""

from __future__ import annotations

import contextlib
import fcntl
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

GPU_METHODS = ("benchmark_gpu", "benchmark_gpu_with_cuda_graph")


class QuietLock:
    """The run's GPU lock, seen from one worker process (``path`` and ``path + ".turn"``)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.waited_s = 0.0  # seconds this process spent waiting in ``shared``
        self._files: tuple[IO[str], IO[str]] | None = None
        self._depth = 0
        self._exclusive = False  # this process holds the timing section
        self._mutex = threading.Lock()

    def _open(self) -> tuple[IO[str], IO[str]]:
        if self._files is None:
            self._files = (open(self.path, "a+"), open(self.path + ".turn", "a+"))  # noqa: SIM115
        return self._files

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Any GPU work but a timing section; re-entrant, and shared between threads; inside
        this process's own timing section it is that section (a lock taken shared on the same
        file would turn the exclusive lock into a shared one)."""
        with self._mutex:
            self._depth += 1
            if self._depth == 1 and not self._exclusive:
                quiet, turn = self._open()
                t0 = time.perf_counter()
                fcntl.flock(turn, fcntl.LOCK_EX)  # behind a timing section that waits
                fcntl.flock(quiet, fcntl.LOCK_SH)
                fcntl.flock(turn, fcntl.LOCK_UN)
                self.waited_s += time.perf_counter() - t0
        try:
            yield
        finally:
            with self._mutex:
                self._depth -= 1
                if self._depth == 0 and not self._exclusive:
                    fcntl.flock(self._open()[0], fcntl.LOCK_UN)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[float | None]:
        """A timing section: one at a time, and no other worker's GPU section runs until it
        ends. Yields the seconds since the previous one ended (None: there was none)."""
        quiet, turn = self._open()
        assert self._depth == 0, "a timing section inside a shared GPU section"
        fcntl.flock(turn, fcntl.LOCK_EX)
        try:
            fcntl.flock(quiet, fcntl.LOCK_EX)
            self._exclusive = True
            try:
                yield _idle_since(quiet)
            finally:
                self._exclusive = False
                with contextlib.suppress(OSError):
                    quiet.seek(0)
                    quiet.truncate()
                    quiet.write(repr(time.time()))
                    quiet.flush()
                fcntl.flock(quiet, fcntl.LOCK_UN)
        finally:
            fcntl.flock(turn, fcntl.LOCK_UN)


def _idle_since(f: IO[str]) -> float | None:
    """Seconds since the previous timing section left (None: no previous one)."""
    try:
        f.seek(0)
        return max(0.0, time.time() - float(f.read().strip()))
    except (OSError, ValueError):
        return None


def guard_benchmarks(lock: QuietLock) -> str:
    """Make Inductor's GPU benchmarks (autotuning) take ``lock`` shared; says how."""
    from torch._inductor.runtime import benchmarking

    hook = getattr(benchmarking, "set_gpu_benchmark_lock_context", None)
    if hook is not None:
        hook(lock.shared)
        return "inductor hook"
    target = getattr(benchmarking, "benchmarker", None)
    wrapped = [name for name in GPU_METHODS if _wrap(target, name, lock)]
    with contextlib.suppress(ImportError):
        from torch._inductor import utils

        if _wrap(utils, "do_bench_using_profiling", lock):
            wrapped.append("do_bench_using_profiling")
    return "wrapped " + ", ".join(wrapped) if wrapped else "not guarded"


def _wrap(owner: Any, name: str, lock: QuietLock) -> bool:
    fn = getattr(owner, name, None)
    if owner is None or not callable(fn):
        return False

    def guarded(*args: Any, __fn: Callable[..., Any] = fn, **kwargs: Any) -> Any:
        with lock.shared():
            return __fn(*args, **kwargs)

    setattr(owner, name, guarded)
    return True
