"""Where a forked GPU worker's ``build`` phase goes: each model built in a child forked from a
parent that imported what the fork server imports (the compiler stack, transformers and its
heavy lazy parts), under ``cProfile``. Numbers in docs/performance.md.

    python benchmarks/build_profile.py --device cuda micro/gelu_mm hf/gpt2:training
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import io
import os
import pstats
import time


def child(suite: str, model: str, task: str, device: str, top: int) -> None:
    import torch

    from compilewatch.compiler import training
    from compilewatch.compiler.model import Model
    from compilewatch.compiler.protocol import WorkerSpec
    from compilewatch.core.schema import Config
    from compilewatch.suites.loader import BUILTIN

    if device == "cuda":
        t = time.perf_counter()
        torch.empty(1, device="cuda")
        torch.cuda.synchronize()
        print(f"{suite}/{model} {task}: CUDA context {time.perf_counter() - t:.2f} s")
    source = importlib.import_module(BUILTIN[suite]).__file__
    spec = WorkerSpec(suite=str(source), model=model, config=Config(device=device, task=task),
                      phase="cold", large=device == "cuda", rounds=1, block_ms=1.0, out="",
                      status_file="")
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    m = Model(spec)
    if task == "training":
        training.TrainingModel(m)
    if device == "cuda":
        torch.cuda.synchronize()
    prof.disable()
    print(f"{suite}/{model} {task}: build {time.perf_counter() - t:.2f} s")
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(top)
    print(out.getvalue(), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--top", type=int, default=22)
    ap.add_argument("models", nargs="+", metavar="SUITE/MODEL[:TASK]")
    args = ap.parse_args()
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # as the workers are told
    from compilewatch.compiler import forkserver, worker

    worker.import_compiler_stack(False)
    worker.import_each(forkserver.preload_modules(["transformers"]))
    for name in args.models:
        what, _, task = name.partition(":")
        suite, _, model = what.partition("/")
        pid = os.fork()
        if pid == 0:
            try:
                child(suite, model, task or "inference", args.device, args.top)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
