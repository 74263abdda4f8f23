"""Inductor's compile workers, started early and ready before a cold compile's clock starts
(``--ready-compile-workers``).

Why: torch starts its pool of compile workers when ``torch.compile`` builds the Inductor
backend, and compiles a Triton kernel in the pool only if the pool *happens* to be ready at
that moment (``AsyncCompile.use_process_pool`` returns whether a dummy job has finished), in
the process itself otherwise. The pool's start imports torch in a sidecar process: seconds. A
cold compile of a few seconds may therefore compile some kernels here and some there,
depending on a race, the suspect for how much cold compiles disagree. Started while the
worker builds the model and runs eager, and answered by a fresh job before the clock starts,
every kernel goes to the pool. The wait is the phase ``compile_workers``: Inductor's start-up,
like the import, and not the compile the verdict judges. The race turned out not to be the
cause (docs/verdict-quality.md, "Compile workers ready before the clock"), so the flag is off
by default; it stays for comparing where kernels compile.

Only where torch itself would start the pool (Triton installed, ``TORCH_WARM_POOL`` not 0,
more than one compile thread): C++ kernels use threads, not this pool. Private torch APIs, so
each step checks that they exist; where one does not, the compile runs as torch would run it
and a note says the race was not removed.
"""

from __future__ import annotations

import contextlib
import os
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


def _pool() -> Any | None:
    """torch's ``AsyncCompile`` where torch would start a compile-worker pool here at all (its
    own conditions in ``maybe_warm_pool``, and more than one compile thread); None elsewhere,
    or where this torch has no ``AsyncCompile``."""
    ac = _async_compile()
    if ac is None or _threads(ac) <= 1 or os.environ.get("TORCH_WARM_POOL", "1") != "1" \
            or not _has_triton():
        return None
    return getattr(ac, "AsyncCompile", None)


def _has_triton() -> bool:
    try:
        from torch.utils._triton import has_triton_package
    except ImportError:
        return False
    return bool(has_triton_package())


def start() -> str | None:
    """Start the pool now (one worker per compile thread), as torch.compile's backend would at
    the first compile. None: started, or nothing to start (``_pool``); else why not."""
    pool = _pool()
    if pool is None:
        return None
    if not hasattr(pool, "warm_pool"):
        return "compile workers not started: this torch has no AsyncCompile.warm_pool"
    try:
        pool.warm_pool()
        with contextlib.suppress(AttributeError):
            pool.wakeup()  # the sidecar starts its workers now, not at the first kernel
    except Exception as e:  # torch's own start-up failed: the compile will say more
        return f"compile workers not started ({type(e).__name__}: {e})"
    return None


def wait(timeout_s: float = WAIT_S) -> str | None:
    """Block until the pool's workers answer a job submitted now, so that every kernel of the
    compile that follows goes to them. A job answered earlier is not enough: torch shuts idle
    workers down after a while (``quiesce_async_compile_time``, 60 s) and starts them again at
    the next job, inside the compile's clock. None: ready, or no pool (``_pool``); else why
    not, and the compile then runs as torch would run it."""
    pool = _pool()
    if pool is None:
        return None
    process_pool = getattr(pool, "process_pool", None)
    if process_pool is None:
        return "this torch cannot say when its compile workers are ready; compiled as torch would"
    try:
        with contextlib.suppress(AttributeError):
            pool.wakeup()
        own = getattr(pool, "wait_pool_ready", None)
        if own is not None:  # torch's ready job, which its use_process_pool asks about
            own(timeout=timeout_s)
        made = getattr(process_pool(), "ready_future", None)  # older torch: made with the pool
        if made is not None:
            made.result(timeout=timeout_s)
        job = getattr(pool, "_get_ready", None) or os.getpid
        process_pool().submit(job).result(timeout=timeout_s)
    except Exception as e:
        return f"compile workers not ready ({type(e).__name__}: {e}); compiled as torch would"
    return None
