"""Two models with the same graph structure and different constants (cache-artifact tests)."""

import torch

from compilewatch.suites import model

SUITE_NAME = "cachesuite"


def _scaled(c: float):
    def fn(x):
        return torch.sin(x) * c + 1

    return fn, (torch.randn(64),)


@model("scale2")
def scale2():
    return _scaled(2.0)


@model("scale3")
def scale3():
    return _scaled(3.0)
