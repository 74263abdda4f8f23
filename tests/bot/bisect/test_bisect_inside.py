"""Inside the first bad commit: torch's CompilerBisector naming the part of Inductor that
breaks a model (a real fault injected with Inductor's own testing hook, as its bisector's tests
do), and the Inductor config flag behind a timed regression (a real flag that makes the CPU
kernels scalar: several times slower), both on CPU, through real worker processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.judge.bisection import BisectReport
from tests.bisectrepo import build, suite_config
from tests.bot.bisect.test_bisect_commits import HOST_CHECK, QUIET

pytestmark = pytest.mark.slow
RELU_BUG = 'torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"'
SCALAR = ("torch._inductor.config.cpp.simdlen = 1", "torch._inductor.config.size_asserts = False")


def bisect(repo: Path, tmp_path: Path, *args: str) -> tuple[BisectReport, str]:
    out = tmp_path / "bisect"
    result = CliRunner().invoke(main, ["bisect", "--repo", str(repo), "--out", str(out),
                                       "--no-db", "-q", *args])
    assert result.exit_code == 0, result.output
    return BisectReport.model_validate_json((out / "bisect.json").read_text()), result.output


def test_a_wrong_result_is_traced_to_inductor_lowerings_and_the_relu(tmp_path):
    repo, shas = build(tmp_path / "repo", 3, {2: suite_config(RELU_BUG)})
    r, printed = bisect(repo, tmp_path, "--good", shas[0], "--bad", shas[-1], "--model", "relu",
                        "--metric", "accuracy")
    assert r.outcome == "found" and r.candidate(r.first_bad).commit == shas[2]
    assert r.steps[0].readings[0].value == "fail_accuracy"
    f = r.compiler
    assert f is not None and f.candidate == 2 and f.model == "hist/relu [cpu-default-float32-auto]"
    assert (f.backend, f.subsystem, f.debug_info) == ("inductor", "lowerings", "relu")
    assert f.bisect_number is not None and f.bisect_number >= 0
    assert "backend inductor, subsystem lowerings" in printed
    md = (tmp_path / "bisect" / "bisect.md").read_text()
    assert "backend **inductor**, subsystem **lowerings**" in md


@pytest.mark.timed
def test_a_slower_commit_is_traced_to_the_inductor_flag_it_set(tmp_path, monkeypatch):
    """The commit sets two Inductor flags; tried on the commit before it, one at a time, the
    vectorisation width is the one that makes it slower."""
    monkeypatch.setattr(HOST_CHECK, lambda *a, **k: QUIET)
    repo, shas = build(tmp_path / "repo", 2, {1: suite_config(*SCALAR)})
    r, printed = bisect(repo, tmp_path, "--good", shas[0], "--bad", shas[1], "--model", "vec",
                        "--metric", "compiled-time", "--config-flags", "--rounds", "10")
    assert r.outcome == "found" and r.first_bad == 1
    flags = r.flags
    assert flags is not None, r.notes
    changed = {c.name: (c.good, c.bad) for c in flags.flags}
    assert changed["inductor_config[cpp.simdlen]"] == ("None", "1")
    assert changed["inductor_config[size_asserts]"] == ("True", "False")
    tried = [s for s in r.steps if s.kind == "flags"]
    assert tried[0].flags == ["cpp.simdlen=1", "size_asserts=False"]  # all of them first
    assert all(s.reference == 0 for s in tried)
    # timed on a shared 2-core CPU, a step can stay undecided (then measured again with more
    # processes): the answer is the flag, or no flag blamed with the reason said (a range
    # that holds the flag, or all of them not regressing it); never another flag
    assert flags.culprit == "inductor_config[cpp.simdlen]" or (
        flags.culprit is None and ("inductor_config[cpp.simdlen]" in (flags.note or "")
                                   or "did not regress it" in (flags.note or ""))), \
        (flags.culprit, flags.note)
    if flags.culprit is not None:
        assert "inductor config flags: inductor_config[cpp.simdlen]" in printed
