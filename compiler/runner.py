"""The parent side: one worker process per (model, config, phase), timeouts, crash isolation.

Cold compile: a fresh process on an empty Inductor cache dir. Warm compile: a new process on
the same dir. Both also time steady state, so each side of a comparison has samples from two
processes. A worker that raises, aborts, hangs or is OOM-killed becomes a recorded status and
the run goes on with the next model.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compilewatch.compiler import timing
from compilewatch.compiler.errors import CompilewatchError
from compilewatch.compiler.schema import (
    STATUS_OF,
    Category,
    Config,
    ModelResult,
)
from compilewatch.suites.loader import Suite
from compilewatch.suites.registry import ModelSpec

POLL_S = 0.1
LOG_TAIL = 4000

PhaseCallback = Callable[[str], None]


@dataclass(frozen=True)
class RunOptions:
    """How to measure; one object handed down instead of loose flags."""

    rounds: int = 30
    block_ms: float = 20.0
    timeout_s: float = 900.0
    warm: bool = True
    measure: bool = True
    cache_root: Path | None = None  # reuse (not cold) when set
    python: str = sys.executable
    large: bool | None = None  # default: large sizes on cuda
    extra_env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Job:
    suite: Suite
    spec: ModelSpec
    config: Config


@dataclass
class Outcome:
    ok: bool
    data: dict[str, Any]
    category: str | None = None
    error: str | None = None
    seconds: float = 0.0


def _tail(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").replace("\x00", "")
    except OSError:
        return ""
    return text if len(text) <= LOG_TAIL else "..." + text[-LOG_TAIL:]


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the worker's whole process group (Inductor spawns compile workers)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def spawn_worker(spec: dict[str, Any], env: dict[str, str], opts: RunOptions, workdir: Path,
                 on_phase: PhaseCallback) -> Outcome:
    """Run one worker to completion, timeout or death; never raises for the worker's sake."""
    name = f"{spec['model']}-{spec['phase']}"
    spec = {**spec, "out": str(workdir / f"{name}.out.json"),
            "status_file": str(workdir / f"{name}.status")}
    spec_path, log_path = workdir / f"{name}.spec.json", workdir / f"{name}.log"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    start = time.monotonic()
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(
                [opts.python, "-m", "compilewatch.compiler.worker", str(spec_path)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True)
        except OSError as e:
            return Outcome(False, {}, "infra", f"cannot start worker {opts.python}: {e}")
        last = ""
        while proc.poll() is None:
            if time.monotonic() - start > opts.timeout_s:
                _kill(proc)
                return Outcome(False, {}, "timeout",
                               f"no result after {opts.timeout_s:g} s (last phase: "
                               f"{last or 'start'}); killed\n{_tail(log_path)}",
                               time.monotonic() - start)
            try:
                phase = Path(spec["status_file"]).read_text(encoding="utf-8")
            except OSError:
                phase = ""
            if phase and phase != last:
                last = phase
                on_phase(phase)
            time.sleep(POLL_S)
    seconds = time.monotonic() - start
    out = Path(spec["out"])
    if out.is_file():
        try:
            data = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            return Outcome(False, {}, "infra", f"unreadable worker output: {e}", seconds)
        if data.get("ok"):
            return Outcome(True, data, seconds=seconds)
        return Outcome(False, data, data.get("category", "infra"), data.get("error"), seconds)
    code = proc.returncode
    how = (f"killed by {_signal_name(code)}" + (" (possibly out of memory)" if code == -9 else "")
           if code < 0 else f"exited with status {code}")
    return Outcome(False, {}, "crash", f"worker {how} without a result in phase "
                   f"{last or 'start'}\n{_tail(log_path)}", seconds)


def worker_env(cache_dir: Path, opts: RunOptions) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "TORCHINDUCTOR_CACHE_DIR": str(cache_dir),
        "TRITON_CACHE_DIR": str(cache_dir / "triton"),
        "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
        "TORCHINDUCTOR_AUTOGRAD_CACHE": "1",
        "PYTHONUNBUFFERED": "1",
    })
    env.update(opts.extra_env)
    return env


def _precheck(job: Job, opts: RunOptions) -> tuple[Category, str] | None:
    """Skips we can decide without a process: wrong device, missing packages."""
    if job.config.device not in job.spec.devices:
        return Category.UNSUPPORTED, f"skipped: {job.spec.name} does not run on " \
                                     f"{job.config.device}"
    if opts.python == sys.executable:
        missing = [p for p in job.spec.requires if importlib.util.find_spec(p) is None]
        if missing:
            return Category.PACKAGE_MISSING, f"skipped: package not installed: " \
                                             f"{', '.join(missing)}"
    return None


def run_job(job: Job, opts: RunOptions, on_phase: PhaseCallback = lambda _: None) -> ModelResult:
    """Measure one (model, config): cold process, then warm process on the same cache dir."""
    base = {"model": job.spec.name, "suite": job.suite.name, "config": job.config,
            "tags": list(job.spec.tags)}
    skip = _precheck(job, opts)
    if skip:
        return ModelResult(**base, status=STATUS_OF[skip[0]], category=skip[0], error=skip[1])
    with tempfile.TemporaryDirectory(prefix="compilewatch-") as tmp:
        workdir = Path(tmp)
        if opts.cache_root is not None:
            cache_dir = opts.cache_root / f"{job.suite.name}-{job.spec.name}-{job.config.slug}"
        else:
            cache_dir = workdir / "inductor-cache"
        was_empty = not cache_dir.exists() or not any(cache_dir.iterdir())
        cache_dir.mkdir(parents=True, exist_ok=True)
        env = worker_env(cache_dir, opts)
        spec = {"suite": job.suite.source, "model": job.spec.name,
                "config": job.config.model_dump(), "rounds": opts.rounds,
                "block_ms": opts.block_ms, "measure": opts.measure,
                "large": opts.large if opts.large is not None else job.config.device == "cuda"}
        cold = spawn_worker({**spec, "phase": "cold"}, env, opts, workdir, on_phase)
        warm = None
        if cold.ok and opts.warm:
            warm = spawn_worker({**spec, "phase": "warm"}, env, opts, workdir, on_phase)
    return assemble(base, cold, warm, was_empty)


def _latency(outcomes: list[Outcome]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    lats = [o.data["latency"] for o in outcomes if o.ok and o.data.get("latency")]
    if not lats:
        return None, None
    eager = [x for lat in lats for x in lat["eager_us"]]
    compiled = [x for lat in lats for x in lat["compiled_us"]]
    stats = timing.summarize(eager, compiled)
    latency = {**lats[0], "eager_us": eager, "compiled_us": compiled, "processes": len(lats),
               "eager_median_us": stats["eager_median_us"],
               "compiled_median_us": stats["compiled_median_us"],
               "compiled_ci_us": stats["compiled_ci_us"]}
    return latency, stats["speedup"]


def _status_of(cold: Outcome, warm: Outcome | None) -> tuple[Category, str | None]:
    if not cold.ok:
        return Category(cold.category or "infra"), cold.error
    if warm is not None and not warm.ok:
        return Category(warm.category or "infra"), f"warm compile: {warm.error}"
    acc = cold.data.get("accuracy")
    if acc and acc.get("passed") is False:
        if acc.get("eager_deterministic") is False:
            return Category.EAGER_NONDETERMINISTIC, "eager is not deterministic on these " \
                                                    "inputs; accuracy not judged"
        return Category.ACCURACY, (f"compiled output differs from eager: max abs err "
                                   f"{acc.get('max_abs_err')} (atol {acc['atol']}, "
                                   f"rtol {acc['rtol']})")
    return Category.OK, None


def assemble(base: dict[str, Any], cold: Outcome, warm: Outcome | None,
             cache_dir_was_empty: bool) -> ModelResult:
    """Merge the cold and warm workers' outputs into one schema-valid result."""
    category, error = _status_of(cold, warm)
    result: dict[str, Any] = {**base, "status": STATUS_OF[category], "category": category,
                              "error": error,
                              "duration_s": cold.seconds + (warm.seconds if warm else 0.0)}
    if not cold.ok:
        return ModelResult(**result)
    c = cold.data
    w = warm.data if warm is not None and warm.ok else {}
    latency, speedup = _latency([o for o in (cold, warm) if o is not None])
    counters = {"cold": _counters(c)} | ({"warm": _counters(w)} if w else {})
    result.update(
        latency=latency, speedup=speedup,
        compile={"cold_s": c.get("compile_s"), "warm_s": w.get("compile_s"),
                 "phases": c.get("phases", {}), "warm_phases": w.get("phases", {}),
                 "frames": c.get("frames", 0), "graphs": c.get("graphs", 0),
                 "guard_count": c.get("guard_count"),
                 "cold_instructions": c.get("instructions"),
                 "cache_dir_was_empty": cache_dir_was_empty},
        graph_breaks=c.get("graph_breaks", []), recompiles=c.get("recompiles", []),
        cache={"fx": c["cache"]["fx"] + w.get("cache", {}).get("fx", []),
               "aot": c["cache"]["aot"] + w.get("cache", {}).get("aot", []),
               "counters": counters, "unknown_reason": c.get("cache_unknown")},
        accuracy=c.get("accuracy"), memory=c.get("memory", {}),
    )
    try:
        return ModelResult.model_validate(result)
    except ValueError as e:  # the worker wrote something the schema refuses: a harness bug
        raise CompilewatchError(f"{base['model']}: worker output does not fit the results "
                                f"schema: {e}") from e


def _counters(data: dict[str, Any]) -> dict[str, int]:
    return dict(data.get("counters", {}))
