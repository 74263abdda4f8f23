"""A process that imports torch and the compiler stack once and forks a fresh worker per
measurement (``--isolation fork``).

Every spawned worker pays for importing torch, Dynamo and Inductor (seconds on a GPU runner)
before it measures anything. The server pays it once. It never compiles and never touches CUDA,
so each forked child still starts with fresh Dynamo state, empty counters, its own Inductor
cache dir (read from the environment at each use) and its own CUDA context: a cold compile stays
cold. Per child only the variables in ``PER_CHILD`` may differ from the server's environment;
anything else would be read by torch at import time, so the client refuses to fork such a job
(the runner then spawns it).

Protocol (JSON lines): the client writes ``{"id", "spec", "env", "log", "cwd"}``; the server
answers ``{"id", "pid"}`` when the child exists and ``{"pid", "status"}`` when it ended
(``status`` as ``Popen.returncode``: negative for a signal). EOF on the channel ends the server
and its children.

The channel is a socket pair, not pipes: a worker is the PR's code, and a pipe of the server or
of the run can be opened again through ``/proc/<pid>/fd/N`` by any process of the same user (a
socket cannot). The server is also not dumpable (``/proc/<server>/fd`` and ptrace closed to its
children; Linux only), and its own stdout is its log, so what a package it imports prints never
reaches the channel. The client believes nothing it cannot check: a line that is no message is
noted and skipped; a child is one the server forked (its parent) that no other request got; an
exit only once that process is gone (pid and start time). A child that ended with no exit
report believed is a failure that says so, never a wait for its timeout.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from compilewatch.compiler import proctree
from compilewatch.compiler.children import module_command

PER_CHILD = frozenset({"TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", proctree.MARKER})
READY_TIMEOUT_S = 600.0


# --- the server process ---------------------------------------------------------------------

def _child(req: dict[str, Any], import_s: float, server: int, channel: int) -> None:
    """In the forked child: become our own session, die with the server, let go of its
    channel, be dumpable again (the run reads a worker's ``/proc``; fork kept the server's
    flag), take the job's environment and log, measure, exit without the server's cleanup."""
    code = 1
    try:
        os.close(channel)
        os.setsid()
        proctree.die_with_parent(server)
        proctree.set_dumpable(True)
        log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.environ.clear()
        os.environ.update(req["env"])
        os.chdir(req.get("cwd") or "/")
        from compilewatch.compiler import worker

        code = worker.start(req["spec"], import_s, paid_import=False)
    except BaseException:
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _fork_poisoned() -> bool:
    """Whether a child forked now would find CUDA unusable. ``torch.cuda.is_initialized()``
    is not enough: asking the driver for the device count (``torch.cuda.device_count()``,
    ``is_available()`` without NVML) poisons fork without initialising torch's CUDA state,
    so ask a real forked child."""
    import torch

    if getattr(torch._C, "_cuda_isInBadFork", None) is None:
        return False
    pid = os.fork()
    if pid == 0:
        os._exit(1 if torch._C._cuda_isInBadFork() else 0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) != 0


# Packages that import lazily: the top level leaves its heavy part to the first model class,
# which every forked worker would import again. transformers: `import transformers` 1.2 s, then
# `transformers.modeling_utils` (what every model class imports) 1.0 s more on a 2-core
# machine, paid by each of the 6 processes a model and side; where a model's configuration
# module documents itself from the auto classes (`auto_docstring`), also
# `transformers.models.auto.modeling_auto` (docs/performance.md).
LAZY_HEAVY = {"transformers": ("transformers.modeling_utils",
                               "transformers.models.auto.modeling_auto")}


def preload_modules(preload: list[str]) -> list[str]:
    """What the server imports for these packages: each, then its heavy lazy part."""
    return [m for name in preload for m in (name, *LAZY_HEAVY.get(name, ()))]


def _channel() -> int:
    """The protocol's own descriptor (the socket on stdin and stdout); stdout then goes to the
    log and stdin to /dev/null, so that nothing the server imports can write a message."""
    channel = os.dup(0)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return channel


def _send(channel: int, msg: dict[str, Any]) -> None:
    data = (json.dumps(msg) + "\n").encode()
    while data:
        data = data[os.write(channel, data):]


def serve(preload: list[str], parent: int | None = None) -> int:
    proctree.die_with_parent(parent)
    # before any import: a worker (the PR's code) must not open our channel or trace us
    proctree.set_dumpable(False)
    channel = _channel()
    from compilewatch.compiler import worker

    import_s = worker.import_compiler_stack()
    # the suites' own heavy imports (transformers, ...), and COMPILE_PATH when asked
    skipped = worker.import_each(preload_modules(preload))
    import torch

    _send(channel, {"ready": True, "import_s": import_s, "pid": os.getpid(),
                    "threads": _threads(), "cuda_initialized": bool(torch.cuda.is_initialized()),
                    "fork_poisoned": _fork_poisoned(), "skipped": skipped})
    children: set[int] = set()
    buffer = b""
    while True:
        ready, _, _ = select.select([channel], [], [], 0.05)
        if ready:
            chunk = os.read(channel, 1 << 16)
            if not chunk:
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                req = json.loads(line)
                sys.stdout.flush()
                pid = os.fork()
                if pid == 0:
                    _child(req, import_s, os.getppid(), channel)
                children.add(pid)
                _send(channel, {"id": req["id"], "pid": pid})
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                _send(channel, {"pid": pid, "status": os.waitstatus_to_exitcode(status)})
    for pid in children:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    return 0


# --- the client, in the parent --------------------------------------------------------------

class ForkServerError(Exception):
    """The server could not start or stopped answering: the runner falls back to spawning."""


LOST_AFTER_S = 2.0  # a child gone this long with no exit report believed: the report is lost
SHOWN_CHARS = 120  # of a line that is no message, in a note


@dataclass
class _Child:
    """A child the server said it forked: its start time (None: gone before we looked) tells
    it from a later process that reuses its pid."""

    start: int | None
    status: int | None = None  # from an exit report, believed once the process was gone
    gone_at: float | None = None  # when we first found it gone with no report believed
    doubts: list[str] = field(default_factory=list)  # what the channel said of it untruly


@dataclass
class _State:
    pids: dict[int, int] = field(default_factory=dict)  # request id -> pid
    asked: set[int] = field(default_factory=set)  # request ids not answered yet
    children: dict[int, _Child] = field(default_factory=dict)  # pid -> child
    notes: list[str] = field(default_factory=list)  # what the channel carried untruly
    dead: bool = False
    cond: threading.Condition = field(default_factory=threading.Condition)


def _message(line: bytes) -> dict[str, int] | None:
    """A line of the protocol (``{"id", "pid"}`` or ``{"pid", "status"}``, integers), or None."""
    try:
        msg = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(msg, dict) or set(msg) not in ({"id", "pid"}, {"pid", "status"}):
        return None
    if not all(type(v) is int for v in msg.values()):
        return None
    return msg


def _shown(line: bytes) -> str:
    text = line.decode("utf-8", "replace").strip()
    return ascii(text[:SHOWN_CHARS] + ("..." if len(text) > SHOWN_CHARS else ""))


class ForkServer:
    """One server per interpreter and base environment; ``launch`` returns a forked child."""

    def __init__(self, python: str, env: dict[str, str], log: Path,
                 preload: list[str] | None = None, needs_cuda: bool = True) -> None:
        self.env = dict(env)
        self.needs_cuda = needs_cuda
        self._log = open(log, "ab")  # noqa: SIM115 - lives as long as the server
        self._sock, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen(
                module_command(python, "compilewatch.compiler.forkserver", *(preload or [])),
                stdin=theirs.fileno(), stdout=theirs.fileno(), stderr=self._log, env=env,
                start_new_session=True)
        finally:
            theirs.close()
        proctree.helper(self.proc.pid)
        self._stream: IO[bytes] = self._sock.makefile("rb")
        self._state = _State()
        self.hello = self._ready()
        self.import_s = float(self.hello["import_s"])
        self._next = 0
        self._write_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True,
                                        name="forkserver-reader")
        self._reader.start()

    def _ready(self) -> dict[str, Any]:
        ready, _, _ = select.select([self._sock], [], [], READY_TIMEOUT_S)
        line = self._stream.readline() if ready else b""
        try:
            hello = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            hello = {}
        if not isinstance(hello, dict) or not hello.get("ready"):
            self.close()
            raise ForkServerError("the fork server did not start (see its log)")
        # Only a child that uses CUDA minds: with torch's CUDA build on a machine without a
        # driver, Inductor's import asks the driver for the device count (NVML is missing
        # too), which marks every forked child "bad fork" though no child of a CPU run will
        # ever touch CUDA.
        if self.needs_cuda and (hello.get("cuda_initialized") or hello.get("fork_poisoned")):
            self.close()
            raise ForkServerError("importing the compiler stack touched CUDA, so a forked "
                                  "child could not use it")
        return hello

    def _read(self) -> None:
        st = self._state
        for line in self._stream:
            msg = _message(line)
            with st.cond:
                if msg is None:
                    self._doubt(f"a line that is no message: {_shown(line)}", live=True)
                elif "status" in msg:
                    self._exited(msg["pid"], msg["status"])
                else:
                    self._forked(msg["id"], msg["pid"])
                st.cond.notify_all()
        with st.cond:
            st.dead = True
            st.cond.notify_all()

    def _doubt(self, what: str, *, live: bool = False, pid: int | None = None) -> None:
        """Note what the channel said untruly, for the run and for the children it concerns
        (``live``: every child running now, since no one can tell whose it was)."""
        st = self._state
        st.notes.append(f"the fork server's channel carried {what}: not believed")
        for p, child in st.children.items():
            if p == pid or (live and child.status is None):
                child.doubts.append(st.notes[-1])

    def _forked(self, rid: int, pid: int) -> None:
        """A child for request ``rid``: one we asked for, of a pid no request got, which the
        server is the parent of (or which is gone already: a child may end at once)."""
        st = self._state
        parent = proctree.parent_of(pid)
        if rid not in st.asked or pid in st.children or parent not in (self.proc.pid, None):
            self._doubt(f"an answer for request {rid} (pid {pid}) that no request awaits, or "
                        "of no child of the server")
            return
        st.asked.discard(rid)
        st.children[pid] = _Child(proctree.start_time(pid) if parent is not None else None)
        st.pids[rid] = pid

    def _exited(self, pid: int, status: int) -> None:
        """Believe an exit report only of our child, once that very process is gone."""
        child = self._state.children.get(pid)
        if child is None or child.status is not None:
            self._doubt(f"an exit (status {status}) of {pid}, no child of ours running")
        elif _alive(pid, child):
            self._doubt(f"an exit (status {status}) of {pid}, which is still running", pid=pid)
        else:
            child.status = status

    def accepts(self, env: dict[str, str]) -> bool:
        """Whether a child with ``env`` may be forked from this server."""
        keys = (set(env) | set(self.env)) - PER_CHILD
        return all(env.get(k) == self.env.get(k) for k in keys)

    def launch(self, spec: Path, env: dict[str, str], log: Path, cwd: Path) -> ForkedChild:
        st = self._state
        with self._write_lock:
            self._next += 1
            rid = self._next
            with st.cond:
                st.asked.add(rid)
            msg = {"id": rid, "spec": str(spec), "env": env, "log": str(log), "cwd": str(cwd)}
            try:
                self._sock.sendall((json.dumps(msg) + "\n").encode())
            except OSError as e:
                raise ForkServerError(f"the fork server is gone: {e}") from None
        with st.cond:
            if not st.cond.wait_for(lambda: rid in st.pids or st.dead, timeout=60):
                raise ForkServerError("the fork server did not fork in 60 s")
            if rid not in st.pids:
                raise ForkServerError("the fork server is gone")
            pid = st.pids.pop(rid)
            return ForkedChild(pid, st)

    @property
    def notes(self) -> list[str]:
        """What the channel carried that was not believed, in order."""
        with self._state.cond:
            return list(self._state.notes)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and not self._state.dead

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)  # EOF: the server ends, and its children
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        proctree.helper_done(self.proc.pid)
        reader = getattr(self, "_reader", None)
        if reader is not None:
            reader.join(5)  # at EOF once the server is gone
        self._stream.close()
        self._sock.close()
        self._log.close()


def _alive(pid: int, child: _Child) -> bool:
    """Whether the process the server forked still exists, a zombie the server has not
    reaped included: it reports an exit only after reaping."""
    return child.start is not None and proctree.start_time(pid) == child.start


class ForkedChild:
    """A forked worker, with ``Popen``'s ``pid``/``poll``/``returncode`` and a kill of its
    process group (it leads its own session). ``trouble``: why its exit cannot be known (its
    report was lost or never believed), None while all is well; ``doubts``: what the channel
    said of it that was not believed."""

    def __init__(self, pid: int, state: _State) -> None:
        self.pid = pid
        self._state = state
        self._child = state.children[pid]
        self.returncode: int | None = None
        self.trouble: str | None = None

    @property
    def doubts(self) -> list[str]:
        with self._state.cond:
            return list(self._child.doubts)

    def poll(self) -> int | None:
        with self._state.cond:
            if self.returncode is not None:
                return self.returncode
            child = self._child
            if child.status is not None:
                self.returncode = child.status
            elif self._state.dead:
                self.returncode = -signal.SIGKILL  # the server died, and its children with it
            elif not _alive(self.pid, child):
                self._lost(child)
        return self.returncode

    def _lost(self, child: _Child) -> None:
        """Gone with no exit report believed: wait a moment for the report, then say so."""
        now = time.monotonic()
        if child.gone_at is None:
            child.gone_at = now
        elif now - child.gone_at > LOST_AFTER_S:
            self.returncode = -signal.SIGKILL
            self.trouble = ("it ended, but the fork server's report of how never came"
                            + (f" ({'; '.join(child.doubts[:3])})" if child.doubts else ""))

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

    def wait(self, timeout: float = 30.0) -> int | None:
        end = time.monotonic() + timeout
        while self.poll() is None and time.monotonic() < end:
            with self._state.cond:
                self._state.cond.wait(0.05)
        return self.returncode


if __name__ == "__main__":
    # the parent as we find it, not as an environment variable tells it: no child is told a pid
    sys.exit(serve(sys.argv[1:], os.getppid()))
