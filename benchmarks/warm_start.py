"""Warm-start (empty cache dir + portable cache artifact) versus cold first compile, per model.

Each model: a cold compile in a fresh process that saves its artifact, then a fresh process on
an empty cache dir that loads it (the nightly's verification). Prints one row per model.

    python benchmarks/warm_start.py --suite micro --model pointwise --model gelu_mm --device cpu
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.one_job
from compilewatch.compiler.plan import plan_jobs
from compilewatch.suites.loader import resolve_suites
from tests.one_job import RunOptions, run_job_full


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--suite", default="micro")
    p.add_argument("--model", action="append", default=[])
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    jobs = plan_jobs(resolve_suites([args.suite]), device=args.device, models=args.model)
    print(f"{'model':<24} {'config':<28} {'cold s':>8} {'warm-start s':>13} {'speedup':>8}  "
          f"verdict")
    with tempfile.TemporaryDirectory() as tmp:
        opts = RunOptions(rounds=1, block_ms=1.0, timing_processes=0, measure=False,
                          artifact_dir=Path(tmp))
        for job in jobs:
            run = run_job_full(job, opts)
            c = run.result.compile
            ratio = f"{c.cold_s / c.warm_start_s:.1f}x" if c.cold_s and c.warm_start_s else "-"
            print(f"{job.spec.name:<24} {job.config.slug:<28} {c.cold_s or 0:8.2f} "
                  f"{c.warm_start_s or 0:13.2f} {ratio:>8}  {run.rejected or 'verified'}",
                  flush=True)


if __name__ == "__main__":
    main()
