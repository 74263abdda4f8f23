"""The fork server refuses to serve when a forked child could not use CUDA, and the run says
it spawned its workers instead (a CPU stand-in for an import that poisons fork on a GPU)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compilewatch.compiler import forkserver
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


def _stack_poisons_fork(tmp_path: Path) -> bool:
    """Whether importing the compiler stack alone marks forked children "bad fork" here (torch's
    CUDA build on a machine without a driver: Inductor's import asks the driver)."""
    code = ("from compilewatch.compiler import forkserver, worker\n"
            "worker.import_compiler_stack()\nprint(forkserver._fork_poisoned())\n")
    out = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True,
                         text=True, timeout=300, check=True)
    return out.stdout.strip().endswith("True")


@pytest.mark.slow
def test_the_run_is_told_when_its_workers_are_spawned_instead(tmp_path):
    (tmp_path / "poisons_fork.py").write_text(POISON)
    (tmp_path / "harmless.py").write_text("import torch\n")
    cases = [(["poisons_fork"], True)]
    if not _stack_poisons_fork(tmp_path):  # else even a harmless import is refused, rightly
        cases.append((["harmless"], False))
    for preload, expect_note in cases:
        notes: list[str] = []
        with Launcher("fork", preload, on_note=notes.append) as launcher:
            launcher.prepare(sys.executable, _env(tmp_path))
            launcher.prepare(sys.executable, _env(tmp_path))  # a note is said once
        assert len(notes) == int(expect_note), (preload, notes)
        if expect_note:
            assert "workers spawned" in notes[0] and "touched CUDA" in notes[0]


@pytest.mark.slow
def test_a_cpu_run_keeps_its_fork_server_whatever_the_imports_did(tmp_path):
    """torch's CUDA build on a machine without a driver: Inductor's import asks the driver for
    the device count, which marks forked children "bad fork". No child of a CPU run touches
    CUDA, so that run keeps forking rather than paying every worker's imports."""
    (tmp_path / "poisons_fork.py").write_text(POISON)
    server = ForkServer(sys.executable, _env(tmp_path), tmp_path / "log", ["poisons_fork"],
                        needs_cuda=False)
    try:
        assert server.alive
    finally:
        server.close()
    notes: list[str] = []
    with Launcher("fork", ["poisons_fork"], on_note=notes.append, needs_cuda=False) as launcher:
        launcher.prepare(sys.executable, _env(tmp_path))
    assert notes == []


def test_the_worker_environment_asks_nvml_not_the_driver():
    """``is_available()`` through the driver poisons fork; through NVML it does not."""
    assert base_env()["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"


def test_a_lazy_package_is_preloaded_with_its_heavy_part():
    assert forkserver.preload_modules(["torchvision", "transformers"]) == [
        "torchvision", "transformers", "transformers.modeling_utils",
        "transformers.models.auto.modeling_auto"]


@pytest.mark.slow
def test_the_server_imports_transformers_model_code_without_touching_cuda(tmp_path):
    """What a forked hf worker would import again: the real server imports it once (it serves
    until its input closes), and fork stays clean."""
    pytest.importorskip("transformers")
    code = ("import sys\nfrom compilewatch.compiler import forkserver\n"
            "forkserver.serve(['transformers'])\nimport torch\n"
            "print('transformers.models.auto.modeling_auto' in sys.modules, "
            "torch.cuda.is_initialized())\n")
    out = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True,
                         text=True, timeout=300, check=True, stdin=subprocess.DEVNULL)
    assert '"ready": true' in out.stdout and '"skipped": []' in out.stdout
    assert out.stdout.split()[-2:] == ["True", "False"]


@pytest.mark.slow
def test_the_server_imports_the_compile_path_without_touching_cuda(tmp_path):
    """``--preload-compile-path`` hands the server ``protocol.COMPILE_PATH`` as its preload:
    this torch has every module of it, and fork stays clean."""
    code = ("import sys\nfrom compilewatch.compiler import forkserver, protocol\n"
            "forkserver.serve(list(protocol.COMPILE_PATH))\nimport torch\n"
            "print(all(m in sys.modules for m in protocol.COMPILE_PATH), "
            "torch.cuda.is_initialized())\n")
    out = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True,
                         text=True, timeout=300, check=True, stdin=subprocess.DEVNULL)
    assert '"ready": true' in out.stdout and '"skipped": []' in out.stdout
    assert '"fork_poisoned": false' in out.stdout
    assert out.stdout.split()[-2:] == ["True", "False"]
