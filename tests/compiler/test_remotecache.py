"""``--remote-cache``: Inductor's FX graph cache on the real Redis, read by warm compiles and
timing processes, never by a cold compile. Each compile runs in a process of its own with the
environment a worker gets (``worker_env``) and an empty cache dir of its own, as on two
runners."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from compilewatch.compiler import remotecache
from compilewatch.compiler.processes import worker_env
from compilewatch.core.errors import UsageError

redis = pytest.importorskip("redis")
URL = "redis://127.0.0.1:6379"

COMPILE = """
import json, sys
import torch
from compilewatch.compiler import remotecache
from torch._dynamo.utils import counters

remotecache.for_phase(sys.argv[1])
scale = float(sys.argv[2])  # a constant of this test's own: its graphs, its keys

def f(x):
    return torch.nn.functional.gelu(x * scale) + x.sin()

torch.compile(f)(torch.randn(8, 8))
print(json.dumps({k: v for k, v in counters["inductor"].items() if k.startswith("fxgraph")}))
"""


def _compile(phase: str, scale: float, cache: Path) -> dict[str, int]:
    env = worker_env(cache, remotecache.worker_env(URL))
    out = subprocess.run([sys.executable, "-c", COMPILE, phase, str(scale)], env=env,
                         capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture
def server():  # type: ignore[no-untyped-def]
    """The machine's Redis; the keys this test adds are removed after it. Inductor names its
    keys ``pt2:fx-graph-v1::<key>:c<version>`` and takes no prefix, so the test's graphs are its
    own instead (a constant of this test in them: keys no other test or run can have)."""
    client = redis.Redis(host="127.0.0.1", port=6379, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.exceptions.ConnectionError:
        pytest.skip("Redis at 127.0.0.1:6379 is not reachable")
    before = set(client.scan_iter("pt2:*"))
    yield client
    added = set(client.scan_iter("pt2:*")) - before
    if added:
        client.delete(*added)


def test_a_warm_compile_on_another_runner_hits_the_remote_cache(server, tmp_path: Path  # type: ignore[no-untyped-def]
                                                                ) -> None:
    scale = 1.0 + uuid.uuid4().int % 10_000 / 1e5
    keys_before = set(server.scan_iter("pt2:*"))
    # the first warm compile (one runner) misses and fills it ...
    first = _compile("warm", scale, tmp_path / "b")
    assert first.get("fxgraph_cache_hit", 0) == 0 and first["fxgraph_cache_miss"] >= 1
    assert set(server.scan_iter("pt2:*")) - keys_before
    # ... a warm compile on another (its local cache empty) hits it
    second = _compile("warm", scale, tmp_path / "c")
    assert second["fxgraph_cache_hit"] >= 1 and second.get("fxgraph_cache_miss", 0) == 0
    # and a cold compile, where the entry is there to be had, neither reads nor writes it
    keys = set(server.scan_iter("pt2:*"))
    cold = _compile("cold", scale, tmp_path / "d")
    assert cold.get("fxgraph_cache_hit", 0) == 0 and cold["fxgraph_cache_miss"] >= 1
    assert set(server.scan_iter("pt2:*")) == keys


def test_the_option() -> None:
    assert remotecache.worker_env(None) == {}
    assert remotecache.worker_env("redis://cache.internal:6380") == {
        "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "1", "TORCHINDUCTOR_REDIS_HOST": "cache.internal",
        "TORCHINDUCTOR_REDIS_PORT": "6380"}
    assert remotecache.parse("redis://10.0.0.5") == ("10.0.0.5", 6379)
    for bad in ("redis://user:pw@host:6379", "http://host", "redis://host:99999", "redis://"):
        with pytest.raises(UsageError, match="--remote-cache"):
            remotecache.parse(bad)
