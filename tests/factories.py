"""Builders of realistic, schema-valid results for tests that do not need a real compile.

Every stage (db, compare, templates, bot) builds its inputs here so that all of them consume
the one results schema. Numbers are drawn from a seeded RNG around the given medians so that
noise is realistic but reproducible.
"""

from __future__ import annotations

import hashlib
import random
import statistics
import uuid
from typing import Any, ClassVar

from compilewatch.core.schema import (
    SCHEMA_VERSION,
    STATUS_OF,
    Accuracy,
    Cache,
    CacheCounters,
    CacheKey,
    Category,
    Compile,
    Config,
    Environment,
    GitInfo,
    GraphBreak,
    Interval,
    Latency,
    Memory,
    ModelResult,
    Recompile,
    RunResults,
    RunSettings,
    Status,
)

BASE_COMPONENTS = {
    "gm": "gmhash0000000000",
    "example_inputs[0]": "exin0aaaaaaaaaaa",
    "example_inputs[1]": "exin1bbbbbbbbbbb",
    "fx_kwargs[is_inference]": "isinfcccccccccccc",
    "inductor_config[max_autotune]": "maxautodddddddddd",
    "torch_version": "torchveeeeeeeeeee",
}


def environment(**overrides: Any) -> Environment:
    data: dict[str, Any] = {
        "fingerprint": "f" * 32,
        "python": "3.11.7",
        "platform": "Linux-x86_64",
        "machine": "x86_64",
        "cpu_count": 2,
        "torch": "2.13.0+cpu",
        "gpu_count": 0,
    }
    data.update(overrides)
    return Environment(**data)


GPU = Config(device="cuda")  # a GPU runner's result: a CPU's timings are judged strictly


def samples(median: float, n: int, rng: random.Random, spread: float = 0.02) -> list[float]:
    return [max(0.001, median * (1 + rng.gauss(0, spread))) for _ in range(n)]


def cache_key(components: dict[str, str] | None = None, kind: str = "fx", hit: bool = False,
              phase: str = "cold") -> CacheKey:
    comps = dict(BASE_COMPONENTS if components is None else components)
    digest = hashlib.sha256(repr(sorted(comps.items())).encode()).hexdigest()[:40]
    key = ("a" if kind == "aot" else "f") + digest
    return CacheKey(key=key, components=comps, hit=hit, state="hit" if hit else "miss",
                    phase=phase)


def model_result(
    model: str = "tiny_mlp",
    *,
    suite: str = "micro",
    config: Config | None = None,
    eager_us: float = 100.0,
    compiled_us: float = 50.0,
    n: int = 30,
    seed: int = 0,
    spread: float = 0.02,
    category: Category = Category.OK,
    error: str | None = None,
    graph_breaks: list[str] | None = None,
    recompiles: list[str] | None = None,
    components: dict[str, str] | None = None,
    cold_s: float = 10.0,
    warm_s: float = 2.0,
    warm_start_s: float | None = None,
    accuracy_passed: bool = True,
    peak_bytes: int | None = None,
    graphs: list[dict[str, str]] | None = None,
    processes: int = 1,
    process_spread: float = 0.0,
    cold_processes: int = 1,
    cold_spread: float = 0.05,
    launch_bound: bool | None = None,
    host_speed: float = 1.0,
    reference_us: float | None = None,
    referenced: int = 0,
    reference_spread: float = 0.0,
) -> ModelResult:
    """One result; a non-OK category gives a result without timings, as the harness writes.

    ``graphs`` gives one compiled graph (FX and AOT key) per dict of components; by default one
    graph with ``components``. ``processes`` timing processes of ``n`` samples each; each
    process's host state shifts all its samples, eager and compiled alike, by a factor drawn with
    ``process_spread`` (times ``host_speed``): the noise that lives between processes. The
    last ``referenced`` processes also time a reference (``reference_us``, the first side's
    eager model), shifted by the same host state and ``reference_spread`` of its own.
    """
    rng = random.Random(f"{model}-{seed}")
    status = STATUS_OF[category]
    base = {"model": model, "suite": suite, "config": config or Config(), "status": status,
            "category": category, "error": error}
    if status in (Status.ERROR, Status.TIMEOUT, Status.CRASH, Status.SKIP):
        return ModelResult(**base)
    eager: list[float] = []
    compiled: list[float] = []
    reference: list[float] = []
    for p in range(processes):
        shift = host_speed * ((1 + rng.gauss(0, process_spread)) if process_spread else 1)
        eager += samples(eager_us * shift, n, rng, spread)
        compiled += samples(compiled_us * shift, n, rng, spread)
        if p >= processes - referenced:
            own = 1 + rng.gauss(0, reference_spread) if reference_spread else 1
            reference += samples((reference_us or eager_us) * shift * own, n, rng, spread)
    colds = [cold_s * (1 + rng.gauss(0, cold_spread)) for _ in range(cold_processes)]
    ratios = sorted(e / c for e, c in zip(eager, compiled, strict=True))
    mid = ratios[len(ratios) // 2]
    return ModelResult(
        **base,
        speedup=Interval(value=mid, ci_low=ratios[len(ratios) // 5],
                         ci_high=ratios[(4 * len(ratios)) // 5]),
        latency=Latency(
            method="interleaved-blocks", timer="perf_counter", calls_per_block=10,
            eager_us=eager, compiled_us=compiled,
            eager_median_us=sorted(eager)[len(eager) // 2],
            compiled_median_us=sorted(compiled)[len(compiled) // 2],
            processes=processes, process_sizes=[n] * processes, launch_bound=launch_bound,
            reference_us=reference,
            reference_sizes=[n if p >= processes - referenced else 0 for p in range(processes)]
            if referenced else [],
        ),
        compile=Compile(cold_s=sorted(colds)[len(colds) // 2],
                        cold_samples_s=colds if cold_processes > 1 else [],
                        warm_s=warm_s * (1 + rng.gauss(0, 0.05)),
                        warm_start_s=None if warm_start_s is None
                        else warm_start_s * (1 + rng.gauss(0, 0.05)),
                        phases={"dynamo": 1.0, "aot_autograd": 2.0, "inductor": 6.0,
                                "codegen": 4.0},
                        frames=1 + len(graph_breaks or []), graphs=1 + len(graph_breaks or []),
                        guard_count=12),
        graph_breaks=[GraphBreak(reason=r) for r in graph_breaks or []],
        recompiles=[Recompile(reason=r, compile_id=f"0/{i + 1}")
                    for i, r in enumerate(recompiles or [])],
        cache=Cache(fx=[cache_key(g) for g in graphs or [components]],
                    aot=[cache_key(g, kind="aot") for g in graphs or [components]],
                    counters={"cold": CacheCounters(fx_miss=1, aot_miss=1),
                              "warm": CacheCounters(fx_hit=1, aot_hit=1)}),
        accuracy=Accuracy(passed=accuracy_passed, max_abs_err=1e-6 if accuracy_passed else 0.5,
                          max_rel_err=1e-6, atol=1e-4, rtol=1e-4, eager_deterministic=True),
        memory=Memory(eager_peak_bytes=peak_bytes, compiled_peak_bytes=peak_bytes),
        duration_s=cold_s + warm_s + 1.0,
    )


def cold_result(model: str, samples: list[float], seed: int = 1) -> ModelResult:
    """A result whose cold compiles (one per process, each on an empty cache, run beside other
    compiles) took ``samples`` seconds: a cold-compile verdict's input (on a GPU runner)."""
    r = model_result(model, seed=seed, config=GPU)
    return r.model_copy(update={"compile": r.compile.model_copy(update={
        "cold_samples_s": samples, "cold_s": statistics.median(samples),
        "cold_cpu_samples_s": [], "cache_dir_was_empty": True, "cold_concurrent": True})})


def run_results(results: list[ModelResult] | None = None, *, commit: str | None = None,
                run_id: str | None = None, env: Environment | None = None,
                created_at: str = "2026-11-29T08:00:00+00:00", **git: Any) -> RunResults:
    return RunResults(
        schema_version=SCHEMA_VERSION,
        run_id=run_id or uuid.uuid4().hex,
        created_at=created_at,
        finished_at=created_at,
        environment=env or environment(),
        git=GitInfo(commit=commit, **git),
        settings=RunSettings(suites=["micro"], timeout_s=600, rounds=30, block_ms=10),
        results=results if results is not None else [model_result()],
    )


def one_loop(base: RunResults, head: RunResults) -> tuple[RunResults, RunResults]:
    """Both runs stamped as the two sides of one ``pr`` (measured in one loop)."""
    return tuple(r.model_copy(update={
        "created_at": base.created_at,
        "settings": r.settings.model_copy(update={"trigger": "pr", "side": side})})
        for r, side in ((base, "base"), (head, "head")))  # type: ignore[return-value]


NIGHT_COMMITS = [f"{i:02d}" + hashlib.sha1(str(i).encode()).hexdigest()[2:] for i in range(100)]


def nightly_history(nights: int = 24, *, models: tuple[str, ...] = ("mlp", "convnet"),
                    step: tuple[str, int, dict[str, float]] | None = None, suite: str = "micro",
                    ref: str = "main") -> list[RunResults]:
    """One nightly run per day with realistic noise; ``step=(model, night, overrides)`` changes
    that model's ``model_result`` arguments from that night on (e.g. ``{"cold_s": 15.0}``)."""
    runs = []
    for night in range(nights):
        results = []
        for model in models:
            kw: dict[str, Any] = {"cold_s": 10.0, "compiled_us": 50.0, "warm_start_s": 3.0}
            if step and step[0] == model and night >= step[1]:
                kw.update(step[2])
            results.append(model_result(model, suite=suite, seed=night, **kw))
        run = run_results(results, commit=NIGHT_COMMITS[night], ref=ref,
                          created_at=f"2026-10-{night + 1:02d}T03:17:00+00:00")
        run.settings.trigger = "nightly"
        runs.append(run)
    return runs


def megacache(entries: dict[str, list[tuple[str, bytes]]]) -> bytes:
    """A portable compile cache in torch's own format (its serializer), with any entry types
    and keys: what a nightly saves, or what an attacker would craft."""
    import torch.compiler._cache as tc
    from torch.utils._appending_byte_serializer import AppendingByteSerializer

    tc.CacheArtifactManager._ensure_cache_artifacts_registered()
    ser = AppendingByteSerializer(serialize_fn=tc._serialize_single_cache)
    ser.extend([(kind, [tc.CacheArtifactFactory.create(kind, key, content)
                        for key, content in pairs]) for kind, pairs in entries.items()])
    return ser.to_bytes()


def worker_output(spec: Any, *, seed: int = 0, compiled_us: float = 50.0,
                  eager_us: float = 100.0, cold_s: float = 2.0, warm_s: float = 0.5,
                  fx_key: str | None = None, components: dict[str, str] | None = None) -> Any:
    """What a worker would write for ``spec``, without compiling: for tests of the loop."""
    from compilewatch.compiler.protocol import (
        CacheLookups,
        CompileSample,
        LatencySample,
        WorkerOutput,
    )

    if spec.phase == "profile":
        return WorkerOutput(ok=True, phase="profile", kernels=_profile(spec),
                            harness_s={"build": 0.1, "profile": 0.5})
    rng = random.Random(f"{spec.model}-{spec.phase}-{seed}")
    key = fx_key or f"f{spec.model}key"
    cold = spec.phase == "cold"
    latency = None
    if spec.time_steady_state:
        latency = LatencySample(timer="perf_counter", calls_per_block=10,
                                eager_us=samples(eager_us, spec.rounds, rng, 0.01),
                                compiled_us=samples(compiled_us, spec.rounds, rng, 0.01),
                                reference_us=samples(eager_us, spec.rounds, rng, 0.01)
                                if spec.reference_suite else [])
    parts = components or BASE_COMPONENTS
    return WorkerOutput(
        ok=True, phase=spec.phase,
        compile=CompileSample(wall_s=(cold_s if cold else warm_s) * (1 + rng.gauss(0, 0.02)),
                              cpu_s=cold_s, frames=1, graphs=1),
        cache=CacheLookups(fx=[CacheKey(key=key, components=parts,
                                        state="miss" if cold else "hit", phase=spec.phase)],
                           aot=[CacheKey(key="a" + key, components=parts,
                                         state="miss" if cold else "hit", phase=spec.phase)]),
        counters=CacheCounters(fx_miss=1, aot_miss=1) if cold else CacheCounters(fx_hit=1,
                                                                                 aot_hit=1),
        accuracy=Accuracy(passed=True, max_abs_err=0.0, max_rel_err=0.0, atol=1e-4, rtol=1e-4,
                          eager_deterministic=True) if spec.check_accuracy else None,
        latency=latency, harness_s={"build": 0.1, "compile": 1.0})


def _profile(spec: Any) -> Any:
    """A profile process's output: one generated kernel, no compile of its own."""
    from compilewatch.core.kernels import Kernel, KernelProfile

    k = Kernel(name="cpp_fused_sin_0", kind="generated", graph="0_inference", calls=20,
               launches=20, total_us=200.0, step_us=10.0)
    return KernelProfile(activity="cpu", steps=20, step_us=12.0, device_us=10.0,
                         launches_per_step=1.0, graphs=["0_inference"], kernels=[k])


class FakeLauncher:
    """Stands in for ``compiler.processes.Launcher``: the real loop runs, no process starts.
    ``launches`` records (side, model, phase) in the order the loop started them; ``output``
    makes each worker's output (default: ``worker_output``)."""

    launches: ClassVar[list[tuple[str, str, str]]] = []
    # (side, model, kind and index from the process's name, its cache dir, and whether that dir
    # was already used: it existed and held anything when the process started)
    caches: ClassVar[list[tuple[str, str, str, str, bool]]] = []
    left: ClassVar[list[str]] = []  # cache dirs still there when the loop ended

    def __init__(self, isolation: str = "fork", preload: Any = (),
                 output: Any = None, raise_on: int | None = None,
                 on_note: Any = None, needs_cuda: Any = True) -> None:
        import tempfile
        from pathlib import Path

        self.root = Path(tempfile.mkdtemp(prefix="fake-launcher-"))
        self.output = output or (lambda spec, name: worker_output(spec))
        self.raise_on = raise_on
        FakeLauncher.launches = []
        FakeLauncher.caches = []
        FakeLauncher.left = []

    def __enter__(self) -> FakeLauncher:
        return self

    def __exit__(self, *exc: object) -> None:
        import shutil

        FakeLauncher.left = sorted(str(p) for p in self.root.rglob("inductor-cache"))
        shutil.rmtree(self.root, ignore_errors=True)

    def prepare(self, python: str, env: dict[str, str]) -> None:
        pass

    def abort(self) -> None:
        pass

    def workdir(self, name: str) -> Any:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def run(self, launch: Any, on_phase: Any) -> tuple[Any, float]:
        from pathlib import Path

        work = self.workdir(launch.name)  # as Launcher.run: the process's folder, its files
        (work / "spec.json").write_text(launch.spec.model_dump_json())
        (work / "log").write_text("")
        side = launch.name.split("-", 1)[0]
        FakeLauncher.launches.append((side, launch.spec.model, launch.spec.phase))
        cache = Path(launch.env["TORCHINDUCTOR_CACHE_DIR"])
        FakeLauncher.caches.append((side, launch.spec.model, launch.name.rsplit("-", 1)[1],
                                    str(cache), cache.is_dir() and any(cache.iterdir())))
        cache.mkdir(parents=True, exist_ok=True)
        (cache / f"compiled-by-{launch.name}").write_text("")  # what a compile leaves there
        if launch.spec.trace_dir:  # and torch's structured trace, where one was asked for
            Path(launch.spec.trace_dir).mkdir(parents=True, exist_ok=True)
            (Path(launch.spec.trace_dir) / "dedicated_log_torch_trace.log").write_text(
                f"V1203 trace of {launch.name}\n")
        if self.raise_on is not None and len(FakeLauncher.launches) == self.raise_on:
            raise KeyboardInterrupt  # the job is cancelled while this process runs
        on_phase(f"{launch.spec.phase}: compile")
        return self.output(launch.spec, launch.name), 0.01


def timed_result(model: str, medians: list[float], seed: int = 0) -> ModelResult:
    """A GPU-bound result whose timing processes have these compiled medians (µs), eager
    steady: a given between-process spread, for verdicts that turn on it."""
    r = model_result(model, seed=seed, processes=len(medians), spread=0.002, eager_us=765.0,
                     compiled_us=200.0, launch_bound=False, config=GPU)
    assert r.latency is not None
    compiled: list[float] = []
    for (_, c), m in zip(r.latency.per_process(), medians, strict=True):
        compiled += [x * m / 200.0 for x in c]
    return r.model_copy(update={"latency": r.latency.model_copy(update={
        "compiled_us": compiled})})
