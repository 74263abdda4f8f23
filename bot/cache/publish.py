"""Publishing verified compile-cache artifacts: the manifest, a directory, a GitHub release.

Only artifacts that a fresh process loaded, hit and reproduced eager with are published; every
artifact (verified or not) is recorded in the database with the reason.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path
from typing import Any

from filelock import FileLock
from rich.console import Console

from compilewatch.bot.github.releases import (
    download_asset,
    list_release_assets,
    publish_release_assets,
)
from compilewatch.compiler import artifacts as art
from compilewatch.compiler.runner import JobRun
from compilewatch.core.errors import CacheArtifactError
from compilewatch.core.schema import Environment
from compilewatch.db import connect, record_artifact


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


def _published(path: Path) -> art.Manifest | None:
    """The manifest already published under a tag; an unreadable one is replaced, and said."""
    if not path.is_file():
        return None
    try:
        return art.read_manifest(path)
    except CacheArtifactError as e:
        Console(stderr=True).print(f"replacing the published manifest: {e}", markup=False)
        return None


Verified = tuple[art.Manifest, list[Path]]


def publish_dir(folder: Path, dest: Path, tag: str, verified: Verified | None = None) -> Path:
    """Copy the verified artifacts to ``dest/tag/`` and list them in its manifest, beside
    what an earlier nightly of the same tag and environment published there. ``verified``:
    ``verified_only(folder)`` when the caller already checked it."""
    man, files = verified or verified_only(folder)
    target = dest / tag
    target.mkdir(parents=True, exist_ok=True)
    # Shards of one nightly may publish into the same tag at once: read-merge-write under a lock.
    with FileLock(dest / f".{tag}.publish.lock", timeout=600):
        old = _published(target / art.MANIFEST_NAME)

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
        art.write_manifest(merged, target / art.MANIFEST_NAME)
    return target


def publish_release(folder: Path, repo: Any, tag: str, *, prefix: str,
                    keep_last: int | None, verified: Verified | None = None) -> list[str]:
    """Create or update release ``tag`` with the verified artifacts and their manifest."""
    man, files = verified or verified_only(folder)
    staging = folder / ".publish"
    staging.mkdir(exist_ok=True)
    present = {a.name: a.size for a in list_release_assets(repo, tag, missing_ok=True)}
    old = None
    if art.MANIFEST_NAME in present:
        old = _published(download_asset(repo, tag, art.MANIFEST_NAME,
                                        staging / f"published-{art.MANIFEST_NAME}"))
    # An earlier entry stays listed while its asset is there, whole (its sha256 is re-checked
    # by whoever downloads it).
    man = art.merge(old, man, lambda e: present.get(e.file) == e.size_bytes)
    art.write_manifest(man, staging / art.MANIFEST_NAME)
    body = f"Verified compile-cache artifacts, torch {man.torch}, fingerprint {man.fingerprint}."
    rel = publish_release_assets(repo, tag, [*files, staging / art.MANIFEST_NAME],
                                 keep_last=keep_last, prefix=prefix, body=body)
    return [a.name for a in rel.assets]
