"""The parent side: one worker process per (model, config, phase), timeouts, crash isolation.

Cold compile: a fresh process on an empty Inductor cache dir. Warm compile: a new process on
the same dir. Both also time steady state, so each side of a comparison has samples from two
processes. A worker that raises, aborts, hangs or is OOM-killed becomes a recorded status and
the run goes on with the next model.
"""

from __future__ import annotations

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

from compilewatch.compiler import artifacts, timing
from compilewatch.compiler.plan import Job
from compilewatch.compiler.worker import tail
from compilewatch.core.errors import CacheArtifactError, CompilewatchError
from compilewatch.core.schema import (
    STATUS_OF,
    Category,
    ModelResult,
)

POLL_S = 0.1

PhaseCallback = Callable[[str], None]


@dataclass(frozen=True)
class WarmCache:
    """Where to look for published cache artifacts, and the environment they must match."""

    root: Path
    fingerprint: str
    torch_version: str
    trusted_keys: tuple[str, ...] = ()  # public keys whose signed manifests may be loaded


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
    extra_env: dict[str, str] = field(default_factory=dict)
    artifact_dir: Path | None = None  # save each cold compile's cache artifact here, verify it
    warm_cache: WarmCache | None = None  # load a published artifact for a warm-start compile


@dataclass
class Outcome:
    ok: bool
    data: dict[str, Any]
    category: str | None = None
    error: str | None = None
    seconds: float = 0.0


def _tail(path: Path) -> str:
    """The end of a worker's log, cut and cleaned like the worker's own error tails."""
    try:
        return tail(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return ""


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
        timed_out = False
        try:
            while proc.poll() is None:
                if time.monotonic() - start > opts.timeout_s:
                    timed_out = True
                    break
                try:
                    phase = Path(spec["status_file"]).read_text(encoding="utf-8")
                except OSError:
                    phase = ""
                if phase and phase != last:
                    last = phase
                    on_phase(phase)
                time.sleep(POLL_S)
        finally:
            # Always, also after a normal exit and when we are interrupted (Ctrl-C, a cancelled
            # CI job): the worker and the compile workers it left must not outlive us, or they
            # hold the GPU and skew the next job's timings.
            _kill(proc)
    seconds = time.monotonic() - start
    out = Path(spec["out"])
    if out.is_file():  # a worker that wrote its result and then hung at exit still counts
        try:
            data = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            return Outcome(False, {}, "infra", f"unreadable worker output: {e}", seconds)
        if data.get("ok"):
            return Outcome(True, data, seconds=seconds)
        return Outcome(False, data, data.get("category", "infra"), data.get("error"), seconds)
    if timed_out:
        return Outcome(False, {}, "timeout", f"no result after {opts.timeout_s:g} s (last "
                       f"phase: {last or 'start'}); killed\n{_tail(log_path)}", seconds)
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
        missing = job.spec.missing_packages()
        if missing:
            return Category.PACKAGE_MISSING, f"skipped: package not installed: " \
                                             f"{', '.join(missing)}"
    return None


@dataclass(frozen=True)
class JobRun:
    """A job's result, plus the cache artifact its cold compile saved and the verdict on it."""

    result: ModelResult
    artifact: Path | None = None
    artifact_info: dict[str, Any] = field(default_factory=dict)
    rejected: str | None = None  # why the artifact may not be published; None: verified


def run_job(job: Job, opts: RunOptions, on_phase: PhaseCallback = lambda _: None) -> ModelResult:
    """Measure one (model, config): cold process, then warm process on the same cache dir."""
    return run_job_full(job, opts, on_phase).result


def _warm_start(spec: dict[str, Any], artifact: Path, opts: RunOptions, workdir: Path,
                on_phase: PhaseCallback) -> tuple[Outcome, str | None]:
    """A fresh process on an empty cache dir that loads ``artifact`` before compiling; its
    outcome, and why the artifact is refused (``artifacts.judge``; None: verified)."""
    cache_dir = workdir / "warm-start-cache"
    cache_dir.mkdir()
    spec = {**spec, "phase": "warm_start", "measure": False, "accuracy": True,
            "load_artifact": str(artifact)}
    start = spawn_worker(spec, worker_env(cache_dir, opts), opts, workdir, on_phase)
    return start, artifacts.judge(start.ok, start.data, start.error)


def verify_artifact(job: Job, artifact: Path, opts: RunOptions,
                    on_phase: PhaseCallback = lambda _: None) -> tuple[Outcome, str | None]:
    """Load ``artifact`` for ``job`` in a fresh process; the outcome and why it is refused.
    The same check ``run_job_full`` makes on the artifact it just saved."""
    with tempfile.TemporaryDirectory(prefix="compilewatch-verify-") as tmp:
        return _warm_start(_spec(job, opts), artifact, opts, Path(tmp), on_phase)


def _spec(job: Job, opts: RunOptions) -> dict[str, Any]:
    return {"suite": job.suite.source, "model": job.spec.name,
            "config": job.config.model_dump(), "rounds": opts.rounds,
            "block_ms": opts.block_ms, "measure": opts.measure,
            "large": job.config.device == "cuda"}  # real model sizes on the GPU


def _published_start(job: Job, spec: dict[str, Any], opts: RunOptions, workdir: Path,
                     on_phase: PhaseCallback, notes: list[str]) -> Outcome | None:
    """Warm start from a published artifact; a refused one is a note and the run stays cold."""
    wc = opts.warm_cache
    assert wc is not None
    try:
        path = artifacts.select(wc.root, suite=job.suite.name, model=job.spec.name,
                                slug=job.config.slug, fingerprint=wc.fingerprint,
                                torch_version=wc.torch_version, trusted_keys=wc.trusted_keys,
                                private=workdir)
    except CacheArtifactError as e:
        notes.append(f"warm cache refused: {e}")
        return None
    start, problem = _warm_start(spec, path, opts, workdir, on_phase)
    if problem:
        notes.append(f"warm start from {path.name}: {problem}")
    return start


def run_job_full(job: Job, opts: RunOptions,
                 on_phase: PhaseCallback = lambda _: None) -> JobRun:
    """``run_job``, plus saving and verifying (``artifact_dir``) or loading (``warm_cache``)
    the portable compile cache."""
    base = {"model": job.spec.name, "suite": job.suite.name, "config": job.config,
            "tags": list(job.spec.tags)}
    skip = _precheck(job, opts)
    if skip:
        return JobRun(ModelResult(**base, status=STATUS_OF[skip[0]], category=skip[0],
                                  error=skip[1]))
    notes: list[str] = []
    saved: Path | None = None
    if opts.artifact_dir is not None:
        saved = opts.artifact_dir / artifacts.artifact_name(job.suite.name, job.spec.name,
                                                            job.config.slug)
    with tempfile.TemporaryDirectory(prefix="compilewatch-") as tmp:
        workdir = Path(tmp)
        if opts.cache_root is not None:
            cache_dir = opts.cache_root / artifacts.job_stem(job.suite.name, job.spec.name,
                                                             job.config.slug)
        else:
            cache_dir = workdir / "inductor-cache"
        was_empty = not cache_dir.exists() or not any(cache_dir.iterdir())
        cache_dir.mkdir(parents=True, exist_ok=True)
        env = worker_env(cache_dir, opts)
        spec = _spec(job, opts)
        save = {"save_artifact": str(saved)} if saved else {}
        cold = spawn_worker({**spec, "phase": "cold", **save}, env, opts, workdir, on_phase)
        warm = start = None
        if cold.ok and opts.warm:
            warm = spawn_worker({**spec, "phase": "warm"}, env, opts, workdir, on_phase)
        info = cold.data.get("artifact") or {}
        rejected = None
        if saved is not None and cold.ok and "sha256" in info:
            start, rejected = _warm_start(spec, saved, opts, workdir, on_phase)
        elif saved is not None:
            rejected = info.get("unsupported") or "the cold compile failed; nothing to save"
        elif cold.ok and opts.warm_cache is not None:
            start = _published_start(job, spec, opts, workdir, on_phase, notes)
    result = assemble(base, cold, warm, was_empty, start=start, notes=notes)
    return JobRun(result, saved if "sha256" in info else None, info, rejected)


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
             cache_dir_was_empty: bool, start: Outcome | None = None,
             notes: list[str] | None = None) -> ModelResult:
    """Merge the cold, warm and warm-start workers' outputs into one schema-valid result."""
    category, error = _status_of(cold, warm)
    result: dict[str, Any] = {**base, "status": STATUS_OF[category], "category": category,
                              "error": error, "notes": list(notes or []),
                              "duration_s": sum(o.seconds for o in (cold, warm, start) if o)}
    if not cold.ok:
        return ModelResult(**result)
    c = cold.data
    w = warm.data if warm is not None and warm.ok else {}
    latency, speedup = _latency([o for o in (cold, warm) if o is not None])
    s = start.data if start is not None and start.ok else {}
    counters = ({"cold": _counters(c)} | ({"warm": _counters(w)} if w else {})
                | ({"warm_start": _counters(s)} if s else {}))
    result.update(
        latency=latency, speedup=speedup,
        compile={"cold_s": c.get("compile_s"), "warm_s": w.get("compile_s"),
                 "phases": c.get("phases", {}), "warm_phases": w.get("phases", {}),
                 "frames": c.get("frames", 0), "graphs": c.get("graphs", 0),
                 "guard_count": c.get("guard_count"),
                 "warm_start_s": s.get("compile_s"), "warm_start_phases": s.get("phases", {}),
                 "cold_instructions": c.get("instructions"),
                 "cache_dir_was_empty": cache_dir_was_empty},
        graph_breaks=c.get("graph_breaks", []), recompiles=c.get("recompiles", []),
        cache={"fx": [k for d in (c, w, s) for k in d.get("cache", {}).get("fx", [])],
               "aot": [k for d in (c, w, s) for k in d.get("cache", {}).get("aot", [])],
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
