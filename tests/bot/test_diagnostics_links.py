"""Trace links resolve from where the page is written, and every run keeps its own traces.

``compare OLD NEW --format html --out compilewatch-out/compare.html`` linked
``results.diagnostics/...`` beside the page, where nothing was (the traces are beside the
results file), and the second quickstart wrote its traces over the first one's. The real loop
runs with no process started (``FakeLauncher`` leaves a trace where one is asked for)."""

from __future__ import annotations

import functools
import gzip
import html
import json
import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.cli.base import Collaborators
from compilewatch.core.results_file import load_results, save_results
from tests.factories import FakeLauncher

HREF = re.compile(r'<a href="([^"#][^"]*)">(trace \((?:base|head)\))</a>')


@pytest.fixture(scope="module")
def two_runs(harness_suite: str, tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[str, list[str], Path]:
    """The quickstart twice: two runs with the same --out, stored (once for the module: each
    run asks the interpreter for its environment, seconds each; no test changes them)."""
    tmp = tmp_path_factory.mktemp("runs")
    url = f"sqlite:///{tmp / 'cw.db'}"
    out = tmp / "compilewatch-out" / "run" / "results.json"
    ids = []
    fake = Collaborators(launcher=functools.partial(FakeLauncher, raise_on=None))
    for _ in range(2):
        res = CliRunner().invoke(main, ["run", "--suite", harness_suite, "--model", "breaks",
                                        "--model", "branchy", "--no-warm", "-q",
                                        "--out", str(out), "--db", url], obj=fake)
        assert res.exit_code == 0, res.output
        ids.append(load_results(out).run_id)
    return url, ids, out


def _links(page: Path) -> list[tuple[str, Path]]:
    text = page.read_text(encoding="utf-8")
    return [(what, page.parent / unquote(html.unescape(href)))
            for href, what in HREF.findall(text)]


def test_each_run_keeps_its_own_traces(two_runs: tuple[str, list[str], Path]) -> None:
    url, ids, out = two_runs
    traces = {}
    for run_id in ids:
        res = CliRunner().invoke(main, ["runs", "--db", url, "--json"])
        assert run_id in res.output
        cli = CliRunner().invoke(main, ["compare", run_id, run_id, "--db", url,
                                        "--format", "json"])
        rows = json.loads(cli.stdout)["rows"]
        traces[run_id] = {r["model"]: r["diagnostics"]["trace (head)"] for r in rows}
    for run_id, paths in traces.items():
        for model, path in paths.items():
            assert path == f"results.diagnostics/{run_id[:12]}/harness-{model}-" \
                           "cpu-default-float32-auto/cold.trace.gz"
            with gzip.open(out.parent / path, "rt") as f:
                assert f.read().startswith("V1203 trace of")  # the first run's is still there
    assert load_results(out).settings.results_dir == str(out.parent.resolve())


@pytest.mark.parametrize("where", ["compilewatch-out/compare.html", "compare.html",
                                   "elsewhere/deeper/compare.html"])
@pytest.mark.parametrize("how", ["ids", "file and id"])
def test_trace_links_resolve_from_the_page(two_runs: tuple[str, list[str], Path],
                                           tmp_path: Path, where: str, how: str) -> None:
    url, ids, out = two_runs
    base = ids[0]
    head = ids[1] if how == "ids" else str(out)  # out holds the second run
    page = tmp_path / where
    page.parent.mkdir(parents=True, exist_ok=True)
    res = CliRunner().invoke(main, ["compare", base, head, "--db", url, "--format", "html",
                                    "--out", str(page)])
    assert res.exit_code == 0, res.output
    links = _links(page)
    assert sorted(what for what, _ in links) == ["trace (base)"] * 2 + ["trace (head)"] * 2
    for _, target in links:
        assert target.is_file(), target
    by_side = {what: {t.resolve() for w, t in links if w == what} for what, _ in links}
    assert not by_side["trace (base)"] & by_side["trace (head)"]  # each run's own files


def test_a_page_piped_to_a_file_links_from_the_current_folder(
        two_runs: tuple[str, list[str], Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    url, ids, _ = two_runs
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    res = CliRunner().invoke(main, ["compare", *ids, "--db", url, "--format", "html"])
    assert res.exit_code == 0
    page = tmp_path / "here" / "page.html"
    page.write_text(res.stdout, encoding="utf-8")
    assert [t for _, t in _links(page) if not t.is_file()] == []
    assert len(_links(page)) == 4


def test_a_trace_not_where_its_results_say_is_said_not_linked(
        two_runs: tuple[str, list[str], Path], tmp_path: Path) -> None:
    """A results file copied elsewhere without its traces: its paths start at its own folder,
    where nothing is; the page says where it looked instead of linking nothing."""
    url, ids, out = two_runs
    moved = tmp_path / "moved" / "copy.json"
    moved.parent.mkdir()
    shutil.copy(out, moved)
    page = tmp_path / "c.html"
    res = CliRunner().invoke(main, ["compare", ids[0], str(moved), "--db", url, "--format",
                                    "html", "--out", str(page)])
    assert res.exit_code == 0, res.output
    assert [w for w, _ in _links(page)] == ["trace (base)"] * 2  # the stored run's are there
    text = html.unescape(page.read_text(encoding="utf-8"))
    assert f"trace (head): not found at {moved.parent}/results.diagnostics/{ids[1][:12]}/" \
           "harness-breaks-" in text
    assert "(moved or deleted since the run)" in text


def test_a_stored_run_without_its_folder_says_where_its_paths_start(
        two_runs: tuple[str, list[str], Path], tmp_path: Path) -> None:
    url, ids, out = two_runs
    older = load_results(out).model_copy(update={"run_id": "older-run-0002"})
    older.settings.results_dir = None  # as every run stored before the folder was recorded
    save_results(older, tmp_path / "older.json")
    assert CliRunner().invoke(main, ["ingest", str(tmp_path / "older.json"), "--db", url]
                              ).exit_code == 0
    page = tmp_path / "c.html"
    res = CliRunner().invoke(main, ["compare", ids[0], "older-run-0002", "--db", url,
                                    "--format", "html", "--out", str(page)])
    assert res.exit_code == 0, res.output
    text = html.unescape(page.read_text(encoding="utf-8"))
    assert [w for w, _ in _links(page)] == ["trace (base)"] * 2
    assert "trace (head): results.diagnostics/" in text
    assert "in the folder this run's results file was written to (not recorded in the run)" \
        in text
