"""Noise benchmark: the same models measured in several fresh processes.

For each model, N independent cold runs (fresh process, empty Inductor cache dir each) with
the harness's own method (interleaved blocks, 2 samples per round). Reports the spread
(max - min) / median across processes of: speedup, compiled per-call time, eager per-call time,
and cold compile time. Usage:

    python benchmarks/noise.py --suite micro --device cuda --processes 4 --out noise.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.one_job
from compilewatch.compiler.plan import Job
from compilewatch.core.schema import Config, Status
from compilewatch.suites.loader import load_suite
from tests.one_job import RunOptions, run_job


def spread(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / statistics.median(xs) if len(xs) > 1 else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--suite", default="micro")
    ap.add_argument("--models", default="", help="comma-separated; default all")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--block-ms", type=float, default=20.0)
    ap.add_argument("--out", default="noise.json")
    args = ap.parse_args()
    suite = load_suite(args.suite)
    names = [m for m in args.models.split(",") if m] or list(suite.models)
    report = {}
    for name in names:
        spec = suite.models[name]
        cfg = Config(device=args.device, mode=spec.default_mode(args.device),
                     dtype=spec.dtype or "float32", dynamic=spec.dynamic)
        rows = []
        for i in range(args.processes):
            t0 = time.time()
            opts = RunOptions(rounds=args.rounds, block_ms=args.block_ms, timing_processes=0)
            r = run_job(Job(suite, spec, cfg), opts)
            if r.status is not Status.PASS or r.latency is None or r.speedup is None:
                print(f"{name} #{i}: {r.status} {r.error and r.error[-300:]}", file=sys.stderr)
                continue
            rows.append({"speedup": r.speedup.value, "ci": [r.speedup.ci_low, r.speedup.ci_high],
                         "eager_us": r.latency.eager_median_us,
                         "compiled_us": r.latency.compiled_median_us,
                         "cold_s": r.compile.cold_s, "wall_s": time.time() - t0})
            print(f"{name} #{i}: {rows[-1]}", file=sys.stderr, flush=True)
        if rows:
            report[name] = {
                "config": cfg.slug, "runs": rows,
                "spread": {k: spread([row[k] for row in rows])
                           for k in ("speedup", "compiled_us", "eager_us", "cold_s")},
            }
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print("| model | speedup per process | spread | compiled µs spread | eager µs spread "
          "| cold s (min-max) | cold spread |")
    print("|---|---|---|---|---|---|---|")
    for name, rep in report.items():
        sp = ", ".join(f"{r['speedup']:.3f}" for r in rep["runs"])
        cold = [r["cold_s"] for r in rep["runs"]]
        s = rep["spread"]
        print(f"| {name} | {sp} | {s['speedup']:.1%} | {s['compiled_us']:.1%} | "
              f"{s['eager_us']:.1%} | {min(cold):.2f}-{max(cold):.2f} | {s['cold_s']:.1%} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
