"""Which cores a GPU timing process has to itself (its pinned cores and their SMT siblings), and
which cores each compile beside it runs on.

A launch-bound model's time is its host's, and compiles beside a timing process slowed it
(docs/verdict-quality.md, "Timing cores away from compiles"). A core's hyperthread sibling
shares its execution units, so compiles are kept off the siblings too, and so is the measuring
parent itself with its fork server (``away``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

TOPOLOGY = Path("/sys/devices/system/cpu")


def parse_list(text: str) -> set[int]:
    """A kernel cpu list: ``"3,11"`` or ``"0-3,8"``."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def siblings(cpu: int, topology: Path = TOPOLOGY) -> set[int]:
    """``cpu`` and the hardware threads sharing its core (just ``cpu`` when unknown)."""
    try:
        text = (topology / f"cpu{cpu}" / "topology" / "thread_siblings_list").read_text()
        return parse_list(text) | {cpu}
    except (OSError, ValueError):
        return {cpu}


def reserved(pinned: Iterable[int], topology: Path = TOPOLOGY) -> set[int]:
    """The cores nothing else may use while a timing process runs on ``pinned``."""
    out: set[int] = set()
    for cpu in pinned:
        out |= siblings(cpu, topology)
    return out


def available() -> set[int]:
    """The cores this process may run on."""
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:
        return set(range(os.cpu_count() or 1))


def pin_all(pinned: Iterable[int]) -> None:
    """Move every thread of this process to ``pinned``. ``sched_setaffinity(0, ...)`` moves
    only the calling thread: the threads a timing process started while it built and compiled
    on the compile cores (torch's pools, the CUDA driver's) would stay there, beside the
    compiles, and a launch-bound model's time waits on them."""
    pinned = tuple(pinned)
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(tid, pinned)


def left(pinned: Iterable[int], topology: Path = TOPOLOGY) -> set[int]:
    """The cores this process may use that the timing cores ``pinned`` do not reserve."""
    return available() - reserved(pinned, topology)


def others(pinned: Iterable[int], topology: Path = TOPOLOGY) -> tuple[int, ...]:
    """The cores left for compiles (all of them when nothing would be left: ``left`` empty,
    which the loop says)."""
    return tuple(sorted(left(pinned, topology) or available()))


@contextlib.contextmanager
def away(pinned: Iterable[int], to: Iterable[int] = ()) -> Iterator[None]:
    """Keep this process (and what it starts: the fork server, listing children) off the
    timing cores while measuring, on ``to`` where given (the cores no compile slot holds);
    its own affinity is put back after."""
    pinned = tuple(pinned)
    before = available()
    if not pinned:
        yield
        return
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, tuple(to) or others(pinned))
    try:
        yield
    finally:
        with contextlib.suppress(AttributeError, OSError):
            os.sched_setaffinity(0, before)


@dataclass
class CoreGroups:
    """The compile cores cut into ``slots`` equal groups of whole physical cores, one per
    compile slot, and the rest, shared by the timing processes' preparation (build, warm
    compile), the measuring parent and its fork server.

    Why: a cold compile's wall time is what a compile-time verdict judges, and with four
    compiles at once, each starting Inductor's compile workers for every core, they took each
    other's cores and widened the cold-compile bands (docs/verdict-quality.md, "Compile slots
    on cores of their own"). On a group of its own a compile's time no
    longer depends on what runs beside it. Groups are equal so that the two cold compiles of a
    pair, run side by side, have the same cores."""

    groups: list[tuple[int, ...]]
    rest: tuple[int, ...]
    free: list[tuple[int, ...]] = field(init=False)  # the groups no compile holds now

    def __post_init__(self) -> None:
        self.free = list(self.groups)

    @classmethod
    def of(cls, cores: Iterable[int], slots: int, topology: Path = TOPOLOGY) -> CoreGroups | None:
        """``slots`` groups of ``len(units) // (slots + 1)`` physical cores (the rest is never
        smaller than a group); None where that leaves a group no core."""
        units = physical(cores, topology)
        size = len(units) // (slots + 1) if slots > 0 else 0
        if size < 1:
            return None
        groups = [tuple(sorted(c for u in units[i * size:(i + 1) * size] for c in u))
                  for i in range(slots)]
        rest = tuple(sorted(c for u in units[slots * size:] for c in u))
        return cls(groups, rest)

    def take(self, first: bool = True) -> tuple[int, ...]:
        """A free group for a compile that starts (the loop never runs more than ``slots``):
        the first free one in the groups' own order, or with ``first`` false the last. Not
        the longest free: a pair that ends together gives its groups back in the order it
        took them, so the next pair took them in that order again and one side kept one
        group over a model's pairs (the loop alternates ``first`` by side and pair)."""
        free = sorted(self.free, key=self.groups.index)
        group = free[0] if first else free[-1]
        self.free.remove(group)
        return group

    def give(self, group: tuple[int, ...]) -> None:
        if group in self.groups and group not in self.free:
            self.free.append(group)


def physical(cores: Iterable[int], topology: Path = TOPOLOGY) -> list[tuple[int, ...]]:
    """``cores`` as physical cores: each a sorted tuple of its hardware threads among them."""
    cores = set(cores)
    seen: set[int] = set()
    units: list[tuple[int, ...]] = []
    for cpu in sorted(cores):
        if cpu in seen:
            continue
        unit = tuple(sorted(siblings(cpu, topology) & cores))
        seen.update(unit)
        units.append(unit)
    return units


def timing_cores(cores: Iterable[int], n: int, topology: Path = TOPOLOGY) -> tuple[int, ...]:
    """One core for each of ``n`` timing lanes: a hardware thread of each of the last ``n``
    physical cores (the last core alone where there is one lane, as ever), so no two lanes'
    timing processes share a core's execution units. Fewer where the machine has fewer
    physical cores."""
    units = physical(cores, topology)
    return tuple(sorted(unit[-1] for unit in units[-n:])) if n > 0 else ()


def per_lane(pinned: Sequence[int], lanes: int) -> list[tuple[int, ...]]:
    """``pinned`` cut into one share for each timing lane, in order, the first lanes a core more
    where they do not divide evenly (a core left out would be kept from compiles and time
    nothing; a model's processes of both sides time in one lane, so lanes of unequal size
    never meet in one comparison); every lane gets all of them where there are fewer cores
    than lanes (the caller says so)."""
    pinned = tuple(pinned)
    if lanes <= 1 or len(pinned) < lanes:
        return [pinned] * max(lanes, 1)
    size, more = divmod(len(pinned), lanes)
    out, at = [], 0
    for i in range(lanes):
        n = size + (i < more)
        out.append(pinned[at:at + n])
        at += n
    return out
