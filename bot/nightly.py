"""``compilewatch nightly``: measure the default branch, build and verify the compile-cache
artifacts, publish the verified ones (a directory, a GitHub release); and ``--warm-cache``.

A nightly is ``run`` with one more product per (model, config): the portable compile cache of the
cold compile, loaded in a fresh process on an empty cache dir and kept only if that compile hit
the cache and reproduced eager. Output folder::

    OUT/results.json               the run (also ingested into the database)
    OUT/artifacts/manifest.json    every artifact, verified or not, with the reason
    OUT/artifacts/*.megacache      the artifacts
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import shutil
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock
from rich.console import Console

from compilewatch.bot.summary import log_console, summary_table
from compilewatch.compiler import artifacts as art
from compilewatch.compiler.errors import CacheArtifactError, GitHubError, UsageError
from compilewatch.compiler.runner import JobRun, RunOptions, WarmCache
from compilewatch.compiler.schema import (
    Environment,
    RunResults,
    save_results,
)


@dataclass(frozen=True)
class NightlyReport:
    manifest: art.Manifest
    rejected: tuple[tuple[str, str], ...]  # (artifact or model, reason)
    published: tuple[str, ...] = ()


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
        manifest_version=art.MANIFEST_VERSION, created_at=_now(), fingerprint=env.fingerprint,
        torch=env.torch, torch_git=env.torch_git, triton=env.triton, cuda=env.cuda, gpu=env.gpu,
        commit=commit, artifacts=[_entry(j) for j in runs if j.artifact is not None])


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def measure_nightly(*, suites: tuple[str, ...], models: tuple[str, ...], device: str, out: Path,
                    timeout_s: float, rounds: int, block_ms: float, quiet: bool,
                    python: str = sys.executable, repo: Path = Path(".")
                    ) -> tuple[RunResults, art.Manifest, list[JobRun]]:
    """Run the suites with artifact saving + verification; write OUT/results.json and
    OUT/artifacts/manifest.json."""
    from compilewatch.bot import git as gitutil
    from compilewatch.bot.run import (
        build_results,
        collect_environment,
        measure_jobs,
        now,
        plan_jobs,
        suite_sources,
    )
    from compilewatch.suites.loader import resolve_suites

    sources = suite_sources(suites, repo)
    jobs = plan_jobs(resolve_suites(sources), device=device, models=models)
    env = collect_environment(python)
    opts = RunOptions(rounds=rounds, block_ms=block_ms, timeout_s=timeout_s, python=python,
                      artifact_dir=out / "artifacts")
    started, run_id = now(), uuid.uuid4().hex
    git = gitutil.head_info(repo)

    results_of = functools.partial(build_results, env=env, git=git, sources=sources, opts=opts,
                                   started=started, trigger="nightly", run_id=run_id)

    def write(done: list[JobRun], finished: bool) -> tuple[RunResults, art.Manifest]:
        """The results file and the manifest; also after each model (``finished=False``), so a
        job killed later keeps its results and publishable artifacts."""
        results = results_of([j.result for j in done], finished=finished)
        man = build_manifest(done, env, git.get("commit"))
        save_results(results, out / "results.json")
        art.write_manifest(man, out / "artifacts" / art.MANIFEST_NAME)
        return results, man

    runs = measure_jobs(jobs, opts, quiet=quiet, console=log_console(),
                        on_done=lambda done: write(done, finished=False))
    return (*write(runs, finished=True), runs)


def record(db_url: str | None, manifest: art.Manifest, folder: Path, run_id: str | None,
           commit: str | None) -> None:
    """Every artifact, verified or not, into the database's cache_artifacts table."""
    from compilewatch.db import connect, record_artifact

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
    from compilewatch.bot.releases import (
        download_asset,
        list_release_assets,
        publish_release_assets,
    )

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


def open_github(repo: str, token_env: str, github_url: str | None) -> Any:
    from compilewatch.bot.github_client import credentials_from, open_repo

    return open_repo(credentials_from(token_env=token_env), repo, base_url=github_url)


def nightly_command(*, suites: tuple[str, ...], models: tuple[str, ...], device: str, out: Path,
                    timeout_s: float, rounds: int, block_ms: float, db_url: str | None,
                    no_db: bool, quiet: bool, publish_only: bool, publish_to: Path | None,
                    publish_to_release: bool, repo: str | None, tag: str | None,
                    tag_prefix: str, keep_last: int | None, token_env: str,
                    github_url: str | None) -> NightlyReport:
    """Measure + build + verify (unless ``publish_only``), then publish what was verified."""
    if publish_to_release and not repo:
        raise UsageError("--publish-release needs --repo OWNER/NAME")
    if not publish_only:
        from compilewatch.bot.run import check_measure_options

        check_measure_options(rounds=rounds, block_ms=block_ms, timeout_s=timeout_s)
    folder = out / "artifacts"
    tag = tag or f"{tag_prefix}{dt.datetime.now(dt.UTC):%Y%m%d}"
    results: RunResults | None = None
    if not publish_only:
        results, man, runs = measure_nightly(
            suites=suites, models=models, device=device, out=out, timeout_s=timeout_s,
            rounds=rounds, block_ms=block_ms, quiet=quiet)
        if not no_db:
            from compilewatch.db import store_runs

            store_runs(db_url, results)
            record(db_url, man, folder, results.run_id, results.git.commit)
        rejected = tuple((f"{j.result.suite}/{j.result.model} [{j.result.config.slug}]",
                          j.rejected) for j in runs if j.rejected)
    else:
        man, rejected = art.read_manifest(folder / art.MANIFEST_NAME), ()
    published = []
    # Checked once (manifest read, every artifact hashed) for all destinations.
    verified = verified_only(folder) if publish_to is not None or publish_to_release else None
    if publish_to is not None:
        published.append(str(publish_dir(folder, publish_to, tag, verified)))
    if publish_to_release:
        assert repo is not None
        gh = open_github(repo, token_env, github_url)
        names = publish_release(folder, gh, tag, prefix=tag_prefix, keep_last=keep_last,
                                verified=verified)
        published.append(f"release {tag}: {', '.join(names)}")
    report = NightlyReport(man, rejected, tuple(published))
    _print(report, results, quiet)
    return report


def _print(report: NightlyReport, results: RunResults | None, quiet: bool) -> None:
    if quiet:
        return
    console = log_console()
    if results is not None:
        console.print(summary_table(results))
    good = sum(e.verified for e in report.manifest.artifacts)
    console.print(f"cache artifacts: {good} verified of {len(report.manifest.artifacts)}")
    for what, why in report.rejected:
        console.print(f"  not published: {what}: {why}", markup=False, highlight=False)
    for where in report.published:
        console.print(f"published: {where}", markup=False, highlight=False)


def fetch_release(repo: Any, prefix: str, dest: Path, fingerprint: str) -> Path:
    """Download the newest nightly's manifest and its artifacts for this environment."""
    from compilewatch.bot.releases import download_asset, nightly_releases, release_assets

    nightly = nightly_releases(repo, prefix)
    if not nightly:
        raise CacheArtifactError(f"no release tagged {prefix}* in {repo.full_name}")
    newest = nightly[0].tag_name
    assets = release_assets(nightly[0])
    folder = dest / newest
    man = art.read_manifest(download_asset(repo, newest, art.MANIFEST_NAME,
                                           folder / art.MANIFEST_NAME, assets))
    if man.fingerprint == fingerprint:
        for e in man.artifacts:
            download_asset(repo, newest, e.file, folder / e.file, assets)
    return dest


def resolve_warm_cache(source: str | None, env: Environment, *, dest: Path,
                       repo: str | None = None, token_env: str = "GITHUB_TOKEN",
                       tag_prefix: str = "nightly-",
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
    return WarmCache(root=root, fingerprint=env.fingerprint, torch_version=env.torch)
