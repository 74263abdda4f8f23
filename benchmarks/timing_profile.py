"""Where a timed call's host time goes: compilewatch's timing section against a plain loop of
the same call, each under cProfile, in one process each. Numbers in docs/verdict-quality.md
("Training against a plain loop").

    python benchmarks/timing_profile.py --suite benchmarks/models.py --model gpt \\
        --task training --device cuda --checkout /tmp/g/repo

``--harness`` runs the worker's own pieces in this process: the model built as a worker builds
it (``compiler/model.py``), the training step around it (``compiler/training.py``), compiled
with the trace capture and cache-key probes installed (``compiler/probes.py``), then timed by
``compiler/timing.py`` (interleaved eager and compiled blocks, the collector off). Without it,
a plain loop: the same step, compiled, in blocks of back-to-back calls. Each prints the host's
time launching one call, the device's time per call, and the functions that took the host's
time (``--top``), so two runs side by side say what the timing process does that a plain loop
does not.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def _harness(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """(model, eager call, compiled call) as a timing process has them."""
    from compilewatch.compiler import probes, training, worker
    from compilewatch.compiler.model import Model
    from compilewatch.compiler.protocol import WorkerSpec
    from compilewatch.core.schema import Config

    spec = WorkerSpec(suite=str(Path(args.suite).resolve()), model=args.model,
                      config=Config(device=args.device, task=args.task), phase="warm",
                      large=args.device == "cuda", rounds=args.rounds, block_ms=args.block_ms,
                      time_steady_state=True, out="", status_file="")
    probe = probes.CompileProbe()
    probe.install()
    m: Any = Model(spec)
    if args.task == "training":
        m = training.TrainingModel(m, record=False)
    compiled = m.compile(worker.compile_kwargs(m.mspec.compile_kwargs, spec.config))
    m.call(compiled)
    return m, spec, compiled


def _timed_harness(args: argparse.Namespace) -> dict[str, Any]:
    from compilewatch.compiler import worker

    m, spec, compiled = _harness(args)
    for _ in range(5):
        m.call(compiled)
        m.call(m.fn)
    prof = cProfile.Profile()
    prof.enable()
    sample = worker.measure_latency(m, compiled, spec)
    prof.disable()
    return {"compiled_us": statistics.median(sample.compiled_us),
            "host_us": sample.host_us, "host_fraction": sample.host_fraction,
            "calls_per_block": sample.calls_per_block, "profile": _top(prof, args.top)}


def _timed_plain(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    m, _, compiled = _harness(args) if args.same_build else _plain_build(args)
    call = (lambda: m.call(compiled)) if args.same_build else compiled
    for _ in range(5):
        call()
    cuda = args.device == "cuda"
    device, host = [], []
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.rounds):
        if cuda:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        for _ in range(args.steps):
            call()
        host.append((time.perf_counter() - t0) / args.steps)
        if cuda:
            end.record()
            end.synchronize()
            device.append(start.elapsed_time(end) / 1e3 / args.steps)
    prof.disable()
    per_call = statistics.median(device or host) * 1e6
    return {"compiled_us": per_call, "host_us": statistics.median(host) * 1e6,
            "host_fraction": statistics.median(h / d for h, d in zip(host, device, strict=True))
            if device else None, "calls_per_block": args.steps, "profile": _top(prof, args.top)}


def _plain_build(args: argparse.Namespace) -> tuple[None, None, Any]:
    """The plain loop's own step (benchmarks/plain_loop.py builds it the same way)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import plain_loop

    ns = argparse.Namespace(checkout=args.checkout, suite=args.suite, model=args.model,
                            device=args.device, task=args.task)
    return None, None, plain_loop._built(ns, compiled=True)


def _top(prof: cProfile.Profile, n: int) -> list[str]:
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(n)
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return lines[start:start + n + 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, default=Path("."),
                        help="the model repository (its root goes first on sys.path)")
    parser.add_argument("--suite", required=True, help="the suite file, relative to --checkout")
    parser.add_argument("--model", required=True)
    parser.add_argument("--task", choices=("training", "inference"), default="training")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--harness", action="store_true",
                        help="time as a timing process does (default: a plain loop)")
    parser.add_argument("--same-build", action="store_true",
                        help="plain loop over the harness's own step, to tell the build from "
                        "the timing")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--block-ms", type=float, default=20.0)
    parser.add_argument("--steps", type=int, default=3, help="plain loop: calls a block")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    os.chdir(args.checkout)
    sys.path.insert(0, str(Path.cwd()))
    args.suite = str(Path(args.suite).resolve())
    got = _timed_harness(args) if args.harness else _timed_plain(args)
    print(json.dumps({k: v for k, v in got.items() if k != "profile"}))
    print("\n".join(got["profile"]))


if __name__ == "__main__":
    main()
