"""Hostile results files: what an untrusted job could upload, each with what its error must name.

Every command that reads a results file (ingest, compare, post) must refuse each of these with exit
2, a short message naming the problem and no traceback, and must write nothing. The files are built
from a valid run so that each differs from an honest file in one way only.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from compilewatch.core.schema import MAX_FILE_BYTES, MAX_MODELS, SCHEMA_VERSION, RunResults
from tests.factories import model_result, run_results
from tests.fakegithub import HEAD_SHA, PR

HOLE = "@@hole@@"  # a string replaced by a raw JSON token after dumping


def honest_run() -> RunResults:
    return run_results([model_result("tiny_mlp", peak_bytes=1000),
                        model_result("resnet_block", seed=1)], commit=HEAD_SHA, pr=PR)


@functools.cache
def honest_dict() -> dict[str, Any]:
    return json.loads(honest_run().model_dump_json())


def edited(edit: Callable[[dict[str, Any]], object], token: str | None = None) -> bytes:
    """The honest file changed by ``edit``; ``token`` replaces the string ``HOLE`` verbatim."""
    data = json.loads(json.dumps(honest_dict()))
    edit(data)
    text = json.dumps(data, indent=1)
    if token is not None:
        assert f'"{HOLE}"' in text
        text = text.replace(f'"{HOLE}"', token, 1)
    return text.encode()


def _result(data: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = data["results"][0]
    return result


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """``results.0.compile.frames``-style path, set to ``value``."""
    *parents, last = path.split(".")

    def edit(data: dict[str, Any]) -> None:
        node: Any = data
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        node[last] = value

    return edit


def _samples(models: int, per_list: int) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        template = _result(data)
        data["results"] = [
            {**template, "model": f"m{i}",
             "latency": {**template["latency"], "eager_us": [1.0] * per_list,
                         "compiled_us": [1.0] * per_list}}
            for i in range(models)]
    return edit


def _replace(old: bytes, new: bytes) -> Callable[[], bytes]:
    def build() -> bytes:
        honest = edited(lambda d: None)
        assert old in honest
        return honest.replace(old, new, 1)
    return build


# name -> (build the file's bytes, a regex its error must match)
HOSTILE: dict[str, tuple[Callable[[], bytes], str]] = {
    "lists nested 10,000 deep": (
        lambda: edited(_set("results.0.notes", HOLE), "[" * 10_000 + "]" * 10_000),
        r"nested 10003 deep .*MAX_DEPTH"),
    "objects nested 10,000 deep": (
        lambda: edited(_set("results.0.notes", HOLE), '{"a":' * 10_000 + "1" + "}" * 10_000),
        r"nested 10003 deep .*MAX_DEPTH"),
    "100,000 unclosed brackets": (
        lambda: b"[" * 100_000, r"nested 100000 deep .*MAX_DEPTH"),
    "a 5,000-digit integer": (
        lambda: edited(_set("results.0.compile.frames", HOLE), "7" * 5000),
        r"integer of 5000 characters .*MAX_INT_CHARS"),
    "an integer of 2**63 (past SQLite's)": (
        lambda: edited(_set("results.0.memory.eager_peak_bytes", 2**63)),
        r"results\.0\.memory\.eager_peak_bytes: .*less than or equal to 9223372036854775807"),
    "an integer of 2**31 in an INTEGER column": (
        lambda: edited(_set("results.0.compile.frames", 2**31)),
        r"results\.0\.compile\.frames: .*less than or equal to 2147483647"),
    "a PR number of 2**31": (
        lambda: edited(_set("git.pr", 2**31)), r"git\.pr: .*2147483647"),
    "graph-break counts adding up past 2**31": (
        lambda: edited(_set("results.0.graph_breaks",
                            [{"reason": "a", "count": 2**31 - 1}, {"reason": "b", "count": 2}])),
        r"results\.0: .*graph_breaks: the counts add up to 2147483649"),
    "a negative count": (
        lambda: edited(_set("results.0.compile.graphs", -1)),
        r"results\.0\.compile\.graphs: .*greater than or equal to 0"),
    "a NUL character in a text": (
        lambda: edited(_set("results.0.error", "boom\x00")), r"results\.0\.error: .*NUL"),
    "a NUL character in a key": (
        lambda: edited(_set("results.0.compile.phases", {"dyn\x00amo": 1.0})),
        r"results\.0\.compile\.phases\..*NUL"),
    "a NUL character in a reason (COPY path)": (
        lambda: edited(_set("results.0.graph_breaks", [{"reason": "x\x00", "count": 1}])),
        r"results\.0\.graph_breaks\.0\.reason: .*NUL"),
    "a lone surrogate": (
        lambda: edited(_set("results.0.error", HOLE), '"\\ud800 text"'),
        r"results\.0\.error: "),
    "a 10 MB string": (
        lambda: edited(_set("results.0.error", "A" * 10_000_000)),
        r"results\.0\.error: String should have at most 8192 characters"),
    "a 10 MB key": (
        lambda: edited(_set("K" * 10_000_000, 1)),
        r"K{64}\.\.\.: Extra inputs are not permitted"),
    "a float of 1e400": (
        lambda: edited(_set("results.0.compile.cold_s", HOLE), "1e400"),
        r"results\.0\.compile\.cold_s: .*finite"),
    "a NaN token": (
        lambda: edited(_set("results.0.compile.cold_s", HOLE), "NaN"),
        r"non-finite number NaN"),
    "an Infinity token": (
        lambda: edited(_set("results.0.latency.compiled_us", HOLE), "[1.0, Infinity]"),
        r"non-finite number Infinity"),
    "a -Infinity token": (
        lambda: edited(_set("results.0.duration_s", HOLE), "-Infinity"),
        r"non-finite number -Infinity"),
    "a duplicate key": (
        _replace(b'"commit": ', b'"commit": "' + b"c" * 40 + b'", "commit": '),
        r"duplicate key 'commit'"),
    "a UTF-8 byte-order mark": (
        lambda: b"\xef\xbb\xbf" + edited(lambda d: None), r"byte-order mark"),
    "invalid UTF-8": (
        _replace(b'"python": "', b'"python": "\xff\xfe'), r"not UTF-8"),
    "UTF-16": (
        lambda: edited(lambda d: None).decode().encode("utf-16"), r"not UTF-8"),
    "a million tiny models": (
        lambda: edited(_set("results", HOLE), "[" + ",".join(['{"model":"m"}'] * 10**6) + "]"),
        r"100000\d arrays and objects .*MAX_CONTAINERS"),
    f"{MAX_MODELS + 1} models": (
        lambda: edited(_set("results", HOLE), "[" + ",".join(["{}"] * (MAX_MODELS + 1)) + "]"),
        rf"results: {MAX_MODELS + 1} results .*MAX_MODELS"),
    "a sample list of 10**6 floats": (
        lambda: edited(_set("results.0.latency.compiled_us", [1.5] * 10**6)),
        r"results\.0\.latency: 1000030 timing samples .*MAX_MODEL_SAMPLES"),
    "210,000 samples over 21 models": (
        lambda: edited(_samples(21, 5000)), r"results: 210000 timing samples .*MAX_FILE_SAMPLES"),
    "an empty file": (lambda: b"", r"not valid JSON"),
    "a truncated file": (lambda: edited(lambda d: None)[:-40], r"not valid JSON"),
    "a JSON array": (lambda: b"[1, 2]", r"top level must be a JSON object"),
    "a date that does not exist": (
        lambda: edited(_set("created_at", "2026-02-30T08:00:00+00:00")),
        r"created_at: .*'2026-02-30T08:00:00\+00:00' is not an ISO 8601 time"),
    "a time that is not one": (
        lambda: edited(_set("finished_at", "yesterday")),
        r"finished_at: .*'yesterday' is not an ISO 8601 time"),
    "finished before it was created": (
        lambda: edited(_set("finished_at", "2026-11-29T07:59:59+00:00")),
        r"finished_at '2026-11-29T07:59:59\+00:00' is before created_at"),
    "finished before it was created, in another zone": (
        lambda: edited(_set("finished_at", "2026-11-29T09:30:00+02:00")),
        r"finished_at '2026-11-29T09:30:00\+02:00' is before created_at"),
    "true as an integer": (
        lambda: edited(_set("results.0.compile.frames", True)),
        r"results\.0\.compile\.frames: Input should be a valid integer"),
    "false as a count of processes": (
        lambda: edited(_set("settings.timing_processes", False)),
        r"settings\.timing_processes: Input should be a valid integer"),
    "true as a number of seconds": (
        lambda: edited(_set("results.0.compile.cold_s", True)),
        r"results\.0\.compile\.cold_s: Input should be a valid number"),
    "a number in a string": (
        lambda: edited(_set("settings.rounds", "30")),
        r"settings\.rounds: Input should be a valid integer"),
    "1 as a boolean": (
        lambda: edited(_set("settings.ready_compile_workers", 1)),
        r"settings\.ready_compile_workers: Input should be a valid boolean"),
    "an unknown status": (
        lambda: edited(_set("results.0.status", "great")),
        r"results\.0\.status: .*'great' is not one of pass, fail"),
    "a newer schema version": (
        lambda: edited(_set("schema_version", SCHEMA_VERSION + 1)),
        rf"schema_version: {SCHEMA_VERSION + 1} is newer"),
}


OVERSIZED = f"a file of {MAX_FILE_BYTES + 1} bytes"
NAMES = [*HOSTILE, OVERSIZED]


def write_hostile(path: Path, name: str) -> str:
    """Write the hostile file ``name`` to ``path``; returns the regex its error must match."""
    if name == OVERSIZED:  # sparse: it takes no disk
        with path.open("wb") as f:
            f.truncate(MAX_FILE_BYTES + 1)
        # post checks its directory's sizes (bot/github/outdir.py) before the schema's limit applies
        return r"MAX_FILE_BYTES|over the size limit"
    path.write_bytes(_built(name))
    return HOSTILE[name][1]


@functools.cache
def _built(name: str) -> bytes:
    return HOSTILE[name][0]()
