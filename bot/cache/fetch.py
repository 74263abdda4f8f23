"""The consumer side of the portable compile cache: ``--warm-cache DIR|release``."""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compilewatch.bot.github.client import open_github
from compilewatch.bot.github.releases import download_asset, nightly_releases, release_assets
from compilewatch.compiler import artifacts as art
from compilewatch.compiler.job import WarmCache
from compilewatch.compiler.tempdirs import owned_tempdir
from compilewatch.core import signing
from compilewatch.core.errors import CacheArtifactError, GitHubError, UsageError
from compilewatch.core.schema import Environment

log = logging.getLogger(__name__)  # the CLI shows these on stderr


def fetch_release(repo: Any, prefix: str, dest: Path, fingerprints: Iterable[str],
                  trusted_keys: Iterable[str]) -> Path:
    """Download the newest nightly's manifest and, once its signature verifies with a pinned
    key, each artifact it lists for these environments, each file once."""
    nightly = nightly_releases(repo, prefix)
    if not nightly:
        raise CacheArtifactError(f"no release tagged {prefix}* in {repo.full_name}")
    newest = nightly[0].tag_name
    assets = release_assets(nightly[0])
    folder = dest / newest
    manifest = download_asset(repo, newest, art.MANIFEST_NAME, folder / art.MANIFEST_NAME,
                              assets, max_bytes=art.MAX_MANIFEST_BYTES)
    sig = art.MANIFEST_NAME + signing.SIGNATURE_SUFFIX
    if sig in assets:
        download_asset(repo, newest, sig, folder / sig, assets,
                       max_bytes=signing.MAX_SIGNATURE_BYTES)
    # nothing the manifest lists is fetched before its signature verifies (``select``, which
    # loads an artifact, verifies it again)
    man = art.read_signed_manifest(manifest, trusted_keys)
    if man.fingerprint in set(fingerprints):
        for name in dict.fromkeys(e.file for e in man.artifacts):
            download_asset(repo, newest, name, folder / name, assets,
                           max_bytes=art.MAX_ARTIFACT_BYTES)
    return dest


WARM_PREFIX = "compilewatch-warm-cache-"
# the folder a --warm-cache release went to before the command let go of its credentials
FETCHED = "COMPILEWATCH_WARM_CACHE_FETCHED"


@dataclass(frozen=True)
class WarmCacheOptions:
    """``--warm-cache DIR|release`` and its companions."""

    source: str | None = None
    repo: str | None = None  # OWNER/NAME of the releases, for ``release``
    token_env: str = "GITHUB_TOKEN"
    tag_prefix: str = "nightly-"
    github_url: str | None = None
    public_keys: tuple[str, ...] = ()  # --cache-public-key, beside the project's own


def fetch_warm_cache(wc: WarmCacheOptions, fingerprints: Iterable[str], *, dest: Path,
                     trusted_keys: tuple[str, ...] = ()) -> Path | None:
    """``--warm-cache release`` downloaded into ``dest`` for these environments; None (a cold
    run) with a message when the release cannot be reached or its manifest is not signed by
    a trusted key. This is the one step that uses the token."""
    if not wc.repo:
        raise UsageError("--warm-cache release needs --warm-cache-repo OWNER/NAME")
    try:
        return fetch_release(open_github(wc.repo, wc.token_env, wc.github_url), wc.tag_prefix,
                             dest, fingerprints, (*wc.public_keys, *trusted_keys))
    except (CacheArtifactError, GitHubError) as e:
        log.warning("warm cache: %s; running cold", e)
        return None


def fetch_handoff(wc: WarmCacheOptions, fingerprints: Iterable[str],
                  trusted_keys: tuple[str, ...]) -> dict[str, str]:
    """``--warm-cache release`` downloaded before ``let_go`` into a folder of this process
    (its pid survives the exec), as the variable that hands it over: empty when the download
    failed, so the command runs cold rather than try again without the token."""
    dest = owned_tempdir(WARM_PREFIX)
    got = fetch_warm_cache(wc, fingerprints, dest=dest, trusted_keys=trusted_keys)
    if got is None:
        shutil.rmtree(dest, ignore_errors=True)
    return {FETCHED: str(got or "")}


def handed_over(wc: WarmCacheOptions) -> WarmCacheOptions:
    """``wc`` with a release the command downloaded before it let go as its folder."""
    if wc.source != "release" or FETCHED not in os.environ:
        return wc
    return dataclasses.replace(wc, source=os.environ[FETCHED] or None)


def resolve_warm_cache(wc: WarmCacheOptions, env: Environment, *, dest: Path,
                       trusted_keys: tuple[str, ...] = ()) -> WarmCache | None:
    """``--warm-cache`` as options for the loop: None without a source, and None (a cold run)
    with a message when the release cannot be reached. ``trusted_keys``: the project's pinned
    keys (for ``pr``, the base branch's). ``run`` and ``pr`` (one call per environment) use
    it."""
    if not wc.source:
        return None
    root = fetch_warm_cache(wc, [env.fingerprint], dest=dest, trusted_keys=trusted_keys) \
        if wc.source == "release" else Path(wc.source)
    if root is None:
        return None
    return WarmCache(root=root, fingerprint=env.fingerprint, torch_version=env.torch,
                     trusted_keys=(*wc.public_keys, *trusted_keys))
