"""The regressions page: every step, newest first, a regression by its metric's direction."""

from __future__ import annotations

from pathlib import Path

from compilewatch.bot.history.dashboard import render_regressions
from compilewatch.bot.history.regressions import all_steps
from compilewatch.bot.history.series import load_trends
from compilewatch.bot.render.sitemap import Links, model_page
from compilewatch.core.schema import Config
from compilewatch.db import connect, ingest
from tests.factories import NIGHT_COMMITS, nightly_history


def test_steps_newest_first_with_their_direction_and_links(tmp_path: Path) -> None:
    with connect(f"sqlite:///{tmp_path / 'runs.db'}") as db:
        for run in nightly_history(models=("mlp", "convnet"),
                                   step=("mlp", 15, {"cold_s": 15.0, "compiled_us": 25.0})):
            ingest(db, run)
        trends = load_trends(db)
    links = Links.for_repository("o/r")
    rows = all_steps(trends, links)
    assert [r.time for r in rows] == sorted((r.time for r in rows), reverse=True)
    mlp = {r.metric: r for r in rows if r.model == "mlp"}
    assert mlp["cold_s"].worse and not mlp["speedup"].worse  # slower compile, faster model
    assert mlp["cold_s"].commit == NIGHT_COMMITS[15]
    assert mlp["cold_s"].commit_url == f"https://github.com/o/r/commit/{NIGHT_COMMITS[15]}"
    assert mlp["cold_s"].page == model_page("micro", "mlp", Config().slug)
    assert any(r.model is None for r in rows)  # the suite's aggregate stepped too
    html = render_regressions(trends, "2026-12-01 00:00 UTC", links)
    assert html.count("<tr data-suite=") == len(rows)
    assert 'data-metric="speedup" data-kind="better"' in html


def test_links_only_for_a_github_repository() -> None:
    assert Links.for_repository(None).commit is None
    assert Links.for_repository("/home/me/checkout").commit is None
    assert Links.for_repository("o/r", "https://ci/{run_id}").report == "https://ci/{run_id}"
