"""The fault-injection matrix: every way a model can misbehave, measured in one run per isolation
mode (forked and spawned workers). Each must be recorded with the right status, leave no process
behind, and leak no secret into any output."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compilewatch.compiler import proctree
from compilewatch.compiler.plan import Job
from compilewatch.compiler.processes import (
    RUN_PREFIX,
    allowed_env,
    clean_stale_runs,
    where_it_was,
)
from compilewatch.compiler.schedule import LoopSettings, RunOptions, SideJobs, measure_jobs
from compilewatch.core.schema import Category, Config, Status
from compilewatch.suites.loader import load_suite

SECRET = "ghp_thisIsNotARealTokenButLooksLikeOne42"
# model -> (status, category, a phrase its error must contain)
FAULTS: dict[str, tuple[Status, Category, str]] = {
    "raises": (Status.ERROR, Category.EAGER_ERROR, "shapes do not line up"),
    "aborts": (Status.CRASH, Category.CRASH, "SIGABRT"),
    "segfaults": (Status.CRASH, Category.CRASH, "SIGSEGV"),
    "exits": (Status.CRASH, Category.CRASH, "exited with status 3"),
    "floods": (Status.CRASH, Category.CRASH, "exited with status 5 without a result in phase "
               "cold: " + "x" * 74),
    "hangs": (Status.TIMEOUT, Category.TIMEOUT, "killed"),
    "oom": (Status.ERROR, Category.OOM, ""),
    "wrong_output": (Status.FAIL, Category.ACCURACY, "differs from eager"),
    "random_output": (Status.FAIL, Category.EAGER_NONDETERMINISTIC, "does not repeat"),
    "reads_secrets": (Status.ERROR, Category.EAGER_ERROR, "[redacted]"),
    "spawns_daemon": (Status.PASS, Category.OK, ""),
    "lingers": (Status.ERROR, Category.EAGER_ERROR, "eager fails after the thread started"),
}
# What differs between a forked and a spawned worker is the process (its start, environment,
# death and children); faults raised inside the harness's Python are the same code in both, so
# the spawned run (about 12 s of imports per worker on a 2-core runner) takes the process ones.
IN_PYTHON = {"raises", "oom", "wrong_output", "random_output"}


def _faults(isolation: str) -> dict[str, tuple[Status, Category, str]]:
    return {k: v for k, v in FAULTS.items() if isolation == "fork" or k not in IN_PYTHON}


@pytest.fixture(scope="module", params=["fork", "spawn"])
def faults_run(request: pytest.FixtureRequest, harness_suite: str,
               tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, Path]:
    """All faults in one run (a model each), once per isolation mode."""
    tmp_path = tmp_path_factory.mktemp(f"faults-{request.param}")
    secret_file, pidfile = tmp_path / "token.txt", tmp_path / "daemon.pid"
    secret_file.write_text(SECRET)
    suite = load_suite(harness_suite)
    jobs = [Job(suite, suite.models[name], Config()) for name in _faults(request.param)
            if name != "hangs"]
    # compile and check only (no timing), four at a time; the hang waits out a short timeout
    # of its own beside the others (a side of its own), which get a generous one: a spawned
    # worker's imports alone take tens of seconds on a loaded 2-core runner
    opts = RunOptions(rounds=3, block_ms=2.0, timeout_s=120, measure=False,
                      python=sys.executable,
                      extra_env={"CW_TEST_LEAK_FILE": str(secret_file),
                                 "CW_TEST_PIDFILE": str(pidfile)})
    # processes this test process already had (e.g. multiprocessing's resource tracker, which
    # an earlier test may have started) are not the run's
    (tmp_path / "before.json").write_text(json.dumps(proctree.descendants(os.getpid())))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GITHUB_TOKEN", SECRET)
        mp.setenv("AWS_SECRET_ACCESS_KEY", SECRET + "aws")
        # long enough for a spawned worker's imports on a loaded runner to reach the
        # factory it hangs in (at 20 s one was stopped still importing, "last phase: start")
        hang = SideJobs("hang", [Job(suite, suite.models["hangs"], Config())],
                    dataclasses.replace(opts, timeout_s=45))
        sides = measure_jobs([SideJobs("run", jobs, opts), hang],
                        LoopSettings(isolation=request.param, compile_slots=4))
    return ({r.result.model: r.result for runs in sides.values() for r in runs}, pidfile,
            tmp_path)


def test_every_fault_is_recorded_with_its_status(faults_run: tuple[dict, Path, Path]) -> None:
    results, _, tmp_path = faults_run
    isolation = "spawn" if tmp_path.name.startswith("faults-spawn") else "fork"
    assert set(results) == set(_faults(isolation))
    for name, (status, category, phrase) in _faults(isolation).items():
        r = results[name]
        assert (r.status, r.category) == (status, category), (name, r.error)
        assert phrase in (r.error or ""), (name, r.error)


def test_a_timeout_says_where_the_worker_was(faults_run: tuple[dict, Path, Path]) -> None:
    """The hang sleeps in the model's factory: the error names that line, innermost first,
    after the phase, whether the worker was forked or spawned."""
    error = faults_run[0]["hangs"].error or ""
    where = error.split("where it was when stopped (main thread, innermost first):\n", 1)
    assert len(where) == 2, error
    assert re.match(r'  File ".*harness_suite\.py", line \d+ in hangs\n', where[1]), error
    assert "(last phase: " in where[0], error


def test_stacks_keep_the_main_thread_whole_and_one_frame_of_each_other_thread() -> None:
    thread = 'Thread 0x1 (most recent call first):\n  File "t.py", line 3 in spin\n' \
             '  File "threading.py", line 982 in run'
    main = "Current thread 0x2 (most recent call first):\n" + "\n".join(
        f'  File "m.py", line {n} in f{n}' for n in range(30))
    text = where_it_was(f"{thread}\n\n{thread}\n\n{main}\n", frames=5)
    lines = text.splitlines()
    assert lines[2:7] == [f'  File "m.py", line {n} in f{n}' for n in range(5)]
    assert lines[7:] == ["  ... 25 outer frames", "other threads: 2",
                         '  File "t.py", line 3 in spin', '  File "t.py", line 3 in spin']
    assert where_it_was("") == ""


def test_a_flooded_log_and_status_file_are_read_in_bounds(faults_run: tuple[dict, Path, Path]
                                                         ) -> None:
    error = faults_run[0]["floods"].error or ""
    assert len(error) <= 4100 and "x" * 81 not in error, len(error)
    assert error.endswith("y" * 100)  # the log's end, cut


def test_no_secret_reaches_any_output(faults_run: tuple[dict, Path, Path]) -> None:
    results, _, _ = faults_run
    text = json.dumps([r.model_dump(mode="json") for r in results.values()])
    assert SECRET not in text
    # the environment a worker saw held no credential at all
    assert "environment credentials: {}" in results["reads_secrets"].error


def test_no_process_is_left_behind(faults_run: tuple[dict, Path, Path]) -> None:
    _, pidfile, tmp_path = faults_run
    before = set(json.loads((tmp_path / "before.json").read_text()))
    daemon = int(pidfile.read_text())
    time.sleep(0.2)
    assert proctree.start_time(daemon) is None or _zombie(daemon), \
        "the model's setsid grandchild outlived its worker"
    leftovers = [p for p in proctree.descendants(os.getpid())
                 if p not in before and not _zombie(p)]
    assert leftovers == [], [_cmdline(p) for p in leftovers]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return f"{pid} (gone)"


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_the_allowed_environment_drops_credentials() -> None:
    env = {"PATH": "/bin", "HOME": "/root", "GITHUB_TOKEN": "t", "HF_TOKEN": "t",
           "AWS_ACCESS_KEY_ID": "k", "TORCH_LOGS": "+dynamo", "CUDA_VISIBLE_DEVICES": "0",
           "PYTHONPATH": "/x", "COMPILEWATCH_DB": "postgresql://u:pw@h/db", "MY_API_KEY": "k",
           "TRITON_CACHE_DIR": "/t", "SSH_AUTH_SOCK": "/s", "RANDOM_THING": "x",
           "ACTIONS_RUNTIME_TOKEN": "t", "COMPILEWATCH_SIGNING_KEY": "pem"}
    assert allowed_env(env) == {"PATH": "/bin", "HOME": "/root", "TORCH_LOGS": "+dynamo",
                                "CUDA_VISIBLE_DEVICES": "0", "PYTHONPATH": "/x",
                                "TRITON_CACHE_DIR": "/t"}


def _run_tree(pid: int) -> list[int]:
    return [p for p in proctree.descendants(pid) if not _zombie(p)]


@pytest.mark.parametrize("isolation", ["fork", "spawn"])
def test_a_sigkilled_run_takes_its_workers_along_and_the_next_run_cleans_up(
        isolation: str, harness_suite: str, tmp_path: Path) -> None:
    """``kill -9`` of ``compilewatch run``: the worker (and the fork server) die with it
    (parent-death signal); what the worker started in a session of its own survives, until
    the next run kills it and removes the temp dirs the killed one left."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "compilewatch.bot.cli", "run", "--suite", harness_suite,
         "--model", "strays", "--no-warm", "--no-db", "--isolation", isolation,
         "--out", str(tmp_path / "r.json")],
        env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    tree: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None:
        tree = _run_tree(proc.pid)
        if any(b"compilewatch.compiler.worker" in _cmdline(p) or _is_forked_worker(p)
               for p in tree):
            break
        time.sleep(0.2)
    assert tree, "no worker started"
    while time.monotonic() < deadline and not _strays() and proc.poll() is None:
        time.sleep(0.2)  # the worker built its model: the stray runs
    strays = _strays()
    assert strays, "the worker never started its setsid grandchild"
    tree = [p for p in _run_tree(proc.pid) if p not in strays]
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(not _zombie(p) for p in tree):
        time.sleep(0.2)
    assert [p for p in tree if not _zombie(p)] == [], "a worker outlived a SIGKILLed run"
    left = sorted(tmp.glob("compilewatch-*"))
    assert any(p.name.startswith(RUN_PREFIX) for p in left), left
    # what the worker wrote to its temp folder is in the run's own
    assert not (tmp / "stray-file").exists()
    assert sorted(clean_stale_runs(tmp)) == left and not list(tmp.glob("compilewatch-*"))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(not _zombie(p) for p in strays):
        time.sleep(0.1)
    assert [p for p in strays if not _zombie(p)] == [], "the next run left the stray alive"


STRAY_SLEEP = "3601.25"  # harness_suite.STRAY_SLEEP


def _strays() -> list[int]:
    """The harness's setsid sleeper (``strays``), wherever it was re-parented."""
    want = f"sleep {STRAY_SLEEP}".encode()
    return [p for p in proctree.descendants(1) if _cmdline(p).replace(b"\0", b" ").strip()
            == want and not _zombie(p)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _is_forked_worker(pid: int) -> bool:
    """A child of the fork server (its command line is the server's)."""
    parent = proctree.parent_of(pid)
    return parent is not None and b"compilewatch.compiler.forkserver" in _cmdline(parent)
