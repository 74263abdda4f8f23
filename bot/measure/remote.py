"""A measuring command's part in the shared compile cache (``--remote-cache``): its role, its
credentials, and what is checked before anything is measured.

Two roles (docs/security.md, "The shared compile cache"):

- a **trusted writer** (``nightly``; ``run --remote-cache-write`` on a trusted runner, measuring
  a branch you vouch for) stores each first cold compile's graphs, signed, in the trusted
  namespace, with the writer's credential (``COMPILEWATCH_REMOTE_CACHE_WRITER``, else the
  reader URL) and key (``COMPILEWATCH_REMOTE_CACHE_KEY``). Neither reaches a worker;
- a **reader** (``pr``, any other ``run``) stores nothing, anywhere: what a PR compiled is never
  shared. Its URL (``--remote-cache`` or ``COMPILEWATCH_REMOTE_CACHE``) stays in this process,
  which reads for the remote phase's workers (``compiler/remoteproxy.py``) and is made
  non-dumpable while it holds it; no worker, which runs the repository's code, holds it. ``pr``
  still refuses one whose credential Redis lets write the trusted namespace: on a runner where
  a PR can become root (a hosted runner's sudo), no process of the runner keeps a secret.

Every remote phase loads only what a pinned key signed, so a Redis that accepts anyone's writes
can be emptied by a PR, never made to run its code in a trusted run.
"""

from __future__ import annotations

import atexit
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from compilewatch.compiler import proctree, remoteproxy, remoteurl
from compilewatch.compiler.protocol import RemoteRead
from compilewatch.compiler.remotestore import SharedCache, Writer, access
from compilewatch.core import signing
from compilewatch.core.errors import RemoteCacheError, UsageError

log = logging.getLogger(__name__)  # the CLI shows these on stderr

READER_ENV = "COMPILEWATCH_REMOTE_CACHE"  # the reader's URL (the --remote-cache default)
WRITER_ENV = "COMPILEWATCH_REMOTE_CACHE_WRITER"  # the trusted writer's URL
KEY_ENV = "COMPILEWATCH_REMOTE_CACHE_KEY"  # the trusted writer's Ed25519 private key (PEM)
ACL_HINT = ("a Redis ACL user that may only read, e.g. `ACL SETUSER pr on >PASSWORD "
            "resetkeys ~PREFIX:trusted:* resetchannels -@all +get +select`")


@dataclass(frozen=True)
class RemoteCacheOptions:
    """``--remote-cache URL`` and whether this command stores its compiles there."""

    url: str | None = None
    write: bool = False


def check_url(url: str | None, *, from_command_line: bool) -> None:
    """Refuse a bad URL, or a password where every process of the machine can read it,
    before anything else runs."""
    if url is None:
        return
    endpoint = remoteurl.parse(url)
    if endpoint.password is not None and from_command_line:
        raise UsageError(f"--remote-cache {endpoint.shown()}: a password on the command line is "
                         f"readable by every process of this machine; put the URL in "
                         f"{READER_ENV} instead")


def setup(opts: RemoteCacheOptions, *, trusted_keys: Iterable[str], runs_pr_code: bool,
          environ: Mapping[str, str] | None = None) -> SharedCache | None:
    """What the side's jobs use of the shared cache, after checking that each credential may
    do what its role needs and no more than ``runs_pr_code`` allows; None without one."""
    if opts.url is None:
        return None
    env = os.environ if environ is None else environ
    reader = remoteurl.parse(opts.url)
    got = access(reader)
    if not got.read:
        raise RemoteCacheError(f"{reader.shown()}: this credential may not read "
                               f"{reader.namespace}*, where every run reads ({got.denied}); "
                               f"a reader needs +get there (and +select for a database "
                               "other than 0)")
    writer = _writer(opts, reader, env)
    keys = tuple(dict.fromkeys([*(k.strip() for k in trusted_keys),
                                *([writer.public_key] if writer else [])]))
    if writer is None and got.write:
        _reader_writes(reader, runs_pr_code)
    if not keys:
        raise UsageError("no cache public key is pinned, so no entry of the shared compile "
                         "cache could be loaded: add the trusted writer's public key to "
                         "[tool.compilewatch] cache_public_keys (or --cache-public-key)")
    for key in keys:
        signing.parse_public_key(key)
    proctree.set_dumpable(False)  # this process holds the reader's credential from now on
    proxy = remoteproxy.Proxy(reader)
    atexit.register(proxy.close)
    read = RemoteRead(socket=proxy.path, namespace=reader.namespace, trusted_keys=keys)
    return SharedCache(read, writer, proxy)


def _reader_writes(reader: remoteurl.Endpoint, runs_pr_code: bool) -> None:
    """A reader that Redis lets write the trusted namespace: refused where the repository's
    code could take the credential from a worker and it is one (a user, a password);
    otherwise said, since anyone who reaches the server can then empty or fill it."""
    if runs_pr_code and reader.has_credential:
        raise RemoteCacheError(
            f"{reader.shown()}: this credential may write {reader.namespace}*, and pr measures "
            f"on a runner that runs the PR's code; give pr {ACL_HINT}")
    log.warning("shared compile cache %s: this reader may write %s*, so whoever reaches it "
                "can overwrite or empty what trusted runs stored (never make a run load it: "
                "every entry is verified before it is loaded); give readers %s",
                reader.shown(), reader.namespace, ACL_HINT)


def _writer(opts: RemoteCacheOptions, reader: remoteurl.Endpoint,
            env: Mapping[str, str]) -> Writer | None:
    if not opts.write:
        return None
    pem = env.get(KEY_ENV, "").encode()
    if not pem.strip():
        raise UsageError(f"storing in the shared compile cache needs the trusted writer's "
                         f"signing key: set {KEY_ENV} to an Ed25519 private key (PEM; "
                         "`compilewatch keys generate` makes a pair) and pin its public key "
                         "in [tool.compilewatch] cache_public_keys")
    key = signing.load_private_key(pem)
    url = env.get(WRITER_ENV)
    try:
        endpoint = remoteurl.parse(url) if url else reader
    except UsageError as e:
        raise UsageError(f"{WRITER_ENV}: {e}") from None
    if endpoint.prefix != reader.prefix:
        raise UsageError(f"{WRITER_ENV} has prefix {endpoint.prefix!r} and --remote-cache "
                         f"{reader.prefix!r}: the remote phases would read where nothing is "
                         "stored")
    if not access(endpoint).write:
        raise RemoteCacheError(f"{endpoint.shown()}: the writer's credential may not write "
                               f"{endpoint.namespace}*")
    return Writer(endpoint, key)
