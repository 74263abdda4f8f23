"""Inductor config values a bisection's step sets in its workers: read from the side's
environment, parsed as the cache key shows them, set before the model is built."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from compilewatch.compiler import overrides


@pytest.mark.parametrize(("text", "value"), [("True", True), ("300", 300), ("None", None),
                                             ("'heuristic'", "heuristic"), ("[1, 2]", [1, 2])])
def test_values_are_read_as_the_cache_key_shows_them(text, value):
    assert overrides.literal(text) == (True, value)


def test_a_value_that_is_not_a_literal_is_not_set():
    assert overrides.literal("<function select_decomp_table at 0x7f>") == (False, None)


def test_nothing_asked_nothing_set():
    assert overrides.requested({}) == {} and overrides.apply({}) == []


@pytest.mark.parametrize("raw", ["[1]", '{"a": ', "x" * (overrides.MAX_BYTES + 1)])
def test_a_malformed_request_names_the_variable(raw):
    with pytest.raises(ValueError):
        overrides.requested({overrides.ENV: raw})


def test_an_unknown_flag_is_refused_by_name():
    with pytest.raises(ValueError, match=r"no cpp\.no_such_flag"):
        overrides.apply({overrides.ENV: overrides.encode({"cpp.no_such_flag": 1})})


def test_the_values_hold_for_the_rest_of_the_process():
    """In a process of its own: the patch is kept for the process's life, by design."""
    code = ("import os, json\n"
            "from compilewatch.compiler import overrides\n"
            "print(json.dumps(overrides.apply()))\n"
            "from torch._inductor import config\n"
            "print(json.dumps([config.cpp.simdlen, config.size_asserts]))\n")
    env = {overrides.ENV: overrides.encode({"cpp.simdlen": 1, "size_asserts": False}),
           "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert json.loads(out[0]) == ["cpp.simdlen", "size_asserts"]
    assert json.loads(out[1]) == [1, False]
