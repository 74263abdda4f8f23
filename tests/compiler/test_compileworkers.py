"""Inductor's compile workers started early and ready before a compile's clock: the real pool
(in a fresh process each, since the pool is process-wide), and what happens on a torch whose
private API differs (a matrix of fakes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from compilewatch.compiler import compileworkers

# Triton is what makes torch start the pool; the CPU wheel has none, so the real-pool cases
# say it is there (the pool itself starts without it: it compiles whatever is sent to it)
_TRITON = """
from compilewatch.compiler import compileworkers
compileworkers._has_triton = lambda: True
"""

_READY = _TRITON + """
import json, sys, time
import torch._inductor.config as inductor_config
from torch._inductor.async_compile import AsyncCompile
from compilewatch.compiler import compileworkers, proctree
inductor_config.compile_threads = int(sys.argv[1])
inductor_config.quiesce_async_compile_time = 1  # workers shut down after a second idle
seen = {"started": compileworkers.start(), "waited": compileworkers.wait(),
        "future": AsyncCompile._ready_future is not None}
if int(sys.argv[1]) > 1:
    seen["ready"] = AsyncCompile.use_process_pool()
    seen["alive"] = len(proctree.descendants(__import__("os").getpid()))
    time.sleep(4)  # idle: torch shuts the workers down
    seen["idle"] = len(proctree.descendants(__import__("os").getpid()))
    t0 = time.perf_counter()
    seen["again"] = compileworkers.wait()
    seen["again_s"] = time.perf_counter() - t0
    seen["back"] = len(proctree.descendants(__import__("os").getpid()))
print(json.dumps(seen))
"""


@pytest.mark.parametrize("threads", [1, 3])
def test_the_real_pool_answers_after_the_wait_even_after_torch_shut_its_workers_down(
        threads: int) -> None:
    """Three threads: the pool answers a job once ``wait`` returns; after its workers were
    shut down for idling, the next ``wait`` starts them again (a job answered a minute ago
    would not). One thread: torch compiles in the process itself and no pool starts."""
    out = subprocess.run([sys.executable, "-c", _READY, str(threads)], capture_output=True,
                         text=True, check=True, timeout=300).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["started"] is None and seen["waited"] is None
    if threads == 1:
        assert seen["future"] is False  # nothing was submitted anywhere
        return
    assert seen["ready"] is True and seen["alive"] >= 1 + threads  # the sidecar and workers
    assert seen["idle"] < seen["alive"]  # shut down while idle
    assert seen["again"] is None and seen["back"] >= 1 + threads


_COMPILE = _TRITON + """
import json, sys
import torch._inductor.config as inductor_config
from torch._inductor.async_compile import AsyncCompile
from compilewatch.compiler import worker
from compilewatch.compiler.protocol import WorkerSpec
from compilewatch.core.schema import Config
seen = {}
real = worker.run_compile

def run_compile(*args, **kwargs):
    # where the kernels of the compile about to be timed would go
    seen["pool_ready"] = AsyncCompile._ready_future is not None \
        and AsyncCompile._ready_future.done()
    seen["threads"] = inductor_config.compile_threads
    return real(*args, **kwargs)

worker.run_compile = run_compile
spec = WorkerSpec(suite="micro", model="pointwise", config=Config(), phase=sys.argv[2],
                  large=False, rounds=1, block_ms=1.0, compile_threads=3,
                  ready_compile_workers=sys.argv[1] == "1", out="", status_file="")
out = worker.run_spec(spec, None)
print(json.dumps({"ok": out.ok, "error": out.error, "phases": sorted(out.harness_s),
                  "notes": out.notes, **seen}))
"""


@pytest.mark.parametrize(("ready", "phase", "waits"), [
    (True, "cold", True),
    (False, "cold", False),
    (True, "warm", False),  # a timing process's warm compile: not what the verdict needs
])
def test_a_real_cold_compile_starts_with_its_workers_ready_in_a_phase_of_its_own(
        tmp_path: Path, ready: bool, phase: str, waits: bool) -> None:
    """With the flag, the pool has answered before the compile's clock starts and the wait is
    ``compile_workers``, apart from ``compile`` (what the verdict judges); the worker compiles
    with its slot's compile threads (3, not torch's default of one per core)."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TORCHINDUCTOR_COMPILE_THREADS", None)
    out = subprocess.run([sys.executable, "-c", _COMPILE, "1" if ready else "0", phase],
                         capture_output=True, text=True, check=True, timeout=600,
                         env=env).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["ok"], seen["error"]
    assert seen["threads"] == 3
    assert seen["pool_ready"] is waits
    assert ("compile_workers" in seen["phases"]) is waits and "compile" in seen["phases"]
    assert not [n for n in seen["notes"] if "compile workers" in n]


class _Future:
    def __init__(self, pool: _Pool, what: str) -> None:
        self.pool, self.what = pool, what

    def result(self, timeout: float | None = None) -> object:
        self.pool.calls.append(f"result:{self.what}")
        if f"result:{self.what}" in self.pool.raises:
            raise self.pool.raises[f"result:{self.what}"]
        return "ready"


class _Pool:
    """A fake ``AsyncCompile`` with some of torch's methods, recording the calls; its
    ``process_pool()`` hands back jobs' futures (and, like older torches, its own
    ``ready_future`` when ``made_ready``)."""

    def __init__(self, *, have: set[str], raises: dict[str, Exception] | None = None,
                 made_ready: bool = False) -> None:
        self.calls: list[str] = []
        self.raises = raises or {}
        for name in have - {"process_pool"}:
            setattr(self, name, self._method(name))
        if "process_pool" in have:
            inner = SimpleNamespace(submit=self._submit)
            if made_ready:
                inner.ready_future = _Future(self, "made")
            self.process_pool = lambda: inner

    def _method(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            if name in self.raises:
                raise self.raises[name]
            return "ready"
        return call

    def _submit(self, job: Any) -> _Future:
        which = "own" if job is getattr(self, "_get_ready", None) else getattr(job, "__name__", "?")
        self.calls.append(f"submit:{which}")
        return _Future(self, "job")


def _torch(monkeypatch: pytest.MonkeyPatch, pool: _Pool | None, threads: int = 2,
           triton: bool = True) -> None:
    ac = SimpleNamespace(get_compile_threads=lambda: threads, AsyncCompile=pool)
    monkeypatch.setattr(compileworkers, "_async_compile", lambda: ac)
    monkeypatch.setattr(compileworkers, "_has_triton", lambda: triton)
    monkeypatch.delenv("TORCH_WARM_POOL", raising=False)


NEW = {"warm_pool", "wakeup", "wait_pool_ready", "_get_ready", "process_pool"}
WAITED = ["wakeup", "wait_pool_ready", "submit:own", "result:job"]


@pytest.mark.parametrize(("have", "raises", "made_ready", "start_note", "wait_note", "calls"), [
    # torch 2.11-2.13: start the sidecar and its workers; then wake them (they may have been
    # shut down for idling), wait for torch's ready job, and for a job submitted now
    (NEW, {}, False, None, None, ["warm_pool", "wakeup", *WAITED]),
    # an older torch: no wakeup, wait_pool_ready or _get_ready; the pool's own ready future
    ({"warm_pool", "process_pool"}, {}, True, None, None,
     ["warm_pool", "result:made", "submit:getpid", "result:job"]),
    # no process pool to ask: the compile runs with the race, and says so
    ({"warm_pool"}, {}, False, None, "cannot say", ["warm_pool"]),
    # no warm_pool: not started, and the wait still makes the pool answer first
    (NEW - {"warm_pool"}, {}, False, "no AsyncCompile.warm_pool", None, WAITED),
    # the pool failed to start or to answer in time: noted, never raised
    (NEW, {"warm_pool": RuntimeError("daemonic")}, False, "RuntimeError: daemonic", None,
     ["warm_pool", *WAITED]),
    (NEW, {"wait_pool_ready": TimeoutError("120 s")}, False, None, "TimeoutError",
     ["warm_pool", "wakeup", "wakeup", "wait_pool_ready"]),
    (NEW, {"result:job": OSError("gone")}, False, None, "OSError: gone",
     ["warm_pool", "wakeup", *WAITED]),
])
def test_other_torches_are_started_and_waited_for_as_far_as_they_allow(
        monkeypatch: pytest.MonkeyPatch, have: set[str], raises: dict[str, Exception],
        made_ready: bool, start_note: str | None, wait_note: str | None,
        calls: list[str]) -> None:
    pool = _Pool(have=have, raises=raises, made_ready=made_ready)
    _torch(monkeypatch, pool)
    started, waited = compileworkers.start(), compileworkers.wait()
    assert (started is None) if start_note is None else (start_note in started)
    assert (waited is None) if wait_note is None else (wait_note in waited)
    assert pool.calls == calls


@pytest.mark.parametrize(("threads", "triton", "warm_env"), [
    (1, True, None),    # one compile thread: kernels compile in the process, no pool
    (4, False, None),   # no Triton: C++ kernels use threads, torch starts no pool
    (4, True, "0"),     # the user turned torch's own pool warm-up off
])
def test_where_torch_would_start_no_pool_nothing_is_started_or_waited_for(
        monkeypatch: pytest.MonkeyPatch, threads: int, triton: bool,
        warm_env: str | None) -> None:
    pool = _Pool(have=NEW)
    _torch(monkeypatch, pool, threads=threads, triton=triton)
    if warm_env is not None:
        monkeypatch.setenv("TORCH_WARM_POOL", warm_env)
    assert compileworkers.start() is None and compileworkers.wait() is None
    assert pool.calls == []


def test_a_torch_without_async_compile_starts_and_waits_for_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compileworkers, "_async_compile", lambda: None)
    assert compileworkers.start() is None and compileworkers.wait() is None
