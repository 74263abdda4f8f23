"""How good are the verdicts? False alarms and detections of ``compilewatch pr`` on a user
repository with known changes. Numbers in docs/verdict-quality.md; rerun when the verdict logic
changes.

    python benchmarks/verdict_quality.py --device cuda --repeats 3 --out vq/

It builds a git repository whose suites are the default GPU suite (``micro``, ``hf``) plus
``inject.py``, and a head commit that changes only ``inject.py``:

- model-side +5%: more work in the model (more rows, more elements, a longer sequence) for a
  chain of bf16 matmuls, a memory-bound pointwise op and a transformer block; four more layers
  of 20 for a launch-bound stack of tiny Linear layers (two more gave +5.8% of compiled time
  on the H200; four are expected near +10%, not measured yet);
- compiler-side +5%: work added to the compiled graph only (behind
  ``torch.compiler.is_compiling()``), eager untouched;
- a cold-compile change: a chain of 1.5 times the matmul + GELU steps, each a kernel of its
  own, for about +20% cold compile on the H200 (the pooled true size is what the benchmark
  reports); and the same +20% applied to every untouched model's head cold compiles (wall and
  CPU samples scaled), judged again: what a change of that size meets in each model's own
  noise.

With ``--training`` every pr measures the training step (``--task training``) and the
injected models are a training step's (``TRAIN_INJECT``): a backward-only change (a custom
``autograd.Function`` whose backward does more matmul work in head) and a change to what the
partitioner saves (activation checkpointing of three blocks dropped in head), judged on peak
memory.

Every repeat runs ``compilewatch pr --measure-all`` (so the untouched models are timed: they are
the A/A part). The injected changes' true sizes come from pooling every repeat's processes (3
repeats x 3 processes a side), not from any one verdict. Prints a markdown report.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _phases import budget
from _repo import make_repo

from compilewatch.bot.judge.comparison import Delta
from compilewatch.bot.judge.followup import cold_unsettled
from compilewatch.core.schema import Latency

INJECT = '''"""Models whose head commit changes by a known amount (verdict_quality.py)."""
import torch

from compilewatch.suites import BuildContext, model

SUITE_NAME = "inject"
HEAD = {head}


def _n(ctx: BuildContext, gpu: int, cpu: int) -> int:
    return gpu if ctx.large else cpu


@model("matmul_chain", tags=("gpu-bound",))
def matmul_chain(ctx: BuildContext):
    rows = _n(ctx, 4096, 256)
    rows = int(rows * 1.05) if HEAD else rows
    dim = _n(ctx, 4096, 256)
    dtype = torch.bfloat16 if ctx.device == "cuda" else torch.float32
    ws = [torch.randn(dim, dim, dtype=dtype, device=ctx.device) / dim ** 0.5 for _ in range(6)]

    def fn(x):
        for w in ws:
            x = torch.relu(x @ w)
        return x

    return fn, (torch.randn(rows, dim, dtype=dtype),)


@model("pointwise_big", tags=("gpu-bound", "memory-bound"))
def pointwise_big(ctx: BuildContext):
    n = _n(ctx, 64 * 2**20, 2**20)
    n = int(n * 1.05) if HEAD else n

    def fn(x):
        return torch.sin(x) * torch.cos(x) + torch.tanh(x)

    return fn, (torch.randn(n),)


@model("tblock", tags=("gpu-bound",))
def tblock(ctx: BuildContext):
    seq = _n(ctx, 1024, 64)
    seq = int(seq * 1.05) if HEAD else seq
    dim = _n(ctx, 1024, 128)
    layer = torch.nn.TransformerEncoderLayer(dim, 8, 4 * dim, batch_first=True, dropout=0.0)
    return layer, (torch.randn(8, seq, dim),)


@model("launch_bound", tags=("launch-bound",))
def launch_bound(ctx: BuildContext):
    # 20 -> 22 layers gave +5.8% of compiled time on the H200 (the call's fixed cost does not
    # grow): 24 layers, expected near the +10% the launch-bound target asks (not measured yet)
    layers = 24 if HEAD else 20
    net = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(layers)])
    return net, (torch.randn(8, 32),)


@model("compiler_side", tags=("gpu-bound", "compiler-side"))
def compiler_side(ctx: BuildContext):
    n = _n(ctx, 64 * 2**20, 2**20)

    def fn(x):
        y = torch.sin(x) * torch.cos(x) + torch.tanh(x)
        if HEAD and torch.compiler.is_compiling():
            # a reduction over a tenth of the input, added as zero: one more kernel and a
            # tenth more memory traffic in the compiled graph only (eager and the output
            # stay the same)
            y = y + x[: n // 10].sum() * 0.0
        return y

    return fn, (torch.randn(n),)


@model("cold_heavy", tags=("cold-compile",))
def cold_heavy(ctx: BuildContext):
    # a chain of matmul + GELU with a different width at every step: every step is a kernel of
    # its own (sizes are constants), so compile work grows with the steps, not the run time.
    # Widths that repeat (an earlier version cycled through 12) give the same kernels again,
    # which Inductor compiles once: 45% more steps then changed nothing (-2%, -5% on the H200).
    # With distinct widths 45% more steps cost +36% on a CPU compile, +11% on the H200 (where
    # about 11 s of a 14 s cold compile did not grow with the steps), so head had twice the
    # steps: +14% to +28% there. Since each compile slot has cores of its own (three compile
    # workers, not one per core of the machine) twice the steps cost +38% to +41% (17.1 s ->
    # 24.1 s: 0.17 s a step, 10.3 s fixed), so head has 1.5 times the steps: +20%.
    steps = 60 if HEAD else 40
    dims = [32 + 8 * i for i in range(steps + 1)]
    ws = [torch.randn(a, b, device=ctx.device) / a ** 0.5 for a, b in zip(dims, dims[1:])]

    def fn(x):
        for w in ws:
            x = torch.nn.functional.gelu(x @ w)
        return x

    return fn, (torch.randn(16, dims[0]),)
'''

TRAIN_INJECT = '''"""Models whose head commit changes their training step by a known amount
(verdict_quality.py --training)."""
import torch
from torch.utils.checkpoint import checkpoint

from compilewatch.suites import BuildContext, model

SUITE_NAME = "inject_training"
HEAD = {head}


def _n(ctx: BuildContext, gpu: int, cpu: int) -> int:
    return gpu if ctx.large else cpu


class _Tap(torch.autograd.Function):
    """The identity forward; its backward in head also multiplies the gradient by a matrix
    half as wide again as a layer (its sum added as zero): one and a half matmuls of a
    layer's size, in the backward graph only."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(w)
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        if HEAD:
            g = g + (g @ w.to(g.dtype)).sum() * 0.0
        return g, None


@model("backward_heavy", tags=("gpu-bound", "backward-only"), tasks=("training",),
       optimizer="sgd")
def backward_heavy(ctx: BuildContext):
    # six bias-free layers: 6 matmuls forward, 12 backward; head's backward one more of a
    # layer's size gave +3.5% of the step on the H200 (repeats 42-44), so one and a half
    rows, dim = _n(ctx, 8192, 64), _n(ctx, 4096, 64)

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList(
                torch.nn.Linear(dim, dim, bias=False) for _ in range(6))
            self.register_buffer("tap", torch.randn(dim, dim + dim // 2) / dim ** 0.5)

        def forward(self, x):
            for layer in self.layers:
                x = torch.relu(layer(x))
            return _Tap.apply(x, self.tap)

    return Net(), (torch.randn(rows, dim),)


for _copy in range(2, {copies} + 1):  # --copies: more samples of one change in one pr
    model(f"backward_heavy_copy{_copy}", tags=("gpu-bound", "backward-only"),
          tasks=("training",), optimizer="sgd")(backward_heavy)


@model("saved_more", tags=("memory",), tasks=("training",))
def saved_more(ctx: BuildContext):
    # eight blocks of four Linear + GELU; base recomputes three blocks' activations in the
    # backward (activation checkpointing), head keeps them: the partitioner saves more
    rows, dim = _n(ctx, 16384, 64), _n(ctx, 1024, 64)
    recomputed = 0 if HEAD else 3

    def block() -> torch.nn.Module:
        return torch.nn.Sequential(*[m for _ in range(4)
                                     for m in (torch.nn.Linear(dim, dim), torch.nn.GELU())])

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = torch.nn.ModuleList(block() for _ in range(8))

        def forward(self, x):
            for i, b in enumerate(self.blocks):
                x = checkpoint(b, x, use_reentrant=False) if i < recomputed else b(x)
            return x

    return Net(), (torch.randn(rows, dim),)
'''

COLD_FACTOR = 1.2  # the cold-compile change applied to the untouched models' own samples
FIRST_COLD = 3  # a GPU pr's cold compiles a side before its follow-up (--cold-follow-up-check)
ALL_COLD = 2 * FIRST_COLD  # and with it: --extra-cold-processes' default of 3 on cuda

CHANGED = {"matmul_chain": "model +5% (rows)", "pointwise_big": "model +5% (elements)",
           "tblock": "model +5% (sequence)", "launch_bound": "model +10% (four more layers)",
           "compiler_side": "compiler-side, compiled graph only",
           "cold_heavy": "cold compile (more kernels)",
           "backward_heavy": "backward only +5% (1.5 more matmuls of 18)",
           "saved_more": "forward+backward peak memory (three blocks no longer recomputed)"}
# the metric a changed model is judged on: compiled time unless named here
METRIC = {"cold_heavy": "cold_compile", "saved_more": "fwd_bwd_memory"}


def kind(name: str) -> str:
    """The injected model a copy (``--copies``) is of; any other name as it is."""
    return re.sub(r"_copy\d+$", "", name)


def make_inject_repo(root: Path, suites: list[str], inject: bool = True,
                     training: bool = False, copies: int = 1) -> Path:
    """The untouched suites plus ``inject.py``, whose head commit changes it (with
    ``training``, the training step's injected models, the backward-only one ``copies`` times:
    each copy its own model, so its own processes and verdict); without ``inject``, the
    untouched suites alone and a head commit that changes a README (A/A only: a repeat of
    ``hf`` alone fits where one with the injected models does not)."""
    if not inject:
        pyproject = "[tool.compilewatch]\nsuites = " + json.dumps(suites) + "\n"
        return make_repo(root, {"pyproject.toml": pyproject, "README.md": "a\n"},
                         {"README.md": "b\n"})
    source = (TRAIN_INJECT if training else INJECT).replace("{copies}", str(copies))
    pyproject = "[tool.compilewatch]\nsuites = " + json.dumps([*suites, "inject.py"]) + "\n"
    return make_repo(root, {"pyproject.toml": pyproject,
                            "inject.py": source.replace("{head}", "False")},
                     {"inject.py": source.replace("{head}", "True")})


STOP_GRACE_S = 30  # what an interrupted pr may take to remove its worktrees
MIN_REPEAT_S = 120  # a repeat with less left would be cut before any model finished


def run_pr(repo: Path, out: Path, device: str, extra: list[str],
           limit_s: float | None = None) -> tuple[dict, float, bool] | None:
    """One ``pr`` and its comparison. Past ``limit_s`` it is stopped (SIGTERM, which ``pr``
    unwinds like Ctrl-C, removing its worktrees; SIGINT is ignored by a job started in the
    background) and the comparison is made from the results it checkpointed after every
    model: a repeat cut by a device call's limit still reports what it measured. The third
    value says whether it was cut; None: cut before any model finished."""
    for stale in ("base.json", "head.json", "comparison.json"):  # an earlier run's, in --out
        (out / stale).unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "compilewatch.bot.cli", "pr", "--repo", str(repo),
           "--base", "main", "--head", "head", "--device", device, "--measure-all",
           "--no-db", "--out", str(out), *extra]
    t0 = time.monotonic()
    # its log (a line per finished model) goes to ours: a long GPU run shows how far it got
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    try:
        rc, cut = proc.wait(timeout=limit_s), False
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        rc, cut = 0, True
    took = time.monotonic() - t0
    if rc not in (0, 1):
        raise SystemExit(f"pr failed ({rc}); its log is above")
    if cut:
        if not all((out / f"{s}.json").exists() for s in ("base", "head")):
            print(f"pr was cut at {took:.0f} s before any model finished", file=sys.stderr)
            return None
        judged = compare(out, out, repo)
        if judged is None:
            print("the cut repeat's checkpoints could not be compared", file=sys.stderr)
            return None
        return judged, took, cut
    return json.loads((out / "comparison.json").read_text()), took, cut


def compare(results: Path, out: Path, repo: Path | None = None) -> dict | None:
    """``compilewatch compare`` of the base.json and head.json in ``results`` (with the
    repository's own config where given), written to ``out``/comparison.json; None if it
    failed (its message is on stderr)."""
    cmd = [sys.executable, "-m", "compilewatch.bot.cli", "compare", str(results / "base.json"),
           str(results / "head.json"), "--format", "json", "--out",
           str(out / "comparison.json"), *(["--repo", str(repo)] if repo else [])]
    if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode != 0:
        return None
    return json.loads((out / "comparison.json").read_text())


def scaled_cold(run: dict, out: Path, factor: float, first: int | None = None
                ) -> tuple[int, int, int]:
    """A known cold-compile change on real noise: every untouched model's head cold compiles
    (wall and CPU samples) times ``factor``, judged again by ``compare``; (found, models,
    misses whose verdict a ``pr`` would leave open near the threshold and so give more cold
    compiles). With ``first``, judged as a ``pr`` with ``first`` cold compiles a side and its
    follow-up would (``as_pr``): the run must hold more, and a model open after its first
    ``first``, or called on them, is judged on all of them, so the third number counts misses
    the follow-up did not settle.
    The repeat's own processes carry the noise, so this says what a change of that size
    meets on this runner, model by model, beside the one injected model that really
    compiles more."""
    head = json.loads(json.dumps(run["head"]))
    judgeable = {r["model"] for r in run["base"]["results"]
                 if len((r.get("compile") or {}).get("cold_samples_s") or []) >= 2}
    untouched = set()
    for r in head["results"]:
        c = r.get("compile") or {}
        if kind(r["model"]) in CHANGED or r["model"] not in judgeable or not c.get("cold_s") \
                or len(c.get("cold_samples_s") or []) < 2:
            continue  # one sample a side is shown, never judged: not a miss
        untouched.add(r["model"])
        c["cold_samples_s"] = [x * factor for x in c["cold_samples_s"]]
        c["cold_cpu_samples_s"] = [x * factor for x in c.get("cold_cpu_samples_s") or []]
        c["cold_s"] *= factor
    scaled = {"base": run["base"], "head": head}
    judged = compare_run(scaled, out) if first is None else as_pr(scaled, out, first)[0]
    if judged is None:
        print("the scaled cold compiles could not be compared; not counted", file=sys.stderr)
        return 0, 0, 0
    rows = [r for r in judged["rows"] if r["model"] in untouched]
    want = "regression" if factor > 1 else "improvement"
    found = sum((r.get("cold_compile") or {}).get("verdict") == want for r in rows)
    asked = sum(cold_unsettled(Delta.model_validate(r["cold_compile"])) is not None
                for r in rows if r.get("cold_compile")
                and r["cold_compile"].get("verdict") != want)  # misses only
    return found, len(untouched), asked


def compare_run(run: dict, out: Path) -> dict | None:
    """``compare`` of a run held in memory (its sides written to ``out`` first)."""
    out.mkdir(parents=True, exist_ok=True)
    for side in ("base", "head"):
        (out / f"{side}.json").write_text(json.dumps(run[side]))
    return compare(out, out)


def _first_colds(side: dict, first: int, cut: set[str]) -> dict:
    """A side's results with the cold compiles of the models in ``cut`` cut to the first
    ``first``: what a ``pr`` with ``first`` cold compiles a side would have measured of them
    before any follow-up."""
    side = json.loads(json.dumps(side))
    for r in side["results"]:
        c = r.get("compile") or {}
        if r["model"] not in cut:
            continue
        c["cold_samples_s"] = c["cold_samples_s"][:first]
        c["cold_cpu_samples_s"] = (c.get("cold_cpu_samples_s") or [])[:first]
        c["cold_s"] = statistics.median(c["cold_samples_s"])
    return side


def _cuttable(run: dict, first: int) -> set[str]:
    """The models whose cold compiles can be cut to the first ``first`` pairs: more than that
    on both sides, as many on each, and a CPU time for each wall time or none at all (a failed
    cold compile leaves no sample, so index i would no longer be pair i: such a model is judged
    on all)."""
    def counts(r: dict) -> tuple[int, int]:
        c = r.get("compile") or {}
        return len(c.get("cold_samples_s") or []), len(c.get("cold_cpu_samples_s") or [])

    base = {r["model"]: counts(r) for r in run["base"]["results"]}
    return {r["model"] for r in run["head"]["results"]
            if (n := counts(r))[0] > first and n[1] in (0, n[0]) and base.get(r["model"]) == n}


def as_pr(run: dict, out: Path, first: int) -> tuple[dict | None, list[str]]:
    """The comparison a ``pr`` with ``first`` cold compiles a side and its cold follow-up
    would have made of a run that took more (``--cold-processes 6 --extra-cold-processes
    0``): every model judged on its first ``first`` pairs, and a model whose cold verdict
    that leaves open near the threshold, or calls a change on
    (``cold_unsettled``, the rule the loop applies), judged again on all of them. The
    follow-up's pairs are needed whether or not the rule asks, so they are taken for every
    model and dropped where it does not: a change applied afterwards (``scaled_cold``) meets
    the rule as it would in a ``pr``. Also the models the rule gave the more. A run with no
    model past ``first`` pairs was not taken so: an error, not a silent re-judging."""
    cuttable = _cuttable(run, first)
    if not cuttable:
        raise SystemExit(f"no model has more than {first} cold compiles a side on both "
                         "sides: judging as a pr with its follow-up needs a run measured with "
                         "--cold-follow-up-check")
    cut = {s: _first_colds(run[s], first, cuttable) for s in ("base", "head")}
    judged = compare_run(cut, out / "first")
    if judged is None:
        return None, []
    more = sorted(r["model"] for r in judged["rows"] if r["model"] in cuttable
                  and r.get("cold_compile")
                  and cold_unsettled(Delta.model_validate(r["cold_compile"])) is not None)
    if not more:
        return judged, []
    kept = {s: _first_colds(run[s], first, cuttable - set(more)) for s in ("base", "head")}
    return compare_run(kept, out / "followed"), more


def _result(results: dict, model: str, side: str) -> dict | None:
    return next((r for r in results[side]["results"] if r["model"] == model), None)


def _latency(results: dict, model: str, side: str) -> Latency | None:
    r = _result(results, model, side)
    return Latency.model_validate(r["latency"]) if r and r.get("latency") else None


def _process_medians(results: dict, model: str, side: str) -> list[float]:
    lat = _latency(results, model, side)
    return [] if lat is None else [statistics.median(c) for _, c in lat.per_process() if c]


def _referenced_medians(results: dict, model: str, side: str) -> list[float]:
    """Per process that timed base's eager model beside its own: the median of compiled over
    that reference by round (the host's speed cancels)."""
    lat = _latency(results, model, side)
    return [] if lat is None else [statistics.median(g) for g in lat.referenced_per_process()]


def _colds(results: dict, model: str, side: str) -> list[float]:
    r = _result(results, model, side)
    return [] if r is None else r["compile"]["cold_samples_s"] or [r["compile"]["cold_s"] or 0.0]


def _cold_cpus(results: dict, model: str, side: str) -> list[float]:
    r = _result(results, model, side)
    return [] if r is None else r["compile"].get("cold_cpu_samples_s") or []


def _peaks(results: dict, model: str, side: str) -> list[float]:
    r = _result(results, model, side)
    mem = (r or {}).get("memory") or {}
    peak = mem.get("compiled_fwd_bwd_peak_bytes") or mem.get("compiled_peak_bytes")
    return [float(peak)] if peak else []


def truth(all_runs: list[dict], model: str, cold: bool, cpu: bool = False,
          referenced: bool = False, memory: bool = False) -> float | None:
    """The change's size from every repeat's processes pooled: geometric means of process
    medians (or cold compiles: wall, or with ``cpu`` CPU time; or, ``referenced``, compiled
    over base's eager model in the same rounds; or, ``memory``, the compiled peak, a training
    step's when its backward ended, one value a side and repeat), head over base."""
    pick = _peaks if memory else (_cold_cpus if cpu else _colds) if cold else (
        _referenced_medians if referenced else _process_medians)
    b = [x for run in all_runs for x in pick(run, model, "base") if x > 0]
    h = [x for run in all_runs for x in pick(run, model, "head") if x > 0]
    if not b or not h:
        return None
    return math.exp(statistics.fmean(map(math.log, h)) - statistics.fmean(map(math.log, b)))


def report(comparisons: list[dict], runs: list[dict], walls: list[float],
           cut: list[bool] | None = None, scaled: list[tuple[int, int, int]] | None = None,
           more: list[list[str]] | None = None) -> str:
    """The markdown report; ``more``: per repeat, the models a simulated cold follow-up
    (``--cold-follow-up-check``) judged on all their cold compiles."""
    lines = ["| model | change | true size (pooled) | verdicts per repeat |",
             "| --- | --- | --- | --- |"]
    flagged_aa, total_aa, found, total = 0, 0, 0, 0
    names = list(dict.fromkeys(r["model"] for c in comparisons for r in c["rows"]))
    for name in names:
        metric = METRIC.get(kind(name), "compiled_time")
        cold, memory = metric == "cold_compile", metric.endswith("memory")
        verdicts = []
        for c in comparisons:
            row = next((r for r in c["rows"] if r["model"] == name), None)
            if row is None:  # a repeat cut before this model finished
                verdicts.append("not measured")
                continue
            d = row.get(metric) or {}
            verdicts.append(f"{d.get('verdict') or row['verdict']} "
                            f"{(d.get('ratio') or 1) - 1:+.1%}")
            if kind(name) in CHANGED:
                total += 1
                found += d.get("verdict") == "regression"
            else:
                total_aa += 1
                flagged_aa += row["verdict"] in ("regression", "improvement")
        size = truth(runs, name, cold, memory=memory)
        shown = "" if size is None else f"{size - 1:+.1%}"
        cpu = truth(runs, name, cold, cpu=True) if cold else None
        if cpu is not None:  # cold compiles are judged on wall and CPU time together
            shown += f" wall, {cpu - 1:+.1%} CPU"
        ref = None if cold or memory else truth(runs, name, cold, referenced=True)
        if ref is not None:  # launch-bound models are judged over base's eager model
            shown += f" ({ref - 1:+.1%} over base's eager)"
        lines.append(f"| {name} | {CHANGED.get(kind(name), 'untouched (A/A)')} | {shown} | "
                     f"{'; '.join(verdicts)} |")
    lines += ["", f"A/A: {flagged_aa} of {total_aa} model-repeats flagged "
                  f"(regression or improvement); injected: {found} of {total} found.",
              ("pr wall time per repeat: " if walls else "stored repeats, judged again")
              + ", ".join(
                  f"{w:.0f} s" + (" (cut by --limit-s: judged from its checkpoints)"
                                  if cut and cut[i] else "") for i, w in enumerate(walls)) + "."]
    if scaled:
        lines.append(f"Cold compile x{COLD_FACTOR} on the untouched models' head samples "
                     f"(their own noise): found in {sum(f for f, _, _ in scaled)} of "
                     f"{sum(n for _, n, _ in scaled)} model-repeats ("
                     + ", ".join(f"{f}/{n}" for f, n, _ in scaled) + "); "
                     + (f"{sum(a for _, _, a in scaled)} of the misses were still open "
                        f"after the simulated follow-up (every open or called model judged "
                        f"on {ALL_COLD} pairs)."
                        if more is not None else
                        f"{sum(a for _, _, a in scaled)} of the misses were left open near "
                        "the threshold, so a pr would have given them more cold compiles."))
    for i, run in enumerate(runs, 1):
        fork = (run["base"].get("settings") or {}).get("isolation", "fork") == "fork"
        host = run["base"].get("host") or {}
        preflight = (f"host preflight {host.get('detail')}"
                     f"{' (noisy)' if host.get('noisy') else ''}; " if host else "")
        ready = " with --ready-compile-workers" if (run["base"].get("settings") or {}).get(
            "ready_compile_workers") else ""
        lines.append(f"Repeat {i}{ready}: {preflight}"
                     f"{budget([run['base'], run['head']], fork).line()}; "
                     f"{cold_spread(run)}; {cold_pairs(run)}; {follow_ups(run)}"
                     + (f"; judged as a pr with {FIRST_COLD} cold compiles a side: the "
                        f"follow-up took all {ALL_COLD} for "
                        f"{', '.join(more[i - 1]) or 'none'}" if more else "") + ".")
    return "\n".join(lines)


def follow_ups(run: dict) -> str:
    """Which models the loop gave more timing processes or more cold compiles (their notes
    say so, ``bot/judge/followup.py``): how often a first verdict was left unsettled."""
    got: dict[str, list[str]] = {"timing processes": [], "cold compiles": []}
    for r in run["head"]["results"]:
        for what, models in got.items():
            if any(f"more {what} a side" in n for n in r.get("notes") or []):
                models.append(r["model"])
    return "follow-ups: " + "; ".join(
        f"more {what} for {', '.join(models) if models else 'none'}"
        for what, models in got.items())


def cold_spread(run: dict) -> str:
    """How much one side's cold compiles of one model disagree (the standard deviation of the
    log of each compile, median and largest over models and sides): the noise a cold-compile
    verdict meets, which benchmarks/cold_power.py turns into a detection rate."""
    sds = [statistics.stdev(map(math.log, xs)) for side in ("base", "head")
           for r in run[side]["results"]
           if len(xs := [x for x in _colds(run, r["model"], side) if x > 0]) >= 2]
    if not sds:
        return "cold compiles within a side: fewer than two a model"
    return (f"cold compiles within a side: median sd {statistics.median(sds):.1%}, "
            f"largest {max(sds):.1%} ({len(sds)} model-sides)")


def cold_pairs(run: dict) -> str:
    """Where an untouched model's cold-compile noise sits: between its pairs (each pair's log
    ratio head/base scattered about their mean: what the paired interval sees) or in a shift
    of one whole side against the other over all its pairs (the mean itself, which for the
    same code should be near zero). With n pairs and pure pair noise of sd s the median
    shift is about 0.67 s / sqrt(n) (0.39 s for three, 0.28 s for six); a larger one is a
    side effect the interval does not see."""
    shifts, spreads, expected = [], [], []
    for r in run["base"]["results"]:
        model = r["model"]
        b, h = _colds(run, model, "base"), _colds(run, model, "head")
        if kind(model) in CHANGED or len(b) < 2 or len(b) != len(h) or min(b + h) <= 0:
            continue
        logs = [math.log(y / x) for x, y in zip(b, h, strict=True)]
        shifts.append(abs(statistics.fmean(logs)))
        spreads.append(statistics.stdev(logs))
        expected.append(0.6745 * spreads[-1] / math.sqrt(len(logs)))
    if not shifts:
        return "cold pairs: none of an untouched model"
    return (f"cold pairs of untouched models: side shift {statistics.median(shifts):.1%} "
            f"(median |mean log ratio|), pair spread {statistics.median(spreads):.1%} "
            f"(median sd), pair noise alone would shift {statistics.median(expected):.1%}, "
            f"{len(shifts)} models")


def rejudge(dirs: list[Path], first: int | None = None) -> None:
    """The report of stored repeats, judged again by the current code (with ``first``, as a
    ``pr`` with that many cold compiles a side and its follow-up: ``as_pr``)."""
    comparisons, runs, scaled, more = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="verdict-quality-judge-") as tmp:
        for i, d in enumerate(dirs):
            if not all((d / f"{s}.json").is_file() for s in ("base", "head")):
                print(f"{d}: no base.json and head.json (a repeat cut before its first "
                      "model, or not kept); skipped", file=sys.stderr)
                continue
            run = {s: json.loads((d / f"{s}.json").read_text()) for s in ("base", "head")}
            out = Path(tmp) / f"repeat-{i + 1}"
            out.mkdir()
            judged, followed = (compare(d, out), []) if first is None else \
                as_pr(run, out, first)
            if judged is None:
                raise SystemExit(f"{d}: compare failed (its message is above)")
            comparisons.append(judged)
            runs.append(run)
            more.append(followed)
            scaled.append(scaled_cold(run, out / "cold-scaled", COLD_FACTOR, first))
    if not runs:
        raise SystemExit("nothing to judge: no folder held base.json and head.json")
    print(report(comparisons, runs, [], None, scaled, more if first else None))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--suite", action="append", default=None,
                    help="Untouched suites (default: micro, hf).")
    ap.add_argument("--out", type=Path, default=None, help="Keep each repeat's output here.")
    ap.add_argument("--aa-only", action="store_true",
                    help="The untouched suites alone (no injected models): A/A repeats only.")
    ap.add_argument("--training", action="store_true",
                    help="The training step (pr --task training): the untouched suites' "
                         "training configs and the training injections (a backward-only "
                         "+5%%, more saved activations for peak memory).")
    ap.add_argument("--copies", type=int, default=1,
                    help="With --training: the backward-only change this many times, each "
                         "copy a model of its own (its own processes and verdict): more "
                         "samples of its detection rate a pr; pick them with "
                         "-- --model 'backward_heavy*'.")
    ap.add_argument("--limit-s", type=float, default=None,
                    help="Seconds for all repeats together, stopping and judging included: a "
                         "pr still running 40 s before it is stopped and judged from the "
                         "models it finished; no repeat starts with under 2 minutes left.")
    ap.add_argument("--alternate", action="append", default=[], metavar="ARG",
                    help="A `pr` argument for every second repeat only (repeats 2, 4, ...): "
                         "an A/B of a measuring flag in one run, e.g. "
                         "--alternate=--ready-compile-workers.")
    ap.add_argument("--judge", type=Path, action="append", default=None, metavar="DIR",
                    help="Judge stored repeats again (a repeat's folder with base.json and "
                         "head.json, as --out keeps them) with the current verdict logic; "
                         "nothing is measured.")
    ap.add_argument("--cold-follow-up-check", action="store_true",
                    help="Take 6 cold compiles a side of every model (--cold-processes 6 "
                         "--extra-cold-processes 0) and judge as a pr with 3 and its "
                         "follow-up would: the scaled cold check then counts what the "
                         "follow-up settles. With --judge: judge stored 6-pair runs so.")
    ap.add_argument("extra", nargs="*", help="More `compilewatch pr` arguments (after --).")
    args = ap.parse_args()
    if args.copies < 1 or (args.copies > 1 and (not args.training or args.aa_only)):
        ap.error("--copies is 1 or more, and more than 1 copies the training step's injected "
                 "backward change: it needs --training without --aa-only")
    first = FIRST_COLD if args.cold_follow_up_check else None
    if args.judge:
        rejudge(args.judge, first)
        return
    suites = args.suite or ["micro", "hf"]
    end = None if args.limit_s is None else time.monotonic() + args.limit_s
    with tempfile.TemporaryDirectory(prefix="verdict-quality-") as tmp:
        repo = make_inject_repo(Path(tmp), suites, inject=not args.aa_only,
                                training=args.training, copies=args.copies)
        # one task a run: the report keys its rows by model name (a GPU pr measures both by
        # default)
        args.extra = [*args.extra, "--task", "training" if args.training else "inference"]
        out_root = args.out or Path(tmp) / "out"
        comparisons, runs, walls, cuts = [], [], [], []
        scaled: list[tuple[int, int, int]] = []
        more: list[list[str]] = []
        if first is not None:
            args.extra = [*args.extra, "--cold-processes", str(ALL_COLD),
                          "--extra-cold-processes", "0"]
        for i in range(args.repeats):
            # stopping takes up to STOP_GRACE_S and judging the checkpoints a few seconds
            left = None if end is None else end - time.monotonic() - STOP_GRACE_S - 10
            if left is not None and left < MIN_REPEAT_S:
                break
            out = out_root / f"repeat-{i + 1}"
            extra = [*args.extra, *(args.alternate if i % 2 else [])]
            done = run_pr(repo, out, args.device, extra, left)
            if done is None:
                break
            comparison, took, cut = done
            runs.append({s: json.loads((out / f"{s}.json").read_text())
                         for s in ("base", "head")})
            if first is not None:
                comparison, followed = as_pr(runs[-1], out / "as-pr", first)
                if comparison is None:
                    raise SystemExit("the run could not be judged as a pr (compare's message "
                                     "is above)")
                more.append(followed)
            comparisons.append(comparison)
            cuts.append(cut)
            walls.append(took)
            scaled.append(scaled_cold(runs[-1], out / "cold-scaled", COLD_FACTOR, first))
            print(f"repeat {i + 1}: {took:.0f} s", file=sys.stderr, flush=True)
            # the report so far after every repeat: a run stopped by a time limit keeps them
            print(f"## after {i + 1} of {args.repeats} repeats\n\n"
                  f"{report(comparisons, runs, walls, cuts, scaled, more if first else None)}"
                  "\n",
                  flush=True)


if __name__ == "__main__":
    main()
