"""The measuring commands: ``run``, ``nightly``, ``calibrate`` and ``pr``, and the options
they share."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from compilewatch.bot.cli.base import (
    DB_HELP,
    PR_NUMBER,
    bounded,
    collaborators,
    color_option,
    handed_over,
    handle_errors,
    job_summary,
    let_go_first,
    main,
    make_console,
    stacked,
    url_option,
)
from compilewatch.core.runinfo import DEFAULT_BLOCK_MS, DEFAULT_ROUNDS, DEFAULT_TIMEOUT_S
from compilewatch.core.schema import (
    DEVICES,
    DTYPES,
    DYNAMIC,
    MAX_MODEL_SAMPLES,
    MODES,
    TASKS,
)

# The largest value of each measuring option: past them a run is no measurement, or its
# results would not fit the results file (``bot/measure/harness.py``: ``Measuring.check``).
MAX_TIMEOUT_S = 86_400.0  # one process of one model: a day
MAX_BLOCK_MS = 60_000.0  # one timed block: a minute
MAX_ROUNDS = MAX_MODEL_SAMPLES // 2  # an eager and a compiled sample a round
MAX_PROCESSES = 100  # processes of one kind a model and side
MAX_SLOTS = 1024  # compiles at once


def _numbers(what: str) -> Callable[[click.Context, click.Parameter, str | None],
                                    tuple[int, ...] | None]:
    """A click callback: "N[,N...]" into a tuple of ints (None stays None)."""
    def parse(_ctx: click.Context, _param: click.Parameter, value: str | None
              ) -> tuple[int, ...] | None:
        if value is None:
            return None
        try:
            return tuple(int(x) for x in value.split(",") if x.strip())
        except ValueError:
            raise click.BadParameter(f"a comma-separated list of {what}") from None
    return parse


def _modules(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]
             ) -> tuple[str, ...]:
    bad = [m for m in values if not m.isidentifier()]
    if bad:
        raise click.BadParameter(f"{bad[0]!r} is not a top-level module name (e.g. mypkg)")
    return tuple(values)


measure_options = stacked(
    click.option("--model", "models", multiple=True,
                 help="Only these models (exact names or shell globs). Repeatable."),
    click.option("--device", type=click.Choice(DEVICES), default="cpu",
                 show_default=True, help="Device to compile for."),
    click.option("--timeout", "timeout_s", type=bounded(float, 0, MAX_TIMEOUT_S, above=True),
                 default=DEFAULT_TIMEOUT_S, show_default=True,
                 help="Seconds one worker process (one model, one phase) may take before it "
                      "is killed and recorded as a timeout."),
    click.option("--rounds", type=bounded(int, 1, MAX_ROUNDS), default=DEFAULT_ROUNDS,
                 show_default=True,
                 help="Interleaved eager/compiled timing rounds per model."),
    click.option("--block-ms", type=bounded(float, 0, MAX_BLOCK_MS, above=True),
                 default=DEFAULT_BLOCK_MS, show_default=True,
                 help="Target wall time of one timed block of back-to-back calls."),
    click.option("--processes", "timing_processes", type=bounded(int, 0, MAX_PROCESSES),
                 default=None,
                 help="Timing processes per model and side (0 or more), each a fresh process "
                      "on the warm cache (samples between processes are where the noise is). "
                      "Default: 3 on cuda, 2 on cpu."),
    click.option("--cold-processes", type=bounded(int, 1, MAX_PROCESSES), default=None,
                 help="Cold-compile processes per model and side (1 or more), each on an "
                      "empty cache dir. "
                      "Default: 3 on cuda, 1 on cpu (one sample is shown, not judged)."),
    click.option("--isolation", type=click.Choice(["fork", "spawn"]), default="fork",
                 show_default=True,
                 help="fork: workers are forked from a server that imported the compiler "
                      "stack once; spawn: every worker is a fresh interpreter."),
    click.option("--compile-slots", type=bounded(int, 1, MAX_SLOTS), default=None,
                 help="Compile processes at once (1 or more). Default: cores/4 (2..8) on cuda, "
                      "1 on cpu."),
    click.option("--pin-cpus", default=None, metavar="N[,N...]",
                 callback=_numbers("core numbers"),
                 help="CPU cores the timing processes run on, cut among the GPU timing "
                      "lanes (at least one a lane). Default on cuda: the last core, or one "
                      "physical core a lane with several GPUs; none on cpu."),
    click.option("--ready-compile-workers", is_flag=True,
                 help="Start Inductor's compile workers while a cold compile's model "
                      "builds and wait for them before its clock starts, so every Triton "
                      "kernel compiles in them (by default torch compiles a kernel in the "
                      "process itself until they are up: a race suspected of moving short "
                      "cold compiles). Off by default: on an H200 it did not narrow their "
                      "spread (docs/verdict-quality.md)."),
    click.option("--preload-compile-path", is_flag=True,
                 help="Import what a first compile imports on first use (pattern passes, "
                      "codegen, export; protocol.COMPILE_PATH) before any compile's clock, so a "
                      "cold compile times the compile's own work rather than those imports. "
                      "Off by default: those imports are part of every user's first compile, "
                      "and on an H200 timing compiles without them did not narrow the "
                      "spread."),
    click.option("--allow-installed", "allow_installed", multiple=True, metavar="MODULE",
                 callback=_modules,
                 help="Measure this module of the repository from its installed copy. By "
                      "default each side imports the repository's code from its own checkout "
                      "(root, then [tool.compilewatch] pythonpath or src/) and refuses a module "
                      "the repository provides that came from elsewhere, such as an editable "
                      "install of the PR's head. Repeatable. Example: --allow-installed "
                      "mypkg."),
    click.option("--task", "tasks", multiple=True, type=click.Choice(TASKS),
                 help="Measure each model's inference (its forward) or training (a whole "
                      "step: zero_grad, forward, loss, backward, optimizer step). Repeatable. "
                      "Default: [tool.compilewatch] tasks, else on cuda both (training for the "
                      "built-in suites only), on cpu inference. Example: --task inference "
                      "--task training."),
    click.option("--gpus", default=None, metavar="N[,N...]",
                 callback=_numbers("GPU indices, e.g. 0,1"),
                 help="GPUs to time on (torch's device indices), one timing lane each: a "
                      "model's processes of both sides run on one GPU, different models on "
                      "different GPUs. A GPU the preflight finds noisier than the others is "
                      "left out (the report says so). Default: every GPU torch sees. "
                      "Example: --gpus 0,1."),
    click.option("--profile-kernels", is_flag=True,
                 help="Run every timed model once more under torch.profiler, after its timing "
                      "processes, and record each generated kernel's time (a pr diffs them "
                      "base against head). Without it, only a pr's models whose compiled time "
                      "changed are profiled. Example: --profile-kernels."),
)
"""How to measure: the options ``run``, ``pr`` and ``nightly`` share (``MeasureOptions``)."""

def measure_options_from(kwargs: dict[str, Any], **extra: Any) -> Any:
    """Pop every keyword that names a ``MeasureOptions`` field out of a command's keywords into
    one ``MeasureOptions``: the dataclass's fields are the list, so a new measuring flag is a
    field and a click option of the same name, nothing here. The flags arrive parsed (the
    options' callbacks)."""
    from compilewatch.bot.measure.harness import MeasureOptions

    names = {f.name for f in dataclasses.fields(MeasureOptions)}
    return MeasureOptions(**{k: kwargs.pop(k) for k in list(kwargs) if k in names}, **extra)


def warm_cache_options_from(kwargs: dict[str, Any]) -> Any:
    from compilewatch.bot.cache.fetch import WarmCacheOptions

    return WarmCacheOptions(source=kwargs.pop("warm_cache"), repo=kwargs.pop("warm_cache_repo"),
                            token_env=kwargs.pop("token_env"),
                            github_url=kwargs.pop("github_url"),
                            public_keys=tuple(kwargs.pop("cache_public_keys")))

def _public_keys(_ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
                 ) -> tuple[str, ...]:
    """Each ``--cache-public-key`` a key, checked before anything runs: one that is not would
    pin nothing, and every artifact would be refused for a reason no one sees."""
    from compilewatch.core.errors import UsageError
    from compilewatch.core.signing import parse_public_key

    try:
        for value in values:
            parse_public_key(value)
    except UsageError as e:
        raise click.BadParameter(str(e), param=param) from None
    return tuple(v.strip() for v in values)


warm_cache_options = stacked(
    click.option("--warm-cache", default=None, metavar="DIR|release",
                 help="Also time a warm-start compile: load the newest verified cache "
                      "artifact for this environment from DIR (a `compilewatch nightly` "
                      "publish dir) or from the newest nightly release of "
                      "--warm-cache-repo. A refused artifact is noted in the result and "
                      "the run goes on cold."),
    click.option("--warm-cache-repo", default=None,
                 help="OWNER/NAME for --warm-cache release."),
    click.option("--token-env", default="GITHUB_TOKEN", show_default=True,
                 help="Environment variable holding the token for --warm-cache release."),
    click.option("--github-url", envvar="GITHUB_API_URL", default=None,
                 help="API base URL for --warm-cache release (GitHub Enterprise: "
                      "https://HOST/api/v3). Env: GITHUB_API_URL."),
    click.option("--cache-public-key", "cache_public_keys", multiple=True, metavar="ed25519:KEY",
                 callback=_public_keys,
                 help="Public key whose signed manifests --warm-cache may load (and whose "
                      "signed entries the --remote-cache phase may load), beside "
                      "[tool.compilewatch] cache_public_keys. Repeatable. An unsigned or "
                      "foreign-signed artifact is refused and the run goes on cold."),
)
"""``--warm-cache`` and its companions, shared by ``run`` and ``pr``."""

shard_options = stacked(
    click.option("--shard", default=None, metavar="I/N",
                 help="Measure only shard I of N (from 1): the jobs are split by their stored "
                      "durations (longest first), else evenly by count; every shard computes "
                      "the same split alone (docs/scale.md). Example: --shard 2/4."),
    click.option("--group", default=None, metavar="ID",
                 help="The shards' group, which `merge` and `post` join into one side. "
                      "Default: the workflow run (GITHUB_RUN_ID-GITHUB_RUN_ATTEMPT), else one "
                      "derived from the commits and N."),
    click.option("--shard-durations", "shard_durations", multiple=True, metavar="RESULTS",
                 help="Plan the split, and the order models start in (longest first), "
                      "from these results files' durations (e.g. the nightly's results.json) "
                      "instead of the database: for runners without one; without --shard, "
                      "the order only. Repeatable."),
    click.option("--remote-cache", default=None, envvar="COMPILEWATCH_REMOTE_CACHE",
                 metavar="redis[s]://[USER[:PASSWORD]@]HOST[:PORT][/DB][?prefix=NAME]",
                 help="Share Inductor's FX graph cache on Redis between runners: each model "
                      "also compiles once on an empty cache dir reading it (its remote "
                      "phase), and loads only entries a pinned cache public key signed. Only "
                      "trusted runs store there (nightly, run --remote-cache-write); pr never "
                      "does, and refuses a credential that may write. Give a URL with a "
                      "password in COMPILEWATCH_REMOTE_CACHE, never on the command line "
                      "(docs/scale.md). Needs the redis extra."),
)
"""``--shard``, ``--group`` and ``--remote-cache``, shared by ``run``, ``pr`` and ``nightly``."""


def shard_options_from(kwargs: dict[str, Any], *, remote_write: bool = False
                       ) -> dict[str, Any]:
    """``--shard`` and ``--group``, and ``--remote-cache`` checked at once: a bad URL or a
    password on the command line exits 2; without the redis package the run goes on without
    the shared cache, and says so first."""
    from compilewatch.bot.measure.remote import RemoteCacheOptions, check_url
    from compilewatch.bot.shards.plan import parse_shard
    from compilewatch.compiler.remoteurl import available

    url = kwargs.pop("remote_cache")
    source = click.get_current_context().get_parameter_source("remote_cache")
    check_url(url, from_command_line=source == click.core.ParameterSource.COMMANDLINE)
    if url is not None and not available():
        click.echo("compilewatch: warning: --remote-cache: the redis package is not "
                   "installed (pip install 'compilewatch[redis]'); measuring without the "
                   "shared compile cache", err=True)
        url = None
    return {"shard": parse_shard(kwargs.pop("shard"), kwargs.pop("group"),
                                 tuple(kwargs.pop("shard_durations"))),
            "remote_cache": RemoteCacheOptions(url=url, write=remote_write and url is not None)}



@main.command("run")
@measure_options
@click.option("--suite", "suites", multiple=True,
              help="Suite to run: a built-in name (micro, hf, vision, timm), a Python file, or a "
                   "module. Repeatable. Default: [tool.compilewatch] suites of ./pyproject.toml, "
                   "else micro.")
@click.option("--mode", "modes", multiple=True,
              type=click.Choice(MODES),
              help="torch.compile mode; repeatable for a sweep. Default: each model's own "
                   "(default).")
@click.option("--dtype", "dtypes", multiple=True,
              type=click.Choice(DTYPES),
              help="Precision; repeatable. amp = float32 weights under autocast. Default: "
                   "float32.")
@click.option("--dynamic", "dynamics", multiple=True, type=click.Choice(list(DYNAMIC)),
              help="torch.compile(dynamic=...): auto is None. Repeatable. Default: the "
                   "model's own.")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("results.json"), show_default=True, help="Results JSON to write.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Inductor cache root to reuse. Default: a fresh empty dir per model, so that "
                   "the cold compile is really cold.")
@click.option("--no-warm", is_flag=True,
              help="No timing processes: the cold process times steady state itself.")
@click.option("--no-diagnostics", "diagnostics", is_flag=True, flag_value=False, default=True,
              help="Do not keep each cold compile's structured trace (TORCH_TRACE format, gzip) "
                   "in OUT's folder beside it (RESULTS.diagnostics/RUN_ID/).")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None,
              help=DB_HELP + " Default: the embedded SQLite file (see docs/storage.md).")
@click.option("--no-db", is_flag=True, help="Do not store the run in any database.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar or summary table.")
@click.option("--allow-empty", is_flag=True,
              help="Exit 0 even when nothing was measured (every model skipped, e.g. "
                   "--device cuda without a GPU).")
@warm_cache_options
@shard_options
@click.option("--remote-cache-write", is_flag=True,
              help="Also store each first cold compile's graphs in --remote-cache, signed with "
                   "COMPILEWATCH_REMOTE_CACHE_KEY, as COMPILEWATCH_REMOTE_CACHE_WRITER (else "
                   "the --remote-cache user): for a trusted runner measuring a branch you "
                   "vouch for, never a PR's code.")
@color_option
@handle_errors
def run_cmd(allow_empty: bool, remote_cache_write: bool, **kwargs: Any) -> None:
    """Measure suites through Dynamo -> AOTAutograd -> Inductor and write a results file.

    Every (model, config) runs in isolated worker processes: a cold compile in a fresh process
    with an empty Inductor cache dir, then a warm compile in a new process on the same dir. A
    model that raises, crashes, hangs or runs out of memory is recorded and the run goes on.
    A run in which nothing was measured (every model skipped) exits 2 naming why, unless
    --allow-empty.

    \b
    Example:
      compilewatch run --suite micro --device cpu --out results.json
    """
    from compilewatch.bot.commands.run import RunRequest, run_command
    from compilewatch.bot.render.run_table import summary_table

    measure = measure_options_from(kwargs)
    if kwargs.pop("no_warm"):
        measure = dataclasses.replace(measure, timing_processes=0)
    if remote_cache_write and kwargs["remote_cache"] is None:
        raise click.UsageError("--remote-cache-write stores in the shared compile cache: give "
                               "it with --remote-cache URL (or COMPILEWATCH_REMOTE_CACHE)")
    from compilewatch.bot.commands.run import fetch_before_letting_go

    req = RunRequest(measure=measure, warm_cache=warm_cache_options_from(kwargs),
                     allow_empty=allow_empty,
                     **shard_options_from(kwargs, remote_write=remote_cache_write), **kwargs)
    let_go_first(lambda: fetch_before_letting_go(req), keep_database=True,
                 keep_remote_writer=req.remote_cache.write)
    console = make_console(stderr=True)
    from compilewatch.bot.cli.progress import ProgressDisplay

    with handed_over(req) as req, ProgressDisplay(measure.quiet, console) as progress:
        results = run_command(req, progress=progress, **collaborators())
    if not measure.quiet:
        console.print(summary_table(results, width=console.width))
        console.print(f"results: {kwargs['out']}", markup=False)


@main.command("nightly")
@measure_options
@click.option("--suite", "suites", multiple=True,
              help="Suite to run (as for run). Repeatable. Default: the repository's suites.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("nightly"), show_default=True,
              help="Output folder: results.json and artifacts/ (manifest.json, *.megacache).")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@click.option("--no-db", is_flag=True, help="Do not store the run or the artifacts.")
@click.option("--publish-only", is_flag=True,
              help="Measure nothing: publish the verified artifacts already in --out.")
@click.option("--publish-dir", "publish_to", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Copy the verified artifacts and manifest to DIR/TAG/.")
@click.option("--publish-release", "publish_to_release", is_flag=True,
              help="Upload the verified artifacts and manifest to release TAG of --repo.")
@click.option("--repo", default=None, help="OWNER/NAME for --publish-release.")
@click.option("--tag", default=None, help="Release tag / folder. Default: PREFIX + UTC date.")
@click.option("--tag-prefix", default="nightly-", show_default=True,
              help="Prefix of nightly tags (pruning only touches these).")
@click.option("--keep-last", type=bounded(int, 1, 10_000), default=None,
              help="Keep only the newest N nightly releases.")
@click.option("--token-env", default="GITHUB_TOKEN", show_default=True,
              help="Environment variable holding the token (never pass a token as an argument).")
@click.option("--github-url", envvar="GITHUB_API_URL", default=None,
              help="API base URL (GitHub Enterprise). Env: GITHUB_API_URL.")
@click.option("--signing-key-env", default="COMPILEWATCH_SIGNING_KEY", show_default=True,
              help="Environment variable holding the private key (PEM) that signs the published "
                   "manifest. Publishing without a key is refused.")
@click.option("--signing-key-file", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="File holding the signing key (instead of --signing-key-env).")
@click.option("--allow-empty", is_flag=True,
              help="Accept a run in which nothing was measured (every model skipped).")
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but errors.")
@shard_options
@handle_errors
def nightly_cmd(**kwargs: Any) -> None:
    """Measure the suites and build, verify and publish the portable compile-cache artifacts.

    Each (model, config)'s cold compile saves torch.compiler.save_cache_artifacts(); a fresh
    process with an empty cache dir loads it and must hit the cache (no FX misses) and match
    eager within the model's tolerance. Only verified artifacts are published; the others are
    listed with the reason.

    \b
    Example:
      compilewatch nightly --suite micro --out nightly/ --publish-dir /srv/compile-cache
    """
    from compilewatch.bot.commands.nightly import NightlyRequest, PublishOptions, nightly_command

    measure = measure_options_from(kwargs)
    publish = PublishOptions(
        to_dir=kwargs.pop("publish_to"), to_release=kwargs.pop("publish_to_release"),
        repo=kwargs.pop("repo"), tag=kwargs.pop("tag"), tag_prefix=kwargs.pop("tag_prefix"),
        keep_last=kwargs.pop("keep_last"), token_env=kwargs.pop("token_env"),
        github_url=kwargs.pop("github_url"), signing_key_env=kwargs.pop("signing_key_env"),
        signing_key_file=kwargs.pop("signing_key_file"))
    # a nightly is a trusted writer of the shared compile cache
    shards = shard_options_from(kwargs, remote_write=True)
    if not (publish.to_dir or publish.to_release):
        # measuring only (the workflow's measuring job): nothing here needs a credential but
        # the shared cache's writer's; a nightly that publishes keeps the key it signs with
        # (docs/security.md)
        let_go_first(keep_database=True,
                     keep_remote_writer=shards["remote_cache"].write)
    from compilewatch.bot.cli.progress import ProgressDisplay

    with ProgressDisplay(measure.quiet) as progress:
        report = nightly_command(NightlyRequest(measure=measure, publish=publish, **shards,
                                                **kwargs),
                                 progress=progress, **collaborators())
    if not measure.quiet:
        _print_nightly(report)
    job_summary(lambda: _nightly_summary(report))


def _nightly_summary(report: Any) -> str:
    """The nightly's section of the job summary: what it measured, verified and published."""
    from compilewatch.bot.render import jobsummary

    lines = []
    if report.results is not None:
        models = report.results.results
        passed = sum(r.status == "pass" for r in models)
        lines.append(f"{len(models)} model configs measured, {passed} passed")
    good = sum(e.verified for e in report.manifest.artifacts)
    lines.append(f"cache artifacts: {good} verified of {len(report.manifest.artifacts)}")
    lines += [f"not published: {what}: {why}" for what, why in report.rejected]
    lines += [f"published: {where}" for where in report.published]
    return jobsummary.section("nightly", lines)


def _print_nightly(report: Any) -> None:
    """What a nightly measured, verified and published, for its log."""
    from compilewatch.bot.render.run_table import summary_table

    console = make_console(stderr=True)
    if report.results is not None:
        console.print(summary_table(report.results, width=console.width))
    good = sum(e.verified for e in report.manifest.artifacts)
    console.print(f"cache artifacts: {good} verified of {len(report.manifest.artifacts)}",
                  markup=False)
    for what, why in report.rejected:
        console.print(f"  not published: {what}: {why}", markup=False)
    for where in report.published:
        console.print(f"published: {where}", markup=False)




@main.command("calibrate")
@measure_options
@click.option("--suite", "suites", multiple=True,
              help="Suite to calibrate (as for run). Repeatable. Default: the repository's.")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="The checkout whose suites are measured.")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@click.option("--sides", type=bounded(int, 1, 10), default=None,
              help="Independent sides, each with its own cold compiles and warm cache, as a "
                   "pr's base and head have: what one side's processes share is learned from "
                   "how the sides differ. Default: 3 on cuda, 1 on cpu.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@handle_errors
def calibrate_cmd(**kwargs: Any) -> None:
    """Learn each model's noise on this runner: measure the same code on several sides of
    many processes (--sides; --processes and --cold-processes a side, default 8 in all on
    cuda split over the sides, 4 on cpu) and store, per model, the spread between processes
    and what a side's processes share. Later comparisons on this environment judge with it.

    \b
    Example:
      compilewatch calibrate --suite micro --device cuda --db postgresql://ci@db/compilewatch
    """
    from compilewatch.bot.commands.calibrate import CalibrateRequest, calibrate_command

    measure = measure_options_from(kwargs)
    let_go_first(keep_database=True)
    from compilewatch.bot.cli.progress import ProgressDisplay

    with ProgressDisplay(measure.quiet) as progress:
        runs, bands = calibrate_command(CalibrateRequest(measure=measure, **kwargs),
                                        progress=progress, **collaborators())
    click.echo(f"run{'s' if len(runs) > 1 else ''} {', '.join(r.run_id for r in runs)}: "
               f"noise bands of {len(bands)} model(s), environment "
               f"{runs[0].environment.fingerprint[:12]}")
    for (suite, model, slug), metrics in sorted(bands.items()):
        parts = ", ".join(f"{m} {p.sd:.1%} (df {p.df})" for m, p in sorted(metrics.items()))
        click.echo(f"  {suite}/{model} [{slug}]: {parts}")




@main.command("pr")
@measure_options
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="The git checkout holding both refs.")
@click.option("--base", default=None,
              help="Base branch/ref; measured at its merge-base with --head. With --pr: "
                   "default origin/HEAD.")
@click.option("--head", default=None, help="Head ref of the change (instead of --pr).")
@click.option("--pr", type=PR_NUMBER, default=None,
              help="Pull request number: refs/pull/N/head is fetched from origin into "
                   "refs/compilewatch/pr/N unless already there.")
@click.option("--suite", "suites", multiple=True,
              help="Suite (name, module, or a .py file relative to the repository root). "
                   "Repeatable. Default: each side's own [tool.compilewatch] suites.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("compilewatch-out/pr"), show_default=True,
              help="Output directory: base.json, head.json, comparison.json, comment.md, "
                   "report.html (a new or empty directory, or one that holds only these).")
@click.option("--base-python", default=sys.executable, show_default="this interpreter",
              help="Interpreter (torch build) for the base side.")
@click.option("--head-python", default=sys.executable, show_default="this interpreter",
              help="Interpreter (torch build) for the head side; with a different one, base "
                   "and head may be the same commit.")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@url_option("--report-url", help="Link to the full report, used in the comment.")
@click.option("--fail-on-regression", is_flag=True,
              help="Exit 1 when a gating regression is found (after writing the output).")
@click.option("--no-warm", is_flag=True,
              help="No timing processes: the cold process times steady state itself (faster; "
                   "one process a side, so no verdict sees the noise between processes; no "
                   "warm_s).")
@click.option("--measure-all", is_flag=True,
              help="Also time models whose compiled code is the same on both sides by "
                   "construction (one graph, equal cache keys, same environment).")
@click.option("--extra-processes", type=bounded(int, 0, MAX_PROCESSES),
                 default=None,
              help="Timing processes a side added (0 or more), once, to a model whose "
                   "first verdict is "
                   "undecided with its estimate past the threshold. Default: 3 on cuda, 0 on "
                   "cpu.")
@click.option("--extra-cold-processes", type=bounded(int, 0, MAX_PROCESSES),
                 default=None,
              help="Cold compiles a side added (0 or more), once, to a model whose "
                   "cold-compile verdict "
                   "is undecided with its estimate near the threshold, or a change called "
                   "on the first ones (judged again on all: confirmed or taken back). "
                   "Default: 3 on cuda, 0 on cpu.")
@click.option("--no-db", is_flag=True, help="Do not store the two runs in any database.")
@click.option("--allow-empty", is_flag=True,
              help="Accept a side in which nothing was measured (every model skipped).")
@warm_cache_options
@shard_options
@click.option("--quiet", "-q", is_flag=True, help="No summary table.")
@color_option
@handle_errors
def pr_cmd(**kwargs: Any) -> None:
    """Measure a change's merge-base and head in temporary worktrees, interleaved, and compare.

    Writes OUT/{base,head,comparison}.json, comment.md and report.html for `compilewatch post`.
    Exit status: 0 ok, 1 gating regression (with --fail-on-regression), 2 bad input or ref.

    \b
    Example:
      compilewatch pr --base main --head my-branch --out compilewatch-out/pr
    """
    from compilewatch.bot.commands.pr import PrRequest, pr_command
    from compilewatch.bot.github.outdir import OUT_FILES
    from compilewatch.bot.judge.verdicts import raise_on_gating
    from compilewatch.bot.render.comparison_table import build_table

    measure = measure_options_from(kwargs)
    if kwargs.pop("no_warm"):
        measure = dataclasses.replace(measure, timing_processes=0)
    fail_on_regression = kwargs.pop("fail_on_regression")
    from compilewatch.bot.commands.pr import fetch_before_letting_go
    from compilewatch.bot.measure.credentials import check_database

    req = PrRequest(measure=measure, warm_cache=warm_cache_options_from(kwargs),
                    **shard_options_from(kwargs), **kwargs)
    check_database(req.db_url, req.no_db)
    let_go_first(lambda: fetch_before_letting_go(req))
    from compilewatch.bot.cli.progress import ProgressDisplay

    with handed_over(req) as req, ProgressDisplay(measure.quiet) as progress:
        comparison = pr_command(req, progress=progress, **collaborators())
    if not measure.quiet:
        console = make_console()
        console.print(build_table(comparison, console.width))
        console.print(f"wrote {', '.join(OUT_FILES)} to {kwargs['out']}", markup=False)
    from compilewatch.bot.render import jobsummary

    job_summary(lambda: jobsummary.of_comparison(comparison, req.report_url))
    if fail_on_regression:  # after every file is written: CI keeps them
        raise_on_gating(comparison)


