"""How long does ``compilewatch pr`` take, and where does the time go? Numbers in
docs/performance.md.

    python benchmarks/pr_wall.py --device cuda --isolation fork --isolation spawn --limit-s 400

For each isolation mode (side by side, in one run) and each scenario, it runs ``compilewatch pr``
on a throwaway repository holding the default GPU suite's files (``micro``, ``hf``, copied into
``models/`` as a user's suites would be):

- ``no-model-change``: the head commit changes a README only; no model reads it, so after one
  cheap scan process per model and side nothing is measured;
- ``comment-only``: head edits a comment in every suite file, so every model reads a changed
  file: each is compiled cold once a side, and those whose compiled code is the same by
  construction (one graph, equal keys) are not timed;
- ``docs-added``: head adds files no model reads (a doc, a test file, a CI file); a model is
  reached only by a file it could read, so nothing is measured (docs/measurement.md);
- ``one-suite-edited``: head edits a comment in one suite file (``hf``'s where it is measured,
  else the first): that suite's models are compiled cold once a side, the others not;
- ``measure-all``: the README commit pair with ``--measure-all`` (every model timed, the worst
  case of a PR that touches every model).

With ``--history RESULTS`` (results files of an earlier run, e.g. its ``base.json`` and
``head.json``) they are stored in a database of the benchmark's own, which every ``pr`` reads
(``--db``; it stores nothing, ``--no-db``) as a runner's database would hold its earlier runs:
each model's stored duration orders the loop, the longest first (docs/performance.md).

With ``--warm-nightly`` a ``compilewatch nightly`` of the repository's main branch first
publishes signed, verified cache artifacts to a folder (its wall time printed apart), and every
``pr`` then loads them (``--warm-cache DIR`` with the nightly's public key pinned), as the PR
workflow does with the newest nightly release.

It prints the wall time and the budget per phase: process-seconds per harness phase summed over
every worker of both sides (imports paid once by a fork server count once), and the harness's
own work (everything but imports, compiles, timing and waiting for the device) as a share of
all process-seconds and per second of wall time (over 1 where processes run side by side), and
that share without the workers' CUDA contexts (each worker creates its own: a context cannot be
forked, so no fork server can pay for it once). With both isolations it also says whether
they measured the same thing (``_isolation.py``: cache keys and hit/miss states, frames and
graphs per model-side; spawn/fork of the cold and warm compile medians). ``--limit-s`` stops a
``pr`` that runs longer and reports what its checkpoints hold, marked "(cut)".
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _isolation import agreement
from _phases import budget
from _repo import branch, make_repo

SCENARIOS = {"no-model-change": [], "docs-added": [], "one-suite-edited": [],
             "comment-only": [], "measure-all": ["--measure-all"]}
HEAD_OF = {"comment-only": "comment", "docs-added": "added", "one-suite-edited": "one-suite"}
ADDED = {"docs/new.md": "# a new page\n", "tests/test_new.py": "def test_new():\n    pass\n",
         ".github/workflows/new.yml": "name: new\non: push\njobs: {}\n"}


def run(repo: Path, out: Path, device: str, isolation: str, extra: list[str],
        head: str = "head", limit_s: float | None = None) -> dict:
    """One ``pr``; stopped after ``limit_s`` (its checkpoints then give what it measured, and
    ``cut`` says so)."""
    cmd = [sys.executable, "-m", "compilewatch.bot.cli", "pr", "--repo", str(repo), "--base",
           "main", "--head", head, "--device", device, "--isolation", isolation, "--no-db",
           "--out", str(out), *extra]
    for name in ("base.json", "head.json", "comparison.json"):  # never an earlier run's
        (out / name).unlink(missing_ok=True)
    t0 = time.monotonic()
    # its log (a line per finished model) goes to ours: a long GPU run shows how far it got;
    # its own process group, so that a limit stops it and its workers, and so does Ctrl-C
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, start_new_session=True)
    code: int | None = None
    try:
        code = proc.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        stop(proc)
    except BaseException:
        stop(proc)
        raise
    wall = time.monotonic() - t0
    if code not in (0, 1, None):
        raise SystemExit(f"pr failed ({code}); its log is above")
    if not all((out / f"{side}.json").exists() for side in ("base", "head")):
        raise SystemExit(f"pr stopped by --limit-s after {wall:.0f} s before any model ended")
    sides = [json.loads((out / f"{side}.json").read_text()) for side in ("base", "head")]
    results = [r for data in sides for r in data["results"]]
    models = len(results)
    timed = sum(r.get("latency") is not None for r in results)
    compiled = sum(r["compile"].get("cold_s") is not None for r in results)
    warm_started = sum((r.get("compile") or {}).get("warm_start_s") is not None
                       for r in results)
    b = budget(sides, fork=isolation == "fork")
    headline = None if code is None else \
        json.loads((out / "comparison.json").read_text())["headline"]
    return {"wall": wall, "phases": dict(b.phases), "harness": b.harness, "models": models,
            "timed": timed, "compiled": compiled, "warm_started": warm_started,
            "headline": headline, "share": b.share(),
            "share_without_cuda": b.share(without_cuda=True), "sides": sides,
            "cut": code is None}


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the pr's process group (it then ends its workers and writes what it has),
    SIGKILL after 30 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def nightly(repo: Path, tmp: Path, device: str) -> list[str]:
    """Publish the main branch's verified artifacts as a nightly would (one cold compile and
    one timing process a model: the artifact is what matters here); the ``pr`` arguments that
    load them."""
    cli = [sys.executable, "-m", "compilewatch.bot.cli"]
    key, published = tmp / "nightly.pem", tmp / "published"
    made = subprocess.run([*cli, "keys", "generate", "--out", str(key)], check=True,
                          capture_output=True, text=True).stdout
    public = next(line.split(": ", 1)[1] for line in made.splitlines()
                  if line.startswith("public key: "))
    t0 = time.monotonic()
    proc = subprocess.run([*cli, "nightly", "--device", device, "--no-db", "--cold-processes",
                           "1", "--processes", "1", "--rounds", "3", "--out",
                           str(tmp / "nightly-out"), "--publish-dir", str(published),
                           "--signing-key-file", str(key), "-q"], cwd=repo,
                          stdout=subprocess.DEVNULL)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"nightly failed ({proc.returncode}); its log is above")
    print(f"nightly (publishes the warm cache): {time.monotonic() - t0:.0f} s", file=sys.stderr,
          flush=True)
    return ["--warm-cache", str(published), "--cache-public-key", public]


def history(files: list[Path], tmp: Path) -> list[str]:
    """Store earlier results in a database of the benchmark's own; the ``pr`` arguments that
    read it."""
    url = f"sqlite:///{tmp / 'history.db'}"
    subprocess.run([sys.executable, "-m", "compilewatch.bot.cli", "ingest", *map(str, files),
                    "--db", url], check=True, stdout=subprocess.DEVNULL)
    return ["--db", url]


def table(rows: list[tuple[str, str, dict]]) -> str:
    names = sorted({k for _, _, r in rows for k in r["phases"]})
    head = ["scenario", "isolation", "wall s", "model-sides compiled", "timed", *names,
            "harness share of process-seconds", "the same without CUDA contexts",
            "harness process-seconds per wall second"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for scenario, isolation, r in rows:
        wall = f"{r['wall']:.0f}" + (" (cut)" if r["cut"] else "")
        cells = [scenario, isolation, wall, f"{r['compiled']} of {r['models']}",
                 f"{r['timed']}",
                 *(f"{r['phases'].get(n, 0):.1f}" for n in names),
                 f"{r['share']:.1%}", f"{r['share_without_cuda']:.1%}",
                 f"{r['harness'] / max(r['wall'], 1e-9):.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--isolation", action="append", choices=["fork", "spawn"], default=None)
    ap.add_argument("--scenario", action="append", choices=list(SCENARIOS), default=None)
    ap.add_argument("--suite", action="append", default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--warm-nightly", action="store_true",
                    help="Publish a nightly's artifacts first; every pr loads them.")
    ap.add_argument("--limit-s", type=float, default=None,
                    help="Seconds for each pr; one stopped there is reported from its "
                         "checkpoints, marked (cut), with the model-sides it finished.")
    ap.add_argument("--history", action="append", type=Path, default=[], metavar="RESULTS",
                    help="Results files of earlier runs, stored in a database every pr reads "
                         "(the models' durations). Repeatable.")
    ap.add_argument("extra", nargs="*", help="More `compilewatch pr` arguments (after --).")
    args = ap.parse_args()
    suites = args.suite or ["micro", "hf"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="pr-wall-") as tmp:
        repo = user_repo(Path(tmp), suites)
        out = args.out or Path(tmp) / "out"
        warm = nightly(repo, Path(tmp), args.device) if args.warm_nightly else []
        if args.history:
            warm += history(args.history, Path(tmp))
        for scenario in args.scenario or list(SCENARIOS):
            for isolation in args.isolation or ["fork", "spawn"]:
                r = run(repo, out / f"{scenario}-{isolation}", args.device, isolation,
                        [*SCENARIOS[scenario], *warm, *args.extra],
                        HEAD_OF.get(scenario, "head"), args.limit_s)
                rows.append((scenario, isolation, r))
                h = r["headline"]
                verdicts = "cut by --limit-s, not judged" if h is None else (
                    f"{h['regressions']} regressions, {h['improvements']} improvements, "
                    f"{h['unchanged']} unchanged, {h['within_noise']} within noise, "
                    f"{h['noisy']} noisy")
                print(f"{scenario} {isolation}: {r['wall']:.0f} s; {verdicts}; "
                      f"{r['warm_started']} model-sides warm-started from an artifact",
                      file=sys.stderr, flush=True)
                print(table(rows), flush=True)  # so far: a run stopped by a limit keeps it
            done = {iso: r["sides"] for sc, iso, r in rows if sc == scenario}
            if {"fork", "spawn"} <= set(done):
                print(agreement(done["fork"], done["spawn"]), flush=True)


def user_repo(root: Path, suites: list[str]) -> Path:
    """Built-in suites copied into ``models/`` of a repository; branch ``head`` edits the
    README, ``added`` adds files no model reads, ``one-suite`` edits a comment in one suite
    file, ``comment`` a comment in every suite file."""
    from compilewatch.suites.loader import BUILTIN

    files = {f"models/{s}.py": Path(importlib.import_module(BUILTIN[s]).__file__).read_text()
             for s in suites}
    pyproject = "[tool.compilewatch]\nsuites = " + json.dumps(list(files)) + "\n"
    repo = make_repo(root, {"pyproject.toml": pyproject, "README.md": "a\n", **files},
                     {"README.md": "b\n"})
    branch(repo, "comment", {name: text + "\n# a comment\n" for name, text in files.items()})
    branch(repo, "added", ADDED)
    one = "models/hf.py" if "models/hf.py" in files else next(iter(files))
    branch(repo, "one-suite", {one: files[one] + "\n# a comment\n"})
    return repo


if __name__ == "__main__":
    main()
