"""Who published a cache artifact: Ed25519 signatures over the manifest, keys pinned by the user.

A manifest's sha256 entries prove that a file is the one the manifest lists, not who wrote either:
anyone who can replace both can replace both. So the nightly signs the exact bytes of the
manifest it publishes (``manifest.json.sig`` beside it), and a consumer loads nothing unless the
signature verifies with a public key it pinned itself (``[tool.compilewatch] cache_public_keys``
or ``--cache-public-key``). Keys are written ``ed25519:<base64 of the 32 raw bytes>``; private
keys are PKCS#8 PEM files, the format ``openssl genpkey -algorithm ed25519`` writes.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from compilewatch.core.errors import CacheArtifactError, UsageError

SIGNATURE_SUFFIX = ".sig"
SIGNATURE_VERSION = 1
MAX_SIGNATURE_BYTES = 4096
_PUBLIC = re.compile(r"^ed25519:([A-Za-z0-9+/]{43}=)$")


@dataclass(frozen=True)
class Signature:
    """A detached signature: which key signed, and the signature over the manifest's bytes."""

    public_key: str
    signature: bytes

    def dumps(self) -> str:
        return json.dumps({"version": SIGNATURE_VERSION, "algorithm": "ed25519",
                           "public_key": self.public_key,
                           "signature": base64.b64encode(self.signature).decode()}) + "\n"


def public_key_text(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "ed25519:" + base64.b64encode(raw).decode()


def parse_public_key(text: str) -> Ed25519PublicKey:
    """``ed25519:<base64>`` to a key; anything else is a usage error naming the value."""
    m = _PUBLIC.match(text.strip())
    if not m:
        raise UsageError(f"cache public key {text[:80]!r} is not 'ed25519:' followed by the "
                         "base64 of 32 bytes (compilewatch keys generate prints one)")
    return Ed25519PublicKey.from_public_bytes(base64.b64decode(m.group(1)))


def generate() -> tuple[bytes, str]:
    """A new key pair: the private key as PKCS#8 PEM, and its public key text."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    return pem, public_key_text(key.public_key())


def load_private_key(pem: bytes) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as e:
        raise UsageError(f"the signing key is not an unencrypted PEM private key: {e}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError("the signing key is not an Ed25519 key (openssl genpkey -algorithm "
                         "ed25519, or compilewatch keys generate)")
    return key


def sign(data: bytes, private_pem: bytes) -> Signature:
    key = load_private_key(private_pem)
    return Signature(public_key_text(key.public_key()), key.sign(data))


def _parse_signature(raw: bytes, where: str) -> Signature:
    if len(raw) > MAX_SIGNATURE_BYTES:
        raise CacheArtifactError(f"{where}: signature file of {len(raw)} bytes is over the limit")
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or doc.get("version") != SIGNATURE_VERSION \
                or doc.get("algorithm") != "ed25519":
            raise ValueError("unknown version or algorithm")
        public_key, sig = str(doc["public_key"]), base64.b64decode(doc["signature"],
                                                                    validate=True)
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError) as e:
        raise CacheArtifactError(f"{where}: unreadable signature: {e}") from None
    return Signature(public_key, sig)


def verify(data: bytes, signature: bytes | None, trusted: Iterable[str], where: str) -> str:
    """The trusted public key that signed ``data``; raise why not (unsigned, untrusted signer,
    altered after signing, no key pinned)."""
    keys = list(dict.fromkeys(k.strip() for k in trusted))
    if not keys:
        raise CacheArtifactError(
            f"{where}: no cache public key is pinned, so no artifact can be trusted; add the "
            "nightly's key to [tool.compilewatch] cache_public_keys (or --cache-public-key)")
    if signature is None:
        raise CacheArtifactError(f"{where}: unsigned (no {SIGNATURE_SUFFIX} file beside the "
                                 "manifest): refusing to load code of unknown origin")
    sig = _parse_signature(signature, where)
    if sig.public_key not in keys:
        raise CacheArtifactError(f"{where}: signed by {sig.public_key[:20]}…, which is not a "
                                 "pinned cache public key")
    try:
        parse_public_key(sig.public_key).verify(sig.signature, data)
    except (InvalidSignature, UsageError):
        raise CacheArtifactError(f"{where}: the signature does not match the manifest (altered "
                                 "after signing)") from None
    return sig.public_key
