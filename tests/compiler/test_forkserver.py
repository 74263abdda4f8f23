"""The fork server refuses to serve when a forked child could not use CUDA, and the run says
it spawned its workers instead (a CPU stand-in for an import that poisons fork on a GPU)."""

from __future__ import annotations

import json
import os
import socket
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
    hello, printed = _serve(code, tmp_path)
    assert '"ready": true' in hello and '"skipped": []' in hello
    assert printed.split()[-2:] == ["True", "False"]


def _serve(code: str, tmp_path: Path) -> tuple[str, str]:
    """Run ``code``, which calls ``serve``, on a channel as ``ForkServer`` gives it one: the
    server's hello, and what the code printed after the server ended (its stdout is the log,
    stderr, once it serves)."""
    ours, theirs = socket.socketpair()
    with ours:
        proc = subprocess.Popen([sys.executable, "-c", code], env=_env(tmp_path),
                                stdin=theirs.fileno(), stdout=theirs.fileno(),
                                stderr=subprocess.PIPE, text=True)
        theirs.close()
        hello = ours.makefile("rb").readline().decode()
        ours.shutdown(socket.SHUT_WR)  # EOF: the server returns
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return hello, err


@pytest.mark.slow
def test_the_server_imports_the_compile_path_without_touching_cuda(tmp_path):
    """``--preload-compile-path`` hands the server ``protocol.COMPILE_PATH`` as its preload:
    this torch has every module of it, and fork stays clean."""
    code = ("import sys\nfrom compilewatch.compiler import forkserver, protocol\n"
            "forkserver.serve(list(protocol.COMPILE_PATH))\nimport torch\n"
            "print(all(m in sys.modules for m in protocol.COMPILE_PATH), "
            "torch.cuda.is_initialized())\n")
    hello, printed = _serve(code, tmp_path)
    assert '"ready": true' in hello and '"skipped": []' in hello
    assert '"fork_poisoned": false' in hello
    assert printed.split()[-2:] == ["True", "False"]


# --- the channel between the run and its fork server ------------------------------------

HOSTILE_SUITE = '''
import json
import os
import time
from pathlib import Path

import torch

from compilewatch.suites import model

SUITE_NAME = "hostile"


def _dir():
    return Path(os.environ["CW_TEST_DIR"])


def _net():
    return torch.nn.Linear(2, 2), (torch.randn(1, 2),)


def _parent(pid):
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text[text.rfind(")") + 2:].split()[1])


def _fds(pid):
    """``pid``'s descriptors and what each is (``pipe:[N]``), or why they cannot be listed."""
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError as e:
        return None, e.strerror
    found = {}
    for fd in names:
        try:
            found[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            pass
    return found, None


def _reach(pid, wanted):
    """Open ``pid``'s descriptors that ``wanted`` takes for writing, through /proc, and write
    a line that is no message and a forged exit of this worker to each."""
    fds, why = _fds(pid)
    if fds is None:
        return {"listed": False, "why": why, "opened": [], "refused": []}
    opened, refused = [], []
    for fd, target in fds.items():
        if not wanted(target):
            continue
        try:
            w = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            refused.append([target, e.strerror])
            continue
        forged = json.dumps({"pid": os.getpid(), "status": 0})
        try:
            os.write(w, f"not a message\\n{forged}\\n".encode())
        except OSError:
            pass
        os.close(w)
        opened.append(target)
    return {"listed": True, "opened": opened, "refused": refused}


def _channelish(target):
    return target.startswith(("pipe:", "socket:"))


@model("reaches")
def reaches():
    server = os.getppid()
    # the server's channel, and the run's end of it (the same pipes, or any socket); never
    # the run's own stdout and stderr, which a process of its user may write to anyway
    theirs = set((_fds(server)[0] or {}).values())
    report = {"server": _reach(server, _channelish),
              "run": _reach(_parent(server), lambda t: t.startswith("socket:")
                            or (t.startswith("pipe:") and t in theirs))}
    (_dir() / "reach.json").write_text(json.dumps(report))
    time.sleep(1.0)  # alive while a forged exit of ours would be read
    return _net()


@model("victim")
def victim():
    (_dir() / "victim.pid").write_text(str(os.getpid()))
    deadline = time.monotonic() + 30
    while not (_dir() / "forged").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)
    return _net()


@model("lost")
def lost():
    (_dir() / "lost.pid").write_text(str(os.getpid()))
    time.sleep(0.2)
    os._exit(0)


@model("after")
def after():
    return _net()
'''

# Imported by the fork server itself (a package the suites require, which a PR can install):
# once the victim runs it writes lines that are no message, a forged exit of the victim and
# an answer to a request never made; and it garbles the server's report of the lost model's
# exit.
TAMPER = '''
import json
import os
import threading
import time
from pathlib import Path

DIR = Path(os.environ["CW_TEST_DIR"])
(DIR / "server-dumpable").write_text(str(__import__("ctypes").CDLL(None).prctl(3, 0, 0, 0, 0)))
_dumps = json.dumps


def _garbled(obj, *args, **kwargs):
    text = _dumps(obj, *args, **kwargs)
    lost = DIR / "lost.pid"
    if isinstance(obj, dict) and "status" in obj and lost.exists() \\
            and obj.get("pid") == int(lost.read_text()):
        return "garbled" + text[:-1]
    return text


json.dumps = _garbled


def _channel():
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                return int(fd)
        except OSError:
            pass


def _tamper():
    while not (DIR / "victim.pid").exists():
        time.sleep(0.02)
    victim = int((DIR / "victim.pid").read_text())
    lines = ["not a message", '["a list"]', '{"pid": "1", "status": 0}',
             _dumps({"pid": victim, "status": 0}), _dumps({"id": 10**6, "pid": os.getpid()})]
    os.write(_channel(), ("\\n".join(lines) + "\\n").encode())
    (DIR / "forged").write_text("")


threading.Thread(target=_tamper, daemon=True).start()
'''


def _hostile_run(tmp_path: Path, models: list[str], preload: list[str]) -> tuple[dict, list]:
    from compilewatch.compiler.plan import Job
    from compilewatch.compiler.schedule import LoopSettings, RunOptions, SideJobs, measure_jobs
    from compilewatch.core.schema import Config
    from compilewatch.suites.loader import load_suite

    (tmp_path / "hostile.py").write_text(HOSTILE_SUITE)
    (tmp_path / "cw_tamper.py").write_text(TAMPER)
    suite = load_suite(str(tmp_path / "hostile.py"))
    opts = RunOptions(rounds=3, block_ms=2.0, timeout_s=60, measure=False,
                      python=sys.executable,
                      extra_env={"CW_TEST_DIR": str(tmp_path),
                                 "PYTHONPATH": _env(tmp_path)["PYTHONPATH"]})
    events: list = []
    sides = measure_jobs([SideJobs("run", [Job(suite, suite.models[m], Config())
                                           for m in models], opts)],
                         LoopSettings(isolation="fork", compile_slots=1), events.append,
                         preload=preload)
    notes = [e.text for e in events if e.kind == "note"]
    return {r.result.model: r.result for r in sides["run"]}, notes


@pytest.mark.slow
def test_a_worker_cannot_reach_its_fork_servers_channel(tmp_path):
    """A worker (the PR's code) opens every pipe and socket of its fork server and of the run
    through /proc and writes a line that is no message and a forged exit of itself. The
    channel is a socket pair, which /proc does not open, and the server is not dumpable (as
    root, which this test may be, ptrace rights still list its fds): nothing is written,
    and the run measures on, forked."""
    from compilewatch.core.schema import Status

    results, notes = _hostile_run(tmp_path, ["reaches", "after"], ["cw_tamper_not_here"])
    report = json.loads((tmp_path / "reach.json").read_text())
    assert report["server"]["opened"] == [] and report["run"]["opened"] == [], report
    # the channel was there to try: the run's end of the socket pair, refused
    assert any(t.startswith("socket:") for t, _ in report["run"]["refused"]), report
    if os.geteuid() != 0:  # root keeps its ptrace rights over a process that is not dumpable
        assert report["server"]["listed"] is False, report
    assert {m: r.status for m, r in results.items()} == {"reaches": Status.PASS,
                                                          "after": Status.PASS}
    assert not any("not believed" in n or "spawned" in n for n in notes), notes


@pytest.mark.slow
def test_the_run_believes_nothing_its_fork_server_cannot_prove(tmp_path):
    """Lines that are no message, a forged exit of a running worker and an answer to no
    request reach the channel (written by a package the server imported); the server's
    report of one worker's exit is garbled. The reader goes on; the running worker is not
    believed to have ended and finishes; the one whose report was lost fails at once, named,
    not after its timeout; the next model is still forked."""
    from compilewatch.core.schema import Category, Status

    results, notes = _hostile_run(tmp_path, ["victim", "lost", "after"], ["cw_tamper"])
    assert (tmp_path / "server-dumpable").read_text() == "0"  # PR_GET_DUMPABLE in the server
    victim, lost, after = results["victim"], results["lost"], results["after"]
    assert victim.status == Status.PASS, victim.error
    pid = int((tmp_path / "victim.pid").read_text())
    assert any(f"an exit (status 0) of {pid}, which is still running: not believed" in n
               for n in victim.notes), victim.notes
    assert (lost.status, lost.category) == (Status.ERROR, Category.INFRA), lost.error
    assert "it ended, but the fork server's report of how never came" in (lost.error or "")
    assert "garbled" in (lost.error or "")
    assert lost.duration_s < 30  # not the 60 s timeout
    assert after.status == Status.PASS, after.error
    said = "\n".join(notes)
    for what in ["'not a message'", "'[\"a list\"]'", "an answer for request 1000000"]:
        assert what in said, said
    assert "spawned" not in said, said
