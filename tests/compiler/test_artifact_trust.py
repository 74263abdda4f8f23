"""A cache artifact is code: the tampered-artifact matrix. Every case must be refused before
torch sees a byte, with a reason that says what was wrong, and nothing may be written outside the
private directory. No compiles here (tests/compiler/test_artifacts.py runs real ones)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from compilewatch.bot.cache.publish import write_signed
from compilewatch.compiler import artifacts as art
from compilewatch.core import signing
from compilewatch.core.errors import CacheArtifactError
from tests.factories import megacache

FP = "f" * 32
SLUG = "cpu-default-float32-auto"
NAME = art.artifact_name("micro", "m", SLUG)


def _manifest(data: bytes, **over: object) -> art.Manifest:
    entry = {"suite": "micro", "model": "m", "config_slug": SLUG, "file": NAME,
             "size_bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
             "verified": True} | over
    return art.Manifest(manifest_version=1, created_at="2026-12-01T00:00:00", fingerprint=FP,
                        torch="2.13.0", artifacts=[art.ArtifactEntry(**entry)])


def publish(root: Path, data: bytes, key: bytes | None, **over: object) -> Path:
    """A published folder as the nightly writes it: artifact, manifest, signature."""
    root.mkdir(parents=True, exist_ok=True)
    (root / NAME).write_bytes(data)
    man = _manifest(data, **over)
    if key is None:
        art.write_manifest(man, root / art.MANIFEST_NAME)
    else:
        write_signed(man, root / art.MANIFEST_NAME, key)
    return root


GOOD = megacache({"inductor": [("fgoodkey", b"graph")], "aot_autograd": [("agoodkey", b"aot")],
                  "autotune": [("ab/abcdef.best_config", b"{}")]})


@pytest.fixture
def keys(signing_pair: tuple[bytes, str]) -> tuple[bytes, str]:
    return signing_pair


def _select(root: Path, trusted: list[str], private: Path) -> Path:
    private.mkdir(exist_ok=True)
    return art.select(root, suite="micro", model="m", slug=SLUG, fingerprint=FP,
                      torch_version="2.13.0", trusted_keys=trusted, private=private)


def test_a_signed_honest_artifact_is_selected(tmp_path: Path, keys: tuple[bytes, str]) -> None:
    key, public = keys
    root = publish(tmp_path / "pub", GOOD, key)
    copy = _select(root, [public], tmp_path / "private")
    assert copy == tmp_path / "private" / NAME and copy.read_bytes() == GOOD
    assert art.inspect_megacache(GOOD) == {"inductor": ["fgoodkey"], "aot_autograd": [
        "agoodkey"], "autotune": ["ab/abcdef.best_config"]}


def _other_key() -> bytes:
    return signing.generate()[0]


def _rewrite_manifest(root: Path, **change: object) -> None:
    path = root / art.MANIFEST_NAME
    data = json.loads(path.read_text())
    data["artifacts"][0].update(change)
    path.write_text(json.dumps(data))


def _swap_file(root: Path, data: bytes) -> None:
    """Replace the artifact and rewrite the manifest's size and sha256 to match it."""
    (root / NAME).write_bytes(data)
    _rewrite_manifest(root, size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest())


EVIL_PTH = "import os; os.system('touch /tmp/compilewatch-pwned')\n"

# (case, how to build the published folder from (root, trusted key), expected reason)
Case = tuple[str, Callable[[Path, bytes], None], str]
CASES: list[Case] = [
    ("unsigned", lambda r, k: publish(r, GOOD, None), "unsigned"),
    ("wrong signer", lambda r, k: publish(r, GOOD, _other_key()), "not a pinned"),
    ("swapped file, manifest rewritten",
     lambda r, k: (publish(r, GOOD, k), _swap_file(r, megacache(
         {"inductor": [("fgoodkey", b"other graph")]}))), "altered after signing"),
    ("swapped file and manifest re-signed by another key",
     lambda r, k: (publish(r, megacache({"inductor": [("fgoodkey", b"evil")]}),
                           _other_key())), "not a pinned"),
    ("unverified entry flipped to verified",
     lambda r, k: (publish(r, GOOD, k, verified=False, reason="x"),
                   _rewrite_manifest(r, verified=True)), "altered after signing"),
    ("signature of another manifest",
     lambda r, k: (publish(r / "a", GOOD, k), publish(r, GOOD + b"", k, size_bytes=len(GOOD)),
                   os.replace(r / "a" / "manifest.json.sig", r / "manifest.json.sig"),
                   _rewrite_manifest(r, reason="changed")), "altered after signing"),
    ("garbage signature", lambda r, k: (publish(r, GOOD, k),
                                        (r / "manifest.json.sig").write_text("{nope")),
     "unreadable signature"),
    # Signed by the trusted key (its holder made a mistake, or the key leaked): the entries are
    # inspected all the same.
    ("absolute autotune key", lambda r, k: publish(r, megacache(
        {"autotune": [("/usr/lib/python3/site-packages/evil.pth", EVIL_PTH.encode())]}), k),
     "outside the cache directory"),
    ("dot-dot autotune key", lambda r, k: publish(r, megacache(
        {"autotune": [("../../evil.pth", EVIL_PTH.encode())]}), k), "outside the cache"),
    ("dot-dot in the second part", lambda r, k: publish(r, megacache(
        {"autotune": [("ab/..", b"{}")]}), k), "outside the cache"),
    ("separator in an FX key", lambda r, k: publish(r, megacache(
        {"inductor": [("f/../../x", b"graph")]}), k), "outside the cache"),
    ("absolute AOT key", lambda r, k: publish(r, megacache(
        {"aot_autograd": [("/etc/cron.d/x", b"aot")]}), k), "outside the cache"),
    ("entry type we never publish", lambda r, k: publish(r, megacache(
        {"precompile": [("k", b"code")]}), k), "does not publish"),
    ("corrupt framing", lambda r, k: publish(r, GOOD[:-3] + b"abc", k),
     "checksum does not match"),
    ("not a cache at all", lambda r, k: publish(r, b"\x00" * 64, k), "not a cache artifact"),
    ("truncated after signing", lambda r, k: (publish(r, GOOD, k),
                                              (r / NAME).write_bytes(GOOD[:-10])),
     "truncated or padded"),
    ("symlink to /dev/zero", lambda r, k: (publish(r, GOOD, k), (r / NAME).unlink(),
                                           (r / NAME).symlink_to("/dev/zero")),
     "not a regular file"),
    ("FIFO", lambda r, k: (publish(r, GOOD, k), (r / NAME).unlink(), os.mkfifo(r / NAME)),
     "not a regular file"),
    ("manifest is a symlink", lambda r, k: (publish(r.parent / "elsewhere", GOOD, k),
                                            publish(r, GOOD, k),
                                            (r / art.MANIFEST_NAME).unlink(),
                                            (r / art.MANIFEST_NAME).symlink_to(
                                                r.parent / "elsewhere" / art.MANIFEST_NAME)),
     "not a regular file"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_tampered_artifacts_are_refused_before_loading(case: Case, tmp_path: Path,
                                                       keys: tuple[bytes, str]) -> None:
    _, build, reason = case
    key, public = keys
    root = tmp_path / "pub"
    root.mkdir()
    build(root, key)
    before = {p for p in tmp_path.rglob("*")}
    with pytest.raises(CacheArtifactError, match=reason):
        _select(root, [public], tmp_path / "private")
    assert not any((tmp_path / "private").iterdir()), "a refused artifact was copied"
    assert {p for p in tmp_path.rglob("*")} - before <= {tmp_path / "private"}
    assert not Path("/tmp/compilewatch-pwned").exists()


def test_a_huge_artifact_is_refused_by_its_size_unread(tmp_path: Path,
                                                       keys: tuple[bytes, str]) -> None:
    """A sparse 2 GiB file listed honestly in a signed manifest: refused from lstat alone."""
    key, public = keys
    root = tmp_path / "pub"
    root.mkdir()
    huge = root / NAME
    with open(huge, "wb") as f:
        f.truncate(2 * 1024 ** 3)
    write_signed(_manifest(b"", size_bytes=2 * 1024 ** 3, sha256="0" * 64),
                 root / art.MANIFEST_NAME, key)
    with pytest.raises(CacheArtifactError, match="over the limit"):
        _select(root, [public], tmp_path / "private")


def test_without_a_pinned_key_nothing_is_trusted(tmp_path: Path,
                                                 keys: tuple[bytes, str]) -> None:
    key, _ = keys
    root = publish(tmp_path / "pub", GOOD, key)
    with pytest.raises(CacheArtifactError, match="no cache public key is pinned"):
        _select(root, [], tmp_path / "private")


def test_the_worker_inspects_again_before_torch(tmp_path: Path, monkeypatch) -> None:
    """Defence in depth: ``load`` refuses a crafted file itself, and torch never writes the
    absolute path it names."""
    target = tmp_path / "site" / "evil.pth"
    crafted = tmp_path / "crafted.megacache"
    crafted.write_bytes(megacache({"autotune": [(str(target), EVIL_PTH.encode())]}))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(CacheArtifactError, match="outside the cache directory"):
        art.load(crafted)
    assert not target.exists()


def test_public_keys_are_checked_where_they_are_pinned() -> None:
    from compilewatch.core.errors import UsageError

    for bad in ("ed25519:short", "rsa:AAAA", "", "ed25519:" + "A" * 44):
        with pytest.raises(UsageError, match="is not 'ed25519:'"):
            signing.parse_public_key(bad)
    _, public = signing.generate()
    assert signing.parse_public_key(public)
