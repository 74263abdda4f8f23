"""The shared compile cache from the measuring parent: what a credential may do there, checked
before anything runs, and a trusted run's graphs signed and stored.

Only a trusted run stores, and only from this process: its first cold compiles leave their
graphs in a folder (``remotecache.Outbox``), and the parent seals each one with the writer's key
(``compiler/remoteentries.py``) and writes it with the writer's credential. Neither the key nor
that credential is ever in a worker's environment, spec or files.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from compilewatch.compiler import remotecache, remoteentries, remoteproxy, remoteurl
from compilewatch.compiler.protocol import RemoteRead
from compilewatch.core import signing
from compilewatch.core.errors import RemoteCacheError

PROBE = ".probe"  # the key, in the trusted namespace, that the access check writes


@dataclass(frozen=True)
class Writer:
    """Where a trusted run stores its graphs, as whom, and the key that signs them."""

    endpoint: remoteurl.Endpoint = field(repr=False)
    key: Ed25519PrivateKey = field(repr=False)

    @property
    def public_key(self) -> str:
        return signing.public_key_text(self.key.public_key())


@dataclass(frozen=True)
class SharedCache:
    """A side's use of the shared cache: what its remote phases read, and (a trusted run)
    where its first cold compiles are stored."""

    read: RemoteRead
    writer: Writer | None = None
    # the parent's side of ``read``: reads the trusted namespace for the remote phases
    proxy: remoteproxy.Proxy | None = field(default=None, repr=False, compare=False)

    @property
    def role(self) -> str:
        return "write" if self.writer is not None else "read"


@dataclass(frozen=True)
class Access:
    """What one credential may do in the trusted namespace (``denied``: what Redis said when
    it refused a read)."""

    read: bool
    write: bool
    denied: str | None = field(default=None, compare=False)


_clients: dict[remoteurl.Endpoint, Any] = {}
_lock = threading.Lock()


def _client(endpoint: remoteurl.Endpoint) -> Any:
    """One client per endpoint for the run (redis' clients are thread-safe pools)."""
    with _lock:
        if endpoint not in _clients:
            _clients[endpoint] = remoteurl.connect(endpoint)
        return _clients[endpoint]


def access(endpoint: remoteurl.Endpoint) -> Access:
    """Read and write a probe key of the trusted namespace with ``endpoint``'s credential. A
    server that cannot be reached, or refuses the credential, is a ``RemoteCacheError``."""
    import redis

    client, probe = _client(endpoint), endpoint.namespace + PROBE
    try:
        denied = None
        try:
            client.get(probe)
        except redis.exceptions.NoPermissionError as e:
            denied = str(e)[:200]
        try:
            client.set(probe, b"", px=60_000)
            write = True
        except (redis.exceptions.NoPermissionError, redis.exceptions.ReadOnlyError):
            write = False
    except redis.exceptions.RedisError as e:
        raise RemoteCacheError(f"the shared compile cache {endpoint.shown()}: "
                               f"{type(e).__name__}: {str(e)[:300]}") from None
    return Access(read=denied is None, write=write, denied=denied)


def store(outbox: Path, writer: Writer) -> int:
    """Seal and store every graph ``outbox`` holds; how many. A server that fails is a
    ``RemoteCacheError`` (the measurement itself stands)."""
    import redis

    client, n = _client(writer.endpoint), 0
    try:
        for key, payload in remotecache.outbox_entries(outbox):
            where = writer.endpoint.namespace + key
            client.set(where, remoteentries.seal(where, payload, writer.key))
            n += 1
    except redis.exceptions.RedisError as e:
        raise RemoteCacheError(f"storing in {writer.endpoint.shown()} failed after {n} "
                               f"entries: {type(e).__name__}: {str(e)[:300]}") from None
    return n
