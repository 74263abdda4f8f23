"""One model per kind of graph break (and a recompiling and a clean one), for the probes' test
matrix. Each break's line carries ``# break: <model>``: the test finds the line torch must
report there, so the models can move without the test changing.

Graph breaks are Dynamo's: the backend does not change them. Most models therefore compile with
the eager backend (a second each instead of Inductor's C++ builds); ``item``, ``clean`` and
``recompiles`` go through Inductor for the cache lookups."""

import os
import threading

import torch

from compilewatch.suites import model

SUITE_NAME = "graph_breaks"
_LOCK = threading.Lock()
EAGER = {"backend": "eager"}


def _input():
    return (torch.linspace(0.5, 2.0, 16),)


@model("data_dependent", compile_kwargs=EAGER)
def data_dependent():
    def fn(x):
        y = x * 2
        if y.sum() > 0:  # break: data_dependent
            return y + 1
        return y - 1

    return fn, _input()


@model("item")
def item():
    def fn(x):
        y = x * 2
        s = y.sum().item()  # break: item
        return y * s

    return fn, _input()


@model("prints", compile_kwargs=EAGER)
def prints():
    def fn(x):
        y = x * 2
        print(end="")  # break: prints
        return y + 1

    return fn, _input()


@model("c_call", compile_kwargs=EAGER)
def c_call():
    def fn(x):
        y = x * 2
        p = os.getpid()  # break: c_call
        return y + (p % 2)

    return fn, _input()


@model("tolist", compile_kwargs=EAGER)
def tolist():
    def fn(x):
        y = x * 2
        first = y.tolist()[0]  # break: tolist
        return y + first

    return fn, _input()


def _helper(y):
    z = y + 1
    print(end="")  # break: inlined
    return z * 3


@model("inlined", compile_kwargs=EAGER)
def inlined():
    def fn(x):
        y = x * 2
        z = _helper(y)
        return z - 1

    return fn, _input()


def _helper_twice(y):
    print(end="")  # break: inlined_twice
    return y * 3


@model("inlined_twice", compile_kwargs=EAGER)
def inlined_twice():
    """Two calls of one callee: two breaks at one place (each reported by two frames)."""

    def fn(x):
        y = _helper_twice(x * 2)
        z = _helper_twice(y + 1)
        return z - 1

    return fn, _input()


@model("context_manager", compile_kwargs=EAGER)
def context_manager():
    def fn(x):
        y = x * 2
        with _LOCK:  # break: context_manager
            y = y + 1
        return y * 3

    return fn, _input()


@model("explicit", compile_kwargs=EAGER)
def explicit():
    def fn(x):
        y = x * 2
        torch._dynamo.graph_break()  # break: explicit
        return y + 1

    return fn, _input()


@model("dynamic_shape", compile_kwargs=EAGER)
def dynamic_shape():
    def fn(x):
        y = x * 2
        nz = torch.nonzero(y > 2)  # break: dynamic_shape
        return nz.sum() + y.sum()

    return fn, _input()


@model("in_loop", compile_kwargs=EAGER)
def in_loop():
    def fn(x):
        y = x * 2
        for i in range(2):
            print(end="")  # break: in_loop
            y = y + i
        return y

    return fn, _input()


@model("clean")
def clean():
    def fn(x):
        return torch.sin(x) * 2 + 1

    return fn, (torch.linspace(0.5, 2.0, 64).reshape(8, 8),)


def _shapes():
    return [(torch.linspace(0.5, 2.0, n),) for n in (12, 20)]


@model("recompiles", sweep=_shapes, compile_kwargs={"dynamic": False})
def recompiles():
    """Static shapes: each new size recompiles, and the second recompile fails two guards."""

    def fn(x):
        return torch.cos(x) + 1

    return fn, _input()
