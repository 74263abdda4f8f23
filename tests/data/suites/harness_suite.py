"""Models that exercise the harness itself: breaks, recompiles, and every way to fail."""

import dataclasses
import os
import time

import torch

from compilewatch.suites import model

SUITE_NAME = "harness"
# The sweep model's first shape; tests change it to see which key component moves.
FIRST_ROWS = int(os.environ.get("CW_TEST_ROWS", "8"))
# Set to add a graph break to ``branchy`` (the "PR" side of the end-to-end compare test).
ADD_BREAK = os.environ.get("CW_TEST_BREAK") == "1"


@model("breaks")
def breaks():
    def fn(x):
        y = torch.relu(x) + 1
        scale = y.sum().item()
        return y * scale

    return fn, (torch.randn(64),)


def _sweep():
    return [(torch.randn(n, 16),) for n in (2, 32)]


@model("branchy", sweep=_sweep)
def branchy():
    def fn(x):
        if ADD_BREAK:
            x = x * x.mean().item()
        if x.shape[0] > 4:
            return torch.sigmoid(x) * 2
        return torch.tanh(x) - 1

    return fn, (torch.randn(FIRST_ROWS, 16),)


@model("raises")
def raises():
    def fn(x):
        raise ValueError("model bug: shapes do not line up")

    return fn, (torch.randn(4),)


@model("aborts")
def aborts():
    def fn(x):
        os.abort()

    return fn, (torch.randn(4),)


@model("hangs")
def hangs():
    time.sleep(3600)


@model("oom")
def oom():
    def fn(x):
        return torch.empty(2**62, dtype=torch.uint8)

    return fn, (torch.randn(4),)


@model("cuda_only", devices=("cuda",))
def cuda_only():
    return torch.sin, (torch.randn(4),)


@model("needs_pkg", requires=("package_that_is_not_installed_anywhere",))
def needs_pkg():
    return torch.sin, (torch.randn(4),)


@model("lingers")
def lingers():
    """Leaves a non-daemon thread behind, so the worker hangs at exit after writing."""
    import threading

    threading.Thread(target=time.sleep, args=(3600,)).start()

    def fn(x):
        raise ValueError("eager fails after the thread started")

    return fn, (torch.randn(4),)


@model("segfaults")
def segfaults():
    import ctypes

    def fn(x):
        ctypes.string_at(0)

    return fn, (torch.randn(4),)


@model("exits")
def exits():
    def fn(x):
        os._exit(3)

    return fn, (torch.randn(4),)


@model("wrong_output")
def wrong_output():
    """Compiled code that computes something else than eager: an accuracy failure."""
    def fn(x):
        if torch.compiler.is_compiling():
            return x + 1
        return x

    return fn, (torch.randn(8),)


@model("random_output")
def random_output():
    """Eager does not repeat itself: not a pass, whatever the compiler does."""
    def fn(x):
        return x + torch.rand_like(x)

    return fn, (torch.randn(8),)


@dataclasses.dataclass
class Prediction:
    """An output that is not a tensor: each of its fields is an output."""

    probs: torch.Tensor
    shifted: torch.Tensor
    label: str


@model("wrong_dataclass")
def wrong_dataclass():
    """One field of a returned dataclass is off by +1.0 in compiled code only."""
    def fn(x):
        shifted = x + 1.0 if torch.compiler.is_compiling() else x
        return Prediction(torch.sigmoid(x), shifted * 2, "scores")

    return fn, (torch.randn(8),)


class Opaque:
    """An output type that no rule compares."""

    def __init__(self, total):
        self.total = total


@model("opaque_output")
def opaque_output():
    """Returns an object of a plain class beside a tensor: not judged, so not a pass."""
    def fn(x):
        return {"y": torch.relu(x), "extra": Opaque(x.sum())}

    return fn, (torch.randn(8),)


@model("reads_secrets")
def reads_secrets():
    """Looks for credentials in its environment and in a file it was pointed at, and puts
    whatever it finds into its error text (which ends up in the results)."""
    found = {k: v for k, v in os.environ.items() if "TOKEN" in k or "SECRET" in k}
    path = os.environ.get("CW_TEST_LEAK_FILE")
    leaked = open(path).read().strip() if path else ""  # noqa: SIM115

    def fn(x):
        raise ValueError(f"environment credentials: {found}; file: {leaked}")

    return fn, (torch.randn(4),)


@model("floods")
def floods():
    """Writes 32 MiB to its log and 4 MiB of one line over its status file, then exits
    without a result: the parent must read neither whole, nor show either whole."""
    import sys

    chunk = "y" * (1 << 20)
    for _ in range(32):
        sys.stdout.write(chunk)
    sys.stdout.flush()
    with open("status", "w") as f:  # the worker's cwd is its work dir, beside its status file
        f.write("cold: " + "x" * (4 << 20))
    time.sleep(1.0)  # the parent polls the status file every 50 ms
    os._exit(5)


@model("spawns_daemon")
def spawns_daemon():
    """Starts a process in a session of its own that would run for an hour."""
    import subprocess

    child = subprocess.Popen(["sleep", "3600"], start_new_session=True)
    with open(os.environ["CW_TEST_PIDFILE"], "w") as f:
        f.write(str(child.pid))
    return torch.sin, (torch.randn(4),)


STRAY_SLEEP = "3601.25"  # a stray's argument, for the test that looks for it


@model("strays")
def strays():
    """Starts a process that leaves its session (``setsid``) and is re-parented away, writes a
    file to the temp folder, then hangs: what a run killed mid-compile leaves behind."""
    import subprocess
    import tempfile

    subprocess.Popen(["setsid", "sh", "-c", f"sleep {STRAY_SLEEP} &"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).wait()
    with open(os.path.join(tempfile.gettempdir(), "stray-file"), "w") as f:
        f.write("x" * 1024)
    time.sleep(3600)
