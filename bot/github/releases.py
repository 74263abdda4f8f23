"""Release assets for the nightly publisher: publish, list, download, and prune old nightlies.

An asset of the same name is replaced by uploading the new file under a temporary name first,
then deleting the old one and renaming: a failed upload leaves the previous asset in place.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from github.GitRelease import GitRelease
from github.GitReleaseAsset import GitReleaseAsset
from github.Repository import Repository

from compilewatch.bot.github.client import github_errors, status_of
from compilewatch.core.errors import GitHubError, UsageError

UPLOADING_SUFFIX = ".uploading"


@dataclass(frozen=True)
class AssetInfo:
    asset_id: int
    name: str
    size: int
    download_url: str


@dataclass(frozen=True)
class PublishedRelease:
    tag: str
    url: str
    assets: tuple[AssetInfo, ...]
    deleted_tags: tuple[str, ...] = ()


def _info(asset: object) -> AssetInfo:
    return AssetInfo(asset.id, asset.name, asset.size, asset.browser_download_url)  # type: ignore[attr-defined]


def _find_release(repo: Repository, tag: str) -> GitRelease | None:
    try:
        with github_errors(f"look up release {tag!r}"):
            return repo.get_release(tag)
    except GitHubError as e:
        if status_of(e) == 404:
            return None
        raise


def _replace_asset(release: GitRelease, path: Path) -> AssetInfo:
    name = path.name
    with github_errors(f"upload {name} to release {release.tag_name!r}"):
        old = [a for a in release.get_assets() if a.name in (name, name + UPLOADING_SUFFIX)]
        for a in old:
            if a.name.endswith(UPLOADING_SUFFIX):  # left by an interrupted earlier upload
                a.delete_asset()
        new = release.upload_asset(str(path), name=name + UPLOADING_SUFFIX,
                                   content_type="application/octet-stream")
        for a in old:
            if a.name == name:
                a.delete_asset()
        return _info(new.update_asset(name))


def publish_release_assets(repo: Repository, tag: str, files: Sequence[Path], *,
                           keep_last: int | None = None, prefix: str = "nightly-",
                           title: str | None = None, body: str = "",
                           prerelease: bool = True) -> PublishedRelease:
    """Create or update release ``tag`` with ``files``; keep only the last ``keep_last``
    releases whose tag starts with ``prefix`` (their tags are deleted with them)."""
    missing = [str(f) for f in files if not Path(f).is_file()]
    if missing:
        raise UsageError(f"cannot publish: not a file: {', '.join(missing)}")
    if keep_last is not None and (keep_last < 1 or not tag.startswith(prefix)):
        raise UsageError(f"keep_last needs a count >= 1 and a tag starting with {prefix!r}")
    release = _find_release(repo, tag)
    with github_errors(f"create or update release {tag!r}"):
        if release is None:
            release = repo.create_git_release(tag, title or tag, body, prerelease=prerelease,
                                              make_latest="false" if prerelease else "true")
        elif body or title:
            release = release.update_release(title or release.name, body or release.body,
                                             prerelease=prerelease)
    assets = tuple(_replace_asset(release, Path(f)) for f in files)
    deleted = _prune(repo, prefix, keep_last, tag) if keep_last is not None else ()
    return PublishedRelease(tag, release.html_url, assets, deleted)


def nightly_releases(repo: Repository, prefix: str) -> list[GitRelease]:
    """The releases whose tag starts with ``prefix``, newest first."""
    with github_errors(f"list releases of {repo.full_name}"):
        found = [r for r in repo.get_releases() if r.tag_name.startswith(prefix)]
    return sorted(found, key=lambda r: (r.created_at, r.id), reverse=True)


def _prune(repo: Repository, prefix: str, keep_last: int, current: str) -> tuple[str, ...]:
    nightly = nightly_releases(repo, prefix)
    nightly.sort(key=lambda r: r.tag_name == current, reverse=True)  # stable: then newest
    deleted = []
    for old in nightly[keep_last:]:
        with github_errors(f"delete old release {old.tag_name!r}"):
            old.delete_release()
        try:
            with github_errors(f"delete tag {old.tag_name!r}"):
                repo.get_git_ref(f"tags/{old.tag_name}").delete()
        except GitHubError as e:
            if status_of(e) not in (404, 422):  # the tag is already gone
                raise
        deleted.append(old.tag_name)
    return tuple(deleted)


def list_release_assets(repo: Repository, tag: str, *,
                        missing_ok: bool = False) -> list[AssetInfo]:
    """The assets of release ``tag``; a missing release is an error that names the tag, or no
    assets with ``missing_ok``."""
    release = _find_release(repo, tag)
    if release is None:
        if missing_ok:
            return []
        raise GitHubError(f"release {tag!r} not found in {repo.full_name}")
    with github_errors(f"list the assets of release {tag!r}"):
        return [_info(a) for a in release.get_assets()
                if not a.name.endswith(UPLOADING_SUFFIX)]


def release_assets(release: GitRelease) -> dict[str, GitReleaseAsset]:
    """A release's finished assets by name, listed once for several downloads."""
    with github_errors(f"list the assets of release {release.tag_name!r}"):
        return {a.name: a for a in release.get_assets()
                if not a.name.endswith(UPLOADING_SUFFIX)}


def download_asset(repo: Repository, tag: str, name: str, dest: Path,
                   assets: dict[str, GitReleaseAsset] | None = None,
                   max_bytes: int | None = None) -> Path:
    """Download asset ``name`` of release ``tag`` to ``dest`` (atomically, size checked; one
    over ``max_bytes`` is refused before a byte is fetched). ``assets`` (``release_assets``)
    saves looking the release up again."""
    if assets is None:
        release = _find_release(repo, tag)
        assets = release_assets(release) if release is not None else {}
    asset = assets.get(name)
    if asset is None:
        raise GitHubError(f"asset {name!r} not found in release {tag!r} of {repo.full_name}")
    if max_bytes is not None and asset.size > max_bytes:
        raise GitHubError(f"asset {name!r} of release {tag!r} is {asset.size} bytes, over the "
                          f"{max_bytes}-byte limit")
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
    os.close(fd)
    try:
        with github_errors(f"download {name} from release {tag!r}"):
            asset.download_asset(tmp, chunk_size=1 << 20)
        size = Path(tmp).stat().st_size
        if size != asset.size:
            raise GitHubError(f"download of {name} is truncated: {size} of {asset.size} bytes")
        os.replace(tmp, dest)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return dest
