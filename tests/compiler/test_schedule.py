"""The measuring loop's order and lanes, with no process started (``FakeLauncher``): which
processes run, in which order, what runs beside what, and what is skipped."""

from __future__ import annotations

import functools
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from compilewatch.compiler import schedule
from compilewatch.compiler.pairing import Pairing
from compilewatch.compiler.plan import Job
from compilewatch.compiler.schedule import (
    LoopSettings,
    MakeWorkers,
    RunOptions,
    SideJobs,
    measure_jobs,
)
from compilewatch.core.schema import Category, Config, Status
from compilewatch.suites.loader import load_suite
from tests.factories import FakeLauncher, worker_output

SUITE = """
import torch
from compilewatch.suites import model

SUITE_NAME = "loop"

@model("a")
def a():
    return torch.sin, (torch.randn(4),)

@model("b")
def b():
    return torch.cos, (torch.randn(4),)

@model("c")
def c():
    return torch.tan, (torch.randn(4),)
"""


@pytest.fixture
def jobs(tmp_path: Path) -> list[Job]:
    path = tmp_path / "loop_suite.py"
    path.write_text(SUITE)
    suite = load_suite(str(path))
    return [Job(suite, spec, Config()) for spec in suite.models.values()]


def _fake(**kw: Any) -> MakeWorkers:
    """A launcher that starts no process: the real loop runs over ``FakeLauncher``."""
    return functools.partial(FakeLauncher, **kw)


OPTS = RunOptions(rounds=3, block_ms=1.0, cold_processes=1, timing_processes=2)


def test_two_sides_alternate_abba_per_model_and_per_timing_process(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    launch = _fake()
    sides = [SideJobs("base", jobs[:2], OPTS), SideJobs("head", jobs, OPTS)]
    measure_jobs(sides, LoopSettings(isolation="spawn", measure_all=True), launcher=launch)
    assert FakeLauncher.launches == [
        ("base", "a", "cold"), ("head", "a", "cold"),
        ("base", "a", "warm"), ("head", "a", "warm"), ("head", "a", "warm"),
        ("base", "a", "warm"),
        ("head", "b", "cold"), ("base", "b", "cold"),
        ("head", "b", "warm"), ("base", "b", "warm"), ("base", "b", "warm"),
        ("head", "b", "warm"),
        ("head", "c", "cold"), ("head", "c", "warm"), ("head", "c", "warm"),  # head only
    ]


def test_the_same_compiled_code_on_both_sides_is_not_timed(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    """Model a has the same FX and AOT keys on both sides (one graph, no break): not timed.
    Model b's head key differs: timed as usual."""
    def output(spec, name):  # type: ignore[no-untyped-def]
        key = "fbchanged" if spec.model == "b" and name.startswith("head") else None
        return worker_output(spec, fx_key=key)

    launch = _fake(output=output)
    sides = [SideJobs("base", jobs[:2], OPTS), SideJobs("head", jobs[:2], OPTS)]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn"), launcher=launch)
    assert [(s, m, p) for s, m, p in FakeLauncher.launches if m == "a"] == [
        ("base", "a", "cold"), ("head", "a", "cold")]
    assert len([1 for _, m, p in FakeLauncher.launches if m == "b" and p == "warm"]) == 4
    for side in ("base", "head"):
        a, b = (r.result for r in runs[side])
        assert a.status is Status.PASS and a.latency is None
        assert a.timing_skipped and "unchanged by construction" in a.timing_skipped
        assert b.timing_skipped is None and b.latency is not None
        assert b.latency.processes == 2 and b.latency.process_sizes == [3, 3]


def test_nothing_more_runs_for_a_model_until_both_first_cold_compiles_are_in(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU runner base's first cold compile of ``a`` ends well before head's: its other
    cold compiles and its timing wait, so a model found unchanged by construction costs two
    processes, not the timing lane's time as well. Model b (head differs) is measured fully."""
    def output(spec, name):  # type: ignore[no-untyped-def]
        if name.startswith("head") and spec.phase == "cold":
            time.sleep(0.3)
        key = "fbchanged" if spec.model == "b" and name.startswith("head") else None
        return worker_output(spec, fx_key=key)

    launch = _fake(output=output)
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=3, timing_processes=3)
    sides = [SideJobs("base", jobs[:2], opts), SideJobs("head", jobs[:2], opts)]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn", compile_slots=4, overlap=True,
                                       timing_ahead=2), launcher=launch)
    assert sorted(x for x in FakeLauncher.launches if x[1] == "a") == [
        ("base", "a", "cold"), ("head", "a", "cold")]
    b = [(s, p) for s, m, p in FakeLauncher.launches if m == "b"]
    assert b.count(("base", "cold")) == b.count(("head", "cold")) == 3
    assert b.count(("base", "warm")) == b.count(("head", "warm")) == 3
    assert all(r.result.status is Status.PASS for side in runs.values() for r in side)


def test_a_different_environment_is_always_timed(jobs: list[Job],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    launch = _fake()
    sides = [SideJobs("base", jobs[:1], OPTS), SideJobs("head", jobs[:1], OPTS)]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn", same_environment=False),
                        launcher=launch)
    assert runs["head"][0].result.latency is not None


def test_cold_and_timing_processes_give_their_samples(jobs: list[Job],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    launch = _fake()
    opts = RunOptions(rounds=4, block_ms=1.0, cold_processes=3, timing_processes=3)
    [run] = measure_jobs([SideJobs("run", jobs[:1], opts)], LoopSettings(isolation="spawn"),
                         launcher=launch)["run"]
    r = run.result
    assert len(r.compile.cold_samples_s) == 3 and len(r.compile.warm_samples_s) == 3
    assert r.compile.cold_s == sorted(r.compile.cold_samples_s)[1]
    assert r.latency is not None and r.latency.process_sizes == [4, 4, 4]
    assert r.cache.counters["cold"].fx_miss == 1 and r.cache.counters["warm"].fx_hit == 1
    assert r.harness_s["compile"] == pytest.approx(6.0)  # six processes, 1 s each


def test_a_failed_cold_compile_stops_that_model_there(jobs: list[Job],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def output(spec, name):  # type: ignore[no-untyped-def]
        out = worker_output(spec)
        if spec.model == "a":
            return out.model_copy(update={"ok": False, "category": Category.COMPILE_ERROR,
                                          "error": "boom"})
        return out

    launch = _fake(output=output)
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=3, timing_processes=3)
    runs = measure_jobs([SideJobs("run", jobs[:2], opts)], LoopSettings(isolation="spawn"),
                        launcher=launch)["run"]
    assert [m for _, m, _ in FakeLauncher.launches].count("a") == 1
    assert runs[0].result.category is Category.COMPILE_ERROR and runs[0].result.error == "boom"
    assert runs[1].result.status is Status.PASS


class _Concurrency:
    """Records, for each process, what else was running when it started, and its spec."""

    def __init__(self) -> None:
        self.running: list[str] = []
        self.seen: list[tuple[str, tuple[str, ...]]] = []
        self.locks: set[str | None] = set()
        self.lock = threading.Lock()

    def __call__(self, spec, name):  # type: ignore[no-untyped-def]
        kind = "timing" if spec.time_steady_state else "compile"
        with self.lock:
            self.seen.append((kind, tuple(self.running)))
            self.running.append(kind)
            if kind == "timing":
                self.locks.add(spec.device_lock)
        time.sleep(0.05)
        with self.lock:
            self.running.remove(kind)
        return worker_output(spec)


def test_on_a_cpu_nothing_runs_beside_a_timing_process(jobs: list[Job],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _Concurrency()
    launch = _fake(output=seen)
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=3, timing_processes=3)
    sides = [SideJobs("base", jobs, opts), SideJobs("head", jobs, opts)]
    measure_jobs(sides, LoopSettings(isolation="spawn", compile_slots=3, measure_all=True),
                 launcher=launch)
    timing = [others for kind, others in seen.seen if kind == "timing"]
    assert len(timing) == 18 and all(others == () for others in timing)
    assert not [o for kind, o in seen.seen if kind == "compile" and "timing" in o]


def _on_a_gpu(jobs: list[Job], cold: int, gpus: tuple[int, ...] = (),
              pin: tuple[int, ...] = (0,), sides: tuple[str, ...] = ("base", "head"),
              launch: MakeWorkers = FakeLauncher) -> None:
    """Both sides of ``jobs`` (or the ``sides`` named) through the loop as on a GPU: lanes
    overlapping, three compile slots, two timing processes ahead (a lane), every model
    timed."""
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=cold, timing_processes=3,
                      pin_cpus=pin)
    sides = [SideJobs(name, jobs, opts) for name in sides]
    measure_jobs(sides, LoopSettings(isolation="spawn", compile_slots=3, overlap=True,
                                     timing_ahead=2, measure_all=True, gpus=gpus), launcher=launch)


def test_on_a_gpu_compiles_overlap_timing_and_timing_queues_for_the_device_lock(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU times one model while spare cores compile the next; timing processes start
    ahead (they build and compile first) and take the device one at a time (the lock file,
    tested with real processes below)."""
    seen = _Concurrency()
    launch = _fake(output=seen)
    _on_a_gpu(jobs, cold=3, launch=launch)
    assert [o for kind, o in seen.seen if kind == "timing" and o.count("timing") >= 2] == []
    assert [o for kind, o in seen.seen if "timing" in o and "compile" in (kind, *o)]
    assert len(seen.locks) == 1 and None not in seen.locks


class _Lanes:
    """Records each process's GPU, lock and what ran on each GPU when it started (and each
    timing process's cores, by model and GPU, in ``pins``)."""

    def __init__(self, sleep_s: float = 0.05) -> None:
        self.running: list[tuple[str, int | None]] = []
        self.seen: list[tuple[str, str, str, int | None, str | None, list]] = []
        self.pins: dict[tuple[str, int | None], set[tuple[int, ...]]] = {}
        self.lock, self.sleep_s = threading.Lock(), sleep_s

    def __call__(self, spec, name):  # type: ignore[no-untyped-def]
        kind = "timing" if spec.time_steady_state else "compile"
        with self.lock:
            if kind == "timing":
                self.pins.setdefault((spec.model, spec.gpu), set()).add(tuple(spec.pin_cpus))
            self.seen.append((name.split("-")[0], spec.model, kind, spec.gpu, spec.device_lock,
                              list(self.running)))
            self.running.append((kind, spec.gpu))
        time.sleep(self.sleep_s)
        with self.lock:
            self.running.remove((kind, spec.gpu))
        return worker_output(spec)


def test_with_several_gpus_each_model_times_on_one_gpu_and_models_spread_over_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two GPU lanes: both sides' timing processes of a model run on one GPU, under that
    GPU's own lock; the models spread over both GPUs, which time at once; no GPU runs more
    timing processes at once than ``timing_ahead``."""
    path = tmp_path / "many_suite.py"
    path.write_text("import torch\nfrom compilewatch.suites import model\n"
                    "SUITE_NAME = 'many'\n" + "".join(
                        f"@model('m{i}')\ndef m{i}():\n    return torch.sin, (torch.randn(4),)\n"
                        for i in range(6)))
    suite = load_suite(str(path))
    jobs = [Job(suite, spec, Config()) for spec in suite.models.values()]
    seen = _Lanes()
    launch = _fake(output=seen)
    _on_a_gpu(jobs, cold=2, gpus=(0, 3), launch=launch)
    timing = [s for s in seen.seen if s[2] == "timing"]
    assert len(timing) == 6 * 2 * 3
    per_model: dict[str, set] = {}
    for _side, model, _, gpu, lock, running in timing:
        per_model.setdefault(model, set()).add((gpu, lock))
        assert gpu in (0, 3) and lock is not None and lock.endswith(f"device-{gpu}.lock")
        assert sum(1 for k, g in running if k == "timing" and g == gpu) < 2
    assert all(len(v) == 1 for v in per_model.values()), per_model  # one GPU a model
    used = [gpu for (gpu, _), in per_model.values()]
    assert sorted(used) == [0, 0, 0, 3, 3, 3]  # the same work each: spread evenly
    # the lanes ran at once: a timing process started while the other GPU timed
    assert any(g != gpu for *_, gpu, _, running in timing for k, g in running if k == "timing")
    compiles = [s for s in seen.seen if s[2] == "compile"]
    assert {gpu for *_, gpu, _, _ in compiles} <= {0, 3} and all(
        lock.endswith(f"device-{gpu}.lock") for *_, gpu, lock, _ in compiles)


def _many(tmp_path: Path, n: int = 6) -> list[Job]:
    path = tmp_path / "many_suite.py"
    path.write_text("import torch\nfrom compilewatch.suites import model\n"
                    "SUITE_NAME = 'many'\n" + "".join(
                        f"@model('m{i}')\ndef m{i}():\n    return torch.sin, (torch.randn(4),)\n"
                        for i in range(n)))
    suite = load_suite(str(path))
    return [Job(suite, spec, Config()) for spec in suite.models.values()]


def test_each_gpu_lane_times_on_cores_of_its_own(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Two lanes, two pinned cores: GPU 0's timing processes on the first, GPU 3's on the
    second, so one GPU's timing never takes the core another's launch-bound model waits on;
    one core for two lanes is shared, and the run says so."""
    seen = _Lanes(sleep_s=0.0)
    launch = _fake(output=seen)
    _on_a_gpu(_many(tmp_path, 4), cold=1, gpus=(0, 3), pin=(14, 15), launch=launch)
    by_gpu: dict[int | None, set[tuple[int, ...]]] = {}
    for (_model, gpu), pins in seen.pins.items():
        by_gpu.setdefault(gpu, set()).update(pins)
    assert by_gpu == {0: {(14,)}, 3: {(15,)}}

    notes: list[str] = []
    seen = _Lanes(sleep_s=0.0)
    launch = _fake(output=seen)
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=1, timing_processes=1,
                      pin_cpus=(15,))
    measure_jobs([SideJobs("run", _many(tmp_path, 2), opts)],
                 LoopSettings(isolation="spawn", overlap=True, gpus=(0, 1)),
                 on_event=lambda e: notes.append(e.text) if e.kind == "note" else None,
                 launcher=launch)
    assert {p for pins in seen.pins.values() for p in pins} == {(15,)}
    assert any("2 GPU timing lanes share the timing cores [15]" in n for n in notes), notes


def test_timing_cores_that_take_every_core_are_said(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the timing lanes' cores are all the run may use, compiles run on them too (there
    is nowhere else): the run says so rather than leaving the timing silently shared."""
    from compilewatch.compiler import cpus

    def run(available: set[int]) -> list[str]:
        monkeypatch.setattr(cpus, "available", lambda: set(available))
        launch = _fake(output=_Lanes(sleep_s=0.0))
        notes: list[str] = []
        opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=1, timing_processes=1,
                          pin_cpus=(14, 15))
        measure_jobs([SideJobs("run", _many(tmp_path, 2), opts)],
                     LoopSettings(isolation="spawn", overlap=True, gpus=(0, 1)),
                     on_event=lambda e: notes.append(e.text) if e.kind == "note" else None,
                     launcher=launch)
        return [n for n in notes if "are every core this run may use" in n]

    assert run({14, 15}) and "[14, 15]" in run({14, 15})[0]
    assert run({0, 1, 14, 15}) == []


def test_a_models_gpu_is_where_it_times_first_not_where_it_compiled(jobs: list[Job]) -> None:
    """A cold compile runs on the GPU running the fewest processes and binds its model to
    nothing: the model's GPU is chosen when its first timing process starts, the lane with
    the least timing work."""
    from compilewatch.compiler.lanes import GpuLanes, Task

    lanes = GpuLanes((0, 1))
    a, b = jobs[0], jobs[1]
    compile_a = Task((0,), "base", a, "cold", 1)
    lanes.start(compile_a, lanes.for_compile(compile_a))
    assert compile_a.gpu == 0 and lanes.of == {}
    timing_b = Task((1,), "base", b, "timing", 1, timing=True)
    lanes.start(timing_b, lanes.for_timing(timing_b, [], 2))
    assert timing_b.gpu == 0  # both lanes idle: the first
    timing_a = Task((2,), "base", a, "timing", 1, timing=True)
    assert lanes.for_timing(timing_a, [], 2) == 1  # a compiled on 0, but 1 has no timing


def test_a_single_side_run_times_each_model_on_the_gpu_its_name_picks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run`` and ``nightly`` measure one side: a model's GPU follows from its name, so two
    such runs, whatever their models' order, time each model on the same GPU (their
    comparison pairs it, never refusing two GPUs)."""
    jobs = _many(tmp_path, 8)
    picked = []
    for order in (jobs, jobs[::-1]):
        seen = _Lanes(sleep_s=0.0)
        launch = _fake(output=seen)
        _on_a_gpu(order, cold=1, gpus=(0, 1), sides=("run",), launch=launch)
        picked.append({model: gpu for model, gpu in seen.pins})
    assert picked[0] == picked[1] and len(picked[0]) == 8
    assert set(picked[0].values()) == {0, 1}  # the names spread over both


def test_the_longest_model_starts_first(jobs: list[Job],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """With stored durations the longest model's cold compiles start first and the shortest
    last; a model with none goes first (it may be the long one); without any, a training
    step (two graphs and an optimizer) before inference, each in the suite's order."""
    launch = _fake()
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=1, timing_processes=1)

    def first_colds(settings: LoopSettings, js: list[Job]) -> list[str]:
        FakeLauncher.launches.clear()
        measure_jobs([SideJobs("run", js, opts)], settings, launcher=launch)
        return [model for _, model, kind in FakeLauncher.launches if kind == "cold"]

    a, b, c = (schedule.ident(j) for j in jobs)
    assert first_colds(LoopSettings(isolation="spawn"), jobs) == ["a", "b", "c"]
    assert first_colds(LoopSettings(isolation="spawn", durations={b: 5.0, c: 90.0}),
                       jobs) == ["a", "c", "b"]
    assert first_colds(LoopSettings(isolation="spawn", durations={a: 1.0, b: 5.0, c: 3.0}),
                       jobs) == ["b", "c", "a"]
    trains = [jobs[0], Job(jobs[2].suite, jobs[2].spec, Config(task="training")), jobs[1]]
    assert first_colds(LoopSettings(isolation="spawn"), trains) == ["c", "a", "b"]


def test_a_gpu_left_out_moves_only_the_models_that_timed_on_it(tmp_path: Path) -> None:
    """A run of one side picks a model's GPU by its name: when the preflight leaves GPU 1 out
    one night, only GPU 1's models move; the others stay where they timed, so two nightlies
    still pair them."""
    from compilewatch.compiler.lanes import GpuLanes, Task

    jobs = _many(tmp_path, 40)

    def picks(gpus: tuple[int, ...]) -> dict[str, int | None]:
        lanes = GpuLanes(gpus, fixed=True)
        return {j.spec.name: lanes.for_timing(Task((0,), "run", j, "timing", 1, timing=True),
                                              [], 99) for j in jobs}

    four, three = picks((0, 1, 2, 3)), picks((0, 2, 3))
    assert set(four.values()) == {0, 1, 2, 3}
    assert all(three[m] == g for m, g in four.items() if g != 1)
    assert all(three[m] in (0, 2, 3) for m, g in four.items() if g == 1)


def test_one_gpu_lane_is_the_run_as_before(jobs: list[Job],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPUs named: the one device, one lock, no GPU in any spec; one GPU named: the same
    processes, each told its GPU."""
    seen = _Lanes(sleep_s=0.0)
    launch = _fake(output=seen)
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=1, timing_processes=2,
                      pin_cpus=(0,))
    sides = [SideJobs("base", jobs, opts), SideJobs("head", jobs, opts)]
    measure_jobs(sides, LoopSettings(isolation="spawn", overlap=True, timing_ahead=1,
                                     measure_all=True), launcher=launch)
    before = list(FakeLauncher.launches)
    assert {s[3] for s in seen.seen} == {None}
    assert {Path(s[4]).name for s in seen.seen} == {"device.lock"}
    seen = _Lanes(sleep_s=0.0)
    launch = _fake(output=seen)
    measure_jobs(sides, LoopSettings(isolation="spawn", overlap=True, timing_ahead=1,
                                     measure_all=True, gpus=(0,)), launcher=launch)
    assert sorted(FakeLauncher.launches) == sorted(before)  # one lane named: the same work
    assert {s[3] for s in seen.seen} == {0}


class _Cores:
    """Records each process's kind, cores, compile threads, and the cores of the compiles
    running when it started."""

    def __init__(self) -> None:
        self.running: dict[str, tuple[int, ...]] = {}
        self.seen: list[tuple[str, tuple[int, ...], tuple[int, ...], int | None,
                              list[tuple[int, ...]]]] = []
        self.lock = threading.Lock()

    def __call__(self, spec, name):  # type: ignore[no-untyped-def]
        kind = "timing" if spec.time_steady_state else "compile"
        cores = spec.prepare_cpus if kind == "timing" else spec.pin_cpus
        with self.lock:
            self.seen.append((kind, cores, spec.pin_cpus, spec.compile_threads,
                              list(self.running.values())))
            if kind == "compile":
                self.running[name] = cores
        time.sleep(0.02)
        with self.lock:
            self.running.pop(name, None)
        return worker_output(spec)


@pytest.mark.parametrize(("cores", "split", "timing", "groups", "note"), [
    (16, True, 3, True, None),     # the H200 runner: 15 compile cores, four slots of three
    (16, False, 3, False, None),   # split_cores off: every compile on every compile core
    (4, True, 3, False, "cannot give 4 slots"),  # 3 compile cores: a core each and a rest? no
    (16, True, 0, False, "--no-warm"),  # cold 1 times itself in the timing lane: no split
])
def test_each_compile_slot_runs_on_cores_of_its_own(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch, cores: int, split: bool,
        timing: int, groups: bool, note: str | None) -> None:
    """A cold compile's wall time is what a compile-time verdict judges: compiles that run at
    once never share a core, each has as many compile workers as cores, pairs get groups of
    one size, and timing processes prepare on the rest, off the groups and the timing core,
    where the parent and its fork server run too. Where nothing is split, a note says why."""
    from compilewatch.compiler import cpus

    monkeypatch.setattr(cpus, "available", lambda: set(range(cores)))
    monkeypatch.setattr(cpus, "siblings", lambda cpu, topology=None: {cpu})
    parent: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    real_away = cpus.away

    def away(pinned, to=()):  # type: ignore[no-untyped-def]
        parent.append((tuple(pinned), tuple(to)))
        return real_away(pinned, to)

    monkeypatch.setattr(cpus, "away", away)
    seen = _Cores()
    launch = _fake(output=seen)
    timing_core = cores - 1
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=3, timing_processes=timing,
                      pin_cpus=(timing_core,))
    sides = [SideJobs("base", jobs, opts), SideJobs("head", jobs, opts)]
    notes: list[str] = []
    measure_jobs(sides, LoopSettings(isolation="spawn", compile_slots=4, overlap=True,
                                timing_ahead=2, measure_all=True, split_cores=split),
            on_event=lambda e: notes.append(e.text) if e.kind == "note" else None, launcher=launch)
    split_notes = [n for n in notes if "compile slots share" in n]
    assert (split_notes == []) if note is None else (note in split_notes[0])
    compiles = [s for s in seen.seen if s[0] == "compile"]
    timings = [s for s in seen.seen if s[0] == "timing"]
    assert len(compiles) == (18 if timing else 12) and len(timings) == (18 if timing else 6)
    everywhere = tuple(range(cores - 1))
    if not groups:
        assert all(c[1] == everywhere and c[3] is None for c in compiles)
        assert all(t[1] == everywhere and t[3] is None for t in timings)
        assert parent == [((timing_core,), ())]
        return
    rest = (12, 13, 14)
    assert parent == [((timing_core,), rest)]  # the parent and its fork server
    for _, mine, _, threads, beside in compiles:
        assert len(mine) == 3 and threads == 3 and timing_core not in mine
        assert not set(mine) & set(rest)
        assert all(not set(mine) & set(other) for other in beside)  # never a shared core
    assert len({c[1] for c in compiles}) == 4  # the four slots' groups, reused
    assert all(t[1] == rest and t[2] == (timing_core,) and t[3] == 3 for t in timings)


def test_a_models_cold_pairs_swap_which_side_takes_the_first_group(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    """Four slots, one model, three cold compiles a side: the first pair starts together,
    then the other two pairs at once. Had one side kept the lower of its pair's groups in
    every pair, any difference between the groups would sit in every pair unseen; the
    sides swap ends pair by pair."""
    from compilewatch.compiler import cpus

    monkeypatch.setattr(cpus, "available", lambda: set(range(16)))
    monkeypatch.setattr(cpus, "siblings", lambda cpu, topology=None: {cpu})
    taken: dict[tuple[str, str], tuple[int, ...]] = {}

    def output(spec, name):  # type: ignore[no-untyped-def]
        if not spec.time_steady_state:
            taken[(name.split("-")[0], name.rsplit("-", 1)[-1])] = spec.pin_cpus
        time.sleep(0.05)
        return worker_output(spec)

    launch = _fake(output=output)
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=3, timing_processes=1,
                      pin_cpus=(15,))
    measure_jobs([SideJobs("base", jobs[:1], opts), SideJobs("head", jobs[:1], opts)],
            LoopSettings(isolation="spawn", compile_slots=4, overlap=True, timing_ahead=1,
                         measure_all=True, split_cores=True), launcher=launch)
    lower = [taken[("base", f"cold{i}")] < taken[("head", f"cold{i}")] for i in (1, 2, 3)]
    assert all(taken[("base", f"cold{i}")] != taken[("head", f"cold{i}")] for i in (1, 2, 3))
    assert lower == [True, False, True]  # base first, head first, base first


def _hold_device(lock: str, log: str, spec_json: str) -> None:
    import json

    from compilewatch.compiler.protocol import WorkerSpec
    from compilewatch.compiler.worker import Harness, device

    spec = WorkerSpec.model_validate(json.loads(spec_json))
    with device(spec, Harness(spec)) as idle:
        with open(log, "a") as f:
            f.write(f"in {time.monotonic()} {idle}\n")
        time.sleep(0.3)
        with open(log, "a") as f:
            f.write(f"out {time.monotonic()}\n")


def test_the_device_lock_lets_one_measuring_section_run_at_a_time(tmp_path: Path) -> None:
    import multiprocessing

    from compilewatch.compiler.protocol import WorkerSpec

    spec = WorkerSpec(suite="micro", model="m", config=Config(), phase="warm", large=False,
                      rounds=1, block_ms=1.0, time_steady_state=True,
                      device_lock=str(tmp_path / "device.lock"), out="", status_file="")
    log = tmp_path / "log"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_hold_device, args=(spec.device_lock, str(log),
                                                     spec.model_dump_json()))
             for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    events = [line.split() for line in log.read_text().splitlines()]
    assert [e[0] for e in events] == ["in", "out"] * 3  # never two sections at once
    # each section knows how long the device was idle before it: unknown for the first,
    # moments for those that waited for it (they need no long warm-up); the bound is loose
    # because a loaded 2-core machine can take seconds to wake the next process
    idles = [e[2] for e in events if e[0] == "in"]
    assert idles[0] == "None" and all(0 <= float(x) < 10.0 for x in idles[1:])


# --- the "reads nothing the change touches" rule ------------------------------------------

def _scanning(reads_of: dict[str, list[str]], fail: set[tuple[str, str]] = frozenset(),
              home: int = 0):  # type: ignore[no-untyped-def]
    """Worker outputs where a scan of model m reads ``reads_of[m]`` (relative paths)."""
    from compilewatch.compiler.protocol import Reads, WorkerOutput

    def output(spec, name):  # type: ignore[no-untyped-def]
        side = name.split("-", 1)[0]
        if spec.phase != "scan":
            return worker_output(spec)
        assert spec.watch_root is not None and not spec.time_steady_state
        if (side, spec.model) in fail:
            return WorkerOutput(ok=False, phase="scan", category=Category.INFRA, error="x")
        return WorkerOutput(ok=True, phase="scan", reads=Reads(
            files=reads_of.get(spec.model, []), home_files=home))
    return output


def _two_sides(jobs: list[Job], root: Path, opts: RunOptions = OPTS) -> list[SideJobs]:
    from dataclasses import replace

    o = replace(opts, watch_root=root)
    return [SideJobs("base", jobs, o), SideJobs("head", jobs, o)]


def _diff(*entries: tuple[str, str]):  # type: ignore[no-untyped-def]
    from compilewatch.compiler.reads import ChangedFiles

    return ChangedFiles.of(entries, lambda d: True)


def test_models_that_read_nothing_the_change_touches_are_not_measured(
        jobs: list[Job], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scan runs first; a and c read only the suite file, b also helper.py, which the
    change edits: b alone goes on to its cold compiles (its keys then decide its timing)."""
    files = {"a": ["loop_suite.py"], "b": ["helper.py", "loop_suite.py"],
             "c": ["loop_suite.py"]}
    launch = _fake(output=_scanning(files))
    runs = measure_jobs(_two_sides(jobs, tmp_path),
                   LoopSettings(isolation="spawn", changed=_diff(("M", "helper.py"),
                                                                 ("M", "README.md"))),
                        launcher=launch)
    phases = [p for _, _, p in FakeLauncher.launches]
    assert phases[:6] == ["scan"] * 6 and phases.count("scan") == 6
    assert sorted((s, m) for s, m, p in FakeLauncher.launches if p == "cold") == [
        ("base", "b"), ("head", "b")]
    for side in ("base", "head"):
        a, b, c = (r.result for r in runs[side])
        assert a.compile_skipped and c.compile_skipped and not b.compile_skipped
        assert a.status is Status.PASS and a.compile.cold_s is None and a.latency is None
        assert a.timing_skipped and "loop_suite.py" in a.timing_skipped
        assert b.compile.cold_s is not None


@pytest.mark.parametrize("case", ["the suite file changed", "what is measured changed",
                                  "measure all", "another environment", "no diff known"])
def test_no_scan_where_it_cannot_decide(case: str, jobs: list[Job], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    launch = _fake(output=_scanning({}))
    suite = Path(jobs[0].suite.source).relative_to(tmp_path).as_posix()
    tasks = replace(_diff(("M", "pyproject.toml")),
                    settings=frozenset({"tool.compilewatch.tasks"}))
    settings = {
        "the suite file changed": LoopSettings(isolation="spawn", changed=_diff(("M", suite))),
        "what is measured changed": LoopSettings(isolation="spawn", changed=tasks),
        "measure all": LoopSettings(isolation="spawn", measure_all=True,
                                    changed=_diff(("M", "README.md"))),
        "another environment": LoopSettings(isolation="spawn", same_environment=False,
                                            changed=_diff(("M", "README.md"))),
        "no diff known": LoopSettings(isolation="spawn"),
    }[case]
    measure_jobs(_two_sides(jobs[:1], tmp_path), settings, launcher=launch)
    assert "scan" not in [p for _, _, p in FakeLauncher.launches]
    assert ("base", "a", "cold") in FakeLauncher.launches


def test_a_model_on_one_side_only_and_a_failed_scan_are_measured(
        jobs: list[Job], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    launch = _fake(output=_scanning({}, fail={("head", "a")}, home=3))
    o = replace(OPTS, watch_root=tmp_path)
    sides = [SideJobs("base", jobs[:2], o), SideJobs("head", jobs, o)]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn", changed=_diff(("M", "README.md"))),
                        launcher=launch)
    launched = set(FakeLauncher.launches)
    assert {("base", "a", "cold"), ("head", "a", "cold")} <= launched  # a's head scan failed
    assert ("head", "c", "scan") not in launched and ("head", "c", "cold") in launched
    b = runs["head"][1].result
    assert b.compile_skipped
    assert any("repository's own checkout" in n for n in b.notes)


def test_a_model_skipped_on_one_side_is_not_scanned(jobs: list[Job], tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Head's version of model a no longer runs on this device: it is skipped there, and base's
    side is measured (not left waiting for a scan that never comes)."""
    from dataclasses import replace

    launch = _fake(output=_scanning({}))
    o = replace(OPTS, watch_root=tmp_path)
    gone = Job(jobs[0].suite, replace(jobs[0].spec, devices=("cuda",)), jobs[0].config)
    runs = measure_jobs([SideJobs("base", jobs[:1], o), SideJobs("head", [gone], o)],
                   LoopSettings(isolation="spawn", changed=_diff(("M", "README.md"))),
                        launcher=launch)
    assert runs["head"][0].result.category is Category.UNSUPPORTED
    assert runs["base"][0].result.status is Status.PASS
    assert ("base", "a", "scan") not in FakeLauncher.launches


def test_an_undecided_model_gets_more_timing_processes_a_side_interleaved(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    """``follow_up`` sees both sides' results once their timing is in; a reason queues
    ``extra_timing`` more timing processes a side, base/head alternating as before, and the
    results hold every process with the reason as a note. Model b's answer is None: nothing
    more runs for it."""
    launch = _fake()
    asked: list[tuple[str, str, int, int]] = []

    def follow_up(b, h):  # type: ignore[no-untyped-def]
        asked.append((b.model, h.model, b.latency.processes, h.latency.processes))
        return "close to its threshold" if b.model == "a" else None

    sides = [SideJobs("base", jobs[:2], OPTS), SideJobs("head", jobs[:2], OPTS)]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn", measure_all=True,
                                       follow_up=follow_up, extra_timing=2), launcher=launch)
    assert asked == [("a", "a", 2, 2), ("b", "b", 2, 2)]  # once a model, both sides in
    a_timing = [(side, phase) for side, model, phase in FakeLauncher.launches
                if model == "a" and phase == "warm"]
    assert a_timing == [("base", "warm"), ("head", "warm"), ("head", "warm"), ("base", "warm"),
                        ("base", "warm"), ("head", "warm"), ("head", "warm"), ("base", "warm")]
    b_timing = [1 for _, model, phase in FakeLauncher.launches if model == "b" and phase == "warm"]
    assert len(b_timing) == 4
    for side in ("base", "head"):
        a, b = (next(r.result for r in runs[side] if r.result.model == m) for m in "ab")
        assert a.latency is not None and a.latency.processes == 4
        assert any("2 more timing processes a side: close to its threshold" in n
                   for n in a.notes)
        assert b.latency is not None and b.latency.processes == 2
        assert not any("more timing processes" in n for n in b.notes)


def test_no_follow_up_without_timing_on_both_sides(jobs: list[Job],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A model timed on one side only (c), or not timed at all (a: the same compiled code on
    both sides), is never asked about."""
    def output(spec, name):  # type: ignore[no-untyped-def]
        key = "fbchanged" if spec.model == "b" and name.startswith("head") else None
        return worker_output(spec, fx_key=key)

    launch = _fake(output=output)
    asked: list[str] = []

    def follow_up(b, h):  # type: ignore[no-untyped-def]
        asked.append(b.model)
        return "more"

    sides = [SideJobs("base", jobs[:2], OPTS), SideJobs("head", jobs, OPTS)]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn", follow_up=follow_up,
                                       extra_timing=1), launcher=launch)
    assert asked == ["b"]
    head = {r.result.model: r.result for r in runs["head"]}
    assert head["a"].latency is None and head["a"].timing_skipped
    assert head["b"].latency is not None and head["b"].latency.processes == 3
    assert head["c"].latency is not None and head["c"].latency.processes == 2


def test_a_follow_up_that_raises_finishes_the_model_with_a_note(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    launch = _fake()

    def follow_up(b, h):  # type: ignore[no-untyped-def]
        raise ZeroDivisionError("judging bug")

    sides = [SideJobs("base", jobs[:1], OPTS), SideJobs("head", jobs[:1], OPTS)]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn", measure_all=True,
                                       follow_up=follow_up, extra_timing=2), launcher=launch)
    for side in ("base", "head"):
        (run,) = runs[side]
        assert run.result.status is Status.PASS and run.result.latency is not None
        assert run.result.latency.processes == 2
        assert any("ZeroDivisionError: judging bug" in n for n in run.result.notes)


COLD3 = RunOptions(rounds=3, block_ms=1.0, cold_processes=3, timing_processes=2)


def test_an_undecided_cold_compile_gets_more_cold_compiles_each_on_an_empty_cache(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    """``cold_follow_up`` sees both sides' cold compiles once everything ran; a reason queues
    ``extra_cold`` more cold compiles a side, paired base/head, each on a cache dir of its own
    that starts empty and is removed afterwards (no timing process runs on it). The results
    hold every cold sample, the reason as a note. Model b's answer is None."""
    launch = _fake()
    asked: list[tuple[str, int, int]] = []

    def cold_follow_up(b, h):  # type: ignore[no-untyped-def]
        asked.append((b.model, len(b.compile.cold_samples_s), len(h.compile.cold_samples_s)))
        return "near its threshold" if b.model == "a" else None

    sides = [SideJobs("base", jobs[:2], COLD3), SideJobs("head", jobs[:2], COLD3)]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn", measure_all=True,
                                       cold_follow_up=cold_follow_up, extra_cold=2),
                        launcher=launch)
    assert asked == [("a", 3, 3), ("b", 3, 3)]
    extra = [(side, name, used) for side, model, name, _, used in FakeLauncher.caches
             if model == "a" and name in ("cold4", "cold5")]
    # paired, in turn, the side started first alternating as ABBA (cold 1-3: base, head, base)
    assert extra == [("head", "cold4", False), ("base", "cold4", False),
                     ("base", "cold5", False), ("head", "cold5", False)]
    dirs = {cache for _, model, name, cache, _ in FakeLauncher.caches
            if model == "a" and name.startswith("cold")}
    assert len(dirs) == 10  # five a side, none shared
    assert not any("cold4" in d or "cold5" in d for d in FakeLauncher.left)
    for side in ("base", "head"):
        a, b = (next(r.result for r in runs[side] if r.result.model == m) for m in "ab")
        assert len(a.compile.cold_samples_s) == 5
        assert any("2 more cold compiles a side: near its threshold" in n for n in a.notes)
        assert a.latency is not None and a.latency.processes == 2  # timing untouched
        assert len(b.compile.cold_samples_s) == 3
        assert not any("more cold compiles" in n for n in b.notes)


@pytest.mark.parametrize(("timing_why", "cold_why", "timing", "colds"), [
    (None, None, 2, 3),
    ("t", None, 3, 3),
    (None, "c", 2, 4),
    ("t", "c", 3, 4),
])
def test_timing_and_cold_follow_ups_are_asked_once_each_and_queue_their_own_kind(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch, timing_why: str | None,
        cold_why: str | None, timing: int, colds: int) -> None:
    launch = _fake()
    asked: list[str] = []

    def ask(kind: str, why: str | None):  # type: ignore[no-untyped-def]
        def f(b, h):  # type: ignore[no-untyped-def]
            asked.append(kind)
            return why
        return f

    sides = [SideJobs("base", jobs[:1], COLD3), SideJobs("head", jobs[:1], COLD3)]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn", measure_all=True,
                                       follow_up=ask("timing", timing_why), extra_timing=1,
                                       cold_follow_up=ask("cold", cold_why), extra_cold=1),
                        launcher=launch)
    assert asked == ["timing", "cold"]
    for side in ("base", "head"):
        (run,) = runs[side]
        assert run.result.latency is not None and run.result.latency.processes == timing
        assert len(run.result.compile.cold_samples_s) == colds


def test_one_cold_compile_a_side_is_never_followed_up(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    """One sample a side is shown, not judged: nothing to settle, so nothing is asked (the
    first cold compile that failed on one side is the same: fewer than two good samples)."""
    launch = _fake()
    asked: list[str] = []

    def cold_follow_up(b, h):  # type: ignore[no-untyped-def]
        asked.append(b.model)
        return "more"

    sides = [SideJobs("base", jobs[:1], OPTS), SideJobs("head", jobs[:1], OPTS)]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn", measure_all=True,
                                       cold_follow_up=cold_follow_up, extra_cold=3),
                        launcher=launch)
    assert asked == []
    assert [k for _, _, k in FakeLauncher.launches].count("cold") == 2
    assert runs["head"][0].result.status is Status.PASS


def _failing(which: set[tuple[str, str]], cold_s_of_index: bool = False):  # type: ignore[no-untyped-def]
    """Worker outputs where the processes named (side, kind and index, e.g. ("head",
    "cold4")) crash; with ``cold_s_of_index`` cold compile k takes k seconds, and the later
    of a pair's compiles end first."""
    from compilewatch.compiler.protocol import WorkerOutput

    def output(spec, name):  # type: ignore[no-untyped-def]
        side, what = name.split("-", 1)[0], name.rsplit("-", 1)[1]
        if (side, what) in which:
            return WorkerOutput(ok=False, phase=spec.phase, category=Category.CRASH,
                                error="Segmentation fault")
        if cold_s_of_index and what.startswith("cold"):
            k = int(what[4:])
            time.sleep(max(0.0, 0.3 - 0.1 * k))
            return worker_output(spec, cold_s=float(k))
        return worker_output(spec)
    return output


def test_a_side_with_nothing_to_ask_finishes_the_partner_that_waited_for_it(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    """Base has three good cold compiles and waits to ask; head's second and third crashed,
    so there is nothing to ask of the pair: both sides' results come out (head's as the
    failure it is), neither is lost. Timed in the cold process (``--no-warm``) and with
    timing processes alike."""
    for timing in (0, 2):
        launch = _fake(output=_failing({("head", "cold2"), ("head", "cold3")}))
        opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=3, timing_processes=timing)
        sides = [SideJobs("base", jobs[:1], opts), SideJobs("head", jobs[:1], opts)]
        runs = measure_jobs(sides, LoopSettings(isolation="spawn", measure_all=True,
                                           cold_follow_up=lambda b, h: "more", extra_cold=2),
                            launcher=launch)
        assert [r.result.model for r in runs["base"]] == ["a"], timing
        assert [r.result.model for r in runs["head"]] == ["a"], timing
        assert runs["base"][0].result.status is Status.PASS
        assert runs["head"][0].result.category is Category.CRASH
        assert not any(name in ("cold4", "cold5") for _, _, name, _, _ in FakeLauncher.caches)


def test_a_failed_follow_up_process_is_a_note_not_the_models_status(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    """The model passed with the processes its first verdict had; a follow-up that crashes
    (head's cold compile 4, base's timing process 3) is left out with a note."""
    launch = _fake(output=_failing({("head", "cold4"), ("base", "timing3")}))
    sides = [SideJobs("base", jobs[:1], COLD3), SideJobs("head", jobs[:1], COLD3)]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn", measure_all=True,
                                       follow_up=lambda b, h: "t", extra_timing=1,
                                       cold_follow_up=lambda b, h: "c", extra_cold=2),
                        launcher=launch)
    base, head = runs["base"][0].result, runs["head"][0].result
    assert base.status is Status.PASS and head.status is Status.PASS
    assert len(base.compile.cold_samples_s) == 5 and len(head.compile.cold_samples_s) == 4
    assert base.latency is not None and base.latency.processes == 2
    assert head.latency is not None and head.latency.processes == 3
    assert any("follow-up cold compile 4 failed (crash)" in n and "Segmentation fault" in n
               for n in head.notes)
    assert any("follow-up timing process 3 failed (crash)" in n for n in base.notes)


def test_cold_samples_keep_their_index_order_however_the_compiles_finish(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    """Base's and head's cold compile i are paired by position: with compiles side by side
    the later index ends first here, and the samples still come out in index order."""
    launch = _fake(output=_failing(set(), cold_s_of_index=True))
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=3, timing_processes=1)
    sides = [SideJobs("base", jobs[:1], opts), SideJobs("head", jobs[:1], opts)]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn", compile_slots=4, overlap=True,
                                       measure_all=True, cold_follow_up=lambda b, h: "c",
                                       extra_cold=2), launcher=launch)
    for side in ("base", "head"):
        got = [round(x) for x in runs[side][0].result.compile.cold_samples_s]
        assert got == [1, 2, 3, 4, 5], side


def _timing_caches() -> dict[tuple[str, str], dict[str, str]]:
    """Per (side, model): each process's name (cold1, timing2, ...) -> its cache dir."""
    out: dict[tuple[str, str], dict[str, str]] = {}
    for side, model, name, cache, _ in FakeLauncher.caches:
        out.setdefault((side, model), {})[name] = cache
    return out


@pytest.mark.parametrize(("cold", "timing", "expected"), [
    (3, 3, ["cold1", "cold2", "cold3"]),
    (3, 4, ["cold1", "cold2", "cold3", "cold1"]),  # more timing than cold: round again
    (2, 5, ["cold1", "cold2", "cold1", "cold2", "cold1"]),
    (3, 2, ["cold1", "cold2"]),
    (1, 3, ["cold1", "cold1", "cold1"]),
])
@pytest.mark.parametrize("overlap", [False, True])
def test_each_timing_process_times_the_kernels_of_its_own_cold_compile(
        cold: int, timing: int, expected: list[str], overlap: bool, jobs: list[Job],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What a cold compile picks (a Triton kernel's autotuned config) is then a difference
    between timing processes, which the interval sees, not one a whole side shares."""
    launch = _fake()
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=cold, timing_processes=timing)
    sides = [SideJobs("base", jobs[:2], opts), SideJobs("head", jobs[:2], opts)]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn", measure_all=True, overlap=overlap,
                                       compile_slots=2), launcher=launch)
    for (side, model), names in _timing_caches().items():
        assert [names[f"timing{k}"] for k in range(1, timing + 1)] == \
            [names[c] for c in expected], (side, model)
        assert len({names[f"cold{i}"] for i in range(1, cold + 1)}) == cold
    started = [(s, m, n) for s, m, n, _, _ in FakeLauncher.caches]
    for side, model, name, _, used in FakeLauncher.caches:
        if name.startswith("cold"):
            assert not used, f"{side} {model} {name} started on a used cache dir"
        else:  # a timing process starts on a compiled cache, after the compile that made it
            c = expected[int(name.removeprefix("timing")) - 1]
            assert used and started.index((side, model, c)) < started.index((side, model, name))
    assert all(r.result.latency is not None and len(r.result.latency.process_sizes) == timing
               for rs in runs.values() for r in rs)
    kept = [c for _, _, n, c, _ in FakeLauncher.caches if n.startswith("cold") and n != "cold1"]
    assert kept if cold > 1 else not kept
    assert not set(kept) & set(FakeLauncher.left), "a cold compile's cache was left behind"


@pytest.mark.parametrize(("timing", "extra", "kept"), [
    (3, 0, ["cold2", "cold3"]), (2, 0, ["cold2"]), (1, 0, []), (1, 2, ["cold2", "cold3"]),
    (5, 0, ["cold2", "cold3", "cold4"]), (0, 3, [])])
def test_a_cold_compiles_cache_is_kept_only_if_a_timing_process_will_run_on_it(
        timing: int, extra: int, kept: list[str], jobs: list[Job],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Four cold compiles a side: a cache that no timing process (a follow-up's included) can
    use is removed when its compile ends; the others stay until the model is done, then go."""
    at_done: dict[str, list[str]] = {}
    done = schedule.Loop._done

    def spy(self, sj, run):  # type: ignore[no-untyped-def]
        at_done[sj.side] = [f"cold{k}" for k in range(2, 5) if sj.cold_dir(k).is_dir()]
        done(self, sj, run)

    monkeypatch.setattr(schedule.Loop, "_done", spy)
    launch = _fake()
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=4, timing_processes=timing)
    sides = [SideJobs("base", jobs[:1], opts), SideJobs("head", jobs[:1], opts)]
    measure_jobs(sides, LoopSettings(isolation="spawn", measure_all=True,
                                follow_up=(lambda b, h: None) if extra else None,
                                extra_timing=extra), launcher=launch)
    assert at_done == {"base": kept, "head": kept}
    later = [c for _, _, n, c, _ in FakeLauncher.caches if n.startswith("cold") and n != "cold1"]
    assert len(later) == 6 and not set(later) & set(FakeLauncher.left)


def test_a_timing_process_whose_cold_compile_failed_runs_on_the_first_ones_cache(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    def output(spec, name):  # type: ignore[no-untyped-def]
        out = worker_output(spec)
        if name.endswith("-cold2"):
            return out.model_copy(update={"ok": False, "category": Category.INFRA,
                                          "error": "killed"})
        return out

    launch = _fake(output=output)
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=3, timing_processes=3)
    [run] = measure_jobs([SideJobs("run", jobs[:1], opts)], LoopSettings(isolation="spawn"),
                         launcher=launch)["run"]
    [names] = _timing_caches().values()
    assert [names["timing1"], names["timing2"], names["timing3"]] == \
        [names["cold1"], names["cold1"], names["cold3"]]
    assert run.result.latency is not None and len(run.result.latency.process_sizes) == 3


def test_unchanged_by_construction_drops_the_timing_processes_that_wait_for_a_cache(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    launch = _fake()
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=3, timing_processes=3)
    sides = [SideJobs("base", jobs[:1], opts), SideJobs("head", jobs[:1], opts)]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn", overlap=True, compile_slots=4),
                        launcher=launch)
    assert not [n for _, _, n, _, _ in FakeLauncher.caches if n.startswith("timing")]
    assert all(r.result.timing_skipped for rs in runs.values() for r in rs)


def test_with_a_reused_cache_root_every_timing_process_runs_on_it(
        jobs: list[Job], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    launch = _fake()
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=3, timing_processes=3,
                      cache_root=tmp_path / "caches")
    measure_jobs([SideJobs("run", jobs[:1], opts)], LoopSettings(isolation="spawn"),
                 launcher=launch)
    [names] = _timing_caches().values()
    assert {names[f"timing{k}"] for k in (1, 2, 3)} == {names["cold1"]}
    assert Path(names["cold1"]).is_relative_to(tmp_path / "caches")


def test_two_configs_of_one_model_never_share_a_cache_dir(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    launch = _fake()
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=2, timing_processes=2)
    two = [jobs[0], Job(jobs[0].suite, jobs[0].spec, Config(dynamic=True))]
    measure_jobs([SideJobs("run", two, opts)], LoopSettings(isolation="spawn", overlap=True,
                                                    compile_slots=4), launcher=launch)
    colds = [(cache, used) for _, _, n, cache, used in FakeLauncher.caches
             if n.startswith("cold")]
    assert len({c for c, _ in colds}) == 4 and not any(u for _, u in colds)


@pytest.mark.parametrize("case", ["gpu", "gpu-measure-all", "cpu", "other-environment",
                                  "one-side"])
def test_a_changed_gpu_models_timing_processes_also_time_base_eager_model(
        case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Model b's graph differs on head (its ``gm`` component), model a's only in a compiler
    key: on a GPU with two sides in one environment, every timing process of b, on both
    sides, is told to time base's eager model of b as well (the host's witness its own eager
    cannot be), and the result keeps those samples per process; a's processes are not, nor any
    on a CPU, across environments or with one side."""
    from dataclasses import replace

    from tests.factories import BASE_COMPONENTS

    path = tmp_path / "loop_suite.py"
    path.write_text(SUITE)
    suite = load_suite(str(path))
    config = Config(device="cpu" if case == "cpu" else "cuda")
    gpu_jobs = [Job(suite, suite.models[m], config) for m in ("a", "b")]
    seen: list[tuple[str, str, str | None]] = []

    def output(spec, name):  # type: ignore[no-untyped-def]
        head = name.startswith("head")
        if head and spec.phase == "cold":
            time.sleep(0.2)  # base's timing could start before head's keys are in
        if spec.phase == "warm":
            seen.append((name.split("-")[0], spec.model, spec.reference_suite,
                         spec.reference_code.root if spec.reference_code else None))
        if spec.model == "b" and head:
            return worker_output(spec, fx_key="fbchanged",
                                 components={**BASE_COMPONENTS, "gm": "gmotherxxxxxxxxx"})
        return worker_output(spec, fx_key="fachanged" if head else None)

    launch = _fake(output=output)
    opts = RunOptions(rounds=3, block_ms=1.0, cold_processes=2, timing_processes=3)
    sides = [SideJobs("base", gpu_jobs, replace(opts, watch_root=tmp_path / "base")),
             SideJobs("head", gpu_jobs, replace(opts, watch_root=tmp_path / "head"))]
    if case == "one-side":
        sides = sides[:1]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn", compile_slots=2, overlap=True,
                                       same_environment=case != "other-environment",
                                       measure_all=case == "gpu-measure-all"), launcher=launch)
    refs = {(side, model): {r for s, m, r, _ in seen if (s, m) == (side, model)}
            for side, model, _, _ in seen}
    b = runs[sides[-1].name][1].result.latency
    assert b is not None
    if case.startswith("gpu"):
        assert refs == {("base", "a"): {None}, ("head", "a"): {None},
                        ("base", "b"): {suite.source}, ("head", "b"): {suite.source}}
        # what importing base's suite brings from base's checkout is undone after
        assert {root for _, m, r, root in seen if r} == {str(tmp_path / "base")}
        assert b.reference_sizes == [3, 3, 3] and len(b.reference_us) == 9
        assert len(b.referenced_per_process()) == 3
    else:
        assert {r for s, m, r, _ in seen} == {None}
        assert b.reference_sizes == [] and b.referenced_per_process() == []


def test_a_single_side_run_is_alone(jobs: list[Job]) -> None:
    """One side is measured ``Alone``, never paired: no follow-up is asked and nothing waits
    for a partner, whatever the settings for two sides say."""
    settings = LoopSettings(isolation="spawn", follow_up=lambda b, h: "more", extra_timing=2)
    one = [SideJobs("run", jobs[:1], OPTS)]
    assert not isinstance(schedule.pairing_of(one, settings), Pairing)
    assert isinstance(schedule.pairing_of([*one, SideJobs("b", jobs[:1], OPTS)], settings),
                      Pairing)
    [run] = measure_jobs(one, settings, launcher=_fake())["run"]
    assert run.result.status is Status.PASS
    assert run.result.latency is not None and run.result.latency.processes == 2


def test_a_changed_model_gets_a_profile_process_a_side_after_everything_else(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    """``profile`` is asked once a model's processes are all in on both sides, follow-ups
    included; a reason queues one profile process a side, after them, and the results hold
    its kernels and the reason. Model b's answer is None: no profile process."""
    launch = _fake()
    asked: list[tuple[str, int]] = []

    def profile(b, h):  # type: ignore[no-untyped-def]
        asked.append((b.model, h.latency.processes))
        return "compiled time +8.2%, regression" if b.model == "a" else None

    sides = [SideJobs("base", jobs[:2], OPTS), SideJobs("head", jobs[:2], OPTS)]
    runs = measure_jobs(sides, LoopSettings(
        isolation="spawn", measure_all=True, follow_up=lambda b, h: "close" if b.model == "a"
        else None, extra_timing=1, profile=profile), launcher=launch)
    assert asked == [("a", 3), ("b", 2)]  # after a's follow-up: 2 + 1 timing processes
    a = [(side, phase) for side, model, phase in FakeLauncher.launches if model == "a"]
    assert a[-2:] in ([("base", "profile"), ("head", "profile")],
                      [("head", "profile"), ("base", "profile")])
    assert [p for _, p in a].count("profile") == 2
    assert not any(m == "b" and p == "profile" for _, m, p in FakeLauncher.launches)
    for side in ("base", "head"):
        ra, rb = (next(r.result for r in runs[side] if r.result.model == m) for m in "ab")
        assert ra.kernels is not None and ra.kernels.kernels[0].name == "cpp_fused_sin_0"
        assert "kernel profile: compiled time +8.2%, regression" in ra.notes
        assert rb.kernels is None


def test_profile_kernels_profiles_every_timed_model_on_one_side_or_two(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``profile_kernels`` every timed model gets a profile process after its timing
    processes, in a run of one side too; a model not timed (the same compiled code on both
    sides) gets none."""
    def output(spec, name):  # type: ignore[no-untyped-def]
        key = "fbchanged" if spec.model == "b" and name.startswith("head") else None
        return worker_output(spec, fx_key=key)

    launch = _fake(output=output)
    runs = measure_jobs([SideJobs("run", jobs[:2], OPTS)],
                        LoopSettings(isolation="spawn", profile_kernels=True), launcher=launch)
    assert [(m, p) for _, m, p in FakeLauncher.launches] == [
        ("a", "cold"), ("a", "warm"), ("a", "warm"), ("a", "profile"),
        ("b", "cold"), ("b", "warm"), ("b", "warm"), ("b", "profile")]
    assert all(r.result.kernels is not None for r in runs["run"])
    sides = [SideJobs("base", jobs[:2], OPTS), SideJobs("head", jobs[:2], OPTS)]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn", profile_kernels=True),
                        launcher=launch)
    profiled = sorted((s, m) for s, m, p in FakeLauncher.launches if p == "profile")
    assert profiled == [("base", "b"), ("head", "b")]  # a: not timed, nothing to profile
    assert all("kernel profile" not in n for side in runs.values() for r in side
               for n in r.result.notes)


def test_the_profile_process_runs_on_a_copy_of_the_warm_cache(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    """On a CPU the profile process compiles graphs of its own (its setting enters the FX
    key): it gets a copy of the first cold compile's cache, holding what that compile and the
    timing processes on it left there, and writes nothing where they ran."""
    seen: list[tuple[list[str], list[str]]] = []

    def output(spec, name):  # type: ignore[no-untyped-def]
        if spec.phase == "profile":
            timing = Path(next(c for _, m, k, c, _ in FakeLauncher.caches if k == "timing1"))
            mine = Path(FakeLauncher.caches[-1][3])
            seen.append((sorted(p.name for p in timing.iterdir()),
                         sorted(p.name for p in mine.iterdir())))
        return worker_output(spec)

    launch = _fake(output=output)
    measure_jobs([SideJobs("run", jobs[:1], OPTS)],
                 LoopSettings(isolation="spawn", profile_kernels=True), launcher=launch)
    [(timing, mine)] = seen
    assert timing == [f"compiled-by-run-loop-a-cpu-default-float32-auto-{p}"
                      for p in ("cold1", "timing1", "timing2")]
    assert set(mine) == {*timing, "compiled-by-run-loop-a-cpu-default-float32-auto-profile1"}
    profile_cache = FakeLauncher.caches[-1][3]
    assert profile_cache != FakeLauncher.caches[1][3] and FakeLauncher.caches[-1][4]


def test_a_failed_profile_process_is_a_note_not_the_models_status(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    from compilewatch.compiler.protocol import WorkerOutput

    def output(spec, name):  # type: ignore[no-untyped-def]
        if spec.phase == "profile":
            return WorkerOutput(ok=False, phase="profile", category=Category.RUNTIME_ERROR,
                                error="profiler blew up")
        return worker_output(spec)

    launch = _fake(output=output)
    runs = measure_jobs([SideJobs("run", jobs[:1], OPTS)],
                        LoopSettings(isolation="spawn", profile_kernels=True), launcher=launch)
    (run,) = runs["run"]
    assert run.result.status is Status.PASS and run.result.kernels is not None
    assert run.result.kernels.unknown_reason == "the profile process failed (runtime_error)"
    assert any("kernel profile failed (runtime_error): profiler blew up" in n
               for n in run.result.notes)


def test_a_model_not_timed_is_finished_once_a_side_when_profiles_may_be_asked(
        jobs: list[Job], monkeypatch: pytest.MonkeyPatch) -> None:
    """Model a is the same compiled code on both sides: not timed, so no profile; deciding
    that for the pair finishes the partner too, and each side still has one result of it
    (it had two: the partner was finished again by its own settling). Model b is profiled."""
    def output(spec, name):  # type: ignore[no-untyped-def]
        key = "fbchanged" if spec.model == "b" and name.startswith("head") else None
        return worker_output(spec, fx_key=key)

    launch = _fake(output=output)
    sides = [SideJobs("base", jobs[:2], OPTS), SideJobs("head", jobs[:2], OPTS)]
    runs = measure_jobs(sides, LoopSettings(isolation="spawn", profile=lambda b, h: "moved"),
                        launcher=launch)
    for side in ("base", "head"):
        assert sorted(r.result.model for r in runs[side]) == ["a", "b"]
    assert sorted((s, m) for s, m, p in FakeLauncher.launches if p == "profile") == [
        ("base", "b"), ("head", "b")]
