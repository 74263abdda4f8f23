"""Inductor's compile workers, started early and ready before a cold compile's clock starts
(``--ready-compile-workers``).

Why: torch starts its pool of compile workers when ``torch.compile`` builds the Inductor
backend, and compiles each kernel in the pool only if the pool *happens* to be ready at that
moment (``AsyncCompile.use_process_pool`` returns whether a dummy job has finished), in the
process itself otherwise. The pool's start imports torch in a sidecar process: seconds. A cold
compile of a few seconds therefore compiles some kernels here and some there, depending on a
race, and its wall and CPU time vary with who won: on the H200 a micro model's cold compiles
spread 5-8% (standard deviation of the log) within one side, with each compile on cores of its
own. Started while the worker builds the model and runs eager, and waited for before the clock
starts, every kernel goes to the pool, every time. The wait is the phase ``compile_workers``:
Inductor's start-up, like the import, and not the compile the verdict judges.

Private torch APIs, so each step checks that they exist; where one does not (another torch), the
compile runs as torch would run it and a note says the race was not removed.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

WAIT_S = 120.0  # torch's own default for wait_pool_ready


def _async_compile() -> Any | None:
    try:
        from torch._inductor import async_compile
    except ImportError:
        return None
    return async_compile


def _threads(ac: Any) -> int:
    get = getattr(ac, "get_compile_threads", None)
    if get is not None:
        return int(get())
    import torch._inductor.config as inductor_config

    return int(inductor_config.compile_threads or 1)


def start() -> str | None:
    """Start the pool now (one worker per compile thread), as torch.compile's backend would at
    the first compile. None: started, or nothing to start (one compile thread compiles in the
    process itself); else why not."""
    ac = _async_compile()
    if ac is None:
        return "compile workers not started: torch._inductor.async_compile is missing"
    if _threads(ac) <= 1:
        return None
    pool = getattr(ac, "AsyncCompile", None)
    if pool is None or not hasattr(pool, "warm_pool"):
        return "compile workers not started: this torch has no AsyncCompile.warm_pool"
    try:
        pool.warm_pool()
        with contextlib.suppress(AttributeError):
            pool.wakeup()  # the sidecar starts its workers now, not at the first kernel
    except Exception as e:  # torch's own start-up failed: the compile will say more
        return f"compile workers not started ({type(e).__name__}: {e})"
    return None


def wait(timeout_s: float = WAIT_S) -> str | None:
    """Block until the pool answers a job, so that every kernel of the compile that follows is
    compiled there. None: ready (or no pool: one compile thread); else why not, and the compile
    then runs with the race."""
    ac = _async_compile()
    if ac is None or _threads(ac) <= 1:
        return None
    pool = getattr(ac, "AsyncCompile", None)
    ready = getattr(pool, "wait_pool_ready", None)
    if ready is not None:
        try:
            ready(timeout=timeout_s)
        except Exception as e:
            return f"compile workers not ready ({type(e).__name__}: {e}); compiled as torch would"
        return None
    use = getattr(pool, "use_process_pool", None)
    if use is None:
        return "this torch cannot say when its compile workers are ready; compiled as torch would"
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            if use():
                return None
        except Exception as e:
            return f"compile workers not ready ({type(e).__name__}: {e}); compiled as torch would"
        time.sleep(0.01)
    return f"compile workers not ready after {timeout_s:.0f} s; compiled as torch would"
