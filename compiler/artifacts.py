"""Portable compile-cache artifacts: save, load, manifest, sha256, and the rules of trust.

The worker saves ``torch.compiler.save_cache_artifacts()`` after a cold compile and loads one
with ``torch.compiler.load_cache_artifacts()`` before a warm-start compile (empty cache dir).
Loading deserialises torch's own format, so a file is only loaded after its size and sha256
match a manifest entry for this exact environment and torch build. A cache entry can hot-load
into wrong results (an entry filed under the wrong key is used as is), so an artifact is only
published after a fresh process has loaded it, hit the cache and reproduced eager's outputs.
Documented in docs/cache-artifacts.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from compilewatch.core.errors import CacheArtifactError
from compilewatch.core.files import write_atomic
from compilewatch.core.schema import Hash, Name, Sha256, Short, Text

MANIFEST_VERSION = 1
MANIFEST_NAME = "manifest.json"
MAX_MANIFEST_BYTES = 8 * 1024 * 1024
FileName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,200}$")]


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
    info = torch.compiler.load_cache_artifacts(Path(path).read_bytes())
    if info is None:
        raise CacheArtifactError(f"{path}: torch could not deserialise the artifact")
    return {"fx_keys": list(getattr(info, "inductor_artifacts", [])),
            "aot_keys": list(getattr(info, "aot_autograd_artifacts", []))}


def judge(outcome_ok: bool, data: dict[str, Any], error: str | None = None) -> str | None:
    """The verification rule on a warm-start worker's output: None when the artifact is good."""
    if not outcome_ok:
        return f"warm-start process failed: {(error or '')[-500:]}"
    c = data.get("counters", {})
    if c.get("fx_miss", 0) > 0:
        return f"loading it did not make the compile a cache hit: {c['fx_miss']} FX graph " \
               f"cache miss(es), {c.get('fx_hit', 0)} hit(s)"
    if c.get("fx_hit", 0) == 0:
        return "loading it produced no FX graph cache hit"
    if c.get("fx_bypass", 0) > 0:
        return f"{c['fx_bypass']} FX graph(s) bypassed the cache: not all of it is covered"
    acc = data.get("accuracy") or {}
    if acc.get("passed") is not True:
        return f"hot-loaded outputs differ from eager: max abs err {acc.get('max_abs_err')} " \
               f"(atol {acc.get('atol')}, rtol {acc.get('rtol')})"
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
    """Read and strictly validate a manifest (untrusted input)."""
    try:
        size = path.stat().st_size
        if size > MAX_MANIFEST_BYTES:
            raise CacheArtifactError(f"{path}: manifest of {size} bytes is over the limit")
        data = json.loads(path.read_bytes())
        return Manifest.model_validate(data)
    except OSError as e:
        raise CacheArtifactError(f"{path}: cannot read the manifest: {e.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CacheArtifactError(f"{path}: manifest is not valid JSON: {e}") from None
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<top>"
        raise CacheArtifactError(f"{path}: invalid manifest: {where}: {first['msg']}") from None


def manifests_in(root: Path) -> list[Path]:
    """``root/manifest.json`` and ``root/*/manifest.json`` (one folder per nightly)."""
    return [p for p in [root / MANIFEST_NAME, *sorted(root.glob(f"*/{MANIFEST_NAME}"))]
            if p.is_file()]


def select(root: Path, *, suite: str, model: str, slug: str, fingerprint: str,
           torch_version: str, private: Path | None = None) -> Path:
    """The newest verified artifact for this job and environment, checked; or raise why not.

    With ``private`` (a directory only this run writes), the artifact is copied there first and
    the copy is checked and returned: what is loaded is exactly what was hashed.
    """
    found: list[tuple[str, Manifest, ArtifactEntry, Path]] = []
    problems: list[str] = []
    for mpath in manifests_in(root):
        try:
            man = read_manifest(mpath)
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
    path = folder / entry.file
    if private is not None:
        try:
            path = Path(shutil.copyfile(path, private / entry.file))
        except OSError as e:
            raise CacheArtifactError(f"{path}: cannot copy: {e.strerror}") from None
    return check(path, man, entry, torch_version)


def check(path: Path, man: Manifest, entry: ArtifactEntry, torch_version: str) -> Path:
    """Refuse an artifact that is unverified, for another torch, truncated or altered."""
    if not entry.verified:
        raise CacheArtifactError(f"{entry.file} was not verified: {entry.reason}")
    if man.torch != torch_version:
        raise CacheArtifactError(f"{entry.file} was built with torch {man.torch}, this is "
                                 f"torch {torch_version}")
    try:
        size = path.stat().st_size
    except OSError as e:
        raise CacheArtifactError(f"{path}: cannot read: {e.strerror}") from None
    if size != entry.size_bytes:
        raise CacheArtifactError(f"{entry.file} is truncated or padded: {size} bytes, the "
                                 f"manifest says {entry.size_bytes}")
    digest = sha256_file(path)
    if digest != entry.sha256:
        raise CacheArtifactError(f"{entry.file} is corrupt: sha256 {digest} does not match "
                                 f"the manifest's {entry.sha256}")
    return path
