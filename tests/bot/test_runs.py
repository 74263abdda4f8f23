"""``compilewatch runs`` lists stored runs; the ids it shows work in ``compare`` and ``report``."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.db import store_runs
from tests.factories import model_result, run_results


def _stored(tmp_path: Path) -> tuple[str, list[str]]:
    url = f"sqlite:///{tmp_path / 'cw.db'}"
    ids = []
    for day, (trigger, ref, repo) in enumerate([("local", "main", "acme/models"),
                                                ("nightly", "main", "acme/models"),
                                                ("local", "feature", "other/thing")], start=1):
        run = run_results([model_result("mlp", seed=day)], commit=f"{day}" * 40, ref=ref,
                          repository=repo, created_at=f"2026-11-0{day}T08:00:00+00:00")
        run.settings.trigger = trigger
        store_runs(url, run)
        ids.append(run.run_id)
    return url, ids


def test_runs_lists_recent_runs_newest_first(tmp_path: Path) -> None:
    url, ids = _stored(tmp_path)
    res = CliRunner().invoke(main, ["runs", "--db", url])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if any(i[:12] in ln for i in ids)]
    assert [next(i for i in ids if i[:12] in ln) for ln in lines] == ids[::-1]
    first = lines[0]
    for text in ("2026-11-03 08:00", "feature", "3333333333", "local", "micro", "other/thing"):
        assert text in first
    header = res.output.splitlines()[0]
    for col in ("run id", "started", "ref", "commit", "trigger", "suites", "models",
                "repository"):
        assert col in header


def test_runs_filters(tmp_path: Path) -> None:
    url, ids = _stored(tmp_path)
    cli = CliRunner()
    only = cli.invoke(main, ["runs", "--db", url, "--trigger", "nightly"]).output
    assert ids[1][:12] in only and ids[0][:12] not in only
    only = cli.invoke(main, ["runs", "--db", url, "--ref", "feature"]).output
    assert ids[2][:12] in only and ids[1][:12] not in only
    only = cli.invoke(main, ["runs", "--db", url, "--repo", "acme/models", "--limit", "1"]).output
    assert ids[1][:12] in only and ids[0][:12] not in only and ids[2][:12] not in only
    none = cli.invoke(main, ["runs", "--db", url, "--trigger", "pr"])
    assert none.exit_code == 0 and "no stored run matches" in none.output
    assert "3 runs stored" in none.output


def test_the_short_id_shown_works_in_compare_and_report(tmp_path: Path) -> None:
    url, ids = _stored(tmp_path)
    cli = CliRunner()
    res = cli.invoke(main, ["compare", ids[0][:12], ids[1][:12], "--db", url, "--format", "json",
                            "--repo", str(tmp_path)])
    assert res.exit_code == 0, res.output
    res = cli.invoke(main, ["report", ids[2][:8], "--db", url, "--out",
                            str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output


def test_runs_json_is_one_object_of_the_documented_shape(tmp_path: Path) -> None:
    url, ids = _stored(tmp_path)
    cli = CliRunner()
    res = cli.invoke(main, ["runs", "--db", url, "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert (data["kind"], data["version"], data["stored"]) == ("runs", 1, 3)
    assert data["database"].endswith("cw.db")
    assert [r["run_id"] for r in data["runs"]] == ids[::-1]  # full ids, newest first
    newest = data["runs"][0]
    assert set(newest) == {"run_id", "started_at", "finished_at", "trigger", "side", "ref",
                           "commit", "repository", "pr", "suites", "models", "passed",
                           "status"}
    assert newest["started_at"] == "2026-11-03T08:00:00Z"
    assert (newest["ref"], newest["commit"], newest["repository"]) == ("feature", "3" * 40,
                                                                       "other/thing")
    assert (newest["trigger"], newest["suites"], newest["models"]) == ("local", ["micro"], 1)
    for args, expected in ([["--trigger", "nightly"], [ids[1]]], [["--limit", "1"], [ids[2]]],
                           [["--trigger", "pr"], []]):
        data = json.loads(cli.invoke(main, ["runs", "--db", url, "--json", *args]).output)
        assert [r["run_id"] for r in data["runs"]] == expected and data["stored"] == 3
    # the id it gives selects the run
    shown = cli.invoke(main, ["report", ids[0], "--db", url,
                              "--out", str(tmp_path / "r.html")])
    assert shown.exit_code == 0, shown.output
