"""The harness end to end on CPU with real Inductor: what it records and how it isolates."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compilewatch.compiler.plan import Job
from compilewatch.core.results_file import load_results
from compilewatch.core.schema import Category, Config, Status
from compilewatch.suites.loader import load_suite
from tests.one_job import RunOptions, run_job

FAST = {"rounds": 3, "block_ms": 2.0}


def _job(suite_path: str, name: str, device: str = "cpu") -> Job:
    suite = load_suite(suite_path)
    return Job(suite, suite.models[name], Config(device=device))


@pytest.mark.slow
def test_cli_run_records_breaks_recompiles_and_warm_cache_hits(harness_suite, tmp_path):
    """Fresh cache dirs: cold misses the FX cache, the warm process hits it."""
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "compilewatch.bot.cli", "run", "--suite", harness_suite,
         "--model", "breaks", "--model", "branchy", "--rounds", "3", "--block-ms", "2",
         "--out", str(out), "--db", f"sqlite:///{tmp_path / 'cw.db'}"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = load_results(out)
    from compilewatch.db import connect, load_run

    assert load_run(connect(f"sqlite:///{tmp_path / 'cw.db'}"), run.run_id) == run
    results = run.by_ident()
    brk = results[("harness", "breaks", "cpu-default-float32-auto")]
    assert brk.status is Status.PASS, brk.error
    assert brk.graph_breaks and "item()" in brk.graph_breaks[0].reason
    assert brk.compile.graphs >= 2
    cold, warm = brk.cache.counters["cold"], brk.cache.counters["warm"]
    assert cold.fx_miss >= 1 and cold.fx_hit == 0
    assert warm.fx_hit >= 1 and warm.fx_miss == 0
    assert brk.compile.cache_dir_was_empty
    assert brk.compile.cold_s and brk.compile.warm_s
    assert {k.state for k in brk.cache.fx if k.phase == "cold"} == {"miss"}
    assert brk.latency is not None and brk.latency.processes == 2
    assert len(brk.latency.compiled_us) == 6
    assert brk.speedup is not None and brk.speedup.ci_low <= brk.speedup.value <= \
        brk.speedup.ci_high
    assert brk.accuracy is not None and brk.accuracy.passed

    br = results[("harness", "branchy", "cpu-default-float32-auto")]
    assert br.status is Status.PASS, br.error
    assert br.recompiles, "the shape sweep must provoke a recompile"
    assert any("size mismatch" in r.reason or "x.size()[0]" in r.reason for r in br.recompiles)
    # the summary table names both models
    assert "breaks" in proc.stderr and "branchy" in proc.stderr
    # no terminal here, so no live bar: a line per finished model shows the progress in logs
    assert "[1/2] harness/breaks [cpu-default-float32-auto]: pass (" in proc.stderr
    assert "[2/2] harness/branchy [cpu-default-float32-auto]: pass (" in proc.stderr


PRELOADED = """
import sys

import torch

from compilewatch.suites import model

SUITE_NAME = "preloaded"


@model("sees_compile_path")
def sees_compile_path():
    # built before any compile: the compile path's modules are here only when preloaded
    if "torch._inductor.fx_passes.fuse_attention" not in sys.modules:
        raise RuntimeError("the compile path was not imported before the build")
    return (lambda x: torch.relu(x) + 1), (torch.randn(64),)
"""


@pytest.mark.slow
@pytest.mark.parametrize("preload", [True, False])
@pytest.mark.parametrize("isolation", ["fork", "spawn"])
def test_the_compile_path_is_imported_before_the_clock_and_cold_stays_cold(
        tmp_path: Path, isolation: str, preload: bool) -> None:
    """``--preload-compile-path``: a forked worker finds the modules in its server, a spawned
    one imports them itself, both before the model builds; the cold compile still misses every
    cache. Without it the model sees them missing (its build fails, as designed here)."""
    path = tmp_path / "preloaded.py"
    path.write_text(PRELOADED)
    opts = RunOptions(timing_processes=0, cold_processes=1, preload_compile_path=preload,
                      **FAST)
    res = run_job(_job(str(path), "sees_compile_path"), opts, isolation=isolation)
    if not preload:
        assert res.status is not Status.PASS and "was not imported" in (res.error or "")
        return
    assert res.status is Status.PASS, res.error
    cold = res.cache.counters["cold"]
    assert cold.fx_miss >= 1 and cold.fx_hit == 0 and res.compile.cache_dir_was_empty
    assert {k.state for k in res.cache.fx if k.phase == "cold"} == {"miss"}


@pytest.mark.slow
def test_input_shape_change_moves_only_example_inputs_component(harness_suite, shared_cache):
    keys = []
    for rows in ("8", "6"):
        opts = RunOptions(timing_processes=0, measure=False, cache_root=shared_cache / rows,
                          extra_env={"CW_TEST_ROWS": rows}, **FAST)
        res = run_job(_job(harness_suite, "branchy"), opts)
        assert res.status is Status.PASS, res.error
        keys.append(res.cache.fx[0])
    a, b = keys
    assert a.key != b.key
    changed = {n for n in a.components.keys() | b.components.keys()
               if a.components.get(n) != b.components.get(n)}
    assert changed == {"example_inputs[0]"}
    assert "[8, 16]" in a.values["example_inputs[0]"]
    assert "[6, 16]" in b.values["example_inputs[0]"]


def test_failures_are_isolated_and_classified(harness_suite):
    """raise, abort, hang and OOM in workers become statuses; the parent carries on."""
    opts = RunOptions(timeout_s=12, timing_processes=0, **FAST)
    got = {}
    for name in ("raises", "aborts", "hangs", "oom", "cuda_only", "needs_pkg"):
        got[name] = run_job(_job(harness_suite, name), opts)
    assert got["raises"].category is Category.EAGER_ERROR
    assert got["raises"].status is Status.ERROR
    assert "shapes do not line up" in got["raises"].error
    assert got["aborts"].status is Status.CRASH
    assert "SIGABRT" in got["aborts"].error
    assert got["hangs"].status is Status.TIMEOUT
    assert "killed" in got["hangs"].error and "build" in got["hangs"].error
    assert got["oom"].category is Category.OOM
    assert got["cuda_only"].status is Status.SKIP
    assert got["needs_pkg"].category is Category.PACKAGE_MISSING
    assert "package not installed" in got["needs_pkg"].error


@pytest.mark.parametrize("isolation", ["fork", "spawn"])
def test_a_worker_that_hangs_after_writing_keeps_its_result(harness_suite, isolation):
    """The model leaves a non-daemon thread behind: the worker still ends once its output is
    written, rather than holding on until the run's timeout kills it."""
    opts = RunOptions(timeout_s=600, timing_processes=0, **FAST)
    t0 = time.monotonic()
    res = run_job(_job(harness_suite, "lingers"), opts, isolation=isolation)
    assert res.category is Category.EAGER_ERROR, (res.category, res.error)
    assert "eager fails after the thread started" in res.error
    assert time.monotonic() - t0 < 300, "the worker waited for its thread until the timeout"


def test_worker_output_is_json_even_for_infra_errors(tmp_path):
    """A spec naming a model that does not exist is an infra error, written, not a crash."""
    spec = {"suite": "micro", "model": "no_such_model", "phase": "cold",
            "config": Config().model_dump(), "rounds": 1, "block_ms": 1.0, "large": False,
            "out": str(tmp_path / "out.json"), "status_file": str(tmp_path / "status")}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    subprocess.run([sys.executable, "-m", "compilewatch.compiler.worker",
                    str(tmp_path / "spec.json")], check=True, timeout=120)
    data = json.loads(Path(spec["out"]).read_text())
    assert data["ok"] is False and data["category"] == "infra"
    assert "no_such_model" in data["error"]


def _workers(pid: int) -> list[int]:
    """The run's processes below ``pid`` once a worker exists (spawned, or forked from the
    fork server), from /proc."""
    from compilewatch.compiler import proctree

    tree = proctree.descendants(pid)
    cmd = {p: _cmdline(p) for p in tree}
    forked = [p for p in tree if b"forkserver" in cmd.get(proctree.parent_of(p) or 0, b"")]
    spawned = [p for p in tree if b"compilewatch.compiler.worker" in cmd[p]]
    return tree if forked or spawned else []


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_sigterm_kills_the_worker_and_cleans_up(harness_suite: str, tmp_path: Path) -> None:
    """A cancelled CI job (SIGTERM) must not leave a worker holding the machine: the worker is
    killed, the temp dirs are removed, and the exit status says SIGTERM (128 + 15)."""
    import os
    import signal
    import time

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "compilewatch.bot.cli", "run", "--suite", harness_suite,
         "--model", "hangs", "--no-warm", "--no-db", "--out", str(tmp_path / "r.json")],
        env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    workers: list[int] = []
    while not workers and time.monotonic() < deadline and proc.poll() is None:
        workers = _workers(proc.pid)
        time.sleep(0.2)
    assert workers, "the worker never started"
    time.sleep(1.0)  # the worker is in the model's build, sleeping for an hour
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err.decode()[-2000:]
    time.sleep(0.5)
    assert not [w for w in workers if _alive(w)], "a worker outlived the run"
    assert list(tmp.iterdir()) == []  # no temp dir (cache dir, worker files) left behind
