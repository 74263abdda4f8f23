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
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from compilewatch.bot.cache.publish import (
    build_manifest,
    publish_dir,
    publish_release,
    record,
    verified_only,
)
from compilewatch.bot.github.client import open_github
from compilewatch.bot.judge.project import ProjectConfig, load_project_config
from compilewatch.bot.measure.harness import (
    MeasureOptions,
    Measuring,
    OnProgress,
    suite_sources,
)
from compilewatch.bot.measure.outcome import check_own_code, check_something_measured
from compilewatch.bot.measure.remote import RemoteCacheOptions
from compilewatch.bot.measure.remote import setup as remote_setup
from compilewatch.bot.measure.side import Checkout, measure_side
from compilewatch.bot.shards.plan import ShardOptions
from compilewatch.bot.shards.select import empty_shard
from compilewatch.compiler import artifacts as art
from compilewatch.compiler.processes import Launcher
from compilewatch.compiler.schedule import JobRun, MakeWorkers
from compilewatch.core import signing
from compilewatch.core.errors import UsageError
from compilewatch.core.results_file import save_results
from compilewatch.core.schema import RunResults


@dataclass(frozen=True)
class NightlyReport:
    manifest: art.Manifest
    rejected: tuple[tuple[str, str], ...]  # (artifact or model, reason)
    published: tuple[str, ...] = ()
    results: RunResults | None = None  # the run, when this nightly measured


@dataclass(frozen=True)
class PublishOptions:
    """Where the verified artifacts go, and the key that signs their manifest."""

    to_dir: Path | None = None
    to_release: bool = False
    repo: str | None = None  # OWNER/NAME, for the release
    tag: str | None = None
    tag_prefix: str = "nightly-"
    keep_last: int | None = None
    token_env: str = "GITHUB_TOKEN"
    github_url: str | None = None
    signing_key_env: str = "COMPILEWATCH_SIGNING_KEY"
    signing_key_file: Path | None = None

    @property
    def any(self) -> bool:
        return self.to_dir is not None or self.to_release


@dataclass(frozen=True)
class NightlyRequest:
    """What ``compilewatch nightly`` was asked to do."""

    out: Path = Path("nightly")
    suites: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    db_url: str | None = None
    no_db: bool = False
    publish_only: bool = False
    allow_empty: bool = False
    repo: Path = Path(".")
    python: str = sys.executable
    measure: MeasureOptions = field(default_factory=MeasureOptions)
    publish: PublishOptions = field(default_factory=PublishOptions)
    shard: ShardOptions = field(default_factory=ShardOptions)  # --shard I/N, --group
    # the shared compile cache: a nightly is a trusted writer (``write``) of it
    remote_cache: RemoteCacheOptions = field(default_factory=RemoteCacheOptions)


def measure_nightly(req: NightlyRequest, measuring: Measuring,
                    progress: OnProgress | None = None, launcher: MakeWorkers = Launcher,
                    project: ProjectConfig | None = None
                    ) -> tuple[RunResults, art.Manifest, list[JobRun]]:
    """Run the suites with artifact saving + verification; write OUT/results.json and
    OUT/artifacts/manifest.json (after every model too). ``project``: the repository's
    configuration, where the caller has read it."""
    out = req.out
    project = project or load_project_config(req.repo)
    shared = remote_setup(req.remote_cache, runs_pr_code=False,
                          trusted_keys=project.cache_public_keys)
    checkout = Checkout(req.repo, suite_sources(req.suites, req.repo, project),
                        python=req.python, models=req.models, project=project,
                        allow_installed=req.measure.allow_installed,
                        trigger="nightly", allow_empty=req.allow_empty, shard=req.shard,
                        db_url=req.db_url, no_db=req.no_db,
                        remote_cache=shared.role if shared else None)

    def write(results: RunResults, done: list[JobRun]) -> tuple[RunResults, art.Manifest]:
        """The results file and the manifest; also after each model (results not finished),
        so a job killed later keeps its results and publishable artifacts."""
        man = build_manifest(done, results.environment, results.git.commit)
        save_results(results, out / "results.json")
        art.write_manifest(man, out / "artifacts" / art.MANIFEST_NAME)
        return results, man

    def checkpoint(runs: dict[str, RunResults], done: dict[str, list[JobRun]]) -> None:
        write(runs["run"], done["run"])

    measured = measure_side(
        checkout, measuring, progress=progress, launcher=launcher, checkpoint=checkpoint,
        run_extra=lambda env, run_id: {"artifact_dir": out / "artifacts",
                                       "diagnostics_dir": out / "diagnostics",
                                       "diagnostics_base": out, "remote": shared})
    return (*write(measured.results["run"], measured.runs["run"]), measured.runs["run"])


def nightly_command(req: NightlyRequest, *, progress: OnProgress | None = None,
                    launcher: MakeWorkers = Launcher) -> NightlyReport:
    """Measure + build + verify (unless ``publish_only``), then sign and publish what was
    verified."""
    pub = req.publish
    if pub.to_release and not pub.repo:
        raise UsageError("--publish-release needs --repo OWNER/NAME")
    key = signing_key(pub.signing_key_env, pub.signing_key_file) if pub.any else None
    # the repository's configuration, read once: tasks, keys, suites, import paths
    project = None if req.publish_only else load_project_config(req.repo)
    measuring = None if project is None else req.measure.resolve(tuple(project.tasks))
    folder = req.out / "artifacts"
    tag = pub.tag or f"{pub.tag_prefix}{dt.datetime.now(dt.UTC):%Y%m%d}"
    results: RunResults | None = None
    if measuring is not None:
        results, man, runs = measure_nightly(req, measuring, progress, launcher, project)
        check_own_code(results)
        # before storing or publishing
        check_something_measured(results, req.allow_empty or empty_shard(results))
        if not req.no_db:
            from compilewatch.db import store_runs

            store_runs(req.db_url, results)
            record(req.db_url, man, folder, results.run_id, results.git.commit)
        rejected = tuple((f"{j.result.suite}/{j.result.model} [{j.result.config.slug}]",
                          j.rejected) for j in runs if j.rejected)
    else:
        man, rejected = art.read_manifest(folder / art.MANIFEST_NAME), ()
    published = []
    # Checked once (manifest read, every artifact hashed) for all destinations.
    verified = verified_only(folder) if pub.any else None
    if pub.to_dir is not None:
        assert key is not None
        published.append(str(publish_dir(folder, pub.to_dir, tag, key, verified)))
    if pub.to_release:
        assert pub.repo is not None and key is not None
        gh = open_github(pub.repo, pub.token_env, pub.github_url)
        names = publish_release(folder, gh, tag, key=key, prefix=pub.tag_prefix,
                                keep_last=pub.keep_last, verified=verified)
        published.append(f"release {tag}: {', '.join(names)}")
    return NightlyReport(man, rejected, tuple(published), results)


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
