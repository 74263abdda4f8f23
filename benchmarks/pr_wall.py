"""How long does ``compilewatch pr`` take, and where does the time go? Numbers in
docs/performance.md.

    python benchmarks/pr_wall.py --device cuda --isolation fork --isolation spawn

For each isolation mode (side by side, in one run) and each scenario, it runs ``compilewatch pr``
on a throwaway repository whose suites are the default GPU suite (``micro``, ``hf``):

- ``no-model-change``: the head commit changes a README only; models whose compiled code is the
  same by construction are not timed;
- ``measure-all``: the same commit pair with ``--measure-all`` (every model timed, the worst
  case of a PR that touches every model).

It prints the wall time and the budget per phase: process-seconds per harness phase summed over
every worker of both sides (imports paid once by a fork server count once), and the share of
the harness's own work (everything but imports, compiles, timing and waiting for the device).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _repo import make_repo

MEASURED = {"import", "compile", "timing", "wait_device", "memory", "save_artifact",
            "load_artifact"}
SCENARIOS = {"no-model-change": [], "measure-all": ["--measure-all"]}


def run(repo: Path, out: Path, device: str, isolation: str, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "compilewatch.bot.cli", "pr", "--repo", str(repo), "--base",
           "main", "--head", "head", "--device", device, "--isolation", isolation, "--no-db",
           "--out", str(out), *extra]
    t0 = time.monotonic()
    # its log (a line per finished model) goes to ours: a long GPU run shows how far it got
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"pr failed ({proc.returncode}); its log is above")
    phases: Counter[str] = Counter()
    models = timed = 0
    for side in ("base", "head"):
        data = json.loads((out / f"{side}.json").read_text())
        for r in data["results"]:
            models += 1
            timed += r.get("latency") is not None
            phases.update(r.get("harness_s") or {})
            if r["compile"].get("import_s") and isolation == "fork":
                phases["import"] = r["compile"]["import_s"]  # paid once per server
    harness = sum(v for k, v in phases.items() if k not in MEASURED)
    return {"wall": wall, "phases": dict(phases), "harness": harness, "models": models,
            "timed": timed}


def table(rows: list[tuple[str, str, dict]]) -> str:
    names = sorted({k for _, _, r in rows for k in r["phases"]})
    head = ["scenario", "isolation", "wall s", "models timed", *names, "harness share"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for scenario, isolation, r in rows:
        cells = [scenario, isolation, f"{r['wall']:.0f}", f"{r['timed']} of {r['models']}",
                 *(f"{r['phases'].get(n, 0):.1f}" for n in names),
                 f"{r['harness'] / max(r['wall'], 1e-9):.0%} of wall"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--isolation", action="append", choices=["fork", "spawn"], default=None)
    ap.add_argument("--scenario", action="append", choices=list(SCENARIOS), default=None)
    ap.add_argument("--suite", action="append", default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("extra", nargs="*", help="More `compilewatch pr` arguments (after --).")
    args = ap.parse_args()
    suites = args.suite or ["micro", "hf"]
    pyproject = "[tool.compilewatch]\nsuites = " + json.dumps(suites) + "\n"
    rows = []
    with tempfile.TemporaryDirectory(prefix="pr-wall-") as tmp:
        repo = make_repo(Path(tmp), {"pyproject.toml": pyproject, "README.md": "a\n"},
                         {"README.md": "b\n"})
        out = args.out or Path(tmp) / "out"
        for scenario in args.scenario or list(SCENARIOS):
            for isolation in args.isolation or ["fork", "spawn"]:
                r = run(repo, out / f"{scenario}-{isolation}", args.device, isolation,
                        [*SCENARIOS[scenario], *args.extra])
                rows.append((scenario, isolation, r))
                print(f"{scenario} {isolation}: {r['wall']:.0f} s", file=sys.stderr, flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
