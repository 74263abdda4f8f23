"""The commands that face GitHub and the machine: ``post``, ``keys`` and ``doctor``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from compilewatch.bot.cli.base import (
    DB_HELP,
    PR_NUMBER,
    bounded,
    handle_errors,
    json_option,
    main,
    make_console,
    url_option,
)
from compilewatch.core.errors import EnvironmentProblem

GITHUB_ID = bounded(int, 1, 2**63 - 1)  # what GitHub numbers an app or an installation


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
    from compilewatch.bot.commands.keys import generate_command

    click.echo(generate_command(out=out))




@main.command("post")
@click.argument("outdir", nargs=-1, required=True,
                type=click.Path(file_okay=False, path_type=Path))
@click.option("--repo", required=True, help="OWNER/NAME of the repository to post to.")
@click.option("--pr", type=PR_NUMBER, default=None,
              help="Pull request number. Default: the open PR whose head is --sha.")
@click.option("--head-label", default=None,
              help="OWNER:BRANCH of the PR's head, to find the PR when --pr is not known "
                   "(workflow_run events name no PR for forks).")
@click.option("--issue", type=PR_NUMBER, default=None,
              help="An issue to put a bisection's report on (OUTDIR written by "
                   "`compilewatch bisect`); --pr puts it on a pull request.")
@click.option("--sha", default=None,
              help="Full head commit id the check is attached to (a pr's output; required "
                   "there).")
@click.option("--token-env", default="GITHUB_TOKEN", show_default=True,
              help="Environment variable holding the token (never pass a token as an argument).")
@click.option("--app-id", type=GITHUB_ID, default=None, help="GitHub App id (instead of a token).")
@click.option("--app-key-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The GitHub App's private key (PEM).")
@click.option("--installation-id", type=GITHUB_ID, default=None,
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
@url_option("--report-url", help="Link to the full report (the workflow run).")
@url_option("--trends-url",
              help="Base URL of the published trends dashboard; the comment links each "
                   "model's trend page.")
@click.option("--config-dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              default=None,
              help="A trusted checkout (the default branch) whose [tool.compilewatch] thresholds "
                   "and baseline file judge the PR. Default: built-in thresholds, no baseline.")
@click.option("--comment-author", default=None,
              help="Login whose marked comment is ours. Default: any bot account.")
@click.option("--retries", type=bounded(int, 0, 20), default=5, show_default=True,
              help="Retries on 5xx, rate limits and network errors.")
@click.option("--retry-backoff", type=bounded(float, 0, 600), default=2.0, show_default=True,
              help="Seconds of backoff, doubled after each further failure.")
@click.option("--db", "db_url", envvar="COMPILEWATCH_DB", default=None, help=DB_HELP)
@click.option("--dry-run", is_flag=True, help="Validate and print the comment; post nothing.")
@handle_errors
def post_cmd(use_check: bool, **kwargs: Any) -> None:
    """Post the comparison of a `compilewatch pr` output directory to a pull request, or a
    `compilewatch bisect` report to a pull request or an issue.

    Several OUTDIRs are the shards of one group (`pr --shard I/N`), merged per side first; a
    shard that sent nothing marks its models insufficient data. OUTDIR is untrusted data:
    base.json and head.json (a bisection: bisect.json) are validated strictly and the comment
    is rendered again here; nothing the measuring job wrote is posted as is. One comment per
    PR is edited in place (one per bisection); the verdict goes to a check run (failure on a
    gating regression; a bisection posts no check).

    \b
    Example:
      compilewatch post out/ --repo acme/models --pr 42 --sha "$HEAD_SHA"
      compilewatch post shards/*/ --repo acme/models --sha "$HEAD_SHA"
      compilewatch post compilewatch-out/bisect --repo acme/models --issue 118
    """
    from compilewatch.bot.commands.post import Auth, PostRequest, post_command

    auth = Auth(**{k: kwargs.pop(k) for k in ("token_env", "app_id", "app_key_file",
                                              "installation_id", "retries", "retry_backoff")})
    report = post_command(PostRequest(use_status=not use_check, **kwargs), auth)
    if kwargs["dry_run"]:
        click.echo(report.rendered.body)
        if report.bisection:
            click.echo("\n(dry run: nothing posted)", err=True)
            return
        verdict = "failure" if report.rendered.gating_regression else "success"
        click.echo(f"\n(dry run: nothing posted; the check would be {verdict}: "
                   f"{report.rendered.title})", err=True)
        return
    assert report.comment is not None
    click.echo(f"comment {report.comment.action}: {report.comment.url}")
    if report.check is None:  # a bisection's report: a comment only
        return
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
    from compilewatch.bot.commands.doctor import doctor, render_report
    from compilewatch.bot.render.listings import doctor_json

    report = doctor(**kwargs)
    console = make_console()  # its width: the terminal's, or COLUMNS; none in a pipe or log
    fits = console.is_terminal or os.environ.get("COLUMNS", "").isdigit()
    click.echo(doctor_json(report) if as_json else
               render_report(report, console.width if fits else None), nl=not as_json)
    if not report.can_run:
        raise EnvironmentProblem("this machine cannot run `compilewatch run`: fix the fail "
                                 "lines " + ("of the JSON" if as_json else "above"))


