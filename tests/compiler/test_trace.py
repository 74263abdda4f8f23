"""The raw structured trace a worker keeps when its spec has ``trace_dir``: torch's own
TORCH_TRACE format, which tlparse reads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compilewatch.compiler.protocol import WorkerOutput, WorkerSpec
from compilewatch.core.schema import Config

SUITE = Path(__file__).parents[1] / "data" / "suites" / "graph_breaks_suite.py"


def _tlparse() -> str | None:
    beside = Path(sys.executable).with_name("tlparse")
    return str(beside) if beside.exists() else shutil.which("tlparse")


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[WorkerOutput, Path]:
    """One worker (spawned) compiles a model with a graph break and keeps its trace."""
    tmp = tmp_path_factory.mktemp("traced")
    spec = WorkerSpec(suite=str(SUITE), model="item", config=Config(), phase="cold",
                      large=False, rounds=1, block_ms=1.0, trace_dir=str(tmp / "trace"),
                      out=str(tmp / "out.json"), status_file=str(tmp / "status"))
    (tmp / "spec.json").write_text(spec.model_dump_json())
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp / "inductor")}
    env.pop("TORCH_TRACE", None)
    subprocess.run([sys.executable, "-m", "compilewatch.compiler.worker", str(tmp / "spec.json")],
                   check=True, timeout=600, env=env)
    out = WorkerOutput.model_validate_json((tmp / "out.json").read_text())
    return out, tmp / "trace"


@pytest.mark.slow
def test_the_worker_writes_the_trace_in_torch_format(traced):
    out, trace_dir = traced
    assert out.ok, out.error
    assert [b.kind for b in out.graph_breaks] == \
        ["Unsupported Tensor.item() call with capture_scalar_outputs=False"]
    logs = list(trace_dir.glob("dedicated_log_torch_trace_*.log"))
    assert len(logs) == 1
    text = logs[0].read_text(encoding="utf-8")
    # a glog-style prefix, then the event's JSON; payload lines follow, tab-indented
    assert '"dynamo_graph_break_reason"' in text and '"fx_graph_cache_miss"' in text
    assert "\tGraph break in user code at " in text


@pytest.mark.slow
@pytest.mark.skipif(_tlparse() is None, reason="tlparse not installed (pip install tlparse)")
def test_tlparse_reads_the_trace(traced, tmp_path):
    _, trace_dir = traced
    log = next(trace_dir.glob("dedicated_log_torch_trace_*.log"))
    proc = subprocess.run([_tlparse(), str(log), "-o", str(tmp_path / "tl"), "--overwrite",
                           "--no-browser"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "tl" / "index.html").is_file()
    directory = json.loads((tmp_path / "tl" / "compile_directory.json").read_text())
    names = [a["name"] for c in directory.values() for a in c["artifacts"]]
    assert any(n.startswith("dynamo_graph_break_reason") for n in names)
    assert any(n.startswith("fx_graph_cache_miss") for n in names)
