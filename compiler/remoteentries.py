"""One shared-cache entry as stored in Redis: torch's own bytes, sealed by a trusted writer.

A remote FX graph entry is a pickle, so loading it runs code its writer chose. Who can write a
key is Redis' to enforce (an ACL user per role), but a Redis that PR code reaches may accept
its writes anyway (no ACL, a user granted too much). So a reader loads nothing that a trusted
writer did not sign: each entry carries the writer's Ed25519 public key and its signature over
the entry's full Redis key and the sha256 of torch's bytes. The reader verifies it with keys it
pinned itself (``[tool.compilewatch] cache_public_keys``) before torch sees a byte. A public
key lets no one sign, so a reader that runs PR code can hold one; the signature covers the key,
so an entry copied to another key (another graph, another prefix) is refused too.

Layout: ``MAGIC``, the 32 raw bytes of the public key, the 64 of the signature, torch's bytes.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from compilewatch.core import signing

# torch's remote cache keys, ``pt2:fx-graph-v1::<key>:c1`` (``RedisRemoteCache._key_fmt``)
KEY = re.compile(r"^pt2:[A-Za-z0-9_.\-]{1,64}::[A-Za-z0-9_.\-]{1,256}:c[0-9]{1,6}$")
MAX_ENTRY_BYTES = 512 * 1024 * 1024  # Redis' own limit on one value
MAGIC = b"cwsc1\n"
_DOMAIN = b"compilewatch shared compile cache entry v1\n"
_HEAD = len(MAGIC) + 32 + 64


class EntryRefused(Exception):
    """An entry that must not be loaded; the message says why (never its content)."""


def _message(key: str, payload: bytes) -> bytes:
    return _DOMAIN + key.encode() + b"\n" + hashlib.sha256(payload).digest()


def seal(key: str, payload: bytes, private_key: Ed25519PrivateKey) -> bytes:
    """The stored form of ``payload`` at Redis key ``key``, signed with ``private_key``."""
    public = signing.public_key_text(private_key.public_key())
    raw = base64.b64decode(public.removeprefix("ed25519:"))
    return MAGIC + raw + private_key.sign(_message(key, payload)) + payload


def unseal(key: str, blob: bytes, trusted: Iterable[str]) -> bytes:
    """Torch's bytes from the entry stored at ``key``, if a trusted key signed them for
    ``key``; ``EntryRefused`` otherwise."""
    if not blob.startswith(MAGIC) or len(blob) < _HEAD:
        raise EntryRefused("not a signed entry (written by something other than a trusted "
                           "compilewatch writer)")
    raw, sig, payload = blob[len(MAGIC):len(MAGIC) + 32], blob[len(MAGIC) + 32:_HEAD], \
        blob[_HEAD:]
    public = "ed25519:" + base64.b64encode(raw).decode()
    if public not in {k.strip() for k in trusted}:
        raise EntryRefused(f"signed by {public[:20]}..., which is not a pinned cache public key")
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(sig, _message(key, payload))
    except InvalidSignature:
        raise EntryRefused("the signature does not match (altered, or moved from another "
                           "key)") from None
    return payload
