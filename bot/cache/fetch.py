"""The consumer side of the portable compile cache: ``--warm-cache DIR|release``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from compilewatch.bot.github.client import open_github
from compilewatch.bot.github.releases import download_asset, nightly_releases, release_assets
from compilewatch.compiler import artifacts as art
from compilewatch.compiler import signing
from compilewatch.compiler.runner import WarmCache
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


def resolve_warm_cache(source: str | None, env: Environment, *, dest: Path,
                       trusted_keys: tuple[str, ...] = (), repo: str | None = None,
                       token_env: str = "GITHUB_TOKEN", tag_prefix: str = "nightly-",
                       github_url: str | None = None) -> WarmCache | None:
    """``--warm-cache DIR|release`` as options for the runner: None without a source, and None
    (a cold run) with a message when the release cannot be reached. ``run`` and ``pr`` (one
    call per side, each with its own interpreter's environment) use it."""
    if not source:
        return None
    root = Path(source)
    if source == "release":
        if not repo:
            raise UsageError("--warm-cache release needs --repo OWNER/NAME")
        try:
            root = fetch_release(open_github(repo, token_env, github_url), tag_prefix, dest,
                                 env.fingerprint)
        except (CacheArtifactError, GitHubError) as e:
            Console(stderr=True).print(f"warm cache: {e}; running cold", markup=False)
            return None
    return WarmCache(root=root, fingerprint=env.fingerprint, torch_version=env.torch,
                     trusted_keys=trusted_keys)
