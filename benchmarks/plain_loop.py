"""An independent check of compilewatch's step time and peak memory: a plain training (or
inference) loop of a suite's model, timed without the harness, in processes of its own, for
both sides of a commit pair, printed beside what the bot measured for the same pair.
Numbers in docs/verdict-quality.md ("Training against a plain loop").

    python benchmarks/plain_loop.py --repo R --base main --head manual --model gpt \\
        --task training --device cuda --processes 2 --bot OUT/comparison.json
    python benchmarks/plain_loop.py --suite micro --suite hf --model all --task training \\
        --device cuda --processes 1 --condition pinned --bot-run results.json

The second form times a built-in suite's models (every one with the task, for ``all``) from the
installed package, one side, beside ``compilewatch run --json``'s results for the same models.

Each process builds the model from the side's own checkout (its suite file, from
``[tool.compilewatch] suites`` or ``--suite``), compiles it with ``torch.compile``, runs ten
steps, then times blocks of ``--steps`` back-to-back steps with CUDA events (perf_counter on a
CPU), as a user times a training loop: no interleaved eager, no reference, no trace capture,
no memory watch, no pinning. A training step is what compilewatch's is (zero_grad, forward
under bf16 autocast on cuda, the model's loss, backward, Adam with ``foreach`` and
``capturable``), with the same dropout-free train mode; the loop, the timing and the memory
reading are this file's own. Peak memory is ``max_memory_allocated`` over one step in a process
that holds nothing else: weights, gradients, the optimizer's state, activations and inputs.

``--condition`` runs the loop under one of the harness's conditions instead, to find which of
them moves the step (``one-step-blocks``: one step per block, synchronised, as the bot's
20 ms blocks give for a step over 13 ms; ``interleaved``: an eager step's block between the
compiled ones, as the bot times; ``pinned``: every thread on one core; ``loaded``: every other
core busy; ``gc-off``: the collector off, as the bot times; ``syncs``: no timing, but how often
one compiled step makes the host wait for the device, from torch's sync debug mode).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
import warnings
from pathlib import Path
from typing import Any

CONDITIONS = ("plain", "one-step-blocks", "interleaved", "pinned", "loaded", "gc-off", "syncs")
WARM = "warm"  # a child that only compiles into the shared cache (--warm-first); times nothing
WARMUP_STEPS = 10


# --- the child: one process, one side ----------------------------------------------------------

def _builtin(suite: str) -> bool:
    return "/" not in suite and not suite.endswith(".py")


def _suite_models(checkout: Path, suite: str) -> dict[str, Any]:
    """The specs of a built-in suite (``micro``, ``hf``) or of the side's own suite file."""
    if _builtin(suite):
        import importlib

        importlib.import_module(f"compilewatch.suites.{suite}")
        from compilewatch.suites.registry import models_of

        return models_of(f"compilewatch.suites.{suite}")
    return _suite_file_models(checkout, suite)


def _suite_model(checkout: Path, suite: str, name: str) -> Any:
    return _suite_models(checkout, suite)[name]


def _suite_file_models(checkout: Path, suite: str) -> dict[str, Any]:
    """The models of the side's own suite file, its checkout first on sys.path."""
    import importlib.util

    sys.path[:0] = [str(checkout), str(checkout / "src")]
    path = (checkout / suite).resolve()
    spec = importlib.util.spec_from_file_location(f"plain_loop_suite_{path.stem}", path)
    assert spec is not None and spec.loader is not None, f"cannot import {path}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(module)
    from compilewatch.suites.registry import models_of

    return models_of(spec.name)


def _to(obj: Any, device: str) -> Any:
    import torch

    if isinstance(obj, (torch.Tensor, torch.nn.Module)):
        return obj.to(device)
    if isinstance(obj, (tuple, list)):
        return type(obj)(_to(x, device) for x in obj)
    return obj


def _step_fn(spec: Any, net: Any, inputs: tuple[Any, ...], task: str, device: str) -> Any:
    """One call: a training step (the bot's definition of one), or a forward without grad."""
    import torch

    from compilewatch.compiler.training import default_loss

    if task == "inference":
        def infer() -> Any:
            with torch.no_grad():
                return net(*inputs)
        return infer
    params = [p for p in net.parameters() if p.requires_grad]
    opt = (torch.optim.SGD(params, lr=1e-2, foreach=True) if spec.optimizer == "sgd" else
           torch.optim.Adam(params, lr=1e-3, foreach=True, capturable=device == "cuda"))
    loss_fn = spec.loss or default_loss

    def train() -> Any:
        opt.zero_grad(set_to_none=True)
        with (torch.autocast(device_type=device, dtype=torch.bfloat16) if device == "cuda"
              else contextlib.nullcontext()):
            out = net(*inputs)
            loss = loss_fn(out, inputs)
        loss.backward()
        opt.step()
        return loss
    return train


def _built(args: argparse.Namespace, compiled: bool) -> Any:
    import copy

    import torch

    from compilewatch.compiler.training import train_mode
    from compilewatch.suites.registry import BuildContext

    spec = _suite_model(Path(args.checkout), args.suite, args.model)
    torch.manual_seed(0)
    net, inputs = spec.build(BuildContext(device=args.device, dtype="float32",
                                          large=args.device == "cuda", task=args.task))
    net = copy.deepcopy(net).to(args.device)
    if args.task == "training":
        train_mode(net)
    else:
        net.eval()
    inputs = _to(tuple(inputs), args.device)
    if compiled:
        kwargs = dict(spec.compile_kwargs)
        mode = spec.default_mode(args.device)
        if mode != "default":
            kwargs.setdefault("mode", mode)
        net = torch.compile(net, **kwargs)
    return _step_fn(spec, net, inputs, args.task, args.device)


def _block(fn: Any, k: int, device: str) -> tuple[float, float]:
    """k back-to-back calls: (device seconds, host seconds spent launching them)."""
    import torch

    if device != "cuda":
        t0 = time.perf_counter()
        for _ in range(k):
            fn()
        took = time.perf_counter() - t0
        return took, took
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    for _ in range(k):
        fn()
    end.record()
    host = time.perf_counter() - t0
    end.synchronize()
    return start.elapsed_time(end) / 1e3, host


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def _syncs(step: Any) -> int:
    """How many times one step made the host wait for the device (torch's sync debug mode
    warns once per synchronising call)."""
    import torch

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message).lower() for w in caught)


def child(args: argparse.Namespace) -> dict[str, Any]:
    import gc

    import torch

    cond = args.condition
    if cond == "pinned":
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError):
                os.sched_setaffinity(int(tid), {max(os.sched_getaffinity(0))})
    step = _built(args, compiled=True)
    eager = _built(args, compiled=False) if cond == "interleaved" else None
    for _ in range(WARMUP_STEPS):
        step()
        if eager is not None:
            eager()
    if args.device == "cuda":
        torch.cuda.synchronize()
    if cond == WARM:
        return {}
    if cond == "syncs":
        return {"syncs_per_step": _syncs(step) if args.device == "cuda" else None}
    load = []
    if cond == "loaded":
        cores = sorted(os.sched_getaffinity(0))
        ctx = multiprocessing.get_context("spawn")
        load = [ctx.Process(target=_spin, args=(120.0,), daemon=True) for _ in cores[1:]]
        for p in load:
            p.start()
    if cond == "gc-off":
        gc.disable()
    k = 1 if cond in ("one-step-blocks", "interleaved") else args.steps
    device_s, host_s = [], []
    try:
        for _ in range(args.blocks):
            if eager is not None:
                _block(eager, k, args.device)
            took, host = _block(step, k, args.device)
            device_s.append(took / k)
            host_s.append(host / k)
    finally:
        gc.enable()
        for p in load:
            p.kill()
    peak = None
    if args.device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        peak = int(torch.cuda.max_memory_allocated())
    return {"step_ms": statistics.median(device_s) * 1e3,
            "mean_ms": statistics.fmean(device_s) * 1e3,
            "host_ms": statistics.median(host_s) * 1e3,
            "host_fraction": statistics.median(
                h / d for h, d in zip(host_s, device_s, strict=True)),
            "peak_bytes": peak}


# --- the parent: worktrees, processes, the table -----------------------------------------------

def _suite_of(checkout: Path) -> str:
    data = tomllib.loads((checkout / "pyproject.toml").read_text())
    suites = [s for s in data["tool"]["compilewatch"]["suites"] if s.endswith(".py")]
    if not suites:
        raise SystemExit("no suite file in [tool.compilewatch] suites: pass --suite")
    return suites[0]


def _worktree(repo: Path, ref: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(where),
                    ref], check=True, capture_output=True)
    return where


def _work(args: argparse.Namespace, checkout: Path) -> list[tuple[str, str]]:
    """(suite, model) pairs to time: ``all`` names every model of a built-in suite that has
    the task."""
    suites = args.suite or [_suite_of(checkout)]
    out: list[tuple[str, str]] = []
    for suite in suites:
        if "all" in args.model:
            if not _builtin(suite):
                raise SystemExit(f"--model all needs a built-in suite, not {suite}")
            out += [(suite, name) for name, spec in _suite_models(checkout, suite).items()
                    if args.task in spec.tasks]
        else:
            out += [(suite, m) for m in args.model]
    return out


def _run_child(checkout: Path, args: argparse.Namespace, suite: str, model: str,
               condition: str) -> dict[str, Any]:
    cmd = [sys.executable, "-I", str(Path(__file__).resolve()), "--child",
           "--checkout", str(checkout), "--suite", suite,
           "--model", model, "--task", args.task, "--device", args.device,
           "--steps", str(args.steps), "--blocks", str(args.blocks), "--condition", condition]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHINDUCTOR_CACHE")}
    with tempfile.TemporaryDirectory(prefix="plain-loop-cache-") as cache:
        env["TORCHINDUCTOR_CACHE_DIR"] = args.cache_dir or cache
        done = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True,
                              timeout=args.timeout)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _config_task(row: dict[str, Any]) -> str:
    config = row.get("config")
    if isinstance(config, dict):
        return str(config.get("task", "inference"))
    return "training" if str(config or "").endswith("-training") else "inference"


def _bot(path: Path | None, model: str, task: str, key: str = "rows") -> dict[str, Any] | None:
    """The bot's entry for the model and task: a row of a comparison JSON (``pr``'s or
    ``compare``'s), or with ``key="results"`` a result of ``compilewatch run``'s results."""
    if path is None:
        return None
    for entry in json.loads(path.read_text()).get(key, []):
        if entry.get("model") == model and _config_task(entry) == task:
            return entry
    return None


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _pct(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or a == 0 else f"{(b / a - 1) * 100:+.1f}%"


def _warm(args: argparse.Namespace, checkout: Path, work: list[tuple[str, str]]) -> None:
    """Compile every model into the shared cache, ``--warm-first`` at a time, so the timed
    processes start warm (as the bot's timing processes do) and the cold compiles overlap."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(args.warm_first) as pool:
        list(pool.map(lambda sm: _run_child(checkout, args, sm[0], sm[1], WARM), work))


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Per model, both sides' processes, interleaved base/head, under each condition asked.
    Without ``--repo``, one side: the installed package's built-in suites, from here."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="plain-loop-") as tmp:
        if args.repo is None:
            sides = {"base": Path.cwd()}
        else:
            sides = {"base": _worktree(args.repo, args.base, Path(tmp) / "base")}
            if args.head:
                sides["head"] = _worktree(args.repo, args.head, Path(tmp) / "head")
        try:
            work = _work(args, sides["base"])
            if args.warm_first:
                for checkout in sides.values():
                    _warm(args, checkout, work)
            for suite, model in work:
                per: dict[str, Any] = {}
                for condition in args.condition:
                    got: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
                    for i in range(args.processes):
                        order = list(sides) if i % 2 == 0 else list(sides)[::-1]
                        for side in order:
                            got[side].append(_run_child(sides[side], args, suite, model,
                                                        condition))
                    per[condition] = got
                out[model] = per
                if args.json:  # each model as it is done: a cut run keeps what it measured
                    args.json.write_text(json.dumps(out, indent=1))
        finally:
            if args.repo is not None:
                for where in sides.values():
                    subprocess.run(["git", "-C", str(args.repo), "worktree", "remove",
                                    "--force", str(where)], capture_output=True)
    return out


def table(measured: dict[str, Any], bot: dict[str, Any] | None) -> str:
    """One model's processes under each condition, and the bot's row of the pair beside."""
    lines = ["| condition | side | step ms (per process) | host ms | host fraction | peak MB |",
             "| --- | --- | --- | --- | --- | --- |"]
    for condition, sides in measured.items():
        for side, procs in sides.items():
            ok = [p for p in procs if "error" not in p]
            if condition == "syncs":
                lines.append(f"| {condition} | {side} | syncs a step: "
                             f"{', '.join(str(p['syncs_per_step']) for p in ok)} | | | |")
                continue
            steps = ", ".join(f"{p['step_ms']:.2f}" for p in ok)
            hosts = ", ".join(f"{p['host_ms']:.2f}" for p in ok)
            fracs = ", ".join(f"{p['host_fraction']:.2f}" for p in ok)
            peaks = ", ".join(f"{p['peak_bytes'] / 1e6:.0f}" for p in ok if p["peak_bytes"])
            errors = "; ".join(" ".join(p["error"]) for p in procs if "error" in p)
            lines.append(f"| {condition} | {side} | {steps}{' ' + errors if errors else ''} | "
                         f"{hosts} | {fracs} | {peaks} |")
        plain = {s: [p for p in procs if "error" not in p and "step_ms" in p]
                 for s, procs in sides.items()}
        if len(plain) == 2 and all(plain.values()):
            b = _median([p["step_ms"] for p in plain["base"]])
            h = _median([p["step_ms"] for p in plain["head"]])
            pb = _median([p["peak_bytes"] for p in plain["base"] if p["peak_bytes"]])
            ph = _median([p["peak_bytes"] for p in plain["head"] if p["peak_bytes"]])
            lines.append(f"| {condition} | change | {_pct(b, h)} | | | {_pct(pb, ph)} |")
    if bot is not None:
        ct, mem = bot.get("compiled_time") or {}, bot.get("memory") or {}
        lines += ["", "| compilewatch | base | head | change | verdict |",
                  "| --- | --- | --- | --- | --- |",
                  f"| compiled step, ms | {_ms(ct.get('base'))} | {_ms(ct.get('head'))} | "
                  f"{_pct(ct.get('base'), ct.get('head'))} | {ct.get('verdict')} |",
                  f"| peak, MB | {_mb(mem.get('base'))} | {_mb(mem.get('head'))} | "
                  f"{_pct(mem.get('base'), mem.get('head'))} | {mem.get('verdict')} |",
                  f"| host-bound | {bot.get('launch_bound')} | | | {bot.get('verdict')} |"]
    return "\n".join(lines)


def beside_run(measured: dict[str, Any], results: Path, task: str) -> str:
    """Per model, the plain loop's base step and peak (median over its processes, each
    condition) beside what ``compilewatch run`` measured for the same model and task."""
    lines = ["| model | condition | plain step ms | compilewatch step ms | compilewatch vs plain "
             "| plain peak MB | compilewatch peak MB | compilewatch vs plain |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for model, per in measured.items():
        result = _bot(results, model, task, key="results") or {}
        latency = result.get("latency") or {}
        bot_ms = latency.get("compiled_median_us")
        bot_ms = None if bot_ms is None else bot_ms / 1e3
        bot_peak = (result.get("memory") or {}).get("compiled_peak_bytes")
        for condition, sides in per.items():
            ok = [p for p in sides.get("base", []) if "error" not in p and "step_ms" in p]
            step = _median([p["step_ms"] for p in ok])
            peak = _median([p["peak_bytes"] for p in ok if p["peak_bytes"]])
            if not ok:
                errors = "; ".join(" ".join(p.get("error", [])) for p in sides.get("base", []))
                lines.append(f"| {model} | {condition} | failed: {errors} | | | | | |")
                continue
            lines.append(
                f"| {model} | {condition} | {step:.2f} | "
                f"{'-' if bot_ms is None else f'{bot_ms:.2f}'} | {_pct(step, bot_ms)} | "
                f"{_mb(peak)} | {_mb(bot_peak)} | {_pct(peak, bot_peak)} |")
    return "\n".join(lines)


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1e3:.2f}"


def _mb(b: float | None) -> str:
    return "-" if b is None else f"{b / 1e6:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--checkout", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--repo", type=Path, help="the model repository (a git checkout)")
    parser.add_argument("--base", default="main")
    parser.add_argument("--head", help="the other side; without it, base alone")
    parser.add_argument("--suite", action="append",
                        help="repeatable: a built-in suite (micro, hf; one side, from the "
                        "installed package) or a suite file relative to the checkout (default: "
                        "the first file in [tool.compilewatch] suites)")
    parser.add_argument("--model", action="append", required=True,
                        help="repeatable; all: every model of a built-in suite with the task")
    parser.add_argument("--task", choices=("training", "inference"), default="training")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--processes", type=int, default=2, help="processes a side")
    parser.add_argument("--steps", type=int, default=3, help="back-to-back steps a block")
    parser.add_argument("--blocks", type=int, default=30)
    parser.add_argument("--condition", action="append", choices=(*CONDITIONS, WARM),
                        help="repeatable; default: plain")
    parser.add_argument("--cache-dir", help="one Inductor cache for every process "
                        "(default: an empty one each)")
    parser.add_argument("--warm-first", type=int, default=0, metavar="N",
                        help="first compile every model into --cache-dir, N at a time")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--bot", type=Path, help="compilewatch's comparison JSON for the pair")
    parser.add_argument("--bot-run", type=Path,
                        help="compilewatch run's results JSON for the same models (one side)")
    parser.add_argument("--json", type=Path, help="also write what was measured here")
    args = parser.parse_args()
    if args.child:
        args.condition = args.condition[0] if args.condition else "plain"
        args.suite, args.model = args.suite[0], args.model[0]
        print(json.dumps(child(args)))
        return
    if args.repo is None and not (args.suite and all(_builtin(s) for s in args.suite)):
        parser.error("--repo is required unless every --suite is a built-in one")
    if args.repo is None and args.head:
        parser.error("--head needs --repo")
    if WARM in (args.condition or []):
        parser.error(f"--condition {WARM} is --warm-first's own: it times nothing")
    if args.warm_first and not args.cache_dir:
        parser.error("--warm-first needs --cache-dir")
    for flag, path in (("--bot", args.bot), ("--bot-run", args.bot_run)):
        if path is not None and not path.is_file():  # before minutes of measuring
            parser.error(f"{flag} {path}: no such file")
    args.condition = args.condition or ["plain"]
    measured = measure(args)
    for model, per in measured.items():
        print(f"## {model}\n")
        print(table(per, _bot(args.bot, model, args.task)))
        print()
    if args.bot_run:
        print(beside_run(measured, args.bot_run, args.task))


if __name__ == "__main__":
    main()
