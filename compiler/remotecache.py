"""Inductor's remote FX graph cache on Redis, shared by the shards of a group: for warm compiles
and timing processes only. A cold compile never reads it (it would not be cold), and neither
does a warm start (it times the published artifact alone). docs/scale.md says when it helps.

The option travels as environment (``RunOptions.extra_env``, the same for every process of a
side); each worker turns the remote cache off for itself unless its phase may use it
(``for_phase``), so the loop needs no per-phase environment.
"""

from __future__ import annotations

import re

from compilewatch.core.errors import UsageError

PHASES = frozenset({"warm"})  # warm compiles, and the timing processes (phase "warm" too)
# Inductor's and AOTAutograd's switches for a remote cache (a user's own environment may turn
# them on: TORCHINDUCTOR_* is allowed through to workers)
_SWITCHES = (("torch._inductor.config", "fx_graph_remote_cache"),
             ("torch._functorch.config", "enable_remote_autograd_cache"))
_URL = re.compile(r"^redis://(?P<host>[A-Za-z0-9_.\-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\])"
                  r"(?::(?P<port>\d{1,5}))?/?$")


def parse(url: str) -> tuple[str, int]:
    """``redis://HOST[:PORT]`` -> (host, port). No password: a worker runs PR code, and a
    Redis a PR job reaches is one it may write (docs/scale.md)."""
    m = _URL.match(url.strip())
    port = int(m["port"] or 6379) if m else 0
    if not m or not 0 < port < 65536:
        raise UsageError(f"--remote-cache {url[:80]!r}: expected redis://HOST[:PORT] (no user "
                         "or password)")
    return m["host"].strip("[]"), port


def worker_env(url: str | None) -> dict[str, str]:
    """What a side's workers get for ``--remote-cache URL`` (nothing without one)."""
    if url is None:
        return {}
    host, port = parse(url)
    return {"TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "1", "TORCHINDUCTOR_REDIS_HOST": host,
            "TORCHINDUCTOR_REDIS_PORT": str(port)}


def for_phase(phase: str) -> None:
    """In a worker, before it compiles: no remote cache outside ``PHASES``. Torch reads the
    switches at each compile, and neither is part of a cache key (Inductor ignores
    ``fx_graph_remote_cache`` in its key), so turning one off keeps a cold compile's keys."""
    if phase in PHASES:
        return
    import importlib

    for module, name in _SWITCHES:
        config = importlib.import_module(module)
        if getattr(config, name, None):
            setattr(config, name, False)
