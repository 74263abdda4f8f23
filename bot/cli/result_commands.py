"""The commands over stored results: ``report``, ``suites``, ``db``, ``ingest``, ``runs``,
``compare``, ``baseline`` and ``trends``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from compilewatch.bot.cli.base import (
    DB_HELP,
    bounded,
    color_option,
    handle_errors,
    job_summary,
    json_option,
    main,
    make_console,
    stdout_is_terminal,
    url_option,
)
from compilewatch.core.errors import UsageError


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
    from compilewatch.bot.commands.report import run_report_command

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
    from compilewatch.bot.commands.suites import suites_command
    from compilewatch.bot.render.listings import suites_json, suites_text

    entries = suites_command(suites=list(suites), repo=repo)
    if as_json:
        click.echo(suites_json(entries), nl=False)
    else:
        make_console().print(suites_text(entries))


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
@click.option("--limit", type=bounded(int, 1, 1_000_000), default=20, show_default=True,
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
    from compilewatch.bot.commands.runs import runs_command
    from compilewatch.bot.render.listings import runs_json
    from compilewatch.bot.render.runs_table import render_runs

    as_json = kwargs.pop("as_json")
    listing = runs_command(**kwargs)
    if as_json:
        click.echo(runs_json(listing.runs, stored=listing.stored, database=listing.db_url),
                   nl=False)
    elif listing.runs:
        console = make_console()  # its width: the terminal's, or COLUMNS; None in a pipe or log
        fits = console.is_terminal or os.environ.get("COLUMNS", "").isdigit()
        click.echo(render_runs(listing.runs, width=console.width if fits else None))
    else:
        click.echo(f"no stored run matches in {listing.db_url} ({listing.stored} runs stored)")


@main.command("merge")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), required=True,
              help="The merged results file (from results files), or output directory (from "
                   "`pr --shard` output directories).")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True,
              help="Repository whose [tool.compilewatch] judges merged output directories.")
@handle_errors
def merge_cmd(inputs: tuple[Path, ...], out: Path, repo: Path) -> None:
    """Join the shards of one group (`--shard I/N`) into one side.

    INPUTS are the shards' results files, their `pr --shard` output directories (then both
    sides are merged and compared again into OUT/), or their `nightly --shard` output folders
    (then OUT/ holds the merged results.json and every shard's cache artifacts under one
    manifest, for `nightly --publish-only`). A shard of the plan that is not among them,
    or did not finish, is listed; compare marks its models insufficient data.

    \b
    Examples:
      compilewatch merge shard-*/results.json --out merged.json
      compilewatch merge out/shard-1 out/shard-2 out/shard-3 --out out/merged
      compilewatch merge nightly-shard-*/ --out nightly
    """
    from compilewatch.bot.render import jobsummary
    from compilewatch.bot.shards.merge import merge_files, summary
    from compilewatch.bot.shards.nightly import is_nightly_out, merge_nightly

    if all(p.is_dir() and is_nightly_out(p) for p in inputs):
        text = summary(merge_nightly(list(inputs), out))
    elif all(p.is_dir() for p in inputs):
        from compilewatch.bot.commands.compare import merge_outdirs

        comparison = merge_outdirs(list(inputs), out, repo)
        click.echo(f"merged {len(inputs)} output directories into {out}: "
                   f"{comparison.headline.insufficient} model(s) with insufficient data")
        job_summary(lambda: jobsummary.of_comparison(comparison))
        return
    elif any(p.is_dir() for p in inputs):
        raise UsageError("merge takes results files or output directories, not both")
    else:
        text = summary(merge_files(list(inputs), out))
    click.echo(text)
    job_summary(lambda: jobsummary.section(f"merged {len(inputs)} shards into {out}",
                                           text.splitlines()))


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
@url_option("--report-url", help="Link to the full report, used in the comment.")
@url_option("--trends-url",
              help="Base URL of the `compilewatch trends` site; the comment links each model's "
                   "trend page there.")
@click.option("--allow-empty", is_flag=True,
              help="Compare even when a side measured nothing (every model skipped).")
@color_option
@handle_errors
def compare_cmd(**kwargs: Any) -> None:
    """Compare BASE and HEAD (results files or run ids) and render verdicts per model.

    A run id may be shortened to a unique prefix of 6 or more characters (`compilewatch runs`
    lists them). A side may be a shard group's results files joined by commas: they are merged
    (`compilewatch merge`). Exit status: 0 ok, 1 gating regression (with
    --fail-on-regression), 2 bad input or a side in which nothing was measured.

    \b
    Example:
      compilewatch compare base.json head.json --format html --out report.html
      compilewatch compare 3f2a9c1b7d4e 81c0d2e4a9b7 --format table
      compilewatch compare b1.json,b2.json h1.json,h2.json
    """
    from compilewatch.bot.commands.compare import CompareRequest, compare_command
    from compilewatch.bot.judge.verdicts import raise_on_gating, same_run_note

    if kwargs["fmt"] == "html" and kwargs["out"] is None and stdout_is_terminal():
        raise UsageError("--format html writes a whole page: pass --out report.html and open "
                         "it in a browser (or pipe the output to a file)")
    fail_on_regression = kwargs.pop("fail_on_regression")
    comparison, text = compare_command(CompareRequest(**kwargs))
    if comparison.same_run:
        click.echo(f"compilewatch: warning: {same_run_note(comparison.base.run_id)}", err=True)
    if kwargs["out"] is not None:
        click.echo(f"wrote {kwargs['out']}", err=True)
    elif kwargs["fmt"] == "table":  # fitted to this terminal, in colour where it has any
        from compilewatch.bot.render.comparison_table import build_table

        console = make_console()
        console.print(build_table(comparison, console.width))
    else:
        click.echo(text, nl=False)
    from compilewatch.bot.render import jobsummary

    job_summary(lambda: jobsummary.of_comparison(comparison, kwargs["report_url"]))
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
    from compilewatch.bot.commands.baseline import baseline_update_command

    click.echo(baseline_update_command(**kwargs))




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
@url_option("--report-url",
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
    from compilewatch.bot.commands.trends import TrendsRequest, trends_command

    report = trends_command(TrendsRequest(ref=None if ref == "*" else ref,
                                          trigger=None if trigger == "*" else trigger,
                                          **kwargs))
    click.echo(report.summary)
    if report.warning:
        click.echo(report.warning, err=True)
    from compilewatch.bot.render import jobsummary

    job_summary(lambda: jobsummary.section(
        "trends", [*report.summary.removeprefix("compilewatch: ").splitlines(),
                   *([report.warning] if report.warning else [])]))


