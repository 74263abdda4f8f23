"""The command line: the only module that parses arguments.

Each command calls one typed function with keywords and maps ``CompilewatchError`` to its exit
code (documented in docs/cli.md): 0 ok, 1 gating regression found, 2 usage or input error,
3 internal error (a bug: the traceback is printed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import shutil
import signal
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from compilewatch.core.errors import CompilewatchError, EnvironmentProblem, UsageError
from compilewatch.core.schema import DEVICES, DTYPES, DYNAMIC, MODES

F = TypeVar("F", bound=Callable[..., Any])

DB_HELP = "Database URL (sqlite:///path or postgresql+psycopg://...). Env: COMPILEWATCH_DB."


LOG_WIDTH = 180  # columns of a table printed into a log or a pipe (no terminal, no $COLUMNS)
ARGV = "compilewatch.argv"  # ctx.meta key: the arguments the top-level group was given
NO_COLOR = "compilewatch.no_color"  # ctx.meta key, set by --no-color on the group or a command


def _stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def _no_color(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.meta[NO_COLOR] = True


color_option = click.option(
    "--no-color", is_flag=True, expose_value=False, callback=_no_color,
    help="No colour in what is printed (the NO_COLOR environment variable does the same).")
json_option = click.option(
    "--json", "as_json", is_flag=True,
    help="Print one JSON object instead of the table (its shape is documented in docs/cli.md "
         "and kept stable).")


def _console(*, stderr: bool = False) -> Any:
    """Where tables go: rich's own detection of the terminal's width and colours (with
    ``COLUMNS``, ``NO_COLOR``, ``FORCE_COLOR``), colour off with ``--no-color``. Off a terminal
    (CI logs, pipes) a table is ``LOG_WIDTH`` wide unless ``COLUMNS`` says otherwise: rich's 80
    would fold a log's every row."""
    from rich.console import Console

    ctx = click.get_current_context(silent=True)
    no_color = bool(ctx is not None and ctx.meta.get(NO_COLOR))
    console = Console(stderr=stderr, no_color=True if no_color else None,
                      highlight=False)
    if not console.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        console.width = LOG_WIDTH
    return console


class _Main(click.Group):
    """The top-level group, keeping the arguments it was given (``let_go`` runs the same
    command again)."""

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        raw = list(args)
        ctx = super().make_context(info_name, args, parent, **extra)
        ctx.meta[ARGV] = raw
        return ctx


class _Notes(logging.Handler):
    """The library's warnings (``logging``, never a print) on the current stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        click.echo(self.format(record), err=True)


def _show_library_notes() -> None:
    logger = logging.getLogger("compilewatch")
    if not any(isinstance(h, _Notes) for h in logger.handlers):
        logger.addHandler(_Notes())
        logger.setLevel(logging.INFO)


def let_go_first(fetch: Callable[[], dict[str, str]] | None = None, *,
                 keep_database: bool = False) -> None:
    """Before a measuring command runs the repository's code: do what needs a credential
    (``fetch``: its handover), then run again without any (``bot/credentials.py``). Only
    when this process is the command: one that calls it as a library keeps its
    environment."""
    from compilewatch.bot.credentials import credentials, let_go, let_go_of

    argv = click.get_current_context().meta.get(ARGV)
    if argv == sys.argv[1:] and credentials(keep_database=keep_database):
        let_go(argv, fetch() if fetch else None, keep_database=keep_database)
    names = let_go_of()
    if names:
        click.echo(f"compilewatch: let go of {', '.join(names)} before running the "
                   "repository's code", err=True)


@contextlib.contextmanager
def handed_over(req: Any) -> Iterator[Any]:
    """``req`` with the warm cache this command downloaded before it let go (a folder), which
    is removed when the command is done."""
    from compilewatch.bot.cache.fetch import FETCHED
    from compilewatch.bot.cache.fetch import handed_over as over

    try:
        yield dataclasses.replace(req, warm_cache=over(req.warm_cache))
    finally:
        if os.environ.get(FETCHED):
            shutil.rmtree(os.environ[FETCHED], ignore_errors=True)


def handle_errors(fn: F) -> F:
    """Turn library errors into a message and an exit code at the edge."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CompilewatchError as e:
            click.echo(f"compilewatch: error: {e}", err=True)
            sys.exit(e.exit_code)
        except (click.exceptions.Exit, click.ClickException, KeyboardInterrupt):
            raise
        except Exception:
            click.echo("compilewatch: internal error (please report):", err=True)
            traceback.print_exc()
            sys.exit(3)

    return wrapper  # type: ignore[return-value]


def _stacked(*options: Callable[[F], F]) -> Callable[[F], F]:
    """Options several commands share, declared once, in the order they show in --help."""

    def decorate(fn: F) -> F:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return decorate


measure_options = _stacked(
    click.option("--model", "models", multiple=True,
                 help="Only these models (exact names or shell globs). Repeatable."),
    click.option("--device", type=click.Choice(DEVICES), default="cpu",
                 show_default=True, help="Device to compile for."),
    click.option("--timeout", "timeout_s", type=float, default=900.0, show_default=True,
                 help="Seconds one worker process (one model, one phase) may take before it "
                      "is killed and recorded as a timeout."),
    click.option("--rounds", type=int, default=30, show_default=True,
                 help="Interleaved eager/compiled timing rounds per model."),
    click.option("--block-ms", type=float, default=20.0, show_default=True,
                 help="Target wall time of one timed block of back-to-back calls."),
    click.option("--processes", "timing_processes", type=click.IntRange(min=0), default=None,
                 help="Timing processes per model and side, each a fresh process on the warm "
                      "cache (samples between processes are where the noise is). Default: 3 "
                      "on cuda, 2 on cpu."),
    click.option("--cold-processes", type=click.IntRange(min=1), default=None,
                 help="Cold-compile processes per model and side, each on an empty cache dir. "
                      "Default: 3 on cuda, 1 on cpu (one sample is shown, not judged)."),
    click.option("--isolation", type=click.Choice(["fork", "spawn"]), default="fork",
                 show_default=True,
                 help="fork: workers are forked from a server that imported the compiler "
                      "stack once; spawn: every worker is a fresh interpreter."),
    click.option("--compile-slots", type=click.IntRange(min=1), default=None,
                 help="Compile processes at once. Default: cores/4 (2..8) on cuda, 1 on cpu."),
    click.option("--pin-cpus", default=None, metavar="N[,N...]",
                 help="CPU cores the timing processes run on. Default: the last core on "
                      "cuda, none on cpu."),
    click.option("--ready-compile-workers", is_flag=True,
                 help="Start Inductor's compile workers while a cold compile's model "
                      "builds and wait for them before its clock starts, so every Triton "
                      "kernel compiles in them (by default torch compiles a kernel in the "
                      "process itself until they are up: a race suspected of moving short "
                      "cold compiles). Off by default: on an H200 it did not narrow their "
                      "spread (docs/verdict-quality.md)."),
    click.option("--preload-compile-path", is_flag=True,
                 help="Import what a first compile imports on first use (pattern passes, "
                      "codegen, export; worker.COMPILE_PATH) before any compile's clock, so a "
                      "cold compile times the compile's own work rather than those imports. "
                      "Off by default: those imports are part of every user's first compile, "
                      "and on an H200 timing compiles without them did not narrow the "
                      "spread."),
    click.option("--allow-installed", "allow_installed", multiple=True, metavar="MODULE",
                 help="Measure this module of the repository from its installed copy. By "
                      "default each side imports the repository's code from its own checkout "
                      "(root, then [tool.compilewatch] pythonpath or src/) and refuses a module "
                      "the repository provides that came from elsewhere, such as an editable "
                      "install of the PR's head. Repeatable. Example: --allow-installed "
                      "mypkg."),
)
"""How to measure: the options ``run``, ``pr`` and ``nightly`` share (``MeasureOptions``)."""

MEASURE_KEYS = ("device", "rounds", "block_ms", "timeout_s", "timing_processes",
                "cold_processes", "isolation", "compile_slots", "pin_cpus",
                "ready_compile_workers", "preload_compile_path", "allow_installed")


def measure_options_from(kwargs: dict[str, Any], **extra: Any) -> Any:
    """Pop the measuring flags out of a command's keywords into one ``MeasureOptions``."""
    from compilewatch.bot.measuring import MeasureOptions

    values = {k: kwargs.pop(k) for k in MEASURE_KEYS}
    if values["pin_cpus"] is not None:
        try:
            values["pin_cpus"] = tuple(int(x) for x in values["pin_cpus"].split(",") if x)
        except ValueError:
            raise click.BadParameter("a comma-separated list of core numbers",
                                     param_hint="--pin-cpus") from None
    bad = [m for m in values["allow_installed"] if not m.isidentifier()]
    if bad:
        raise click.BadParameter(f"{bad[0]!r} is not a top-level module name (e.g. mypkg)",
                                 param_hint="--allow-installed")
    values["allow_installed"] = tuple(values["allow_installed"])
    return MeasureOptions(**values, **extra)


def warm_cache_options_from(kwargs: dict[str, Any]) -> Any:
    from compilewatch.bot.cache.fetch import WarmCacheOptions

    return WarmCacheOptions(source=kwargs.pop("warm_cache"), repo=kwargs.pop("warm_cache_repo"),
                            token_env=kwargs.pop("token_env"),
                            github_url=kwargs.pop("github_url"),
                            public_keys=tuple(kwargs.pop("cache_public_keys")))

warm_cache_options = _stacked(
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
                 help="Public key whose signed manifests --warm-cache may load, beside "
                      "[tool.compilewatch] cache_public_keys. Repeatable. An unsigned or "
                      "foreign-signed artifact is refused and the run goes on cold."),
)
"""``--warm-cache`` and its companions, shared by ``run`` and ``pr``."""


@click.group(cls=_Main,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="compilewatch")
@color_option
def main() -> None:
    """compilewatch: measure torch.compile on model suites, compare, and report.

    \b
    Examples:
      compilewatch run --suite micro --device cpu --out results.json
      compilewatch suites
    """
    _show_library_notes()


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
@color_option
@handle_errors
def run_cmd(allow_empty: bool, **kwargs: Any) -> None:
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
    from compilewatch.bot.render.run_table import summary_table
    from compilewatch.bot.run import RunRequest, run_command

    measure = measure_options_from(kwargs, quiet=kwargs.pop("quiet"))
    if kwargs.pop("no_warm"):
        measure = dataclasses.replace(measure, timing_processes=0)
    from compilewatch.bot.run import fetch_before_letting_go

    req = RunRequest(measure=measure, warm_cache=warm_cache_options_from(kwargs),
                     allow_empty=allow_empty, **kwargs)
    let_go_first(lambda: fetch_before_letting_go(req), keep_database=True)
    console = _console(stderr=True)
    with handed_over(req) as req:
        results = run_command(req, console=console)
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
@click.option("--keep-last", type=click.IntRange(min=1), default=None,
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
    from compilewatch.bot.nightly import NightlyRequest, PublishOptions, nightly_command

    measure = measure_options_from(kwargs, quiet=kwargs.pop("quiet"))
    publish = PublishOptions(
        to_dir=kwargs.pop("publish_to"), to_release=kwargs.pop("publish_to_release"),
        repo=kwargs.pop("repo"), tag=kwargs.pop("tag"), tag_prefix=kwargs.pop("tag_prefix"),
        keep_last=kwargs.pop("keep_last"), token_env=kwargs.pop("token_env"),
        github_url=kwargs.pop("github_url"), signing_key_env=kwargs.pop("signing_key_env"),
        signing_key_file=kwargs.pop("signing_key_file"))
    if not (publish.to_dir or publish.to_release):
        # measuring only (the workflow's measuring job): nothing here needs a credential; a
        # nightly that publishes keeps the key it signs with (docs/security.md)
        let_go_first(keep_database=True)
    report = nightly_command(NightlyRequest(measure=measure, publish=publish, **kwargs))
    if not measure.quiet:
        _print_nightly(report)


def _print_nightly(report: Any) -> None:
    """What a nightly measured, verified and published, for its log."""
    from compilewatch.bot.render.run_table import summary_table

    console = _console(stderr=True)
    if report.results is not None:
        console.print(summary_table(report.results, width=console.width))
    good = sum(e.verified for e in report.manifest.artifacts)
    console.print(f"cache artifacts: {good} verified of {len(report.manifest.artifacts)}",
                  markup=False)
    for what, why in report.rejected:
        console.print(f"  not published: {what}: {why}", markup=False)
    for where in report.published:
        console.print(f"published: {where}", markup=False)


@main.group("keys")
def keys_group() -> None:
    """The signing keys of published compile-cache artifacts.

    \b
    Example:
      compilewatch keys generate --out nightly-signing.pem
    """


@keys_group.command("generate")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Where to write the private key (PEM, mode 0600); never overwritten.")
@handle_errors
def keys_generate_cmd(out: Path) -> None:
    """Make an Ed25519 key pair: the private key for the nightly's secret, the public key for
    every consumer's [tool.compilewatch] cache_public_keys.

    \b
    Example:
      compilewatch keys generate --out nightly-signing.pem
    """
    from compilewatch.bot.keys import generate_command

    click.echo(generate_command(out=out))


@main.command("calibrate")
@measure_options
@click.option("--suite", "suites", multiple=True,
              help="Suite to calibrate (as for run). Repeatable. Default: the repository's.")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="The checkout whose suites are measured.")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@click.option("--sides", type=click.IntRange(1, 10), default=None,
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
    from compilewatch.bot.calibrate import CalibrateRequest, calibrate_command

    measure = measure_options_from(kwargs, quiet=kwargs.pop("quiet"))
    let_go_first(keep_database=True)
    runs, bands = calibrate_command(CalibrateRequest(measure=measure, **kwargs))
    click.echo(f"run{'s' if len(runs) > 1 else ''} {', '.join(r.run_id for r in runs)}: "
               f"noise bands of {len(bands)} model(s), environment "
               f"{runs[0].environment.fingerprint[:12]}")
    for (suite, model, slug), metrics in sorted(bands.items()):
        parts = ", ".join(f"{m} {p.sd:.1%} (df {p.df})" for m, p in sorted(metrics.items()))
        click.echo(f"  {suite}/{model} [{slug}]: {parts}")


@main.command("report")
@click.argument("results")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              default=Path("report.html"), show_default=True, help="HTML file to write.")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@handle_errors
def report_cmd(results: str, out: Path, db_url: str | None) -> None:
    """Render one run (RESULTS: a results file or a run id) as a self-contained HTML page.

    \b
    Example:
      compilewatch report results.json --out report.html
    """
    from compilewatch.bot.report import run_report_command

    click.echo(run_report_command(results=results, out=out, db_url=db_url))


@main.command("suites")
@click.option("--suite", "suites", multiple=True,
              help="Only these suites (names, files, modules). Default: the repository's "
                   "[tool.compilewatch] suites, then every built-in.")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Checkout whose [tool.compilewatch] suites are listed.")
@json_option
@color_option
@handle_errors
def suites_cmd(suites: tuple[str, ...], repo: Path, as_json: bool) -> None:
    """List the suites and the models in each (the names --suite and --model take).

    \b
    Example:
      compilewatch suites --suite micro
      compilewatch suites --json | jq -r '.suites[].models[].name'
    """
    from compilewatch.bot.render.listings import suites_json, suites_text
    from compilewatch.bot.suites import suites_command

    entries = suites_command(suites=list(suites), repo=repo)
    if as_json:
        click.echo(suites_json(entries), nl=False)
    else:
        _console().print(suites_text(entries))


@main.group("db")
def db_group() -> None:
    """Create, migrate and inspect the results database.

    \b
    Example:
      compilewatch db upgrade --db postgresql://ci@db.internal/compilewatch
    """


@db_group.command("upgrade")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@click.option("--revision", default="head", show_default=True, help="Target schema revision.")
@handle_errors
def db_upgrade_cmd(db_url: str | None, revision: str) -> None:
    """Migrate the schema to the newest revision (the only way a Postgres schema changes).

    \b
    Example:
      compilewatch db upgrade --db postgresql://postgres@127.0.0.1/compilewatch
    """
    from compilewatch.db.commands import db_upgrade

    click.echo(db_upgrade(db_url=db_url, revision=revision))


@db_group.command("current")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@handle_errors
def db_current_cmd(db_url: str | None) -> None:
    """Show the schema revision of the database and whether it is the newest.

    \b
    Example:
      compilewatch db current
    """
    from compilewatch.db.commands import db_current

    click.echo(db_current(db_url=db_url))


@db_group.command("downgrade")
@click.argument("revision")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@handle_errors
def db_downgrade_cmd(revision: str, db_url: str | None) -> None:
    """Migrate the schema down to REVISION ("base" drops every compilewatch table).

    \b
    Example:
      compilewatch db downgrade base --db sqlite:///scratch.db
    """
    from compilewatch.db.commands import db_downgrade

    click.echo(db_downgrade(db_url=db_url, revision=revision))


@main.command("ingest")
@click.argument("files", nargs=-1, required=True,
                type=click.Path(dir_okay=False, path_type=Path))
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@handle_errors
def ingest_cmd(files: tuple[Path, ...], db_url: str | None) -> None:
    """Validate results files and store them (idempotent: a stored run is not added twice).

    \b
    Example:
      compilewatch ingest shard-*.json --db postgresql://ci@db.internal/compilewatch
    """
    from compilewatch.db.commands import ingest_command

    for line in ingest_command(files=list(files), db_url=db_url):
        click.echo(line)


@main.command("runs")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True,
              help="Show at most this many runs (the newest).")
@click.option("--trigger", default=None,
              help="Only runs with this trigger: local (run, quickstart), pr, nightly.")
@click.option("--ref", default=None, help="Only runs of this branch.")
@click.option("--repo", default=None,
              help="Only runs of this repository: OWNER/NAME as recorded (its origin remote), "
                   "or a checkout directory, e.g. '.'.")
@json_option
@handle_errors
def runs_cmd(**kwargs: Any) -> None:
    """List the stored runs, newest first, with the ids that compare and report take.

    The id column shows 12 characters; any unique prefix of 6 or more selects the run.

    \b
    Example:
      compilewatch runs --trigger local --limit 5
      compilewatch runs --json | jq -r '.runs[0].run_id'
      compilewatch compare 3f2a9c1b7d4e 81c0d2e4a9b7 --format html --out compare.html
    """
    from compilewatch.bot.render.listings import runs_json
    from compilewatch.bot.render.runs_table import render_runs
    from compilewatch.bot.runs import runs_command

    as_json = kwargs.pop("as_json")
    listing = runs_command(**kwargs)
    if as_json:
        click.echo(runs_json(listing.runs, stored=listing.stored, database=listing.db_url),
                   nl=False)
    elif listing.runs:
        console = _console()  # its width: the terminal's, or COLUMNS; None in a pipe or log
        fits = console.is_terminal or os.environ.get("COLUMNS", "").isdigit()
        click.echo(render_runs(listing.runs, width=console.width if fits else None))
    else:
        click.echo(f"no stored run matches in {listing.db_url} ({listing.stored} runs stored)")


@main.command("compare")
@click.argument("base")
@click.argument("head")
@click.option("--format", "fmt", type=click.Choice(["markdown", "html", "json", "table"]),
              default="markdown", show_default=True, help="Output: PR comment, report, data.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File to write. Default: standard output (html: only into a pipe or a "
                   "file, never a terminal).")
@click.option("--fail-on-regression", is_flag=True,
              help="Exit 1 when a gating regression is found (after writing the output).")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Repository whose [tool.compilewatch] and baseline apply.")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@click.option("--report-url", default=None, help="Link to the full report, used in the comment.")
@click.option("--trends-url", default=None,
              help="Base URL of the `compilewatch trends` site; the comment links each model's "
                   "trend page there.")
@click.option("--allow-empty", is_flag=True,
              help="Compare even when a side measured nothing (every model skipped).")
@color_option
@handle_errors
def compare_cmd(**kwargs: Any) -> None:
    """Compare BASE and HEAD (results files or run ids) and render verdicts per model.

    A run id may be shortened to a unique prefix of 6 or more characters (`compilewatch runs`
    lists them). Exit status: 0 ok, 1 gating regression (with --fail-on-regression), 2 bad
    input or a side in which nothing was measured.

    \b
    Example:
      compilewatch compare base.json head.json --format html --out report.html
      compilewatch compare 3f2a9c1b7d4e 81c0d2e4a9b7 --format table
    """
    from compilewatch.bot.compare import compare_command
    from compilewatch.bot.judge.verdicts import raise_on_gating, same_run_note

    if kwargs["fmt"] == "html" and kwargs["out"] is None and _stdout_is_terminal():
        raise UsageError("--format html writes a whole page: pass --out report.html and open "
                         "it in a browser (or pipe the output to a file)")
    fail_on_regression = kwargs.pop("fail_on_regression")
    comparison, text = compare_command(**kwargs)
    if comparison.same_run:
        click.echo(f"compilewatch: warning: {same_run_note(comparison.base.run_id)}", err=True)
    if kwargs["out"] is not None:
        click.echo(f"wrote {kwargs['out']}", err=True)
    elif kwargs["fmt"] == "table":  # fitted to this terminal, in colour where it has any
        from compilewatch.bot.render.comparison_table import build_table

        console = _console()
        console.print(build_table(comparison, console.width))
    else:
        click.echo(text, nl=False)
    if fail_on_regression:  # after the output: CI keeps the report
        raise_on_gating(comparison)


@main.group("baseline")
def baseline_group() -> None:
    """The repository's expected accuracy, graph breaks and recompiles per model.

    \b
    Example:
      compilewatch baseline update results.json
    """


@baseline_group.command("update")
@click.argument("results")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Repository whose baseline file is rewritten.")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@handle_errors
def baseline_update_cmd(**kwargs: Any) -> None:
    """Rewrite the baseline file (default .compilewatch/baseline.csv) from RESULTS.

    \b
    Example:
      compilewatch baseline update results.json --repo .
    """
    from compilewatch.bot.baseline import baseline_update_command

    click.echo(baseline_update_command(**kwargs))


@main.command("pr")
@measure_options
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="The git checkout holding both refs.")
@click.option("--base", default=None,
              help="Base branch/ref; measured at its merge-base with --head. With --pr: "
                   "default origin/HEAD.")
@click.option("--head", default=None, help="Head ref of the change (instead of --pr).")
@click.option("--pr", type=click.IntRange(min=1), default=None,
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
@click.option("--report-url", default=None, help="Link to the full report, used in the comment.")
@click.option("--fail-on-regression", is_flag=True,
              help="Exit 1 when a gating regression is found (after writing the output).")
@click.option("--no-warm", is_flag=True,
              help="No timing processes: the cold process times steady state itself (faster; "
                   "one process a side, so no verdict sees the noise between processes; no "
                   "warm_s).")
@click.option("--measure-all", is_flag=True,
              help="Also time models whose compiled code is the same on both sides by "
                   "construction (one graph, equal cache keys, same environment).")
@click.option("--extra-processes", type=click.IntRange(min=0), default=None,
              help="Timing processes a side added, once, to a model whose first verdict is "
                   "undecided with its estimate past the threshold. Default: 3 on cuda, 0 on "
                   "cpu.")
@click.option("--extra-cold-processes", type=click.IntRange(min=0), default=None,
              help="Cold compiles a side added, once, to a model whose cold-compile verdict "
                   "is undecided with its estimate near the threshold, or a change called "
                   "on the first ones (judged again on all: confirmed or taken back). "
                   "Default: 3 on cuda, 0 on cpu.")
@click.option("--no-db", is_flag=True, help="Do not store the two runs in any database.")
@click.option("--allow-empty", is_flag=True,
              help="Accept a side in which nothing was measured (every model skipped).")
@warm_cache_options
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
    from compilewatch.bot.judge.verdicts import raise_on_gating
    from compilewatch.bot.outdir import OUT_FILES
    from compilewatch.bot.pr import PrRequest, pr_command
    from compilewatch.bot.render.comparison_table import build_table

    measure = measure_options_from(kwargs, quiet=kwargs.pop("quiet"),
                                   measure_all=kwargs.pop("measure_all"),
                                   extra_processes=kwargs.pop("extra_processes"),
                                   extra_cold_processes=kwargs.pop("extra_cold_processes"))
    if kwargs.pop("no_warm"):
        measure = dataclasses.replace(measure, timing_processes=0)
    fail_on_regression = kwargs.pop("fail_on_regression")
    from compilewatch.bot.credentials import check_database
    from compilewatch.bot.pr import fetch_before_letting_go

    req = PrRequest(measure=measure, warm_cache=warm_cache_options_from(kwargs), **kwargs)
    check_database(req.db_url, req.no_db)
    let_go_first(lambda: fetch_before_letting_go(req))
    with handed_over(req) as req:
        comparison = pr_command(req)
    if not measure.quiet:
        console = _console()
        console.print(build_table(comparison, console.width))
        console.print(f"wrote {', '.join(OUT_FILES)} to {kwargs['out']}", markup=False)
    if fail_on_regression:  # after every file is written: CI keeps them
        raise_on_gating(comparison)


@main.command("trends")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Directory to write the dashboard into (index.html, model pages, "
                   "regressions.html).")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@click.option("--suite", default=None, help="Only this suite. Default: every suite.")
@click.option("--ref", default="main", show_default=True,
              help="Only runs of this branch; '*' for every branch (and runs without git "
                   "information, which have no ref).")
@click.option("--trigger", default="nightly", show_default=True,
              help="Only runs with this trigger: nightly, pr, or local (`compilewatch run` "
                   "and the quickstart); '*' for all.")
@click.option("--repo", default=None,
              help="Only runs of this repository: OWNER/NAME as recorded (its origin remote), "
                   "or a checkout directory, e.g. '.'. Default: every repository.")
@click.option("--since", type=click.DateTime(), default=None,
              help="Only runs started on or after this date (UTC), e.g. 2026-01-31.")
@click.option("--allow-empty", is_flag=True,
              help="Write an empty dashboard (exit 0) when no run matches, instead of "
                   "failing with what the stored runs hold.")
@click.option("--report-url", default=None,
              help="Where each run's report is published, with {run_id} in it; a chart's "
                   "points link there (and to the commit and PR on GitHub).")
@handle_errors
def trends_cmd(ref: str, trigger: str, **kwargs: Any) -> None:
    """Draw the trend of every metric per suite and model, with its steps, as a static site.

    Charts (inline SVG, one point per run in commit order, hover and links) of geomean
    speedup, cold and warm compile time, graph breaks, recompiles and pass rate; change points
    are detected and marked, and regressions.html lists every step (docs/trends.md).
    By default only nightlies of main are drawn; runs of `compilewatch run` have trigger
    local. When no run matches, the command fails naming the filter that excluded them.

    \b
    Examples:
      compilewatch trends --out site/ --db postgresql://ci@db.internal/compilewatch
      compilewatch trends --out site/ --trigger local --ref '*' --repo .
    """
    from compilewatch.bot.trends import trends_command

    report = trends_command(ref=None if ref == "*" else ref,
                            trigger=None if trigger == "*" else trigger, **kwargs)
    click.echo(report.summary)
    if report.warning:
        click.echo(report.warning, err=True)


@main.command("post")
@click.argument("outdir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--repo", required=True, help="OWNER/NAME of the repository to post to.")
@click.option("--pr", type=click.IntRange(min=1), default=None,
              help="Pull request number. Default: the open PR whose head is --sha.")
@click.option("--head-label", default=None,
              help="OWNER:BRANCH of the PR's head, to find the PR when --pr is not known "
                   "(workflow_run events name no PR for forks).")
@click.option("--sha", required=True, help="Full head commit id the check is attached to.")
@click.option("--token-env", default="GITHUB_TOKEN", show_default=True,
              help="Environment variable holding the token (never pass a token as an argument).")
@click.option("--app-id", type=int, default=None, help="GitHub App id (instead of a token).")
@click.option("--app-key-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The GitHub App's private key (PEM).")
@click.option("--installation-id", type=int, default=None,
              help="The App's installation id. Default: looked up for --repo.")
@click.option("--github-url", envvar="GITHUB_API_URL", default=None,
              help="API base URL; GitHub Enterprise: https://HOST/api/v3. Env: GITHUB_API_URL.")
@click.option("--only-if-changed", is_flag=True,
              help="Leave the comment untouched when its text would not change.")
@click.option("--check/--status", "use_check", default=True, show_default=True,
              help="Report the verdict as a check run or as a commit status. A check falls "
                   "back to a status when the token may not write checks.")
@click.option("--check-name", default="compilewatch", show_default=True,
              help="Name of the check run (or status context).")
@click.option("--report-url", default=None, help="Link to the full report (the workflow run).")
@click.option("--trends-url", default=None,
              help="Base URL of the published trends dashboard; the comment links each "
                   "model's trend page.")
@click.option("--config-dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=None,
              help="A trusted checkout (the default branch) whose [tool.compilewatch] thresholds "
                   "and baseline file judge the PR. Default: built-in thresholds, no baseline.")
@click.option("--comment-author", default=None,
              help="Login whose marked comment is ours. Default: any bot account.")
@click.option("--retries", type=click.IntRange(0, 20), default=5, show_default=True,
              help="Retries on 5xx, rate limits and network errors.")
@click.option("--retry-backoff", type=click.FloatRange(0), default=2.0, show_default=True,
              help="Seconds of backoff, doubled after each further failure.")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@click.option("--dry-run", is_flag=True, help="Validate and print the comment; post nothing.")
@handle_errors
def post_cmd(use_check: bool, **kwargs: Any) -> None:
    """Post the comparison of a `compilewatch pr` output directory to a pull request.

    OUTDIR is untrusted data: base.json and head.json are validated strictly and the comment is
    rendered again here; nothing the measuring job wrote is posted as is. One comment per PR is
    edited in place; the verdict goes to a check run (failure on a gating regression).

    \b
    Example:
      compilewatch post out/ --repo acme/models --pr 42 --sha "$HEAD_SHA"
    """
    from compilewatch.bot.post import post_command

    report = post_command(use_status=not use_check, **kwargs)
    if kwargs["dry_run"]:
        click.echo(report.rendered.body)
        verdict = "failure" if report.rendered.gating_regression else "success"
        click.echo(f"\n(dry run: nothing posted; the check would be {verdict}: "
                   f"{report.rendered.title})", err=True)
        return
    assert report.comment is not None and report.check is not None
    click.echo(f"comment {report.comment.action}: {report.comment.url}")
    fallback = " (checks not permitted: fell back to a commit status)" \
        if report.check.fell_back else ""
    click.echo(f"{report.check.kind} {report.check.conclusion}{fallback}")
    if report.ingested:
        click.echo("runs ingested into the database")


@main.command("doctor")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@click.option("--token-env", default="GITHUB_TOKEN", show_default=True,
              help="Environment variable holding a GitHub token to check (scopes, validity).")
@click.option("--repo", default=None,
              help="OWNER/NAME to check the token can reach (what post and releases use).")
@click.option("--github-url", envvar="GITHUB_API_URL", default=None,
              help="API base URL (GitHub Enterprise: https://HOST/api/v3). Env: GITHUB_API_URL.")
@json_option
@handle_errors
def doctor_cmd(as_json: bool, **kwargs: Any) -> None:
    """Show what will and will not work on this machine: torch, Triton, CUDA and the GPU, the
    C++ compiler, cache dirs, the database and its schema, a GitHub token's scopes.

    Changes nothing (a database that does not exist yet is not created). Exit status 0 when
    the main job (compilewatch run on CPU) can run here, 2 when it cannot.

    \b
    Example:
      compilewatch doctor
      GITHUB_TOKEN=... compilewatch doctor --repo acme/models
      compilewatch doctor --json | jq '.checks[] | select(.status == "fail")'
    """
    from compilewatch.bot.doctor import doctor, render_report
    from compilewatch.bot.render.listings import doctor_json

    report = doctor(**kwargs)
    click.echo(doctor_json(report) if as_json else render_report(report), nl=not as_json)
    if not report.can_run:
        raise EnvironmentProblem("this machine cannot run `compilewatch run`: fix the fail "
                                 "lines " + ("of the JSON" if as_json else "above"))


def entry() -> None:
    """The ``compilewatch`` executable: ``main`` with SIGTERM unwinding like Ctrl-C, so a
    cancelled CI job kills its workers, removes its temp dirs and git worktrees, and keeps the
    results checkpointed so far."""

    def terminate(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    main()


if __name__ == "__main__":  # pragma: no cover
    entry()
