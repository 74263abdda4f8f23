"""Hostile results files through the CLI: ``compare`` and ``post --dry-run`` exit 2 with a short
message naming the problem, print no traceback and write nothing (``ingest``: tests/db)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from compilewatch.bot.cli import main
from compilewatch.core.results_file import save_results
from tests.factories import model_result, run_results
from tests.fakegithub import HEAD_SHA, PR, REPO
from tests.hostile import NAMES, honest_run, write_hostile


def assert_refused(result: Result, needle: str, file: Path) -> None:
    """Exit 2, one short error naming the file and the problem, no traceback."""
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert result.stderr.startswith(f"compilewatch: error: {file}: "), result.stderr[:300]
    assert re.search(needle, result.stderr), result.stderr[:1000]
    assert len(result.stderr) < 3000  # nothing from the file is echoed at length


@pytest.mark.parametrize("name", NAMES)
def test_compare_refuses_and_writes_nothing(tmp_path: Path, name: str) -> None:
    base = tmp_path / "base.json"
    save_results(run_results([model_result("tiny_mlp")]), base)
    head = tmp_path / "head.json"
    needle = write_hostile(head, name)
    out = tmp_path / "comparison.md"
    result = CliRunner().invoke(main, ["compare", str(base), str(head), "--out", str(out),
                                       "--repo", str(tmp_path)])
    assert_refused(result, needle, head)
    assert not out.exists() and result.stdout == ""


@pytest.mark.parametrize("name", NAMES)
def test_post_dry_run_refuses_and_prints_no_comment(tmp_path: Path, name: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    save_results(run_results([model_result("tiny_mlp")], commit="b" * 40), out / "base.json")
    needle = write_hostile(out / "head.json", name)
    result = CliRunner().invoke(main, ["post", str(out), "--repo", REPO, "--pr", str(PR),
                                       "--sha", HEAD_SHA, "--dry-run"],
                                env={"GITHUB_TOKEN": ""})
    if "over the size limit" in result.stderr:  # post's directory check names the directory
        assert result.exit_code == 2 and "head.json" in result.stderr
    else:
        assert_refused(result, needle, out / "head.json")
    assert result.stdout == ""


def test_the_honest_file_behind_the_hostile_ones_is_accepted(tmp_path: Path) -> None:
    """Each hostile file differs from this one in one way only, so each refusal is that way's."""
    out = tmp_path / "out"
    out.mkdir()
    save_results(run_results([model_result("tiny_mlp")], commit="b" * 40), out / "base.json")
    save_results(honest_run(), out / "head.json")
    result = CliRunner().invoke(main, ["post", str(out), "--repo", REPO, "--pr", str(PR),
                                       "--sha", HEAD_SHA, "--dry-run"])
    assert result.exit_code == 0, result.output
    compared = CliRunner().invoke(main, ["compare", str(out / "base.json"),
                                         str(out / "head.json"), "--repo", str(tmp_path)])
    assert compared.exit_code == 0, compared.output


@pytest.mark.parametrize(("base_us", "head_us"), [
    (5e-324, 1.0), (1.0, 5e-324), (1e300, 5e-324), (1.7976931348623157e308, 1.0), (0.0, 1.0),
])
def test_extreme_but_valid_timings_compare_without_crashing(tmp_path: Path, base_us: float,
                                                            head_us: float) -> None:
    """Medians too far apart for a float ratio give no ratio, not an OverflowError."""
    paths = []
    for side, value in (("base", base_us), ("head", head_us)):
        run = run_results([model_result("tiny_mlp")])
        latency = run.results[0].latency
        assert latency is not None
        latency.eager_us = latency.compiled_us = [value] * 5
        latency.eager_median_us = latency.compiled_median_us = value
        save_results(run, tmp_path / f"{side}.json")
        paths.append(str(tmp_path / f"{side}.json"))
    for fmt in ("markdown", "html", "json", "table"):
        result = CliRunner().invoke(main, ["compare", *paths, "--format", fmt,
                                           "--repo", str(tmp_path)])
        assert result.exit_code == 0, result.output
