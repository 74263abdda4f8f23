"""How long do ``compare`` and ``post`` take for a large suite? Numbers in docs/performance.md.

    python benchmarks/compare_scale.py --models 500

Two synthetic runs of N models (three timing processes of 10 samples a side, three cold
compiles, cache keys with 70 components) are written as results files; then, each timed:
``compare`` to markdown and to HTML (load, judge, render) and ``post --dry-run`` (validate the
output directory, judge and render the comment again, as the privileged job does).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parents[1]))
from compilewatch.bot.cli import main
from compilewatch.core.results_file import save_results
from tests.factories import model_result, run_results

NOISE = {"processes": 3, "n": 10, "process_spread": 0.007, "spread": 0.01,
         "cold_processes": 3, "cold_spread": 0.03}


def runs(n: int, out: Path) -> tuple[Path, Path]:
    base = run_results([model_result(f"m{i:04d}", seed=i, **NOISE) for i in range(n)],
                       commit="1" * 40)
    head = run_results([model_result(f"m{i:04d}", seed=10_000 + i,
                                     compiled_us=52.5 if i % 10 == 0 else 50.0, **NOISE)
                        for i in range(n)], commit="2" * 40)
    save_results(base, out / "base.json")
    save_results(head, out / "head.json")
    return out / "base.json", out / "head.json"


def timed(args: list[str]) -> float:
    t0 = time.perf_counter()
    result = CliRunner().invoke(main, args)
    took = time.perf_counter() - t0
    if result.exit_code not in (0, 1):
        raise SystemExit(f"{' '.join(args[:2])} failed: {result.output[-2000:]}")
    return took


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=500)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="compare-scale-") as tmp:
        out = Path(tmp)
        base, head = runs(args.models, out)
        (out / "outdir").mkdir()
        shutil.copy(base, out / "outdir" / "base.json")
        shutil.copy(head, out / "outdir" / "head.json")
        cases = {
            "compare --format markdown": ["compare", str(base), str(head), "--out",
                                          str(out / "c.md")],
            "compare --format html": ["compare", str(base), str(head), "--format", "html",
                                      "--out", str(out / "c.html")],
            "post --dry-run": ["post", str(out / "outdir"), "--repo", "o/r", "--pr", "1",
                               "--sha", "2" * 40, "--dry-run"],
        }
        print(f"| {args.models} models | best of {args.repeats} |\n| --- | --- |")
        for name, cmd in cases.items():
            best = min(timed(cmd) for _ in range(args.repeats))
            print(f"| {name} | {best:.2f} s |")


if __name__ == "__main__":
    main_()
