"""The compare and baseline commands through the CLI: outputs, exit codes 0/1/2."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.core.results_file import save_results
from tests.factories import model_result, run_results


@pytest.fixture
def sides(tmp_path):
    base, head, slow = (tmp_path / n for n in ("base.json", "head.json", "slow.json"))
    save_results(run_results([model_result("m", seed=1)], run_id="base-run-0001"), base)
    save_results(run_results([model_result("m", seed=2)], run_id="head-run-0001"), head)
    save_results(run_results([model_result("m", seed=3, compiled_us=60)],
                             run_id="slow-run-0001"), slow)
    return base, head, slow


def _run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_clean_compare_exits_0_and_writes_the_format(sides, tmp_path):
    base, head, _ = sides
    out = tmp_path / "c.json"
    r = _run("compare", str(base), str(head), "--format", "json", "--out", str(out),
             "--fail-on-regression", "--repo", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["gating_regression"] is False
    assert f"wrote {out}" in r.stderr and r.stdout == ""  # the page went to the file only


def test_gating_regression_exits_1_only_when_asked_and_after_writing(sides, tmp_path):
    base, _, slow = sides
    out = tmp_path / "c.md"
    r = _run("compare", str(base), str(slow), "--out", str(out), "--repo", str(tmp_path))
    assert r.exit_code == 0
    r = _run("compare", str(base), str(slow), "--out", str(out), "--fail-on-regression",
             "--repo", str(tmp_path))
    assert r.exit_code == 1 and "gating regression: m" in r.output
    assert f"wrote {out}" in r.stderr
    assert out.read_text().startswith("<!-- compilewatch:pr-comment -->")


def test_bad_inputs_exit_2(sides, tmp_path):
    base, _, _ = sides
    r = _run("compare", str(base), "no/such/file.json")
    assert r.exit_code == 2 and "not a run id" in r.output
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = _run("compare", str(base), str(bad))
    assert r.exit_code == 2 and "schema_version" in r.output
    (tmp_path / "pyproject.toml").write_text("[tool.compilewatch.thresholds]\nspeed = 1\n")
    r = _run("compare", str(base), str(base), "--repo", str(tmp_path))
    assert r.exit_code == 2 and "thresholds.speed" in r.output


def test_table_and_html_formats(sides):
    base, head, _ = sides
    assert "micro/m" in _run("compare", str(base), str(head), "--format", "table").output
    assert _run("compare", str(base), str(head), "--format", "html").output.startswith(
        "<!DOCTYPE html>")


def test_baseline_update_then_compare_uses_it(sides, tmp_path):
    base, head, _ = sides
    (tmp_path / "pyproject.toml").write_text('[tool.compilewatch]\nbaseline = "exp.csv"\n')
    r = _run("baseline", "update", str(base), "--repo", str(tmp_path))
    assert r.exit_code == 0 and (tmp_path / "exp.csv").read_text().count("\n") == 2
    (tmp_path / "exp.csv").write_text(
        "suite,model,config,accuracy,graph_breaks,recompiles\nmicro,m,*,pass,0,0\n")
    assert _run("compare", str(base), str(head), "--repo", str(tmp_path),
                "--fail-on-regression").exit_code == 0


def test_html_is_not_printed_into_a_terminal(sides, tmp_path, monkeypatch):
    from compilewatch.bot.cli import result_commands

    base, head, _ = sides
    monkeypatch.setattr(result_commands, "stdout_is_terminal", lambda: True)
    r = CliRunner().invoke(main, ["compare", str(base), str(head), "--format", "html"])
    assert r.exit_code == 2 and "--out" in r.output and "<html" not in r.output
    out = tmp_path / "c.html"
    r = CliRunner().invoke(main, ["compare", str(base), str(head), "--format", "html",
                                  "--out", str(out)])
    assert r.exit_code == 0 and out.read_text().startswith("<!DOCTYPE html>")
    r = CliRunner().invoke(main, ["compare", str(base), str(head), "--format", "table"])
    assert r.exit_code == 0 and "micro/m" in r.output  # text formats still print


SAME_RUN = "base and head are the same run (base-run-000"


@pytest.mark.parametrize("fmt", ["markdown", "html", "json", "table"])
@pytest.mark.parametrize("how", ["file twice", "file and its id", "id and a prefix of it"])
def test_comparing_a_run_with_itself_warns_and_the_output_says_so(sides, tmp_path, fmt, how):
    base, _, _ = sides
    url = f"sqlite:///{tmp_path / 'cw.db'}"
    assert _run("ingest", str(base), "--db", url).exit_code == 0
    pair = {"file twice": (str(base), str(base)),
            "file and its id": (str(base), "base-run-0001"),
            "id and a prefix of it": ("base-run-0001", "base-run")}[how]
    out = tmp_path / f"c.{fmt}"
    r = _run("compare", *pair, "--format", fmt, "--out", str(out), "--db", url,
             "--repo", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert f"compilewatch: warning: {SAME_RUN}" in r.stderr
    text = out.read_text(encoding="utf-8")
    if fmt == "json":
        assert json.loads(text)["notes"][0].startswith(SAME_RUN)
    else:
        assert SAME_RUN in text.replace("\\", "")  # markdown escapes its punctuation


def test_two_runs_get_no_same_run_warning(sides, tmp_path):
    base, head, _ = sides
    for fmt in ("table", "json"):
        r = _run("compare", str(base), str(head), "--format", fmt, "--repo", str(tmp_path))
        assert r.exit_code == 0 and "same run" not in r.output
