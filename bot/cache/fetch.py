"""The consumer side of the portable compile cache: ``--warm-cache DIR|release``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from compilewatch.bot.github.client import open_github
from compilewatch.bot.github.releases import download_asset, nightly_releases, release_assets
from compilewatch.compiler import artifacts as art
from compilewatch.compiler import signing
from compilewatch.compiler.schedule import WarmCache
from compilewatch.core.errors import CacheArtifactError, GitHubError, UsageError
from compilewatch.core.schema import Environment


def fetch_release(repo: Any, prefix: str, dest: Path, fingerprint: str) -> Path:
    """Download the newest nightly's manifest and its artifacts for this environment."""
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
    # Unverified here on purpose: ``select`` verifies the signature before it uses anything.
    man = art.read_manifest(manifest)
    if man.fingerprint == fingerprint:
        for e in man.artifacts:
            download_asset(repo, newest, e.file, folder / e.file, assets,
                           max_bytes=art.MAX_ARTIFACT_BYTES)
    return dest


@dataclass(frozen=True)
class WarmCacheOptions:
    """``--warm-cache DIR|release`` and its companions."""

    source: str | None = None
    repo: str | None = None  # OWNER/NAME of the releases, for ``release``
    token_env: str = "GITHUB_TOKEN"
    tag_prefix: str = "nightly-"
    github_url: str | None = None
    public_keys: tuple[str, ...] = ()  # --cache-public-key, beside the project's own


def resolve_warm_cache(wc: WarmCacheOptions, env: Environment, *, dest: Path,
                       trusted_keys: tuple[str, ...] = ()) -> WarmCache | None:
    """``--warm-cache`` as options for the loop: None without a source, and None (a cold run)
    with a message when the release cannot be reached. ``trusted_keys``: the project's pinned
    keys (for ``pr``, the base checkout's). ``run`` and ``pr`` (one call per side, each with its
    own interpreter's environment) use it."""
    if not wc.source:
        return None
    root = Path(wc.source)
    if wc.source == "release":
        if not wc.repo:
            raise UsageError("--warm-cache release needs --warm-cache-repo OWNER/NAME")
        try:
            root = fetch_release(open_github(wc.repo, wc.token_env, wc.github_url),
                                 wc.tag_prefix, dest, env.fingerprint)
        except (CacheArtifactError, GitHubError) as e:
            Console(stderr=True).print(f"warm cache: {e}; running cold", markup=False)
            return None
    return WarmCache(root=root, fingerprint=env.fingerprint, torch_version=env.torch,
                     trusted_keys=(*wc.public_keys, *trusted_keys))
