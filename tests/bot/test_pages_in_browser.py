"""Every page a person opens, opened in headless Chromium at 1400 px: a screenshot each, and the
DOM asked what a person would see (no sideways scrolling, a chart per model, hover text on a
point, a click on a point shows its links).

Screenshots: ``<tmp_path>/screenshots``, or ``COMPILEWATCH_SCREENSHOTS=DIR`` to keep them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from compilewatch.bot.history.dashboard import write_site
from compilewatch.bot.history.series import load_trends
from compilewatch.bot.judge.verdicts import compare
from compilewatch.bot.render.formats import render_html, render_run_html
from compilewatch.bot.render.sitemap import Links, model_page
from compilewatch.core.schema import Config, RunResults
from compilewatch.db import connect, ingest
from tests.browser import WIDTH, Look, look, needs_chromium, shots_dir
from tests.factories import model_result, nightly_history, run_results

pytestmark = needs_chromium
PHASES = {"warm_phases": {"dynamo": 1.0, "aot_autograd": 0.4, "inductor": 0.3},
          "warm_start_phases": {"dynamo": 1.0, "aot_autograd": 0.6, "inductor": 1.2}}


def _side(seed: int, gpt2_us: float, run_id: str) -> RunResults:
    results = [model_result("gpt2", seed=seed, compiled_us=gpt2_us, processes=4, n=12,
                            process_spread=0.01, warm_start_s=3.0),
               model_result("bert", seed=seed, processes=4, n=12, warm_start_s=3.0,
                            graph_breaks=["Tensor.item()"] if seed == 2 else None),
               model_result("a_model_with_a_really_long_name_that_people_do_write_in_suites",
                            seed=seed, processes=4, n=12, warm_start_s=3.0)]
    bimodal = model_result("resnet_bimodal", seed=seed, processes=2, n=10, warm_start_s=3.0)
    lat = bimodal.latency
    assert lat is not None
    samples = [120.0 + i for i in range(10)] + [20000.0 + 50 * i for i in range(10)]
    results.append(bimodal.model_copy(update={"latency": lat.model_copy(
        update={"compiled_us": samples})}))
    results = [r.model_copy(update={"compile": r.compile.model_copy(update=PHASES)})
               for r in results]
    return run_results(results, run_id=run_id)


@pytest.fixture(scope="module")
def sides() -> tuple[RunResults, RunResults]:
    return _side(1, 50.0, "base-run-0001"), _side(2, 62.0, "head-run-0001")


def _fits(page: Look) -> None:
    assert page.overflow == 0, f"{page.screenshot}: {page.overflow} px wider than {WIDTH}"
    assert all(right <= WIDTH for right in page.dom["tables"]), page.dom["tables"]
    assert all(s["right"] <= WIDTH for s in page.dom["svgs"]), page.dom["svgs"]


def test_the_comparison_draws_every_model_and_fits(sides, tmp_path: Path) -> None:
    base, head = sides
    page = tmp_path / "compare.html"
    page.write_text(render_html(compare(base, head), base, head), encoding="utf-8")
    seen = look(page, shots_dir(tmp_path), "compare")
    _fits(seen)
    labels = [s["label"] for s in seen.charts()]
    assert labels[0] == "compiled time change per model, with intervals"  # the forest, on top
    for model in ("gpt2", "bert", "resnet_bimodal"):
        assert f"timing processes of {model}" in labels
        assert f"compile phases of {model}" in labels
    hover = seen.dom["hover"]  # the forest's first point: the table's first row
    assert hover.startswith("micro/a_model_with") and "band ±" in hover and "unchanged" in hover
    html = page.read_text()
    assert "micro/gpt2 · cpu-default-float32-auto: +24.6% [+21.8%, +27.5%]" in html


def test_the_run_report_draws_every_model_and_fits(sides, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_run_html(sides[0]), encoding="utf-8")
    seen = look(page, shots_dir(tmp_path), "report")
    _fits(seen)
    labels = [s["label"] for s in seen.charts()]
    assert labels.count("timing processes of resnet_bimodal") == 1
    assert len([x for x in labels if x.startswith("compile phases of")]) == 4


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("site")
    with connect(f"sqlite:///{tmp / 'runs.db'}") as db:
        for run in nightly_history(models=("mlp", "convnet"),
                                   step=("mlp", 15, {"cold_s": 15.0})):
            ingest(db, run)
        write_site(load_trends(db), tmp / "site",
                   Links(report="https://ci.example/runs/{run_id}/report.html",
                         commit="https://github.com/o/r/commit/{commit}"))
    return tmp / "site"


def test_the_dashboard_index_draws_the_suite_and_fits(site: Path, tmp_path: Path) -> None:
    seen = look(site / "index.html", shots_dir(tmp_path), "trends-index")
    _fits(seen)
    assert len(seen.charts("panel")) == 7  # every metric with data
    assert "commit " in seen.dom["hover"] and "2026-10-01" in seen.dom["hover"]
    assert seen.dom["bands"] >= seen.dom["panels"] == 7  # an interval band on every panel


def test_a_model_page_points_hover_and_link(site: Path, tmp_path: Path) -> None:
    page = site / model_page("micro", "mlp", Config().slug)
    seen = look(page, shots_dir(tmp_path), "trends-model-mlp")
    _fits(seen)
    titles = [s["label"] for s in seen.charts("panel")]
    assert "cold compile time (s)" in titles and "graph breaks" in titles
    assert re.match(r"\d\.\d+× · \d\.\d+–\d\.\d+ · ", seen.dom["hover"])  # value, interval
    assert seen.dom["bands"] >= seen.dom["panels"] > 0  # an interval band on every panel
    assert "commit 00589fc6" in seen.dom["hover"]
    popup = seen.dom["popup"]
    assert popup["shown"] == "block"
    assert popup["links"][0].startswith("https://ci.example/runs/")
    assert popup["links"][1].startswith("https://github.com/o/r/commit/")


def test_the_regressions_page_lists_the_step_and_fits(site: Path, tmp_path: Path) -> None:
    seen = look(site / "regressions.html", shots_dir(tmp_path), "trends-regressions")
    _fits(seen)
    html = (site / "regressions.html").read_text()
    assert 'data-model="mlp" data-metric="cold_s" data-kind="worse"' in html
