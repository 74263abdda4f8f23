"""``compilewatch bisect`` and ``bisect-plan`` refuse bad input with exit 2 and one message that
names what is wrong: no traceback, nothing measured, nothing written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main


def sh(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    sh(r, "init", "-q", "-b", "main")
    sh(r, "config", "user.email", "t@example.com")
    sh(r, "config", "user.name", "t")
    for i in range(3):
        (r / "f").write_text(str(i))
        sh(r, "add", "f")
        sh(r, "commit", "-qm", f"c{i}")
    return r


CASES = [
    (["--good", "main~2", "--bad", "main", "--model", "m", "--metric", "graph-break"],
     "--metric 'graph-break' is not a metric a bisection follows (did you mean graph-breaks?)"),
    (["--good", "main~2", "--bad", "main", "--metric", "graph-breaks"], "pass --model M"),
    (["--model", "m", "--metric", "recompiles"], "pass --good REF and --bad REF, or --pythons"),
    (["--good", "main~2", "--bad", "main", "--model", "m", "--metric", "recompiles",
      "--pythons", "builds.txt"], "--pythons bisects torch builds at one commit"),
    (["--good", "main~2", "--bad", "main", "--model", "m", "--metric", "recompiles",
      "--commit", "main"], "--commit goes with --pythons"),
    (["--good", "main~2", "--bad", "main", "--model", "m", "--metric", "recompiles",
      "--max-steps", "0"], "Invalid value for '--max-steps': 0 is not in the range 1<=x"),
    (["--good", "main~2", "--bad", "main", "--model", "m", "--metric", "peak-memory"],
     "--metric peak-memory is measured on a GPU only: pass --device cuda"),
    (["--good", "main~2", "--bad", "main", "--model", "m", "--metric", "graph-breaks",
      "--config-flags"], "--metric graph-breaks is not timed"),
    (["--good", "main~2", "--bad", "main", "--model", "m", "--metric", "cache:a b"],
     "'a b' is not a cache-key component name"),
    (["--good", "mian", "--bad", "main", "--model", "m", "--metric", "recompiles"],
     "'mian' is not a commit, branch or tag"),
    (["--good", "main", "--bad", "main~1", "--model", "m", "--metric", "recompiles"],
     "is not an ancestor of --bad main~1"),
    (["--good", "main", "--bad", "main", "--model", "m", "--metric", "recompiles"],
     "the same commit"),
    (["--good", "main~1", "--bad", "main", "--model", "m", "--metric", "recompiles",
      "--out", "taken.txt"], "Directory 'taken.txt' is a file"),
]


@pytest.mark.parametrize(("args", "said"), CASES, ids=[c[1][:40] for c in CASES])
def test_bad_input_exits_2_naming_it_and_writes_nothing(repo, tmp_path, monkeypatch, args,
                                                        said):
    monkeypatch.chdir(repo)
    (repo / "builds.txt").write_text("")
    (repo / "taken.txt").write_text("")
    before = sorted(p.name for p in repo.iterdir())
    result = CliRunner().invoke(main, ["bisect", *args, "--no-db"])
    assert result.exit_code == 2, result.output
    assert said in result.output
    assert "Traceback" not in result.output
    assert sorted(p.name for p in repo.iterdir()) == before  # no compilewatch-out/


def test_an_outdir_holding_other_files_is_refused(repo, monkeypatch):
    monkeypatch.chdir(repo)
    out = repo / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    result = CliRunner().invoke(main, ["bisect", "--good", "main~1", "--bad", "main",
                                       "--model", "m", "--metric", "recompiles", "--out",
                                       "out", "--no-db"])
    assert result.exit_code == 2 and "holds other files (notes.txt)" in result.output
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize(("args", "said"), [
    (["--budget", "-1"], "Invalid value for '--budget': -1 is not in the range 0<=x"),
    (["--budget", "5", "--recent", "0"],
     "Invalid value for '--recent': 0 is not in the range 1<=x"),
])
def test_bisect_plan_refuses_bad_numbers(tmp_path, args, said):
    result = CliRunner().invoke(main, ["bisect-plan", *args, "--db",
                                       f"sqlite:///{tmp_path / 'none.db'}"])
    assert result.exit_code == 2 and said in result.output, result.output
