"""Publishing verified compile-cache artifacts: the manifest, a directory, a GitHub release.

Only artifacts that a fresh process loaded, hit and reproduced eager with are published; every
artifact (verified or not) is recorded in the database with the reason.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from filelock import FileLock

from compilewatch.bot.github.releases import (
    download_asset,
    list_release_assets,
    publish_release_assets,
)
from compilewatch.compiler import artifacts as art
from compilewatch.compiler.schedule import JobRun
from compilewatch.core import signing
from compilewatch.core.errors import CacheArtifactError
from compilewatch.core.files import write_atomic
from compilewatch.core.schema import Environment
from compilewatch.db import connect, record_artifact

log = logging.getLogger(__name__)  # the CLI shows these on stderr


def _entry(job_run: JobRun) -> art.ArtifactEntry:
    r, info = job_run.result, job_run.artifact_info
    assert job_run.artifact is not None
    return art.ArtifactEntry(
        suite=r.suite, model=r.model, config_slug=r.config.slug, file=job_run.artifact.name,
        size_bytes=info["size_bytes"], sha256=info["sha256"], fx_keys=info.get("fx_keys", []),
        aot_keys=info.get("aot_keys", []), verified=job_run.rejected is None,
        reason=job_run.rejected)


def build_manifest(runs: list[JobRun], env: Environment, commit: str | None) -> art.Manifest:
    return art.Manifest(
        manifest_version=art.MANIFEST_VERSION, created_at=now_utc(), fingerprint=env.fingerprint,
        torch=env.torch, torch_git=env.torch_git, triton=env.triton, cuda=env.cuda, gpu=env.gpu,
        commit=commit, artifacts=[_entry(j) for j in runs if j.artifact is not None])


def now_utc() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def record(db_url: str | None, manifest: art.Manifest, folder: Path, run_id: str | None,
           commit: str | None) -> None:
    """Every artifact, verified or not, into the database's cache_artifacts table."""
    db = connect(db_url)
    try:
        for e in manifest.artifacts:
            record_artifact(db, model=e.model, suite=e.suite, config_slug=e.config_slug,
                            fingerprint=manifest.fingerprint, torch_version=manifest.torch,
                            location=str(folder / e.file), size_bytes=e.size_bytes,
                            sha256=e.sha256, verified=e.verified, reason=e.reason,
                            run_id=run_id, commit=commit)
    finally:
        db.close()


def verified_only(folder: Path) -> tuple[art.Manifest, list[Path]]:
    """The manifest to publish (verified entries only) and their files, re-checked."""
    man = art.read_manifest(folder / art.MANIFEST_NAME)
    good = [e for e in man.artifacts if e.verified]
    files = [art.check(folder / e.file, man, e, man.torch) for e in good]
    return man.model_copy(update={"artifacts": good}), files


def _published(path: Path, key: bytes) -> art.Manifest | None:
    """The manifest already published under a tag, when this publisher's key signed it: its
    entries are kept beside the new ones and signed again, so an entry planted there by anyone
    else must not be. An unsigned, foreign or unreadable one is replaced, and said."""
    if not path.is_file():
        return None
    try:
        return art.read_signed_manifest(path, [signing.sign(b"", key).public_key])
    except CacheArtifactError as e:
        log.warning("replacing the published manifest: %s", e)
        return None


def write_signed(manifest: art.Manifest, path: Path, key: bytes) -> list[Path]:
    """The manifest and its detached signature (``manifest.json.sig``) over its exact bytes."""
    text = manifest.model_dump_json(indent=1)
    sig = signing.sign(text.encode(), key)
    sig_path = path.with_name(path.name + signing.SIGNATURE_SUFFIX)
    write_atomic(path, text)
    write_atomic(sig_path, sig.dumps())
    return [path, sig_path]


Verified = tuple[art.Manifest, list[Path]]


def publish_dir(folder: Path, dest: Path, tag: str, key: bytes,
                verified: Verified | None = None) -> Path:
    """Copy the verified artifacts to ``dest/tag/`` and list them in its manifest, signed with
    ``key`` (PEM), beside what an earlier nightly of the same tag, environment and key published
    there. ``verified``: ``verified_only(folder)`` when the caller already checked it."""
    man, files = verified or verified_only(folder)
    target = dest / tag
    target.mkdir(parents=True, exist_ok=True)
    # Shards of one nightly may publish into the same tag at once: read-merge-write under a lock.
    with FileLock(dest / f".{tag}.publish.lock", timeout=600):
        old = _published(target / art.MANIFEST_NAME, key)

        def still_there(e: art.ArtifactEntry) -> bool:
            assert old is not None
            try:
                art.check(target / e.file, old, e, old.torch)
            except CacheArtifactError:
                return False
            return True

        merged = art.merge(old, man, still_there)  # refuses another environment before copying
        for f in files:  # whole files only: a reader sees the old artifact or the new one
            part = target / f".{f.name}.part"
            shutil.copyfile(f, part)
            os.replace(part, target / f.name)
        write_signed(merged, target / art.MANIFEST_NAME, key)
    return target


def publish_release(folder: Path, repo: Any, tag: str, *, key: bytes, prefix: str,
                    keep_last: int | None, verified: Verified | None = None) -> list[str]:
    """Create or update release ``tag`` with the verified artifacts and their manifest, signed
    with ``key`` (PEM)."""
    man, files = verified or verified_only(folder)
    staging = folder / ".publish"
    staging.mkdir(exist_ok=True)
    present = {a.name: a.size for a in list_release_assets(repo, tag, missing_ok=True)}
    old = None
    sig_name = art.MANIFEST_NAME + signing.SIGNATURE_SUFFIX
    if art.MANIFEST_NAME in present and sig_name in present:
        published = download_asset(repo, tag, art.MANIFEST_NAME,
                                   staging / "published" / art.MANIFEST_NAME)
        download_asset(repo, tag, sig_name, staging / "published" / sig_name)
        old = _published(published, key)
    # An earlier entry stays listed while its asset is there, whole (its sha256 is re-checked
    # by whoever downloads it).
    man = art.merge(old, man, lambda e: present.get(e.file) == e.size_bytes)
    signed = write_signed(man, staging / art.MANIFEST_NAME, key)
    body = (f"Verified compile-cache artifacts, torch {man.torch}, fingerprint "
            f"{man.fingerprint}, manifest signed by {signing.sign(b'', key).public_key}.")
    rel = publish_release_assets(repo, tag, [*files, *signed], keep_last=keep_last,
                                 prefix=prefix, body=body)
    return [a.name for a in rel.assets]
