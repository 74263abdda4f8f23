"""Portable compile-cache artifacts: save, load, manifest, sha256, and the rules of trust.

The worker saves ``torch.compiler.save_cache_artifacts()`` after a cold compile and loads one
with ``torch.compiler.load_cache_artifacts()`` before a warm-start compile (empty cache dir).
An artifact is code: torch writes each entry to a path derived from the entry's key and later
unpickles it. So a consumer loads a file only after (1) the manifest's signature verifies with a
public key the consumer pinned (``core/signing.py``), (2) the file is a regular file of the
listed size (checked before a byte is read), copied into a private directory while hashed, and
its sha256 matches, and (3) every entry inside it is of a type we publish, with a key that
cannot leave the cache directory (``inspect_megacache``, which parses the format without torch).
A cache entry can also hot-load into wrong results (an entry filed under the wrong key is used as
is), so an artifact is only published after a fresh process loaded it, hit the cache and
reproduced eager's outputs. Documented in docs/cache-artifacts.md ("Trust").
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import stat
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from compilewatch.compiler.protocol import WorkerOutput
from compilewatch.core.errors import CacheArtifactError
from compilewatch.core.files import write_atomic
from compilewatch.core.schema import CacheCounters, Hash, Name, Sha256, Short, Text

MANIFEST_VERSION = 1
MANIFEST_NAME = "manifest.json"
MAX_MANIFEST_BYTES = 8 * 1024 * 1024
FileName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,200}$")]
MAX_ARTIFACT_BYTES = 1024 ** 3
MAX_ENTRIES = 20_000
# The entry types we publish, and the keys each may have: torch joins a key with its cache dir
# (autotune: ``cache_dir/<dir>/<file>``; inductor and aot_autograd: ``cache_dir/.../<key>/``),
# so an absolute key, a separator or a ``..`` would write outside it.
_PLAIN_KEY = re.compile(r"^[A-Za-z0-9_\-]{1,256}$")
_KEY_RULES: dict[str, Callable[[str], bool]] = {
    "inductor": lambda k: bool(_PLAIN_KEY.match(k)),
    "aot_autograd": lambda k: bool(_PLAIN_KEY.match(k)),
    "autotune": lambda k: bool(re.match(r"^[A-Za-z0-9_\-]{1,64}/[A-Za-z0-9_.\-]{1,256}$", k))
    and ".." not in k.split("/") and not k.endswith("/."),
    "pgo": lambda k: bool(re.match(r"^[A-Za-z0-9_:\-][A-Za-z0-9_.:\-]{0,255}$", k))
    and ".." not in k,
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class ArtifactEntry(_Model):
    """One (suite, model, config) artifact and what verification concluded about it."""

    suite: Name
    model: Name
    config_slug: Annotated[str, StringConstraints(pattern=r"^[a-z0-9\-]{1,64}$")]
    file: FileName
    size_bytes: int = Field(ge=1)
    sha256: Sha256
    fx_keys: list[Hash] = Field(default_factory=list, max_length=1024)
    aot_keys: list[Hash] = Field(default_factory=list, max_length=1024)
    verified: bool = False
    reason: Text | None = None


class Manifest(_Model):
    """What a nightly built; validated strictly when consumed (it is a download)."""

    manifest_version: Literal[1]
    created_at: Short
    fingerprint: Hash
    torch: Short
    torch_git: Short | None = None
    triton: Short | None = None
    cuda: Short | None = None
    gpu: Short | None = None
    commit: Short | None = None
    artifacts: list[ArtifactEntry] = Field(default_factory=list, max_length=20_000)


def job_stem(suite: str, model: str, slug: str) -> str:
    """One (suite, model, config) as a file name: its artifact, its reusable cache dir."""
    return f"{suite}-{model}-{slug}"


def artifact_name(suite: str, model: str, slug: str) -> str:
    return f"{job_stem(suite, model, slug)}.megacache"


def unsupported_reason() -> str | None:
    """Why this torch cannot save/load portable caches, or None when it can."""
    import torch

    missing = [f for f in ("save_cache_artifacts", "load_cache_artifacts")
               if not hasattr(torch.compiler, f)]
    return f"unsupported: torch {torch.__version__} has no torch.compiler." \
           f"{' / '.join(missing)}" if missing else None


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def save(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Worker side, after the compile: write this process's cache artifacts to ``path``."""
    import torch

    reason = unsupported_reason()
    if reason:
        return {"unsupported": reason}
    saved = torch.compiler.save_cache_artifacts()
    if saved is None:
        return {"unsupported": "torch saved no cache artifacts (nothing was cached)"}
    data, info = saved
    write_atomic(Path(path), data)
    return {"size_bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "fx_keys": list(getattr(info, "inductor_artifacts", []))[:1024],
            "aot_keys": list(getattr(info, "aot_autograd_artifacts", []))[:1024]}


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Worker side, before the compile: populate the (empty) caches from ``path``."""
    import torch

    reason = unsupported_reason()
    if reason:
        raise CacheArtifactError(reason)
    data = Path(path).read_bytes()
    inspect_megacache(data, str(path))  # again here: nothing reaches torch unread
    info = torch.compiler.load_cache_artifacts(data)
    if info is None:
        raise CacheArtifactError(f"{path}: torch could not deserialise the artifact")
    return {"fx_keys": list(getattr(info, "inductor_artifacts", [])),
            "aot_keys": list(getattr(info, "aot_autograd_artifacts", []))}


def judge(output: WorkerOutput) -> str | None:
    """The verification rule on a warm-start worker's output: None when the artifact is good."""
    if not output.ok:
        return f"warm-start process failed: {(output.error or '')[-500:]}"
    c = output.counters or CacheCounters()
    if c.fx_miss > 0:
        return f"loading it did not make the compile a cache hit: {c.fx_miss} FX graph " \
               f"cache miss(es), {c.fx_hit} hit(s)"
    if c.fx_hit == 0:
        return "loading it produced no FX graph cache hit"
    if c.fx_bypass > 0:
        return f"{c.fx_bypass} FX graph(s) bypassed the cache: not all of it is covered"
    acc = output.accuracy
    if acc is not None and acc.passed is False and acc.reason:
        return f"hot-loaded outputs differ from eager: {acc.reason}"
    if acc is None or acc.passed is not True:
        return (f"hot-loaded outputs differ from eager: max abs err "
                f"{acc.max_abs_err if acc else None} (atol {acc.atol if acc else None}, "
                f"rtol {acc.rtol if acc else None})")
    return None


def merge(old: Manifest | None, new: Manifest,
          still_there: Callable[[ArtifactEntry], bool]) -> Manifest:
    """What a tag lists after ``new`` is published into it: ``new``'s entries, plus ``old``'s
    entries of other (suite, model, config) whose files are ``still_there``.

    Two nightlies published under one tag (per-suite jobs, a re-run) add up instead of the
    later hiding the earlier. A tag never mixes environments: that is refused, naming both.
    """
    if old is None:
        return new
    if (old.fingerprint, old.torch) != (new.fingerprint, new.torch):
        raise CacheArtifactError(
            f"the tag already holds artifacts for fingerprint {old.fingerprint} (torch "
            f"{old.torch}); these are for {new.fingerprint} (torch {new.torch}): publish them "
            f"under another --tag")

    def ident(e: ArtifactEntry) -> tuple[str, str, str]:
        return e.suite, e.model, e.config_slug

    fresh = {ident(e) for e in new.artifacts}
    kept = [e for e in old.artifacts if ident(e) not in fresh and still_there(e)]
    return new.model_copy(update={"artifacts": [*kept, *new.artifacts]})


def write_manifest(manifest: Manifest, path: Path) -> None:
    write_atomic(path, manifest.model_dump_json(indent=1))


def read_manifest(path: Path) -> Manifest:
    """Read and strictly validate an unsigned manifest (a nightly's own output folder)."""
    return parse_manifest(read_bounded(path, MAX_MANIFEST_BYTES), path)


def manifests_in(root: Path) -> list[Path]:
    """``root/manifest.json`` and ``root/*/manifest.json`` (one folder per nightly)."""
    return [p for p in [root / MANIFEST_NAME, *sorted(root.glob(f"*/{MANIFEST_NAME}"))]
            if p.is_file()]


def inspect_megacache(data: bytes, where: str = "artifact") -> dict[str, list[str]]:
    """The entries of a portable cache, by type, read without torch; raise on anything we do not
    publish (an unknown type, a key that could leave the cache dir, a malformed file).

    The format is torch's ``AppendingByteSerializer``: a CRC32 of the rest, a version (u64), then
    per type a base64 type name, a count and that many (base64 key, content) pairs, each
    length-prefixed (u64, big-endian).
    """
    pos = 4

    def take(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(data):
            raise CacheArtifactError(f"{where}: truncated or malformed cache artifact")
        chunk = data[pos:pos + n]
        pos += n
        return chunk

    def u64() -> int:
        return int.from_bytes(take(8), "big")

    def text() -> str:
        raw = take(u64())
        try:
            return base64.b64decode(raw, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise CacheArtifactError(f"{where}: malformed name in the cache artifact") from None

    if len(data) < 12 or zlib.crc32(data[4:]).to_bytes(4, "big") != data[:4]:
        raise CacheArtifactError(f"{where}: not a cache artifact (checksum does not match)")
    if u64() != 1:
        raise CacheArtifactError(f"{where}: unknown cache artifact encoding version")
    entries: dict[str, list[str]] = {}
    total = 0
    while pos < len(data):
        kind, count = text(), u64()
        if kind not in _KEY_RULES:
            raise CacheArtifactError(f"{where}: holds entries of type {kind[:40]!r}, which "
                                     f"compilewatch does not publish")
        total += count
        if total > MAX_ENTRIES:
            raise CacheArtifactError(f"{where}: more than {MAX_ENTRIES} entries")
        for _ in range(count):
            key = text()
            if not _KEY_RULES[kind](key):
                raise CacheArtifactError(f"{where}: a {kind} entry has the key {key[:80]!r}, "
                                         "which would be written outside the cache directory")
            take(u64())
            entries.setdefault(kind, []).append(key)
    return entries


def _regular_size(path: Path) -> int:
    """Size of a regular file, from ``lstat``: a link, FIFO or device is refused unread."""
    try:
        st = path.lstat()
    except OSError as e:
        raise CacheArtifactError(f"{path}: cannot read: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise CacheArtifactError(f"{path}: not a regular file (a link, FIFO or device is "
                                 "refused)")
    return st.st_size


def read_bounded(path: Path, limit: int) -> bytes:
    """A regular file's bytes, its type and size checked before a byte is read."""
    size = _regular_size(path)
    if size > limit:
        raise CacheArtifactError(f"{path}: {size} bytes is over the {limit}-byte limit")
    return _read_exact(path, size)


def _read_exact(path: Path, size: int) -> bytes:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise CacheArtifactError(f"{path}: cannot open: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            raise CacheArtifactError(f"{path}: changed while being read")
        data = f.read(size + 1)
    if len(data) != size:
        raise CacheArtifactError(f"{path}: changed while being read")
    return data


def read_signed_manifest(path: Path, trusted_keys: Iterable[str]) -> Manifest:
    """A published manifest whose signature verifies with a pinned key (untrusted download)."""
    from compilewatch.core import signing  # here: a worker never needs cryptography

    raw = read_bounded(path, MAX_MANIFEST_BYTES)
    sig_path = path.with_name(path.name + signing.SIGNATURE_SUFFIX)
    sig = read_bounded(sig_path, signing.MAX_SIGNATURE_BYTES) if sig_path.is_file() or \
        sig_path.is_symlink() else None
    signing.verify(raw, sig, trusted_keys, str(path))
    return parse_manifest(raw, path)


def parse_manifest(raw: bytes, path: Path) -> Manifest:
    try:
        return Manifest.model_validate(json.loads(raw))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CacheArtifactError(f"{path}: manifest is not valid JSON: {e}") from None
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<top>"
        raise CacheArtifactError(f"{path}: invalid manifest: {where}: {first['msg']}") from None


def select(root: Path, *, suite: str, model: str, slug: str, fingerprint: str,
           torch_version: str, trusted_keys: Iterable[str], private: Path) -> Path:
    """The newest verified artifact for this job and environment, as a checked private copy; or
    raise why not.

    Only manifests signed by a pinned key count. The artifact is copied into ``private`` (a
    directory only this run writes) while it is hashed, then its entries are inspected: what
    torch loads is exactly what was checked.
    """
    keys = list(trusted_keys)
    found: list[tuple[str, Manifest, ArtifactEntry, Path]] = []
    problems: list[str] = []
    for mpath in manifests_in(root):
        try:
            man = read_signed_manifest(mpath, keys)
        except CacheArtifactError as e:
            problems.append(str(e))
            continue
        for entry in man.artifacts:
            if (entry.suite, entry.model, entry.config_slug) == (suite, model, slug):
                found.append((man.created_at, man, entry, mpath.parent))
    if not found:
        extra = f" ({'; '.join(problems)})" if problems else ""
        raise CacheArtifactError(f"no artifact for {suite}/{model} [{slug}] in {root}{extra}")
    found.sort(key=lambda t: t[0], reverse=True)
    matching = [t for t in found if t[1].fingerprint == fingerprint]
    if not matching:
        raise CacheArtifactError(
            f"no artifact for this environment: fingerprint {fingerprint} is not "
            f"{found[0][1].fingerprint} (torch {found[0][1].torch}) of the newest one")
    _, man, entry, folder = matching[0]
    check_entry(man, entry, torch_version)
    data = _checked_bytes(folder / entry.file, entry)
    inspect_megacache(data, entry.file)
    copy = private / entry.file
    write_atomic(copy, data)
    return copy


def check_entry(man: Manifest, entry: ArtifactEntry, torch_version: str) -> None:
    """Refuse an entry that is unverified or for another torch build."""
    if not entry.verified:
        raise CacheArtifactError(f"{entry.file} was not verified: {entry.reason}")
    if man.torch != torch_version:
        raise CacheArtifactError(f"{entry.file} was built with torch {man.torch}, this is "
                                 f"torch {torch_version}")


def _checked_bytes(path: Path, entry: ArtifactEntry) -> bytes:
    """The file's bytes when it is a regular file of the listed size and sha256; size and type
    are checked before reading, so a link to /dev/zero or a huge file costs nothing."""
    size = _regular_size(path)
    if size != entry.size_bytes:
        raise CacheArtifactError(f"{entry.file} is truncated or padded: {size} bytes, the "
                                 f"manifest says {entry.size_bytes}")
    if size > MAX_ARTIFACT_BYTES:
        raise CacheArtifactError(f"{entry.file}: {size} bytes is over the limit")
    data = _read_exact(path, size)
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry.sha256:
        raise CacheArtifactError(f"{entry.file} is corrupt: sha256 {digest} does not match "
                                 f"the manifest's {entry.sha256}")
    return data


def check(path: Path, man: Manifest, entry: ArtifactEntry, torch_version: str) -> Path:
    """Refuse an artifact that is unverified, for another torch, truncated or altered (the
    publisher's check of its own output before copying it out)."""
    check_entry(man, entry, torch_version)
    _checked_bytes(path, entry)
    return path
