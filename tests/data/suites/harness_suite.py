"""Models that exercise the harness itself: breaks, recompiles, and every way to fail."""

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
