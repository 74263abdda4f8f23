"""`compilewatch trends` on a synthetic nightly history with one injected step."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import update

from compilewatch.bot.cli import main
from compilewatch.bot.history.series import load_trends
from compilewatch.bot.render.formats import render_markdown
from compilewatch.bot.render.sitemap import model_page, path_part, trend_url_template
from compilewatch.core.schema import Config
from compilewatch.db import connect, ingest
from compilewatch.db.models import ModelResultRow
from tests.factories import NIGHT_COMMITS, nightly_history

STEP_NIGHT = 15
# The results schema refuses such names on ingest; a database is still not trusted to hold
# only validated rows (older versions, hand edits), so the test writes one directly.
HOSTILE = '<img src=x onerror=alert(1)>/../"evil"'
SLUG = Config().slug
MR = ModelResultRow.__table__


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with connect(url) as db:
        # mlp's cold compile gets 50 % slower from night 15 on; everything else is flat noise
        for run in nightly_history(models=("mlp", "convnet", "evil"),
                                   step=("mlp", STEP_NIGHT, {"cold_s": 15.0})):
            ingest(db, run)
        with db.write() as conn:
            conn.execute(update(MR).where(MR.c.model == "evil").values(model=HOSTILE))
        ingest(db, nightly_history(3, ref="release")[0])  # not main: left out
    return url


def test_load_trends_finds_the_step_at_its_night(db_url: str) -> None:
    with connect(db_url) as db:
        (suite,) = load_trends(db).suites
    assert suite.suite == "micro" and (suite.runs, suite.dates) == (24, 24)
    by_model = {m.model: m for m in suite.models}
    steps = [(ser.metric, st.night, st.commit) for ser, st in by_model["mlp"].steps]
    assert steps == [("cold_s", STEP_NIGHT, NIGHT_COMMITS[STEP_NIGHT])]
    assert by_model["convnet"].steps == [] and by_model[HOSTILE].steps == []
    (cold,) = [s for s in suite.series if s.metric == "cold_s"]  # the suite geomean steps too
    assert [st.night for st in cold.steps] == [STEP_NIGHT]
    assert {s.metric: s.latest for s in suite.series}["pass_rate"] == 1.0


def test_a_warm_start_that_went_cold_is_a_step(tmp_path: Path) -> None:
    """The published artifacts stop covering a model (a cache-key change on main): its warm
    start jumps to a cold compile's cost, and that night is marked."""
    with connect(f"sqlite:///{tmp_path / 'runs.db'}") as db:
        for run in nightly_history(models=("mlp",), step=("mlp", 10, {"warm_start_s": 9.0})):
            ingest(db, run)
        (suite,) = load_trends(db).suites
    (mlp,) = suite.models
    assert [(ser.metric, st.night) for ser, st in mlp.steps] == [("warm_start_s", 10)]
    (start,) = [s for s in mlp.series if s.metric == "warm_start_s"]
    assert len(start.values) == 24 and start.steps[0].rel_change == pytest.approx(2.0, abs=0.3)


def test_trends_command_writes_charts_pages_and_data(db_url: str, tmp_path: Path) -> None:
    out = tmp_path / "site"
    res = CliRunner().invoke(main, ["trends", "--out", str(out), "--db", db_url])
    assert res.exit_code == 0, res.output
    index = (out / "index.html").read_text()
    assert index.count('<svg class="panel"') == 7  # the suite's panels, inline
    assert not list(out.rglob("*.png")) and not list(out.rglob("*.svg"))  # no chart files
    day = f"2026-10-{STEP_NIGHT + 1:02d}"
    assert re.search(r"cold_s \+(4[4-9]|5[0-6])\.\d%", index)  # +50 % injected
    assert day in index and NIGHT_COMMITS[STEP_NIGHT][:10] in index
    mlp_page = (out / model_page("micro", "mlp", SLUG)).read_text()
    assert NIGHT_COMMITS[STEP_NIGHT] in mlp_page and day in mlp_page
    assert f'href="{model_page("micro", "mlp", SLUG)}"' in index
    assert f"step {NIGHT_COMMITS[STEP_NIGHT][:8]} +" in mlp_page  # drawn on the cold panel
    regressions = (out / "regressions.html").read_text()
    assert regressions.index("cold compile time") < regressions.index("</table>")
    # the data: trends.json says where each model's is, beside its page, one page each
    data = json.loads((out / "trends.json").read_text())
    entry = next(m for m in data["suites"][0]["models"] if m["model"] == "mlp")
    assert entry["page"] == model_page("micro", "mlp", SLUG) and entry["steps"] == 1
    assert data["suites"][0]["series"][0]["metric"] == "speedup"
    mlp = json.loads((out / entry["data"]).read_text())
    assert entry["data"].endswith(".json") and mlp["model"] == "mlp"
    cold = next(s for s in mlp["series"] if s["metric"] == "cold_s")
    assert [(st["night"], st["commit"]) for st in cold["steps"]] == [
        (STEP_NIGHT, NIGHT_COMMITS[STEP_NIGHT])]
    assert cold["steps"][0]["time"].startswith(day)
    # each value's run, by index into the page's columns
    night = cold["at"][STEP_NIGHT]
    assert mlp["commits"][night] == NIGHT_COMMITS[STEP_NIGHT] and mlp["times"][night][:10] == day
    speed = next(s for s in mlp["series"] if s["metric"] == "speedup")
    assert len(speed["intervals"]) == len(speed["values"]) and "intervals" not in cold


def test_hostile_model_names_are_escaped_and_kept_inside_the_site(db_url: str,
                                                                 tmp_path: Path) -> None:
    out = tmp_path / "site"
    assert CliRunner().invoke(main, ["trends", "--out", str(out), "--db", db_url]).exit_code == 0
    index = (out / "index.html").read_text()
    assert "<img src=x" not in index and "&lt;img src=x onerror=alert(1)&gt;" in index
    page = out / model_page("micro", HOSTILE, SLUG)
    assert page.is_file() and page.resolve().is_relative_to(out.resolve())
    assert "/../" not in path_part(HOSTILE) and "<" not in path_part(HOSTILE)
    assert "<img src=x" not in page.read_text()
    assert {p.name for p in tmp_path.iterdir()} <= {"runs.db", "runs.db.lock", "site"}


def test_nothing_to_draw_fails_unless_asked_for(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    with connect(url):
        pass  # an existing database without runs
    out = tmp_path / "site"
    res = CliRunner().invoke(main, ["trends", "--out", str(out), "--db", url, "--suite", "hf"])
    assert res.exit_code == 2
    assert "no run matched (ref main, trigger nightly, suite hf)" in res.output
    assert "holds no runs" in res.output and "--allow-empty" in res.output
    assert not out.exists()
    res = CliRunner().invoke(main, ["trends", "--out", str(out), "--db", url, "--suite", "hf",
                                    "--allow-empty"])
    assert res.exit_code == 0, res.output
    assert "nothing to draw yet" in (out / "index.html").read_text()


def _local_runs(url: str, ref: str | None, repository: str = "acme/models", n: int = 2) -> None:
    from tests.factories import model_result, run_results

    with connect(url) as db:
        for i in range(n):
            ingest(db, run_results([model_result("pointwise", seed=i)], ref=ref,
                                   commit=NIGHT_COMMITS[i], repository=repository,
                                   created_at=f"2026-10-0{i + 1}T03:00:00+00:00"))


def test_after_the_quickstart_the_hint_names_the_filters_and_what_would_match(
        tmp_path: Path) -> None:
    """The quickstart stores runs with trigger local of the checkout's branch: the default
    filters (nightlies of main) match nothing, and the message says which filter and what
    would match; the suggested command draws them."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    _local_runs(url, ref="newcomer")
    cli = CliRunner()
    res = cli.invoke(main, ["trends", "--out", str(tmp_path / "site"), "--db", url])
    assert res.exit_code == 2 and not (tmp_path / "site").exists()
    assert "--trigger nightly excludes them (triggers stored: local ×2)" in res.output
    assert "--ref main excludes them (refs stored: newcomer ×2)" in res.output
    assert "try --trigger local --ref newcomer" in res.output
    ok = cli.invoke(main, ["trends", "--out", str(tmp_path / "site"), "--db", url,
                           "--trigger", "local", "--ref", "newcomer"])
    assert ok.exit_code == 0, ok.output
    assert "pointwise" in (tmp_path / "site" / "index.html").read_text()


def test_runs_without_a_ref_are_matched_by_ref_star(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    _local_runs(url, ref=None)
    res = CliRunner().invoke(main, ["trends", "--out", str(tmp_path / "s"), "--db", url,
                                    "--trigger", "local"])
    assert res.exit_code == 2
    assert "--ref main excludes them (refs stored: no ref ×2)" in res.output
    assert "try --trigger local --ref '*'" in res.output


def test_trends_repo_filters_and_the_page_names_the_repository(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    _local_runs(url, ref="main", repository="acme/models")
    _local_runs(url, ref="main", repository="other/thing", n=1)
    cli = CliRunner()
    both = cli.invoke(main, ["trends", "--out", str(tmp_path / "a"), "--db", url,
                             "--trigger", "local"])
    assert both.exit_code == 0
    assert "2 repositories" in both.output and "--repo" in both.output
    one = cli.invoke(main, ["trends", "--out", str(tmp_path / "b"), "--db", url,
                            "--trigger", "local", "--repo", "acme/models"])
    assert one.exit_code == 0 and "repositories" not in one.output
    index = (tmp_path / "b" / "index.html").read_text()
    assert "acme/models" in index and "other/thing" not in index
    with connect(url) as db:
        (suite,) = load_trends(db, trigger="local", repository="other/thing").suites
    assert suite.runs == 1


def test_trends_help_names_the_triggers() -> None:
    out = CliRunner().invoke(main, ["trends", "--help"]).output
    assert "local" in out and "nightly" in out and "--allow-empty" in out and "--repo" in out


def test_pr_comment_links_the_model_page(tmp_path: Path) -> None:
    from tests.bot.render.test_formats import SCENARIOS

    md = render_markdown(SCENARIOS["regression"](),  # a GPU runner's comparison
                         trend_url=trend_url_template("https://o.github.io/r/"))
    slug = SLUG.replace("cpu-", "cuda-")
    assert f"[trend](<https://o.github.io/r/models/micro/resnet18/{slug}.html>)" in md


def test_compare_links_trends_with_trends_url(tmp_path: Path) -> None:
    from tests.factories import model_result, run_results

    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(run_results([model_result("mlp")]).model_dump_json())
    head.write_text(run_results([model_result("mlp", cold_s=30.0)]).model_dump_json())
    res = CliRunner().invoke(main, ["compare", str(base), str(head), "--repo", str(tmp_path),
                                    "--trends-url", "https://o.github.io/r"])
    assert res.exit_code == 0, res.output
    assert f"(<https://o.github.io/r/models/micro/mlp/{SLUG}.html>)" in res.output


def _index(db_url: str) -> str:
    from compilewatch.bot.history.dashboard import render_index

    with connect(db_url) as db:
        return render_index(load_trends(db), generated="2026-12-01 00:00 UTC")


def test_every_dashboard_table_has_one_cell_per_header(db_url: str, tmp_path: Path) -> None:
    from tests.html_tables import check_tables

    (table,) = check_tables(_index(db_url))
    mlp = table.row("mlp")
    assert mlp["breaks"] == "0" and mlp["recompiles"] == "0" and mlp["passing"] == "yes"
    assert mlp["warm start (s)"][0] in "23" and mlp["config"] == SLUG
    assert mlp["cold (s)"].startswith(("14", "15", "16")) and "cold_s" in mlp["steps"]
    out = tmp_path / "site"
    assert CliRunner().invoke(main, ["trends", "--out", str(out), "--db", db_url]).exit_code == 0
    for page in [out / "index.html", out / model_page("micro", "mlp", SLUG)]:
        check_tables(page.read_text())


def test_a_history_without_warm_starts_has_no_such_column(tmp_path: Path) -> None:
    """What a quickstart stores: no warm start, a graph break in one model."""
    from tests.factories import model_result, run_results
    from tests.html_tables import check_tables

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with connect(url) as db:
        for night in range(3):
            run = run_results([model_result("pointwise", seed=night, graph_breaks=["item()"]),
                               model_result("gelu_mm", seed=night)], commit=NIGHT_COMMITS[night],
                              ref="main", created_at=f"2026-10-0{night + 1}T03:00:00+00:00")
            run.settings.trigger = "nightly"
            ingest(db, run)
    (table,) = check_tables(_index(url))
    assert "warm start (s)" not in table.headers
    assert table.row("pointwise")["breaks"] == "1" and table.row("gelu_mm")["breaks"] == "0"
    assert table.row("pointwise")["recompiles"] == "0"


def test_dashboard_golden(db_url: str) -> None:
    from tests.bot.render.test_formats import check_golden

    check_golden("trends_index.html", _index(db_url))


@pytest.mark.parametrize(("trigger", "times", "drawn", "said"), [
    # the quickstart twice: two local runs minutes apart were called "2 nights"
    ("local", ["2026-12-03T10:20:00", "2026-12-03T10:24:00"], "local", "2 runs on 1 date"),
    ("local", ["2026-12-01T10:20:00", "2026-12-03T10:24:00"], "local", "2 runs"),
    ("nightly", ["2026-12-01T03:00:00", "2026-12-02T03:00:00", "2026-12-03T03:00:00"],
     "nightly", "3 nights"),
    ("nightly", ["2026-12-03T03:00:00"], "nightly", "1 night"),
    # a nightly retried the same night: two runs, not two nights
    ("nightly", ["2026-12-03T03:00:00", "2026-12-03T05:00:00"], "nightly", "2 runs on 1 date"),
    # every trigger drawn: what the runs were is not known, so runs
    ("nightly", ["2026-12-01T03:00:00", "2026-12-02T03:00:00"], "*", "2 runs"),
    ("pr", ["2026-12-01T03:00:00", "2026-12-02T03:00:00"], "pr", "2 runs"),
])
def test_the_dashboard_says_nights_only_for_nightly_runs_on_different_dates(
        tmp_path: Path, trigger: str, times: list[str], drawn: str, said: str) -> None:
    url = f"sqlite:///{tmp_path / 'cw.db'}"
    with connect(url) as db:
        for i, t in enumerate(times):
            run = nightly_history(1)[0].model_copy(update={
                "run_id": f"run-{i:08d}", "created_at": f"{t}+00:00",
                "finished_at": f"{t}+00:00"})
            run.settings.trigger = trigger  # type: ignore[assignment]
            ingest(db, run)
    res = CliRunner().invoke(main, ["trends", "--out", str(tmp_path / "site"), "--db", url,
                                    "--trigger", drawn, "--ref", "*"])
    assert res.exit_code == 0, res.output
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    (heading,) = re.findall(r"<h2>Suite micro <span class=\"muted\">\(([^)]*)\)", index)
    assert heading == f"{said}, 2 model configs"
    assert ("night" in heading) == said.endswith(("night", "nights"))
    # the summary counts in words that agree with their numbers ("1 suites" once)
    assert "(1 suite, 2 model configs, 0 model steps; 4 pages, the largest " in res.output


def test_a_report_url_that_is_no_http_url_is_never_a_link(db_url: str, tmp_path: Path) -> None:
    """``trends`` as a library: the points of its charts would link there."""
    from compilewatch.bot.commands.trends import TrendsRequest, trends_command
    from compilewatch.core.errors import UsageError

    with connect(db_url) as db:
        for run in nightly_history(2):
            ingest(db, run)
    with pytest.raises(UsageError, match="is not an http"):
        trends_command(TrendsRequest(out=tmp_path / "site", db_url=db_url,
                                     report_url="javascript:alert(1)//{run_id}"))
    assert not (tmp_path / "site").exists()
    cli = CliRunner().invoke(main, ["trends", "--out", str(tmp_path / "site"), "--db", db_url,
                                    "--report-url", "javascript:alert(1)//{run_id}"])
    assert cli.exit_code == 2 and "Invalid value for '--report-url'" in cli.output
    assert not (tmp_path / "site").exists()
