"""How compilewatch starts a Python child of its own: isolated from the folder it runs in.

``python -m compilewatch.x`` puts its working directory first on ``sys.path``; started from a
PR's checkout, a ``compilewatch/`` package the PR adds would be what runs. Every child is
therefore started with ``-P`` (no such path entry) from a folder of its own, in a session of
its own, and when the call returns that whole session is killed (every process group in it),
so is whatever carries the child's marker, and so is every orphan of its tree, which comes to
us (a child subreaper) whatever its environment: a daemon a suite starts while it is imported
does not outlive the listing, even one that left the session and emptied its environment.
What is not a descendant (a process some service starts on request) is out of reach
(docs/security.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from compilewatch.compiler import proctree
from compilewatch.compiler.tempdirs import owned_temporary

CHILD_PREFIX = "compilewatch-child-"
MAX_OUTPUT = 16 * 1024 * 1024  # bytes of a child's stdout or stderr read back


def module_command(python: str, module: str, *args: str) -> list[str]:
    """``python -P -m module args``: the module is found where ``python`` installed it."""
    return [python, "-P", "-m", module, *args]


def kill_session(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads and every other process of its session."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    proctree.kill_session(pid)


def run_module(python: str, module: str, *args: str, env: dict[str, str], timeout: float,
               cwd: Path | None = None, check: bool = False
               ) -> subprocess.CompletedProcess[str]:
    """Run ``module`` to completion in ``cwd`` (a fresh empty folder when None) and kill what
    it left in its process group, or marked with its job marker, when it ends. Its output
    goes to files, not pipes: a daemon that inherited them must not hold the call open.
    Raises as ``subprocess.run`` does (``TimeoutExpired``, ``OSError``, and with ``check``
    ``CalledProcessError``)."""
    proctree.become_subreaper()  # the orphans of its tree come to us, not to init
    with owned_temporary(CHILD_PREFIX) as own:
        marker = f"{proctree.owner_token()}-child-{os.urandom(6).hex()}"
        cmd = module_command(python, module, *args)
        since = proctree.now_ticks()
        with open(own / "stdout", "w+b") as out, open(own / "stderr", "w+b") as err:
            proc = subprocess.Popen(cmd, env={**env, proctree.MARKER: marker},
                                    cwd=cwd or own, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err, start_new_session=True)
            proctree.helper(proc.pid)
            try:
                code = proc.wait(timeout=timeout)
            finally:
                kill_session(proc.pid)
                proc.kill()
                proc.wait()
                proctree.helper_done(proc.pid)
                proctree.kill_all(proctree.marked(marker))
                proctree.reap_strays(since)
            text = [f.seek(0) or f.read(MAX_OUTPUT).decode("utf-8", "replace")
                    for f in (out, err)]
    if check and code:
        raise subprocess.CalledProcessError(code, cmd, *text)
    return subprocess.CompletedProcess(cmd, code, *text)
