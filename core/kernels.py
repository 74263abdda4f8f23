"""A model's kernel profile, as one side's results hold it: what each kernel Inductor generated
(and each extern or eager op beside them) cost over a fixed number of profiled calls, and where
in the model it comes from. Written by the profile process (``compiler/kernels.py``), diffed
base against head by ``bot/judge/kernels.py``. Bounded like every part of the results file
(``core/fields.py``): at most ``MAX_KERNELS`` kernels (the shortest are left out, their time
still in ``device_us``), ``MAX_KERNEL_ORIGINS`` origins each.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from compilewatch.core.fields import Count32, Count64, Positive32, Short, Strict, Text

# A profile of MAX_KERNELS kernels of MAX_KERNEL_ORIGINS origins each is about 2,600 of a
# results file's 1,000,000 arrays and objects (MAX_CONTAINERS): some 380 such profiles a file
MAX_KERNELS = 256
MAX_KERNEL_ORIGINS = 8
# generated: Inductor's own kernel (cpp_fused_*, triton_*); extern: an op a compiled graph calls
# (aten::mm); eager: an op outside every compiled graph (a graph break's, the optimizer's);
# device: a device kernel no op launched (a CUDA graph's replay), by its own name
KernelKind = Literal["generated", "extern", "eager", "device"]


class KernelOrigin(Strict):
    """One node of the graph that a kernel computes, as Inductor recorded it."""

    node: Short | None = None  # the source (Dynamo) node, or the post-grad node where none
    aten: Short | None = None  # the ATen op it came from ("aten.sin")
    location: Short | None = None  # the user's file:line, relative as a graph break's is
    code: Short | None = None  # that line of the user's code


class Kernel(Strict):
    """One kernel (or op) of a profiled step, summed over its calls in the profiled steps."""

    name: Short  # as named in the profile: cpp_fused_add_0, triton_poi_fused_gelu_1, aten::mm
    kind: KernelKind
    graph: Short | None = None  # Inductor's id of the graph that calls it ("0_forward")
    calls: Count64  # over all profiled steps
    # host launches over the steps: CUDA launch calls (none for a CUDA graph's kernels, whose
    # replay launches once); on a CPU every call
    launches: Count64 = 0
    total_us: float = Field(ge=0)  # device time over the steps (a CPU's own time on a CPU)
    # its time per step: the median over the steps (one slow step, a host's hiccup, does not
    # move it), and the p90 - p10 of the steps, its noise inside the process
    step_us: float = Field(0.0, ge=0)
    step_spread_us: float = Field(0.0, ge=0)
    shapes: Short | None = None  # its inputs' shapes, for an extern or eager op
    gb: float | None = Field(None, ge=0)  # bytes a call moves (Inductor's estimate), in GB
    origins: list[KernelOrigin] = Field(default_factory=list, max_length=MAX_KERNEL_ORIGINS)

    @property
    def mean_us(self) -> float:
        return self.total_us / self.calls if self.calls else 0.0


class KernelProfile(Strict):
    """One side's profile process of one model: ``steps`` calls under ``torch.profiler`` on the
    warm cache, after its timing processes."""

    activity: Literal["cpu", "cuda"]
    steps: Positive32 = 1
    step_us: float = Field(0.0, ge=0)  # the host's time per step (median over the steps)
    # every kernel's time per step (those left out too), the median over the steps
    device_us: float = Field(0.0, ge=0)
    launches_per_step: float = Field(0.0, ge=0)
    graphs: list[Short] = Field(default_factory=list, max_length=256)  # as first called
    kernels: list[Kernel] = Field(default_factory=list, max_length=MAX_KERNELS)
    left_out: Count32 = 0  # kernels past MAX_KERNELS (the shortest), in device_us only
    # the profile process compiled its own graphs: a setting the profile needs
    # (``cpp.enable_kernel_profile``) is part of the FX cache key
    own_compile: bool = False
    process_s: float | None = Field(None, ge=0)  # the profile process's wall time, all of it
    notes: list[Text] = Field(default_factory=list, max_length=16)
    unknown_reason: Text | None = None  # why nothing was profiled (the process failed)

    def share(self, kernel: Kernel) -> float:
        """A kernel's share of the step's device time."""
        return kernel.step_us / self.device_us if self.device_us else 0.0
