"""What every command of the command line shares: the top-level group, the console tables
go to, errors mapped to exit codes at the edge, letting go of credentials, and option sets."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import math
import os
import shutil
import signal
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import click

from compilewatch.core.errors import CompilewatchError

F = TypeVar("F", bound=Callable[..., Any])

DB_HELP = "Database URL (sqlite:///path or postgresql+psycopg://...). Env: COMPILEWATCH_DB."


LOG_WIDTH = 180  # columns of a table printed into a log or a pipe (no terminal, no $COLUMNS)
ARGV = "compilewatch.argv"  # ctx.meta key: the arguments the top-level group was given
NO_COLOR = "compilewatch.no_color"  # ctx.meta key, set by --no-color on the group or a command


@dataclasses.dataclass(frozen=True)
class Collaborators:
    """What the measuring commands are handed beside their flags: the launcher that starts
    their processes (None: the real one, ``compiler/processes.py``). Whoever embeds the
    command line passes its own as click's ``obj`` (a test: one that starts no process)."""

    launcher: Callable[..., Any] | None = None


def collaborators() -> dict[str, Any]:
    """The keyword arguments a measuring command gets from the caller's ``Collaborators``."""
    ctx = click.get_current_context(silent=True)
    found = ctx.find_object(Collaborators) if ctx is not None else None
    return {"launcher": found.launcher} if found is not None and found.launcher else {}


def stdout_is_terminal() -> bool:
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


def make_console(*, stderr: bool = False) -> Any:
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
                 keep_database: bool = False, keep_remote_writer: bool = False) -> None:
    """Before a measuring command runs the repository's code: do what needs a credential
    (``fetch``: its handover), then run again without any (``bot/measure/credentials.py``). Only
    when this process is the command: one that calls it as a library keeps its
    environment."""
    from compilewatch.bot.measure.credentials import credentials, let_go, let_go_of

    argv = click.get_current_context().meta.get(ARGV)
    keep = {"keep_database": keep_database, "keep_remote_writer": keep_remote_writer}
    if argv == sys.argv[1:] and credentials(**keep):
        let_go(argv, fetch() if fetch else None, **keep)
    names = let_go_of()
    if names:
        click.echo(f"compilewatch: let go of the credentials {', '.join(names)} before "
                   "running the repository's code (it cannot read them)", err=True)


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


def job_summary(markdown: Callable[[], str]) -> None:
    """In GitHub Actions, append what ``markdown`` builds to the job summary (built only
    there); a summary that cannot be written is a warning, never the command's failure."""
    from compilewatch.bot.render import jobsummary

    if jobsummary.target() is None:
        return
    why = jobsummary.append(markdown())
    if why:
        click.echo(f"compilewatch: warning: the job summary was not written: {why}", err=True)


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


class _FiniteFloat(click.FloatRange):
    """click's float range less ``nan`` and ``±inf``: every comparison with nan is false, so
    ``FloatRange(min=0)`` lets ``--timeout nan`` through to minutes of measuring."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)


def bounded(kind: type[int] | type[float], low: float, high: float, *,
            above: bool = False) -> click.ParamType:
    """The type of every numeric option: a finite number from ``low`` (past it with
    ``above``) to ``high``, checked as the command line is read, before anything runs, and
    refused (exit 2) naming the option and the value. ``high`` keeps what the option sizes
    inside what the results file and the database can hold."""
    if kind is int:
        return click.IntRange(int(low), int(high), min_open=above)
    return _FiniteFloat(low, high, min_open=above)


INT32_MAX = 2**31 - 1  # a pull request's or a GitHub id's column
PR_NUMBER = bounded(int, 1, INT32_MAX)


def _http_url(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A link we write into a comment, report or dashboard: http(s) only, checked before
    anything runs (``javascript:`` would be a link that runs code)."""
    from compilewatch.bot.render.formats import check_url

    if value is None:
        return None
    try:
        return check_url(value, param.opts[0])
    except CompilewatchError as e:
        raise click.BadParameter(str(e), param=param) from None


def url_option(*names: str, **kwargs: Any) -> Callable[[F], F]:
    """An option that takes a URL we link to (``--report-url``, ``--trends-url``)."""
    return click.option(*names, default=None, callback=_http_url, metavar="URL", **kwargs)


def stacked(*options: Callable[[F], F]) -> Callable[[F], F]:
    """Options several commands share, declared once, in the order they show in --help."""

    def decorate(fn: F) -> F:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return decorate




@click.group(cls=_Main,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="compilewatch")
@click.option("--strict", is_flag=True,
              help="Refuse (exit 2) an unknown key in [tool.compilewatch] instead of warning "
                   "and ignoring it.")
@color_option
def main(strict: bool) -> None:
    """compilewatch: measure torch.compile on model suites, compare, and report.

    \b
    Examples:
      compilewatch run --suite micro --device cpu --out results.json
      compilewatch --strict suites
    """
    from compilewatch.bot.judge.project import STRICT

    STRICT.set(strict)
    _show_library_notes()



def entry() -> None:
    """The ``compilewatch`` executable: ``main`` with SIGTERM unwinding like Ctrl-C, so a
    cancelled CI job kills its workers, removes its temp dirs and git worktrees, and keeps the
    results checkpointed so far."""

    def terminate(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    main()

