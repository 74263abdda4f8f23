"""``compilewatch bisect`` over real git histories, every step a real measurement (worktrees,
the fork server, Dynamo, Inductor on CPU, SQLite): the first bad commit among 64 for a graph
break in at most 7 steps, a recompile past commits that do not build, a changed input shape by
its cache-key component, ten times the work by compiled time with both ends confirmed, and a
regression the ends do not show, refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.judge.bisection import BisectReport
from compilewatch.bot.render.bisect import render_text
from compilewatch.core.schema import HostCheck
from compilewatch.db import connect, list_runs
from tests.bisectrepo import break_suite, build, sizes, suite_config, together

pytestmark = pytest.mark.slow
HOST_CHECK = "compilewatch.bot.measure.harness.host_check"  # the preflight
QUIET = HostCheck(cpu_spread=0.02, noisy=False, detail="CPU workload spread 2.0%")
BREAK_AT = 37
# the 30-commit history: what changes where
GRAPH_BREAK, BROKEN, FIXED, RECOMPILE, SHAPE, SLOWDOWN = 6, 8, 10, 12, 20, 25


@pytest.fixture(scope="module")
def long_history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """65 commits: the good end and 64 after it; a graph break from commit 37 on."""
    return build(tmp_path_factory.mktemp("long") / "repo", 65,
                 {BREAK_AT: sizes(BRANCH=True)})


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    return build(tmp_path_factory.mktemp("hist") / "repo", 30, {
        GRAPH_BREAK: sizes(BRANCH=True), BROKEN: break_suite, FIXED: suite_config(),
        RECOMPILE: sizes(SWEEP=[16, 32]), SHAPE: sizes(SIZE=24), SLOWDOWN: sizes(REPEAT=10)})


def bisect(repo: Path, tmp_path: Path, *args: str, code: int = 0) -> BisectReport:
    out = tmp_path / "bisect"
    result = CliRunner().invoke(main, ["bisect", "--repo", str(repo), "--out", str(out),
                                       "--db", f"sqlite:///{tmp_path / 'runs.db'}", "-q",
                                       *args])
    assert result.exit_code == code, result.output
    return BisectReport.model_validate_json((out / "bisect.json").read_text())


def test_a_graph_break_among_64_commits_is_found_in_at_most_7_steps(long_history, tmp_path):
    repo, shas = long_history
    r = bisect(repo, tmp_path, "--good", shas[0], "--bad", shas[-1], "--model", "tiny",
               "--metric", "graph-breaks")
    assert len(r.candidates) == 65 and r.outcome == "found"
    assert r.candidate(r.first_bad).commit == shas[BREAK_AT]
    assert r.candidate(r.last_good).commit == shas[BREAK_AT - 1]
    assert len(r.steps) <= 7, [s.candidate for s in r.steps]
    assert r.steps[0].kind == "ends" and r.steps[0].readings[0].value == "1"
    assert r.steps[0].reference_readings[0].value == "0"
    print(f"\n64 commits: {len(r.steps)} measuring steps, {r.measured} commits measured")
    # every step's runs are in the database, as bisect runs of their commits
    with connect(f"sqlite:///{tmp_path / 'runs.db'}") as db:
        runs = list_runs(db, limit=None)
    assert len(runs) == r.measured and {x.trigger for x in runs} == {"bisect"}
    assert {x.commit for x in runs} == {r.candidates[i].commit for s in r.steps
                                        for i in (s.candidate, s.reference) if i is not None}
    md = (tmp_path / "bisect" / "bisect.md").read_text()
    assert shas[BREAK_AT][:10] in md and f"--good {shas[0]}" in md
    assert "<html" in (tmp_path / "bisect" / "bisect.html").read_text()
    assert json.loads((tmp_path / "bisect" / "bisect.json").read_text())["kind"] == "bisect"


def test_a_recompile_is_found_past_commits_that_do_not_build(history, tmp_path):
    repo, shas = history
    r = bisect(repo, tmp_path, "--good", shas[0], "--bad", shas[-1], "--model", "tiny",
               "--metric", "recompiles")
    assert r.outcome == "found" and r.candidate(r.first_bad).commit == shas[RECOMPILE]
    skipped = [s for s in r.steps if s.call.value == "skip"]
    assert skipped and all(s.candidate in (BROKEN, BROKEN + 1) for s in skipped)
    assert "does not load" in (skipped[0].note or "")


def test_ends_that_both_have_the_graph_break_are_refused(history, tmp_path):
    repo, shas = history
    r = bisect(repo, tmp_path, "--good", shas[BROKEN - 1], "--bad", shas[FIXED],
               "--model", "tiny", "--metric", "graph-breaks", code=2)
    assert r.outcome == "not_reproduced" and len(r.steps) == 1  # the ends' step only
    assert "does not reproduce between the ends" in r.notes[-1]
    assert "Not bisected" in (tmp_path / "bisect" / "bisect.md").read_text()


def test_a_first_bad_right_after_commits_that_do_not_build_is_a_range(tmp_path):
    """c2 and c3 do not load; c4 repairs the suite and brings the graph break: the break
    came with c2, c3 or c4, and the report says so."""
    repo, shas = build(tmp_path / "repo", 6, {2: break_suite,
                                              4: together(suite_config(), sizes(BRANCH=True))})
    r = bisect(repo, tmp_path, "--good", shas[0], "--bad", shas[-1], "--model", "tiny",
               "--metric", "graph-breaks")
    assert r.outcome == "range" and r.first_bad is None
    assert [r.candidates[i].commit for i in r.suspects] == shas[2:5]
    assert "is one of these 3" in (tmp_path / "bisect" / "bisect.md").read_text()


def test_a_changed_input_shape_is_found_by_its_cache_key_component(history, tmp_path):
    repo, shas = history
    r = bisect(repo, tmp_path, "--good", shas[SHAPE - 2], "--bad", shas[SHAPE + 2],
               "--model", "shape", "--metric", "cache:example_inputs[0]")
    assert r.outcome == "found" and r.candidate(r.first_bad).commit == shas[SHAPE]
    assert "float32[16, 8]" in r.steps[0].reference_readings[0].value
    assert "float32[24, 8]" in r.steps[0].readings[0].value


@pytest.mark.timed
def test_ten_times_the_work_is_found_by_compiled_time_both_ends_confirmed(
        history, tmp_path, monkeypatch):
    """Timed: both ends measured together first and the regression confirmed, then each
    candidate beside the good end, judged on its processes. The host preflight is taken as
    quiet: on a shared 2-core machine it would silence every timed verdict (as it should)."""
    monkeypatch.setattr(HOST_CHECK, lambda *a, **k: QUIET)
    repo, shas = history
    r = bisect(repo, tmp_path, "--good", shas[SLOWDOWN - 3], "--bad", shas[SLOWDOWN + 3],
               "--model", "work", "--metric", "compiled-time", "--rounds", "10")
    ends = r.steps[0]
    assert (ends.kind, ends.call.value, ends.reference) == ("ends", "bad", 0)
    # timed on a shared 2-core CPU, a step can stay undecided (a "range"): the range must
    # still end before the slowdown; found, it is the slowdown
    assert r.outcome in ("found", "range"), render_text(r)
    if r.outcome == "found":
        assert r.candidate(r.first_bad).commit == shas[SLOWDOWN]
    else:
        assert r.candidate(r.last_good).commit in shas[SLOWDOWN - 3:SLOWDOWN], render_text(r)
    assert all(s.reference == 0 and s.processes >= 2 for s in r.steps)
    assert "→" in ends.readings[0].value and "+" in ends.readings[0].value
    print("\n" + render_text(r))
