"""Do two cold compiles of the same model pick the same Triton configs? Numbers in
docs/verdict-quality.md.

    python benchmarks/autotune_picks.py --processes 4

Inductor benchmarks a reduction kernel's candidate configs at its first call and keeps the
fastest in the cache dir (``*.best_config``); every later process on that cache reuses it. Each
side of a ``pr`` has its own warm cache, so if the pick is a coin toss, a side's timing
processes all share one toss: a difference between sides that no number of processes a side
averages out. This compiles micro's ``bf16_block_dynamic`` (pre-norm MLP block, bf16, dynamic)
cold in N fresh processes, each on an empty cache dir, and prints per process the compiled
median and the configs picked. Then each cache is timed again by a fresh process on it (warm:
the picks are read, not made), the caches taken in turn, twice: if the warm times follow their
cache and not the process, a cache's picks carry the speed, and a side's processes share it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

KEEP = ("XBLOCK", "YBLOCK", "RBLOCK", "R0_BLOCK", "num_warps", "num_stages")


def _child() -> None:
    import torch

    from compilewatch.compiler import timing
    from compilewatch.suites.micro import Block

    torch.manual_seed(0)
    net = Block(1024).cuda().to(torch.bfloat16)
    x = torch.randn(32, 512, 1024, device="cuda", dtype=torch.bfloat16)
    fn = torch.compile(net, dynamic=True)
    with torch.no_grad():
        fn(x)  # cold: the compile, and the autotuning that picks each kernel's config; warm: read
        timing.warm_up(lambda: fn(x), "cuda", 0.5)
        compiled = timing.time_interleaved(lambda: net(x), lambda: fn(x), "cuda", 30,
                                           20.0).compiled_us
    picks = {}
    for f in Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]).rglob("*.best_config"):
        cfg = json.loads(f.read_text())
        picks[f.stem[:12]] = {k: cfg[k] for k in KEEP if k in cfg}
    print(json.dumps({"compiled": statistics.median(compiled), "picks": picks}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child()
        return
    caches = [tempfile.mkdtemp(prefix=f"autotune-picks-{i}-") for i in range(args.processes)]
    warm: dict[int, list[float]] = {i: [] for i in range(args.processes)}
    for i, cache in enumerate(caches):
        row = _run(cache)
        picks = "; ".join(f"{k} {v}" for k, v in sorted(row["picks"].items()))
        print(f"cache {i + 1}, cold: compiled {row['compiled']:.1f} µs; picks: {picks}",
              flush=True)
    for _ in range(2):
        for i, cache in enumerate(caches):
            warm[i].append(_run(cache)["compiled"])
            print(f"cache {i + 1}, warm: compiled {warm[i][-1]:.1f} µs", flush=True)
    for i in warm:
        print(f"cache {i + 1}: warm processes {', '.join(f'{v:.1f}' for v in warm[i])} µs")


def _run(cache: str) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache,
               TRITON_CACHE_DIR=str(Path(cache) / "triton"))
    out = subprocess.run([sys.executable, __file__, "--child"], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
