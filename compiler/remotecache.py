"""The shared compile cache inside a worker: what torch's remote caches may do, phase by phase.

A worker runs the repository's code, so whatever it reaches a PR can reach. Before it compiles
(``prepare``):

- every phase turns torch's own remote caches off (FX graph, AOTAutograd, autotuning, dynamic
  shapes' profiles), whatever the environment turned on: torch's Redis backend loads any
  pickle it finds there, unverified;
- the ``remote`` phase (an empty cache dir, after the cold compiles) reads Inductor's FX graph
  cache through ``Reader``: it asks the measuring parent for each key (``remoteproxy``: the
  worker holds no credential of the shared cache), loads only entries a pinned key signed for
  their key (``compiler/remoteentries.py``), verified before torch unpickles them, and never
  writes;
- a trusted run's first cold compile writes the graphs it compiled into a folder (``Outbox``)
  and reads nothing, so it stays cold; the parent signs and stores them
  (``compiler/remotestore.py``). No worker holds a credential that writes the shared cache.

Only the FX graph cache is shared: AOTAutograd's remote switch is part of its own cache key
(``torch._functorch.config`` is hashed whole), so turning it on for one phase would change that
phase's keys; Inductor leaves ``fx_graph_remote_cache`` out of its key. A remote hit therefore
still traces AOTAutograd, and loads Inductor's graphs. ``counted`` is what this process's
shared-cache lookups did, kept apart from torch's counters (which count local and remote hits
alike).
"""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compilewatch.compiler import remoteentries, remoteproxy
from compilewatch.compiler.protocol import RemoteRead, WorkerSpec
from compilewatch.core.files import write_atomic

# torch's remote caches (module, switch): a switch this torch lacks is skipped
_SWITCHES = (("torch._inductor.config", "fx_graph_remote_cache"),
             ("torch._inductor.config", "autotune_remote_cache"),
             ("torch._inductor.config", "bundled_autotune_remote_cache"),
             ("torch._functorch.config", "enable_remote_autograd_cache"),
             ("torch._dynamo.config", "automatic_dynamic_remote_pgo"))
KEY = remoteentries.KEY
MAX_ENTRY_BYTES = remoteentries.MAX_ENTRY_BYTES
OUTBOX_SUFFIX = ".entry"
NOTES = 4  # distinct notes a process keeps about the shared cache
NOTE = "shared compile cache: "  # how each begins


@dataclass
class Tally:
    """This process's shared-cache lookups (``Reader``) and the entries it left (``Outbox``)."""

    hits: int = 0
    misses: int = 0
    refused: int = 0
    errors: int = 0
    written: int = 0
    reading: bool = False
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if text not in self.notes and len(self.notes) < NOTES:
            self.notes.append(text)


TALLY = Tally()


def counted() -> dict[str, int]:
    """The ``CacheCounters`` fields of the shared cache for this process: empty unless it read
    the shared cache (an unreachable cache's lookups are misses)."""
    if not TALLY.reading:
        return {}
    return {"fx_remote_hit": TALLY.hits, "fx_remote_miss": TALLY.misses + TALLY.errors,
            "fx_remote_refused": TALLY.refused}


class Reader:
    """Inductor's remote FX graph cache backend in the ``remote`` phase: reads the trusted
    namespace through the measuring parent, hands torch only verified entries, and writes
    nothing."""

    def __init__(self, read: RemoteRead, tally: Tally) -> None:
        self.socket = read.socket
        self.namespace = read.namespace
        self.trusted = tuple(read.trusted_keys)
        self.tally = tally
        self._down = False

    def get(self, key: str) -> bytes | None:
        if self._down or not KEY.match(key):
            self.tally.misses += 1
            return None
        try:
            blob = remoteproxy.ask(self.socket, key)
        except remoteproxy.ProxyDown as e:  # no server, no parent: compile without it
            self._down = True
            self.tally.errors += 1
            self.tally.note(f"{NOTE}could not be read ({str(e)[:300]}); compiled without it")
            return None
        if blob is None:
            self.tally.misses += 1
            return None
        try:
            payload = remoteentries.unseal(self.namespace + key, blob, self.trusted)
        except remoteentries.EntryRefused as e:
            self.tally.refused += 1
            self.tally.note(f"{NOTE}an entry was refused, not loaded: {e}")
            return None
        self.tally.hits += 1
        return payload

    def put(self, key: str, data: bytes) -> None:
        """A reader stores nothing (what a PR compiled is never shared)."""


class Outbox:
    """Inductor's remote FX graph cache backend in a trusted run's first cold compile: finds
    nothing (the compile stays cold) and keeps each graph torch stores in a folder, for the
    parent to sign and store."""

    def __init__(self, folder: Path, tally: Tally) -> None:
        self.folder = folder
        self.tally = tally

    def get(self, key: str) -> bytes | None:
        return None

    def put(self, key: str, data: bytes) -> None:
        if not KEY.match(key) or not isinstance(data, bytes):
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha256(key.encode()).hexdigest()[:32] + OUTBOX_SUFFIX
        write_atomic(self.folder / name, key.encode() + b"\n" + data)
        self.tally.written += 1


def outbox_entries(folder: Path) -> Iterator[tuple[str, bytes]]:
    """What an ``Outbox`` left: (torch's key, torch's bytes); anything else there is skipped."""
    if not folder.is_dir():
        return
    for path in sorted(folder.glob(f"*{OUTBOX_SUFFIX}")):
        if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_ENTRY_BYTES:
            continue
        key, _, payload = path.read_bytes().partition(b"\n")
        text = key.decode("ascii", errors="replace")
        if KEY.match(text) and payload:
            yield text, payload


def _switches_off() -> None:
    """Each of torch's remote caches off where something turned it on. A switch left as it
    was keeps the cache keys a run without a remote cache has (AOTAutograd hashes its own)."""
    for module, name in _SWITCHES:
        try:
            config = importlib.import_module(module)
        except ImportError:
            continue
        if getattr(config, name, None):
            setattr(config, name, False)


def _use(backend: Callable[[], Any]) -> str | None:
    """Inductor's remote FX graph cache on, through ``backend``; why not (None: done)."""
    try:
        import torch._inductor.config as inductor_config
        from torch._inductor import remote_cache
    except ImportError as e:
        return f"this torch has no remote cache module ({e})"
    cls = getattr(remote_cache, "RemoteFxGraphCache", None)
    if cls is None or not hasattr(cls, "backend_override_cls") \
            or not hasattr(inductor_config, "fx_graph_remote_cache"):
        return ("this torch has no RemoteFxGraphCache.backend_override_cls, so its remote FX "
                "graph cache cannot be read through a verifying backend: not used")
    cls.backend_override_cls = backend
    inductor_config.fx_graph_remote_cache = True
    return None


def prepare(spec: WorkerSpec) -> str | None:
    """Before the compile (module docstring). Returns why the shared cache asked for cannot
    be used with this torch (None: ready, or not asked for)."""
    _switches_off()
    if spec.phase == "remote" and spec.remote_read is not None:
        TALLY.reading = True
        read = spec.remote_read
        return _use(lambda: Reader(read, TALLY))
    if spec.phase == "cold" and spec.remote_outbox is not None:
        folder = Path(spec.remote_outbox)
        return _use(lambda: Outbox(folder, TALLY))
    return None
