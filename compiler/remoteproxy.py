"""The shared compile cache read through the measuring parent, so that no process running the
repository's code holds its credential.

A remote phase's worker runs the repository's code, and whatever it holds a PR can take: the
reader's URL and password included. So the worker holds neither. It asks this process, over a
Unix socket in a folder only this user can open, for one key of torch's form
(``remoteentries.KEY``); the parent reads that key of the trusted namespace with the reader's
credential and answers with the stored bytes, still sealed (the worker verifies them against
the pinned keys before torch sees them, ``compiler/remoteentries.py``). The parent only reads:
nothing a worker sends is ever written anywhere. The parent itself is made non-dumpable while
it holds the credential (``proctree.set_dumpable``), so another process of its user cannot read
its environment or memory through ``/proc``.

A request is one line, the key; the answer one status byte (``HIT`` with an 8-byte length and
the entry, ``MISS``, or ``DOWN`` with a length and why the shared cache could not be read).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import socketserver
import struct
import tempfile
import threading
from typing import Any

from compilewatch.compiler import remoteentries, remoteurl

HIT, MISS, DOWN = b"H", b"M", b"D"
MAX_REQUEST = 512  # a key of torch's form is under 400 bytes
MAX_ENTRY_BYTES = remoteentries.MAX_ENTRY_BYTES
TIMEOUT_S = 120.0
_LENGTH = struct.Struct(">Q")


class ProxyDown(Exception):
    """The parent could not read the shared cache, or could not be reached."""


class Proxy:
    """The parent's side: a thread answering the remote phases' lookups with one client."""

    def __init__(self, endpoint: remoteurl.Endpoint) -> None:
        self.endpoint = endpoint
        self.folder = tempfile.mkdtemp(prefix="compilewatch-shared-cache-")
        os.chmod(self.folder, 0o700)
        self.path = os.path.join(self.folder, "socket")
        self._client: Any = None
        self._lock = threading.Lock()
        self._server = _Server(self.path, _Handler)
        self._server.proxy = self
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="shared-cache-proxy", daemon=True)
        self._thread.start()

    def answer(self, request: bytes) -> bytes:
        """The reply to one request line."""
        key = request.decode("ascii", errors="replace").strip()
        if not remoteentries.KEY.match(key):
            return MISS
        try:
            with self._lock:
                if self._client is None:
                    self._client = remoteurl.connect(self.endpoint)
                client = self._client
            blob = client.get(self.endpoint.namespace + key)
        except Exception as e:  # redis' errors, a server gone: the worker compiles without it
            why = f"{type(e).__name__}: {str(e)[:300]}".encode("utf-8", errors="replace")
            return DOWN + _LENGTH.pack(len(why)) + why
        if blob is None or len(blob) > MAX_ENTRY_BYTES:
            return MISS
        return HIT + _LENGTH.pack(len(blob)) + bytes(blob)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._server.shutdown()
            self._server.server_close()
        shutil.rmtree(self.folder, ignore_errors=True)


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    proxy: Proxy


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.connection.settimeout(TIMEOUT_S)
        with contextlib.suppress(OSError):
            line = self.rfile.readline(MAX_REQUEST)
            server = self.server
            assert isinstance(server, _Server)
            self.wfile.write(server.proxy.answer(line))


def ask(path: str, key: str) -> bytes | None:
    """The worker's side: the sealed entry the parent read for ``key``, or None (a miss).
    ``ProxyDown`` where the parent could not read the shared cache or be reached."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(TIMEOUT_S)
            s.connect(path)
            s.sendall(key.encode("ascii") + b"\n")
            reply = s.makefile("rb")
            status = reply.read(1)
            if status == MISS:
                return None
            if status not in (HIT, DOWN):
                raise ProxyDown(f"the parent's answer was not understood ({status!r})")
            (n,) = _LENGTH.unpack(_exact(reply, _LENGTH.size))
            if n > MAX_ENTRY_BYTES:
                raise ProxyDown(f"the parent's answer is {n} bytes, over the limit")
            data = _exact(reply, n)
    except OSError as e:
        raise ProxyDown(f"the measuring parent could not be asked ({type(e).__name__}: "
                        f"{e})") from None
    if status == DOWN:
        raise ProxyDown(data.decode("utf-8", errors="replace"))
    return data


def _exact(reply: Any, n: int) -> bytes:
    data = reply.read(n)
    if len(data) != n:
        raise ProxyDown("the parent's answer was cut short")
    return bytes(data)
