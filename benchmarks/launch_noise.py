"""Where does a launch-bound model's process-to-process noise come from? Numbers in
docs/verdict-quality.md.

    python benchmarks/launch_noise.py --processes 4

A launch-bound model (20 tiny Linear layers, batch 8) is timed the way a timing process times
it (``compiler/timing.py``: interleaved eager/compiled blocks, pinned to one core, after a
warm-up), in fresh processes, under three conditions taken in turn so that drift hits each alike:

- ``idle``: nothing else runs;
- ``cpu-load``: every other core spins (what concurrent compiles do to the host);
- ``gpu-warm``: idle, and the warm-up is a large matmul (the GPU's clocks at their top) rather
  than the model itself;
- ``ctx-idle``: three other processes hold a CUDA context and do nothing (what waiting
  workers do);
- ``gpu-others``: three other processes keep launching small kernels (GPU work that no lock
  holds back: the device time-slices between contexts);
- ``moved``: built and compiled on the other cores, then its main thread pinned to the timing
  core, as a ``pr`` timing process is (its other threads stay where they were, and its memory
  may sit on another NUMA node than the core it times on); ``moved-load``: the same while
  every other core spins; ``moved-all``, ``moved-all-load``: the same, but every thread is
  moved to the timing core (``cpus.pin_all``, what a timing process does since);
- ``forked``: forked, like a ``pr`` worker, from a process that imported the compiler stack;
- ``hashseed``: idle, with ``PYTHONHASHSEED=0`` (every process the same string hashes, so the
  same dict and set layouts); ``no-aslr``: idle, with address-space randomisation off for the
  process (``personality(ADDR_NO_RANDOMIZE)``, then re-executed); ``fixed``: both. If the spread
  between processes is the layout of the interpreter's objects in memory, these remove it.

It also prints the host's NUMA nodes and the GPU's local cores, as sysfs gives them. With
``--kernels N`` it instead runs N fresh processes that each print the model's eager time and the
GPU kernels one call launches (torch.profiler): whether processes differ in the kernels cuBLAS
picks for the tiny matmuls.

Each process also times a fixed reference (20 tiny eager adds: the same code whatever a pull
request changes), to see whether it moves with the model and could witness the host's state.
It prints, per condition, each process's medians and their spread ((max - min) / median).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONDITIONS = ("idle", "cpu-load", "gpu-warm", "ctx-idle", "gpu-others", "moved", "moved-load",
              "moved-all", "moved-all-load", "forked", "hashseed", "no-aslr", "fixed")
LOADED = ("cpu-load", "moved-load", "moved-all-load")
_OTHER = """
import sys, time, torch
x = torch.randn(64, 64, device="cuda")
torch.cuda.synchronize()
print("ready", flush=True)
end = time.monotonic() + 60
while time.monotonic() < end:
    if sys.argv[1] == "busy":
        for _ in range(100):
            x = torch.tanh(x)
        torch.cuda.synchronize()
    else:
        time.sleep(0.05)
"""


def _topology() -> str:
    """NUMA nodes with their cores, and each NVIDIA device's local cores (sysfs)."""
    lines = []
    for node in sorted(Path("/sys/devices/system/node").glob("node[0-9]*")):
        lines.append(f"{node.name}: cores {(node / 'cpulist').read_text().strip()}")
    for dev in sorted(Path("/sys/bus/pci/devices").glob("*")):
        try:
            if (dev / "vendor").read_text().strip() != "0x10de" or \
                    not (dev / "class").read_text().startswith("0x03"):
                continue
            local = (dev / "local_cpulist").read_text().strip()
            node = (dev / "numa_node").read_text().strip()
            lines.append(f"GPU {dev.name}: local cores {local}, NUMA node {node}")
        except OSError:
            continue
    return "; ".join(lines) or "no NUMA or PCI information"


def _no_aslr() -> None:
    """Re-execute this process with address-space randomisation off (once)."""
    if os.environ.get("LAUNCH_NOISE_NO_ASLR") == "1":
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    current = libc.personality(0xFFFFFFFF)
    if current < 0 or libc.personality(current | 0x0040000) < 0:
        raise SystemExit("personality(ADDR_NO_RANDOMIZE) refused on this host")
    os.environ["LAUNCH_NOISE_NO_ASLR"] = "1"
    os.execv(sys.executable, [sys.executable, *sys.argv])


def _child(condition: str, core: int) -> None:
    if condition in ("no-aslr", "fixed"):
        _no_aslr()
    if condition == "forked":
        import torch._dynamo  # the fork server's imports
        import torch._inductor

        pid = os.fork()
        if pid:
            _, status = os.waitpid(pid, 0)
            sys.exit(os.waitstatus_to_exitcode(status))
    moved = condition.startswith("moved")
    if moved:
        os.sched_setaffinity(0, set(os.sched_getaffinity(0)) - {core} or {core})
    else:
        os.sched_setaffinity(0, {core})
    import torch

    from compilewatch.compiler import cpus, timing

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        torch.set_num_threads(1)  # as a pinned CPU worker does (one core, one thread)
    net = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(20)]).to(device)
    x = torch.randn(8, 32, device=device)
    compiled = torch.compile(net)
    with torch.no_grad():
        compiled(x)
        small = [torch.randn(8, 32, device=device) for _ in range(2)]

        def reference() -> None:
            y = small[0]
            for _ in range(20):
                y = y + small[1]

        if moved and "-all" in condition:
            cpus.pin_all([core])
        elif moved:
            os.sched_setaffinity(0, {core})
        if condition == "gpu-warm" and device == "cuda":
            big = torch.randn(4096, 4096, device=device)
            timing.warm_up(lambda: big @ big, device, 0.5)
        else:
            timing.warm_up(lambda: compiled(x), device, 0.5)
        t = timing.time_interleaved(lambda: net(x), lambda: compiled(x), device, 30, 20.0)
        ref = timing.time_interleaved(reference, reference, device, 10, 20.0)
    clock = ""
    if device == "cuda":
        clock = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader"],
                               capture_output=True, text=True).stdout.strip()
    print(json.dumps({"eager": statistics.median(t.eager_us),
                      "compiled": statistics.median(t.compiled_us),
                      "reference": statistics.median(ref.eager_us + ref.compiled_us),
                      "host_fraction": t.host_fraction, "clock": clock}))


def _kernels(core: int) -> None:
    """One process: the model's eager time per call and the GPU kernels one call launches,
    with their device time (torch.profiler). Whether whole processes differ in what cuBLAS
    picks for the tiny matmuls, which eager and compiled code share, and the reference lacks."""
    os.sched_setaffinity(0, {core})
    import torch
    from torch.profiler import ProfilerActivity, profile

    from compilewatch.compiler import timing

    net = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(20)]).cuda()
    x = torch.randn(8, 32, device="cuda")
    with torch.no_grad():
        timing.warm_up(lambda: net(x), "cuda", 0.5)
        eager = timing.time_interleaved(lambda: net(x), lambda: net(x), "cuda", 20, 20.0).eager_us
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                net(x)
            torch.cuda.synchronize()
    kernels = {e.key[:90]: round(getattr(e, "device_time_total", 0.0) / 10, 1)
               for e in prof.key_averages() if getattr(e, "device_time_total", 0.0) > 0}
    print(json.dumps({"eager": statistics.median(eager), "kernels": kernels}))


def kernels(processes: int, core: int) -> None:
    """``--kernels N``: N fresh processes of ``_kernels``, one line each."""
    for _ in range(processes):
        out = subprocess.run([sys.executable, __file__, "--kernels-child"], check=True,
                             capture_output=True, text=True).stdout
        row = json.loads(out.strip().splitlines()[-1])
        print(f"eager {row['eager']:.0f} µs per call; kernels per call (µs): "
              + "; ".join(f"{k} {v}" for k, v in sorted(row["kernels"].items())), flush=True)


def _spin(stop: float) -> None:
    while time.monotonic() < stop:
        pass


def _others(condition: str, cores: list[int], env: dict[str, str]) -> list[subprocess.Popen]:
    """Other processes with a CUDA context of their own, started and ready."""
    if condition not in ("ctx-idle", "gpu-others"):
        return []
    mode = "busy" if condition == "gpu-others" else "idle"
    procs = [subprocess.Popen([sys.executable, "-c", _OTHER, mode], env=env, text=True,
                              stdout=subprocess.PIPE) for _ in range(3)]
    for p, core in zip(procs, cores, strict=False):
        os.sched_setaffinity(p.pid, {core})
    for p in procs:
        if p.stdout is None or p.stdout.readline().strip() != "ready":
            for q in procs:
                q.kill()
            raise SystemExit(f"condition {condition} needs CUDA: its other processes did "
                             "not start")
    return procs


def _spread(xs: list[float]) -> str:
    return f"{(max(xs) - min(xs)) / statistics.median(xs):.0%}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--condition", action="append", choices=CONDITIONS, default=None)
    ap.add_argument("--child", choices=CONDITIONS)
    ap.add_argument("--kernels", type=int, default=0, metavar="N",
                    help="Instead: N fresh processes, each the model's eager time and kernels.")
    ap.add_argument("--kernels-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    conditions = tuple(args.condition or CONDITIONS)
    cores = sorted(os.sched_getaffinity(0))
    if args.kernels_child:
        _kernels(cores[-1])
        return
    if args.kernels:
        kernels(args.kernels, cores[-1])
        return
    if args.child:
        _child(args.child, cores[-1])
        return
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(prefix="launch-noise-"))
    cmd = [sys.executable, __file__, "--child"]
    subprocess.run([*cmd, "idle"], env=env, check=True, capture_output=True)  # warms the cache
    rows: dict[str, list[dict]] = {c: [] for c in conditions}
    for _ in range(args.processes):
        for condition in conditions:
            spinners: list = []
            others = _others(condition, cores[:-1], env)
            if condition in LOADED:
                stop = time.monotonic() + 60
                for core in cores[:-1]:
                    p = multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
                    p.start()
                    os.sched_setaffinity(p.pid, {core})
                    spinners.append(p)
            child_env = dict(env, PYTHONHASHSEED="0") if condition in ("hashseed", "fixed") \
                else env
            try:
                out = subprocess.run([*cmd, condition], env=child_env, check=True,
                                     capture_output=True, text=True).stdout
            finally:
                for spinner in spinners:
                    spinner.terminate()
                    spinner.join()
                for other in others:
                    other.terminate()
                    other.wait()
            rows[condition].append(json.loads(out.strip().splitlines()[-1]))
            print(condition, rows[condition][-1], file=sys.stderr, flush=True)
        print(table(rows), flush=True)  # after every round: a run cut short keeps it


def table(rows: dict[str, list[dict]]) -> str:
    lines = [f"Topology: {_topology()}", "",
             "| condition | eager µs per process | compiled µs | reference µs | spread "
             "(eager / compiled / reference) | SM clock after |",
             "| --- | --- | --- | --- | --- | --- |"]
    for condition, rs in rows.items():
        if not rs:
            continue
        cols = {k: [r[k] for r in rs] for k in ("eager", "compiled", "reference")}
        lines.append(f"| {condition} | " + " | ".join(", ".join(f"{v:.0f}" for v in vs)
                                                   for vs in cols.values())
                     + f" | {' / '.join(_spread(vs) for vs in cols.values())} | "
                     + ", ".join(r["clock"] for r in rs) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
