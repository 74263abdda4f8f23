"""The profile process (``compiler/kernels.py``) on Inductor's real C++ kernels, and its two
readers: the chrome trace (``compiler/kerneltrace.py``, also on a CUDA-shaped trace: this
machine has no GPU) and Inductor's description of its graphs (``compiler/kernelcode.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compilewatch.compiler import kernelcode, kerneltrace
from compilewatch.compiler.job import RunOptions
from compilewatch.compiler.plan import plan_jobs
from compilewatch.compiler.schedule import LoopSettings, SideJobs, measure_jobs
from compilewatch.core.kernels import KernelProfile
from compilewatch.suites.loader import load_suite
from tests.conftest import DATA

# one test process makes the kernel_profiles fixture and runs every test that reads it
# (scripts/test.sh: --dist loadgroup); the other goes on with the rest
pytestmark = pytest.mark.xdist_group("kernel_profiles")
SUITE = "kernels_suite.py"


def _profile(profiles: dict[str, Any], name: str) -> KernelProfile:
    out = profiles[name]
    assert out.ok, out.error
    assert out.kernels is not None
    return out.kernels  # type: ignore[no-any-return]


def _by_name(p: KernelProfile) -> dict[str, Any]:
    return {k.name: k for k in p.kernels}


def _lines(*marks: str) -> list[int]:
    text = (DATA / "suites" / SUITE).read_text().splitlines()
    return [next(i for i, line in enumerate(text, 1) if mark in line) for mark in marks]


def test_each_generated_kernel_is_named_timed_and_traced_to_the_users_lines(
        kernel_profiles: dict[str, Any]) -> None:
    p = _profile(kernel_profiles, "base")
    kernels = _by_name(p)
    assert set(kernels) == {"cpp_fused_add_cos_mul_sin_0", "cpp_fused_mul_tanh_1", "aten::mm"}
    assert (p.activity, p.steps, p.graphs, p.launches_per_step) == ("cpu", 20, ["0_inference"],
                                                                    3.0)
    assert p.own_compile  # cpp.enable_kernel_profile is part of the FX key: it compiled its own
    first, mm = kernels["cpp_fused_add_cos_mul_sin_0"], kernels["aten::mm"]
    assert (first.kind, first.graph, first.calls, first.launches) == ("generated",
                                                                      "0_inference", 20, 20)
    assert first.total_us > 0 and first.step_us > 0 and mm.kind == "extern"
    assert {o.aten for o in first.origins} >= {"aten.sin", "aten.cos", "aten.mul", "aten.add"}
    a, b, y = _lines("# line A", "# line B", "y = b @ w")
    assert {o.location for o in first.origins} == {f"{SUITE}:{a}", f"{SUITE}:{b}"}
    assert any(o.code and o.code.startswith("a = torch.sin(x * 2 + 1)") for o in first.origins)
    assert [(o.aten, o.location) for o in mm.origins] == [("aten.mm", f"{SUITE}:{y}")]
    assert mm.shapes == "256x128, 128x128, 256x128"
    assert p.device_us >= max(k.step_us for k in p.kernels)


def test_the_chrome_trace_is_kept_for_perfetto_with_every_profiled_step(
        kernel_profiles: dict[str, Any]) -> None:
    trace = json.loads(Path(kernel_profiles["base.trace"]).read_text())
    names = [e.get("name") for e in trace["traceEvents"]]
    assert names.count(kerneltrace.STEP) == 20
    assert names.count("graph_0_cpp_fused_mul_tanh_1") == 20
    assert any(str(n).startswith("## Call CompiledFxGraph ") for n in names)


def test_a_second_profile_loads_the_first_ones_graphs_and_their_origins(
        kernel_profiles: dict[str, Any]) -> None:
    """On the cache a profile process compiled into, the next one hits it (as a GPU profile
    always does: no setting of its own enters the key) and still knows every kernel's
    origins: the cache entry keeps what the compile recorded."""
    first, again = _profile(kernel_profiles, "base"), _profile(kernel_profiles, "again")
    assert not again.own_compile
    assert {k.name: [o.location for o in k.origins] for k in again.kernels} == \
        {k.name: [o.location for o in k.origins] for k in first.kernels}


def test_two_extern_calls_of_one_op_are_two_kernels_with_their_own_origins(
        kernel_profiles: dict[str, Any]) -> None:
    p = _profile(kernel_profiles, "added")
    mms = [k for k in p.kernels if k.name == "aten::mm"]
    added, y = _lines("if added:", "y = b @ w")
    assert sorted(o.location for k in mms for o in k.origins) == sorted(
        [f"{SUITE}:{added}", f"{SUITE}:{y}"])
    assert all(k.calls == 20 for k in mms)
    assert set(_by_name(p)) == {"cpp_fused_relu_0", "cpp_fused_add_cos_mul_sin_1",
                                "cpp_fused_mul_tanh_2", "aten::mm"}


def test_a_graph_break_gives_two_graphs_and_a_custom_op_an_extern_kernel(
        kernel_profiles: dict[str, Any]) -> None:
    broken = _profile(kernel_profiles, "broken")
    assert broken.graphs == ["0_inference", "1_inference"]
    assert {k.name: k.graph for k in broken.kernels} == {
        "cpp_fused_add_mul_sin_0": "0_inference", "cpp_fused_cos_mul_0": "1_inference",
        "aten::mm": "1_inference", "cpp_fused_mul_tanh_1": "1_inference"}
    fenced = _profile(kernel_profiles, "fenced")
    fence = _by_name(fenced)["kernels_suite::fence"]
    assert fence.kind == "extern" and fence.calls == 20
    assert fenced.launches_per_step == 5.0


def test_the_profile_process_writes_nothing_into_the_timing_processes_cache(
        tmp_path: Path) -> None:
    """A run with ``profile_kernels`` on a reused cache root (which outlives the run): the
    cold compile and the timing process used it; the profile process compiled graphs of its
    own (their C++ code records each kernel for the profiler), on a copy. None of its code is
    in the root."""
    suite = load_suite(str(DATA / "suites" / SUITE))
    jobs = plan_jobs([suite], device="cpu", models=["base"])
    opts = RunOptions(rounds=2, block_ms=1.0, cold_processes=1, timing_processes=1,
                      cache_root=tmp_path / "cache", extra_env={"OMP_NUM_THREADS": "1"})
    (run,) = measure_jobs([SideJobs("run", jobs, opts)],
                          LoopSettings(profile_kernels=True))["run"]
    assert run.result.kernels is not None and run.result.kernels.own_compile
    assert run.result.latency is not None
    code = [p.read_text(errors="replace") for p in (tmp_path / "cache").rglob("*.py")]
    assert any("cpp_fused_mul_tanh_1" in c for c in code)  # the timing processes' graph
    assert not any("RAIIAtenRecordFunctionHandle" in c for c in code)


def _cuda_trace() -> dict[str, Any]:
    """A trace as ``torch.profiler`` exports it with CUDA activity: a step holding one
    compiled graph that launches a Triton kernel (its launcher's ``cpu_op``, then
    ``cuLaunchKernel``), an extern ``aten::mm`` (``cudaLaunchKernel`` of a cuBLAS kernel),
    and a CUDA graph's replay (``cudaGraphLaunch``, two kernels); an eager op outside the
    graph, and one that launches nothing; device kernels linked by CUPTI's correlation id."""
    def x(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args: Any) -> dict[str, Any]:
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts,
                "dur": dur, "args": args}

    events = [
        x("user_annotation", kerneltrace.STEP, 0, 100),
        x("user_annotation", "## Call CompiledFxGraph fabc ##", 1, 60),
        x("cpu_op", "triton_poi_fused_add_gelu_0", 2, 10, kernel_backend="triton",
          kernel_name="triton_poi_fused_add_gelu_0", kernel_num_gb=0.5),
        x("cuda_driver", "cuLaunchKernel", 3, 5, correlation=11),
        x("cpu_op", "aten::mm", 15, 20, **{"Input Dims": [[64, 32], [32, 16]]}),
        x("cuda_runtime", "cudaLaunchKernel", 20, 4, correlation=12),
        x("cuda_runtime", "cudaGraphLaunch", 40, 6, correlation=13),
        x("cpu_op", "aten::add_", 70, 10),
        x("cuda_runtime", "cudaLaunchKernel", 72, 3, correlation=14),
        x("cpu_op", "aten::empty_strided", 85, 2),  # the host's alone: no kernel
        x("kernel", "triton_poi_fused_add_gelu_0", 10, 7.5, tid=7, correlation=11),
        x("kernel", "sm90_xmma_gemm_f32f32", 25, 30, tid=7, correlation=12),
        x("kernel", "triton_red_fused_sum_1", 60, 4, tid=7, correlation=13),
        x("kernel", "triton_poi_fused_mul_2", 65, 2, tid=7, correlation=13),
        x("kernel", "void at::native::vectorized_elementwise_kernel", 80, 1, tid=7,
          correlation=14),
        x("kernel", "orphan", 500, 1, tid=7, correlation=99),
    ]
    return {"traceEvents": events}


def test_on_cuda_device_time_goes_to_the_call_that_launched_it() -> None:
    calls = kerneltrace.read(_cuda_trace())
    got = {(c.name, c.kind, c.graph, c.us, c.launches) for c in calls.calls}
    assert got == {
        ("triton_poi_fused_add_gelu_0", "generated", "fabc", 7.5, 1),
        ("aten::mm", "extern", "fabc", 30.0, 1),
        ("triton_red_fused_sum_1", "generated", "fabc", 4.0, 0),  # a CUDA graph's replay
        ("triton_poi_fused_mul_2", "generated", "fabc", 2.0, 0),
        ("aten::add_", "eager", None, 1.0, 1)}
    assert (calls.steps, calls.launches, calls.graphs, calls.unlinked) == (1, 4, ["fabc"], 1)
    triton = next(c for c in calls.calls if c.name == "triton_poi_fused_add_gelu_0")
    assert triton.gb == 0.5
    assert next(c for c in calls.calls if c.name == "aten::mm").shapes == "64x32, 32x16"


TRITON_CODE = '''# AOT ID: ['0_forward']
from torch._inductor.async_compile import AsyncCompile

# kernel path: /tmp/torchinductor_ci/ab/cabc.py
# Topologically Sorted Source Nodes: [add, gelu], Original ATen: [aten.add, aten.gelu]
# Source node to ATen node mapping:
#   add => add
#   gelu => erf, mul_1
# Graph fragment:
#   %arg0_1 : Tensor "f32[1024][1]cuda:0" = PlaceHolder[target=arg0_1]
triton_poi_fused_add_gelu_0 = async_compile.triton('triton_poi_fused_add_gelu_0', \'\'\'
@triton_heuristics.pointwise(size_hints={'x': 1024},
    inductor_meta={'kernel_name': 'triton_poi_fused_add_gelu_0', 'kernel_num_gb': 0.25})
@triton.jit
def triton_poi_fused_add_gelu_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    pass
\'\'\', device_str='cuda')

class Runner:
    def call(self, args):
        # Topologically Sorted Source Nodes: [add, gelu], Original ATen: [aten.add, aten.gelu]
        triton_poi_fused_add_gelu_0.run(arg0_1, buf0, 1024, stream=stream0)
        # Topologically Sorted Source Nodes: [matmul], Original ATen: [aten.mm]
        extern_kernels.mm(buf0, arg1_1, out=buf1)
'''
POST_GRAD = '''class <lambda>(torch.nn.Module):
    def forward(self, arg0_1: "f32[1024]", arg1_1: "f32[1024, 8]"):
        # File: /work/repo/models.py:12 in forward, code: y = gelu(x + 1)
        add: "f32[1024]" = torch.ops.aten.add.Tensor(arg0_1, 1)
        mul_1: "f32[1024]" = torch.ops.aten.mul.Tensor(add, 0.5)
        erf: "f32[1024]" = torch.ops.aten.erf.default(mul_1)

        # File: /work/repo/models.py:13 in forward, code: return y @ w
        mm: "f32[8]" = torch.ops.aten.mm.default(erf, arg1_1)
'''


def test_triton_kernels_origins_come_from_the_comment_above_their_definition() -> None:
    """The GPU's generated code (the format of torch 2.13's Triton codegen): each kernel's
    source nodes and the post-grad nodes they became, each post-grad node's ATen op and the
    user's line; the bytes a call moves where Inductor estimated them; the graph named by
    the FX cache lookup that ends its events."""
    events = [("inductor_post_grad_graph", POST_GRAD), ("inductor_output_code", TRITON_CODE),
              ("fx_graph_cache_hit", json.dumps({"key": "fabc"}))]
    (graph,) = kernelcode.graphs(events, shorten=lambda p: p.rsplit("/", 1)[-1])
    assert (graph.key, graph.aot_id) == ("fabc", "0_forward")
    origins = graph.kernels["triton_poi_fused_add_gelu_0"]
    assert [(o.node, o.aten, o.location) for o in origins] == [
        ("add", "aten.add", "models.py:12"), ("gelu", "aten.erf", "models.py:12"),
        ("gelu", "aten.mul", "models.py:12")]
    assert origins[0].code == "y = gelu(x + 1)"
    assert graph.gb == {"triton_poi_fused_add_gelu_0": 0.25}
    [(op, mm)] = graph.externs
    assert op == "aten::mm" and [(o.node, o.aten) for o in mm] == [("matmul", "aten.mm")]


def test_past_max_kernels_the_shortest_are_left_out_and_counted() -> None:
    from compilewatch.compiler.kernels import summarise
    from compilewatch.compiler.kerneltrace import Call, Calls
    from compilewatch.core.kernels import MAX_KERNELS

    n = MAX_KERNELS + 44
    calls = Calls(calls=[Call(step, f"cpp_fused_op{i}_{i}", "generated", "fk", 1.0 + i, 1)
                         for step in range(2) for i in range(n)],
                  step_us=[500.0, 510.0], graphs=["fk"])
    p = summarise(calls, [], activity="cpu", own_compile=True)
    assert len(p.kernels) == MAX_KERNELS and p.left_out == 44
    assert p.kernels[0].name == f"cpp_fused_op{n - 1}_{n - 1}"  # the longest first
    assert p.device_us == sum(1.0 + i for i in range(n))  # the left out in the step's total
    assert (p.steps, p.launches_per_step, p.step_us) == (2, float(n), 505.0)
