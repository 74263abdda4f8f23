"""Which bisections the nightly starts: a stored nightly history (real SQLite) with a step,
tonight's new change points only, the surest metric, within the step budget."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from click.testing import CliRunner

from compilewatch.bot.bisect.plan import PlanRequest, _counter, plan_command
from compilewatch.bot.cli import main
from compilewatch.bot.history.bisections import Planned, steps_needed, within_budget
from compilewatch.db import connect, ingest
from tests.factories import NIGHT_COMMITS, nightly_history


def history(tmp_path: Path, night: int, **change) -> str:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with connect(url) as db:
        for run in nightly_history(models=("mlp", "convnet"), step=("mlp", night, change)):
            ingest(db, run)
    return url


def test_a_step_found_tonight_is_one_bisection_on_its_surest_metric(tmp_path):
    """Night 21 of 24 adds a graph break and slows the cold compile: a step is found once
    three nights follow it, so tonight; one bisection, of graph breaks (one measurement a
    step), between the night before and that night."""
    url = history(tmp_path, 21, graph_breaks=["print"], cold_s=15.0)
    [p] = plan_command(PlanRequest(budget=24, db_url=url))
    assert (p.model, p.metric) == ("mlp", "graph-breaks")
    assert (p.good, p.bad) == (NIGHT_COMMITS[20], NIGHT_COMMITS[21])
    assert p.max_steps == steps_needed("graph-breaks", 16) == 5 and p.commits is None


def test_an_older_step_was_planned_on_its_own_night_not_again(tmp_path):
    url = history(tmp_path, 12, cold_s=15.0)
    assert plan_command(PlanRequest(budget=24, db_url=url)) == []
    [p] = plan_command(PlanRequest(budget=24, db_url=url, recent=13))
    assert p.metric == "cold-compile" and p.max_steps == 10  # timed: counted twice over


def test_the_budget_takes_the_biggest_change_first_and_stops():
    steps = [Planned("a", "b", "micro", "small", "cpu", "graph-breaks", 0.1),
             Planned("a", "b", "micro", "big", "cpu", "cold-compile", 2.0),
             Planned("c", "d", "micro", "mid", "cpu", "recompiles", 0.5)]
    commits = {("a", "b"): 40, ("c", "d"): 3}
    chosen = within_budget(steps, 14, lambda g, b: commits[(g, b)])
    assert [(p.model, p.max_steps, p.commits) for p in chosen] == [
        ("big", 14, 40)]  # (1 + 6) * 2: nothing else fits
    chosen = within_budget(steps, 23, lambda g, b: commits[(g, b)])
    assert [p.model for p in chosen] == ["big", "mid"]  # small's 7 would make 24
    chosen = within_budget(steps, 24, lambda g, b: commits[(g, b)])
    assert [(p.model, p.max_steps) for p in chosen] == [("big", 14), ("mid", 3), ("small", 7)]
    assert within_budget(steps, 0) == []


def test_commits_between_two_nights_are_counted_on_the_first_parent_line(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    for i in range(6):
        subprocess.run([*git, "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-q",
                        "--allow-empty", "-m", f"c{i}"], check=True)
    count = _counter(repo)
    assert count is not None
    assert count("HEAD~5", "HEAD") == 5
    assert count("0" * 40, "HEAD") is None  # a night the clone does not hold


def test_the_cli_prints_the_matrix_of_the_bisect_workflow(tmp_path):
    url = history(tmp_path, 21, recompiles=["size mismatch"])
    result = CliRunner().invoke(main, ["bisect-plan", "--budget", "24", "--db", url,
                                       "--matrix"])
    assert result.exit_code == 0, result.output
    assert "\n" not in result.output.strip()  # one line: $GITHUB_OUTPUT takes it as it is
    assert json.loads(result.output) == [{"good": NIGHT_COMMITS[20], "bad": NIGHT_COMMITS[21],
                                          "model": "mlp", "metric": "recompiles", "steps": 5}]
    plan = CliRunner().invoke(main, ["bisect-plan", "--budget", "24", "--db", url])
    data = json.loads(plan.output)
    assert (data["kind"], data["budget"], data["steps"]) == ("bisect-plan", 24, 5)
    # from no recompile to one: no relative change to say
    assert data["bisections"][0]["suite"] == "micro" and data["bisections"][0]["change"] is None
