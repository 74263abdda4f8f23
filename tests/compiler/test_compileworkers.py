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

_READY = """
import json, sys
import torch._inductor.config as inductor_config
from torch._inductor.async_compile import AsyncCompile
from compilewatch.compiler import compileworkers
inductor_config.compile_threads = int(sys.argv[1])
started = compileworkers.start()
waited = compileworkers.wait()
ready = AsyncCompile.use_process_pool() if int(sys.argv[1]) > 1 else None
print(json.dumps({"started": started, "waited": waited, "ready": ready,
                  "future": AsyncCompile._ready_future is not None}))
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_the_real_pool_is_ready_after_the_wait_or_never_started_for_one_thread(
        threads: int) -> None:
    """Two threads: the pool answers a job once ``wait`` returns, so every kernel of the
    compile that follows goes there. One thread: torch compiles in the process itself and no
    pool is started at all."""
    out = subprocess.run([sys.executable, "-c", _READY, str(threads)], capture_output=True,
                         text=True, check=True, timeout=300).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["started"] is None and seen["waited"] is None
    if threads > 1:
        assert seen["ready"] is True
    else:
        assert seen["future"] is False  # nothing was submitted anywhere


_COMPILE = """
import json, sys
from compilewatch.compiler import worker
from compilewatch.compiler.protocol import WorkerSpec
from compilewatch.core.schema import Config
spec = WorkerSpec(suite="micro", model="pointwise", config=Config(), phase="cold", large=False,
                  rounds=1, block_ms=1.0, compile_threads=2,
                  ready_compile_workers=sys.argv[1] == "1", out="", status_file="")
out = worker.run_spec(spec, None)
print(json.dumps({"ok": out.ok, "error": out.error, "phases": sorted(out.harness_s),
                  "notes": out.notes}))
"""


@pytest.mark.parametrize("ready", [True, False])
def test_a_real_cold_compile_waits_for_its_workers_in_a_phase_of_its_own(
        tmp_path: Path, ready: bool) -> None:
    """The wait is ``compile_workers``, apart from ``compile`` (what the verdict judges)."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TORCHINDUCTOR_COMPILE_THREADS", None)
    out = subprocess.run([sys.executable, "-c", _COMPILE, "1" if ready else "0"],
                         capture_output=True, text=True, check=True, timeout=600,
                         env=env).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["ok"], seen["error"]
    assert ("compile_workers" in seen["phases"]) is ready and "compile" in seen["phases"]
    assert not [n for n in seen["notes"] if "compile workers" in n]


class _Pool:
    """A fake ``AsyncCompile`` with some of torch's methods, recording the calls."""

    def __init__(self, *, have: set[str], ready_after: int = 0,
                 raises: dict[str, Exception] | None = None) -> None:
        self.calls: list[str] = []
        self.polls = 0
        self.raises = raises or {}
        for name in have:
            setattr(self, name, self._method(name, ready_after))

    def _method(self, name: str, ready_after: int) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            if name in self.raises:
                raise self.raises[name]
            if name == "use_process_pool":
                self.polls += 1
                return self.polls > ready_after
            return None
        return call


def _torch(monkeypatch: pytest.MonkeyPatch, pool: _Pool | None, threads: int = 2) -> None:
    ac = SimpleNamespace(get_compile_threads=lambda: threads, AsyncCompile=pool)
    monkeypatch.setattr(compileworkers, "_async_compile", lambda: ac)


ALL = {"warm_pool", "wakeup", "wait_pool_ready", "use_process_pool"}


@pytest.mark.parametrize(("have", "raises", "ready_after", "start_note", "wait_note", "calls"), [
    # torch 2.11-2.13: start the sidecar and its workers, then wait for a job's answer
    (ALL, {}, 0, None, None, ["warm_pool", "wakeup", "wait_pool_ready"]),
    # no wakeup (older): the sidecar starts its workers at the first job, still waited for
    (ALL - {"wakeup"}, {}, 0, None, None, ["warm_pool", "wait_pool_ready"]),
    # no wait_pool_ready: poll use_process_pool until the pool answers
    ({"warm_pool", "use_process_pool"}, {}, 3, None, None,
     ["warm_pool", *["use_process_pool"] * 4]),
    # neither: the compile runs with the race, and says so
    ({"warm_pool"}, {}, 0, None, "cannot say when", ["warm_pool"]),
    # no warm_pool: not started, and the wait still makes the pool answer first
    ({"wait_pool_ready"}, {}, 0, "no AsyncCompile.warm_pool", None, ["wait_pool_ready"]),
    # the pool failed to start or to answer in time: noted, never raised
    (ALL, {"warm_pool": RuntimeError("daemonic")}, 0, "RuntimeError: daemonic", None,
     ["warm_pool", "wait_pool_ready"]),
    (ALL, {"wait_pool_ready": TimeoutError("120 s")}, 0, None, "TimeoutError",
     ["warm_pool", "wakeup", "wait_pool_ready"]),
    ({"warm_pool", "use_process_pool"}, {"use_process_pool": OSError("gone")}, 0, None,
     "OSError: gone", ["warm_pool", "use_process_pool"]),
])
def test_other_torches_are_started_and_waited_for_as_far_as_they_allow(
        monkeypatch: pytest.MonkeyPatch, have: set[str], raises: dict[str, Exception],
        ready_after: int, start_note: str | None, wait_note: str | None,
        calls: list[str]) -> None:
    pool = _Pool(have=have, ready_after=ready_after, raises=raises)
    _torch(monkeypatch, pool)
    started, waited = compileworkers.start(), compileworkers.wait()
    assert (started is None) if start_note is None else (start_note in started)
    assert (waited is None) if wait_note is None else (wait_note in waited)
    assert pool.calls == calls


def test_a_pool_that_never_answers_is_given_up_on_with_a_note(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pool = _Pool(have={"use_process_pool"}, ready_after=10**9)
    _torch(monkeypatch, pool)
    note = compileworkers.wait(timeout_s=0.05)
    assert note is not None and "not ready after" in note and pool.polls >= 2


def test_one_compile_thread_starts_and_waits_for_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pool = _Pool(have=ALL)
    _torch(monkeypatch, pool, threads=1)
    assert compileworkers.start() is None and compileworkers.wait() is None
    assert pool.calls == []


def test_a_torch_without_async_compile_is_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compileworkers, "_async_compile", lambda: None)
    assert "missing" in (compileworkers.start() or "")
    assert compileworkers.wait() is None  # nothing to wait for: torch compiles as it can
