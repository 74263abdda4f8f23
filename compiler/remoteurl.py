"""Where the shared compile cache is and how to reach it: a ``redis://`` or ``rediss://`` URL,
checked once, and the Redis client it opens.

``redis[s]://[USER[:PASSWORD]@]HOST[:PORT][/DB][?prefix=NAME&ssl_ca_certs=PATH]``: an ACL user
and its password (or a password alone, for Redis' ``requirepass``), a database number, TLS with
``rediss://`` (``ssl_ca_certs`` names the CA file when the server's certificate is not signed by
one the system trusts), and the prefix of every key compilewatch reads or writes there. Every
part is checked here, so a bad URL is refused at the start of a command, naming the part.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from compilewatch.core.errors import UsageError

DEFAULT_PREFIX = "compilewatch"
PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
_HOST = re.compile(r"^([A-Za-z0-9_.\-]{1,253}|[0-9A-Fa-f:.]{2,45})$")  # a name, or IPv6
_PARAMS = ("prefix", "ssl_ca_certs")
CONNECT_TIMEOUT_S = 5.0
SOCKET_TIMEOUT_S = 30.0  # one GET or SET of an entry (a large model's graph is megabytes)


@dataclass(frozen=True)
class Endpoint:
    """One Redis and one identity on it, parsed from a URL. ``namespace`` is the key prefix
    of the entries trusted runs write: the only place any run reads from."""

    host: str
    port: int = 6379
    db: int = 0
    username: str | None = None
    password: str | None = None
    tls: bool = False
    ca_certs: str | None = None
    prefix: str = DEFAULT_PREFIX

    @property
    def namespace(self) -> str:
        return f"{self.prefix}:trusted:"

    @property
    def has_credential(self) -> bool:
        return self.username is not None or self.password is not None

    def shown(self) -> str:
        """The URL without its password, for messages and notes."""
        user = f"{quote(self.username or '', safe='')}{':***' if self.password else ''}@" \
            if self.has_credential else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'rediss' if self.tls else 'redis'}://{user}{host}:{self.port}/{self.db}" \
               f"?prefix={self.prefix}"


def _redacted(url: str) -> str:
    """``url`` with everything of its user part but a user name (before a ``:``) as ``***``:
    a malformed URL's password is still a password."""
    head, sep, rest = url.strip().partition("://")
    if not sep or "@" not in rest:
        return url.strip()
    who, _, where = rest.rpartition("@")
    user, colon, _ = who.partition(":")
    return f"{head}://{user + ':***' if colon else '***'}@{where}"


def _fail(url: str, what: str) -> UsageError:
    shown = _redacted(url)[:120]
    return UsageError(f"remote cache URL {shown!r}: {what} (expected redis[s]://[USER[:PASSWORD]"
                      "@]HOST[:PORT][/DB][?prefix=NAME&ssl_ca_certs=PATH])")


def parse(url: str) -> Endpoint:
    """The URL as an ``Endpoint``; a ``UsageError`` naming the part that is wrong."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:  # its text may quote the password: a colon there reads as a port
        raise _fail(url, "the port is not a number from 1 to 65535") from None
    if parts.scheme not in ("redis", "rediss"):
        raise _fail(url, f"scheme {parts.scheme or '(none)'!r} is neither redis nor rediss")
    host = parts.hostname or ""
    if not _HOST.match(host):
        raise _fail(url, "no host, or a host name with characters a host name cannot have")
    if port is not None and not 0 < port < 65536:
        raise _fail(url, f"port {port} is not from 1 to 65535")
    if parts.fragment:
        raise _fail(url, "a fragment (#...) means nothing here")
    params = _params(url, parts.query)
    tls = parts.scheme == "rediss"
    ca = params.get("ssl_ca_certs")
    if ca is not None and not tls:
        raise _fail(url, "ssl_ca_certs is for rediss:// (TLS) only")
    if ca is not None and not Path(ca).is_file():
        raise _fail(url, f"ssl_ca_certs {ca[:200]!r} is not a file")
    prefix = params.get("prefix", DEFAULT_PREFIX)
    if not PREFIX.match(prefix):
        raise _fail(url, f"prefix {prefix[:80]!r} is not 1-64 letters, digits, '_', '.' or '-'")
    return Endpoint(host=host, port=port or 6379, db=_db(url, parts.path),
                    username=unquote(parts.username) if parts.username else None,
                    password=unquote(parts.password) if parts.password is not None else None,
                    tls=tls, ca_certs=ca, prefix=prefix)


def _db(url: str, path: str) -> int:
    text = path.strip("/")
    if not text:
        return 0
    if not text.isdigit() or len(text) > 5:
        raise _fail(url, f"database {text[:20]!r} is not a number (the path is /DB)")
    return int(text)


def _params(url: str, query: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in _PARAMS:
            raise _fail(url, f"unknown parameter {key[:40]!r} (known: {', '.join(_PARAMS)})")
        if key in out:
            raise _fail(url, f"parameter {key!r} given twice")
        out[key] = value
    return out


def available() -> bool:
    """Whether the ``redis`` package is installed (the ``redis`` extra)."""
    return importlib.util.find_spec("redis") is not None


def connect(endpoint: Endpoint) -> Any:
    """A Redis client for ``endpoint`` (it connects on first use). The ``redis`` package is an
    optional dependency: its absence is a ``UsageError`` saying how to install it."""
    try:
        import redis
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry
    except ImportError:
        raise UsageError("the shared compile cache needs the redis package: pip install "
                         "'compilewatch[redis]'") from None
    tls: dict[str, Any] = {"ssl": True, "ssl_cert_reqs": "required",
                           "ssl_ca_certs": endpoint.ca_certs} if endpoint.tls else {}
    return redis.Redis(host=endpoint.host, port=endpoint.port, db=endpoint.db,
                       username=endpoint.username, password=endpoint.password,
                       socket_connect_timeout=CONNECT_TIMEOUT_S,
                       socket_timeout=SOCKET_TIMEOUT_S,
                       # one retry: redis' default (three, backing off) made an unreachable
                       # server cost every check and every compile seconds
                       retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 1), **tls)
