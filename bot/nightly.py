"""``compilewatch nightly``: measure the default branch, build and verify the compile-cache
artifacts, publish the verified ones (a directory, a GitHub release).

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
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from compilewatch.bot.cache.publish import (
    build_manifest,
    publish_dir,
    publish_release,
    record,
    verified_only,
)
from compilewatch.bot.checkout import git as gitutil
from compilewatch.bot.github.client import open_github
from compilewatch.bot.measuring import (
    build_results,
    check_measure_options,
    collect_environment,
    measure_jobs,
    now,
    suite_sources,
)
from compilewatch.bot.render.run_table import log_console, summary_table
from compilewatch.compiler import artifacts as art
from compilewatch.compiler import signing
from compilewatch.compiler.plan import plan_jobs
from compilewatch.compiler.runner import JobRun, RunOptions
from compilewatch.core.errors import UsageError
from compilewatch.core.schema import RunResults, save_results
from compilewatch.suites.loader import resolve_suites


@dataclass(frozen=True)
class NightlyReport:
    manifest: art.Manifest
    rejected: tuple[tuple[str, str], ...]  # (artifact or model, reason)
    published: tuple[str, ...] = ()


def measure_nightly(*, suites: tuple[str, ...], models: tuple[str, ...], device: str, out: Path,
                    timeout_s: float, rounds: int, block_ms: float, quiet: bool,
                    python: str = sys.executable, repo: Path = Path(".")
                    ) -> tuple[RunResults, art.Manifest, list[JobRun]]:
    """Run the suites with artifact saving + verification; write OUT/results.json and
    OUT/artifacts/manifest.json."""
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


def nightly_command(*, suites: tuple[str, ...], models: tuple[str, ...], device: str, out: Path,
                    timeout_s: float, rounds: int, block_ms: float, db_url: str | None,
                    no_db: bool, quiet: bool, publish_only: bool, publish_to: Path | None,
                    publish_to_release: bool, repo: str | None, tag: str | None,
                    tag_prefix: str, keep_last: int | None, token_env: str,
                    github_url: str | None, signing_key_env: str = "COMPILEWATCH_SIGNING_KEY",
                    signing_key_file: Path | None = None) -> NightlyReport:
    """Measure + build + verify (unless ``publish_only``), then sign and publish what was
    verified."""
    if publish_to_release and not repo:
        raise UsageError("--publish-release needs --repo OWNER/NAME")
    publishing = publish_to is not None or publish_to_release
    key = signing_key(signing_key_env, signing_key_file) if publishing else None
    if not publish_only:
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
    verified = verified_only(folder) if publishing else None
    if publish_to is not None:
        assert key is not None
        published.append(str(publish_dir(folder, publish_to, tag, key, verified)))
    if publish_to_release:
        assert repo is not None and key is not None
        gh = open_github(repo, token_env, github_url)
        names = publish_release(folder, gh, tag, key=key, prefix=tag_prefix,
                                keep_last=keep_last, verified=verified)
        published.append(f"release {tag}: {', '.join(names)}")
    report = NightlyReport(man, rejected, tuple(published))
    _print(report, results, quiet)
    return report


def signing_key(env_var: str, file: Path | None) -> bytes:
    """The publisher's private key (PEM): from ``file``, else from the environment variable (a CI
    secret). Publishing without one is refused: consumers load only signed manifests."""
    if file is not None:
        try:
            pem = file.read_bytes()
        except OSError as e:
            raise UsageError(f"--signing-key-file {file}: {e.strerror}") from None
    else:
        pem = os.environ.get(env_var, "").encode()
    if not pem.strip():
        raise UsageError(f"publishing needs a signing key: set {env_var} to the private key "
                         "(PEM) or pass --signing-key-file; `compilewatch keys generate` makes "
                         "a pair")
    signing.load_private_key(pem)  # a bad key fails here, before minutes of measuring
    return pem


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


