"""``compilewatch bisect --pythons``: the same search over torch builds for one commit. The
builds are real interpreters (virtual environments over the test environment's torch), the
older two set up by their own startup (``sitecustomize``) to capture scalar outputs, the newer
two not: from the third build on, ``x.sum().item()`` breaks the graph."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.judge.bisection import BisectReport
from tests.bisectrepo import build
from tests.userrepo import venv

pytestmark = pytest.mark.slow
CAPTURE = ('import os\n'
           'os.environ.setdefault("TORCHDYNAMO_CAPTURE_SCALAR_OUTPUTS", "1")\n')


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("builds")
    pythons = []
    for name, startup in (("b1", CAPTURE), ("b2", CAPTURE), ("b3", None), ("b4", None)):
        python = venv(root / name)
        if startup is not None:
            site = next((root / name).glob("lib/python*/site-packages"))
            (site / "sitecustomize.py").write_text(startup)
        pythons.append(str(python))
    listed = root / "builds.txt"
    listed.write_text("# oldest first\n" + "\n".join(pythons) + "\n")
    return listed


def test_the_first_build_that_breaks_the_graph_is_found(builds, tmp_path):
    repo, shas = build(tmp_path / "repo", 2, {})
    out = tmp_path / "bisect"
    result = CliRunner().invoke(main, ["bisect", "--repo", str(repo), "--pythons", str(builds),
                                       "--commit", shas[0], "--model", "scalar", "--metric",
                                       "graph-breaks", "--out", str(out), "--no-db", "-q"])
    assert result.exit_code == 0, result.output
    r = BisectReport.model_validate_json((out / "bisect.json").read_text())
    pythons = [line for line in builds.read_text().splitlines() if not line.startswith("#")]
    assert r.mode == "builds" and [c.python for c in r.candidates] == pythons
    assert r.outcome == "found" and r.first_bad == 2 and r.last_good == 1
    assert r.steps[0].reference_readings[0].value == "0" and r.steps[0].readings[0].value == "1"
    first = r.candidate(r.first_bad)
    assert first.torch and first.torch.startswith("2.")  # each build said which torch it is
    assert f"first bad build: {first.torch} ({pythons[2]})" in result.output
    assert f"--pythons {builds} --commit {shas[0]}" in r.command
