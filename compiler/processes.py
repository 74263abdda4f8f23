"""Starting worker processes and making sure nothing of them outlives the run.

A worker runs untrusted model code. It gets an allow-listed environment (no tokens, keys or
cloud credentials), a marker in that environment so that whatever it starts can be found, a
parent-death signal, and a hard timeout; after it ends, its process group, anything carrying its
marker and any orphan re-parented to us are killed. A secret that still reaches its output (a
model that read a file) is redacted before the output is written anywhere. Temp dirs of a run
that was SIGKILLed are removed by the next run.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from pydantic import ValidationError

from compilewatch.compiler import proctree, tempdirs
from compilewatch.compiler.children import module_command
from compilewatch.compiler.forkserver import PER_CHILD, ForkServer, ForkServerError
from compilewatch.compiler.protocol import ERROR_TAIL, STACKS, WorkerOutput, WorkerSpec, tail
from compilewatch.core.schema import Category

POLL_S = 0.05
STACK_LOG_CHARS = 1200  # a timed-out worker's log tail, when its stacks follow
PHASE_CHARS = 80  # of a status file: "cold: compile"
READ_LIMIT = 256 * 1024  # bytes of a worker's log or stacks the parent reads, from the end
Isolation = Literal["spawn", "fork"]
PhaseCallback = Callable[[str], None]
RUN_PREFIX = "compilewatch-run-"

# What a worker may see of our environment: the toolchain, torch/Triton/CUDA settings, locale.
ALLOW = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR", "TEMP",
         "TMP", "SHELL", "TERM", "PYTHON*", "VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH",
         "LIBRARY_PATH", "CPATH", "CC", "CXX", "CUDA_*", "NVIDIA_*", "NCCL_*", "TORCH_*",
         "TORCHINDUCTOR_*", "TORCHDYNAMO_*", "TRITON_*", "PYTORCH_*", "OMP_*", "MKL_*",
         "OPENBLAS_*", "KMP_*", "HF_HOME", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
         "TRANSFORMERS_OFFLINE", "TRANSFORMERS_CACHE", "XDG_CACHE_HOME", "TIMM_*",
         "SOURCE_DATE_EPOCH")
SECRET_NAMES = ("*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*CREDENTIAL*", "*_KEY",
                "*_KEY_*", "*APIKEY*", "*API_KEY*")
# Never, even when allowed above: credentials by name, and services' settings.
DENY = (*SECRET_NAMES, "GITHUB_*", "ACTIONS_*", "RUNNER_*", "AWS_*", "AZURE_*",
        "GOOGLE_*", "GCP_*", "GCLOUD_*", "CLOUDSDK_*", "DOCKER_*", "NPM_*", "PYPI_*",
        "TWINE_*", "SSH_*", "GPG_*", "COMPILEWATCH_DB", "COMPILEWATCH_SIGNING_KEY",
        "DATABASE_URL", "PG*", "REDIS*", "COMPILEWATCH_REMOTE_CACHE*",
        # torch's own Redis settings: its remote caches load unverified pickles, and a URL
        # carries a password (workers turn those caches off: compiler/remotecache.py)
        "TORCHINDUCTOR_REDIS_*")


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def is_credential(name: str) -> bool:
    """Whether a variable is one no worker sees (a credential by name, or a service's)."""
    return _matches(name, DENY)


def is_secret_name(name: str) -> bool:
    """Whether a variable's name says it holds a secret (a token, a key, a password)."""
    return _matches(name, SECRET_NAMES)


def allowed_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Our environment as a worker may see it."""
    env = dict(os.environ if environ is None else environ)
    return {k: v for k, v in env.items() if _matches(k, ALLOW) and not _matches(k, DENY)}


class Redactor:
    """Replaces the values of our environment's credentials wherever they appear in text."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = dict(os.environ if environ is None else environ)
        secrets = {v for k, v in env.items() if _matches(k, DENY) and len(v) >= 8}
        # in JSON a secret may appear escaped
        secrets |= {json.dumps(s)[1:-1] for s in secrets}
        self._pattern = re.compile("|".join(re.escape(s) for s in sorted(secrets, key=len,
                                                                          reverse=True))) \
            if secrets else None

    def __call__(self, text: str) -> str:
        return self._pattern.sub("[redacted]", text) if self._pattern else text


class Proc(Protocol):
    pid: int
    trouble: str | None  # why its exit cannot be known (a forked child's lost report)

    @property
    def doubts(self) -> list[str]: ...  # what its fork server's channel said untruly of it

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...


class _Spawned:
    """A spawned worker: ``Popen`` whose kill takes its whole process group."""

    trouble = None  # a spawned worker's exit is its own parent's to see

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen
        self.pid = popen.pid

    @property
    def doubts(self) -> list[str]:
        return []

    def poll(self) -> int | None:
        return self.popen.poll()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.popen.kill()
        self.popen.wait()


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def clean_stale_runs(tmp: Path | None = None) -> list[Path]:
    """Kill what runs that are gone left running (their marked processes, wherever they were
    re-parented) and remove their temp folders: a SIGKILLed run keeps both."""
    proctree.kill_all(proctree.orphaned())
    return tempdirs.clean_stale(tmp)


@dataclass(frozen=True)
class Launch:
    """Where one worker's files go and how it runs."""

    spec: WorkerSpec
    env: dict[str, str]
    timeout_s: float
    python: str
    name: str  # unique within the run: files are named after it


class Launcher:
    """Starts workers (spawned or forked), one run's temp root, fork servers and cleanup.

    Use as a context manager: on exit every fork server is closed and any process of the run
    still alive is killed.
    """

    def __init__(self, isolation: Isolation = "fork", preload: Iterable[str] = (),
                 on_note: Callable[[str], None] = lambda _: None,
                 needs_cuda: bool = True) -> None:
        self.isolation = isolation
        self.needs_cuda = needs_cuda  # a fork server that touched CUDA is refused only then
        self.on_note = on_note
        self.preload = sorted(set(preload))
        self.redact = Redactor()
        self._servers: dict[tuple[str, frozenset[tuple[str, str]]], ForkServer | None] = {}
        self._lock = threading.Lock()
        self._live: dict[int, Proc] = {}
        self._aborting = False
        self._n = 0
        self.notes: list[str] = []
        self.root = Path()

    def _note(self, text: str) -> None:
        """Tell the caller once per distinct note: a fallback to spawning costs every worker
        its imports, so the run says so rather than quietly getting slower."""
        if text not in self.notes:
            self.notes.append(text)
            self.on_note(text)

    def __enter__(self) -> Launcher:
        clean_stale_runs()
        self.root = tempdirs.owned_tempdir(RUN_PREFIX)
        # the owner first: a run's marked processes outlive it only until the next run
        self._run = f"{proctree.owner_token()}-{self.root.name.removeprefix(RUN_PREFIX)}"
        self._started = proctree.now_ticks()
        proctree.become_subreaper()
        return self

    def __exit__(self, *exc: object) -> None:
        for server in self._servers.values():
            if server is not None:
                server.close()
                for note in server.notes:  # also what came while no worker ran
                    self._note(note)
        proctree.kill_all(proctree.marked(self._run))
        proctree.reap_strays(since=self._started)
        shutil.rmtree(self.root, ignore_errors=True)

    def abort(self) -> None:
        """Kill every live worker now (the run is being stopped): the threads waiting for them
        return at once, and no new worker survives its start."""
        with self._lock:
            self._aborting = True
            live = list(self._live.values())
        for proc in live:
            proc.kill()

    def workdir(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def prepare(self, python: str, env: dict[str, str]) -> None:
        """Start the fork server for ``python`` and ``env`` now, in the calling thread (it dies
        with the thread that started it: the main thread, or a pool thread that lives as long
        as the loop)."""
        if self.isolation == "fork":
            self._server(python, env)

    def _own(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` with the run's own temp folder: what a worker, torch (Inductor's
        precompiled headers) or a model writes to ``TMPDIR`` goes with the run's folder."""
        return {**env, "TMPDIR": str(self.workdir("tmp"))}

    def _server(self, python: str, env: dict[str, str]) -> ForkServer | None:
        env = {k: v for k, v in self._own(env).items() if k not in PER_CHILD}
        key = (python, frozenset(env.items()))
        with self._lock:
            if key not in self._servers:
                try:
                    n = len(self._servers)
                    log = self.root / f"forkserver-{n}.log"
                    # the server never compiles, but torch may touch its cache dir on import:
                    # one of the run's own, not the user's default
                    own = {"TORCHINDUCTOR_CACHE_DIR": str(self.workdir(f"forkserver-{n}"))}
                    self._servers[key] = ForkServer(python, {**env, **own}, log, self.preload,
                                                    needs_cuda=self.needs_cuda)
                except (ForkServerError, OSError) as e:
                    self._note(f"fork server unavailable, workers spawned: {e}")
                    self._servers[key] = None
            server = self._servers[key]
        return server if server is not None and server.alive else None

    def run(self, launch: Launch, on_phase: PhaseCallback) -> tuple[WorkerOutput, float]:
        """Run one worker to completion, timeout or death; never raises for the worker's
        sake. Returns its output (a synthesized failure when it wrote none) and its seconds."""
        with self._lock:
            self._n += 1
            marker = f"{self._run}-{self._n}"
        work = self.workdir(launch.name)
        spec = launch.spec.model_copy(update={"out": str(work / "out.json"),
                                              "status_file": str(work / "status")})
        spec_path, log_path = work / "spec.json", work / "log"
        spec_path.write_text(spec.model_dump_json(), encoding="utf-8")
        env = {**self._own(launch.env), proctree.MARKER: marker}
        start = time.monotonic()
        try:
            proc, import_s = self._start(launch, spec_path, env, log_path, work)
        except OSError as e:
            return _failed(spec, Category.INFRA, f"cannot start worker {launch.python}: {e}"), 0.0
        with self._lock:
            self._live[proc.pid] = proc
            if self._aborting:
                proc.kill()
        last, timed_out = "", False
        try:
            while proc.poll() is None:
                if time.monotonic() - start > launch.timeout_s:
                    timed_out = True
                    _ask_for_stacks(proc, work / STACKS)
                    break
                phase = _phase(spec.status_file)
                if phase and phase != last:
                    last = phase
                    on_phase(phase)
                time.sleep(POLL_S)
        finally:
            # Always, also after a normal exit and when we are interrupted (Ctrl-C, a cancelled
            # CI job): the worker, its compile workers and whatever it started must not outlive
            # it, or they hold the GPU and skew the next measurement.
            proc.kill()
            proctree.helper_done(proc.pid)
            proctree.kill_all(proctree.marked(marker))
            with self._lock:
                self._live.pop(proc.pid, None)
        seconds = time.monotonic() - start
        output = self._outcome(spec, proc, timed_out, last, log_path, import_s, launch)
        return self._with_doubts(output, proc), seconds

    def _with_doubts(self, output: WorkerOutput, proc: Proc) -> WorkerOutput:
        """What the fork server's channel said untruly while this worker ran, in its result's
        notes and the run's: no one else could have written it (docs/security.md)."""
        doubts = proc.doubts
        for doubt in doubts:
            self._note(doubt)
        if not doubts:
            return output
        return output.model_copy(update={"notes": [*output.notes, *doubts][:64]})

    def _start(self, launch: Launch, spec_path: Path, env: dict[str, str], log: Path,
               work: Path) -> tuple[Proc, float | None]:
        if self.isolation == "fork":
            server = self._server(launch.python, launch.env)
            if server is not None and server.accepts(env):
                try:
                    return server.launch(spec_path, env, log, work), server.import_s
                except ForkServerError as e:
                    self._note(f"fork server failed, worker spawned: {e}")
        with open(log, "wb") as out:
            popen = subprocess.Popen(
                module_command(launch.python, "compilewatch.compiler.worker", str(spec_path)),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                cwd=work, start_new_session=True)
        proctree.helper(popen.pid)  # until it is done: no stray of a listing beside it
        return _Spawned(popen), None

    def _outcome(self, spec: WorkerSpec, proc: Proc, timed_out: bool, last: str, log: Path,
                 import_s: float | None, launch: Launch) -> WorkerOutput:
        out = Path(spec.out)
        if out.is_file():  # a worker that wrote its result and then hung at exit still counts
            text = self.redact(out.read_text(encoding="utf-8", errors="replace"))
            try:
                output = WorkerOutput.model_validate_json(text)
            except ValidationError as e:
                return _failed(spec, Category.INFRA, "the worker's output does not fit the "
                               f"protocol: {_first_errors(e)}")
            if import_s is not None and output.import_s is None:
                output = output.model_copy(update={"import_s": import_s})
            return output
        log_tail = self.redact(_tail(log))
        if timed_out:
            where = self.redact(where_it_was(_end(out.with_name(STACKS))))
            return _failed(spec, Category.TIMEOUT, _headed(
                f"no result after {launch.timeout_s:g} s (last phase: {last or 'start'}); "
                "killed", log_tail[-STACK_LOG_CHARS:] + where))
        if proc.trouble is not None:
            return _failed(spec, Category.INFRA, _headed(
                f"worker without a result in phase {last or 'start'}: {proc.trouble}",
                log_tail))
        code = proc.poll()
        code = -signal.SIGKILL if code is None else code
        how = (f"killed by {_signal_name(code)}" + (" (possibly out of memory)"
                                                     if code == -9 else "")
               if code < 0 else f"exited with status {code}")
        return _failed(spec, Category.CRASH, _headed(
            f"worker {how} without a result in phase {last or 'start'}", log_tail))


def base_env() -> dict[str, str]:
    """What every worker of this run sees: the allowed environment plus the cache settings.
    ``PYTORCH_NVML_BASED_CUDA_CHECK`` makes ``torch.cuda.is_available()`` ask NVML instead of
    initialising the driver, so an import that checks for a GPU does not poison the fork
    server (a forked child of a poisoned parent cannot use CUDA at all)."""
    return {**allowed_env(), "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
            "TORCHINDUCTOR_AUTOGRAD_CACHE": "1", "PYTHONUNBUFFERED": "1",
            "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}


def worker_env(cache_dir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**base_env(), "TORCHINDUCTOR_CACHE_DIR": str(cache_dir),
           "TRITON_CACHE_DIR": str(cache_dir / "triton")}
    env.update(extra or {})
    return env


def _headed(header: str, body: str) -> str:
    """``header``, then as much of the end of ``body`` as fits the error text: what happened
    must survive a long log, which the error's tail would otherwise keep instead."""
    room = ERROR_TAIL - len(header) - 1
    if len(body) > room:
        body = "..." + body[-max(room - 3, 0):]
    return f"{header}\n{body}"


def _failed(spec: WorkerSpec, category: Category, error: str) -> WorkerOutput:
    return WorkerOutput(ok=False, phase=spec.phase, category=category, error=tail(error))


def _first_errors(err: ValidationError) -> str:
    parts = []
    for e in err.errors()[:3]:
        where = ".".join(str(p) for p in e["loc"]) or "<top>"
        parts.append(f"{where}: {e['msg']}")
    return "; ".join(parts)


def _ask_for_stacks(proc: Proc, path: Path, wait_s: float = 2.0) -> None:
    """Ask a worker out of time for its threads' stacks (``worker.dump_stacks_on_request``)
    and give it up to ``wait_s`` to write them: the file grows, then holds still."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(proc.pid, signal.SIGUSR1)
    end, size = time.monotonic() + wait_s, -1
    while time.monotonic() < end and proc.poll() is None:
        time.sleep(POLL_S)
        now = path.stat().st_size if path.is_file() else 0
        if now and now == size:
            return
        size = now


def where_it_was(stacks: str, frames: int = 12, others: int = 5) -> str:
    """The main thread's innermost frames (faulthandler lists that thread last) and the
    innermost frame of each other thread: what a timed-out worker was doing, short enough
    for the error text."""
    blocks = [b.strip() for b in stacks.strip().split("\n\n") if b.strip()]
    if not blocks:
        return ""
    main, rest = blocks[-1].splitlines()[1:], blocks[:-1]
    lines = ["", "where it was when stopped (main thread, innermost first):", *main[:frames]]
    if len(main) > frames:
        lines.append(f"  ... {len(main) - frames} outer frames")
    if rest:
        lines.append(f"other threads: {len(rest)}")
        lines += [f"  {_first(b)}" for b in rest[:others]]
    return "\n".join(lines)


def _first(block: str) -> str:
    frames = block.splitlines()[1:]
    return frames[0].strip() if frames else "(no Python frames)"


def _phase(path: str) -> str:
    """The phase the worker last wrote to its status file: the first line of its first bytes,
    printable, at most ``PHASE_CHARS`` (the model runs in that process and can write the file
    too)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4 * PHASE_CHARS).decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "".join(c for c in head.split("\n", 1)[0] if c.isprintable())[:PHASE_CHARS]


def _end(path: Path, limit: int = READ_LIMIT) -> str:
    """The last ``limit`` bytes of a file the worker wrote. The model runs in the worker and
    may fill its log or its stacks file without bound: the parent never reads more."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _tail(path: Path) -> str:
    """The end of a worker's log, cut and cleaned like the worker's own error tails."""
    return tail(_end(path))
