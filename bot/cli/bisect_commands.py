"""``compilewatch bisect``: the first commit (or torch build) where a model regressed."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from compilewatch.bot.cli.base import (
    DB_HELP,
    bounded,
    color_option,
    handle_errors,
    json_option,
    let_go_first,
    main,
    make_console,
)
from compilewatch.bot.cli.measure_commands import measure_options, measure_options_from

METRIC_HELP = ("What regressed: compiled-time, cold-compile, warm-compile (timed: judged on "
               "several processes a side, the ends confirmed first), graph-breaks, "
               "recompiles, accuracy, peak-memory (cuda), or cache:COMPONENT, a cache-key "
               "component (cache:gm, cache:example_inputs[0]); one measurement a step.")


@main.command("bisect")
@measure_options
@click.option("--metric", required=True, metavar="METRIC", help=METRIC_HELP)
@click.option("--good", default=None, help="A commit (branch, tag) where the model was fine.")
@click.option("--bad", default=None,
              help="A later commit where it regressed; its first-parent history after "
                   "--good is searched.")
@click.option("--pythons", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              default=None,
              help="Instead of --good/--bad: a file of interpreters, one per torch build, "
                   "oldest first (the first good, the last bad), all measuring --commit.")
@click.option("--commit", default=None,
              help="With --pythons: the commit every build measures. Default: HEAD.")
@click.option("--python", default=sys.executable, show_default="this interpreter",
              help="The interpreter (torch build) every commit is measured with.")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="The git checkout holding the commits.")
@click.option("--suite", "suites", multiple=True,
              help="Suite (name, module, or a .py file relative to the repository root). "
                   "Repeatable. Default: each commit's own [tool.compilewatch] suites.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("compilewatch-out/bisect"), show_default=True,
              help="Output directory: bisect.json, bisect.md, bisect.html.")
@click.option("--max-steps", type=bounded(int, 1, 1000), default=32, show_default=True,
              help="Measuring steps at most (the ends' step included); when they run out, "
                   "the report names the candidates left.")
@click.option("--max-processes", type=bounded(int, 1, 100), default=None,
              help="A timed step whose verdict is open is measured again with twice the "
                   "processes, up to this many a side. Default: 4 times the first count.")
@click.option("--within", default=None, metavar="REF",
              help="Refuse ends that are not on REF's history (a workflow bisects only what "
                   "its branch holds).")
@click.option("--compiler-bisect/--no-compiler-bisect", default=True, show_default=True,
              help="For --metric accuracy: run torch's CompilerBisector on the first bad "
                   "commit and name the backend, subsystem and pass that break the model.")
@click.option("--config-flags", is_flag=True,
              help="For a timed metric: try the Inductor config flags whose cache-key values "
                   "differ between the last good and the first bad, on the last good one, "
                   "to name the flag that regressed.")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None,
              help=DB_HELP + " Default: the embedded SQLite file.")
@click.option("--no-db", is_flag=True, help="Do not store the steps' runs in any database.")
@click.option("--quiet", "-q", is_flag=True, help="No progress; only the finding.")
@json_option
@color_option
@handle_errors
def bisect_cmd(as_json: bool, **kwargs: Any) -> None:
    """Find the first commit (or torch build) where a model's metric regressed.

    Both ends are measured first, together: a regression they do not show is refused (exit
    2, the report written). Then one candidate a step, in temporary worktrees: a
    deterministic metric is read from one measurement; a timed one is judged against the
    good end measured beside it, as `compare` judges, and measured again with more
    processes while its verdict is open. A commit that does not build or run is skipped, as
    `git bisect skip` does. Every step's runs are stored.

    \b
    Examples:
      compilewatch bisect --good v1.2 --bad main --model gpt2 --metric graph-breaks
      compilewatch bisect --good abc123 --bad def456 --model resnet50 --metric compiled-time \\
          --device cuda
      compilewatch bisect --pythons builds.txt --model t5 --metric 'cache:example_inputs[0]'
    """
    from compilewatch.bot.bisect.command import BisectRequest, bisect_command
    from compilewatch.bot.cli.progress import ProgressDisplay
    from compilewatch.bot.render.bisect import render_json, render_text

    quiet = kwargs.pop("quiet")
    measure = measure_options_from(kwargs, quiet=quiet)
    req = BisectRequest(measure=measure, models=tuple(kwargs.pop("models")), **kwargs)
    let_go_first(keep_database=True)
    with ProgressDisplay(quiet) as progress:
        report = bisect_command(req, progress=progress)
    if as_json:  # the report itself (bisect.json), for scripts
        click.echo(render_json(report), nl=False)
        return
    console = make_console()
    console.print(render_text(report), markup=False, highlight=False, end="")
    console.print(f"wrote bisect.json, bisect.md, bisect.html to {req.out}", markup=False)


@main.command("bisect-plan")
@click.option("--budget", type=bounded(int, 0, 10_000), required=True,
              help="Measuring steps all of tonight's bisections may take together; each "
                   "is given what its search may need at worst.")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@click.option("--ref", default="main", show_default=True,
              help="The branch whose nightly history is read ('*': any).")
@click.option("--repo", "repository", default=None,
              help="OWNER/NAME of the repository whose history is read (default: all).")
@click.option("--checkout", type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=None,
              help="A clone holding the nights' commits, to count the commits between two "
                   "nights (otherwise 16 are assumed).")
@click.option("--recent", type=bounded(int, 1, 1000), default=3, show_default=True,
              help="Only steps among each series' newest N nights: a step is found once "
                   "three nights follow it, so each is planned once.")
@click.option("--matrix", is_flag=True,
              help="Print one line of JSON, the bisect workflow's inputs for a GitHub "
                   "Actions matrix, instead of the plan.")
@handle_errors
def bisect_plan_cmd(matrix: bool, **kwargs: Any) -> None:
    """Plan tonight's bisections: one per model step the nightly trends found, the biggest
    first, within a budget of measuring steps.

    \b
    Example:
      compilewatch bisect-plan --budget 24 --checkout . --matrix
    """
    from compilewatch.bot.bisect.plan import PlanRequest, plan_command, plan_json, plan_matrix

    if kwargs["ref"] == "*":
        kwargs["ref"] = None
    req = PlanRequest(**kwargs)
    planned = plan_command(req)
    click.echo(plan_matrix(planned) if matrix else plan_json(planned, req.budget), nl=matrix)
