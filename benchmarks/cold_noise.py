"""Where does the spread between two cold compiles of the same code come from? Numbers in
docs/verdict-quality.md.

    python benchmarks/cold_noise.py --device cuda --rounds 8

A ``pr`` on a GPU runs a model's cold compiles in pairs, base and head side by side, each on a
compile slot of three cores of its own with three Inductor compile workers, while other
models' cold compiles run in the other slots and a timing process keeps the GPU busy. The
two compiles of a pair still disagree by 4-14% (standard deviation of the log of one compile,
docs/verdict-quality.md), and that spread is what a cold-compile verdict's band is made of.
This times cold compiles of the same micro models (each a fresh process on an empty cache dir,
its first compiled call with a device sync, as ``worker.run_compile`` times it) under
conditions taken in turn each round, so that drift hits each alike:

- ``alone``: one compile at a time, two in a row (the pair), on the first slot's cores;
- ``alone-seed``: the same with ``PYTHONHASHSEED=0`` in both (every process the same string
  hashes, so the same set and dict orders): whether the compile's own work varies;
- ``pair``: two at once, each on a slot of its own (a pair with the other slots idle);
- ``four``: four at once, two pairs (a ``pr`` with four compile slots busy);
- ``four-gpu``: the same while another process keeps launching small kernels on the last core
  (a timing process's load).

Per condition it prints the pair spread (the standard deviation of the log difference of a
pair's two compiles, over the square root of two: per compile, as the verdict uses it), the
spread of all its compiles (each model's about its own mean, pooled), and the pair spread of
process-tree CPU time and of the compile's phases as torch counts them
(``torch._dynamo.utils.compilation_time_metrics``), so the phase whose two sides disagree
shows. One compile before the first round is kept out of every condition.

Each compile process also times two fixed workloads on its own cores, eight times each just
before and just after its compile (``_references``): the preflight's pure-Python loop and a
dict-and-sort over some megabytes. Were a compile slow because its cores ran slow, the compile
over its reference would agree better than the compile alone; the last two columns say whether
it does (on the H200 it did not: docs/verdict-quality.md), and a line per reference says how
closely it follows the compile and what a fitted share of it would leave (``reference_fit``).
``--from FILE`` prints all of that again from an ``--out`` file.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONDITIONS = ("alone", "alone-seed", "pair", "four", "four-gpu")
SLOT_CORES = 3  # a pr's compile slot on the H200: three cores, three compile workers
_BUSY = """
import sys, time, torch
x = torch.randn(64, 64, device="cuda")
torch.cuda.synchronize()
print("ready", flush=True)
while True:
    for _ in range(100):
        x = torch.tanh(x)
    torch.cuda.synchronize()
"""
# torch's own per-function compile timers worth showing (the rest are inside these)
PHASES = ("_compile.compile_inner", "OutputGraph.call_user_compiler", "compile_fx_inner",
          "GraphLowering.compile_to_module", "async_compile.wait")


def _child(model: str, device: str, cores: list[int]) -> None:
    """One cold compile, printed as a JSON line: wall, process-tree CPU, torch's phases."""
    if cores:
        os.sched_setaffinity(0, set(cores))
    import torch
    import torch._inductor.config as inductor_config

    from compilewatch.compiler import proctree
    from compilewatch.suites.loader import load_suite
    from compilewatch.suites.registry import BuildContext

    inductor_config.compile_threads = len(cores) or 1
    spec = load_suite("micro").models[model]
    ctx = BuildContext(device=device, dtype=spec.dtype or "float32", large=device == "cuda")
    fn, inputs = spec.build(ctx)
    fn(*inputs)  # eager first, as a cold process does: the clock holds the compile alone
    if device == "cuda":
        torch.cuda.synchronize()
    before = _references()
    compiled = torch.compile(fn, dynamic=spec.dynamic)
    cpu0, t0 = proctree.tree_cpu_seconds(), time.perf_counter()
    compiled(*inputs)
    if device == "cuda":
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    cpu = proctree.tree_cpu_seconds() - cpu0
    from torch._dynamo.utils import compilation_time_metrics

    phases = {k: sum(v) for k, v in compilation_time_metrics.items() if k in PHASES}
    after = _references()
    print(json.dumps({"wall": wall, "cpu": cpu, "phases": phases,
                      "ref_before": before, "ref_after": after}), flush=True)


def _mem_work() -> float:
    """Dicts, strings and a sort over some megabytes: Python work that leaves the caches."""
    t0 = time.perf_counter()
    d = {f"key{i}": i * 7 % 1009 for i in range(100_000)}
    ordered = sorted(d, key=d.__getitem__)
    sum(len(k) for k in ordered)
    return time.perf_counter() - t0


def _references(n: int = 8) -> dict[str, list[float]]:
    """Fixed workloads timed on this process's cores: how fast these cores run now."""
    from compilewatch.compiler.hostcheck import cpu_work

    cpu_work()
    _mem_work()
    return {"loop": [cpu_work() for _ in range(n)], "mem": [_mem_work() for _ in range(n)]}


def _groups(n: int, size: int) -> list[list[int]]:
    """``n`` slots of ``size`` cores, off the last core (the GPU load's); with size 0 (a smoke
    run on a small machine) none is pinned."""
    if size == 0:
        return [[] for _ in range(n)]
    cores = sorted(os.sched_getaffinity(0))[:-1]
    if len(cores) < n * size:
        raise SystemExit(f"cold_noise needs {n * size + 1} cores for {n} slots; this "
                         f"process may use {len(cores) + 1}")
    return [cores[i * size:(i + 1) * size] for i in range(n)]


def _start(model: str, device: str, cores: list[int], seed: bool) -> tuple[subprocess.Popen,
                                                                             Path]:
    cache = Path(tempfile.mkdtemp(prefix="cold-noise-"))
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache), TRITON_CACHE_DIR=str(cache / "t"))
    if seed:
        env["PYTHONHASHSEED"] = "0"
    cmd = [sys.executable, __file__, "--child", model, "--device", device,
           "--cores", ",".join(map(str, cores))]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True), cache


def _finish(proc: subprocess.Popen, cache: Path) -> dict:
    out, _ = proc.communicate()
    shutil.rmtree(cache, ignore_errors=True)
    if proc.returncode != 0:
        raise SystemExit(f"a cold compile failed (exit {proc.returncode})")
    return json.loads(out.strip().splitlines()[-1])


def _batch(model: str, device: str, groups: list[list[int]], seed: bool = False) -> list[dict]:
    """Cold compiles started at once, one per group; their results in group order. One that
    fails stops the run, and the others are killed and their cache dirs removed."""
    started: list[tuple[subprocess.Popen, Path]] = []
    try:
        for g in groups:
            started.append(_start(model, device, g, seed))
        return [_finish(p, c) for p, c in started]
    finally:
        for p, c in started:
            if p.poll() is None:
                p.kill()
                p.wait()
            shutil.rmtree(c, ignore_errors=True)


def _busy(device: str) -> subprocess.Popen | None:
    if device != "cuda":
        return None
    proc = subprocess.Popen([sys.executable, "-c", _BUSY], stdout=subprocess.PIPE, text=True)
    os.sched_setaffinity(proc.pid, {sorted(os.sched_getaffinity(0))[-1]})
    if proc.stdout is None or proc.stdout.readline().strip() != "ready":
        proc.kill()
        proc.wait()
        raise SystemExit("four-gpu needs CUDA: its GPU load did not start")
    return proc


def run_condition(condition: str, model: str, device: str, size: int = SLOT_CORES
                  ) -> list[tuple[dict, dict]]:
    """One round of a condition, on slots of ``size`` cores: its pairs (two compiles that a
    verdict would compare)."""
    if condition.startswith("alone"):
        one = _groups(1, size)
        seed = condition == "alone-seed"
        a, b = _batch(model, device, one, seed)[0], _batch(model, device, one, seed)[0]
        return [(a, b)]
    if condition == "pair":
        a, b = _batch(model, device, _groups(2, size))
        return [(a, b)]
    load = _busy(device) if condition == "four-gpu" else None
    try:
        r = _batch(model, device, _groups(4, size))
    finally:
        if load is not None:
            load.kill()
            load.wait()
    return [(r[0], r[1]), (r[2], r[3])]


def _sd(xs: list[float]) -> float:
    return statistics.stdev(xs) if len(xs) >= 2 else float("nan")


def spreads(pairs: list[tuple[dict, dict]], value) -> tuple[float, float]:
    """(pair spread, spread of all) of ``value(result)``, as standard deviations of the log:
    of the pairs' log differences over the square root of two, and of every compile's log
    (pairs of one model: ``pooled_spread`` pools models)."""
    diffs = [math.log(value(b)) - math.log(value(a)) for a, b in pairs
             if value(a) > 0 and value(b) > 0]
    return _sd(diffs) / math.sqrt(2), _sd([math.log(value(r)) for p in pairs for r in p
                                           if value(r) > 0])


def pooled_spread(per_model: dict[str, list[tuple[dict, dict]]], value) -> float:
    """The spread of all compiles, each model's logs about its own mean, pooled over models
    (models of different sizes share no mean)."""
    ss, df = 0.0, 0
    for pairs in per_model.values():
        logs = [math.log(value(r)) for p in pairs for r in p if value(r) > 0]
        if len(logs) >= 2:
            mean = sum(logs) / len(logs)
            ss += sum((x - mean) ** 2 for x in logs)
            df += len(logs) - 1
    return math.sqrt(ss / df) if df else float("nan")


REFERENCES = ("loop", "mem")


def reference(r: dict, kind: str) -> float:
    """How long the compile's cores took for the ``kind`` workload: the median of its samples
    before and after the compile (0 where the compile has none)."""
    xs = r.get("ref_before", {}).get(kind, []) + r.get("ref_after", {}).get(kind, [])
    return statistics.median(xs) if xs else 0.0


def over_reference(r: dict, kind: str) -> float:
    """The compile's wall time in units of its cores' reference workload (0: none)."""
    ref = reference(r, kind)
    return r["wall"] / ref if ref > 0 else 0.0


def _median_of(r: dict, when: str, kind: str) -> float:
    xs = r.get(when, {}).get(kind, [])
    return statistics.median(xs) if xs else 0.0


def reference_fit(pairs: list[tuple[dict, dict]], kind: str) -> dict[str, float] | None:
    """How a pair's log wall difference follows its cores' ``kind`` reference: the correlation
    of the two, the share of the reference's log fitted on all pairs, and the pair spread left
    after subtracting a share fitted without each pair in turn (with so few pairs, the in-sample
    fit would flatter itself). ``steady``: how a reference taken before a compile correlates
    with one taken after it (whether the cores' speed outlasts a compile). None with fewer than
    four pairs holding the reference."""
    held = [(a, b) for a, b in pairs if min(_median_of(r, w, kind) for r in (a, b)
                                            for w in ("ref_before", "ref_after")) > 0]
    if len(held) < 4:
        return None
    x = [math.log(b["wall"] / a["wall"]) for a, b in held]
    y = [math.log(reference(b, kind) / reference(a, kind)) for a, b in held]

    def share(xs: list[float], ys: list[float]) -> float:
        var = statistics.variance(ys)
        return statistics.covariance(xs, ys) / var if var > 0 else 0.0

    left = [x[i] - share(x[:i] + x[i + 1:], y[:i] + y[i + 1:]) * y[i] for i in range(len(x))]
    before, after = ([math.log(_median_of(b, w, kind) / _median_of(a, w, kind)) for a, b in held]
                     for w in ("ref_before", "ref_after"))
    return {"correlation": statistics.correlation(x, y), "share": share(x, y),
            "left": math.sqrt(sum(v * v for v in left) / len(left)) / math.sqrt(2),
            "steady": statistics.correlation(before, after)}


def fit_lines(rows: dict[str, dict[str, list[tuple[dict, dict]]]]) -> str:
    """A line per condition and reference: what ``reference_fit`` found."""
    lines = []
    for condition in CONDITIONS:
        pairs = [p for ps in rows.get(condition, {}).values() for p in ps]
        for kind in REFERENCES:
            fit = reference_fit(pairs, kind)
            if fit is not None:
                lines.append(f"{condition}, {kind} reference: correlation with the compile "
                             f"{fit['correlation']:.2f}, before with after "
                             f"{fit['steady']:.2f}; share {fit['share']:.2f} fitted, pair "
                             f"spread left {fit['left']:.1%} (share fitted without each pair)")
    return "\n".join(lines)


def _pct(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.1%}"


def table(rows: dict[str, dict[str, list[tuple[dict, dict]]]]) -> str:
    lines = ["| condition | pairs | wall: median s | pair spread | spread of all | CPU: pair "
             "spread | " + " | ".join(f"{p} pair spread" for p in PHASES) + " | "
             + " | ".join(f"wall over {k} reference: pair spread" for k in REFERENCES) + " |",
             "| --- " * (6 + len(PHASES) + len(REFERENCES)) + "|"]
    for condition in CONDITIONS:
        per_model = rows.get(condition, {})
        pairs = [p for ps in per_model.values() for p in ps]
        if not pairs:
            continue
        # pair spreads pool over models (a log difference has no scale)
        wall_pair = spreads(pairs, lambda r: r["wall"])[0]
        whole = pooled_spread(per_model, lambda r: r["wall"])
        cpu_pair = spreads(pairs, lambda r: r["cpu"])[0]
        phase = [spreads(pairs, lambda r, k=k: r["phases"].get(k, 0.0))[0] for k in PHASES]
        normalised = [spreads(pairs, lambda r, k=k: over_reference(r, k))[0]
                      for k in REFERENCES]
        med = statistics.median(r["wall"] for p in pairs for r in p)
        lines.append(f"| {condition} | {len(pairs)} | {med:.2f} | {wall_pair:.1%} | "
                     f"{whole:.1%} | {cpu_pair:.1%} | "
                     + " | ".join(_pct(s) for s in phase) + " | "
                     + " | ".join(_pct(s) for s in normalised) + " |")
    return "\n".join(lines)


def in_time(limit_s: float | None, elapsed: float, longest: float) -> bool:
    """Whether another round fits: the longest round so far, started now, ends by the limit
    (a round cut by the run's own time limit is lost, the table of the rounds before it not)."""
    return limit_s is None or elapsed + longest <= limit_s


def main() -> None:
    start = time.monotonic()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--model", action="append", default=None,
                    help="micro models, one per round in turn (default: pointwise, ln_mlp_block)")
    ap.add_argument("--condition", action="append", choices=CONDITIONS, default=None)
    ap.add_argument("--limit-s", type=float, default=None,
                    help="Start no round that, as long as the longest so far, would end past "
                         "this many seconds.")
    ap.add_argument("--out", type=Path, default=None, help="Every compile's numbers (JSON).")
    ap.add_argument("--slot-cores", type=int, choices=range(0, 65), default=SLOT_CORES,
                    metavar="N",
                    help="Cores (and compile workers) of one slot, as a pr gives a slot.")
    ap.add_argument("--from", dest="source", type=Path, default=None, metavar="FILE",
                    help="Print the table of an earlier run's --out file, measuring nothing.")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--cores", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.child, args.device, [int(c) for c in args.cores.split(",") if c])
        return
    if args.source:
        try:
            rows = json.loads(args.source.read_text())
            print(f"{table(rows)}\n{fit_lines(rows)}")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            ap.error(f"{args.source} is not a cold_noise --out file: {e}")
        return
    size = args.slot_cores
    models = args.model or ["pointwise", "ln_mlp_block"]
    conditions = list(args.condition or CONDITIONS)
    rows: dict[str, dict[str, list[tuple[dict, dict]]]] = {c: {} for c in conditions}
    # one compile kept out of every condition: a fresh machine's first process reads its
    # files from disk (on the H200 it took 3.71 s where its partner took 2.63 s)
    _batch(models[0], args.device, _groups(1, size))
    last, longest = time.monotonic(), 0.0
    for i in range(args.rounds):
        if not in_time(args.limit_s, time.monotonic() - start, longest):
            print(f"stopped after {i} rounds: the next would pass --limit-s", file=sys.stderr)
            break
        model = models[i % len(models)]
        order = conditions[i % len(conditions):] + conditions[:i % len(conditions)]
        for condition in order:
            got = run_condition(condition, model, args.device, size)
            rows[condition].setdefault(model, []).extend(got)
            print(condition, model, [(round(a["wall"], 2), round(b["wall"], 2))
                                     for a, b in got], file=sys.stderr, flush=True)
        now = time.monotonic()
        longest, last = max(longest, now - last), now
        print(f"after round {i + 1} ({now - start:.0f} s):\n{table(rows)}\n{fit_lines(rows)}",
              flush=True)
        if args.out:
            args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
