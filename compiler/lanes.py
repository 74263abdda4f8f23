"""The measuring loop's lanes: which queued process starts next, and on which cores.

Two lanes: compile-only processes run in a pool of ``compile_slots``; timing processes run one
at a time (the device lock). With ``overlap`` (a GPU run) the lanes run at once: the GPU times
one model while the spare cores compile the next, timing processes start ahead (up to
``timing_ahead``) and wait for the device lock themselves. Without it (a CPU run, where timing
is on the CPU itself) nothing runs beside a timing process, and a task waits for the ones
before it.

With several GPUs (``gpus``, a GPU run) each GPU is a timing lane of its own, with its own
device lock, its own ``timing_ahead`` and its own timing cores. A model is given one GPU when
its first timing process starts, and every timing process of it, both sides', runs there: a
verdict never compares two GPUs. In a run of two sides that GPU is the one with the least
timing work queued or running; in a run of one side (``run``, ``nightly``) it is fixed by the
model's name (``fixed``), so two such runs on one host time a model on the same GPU and their
comparison pairs it. A compile-only process runs on its model's GPU once it has one, else on
the GPU running the fewest, and binds the model to nothing.

The lanes know tasks, their priorities and their lane, never what a task measures: the rooms
that queue them (``compiler/job.py``, ``compiler/pairing.py``) give each its priority.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

from compilewatch.compiler import cpus
from compilewatch.compiler.plan import Job

# process kinds: a compile-only process, or a timing one (runs in the device lane); a profile
# process runs in the device lane too (``compiler/kernels.py``)
Kind = Literal["scan", "cold", "timing", "warm_start", "remote", "profile"]
Ident = tuple[str, str, str]

R = TypeVar("R")
# each running task, and its compile group
Running = dict[Future[R], tuple["Task", tuple[int, ...]]]


def ident(job: Job) -> Ident:
    return job.suite.name, job.spec.name, job.config.slug


@dataclass(order=True)
class Task:
    """One process to run: ordered by ``priority`` within its lane."""

    priority: tuple[int, ...]
    side: str = field(compare=False)
    job: Job = field(compare=False)
    kind: Kind = field(compare=False)
    index: int = field(compare=False)
    timing: bool = field(compare=False, default=False)  # in the timing lane (the device lock)
    # which end of the free compile groups it takes (``cpus.CoreGroups.take``)
    first_group: bool = field(compare=False, default=True)
    gpu: int | None = field(compare=False, default=None)  # its GPU lane, once it starts


class GpuLanes:
    """Which GPU each model times on (see the module docstring); empty ``gpus``: the one
    device, no lane chosen. ``fixed``: a model's GPU follows from its name alone."""

    def __init__(self, gpus: tuple[int, ...] = (), fixed: bool = False) -> None:
        self.gpus = gpus
        self.fixed = fixed
        self.of: dict[Ident, int] = {}
        self.timing = {g: 0 for g in gpus}  # timing processes running on each
        self.others = {g: 0 for g in gpus}  # compile-only processes running on each

    def queued_on(self, gpu: int, queue: list[Task]) -> int:
        return sum(1 for t in queue if self.of.get(ident(t.job)) == gpu)

    def for_timing(self, task: Task, queue: list[Task], ahead: int) -> int | None:
        """The GPU ``task`` would time on now, or None where that GPU's lane is full (with no
        GPUs: -1, the one device, whose lane ``Lanes`` counts)."""
        if not self.gpus:
            return -1
        key = ident(task.job)
        if key not in self.of and self.fixed:  # rendezvous: a GPU left out moves only its own
            name = "/".join(key)
            self.of[key] = max(self.gpus, key=lambda g: hashlib.blake2b(
                f"{name}@{g}".encode(), digest_size=8).digest())
        if key in self.of:
            gpu = self.of[key]
            return gpu if self.timing[gpu] < ahead else None
        free = [g for g in self.gpus if self.timing[g] < ahead]
        if not free:
            return None
        return min(free, key=lambda g: (self.timing[g] + self.queued_on(g, queue),
                                        self.gpus.index(g)))

    def start(self, task: Task, gpu: int) -> None:
        if gpu < 0:
            return
        if task.timing:  # a model's GPU is where it times, not where it compiled first
            self.of.setdefault(ident(task.job), gpu)
        task.gpu = gpu
        (self.timing if task.timing else self.others)[gpu] += 1

    def for_compile(self, task: Task) -> int:
        """A compile-only process's GPU: its model's, else the one running the fewest."""
        if not self.gpus:
            return -1
        return self.of.get(ident(task.job), min(
            self.gpus, key=lambda g: (self.others[g] + self.timing[g], self.gpus.index(g))))

    def end(self, task: Task) -> None:
        if task.gpu is not None:
            (self.timing if task.timing else self.others)[task.gpu] -= 1


class Lanes:
    """The two queues, what runs in each, and the compile slots' cores."""

    def __init__(self, *, compile_slots: int, overlap: bool, timing_ahead: int,
                 groups: cpus.CoreGroups | None = None, gpus: tuple[int, ...] = (),
                 fixed_gpus: bool = False) -> None:
        self.compile_slots = compile_slots
        self.overlap = overlap
        self.timing_ahead = timing_ahead
        # one timing lane per GPU where a GPU run has several (``timing_ahead`` each)
        self.gpu_lanes = GpuLanes(gpus if overlap else (), fixed_gpus)
        # with overlap: each compile slot's cores, and the rest for timing processes' preparation
        self.groups = groups
        self.compile_queue: list[Task] = []
        self.timing_queue: list[Task] = []
        self.running_compiles = 0
        self.running_timing = 0

    def push(self, task: Task) -> None:
        heapq.heappush(self.timing_queue if task.timing else self.compile_queue, task)

    def drop(self, which: Callable[[Task], bool]) -> int:
        """Remove the queued tasks ``which`` picks; how many."""
        n = 0
        for queue in (self.compile_queue, self.timing_queue):
            dropped = [t for t in queue if which(t)]
            for t in dropped:
                queue.remove(t)
            n += len(dropped)
            heapq.heapify(queue)
        return n

    @staticmethod
    def device_lock(root: Path, overlap: bool, gpu: int | None = None) -> str | None:
        """The lock file timing processes take the device with, where lanes overlap: one per
        GPU lane."""
        if not overlap:
            return None
        return str(root / ("device.lock" if gpu is None else f"device-{gpu}.lock"))

    def compile_cpus(self, pin_cpus: tuple[int, ...], cores: tuple[int, ...] = ()
                     ) -> tuple[int, ...]:
        """Where a process prepares or compiles: off a pinned timing process's cores and their
        SMT siblings, where lanes overlap; with core groups, its slot's group (``cores``) or
        the rest (a timing process)."""
        if not (self.overlap and pin_cpus):
            return ()
        if self.groups is not None:
            return cores if cores else self.groups.rest
        return cpus.others(pin_cpus)

    def timing_cpus(self, pin_cpus: tuple[int, ...], gpu: int | None) -> tuple[int, ...]:
        """Where a timing process on GPU lane ``gpu`` times: its lane's share of the pinned
        cores (``cpus.per_lane``), all of them with one lane."""
        gpus = self.gpu_lanes.gpus
        if gpu is None or gpu not in gpus:
            return pin_cpus
        return cpus.per_lane(pin_cpus, len(gpus))[gpus.index(gpu)]

    def _can_start(self, timing: bool) -> bool:
        if self.overlap:
            if timing:
                return self.running_timing < self.timing_ahead * max(1, len(
                    self.gpu_lanes.gpus))
            return self.running_compiles < self.compile_slots
        if self.running_timing:
            return False
        if timing:
            return self.running_compiles == 0
        return self.running_compiles < self.compile_slots

    def next(self) -> Task | None:
        """The next task to start, or None. Without overlap, a task waits for the ones
        before it, and nothing starts beside a timing process."""
        head = min(self.compile_queue + self.timing_queue, default=None,
                   key=lambda t: t.priority)
        if head is None:
            return None
        if not self.overlap:
            if not self._can_start(head.timing):
                return None
            queue = self.timing_queue if head.timing else self.compile_queue
            queue.remove(head)
            heapq.heapify(queue)
            return head
        if self.timing_queue and self._can_start(True):
            # the first in priority whose GPU lane has room (one lane: the first)
            for task in sorted(self.timing_queue):
                gpu = self.gpu_lanes.for_timing(task, self.timing_queue, self.timing_ahead)
                if gpu is not None:
                    self.timing_queue.remove(task)
                    heapq.heapify(self.timing_queue)
                    self.gpu_lanes.start(task, gpu)
                    return task
        if self.compile_queue and self._can_start(False):
            task = heapq.heappop(self.compile_queue)
            self.gpu_lanes.start(task, self.gpu_lanes.for_compile(task))
            return task
        return None

    def _started(self, task: Task) -> tuple[int, ...]:
        """Count ``task`` as running; the compile group it runs on (none: every core)."""
        if task.timing:
            self.running_timing += 1
            return ()
        self.running_compiles += 1
        if self.groups is not None:  # never more compiles than slots
            return self.groups.take(task.first_group)
        return ()

    def _ended(self, task: Task, cores: tuple[int, ...]) -> None:
        self.gpu_lanes.end(task)
        if task.timing:
            self.running_timing -= 1
        else:
            self.running_compiles -= 1
        if cores and self.groups is not None:
            self.groups.give(cores)

    def drive(self, start: Callable[[Task, tuple[int, ...]], R], record: Callable[[R], None],
              abort: Callable[[], None]) -> None:
        """Run queued tasks until none is left: ``start(task, cores)`` on a thread of its own,
        ``record`` with what it returned, on this thread (it may queue more). Stopped (Ctrl-C,
        SIGTERM, a bug), ``abort`` kills the workers, or the pool would wait for them to finish
        on their own, for as long as a hung model hangs."""
        running: Running[R] = {}
        slots = max(1, self.compile_slots) + max(1, self.timing_ahead) * max(
            1, len(self.gpu_lanes.gpus))
        with ThreadPoolExecutor(max_workers=slots, thread_name_prefix="measure") as pool:
            try:
                while self.compile_queue or self.timing_queue or running:
                    while (task := self.next()) is not None:
                        cores = self._started(task)
                        running[pool.submit(start, task, cores)] = (task, cores)
                    if not running:
                        break
                    self._collect(running, record)
            except BaseException:
                abort()
                for fut in running:
                    fut.cancel()
                raise

    def _collect(self, running: Running[R], record: Callable[[R], None]) -> None:
        """Wait for a running task to end; record each that has."""
        done, _ = wait(list(running), return_when=FIRST_COMPLETED)
        for fut in done:
            self._ended(*running.pop(fut))
            record(fut.result())
