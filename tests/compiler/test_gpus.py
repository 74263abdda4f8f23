"""Which GPU a timing process ran on (``compiler/gpus.py``): no GPU here, so the parts that
read a GPU are tested for what they say where there is none, and the parsing on its own."""

from __future__ import annotations

import pytest

from compilewatch.compiler import gpus
from compilewatch.compiler.assemble import _latency
from compilewatch.compiler.protocol import LatencySample, WorkerOutput
from compilewatch.core.schema import GpuIdentity


@pytest.mark.parametrize(("text", "want"), [
    ("1980, 3201\n", (1980, 3201)),
    ("1980, [N/A]\n", (1980, None)),
    ("[Not Supported], [Not Supported]", (None, None)),
    ("", (None, None)),
    ("345\n", (345, None)),
])
def test_clocks_are_read_from_nvidia_smi_s_csv_or_left_unknown(text: str, want: tuple) -> None:
    assert gpus.parse_clocks(text) == want


def test_no_gpu_is_recorded_on_a_cpu_and_no_clock_without_a_uuid() -> None:
    assert gpus.identity("cpu") is None
    assert gpus.clocks(None) == (None, None)


def _out(gpu: GpuIdentity | None) -> WorkerOutput:
    return WorkerOutput(ok=True, phase="warm", latency=LatencySample(
        timer="cuda_event", calls_per_block=4, eager_us=[2.0, 2.0], compiled_us=[1.0, 1.0],
        gpu=gpu))


def test_the_results_name_the_gpu_of_every_timing_process_or_of_none() -> None:
    a = GpuIdentity(index=0, uuid="GPU-aaaa", name="NVIDIA H200", sm_clock_mhz=1980)
    b = GpuIdentity(index=1, uuid="GPU-bbbb", name="NVIDIA H200")
    latency, _ = _latency([_out(a), _out(b)])
    assert latency is not None and [g["uuid"] for g in latency["gpus"]] == ["GPU-aaaa",
                                                                             "GPU-bbbb"]
    # one process that could not say: which samples came from where is unknown, so none
    latency, _ = _latency([_out(a), _out(None)])
    assert latency is not None and latency["gpus"] == []
