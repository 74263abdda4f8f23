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
(``status`` as ``Popen.returncode``: negative for a signal). EOF on stdin ends the server and its
children.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
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

def _child(req: dict[str, Any], import_s: float, server: int) -> None:
    """In the forked child: become our own session, die with the server, take the job's
    environment and log, measure, exit without running the server's cleanup."""
    code = 1
    try:
        os.setsid()
        proctree.die_with_parent(server)
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


def serve(preload: list[str], parent: int | None = None) -> int:
    proctree.die_with_parent(parent)
    from compilewatch.compiler import worker

    import_s = worker.import_compiler_stack()
    # the suites' own heavy imports (transformers, ...), and COMPILE_PATH when asked
    skipped = worker.import_each(preload_modules(preload))
    import torch

    out = sys.stdout
    hello = {"ready": True, "import_s": import_s, "pid": os.getpid(), "threads": _threads(),
             "cuda_initialized": bool(torch.cuda.is_initialized()),
             "fork_poisoned": _fork_poisoned(), "skipped": skipped}
    out.write(json.dumps(hello) + "\n")
    out.flush()
    children: set[int] = set()
    buffer = b""
    stdin = sys.stdin.buffer.raw.fileno() if hasattr(sys.stdin.buffer, "raw") else 0
    while True:
        ready, _, _ = select.select([stdin], [], [], 0.05)
        if ready:
            chunk = os.read(stdin, 1 << 16)
            if not chunk:
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                req = json.loads(line)
                out.flush()
                pid = os.fork()
                if pid == 0:
                    _child(req, import_s, os.getppid())
                children.add(pid)
                out.write(json.dumps({"id": req["id"], "pid": pid}) + "\n")
                out.flush()
        for pid in list(children):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                out.write(json.dumps({"pid": pid,
                                      "status": os.waitstatus_to_exitcode(status)}) + "\n")
                out.flush()
    for pid in children:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    return 0


# --- the client, in the parent --------------------------------------------------------------

class ForkServerError(Exception):
    """The server could not start or stopped answering: the runner falls back to spawning."""


@dataclass
class _State:
    pids: dict[int, int] = field(default_factory=dict)  # request id -> pid
    exits: dict[int, int] = field(default_factory=dict)  # pid -> status
    dead: bool = False
    cond: threading.Condition = field(default_factory=threading.Condition)


class ForkServer:
    """One server per interpreter and base environment; ``launch`` returns a forked child."""

    def __init__(self, python: str, env: dict[str, str], log: Path,
                 preload: list[str] | None = None, needs_cuda: bool = True) -> None:
        self.env = dict(env)
        self.needs_cuda = needs_cuda
        self._log = open(log, "ab")  # noqa: SIM115 - lives as long as the server
        self.proc = subprocess.Popen(
            module_command(python, "compilewatch.compiler.forkserver", *(preload or [])),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env,
            start_new_session=True)
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self._stdin: IO[bytes] = self.proc.stdin
        self.hello = self._ready(self.proc.stdout)
        self.import_s = float(self.hello["import_s"])
        self._state = _State()
        self._next = 0
        self._write_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,),
                                        daemon=True, name="forkserver-reader")
        self._reader.start()

    def _ready(self, stdout: IO[bytes]) -> dict[str, Any]:
        ready, _, _ = select.select([stdout], [], [], READY_TIMEOUT_S)
        line = stdout.readline() if ready else b""
        try:
            hello = json.loads(line)
        except json.JSONDecodeError:
            hello = {}
        if not hello.get("ready"):
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

    def _read(self, stdout: IO[bytes]) -> None:
        st = self._state
        for line in stdout:
            msg = json.loads(line)
            with st.cond:
                if "status" in msg:
                    st.exits[int(msg["pid"])] = int(msg["status"])
                else:
                    st.pids[int(msg["id"])] = int(msg["pid"])
                st.cond.notify_all()
        with st.cond:
            st.dead = True
            st.cond.notify_all()

    def accepts(self, env: dict[str, str]) -> bool:
        """Whether a child with ``env`` may be forked from this server."""
        keys = (set(env) | set(self.env)) - PER_CHILD
        return all(env.get(k) == self.env.get(k) for k in keys)

    def launch(self, spec: Path, env: dict[str, str], log: Path, cwd: Path) -> ForkedChild:
        st = self._state
        with self._write_lock:
            self._next += 1
            rid = self._next
            msg = {"id": rid, "spec": str(spec), "env": env, "log": str(log), "cwd": str(cwd)}
            try:
                self._stdin.write((json.dumps(msg) + "\n").encode())
                self._stdin.flush()
            except (BrokenPipeError, ValueError) as e:
                raise ForkServerError(f"the fork server is gone: {e}") from None
        with st.cond:
            if not st.cond.wait_for(lambda: rid in st.pids or st.dead, timeout=60):
                raise ForkServerError("the fork server did not fork in 60 s")
            if rid not in st.pids:
                raise ForkServerError("the fork server is gone")
            return ForkedChild(st.pids.pop(rid), st)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and not self._state.dead

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._log.close()


class ForkedChild:
    """A forked worker, with ``Popen``'s ``pid``/``poll``/``returncode`` and a kill of its
    process group (it leads its own session)."""

    def __init__(self, pid: int, state: _State) -> None:
        self.pid = pid
        self._state = state
        self.returncode: int | None = None

    def poll(self) -> int | None:
        with self._state.cond:
            if self.pid in self._state.exits:
                self.returncode = self._state.exits.pop(self.pid)
            elif self._state.dead and self.returncode is None:
                self.returncode = -signal.SIGKILL  # the server died, and its children with it
        return self.returncode

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
