"""The fork server refuses to serve when a forked child could not use CUDA, and the run says
it spawned its workers instead (a CPU stand-in for an import that poisons fork on a GPU)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from compilewatch.compiler.forkserver import ForkServer, ForkServerError
from compilewatch.compiler.processes import Launcher, base_env

# torch sets this flag in a child forked after the CUDA driver was asked anything; on a CPU
# build the attribute may not exist, so the stand-in makes it exist and say "poisoned".
POISON = "import torch\ntorch._C._cuda_isInBadFork = lambda: True\n"


def _env(tmp_path: Path) -> dict[str, str]:
    paths = [str(tmp_path), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**base_env(), "PYTHONPATH": os.pathsep.join(paths)}


@pytest.mark.slow
def test_a_server_whose_imports_poison_fork_is_refused(tmp_path):
    (tmp_path / "poisons_fork.py").write_text(POISON)
    with pytest.raises(ForkServerError, match="touched CUDA"):
        ForkServer(sys.executable, _env(tmp_path), tmp_path / "log", ["poisons_fork"])


@pytest.mark.slow
def test_the_run_is_told_when_its_workers_are_spawned_instead(tmp_path):
    (tmp_path / "poisons_fork.py").write_text(POISON)
    (tmp_path / "harmless.py").write_text("import torch\n")
    for preload, expect_note in ((["poisons_fork"], True), (["harmless"], False)):
        notes: list[str] = []
        with Launcher("fork", preload, on_note=notes.append) as launcher:
            launcher.prepare(sys.executable, _env(tmp_path))
            launcher.prepare(sys.executable, _env(tmp_path))  # a note is said once
        assert len(notes) == int(expect_note), (preload, notes)
        if expect_note:
            assert "workers spawned" in notes[0] and "touched CUDA" in notes[0]


def test_the_worker_environment_asks_nvml_not_the_driver():
    """``is_available()`` through the driver poisons fork; through NVML it does not."""
    assert base_env()["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"
