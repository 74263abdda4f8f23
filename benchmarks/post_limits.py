"""What the largest files the results limits allow cost ``compilewatch post`` (docs/security.md).

Writes an output directory whose base.json and head.json sit at one limit each, then times what
``post --dry-run`` does: validate both files (load_results) and compare + render the comment
(render_outdir). Also times how long a hostile 32 MiB file takes to be refused.

    python benchmarks/post_limits.py                 # every shape
    python benchmarks/post_limits.py --shape samples # one

Not part of the test suite; the numbers are written up in docs/security.md.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from compilewatch.bot.commands.post import PostRequest, render_outdir
from compilewatch.core.errors import ResultsFileError
from compilewatch.core.results_file import load_results
from compilewatch.core.schema import MAX_FILE_SAMPLES, MAX_MODEL_SAMPLES, MAX_MODELS, MAX_TEXT_CHARS
from tests.factories import model_result, run_results

SHA = "a" * 40
PR = 7
MIB = 1024 * 1024


def _run(seed: int, results: list[dict[str, Any]]) -> dict[str, Any]:
    data = json.loads(run_results([model_result("m")], commit=SHA if seed else "b" * 40,
                                  pr=PR).model_dump_json())
    data["results"] = results
    return data


def _result(i: int, seed: int, per_list: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(model_result(f"m{i}", n=per_list, seed=seed,
                                                   compiled_us=50.0 + i % 7).model_dump_json())
    return data


def samples(seed: int) -> dict[str, Any]:
    """MAX_FILE_SAMPLES timing samples in results of MAX_MODEL_SAMPLES each."""
    n = MAX_FILE_SAMPLES // MAX_MODEL_SAMPLES
    return _run(seed, [_result(i, seed, MAX_MODEL_SAMPLES // 2) for i in range(n)])


def models(seed: int) -> dict[str, Any]:
    """MAX_MODELS results sharing MAX_FILE_SAMPLES timing samples."""
    per_list = MAX_FILE_SAMPLES // MAX_MODELS // 2
    template = _result(0, seed, per_list)
    rng = random.Random(seed)
    results = []
    for i in range(MAX_MODELS):
        r = json.loads(json.dumps(template))
        r["model"] = f"m{i}"
        r["latency"]["compiled_us"] = [50.0 * (1 + rng.gauss(0, 0.02)) for _ in range(per_list)]
        results.append(r)
    return _run(seed, results)


def texts(seed: int) -> dict[str, Any]:
    """MAX_MODELS failing results with an error text of MAX_TEXT_CHARS each (about 22 MiB;
    post's cap per file is 32 MiB: bot/github/outdir.py)."""
    n = MAX_MODELS
    rng = random.Random(seed)
    results = []
    for i in range(n):
        r = _result(i, seed, 5)
        r.update(status="fail", category="accuracy",
                 error="".join(rng.choice("ab <@>[]_*") for _ in range(MAX_TEXT_CHARS)))
        results.append(r)
    return _run(seed, results)


def cache_keys(seed: int) -> dict[str, Any]:
    """Results whose cache keys have as many components as 30 MiB holds, each changed on head."""
    results = []
    for i in range(40):
        r = _result(i, seed, 5)
        key = r["cache"]["fx"][0]
        key["components"] = {f"example_inputs[{j}]": f"h{j}x{seed}" for j in range(2600)}
        r["cache"]["fx"] = [dict(key, key=f"k{i}x{k}x{seed}") for k in range(4)]
        r["cache"]["aot"] = [dict(key, key=f"a{i}x{k}x{seed}") for k in range(4)]
        results.append(r)
    return _run(seed, results)


SHAPES: dict[str, Callable[[int], dict[str, Any]]] = {
    "samples": samples, "models": models, "texts": texts, "cache_keys": cache_keys}


def time_shape(name: str, workdir: Path) -> None:
    out = workdir / name
    out.mkdir()
    for side, seed in (("base", 0), ("head", 1)):
        (out / f"{side}.json").write_text(json.dumps(SHAPES[name](seed)))
    size = (out / "head.json").stat().st_size / MIB
    t0 = time.perf_counter()
    for side in ("base", "head"):
        load_results(out / f"{side}.json")
    validate = time.perf_counter() - t0
    t0 = time.perf_counter()
    render_outdir(PostRequest(out, repo="acme/models", pr=PR, sha=SHA))
    total = time.perf_counter() - t0
    print(f"{name:<11} {size:6.1f} MiB per file  validate both {validate:6.1f} s  "
          f"validate + compare + render {total:6.1f} s", flush=True)


def time_refusal(workdir: Path) -> None:
    """The structure scan's worst case: 32 MiB of strings holding brackets, then 32 MiB of
    empty arrays (refused for MAX_CONTAINERS)."""
    for name, raw in (("bracket strings", b'{"a": [' + b'"[",' * (8 * MIB) + b'"["]}'),
                      ("empty arrays", b"[" + b"[]," * (11 * MIB) + b"[]]")):
        path = workdir / f"{name.replace(' ', '_')}.json"
        path.write_bytes(raw)
        t0 = time.perf_counter()
        try:
            load_results(path)
        except ResultsFileError as e:
            outcome = str(e).split(": ", 1)[1][:60]
        print(f"refusal     {len(raw) / MIB:6.1f} MiB {name}: {time.perf_counter() - t0:5.1f} s "
              f"({outcome})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=[*SHAPES, "refusal"], action="append")
    shapes = parser.parse_args().shape or [*SHAPES, "refusal"]
    with tempfile.TemporaryDirectory() as tmp:
        for name in shapes:
            if name == "refusal":
                time_refusal(Path(tmp))
            else:
                time_shape(name, Path(tmp))


if __name__ == "__main__":
    main()
