"""Processes as Linux shows them in /proc: a process tree's CPU time, and finding and killing
whatever a worker left behind.

A worker's compile spreads over processes (Inductor's compile workers, the C++ compiler,
ptxas), so its CPU time is summed over its live descendants plus what it reaped. A model can
also start processes that leave the worker's process group and session (``setsid``): those are
found by the marker every worker's environment carries (``COMPILEWATCH_JOB``), which children
inherit, and by parent id when they were re-parented to us (we are a child subreaper).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import threading
from collections.abc import Iterator
from contextlib import suppress

MARKER = "COMPILEWATCH_JOB"
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PREFIX = f"{MARKER}=".encode()
_ENV_BYTES = 1 << 20  # of another process's environment, enough for any of ours
_ENV_BUF = bytearray(_ENV_BYTES)
_ENV_VIEW = memoryview(_ENV_BUF)
_ZEROS = bytes(_ENV_BYTES)
_ENV_LOCK = threading.Lock()


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent(expected_parent: int | None = None) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies; if the parent is already
    gone (we were re-parented before asking), exit now."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(137)


def set_dumpable(dumpable: bool) -> bool:
    """Whether another process of our user may open this one's ``/proc/<pid>/fd``, ``mem``
    and ``environ``, or ptrace it (root may still). Linux only: elsewhere a no-op that
    returns False (there is no ``/proc/<pid>/fd`` to open there)."""
    return _prctl(_PR_SET_DUMPABLE, int(dumpable))


def become_subreaper() -> bool:
    """Orphans among our descendants (a worker's ``setsid`` grandchild) become our children, not
    init's, so the run can still find and kill them."""
    return _prctl(_PR_SET_CHILD_SUBREAPER, 1)


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    # the command name is in parentheses and may hold spaces: split after its last ')'
    return text[text.rfind(")") + 2:].split()


def _pids() -> Iterator[int]:
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if name.isdigit():
            yield int(name)


def parent_of(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[1]) if fields else None


def start_time(pid: int) -> int | None:
    """Clock ticks after boot when ``pid`` started: with the pid, identifies one process."""
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid in _pids():
        ppid = parent_of(pid)
        if ppid is not None:
            children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def tree_cpu_seconds() -> float:
    """CPU seconds of this process, the children it reaped, and its live descendants."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = me.ru_utime + me.ru_stime + reaped.ru_utime + reaped.ru_stime
    for pid in descendants(os.getpid()):
        fields = _stat(pid)
        if fields:
            total += (int(fields[11]) + int(fields[12])) / _TICK
    return total


def owner_token(pid: int | None = None) -> str:
    """``pid.start``: names one process for as long as it lives (a pid is reused, a pid with
    its start time is not). Every marker starts with its owner's token."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}.{start_time(pid)}"


def _owner_alive(token: str) -> bool:
    pid, _, started = token.partition(".")
    if not pid.isdigit() or not started.isdigit():
        return False
    return str(start_time(int(pid))) == started


def _marker_of(pid: int) -> str | None:
    """The marker in ``pid``'s environment. Read into one buffer that is wiped after each
    read: another process's environment (a CI runner's token) leaves no copy in our memory,
    which a worker could read (docs/security.md)."""
    try:
        fd = os.open(f"/proc/{pid}/environ", os.O_RDONLY)
    except OSError:
        return None
    with _ENV_LOCK:
        n = 0
        try:
            while n < len(_ENV_BUF):
                got = os.readv(fd, [_ENV_VIEW[n:]])
                if got <= 0:
                    break
                n += got
        except OSError:
            pass
        finally:
            os.close(fd)
        try:
            at = _ENV_BUF.find(_PREFIX, 0, n)
            while at > 0 and _ENV_BUF[at - 1] != 0:  # only at the start of an entry
                at = _ENV_BUF.find(_PREFIX, at + 1, n)
            if at < 0:
                return None
            end = _ENV_BUF.find(b"\0", at, n)
            return bytes(_ENV_VIEW[at + len(_PREFIX):n if end < 0 else end]).decode(
                "ascii", "replace")
        finally:
            _ENV_VIEW[:n] = _ZEROS[:n]


def _markers() -> Iterator[tuple[int, str]]:
    """(pid, marker) of every other process that carries one."""
    me = os.getpid()
    for pid in _pids():
        if pid != me:
            marker = _marker_of(pid)
            if marker is not None:
                yield pid, marker


def orphaned() -> list[int]:
    """Processes carrying a marker whose owner is gone: what a SIGKILLed run started, also
    the ``setsid`` grandchildren that left its session and were re-parented to init."""
    return [pid for pid, m in _markers() if not _owner_alive(m.partition("-")[0])]


def marked(value: str) -> list[int]:
    """Processes whose marker is ``value`` or starts with ``value-`` (a run's marker is the
    prefix of each of its workers')."""
    return [pid for pid, m in _markers() if m == value or m.startswith(f"{value}-")]


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def now_ticks() -> int:
    """Now, in the clock ticks after boot that ``start_time`` uses."""
    with open("/proc/uptime", encoding="ascii") as f:
        return int(float(f.read().split()[0]) * _TICK)


_HELPERS: set[int] = set()  # children we started in a session of their own and still wait for
_HELPERS_LOCK = threading.Lock()
STRAY_ROUNDS = 100  # of killing what was re-parented to us; each kill re-parents the next


def helper(pid: int) -> None:
    """``pid`` is a child of ours in a session of its own that we still wait for (a listing
    child, a fork server, a spawned worker): never a stray while it runs."""
    with _HELPERS_LOCK:
        _HELPERS.add(pid)


def helper_done(pid: int) -> None:
    with _HELPERS_LOCK:
        _HELPERS.discard(pid)


def session_of(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[3]) if fields else None


def kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid``, whatever its process group or environment."""
    kill_all([pid for pid in _pids() if pid != sid and session_of(pid) == sid])


def reap_strays(since: int) -> list[int]:
    """Kill and reap our children that started after ``since`` in a session of their own:
    orphans a worker or a listing left (re-parented to us, the subreaper), whatever their
    environment, never our own helpers. Again until none is left: killing one re-parents its
    children to us (a chain of daemons), at most ``STRAY_ROUNDS`` times."""
    me, session = os.getpid(), os.getsid(0)
    killed: list[int] = []
    for _ in range(STRAY_ROUNDS):
        with _HELPERS_LOCK:
            keep = set(_HELPERS)
        strays = []
        for pid in _pids():
            fields = _stat(pid)
            if fields and int(fields[1]) == me and int(fields[19]) >= since \
                    and pid not in keep and int(fields[3]) != session:
                strays.append(pid)
        if not strays:
            break
        kill_all(strays)
        for pid in strays:  # once reaped, its own children are ours
            with suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
        killed += strays
    return killed
