"""Reading and writing results files: the strict, bounded reader of an untrusted file
(``core/schema.py`` holds the types it validates into) and the upgraders of older versions.

A results file is the only thing that crosses from an (untrusted) GPU job to the privileged job
that posts, so reading is strict: unknown fields, non-finite numbers, oversized strings or lists
and names outside a safe alphabet are rejected with an error naming the field. Older versions are
upgraded by the functions in ``UPGRADERS`` before validation. Documented in docs/results-schema.md.

Reading is also bounded: every limit is checked as early as it can be, so that a hostile file
costs little before it is refused (docs/security.md): the size before reading, the nesting and
the number of arrays and objects before decoding, integers, duplicate keys and non-finite
numbers while decoding, the counts of models and timing samples before pydantic, the rest
(string lengths, integer ranges, characters a database cannot store) by pydantic, naming the
field.
"""

from __future__ import annotations

import codecs
import itertools
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from compilewatch.core.errors import ResultsFileError
from compilewatch.core.files import write_atomic
from compilewatch.core.schema import (
    MAX_CONTAINERS,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_FILE_SAMPLES,
    MAX_INT_CHARS,
    MAX_MODEL_SAMPLES,
    MAX_MODELS,
    SCHEMA_VERSION,
    RunResults,
)


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 only adds fields, each with a default that says "not measured" (one cold and
    one timing process per side, spawned workers), so a version-1 file means the same."""
    return {**data, "schema_version": 2}


# Upgraders take the parsed JSON of version N and return version N+1 (asv keeps results this way).
UPGRADERS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}


def _upgrade(data: dict[str, Any]) -> dict[str, Any]:
    version = data.get("schema_version")
    if not isinstance(version, int):
        raise ResultsFileError("schema_version: missing or not an integer")
    if version > SCHEMA_VERSION:
        raise ResultsFileError(
            f"schema_version: {version} is newer than this compilewatch understands "
            f"({SCHEMA_VERSION}); upgrade compilewatch"
        )
    while version < SCHEMA_VERSION:
        if version not in UPGRADERS:
            raise ResultsFileError(f"schema_version: {version} is not supported (no upgrader)")
        data = UPGRADERS[version](data)
        version = data["schema_version"]
    return data


def _shown(part: object) -> str:
    """A key or field from the file as it may appear in a message: short and printable."""
    text = str(part)
    if len(text) > 64:
        text = text[:64] + "..."
    return text if text.isprintable() and text.isascii() else ascii(text)


def _describe(err: ValidationError) -> str:
    lines = []
    for e in err.errors()[:10]:
        where = ".".join(_shown(p) for p in e["loc"]) or "<top>"
        lines.append(f"{where}: {e['msg']}")
    more = err.error_count() - len(lines)
    if more > 0:
        lines.append(f"... and {more} more")
    return "; ".join(lines)


def _check_counts(data: dict[str, Any]) -> None:
    """Models and timing samples, counted before pydantic: what compare's bootstrap costs
    (about 0.4 ms per sample, docs/security.md) must be bounded per file, not per model."""
    results = data.get("results")
    if not isinstance(results, list):
        return  # pydantic names the problem
    if len(results) > MAX_MODELS:
        raise ResultsFileError(f"results: {len(results)} results is over the limit of "
                               f"{MAX_MODELS} per file (MAX_MODELS)")
    total = 0
    for i, result in enumerate(results):
        latency = result.get("latency") if isinstance(result, dict) else None
        if not isinstance(latency, dict):
            continue
        n = sum(len(v) for k in ("eager_us", "compiled_us", "reference_us")
                if isinstance(v := latency.get(k), list))
        if n > MAX_MODEL_SAMPLES:
            raise ResultsFileError(f"results.{i}.latency: {n} timing samples (eager_us + "
                                   f"compiled_us + reference_us) is over the limit of "
                                   f"{MAX_MODEL_SAMPLES} per result (MAX_MODEL_SAMPLES)")
        total += n
    if total > MAX_FILE_SAMPLES:
        raise ResultsFileError(f"results: {total} timing samples is over the limit of "
                               f"{MAX_FILE_SAMPLES} per file (MAX_FILE_SAMPLES)")


def parse_results(data: Any, source: str = "<data>") -> RunResults:
    """Validate parsed JSON (any version) into ``RunResults``; errors name the field."""
    if not isinstance(data, dict):
        raise ResultsFileError(f"{source}: top level must be a JSON object")
    try:
        data = _upgrade(data)
        _check_counts(data)
    except ResultsFileError as e:
        raise ResultsFileError(f"{source}: {e}") from None
    try:
        # strict: a file's ``true`` is no integer and its ``"5"`` no number (lax pydantic
        # reads them as 1 and 5)
        return RunResults.model_validate(data, strict=True)
    except ValidationError as e:
        raise ResultsFileError(f"{source}: {_describe(e)}") from None


# Bytes that are neither a quote nor a bracket: dropped before the structure is measured.
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_QUOTED = re.compile(rb'"[^"]*"')
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def _check_structure(raw: bytes) -> None:
    """Count and nest the arrays and objects before ``json`` does: its decoder recurses once per
    level (10,000 levels raise RecursionError) and allocates every container it meets.

    Runs at C speed on any input (about 1 s for 32 MiB of hostile text): escaped backslashes and
    quotes go first, so that every remaining quote opens or closes a string; then everything but
    quotes and brackets; then empty strings, and the strings that held brackets.
    """
    kept = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    kept = kept.replace(b'""', b"")
    if b'"' in kept:
        kept = _QUOTED.sub(b"", kept).replace(b'"', b"")
    containers = kept.count(b"[") + kept.count(b"{")
    if containers > MAX_CONTAINERS:
        raise ResultsFileError(f"{containers} arrays and objects is over the limit of "
                               f"{MAX_CONTAINERS} (MAX_CONTAINERS)")
    depth = max(itertools.accumulate(map(_STEP.__getitem__, kept)), default=0)
    if depth > MAX_DEPTH:
        raise ResultsFileError(f"arrays and objects nested {depth} deep is over the limit of "
                               f"{MAX_DEPTH} (MAX_DEPTH)")


def _parse_int(token: str) -> int:
    # Checked before int(): converting a long digit string costs quadratic time.
    if len(token) > MAX_INT_CHARS:
        raise ResultsFileError(f"an integer of {len(token)} characters is over the limit of "
                               f"{MAX_INT_CHARS} (MAX_INT_CHARS: a signed 64-bit integer)")
    return int(token)


def _reject_constant(name: str) -> float:
    raise ResultsFileError(f"non-finite number {name} is not allowed")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) < len(pairs):
        seen: set[str] = set()
        duplicate = next(k for k, _ in pairs if k in seen or seen.add(k) is not None)
        raise ResultsFileError(f"duplicate key {_shown(duplicate)!r} in one object (readers "
                               "disagree on which of its values counts)")
    return obj


def decode_results(raw: bytes) -> Any:
    """Decode a results file's bytes into JSON values, within the structural limits."""
    if raw.startswith(codecs.BOM_UTF8):
        raise ResultsFileError("starts with a byte-order mark; a results file is UTF-8 without "
                               "one")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ResultsFileError(f"not UTF-8: byte {e.start}: {e.reason}") from None
    _check_structure(raw)
    try:
        return json.loads(text, parse_int=_parse_int, parse_constant=_reject_constant,
                          object_pairs_hook=_object)
    except json.JSONDecodeError as e:
        raise ResultsFileError(f"not valid JSON: {e}") from None


def load_results(path: str | os.PathLike[str]) -> RunResults:
    """Read and strictly validate a results file (untrusted input)."""
    p = Path(path)
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise ResultsFileError(f"{p}: cannot read: {e.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ResultsFileError(f"{p}: over the limit of {MAX_FILE_BYTES} bytes "
                               "(MAX_FILE_BYTES)")
    try:
        data = decode_results(raw)
    except ResultsFileError as e:
        raise ResultsFileError(f"{p}: {e}") from None
    return parse_results(data, str(p))


def dumps_results(results: RunResults) -> str:
    return results.model_dump_json(indent=1)


def save_results(results: RunResults, path: str | os.PathLike[str]) -> None:
    write_atomic(path, dumps_results(results))


