"""What crosses the process boundary between the parent (``runner``) and a worker process.

Both directions are typed and validated: the spec the parent writes, and the output the worker
writes. The worker's output is untrusted in the sense that a model can make a worker write
anything (or nothing): an output that does not fit is recorded as that model's error, never a
crash of the run. The pieces reuse the results schema's own types, so assembling a
``ModelResult`` from outputs is a mapping, not a translation.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from compilewatch.core.kernels import KernelProfile
from compilewatch.core.schema import (
    Accuracy,
    CacheCounters,
    CacheKey,
    Category,
    Config,
    GpuIdentity,
    GraphBreak,
    Memory,
    Origins,
    Recompile,
    Seconds,
    Sha256,
    Short,
    Text,
    Training,
)
from compilewatch.suites.imports import SideCode

# cold: first compile on an empty cache dir. warm: a new process on a cold process's cache dir,
# which also times steady state (a "timing process"). warm_start: an empty cache dir with a
# portable cache artifact loaded first.
# remote: an empty cache dir with the shared compile cache read (``compiler/remotecache.py``).
# scan: no compile; what the model reads of its checkout (``compiler/reads.py``).
# profile: a new process on a copy of a cold process's cache dir that runs the compiled model
# under torch.profiler (``compiler/kernels.py``).
Phase = Literal["scan", "cold", "warm", "warm_start", "remote", "profile"]
Floats = Annotated[list[Annotated[float, Field(ge=0)]], Field(max_length=100_000)]


ERROR_TAIL = 4000
STACKS = "stacks"  # where a worker asked for its stacks writes them
COMPILER_STACK = ("torch._dynamo", "torch._inductor.compile_fx",
                  "torch._functorch._aot_autograd.autograd_cache", "torch._inductor.codecache")
# What a first compile still imports past COMPILER_STACK (torch and sympy modules).
# ``--preload-compile-path`` imports these before any compile's clock (in the fork server, or in
# a spawned worker's import); off by default, since users' first compiles pay these imports
# (docs/verdict-quality.md, "Preloading the compile path"). Names this torch lacks are skipped.
_PATTERNS = "torch._inductor.fx_passes.serialized_patterns"
COMPILE_PATH = (
    "sympy.combinatorics", "sympy.tensor.tensor",
    "torch._dynamo.backends.cudagraphs", "torch._dynamo.backends.distributed",
    "torch._dynamo.backends.inductor", "torch._dynamo.backends.onnxrt",
    "torch._dynamo.backends.tensorrt", "torch._dynamo.backends.torchxla",
    "torch._dynamo.backends.tvm", "torch._dynamo.dce_extra_outputs",
    "torch._dynamo.repro.after_dynamo",
    "torch._export.db", "torch._export.passes.add_runtime_assertions_for_constraints_pass",
    "torch._export.passes.collect_tracepoints_pass",
    "torch._functorch._activation_checkpointing.remat_using_tags_for_fwd_loss_bwd_graph_pass",
    "torch._functorch._aot_autograd.subclass_codegen",
    "torch._higher_order_ops.passes.inline_invoke_subgraph",
    "torch._inductor.bounds", "torch._inductor.compiler_bisector",
    "torch._inductor.extern_node_serializer", "torch._inductor.hooks",
    "torch._inductor.codegen.cpu_device_op_overrides",
    "torch._inductor.codegen.cuda.device_op_overrides",
    "torch._inductor.codegen.cuda_combined_scheduling", "torch._inductor.codegen.halide",
    "torch._inductor.codegen.memory_planning", "torch._inductor.codegen.mps",
    "torch._inductor.codegen.mps_device_op_overrides",
    "torch._inductor.codegen.mtia.device_op_overrides", "torch._inductor.codegen.pallas",
    "torch._inductor.codegen.python_wrapper_mtia", "torch._inductor.codegen.segmented_tree",
    "torch._inductor.codegen.wrapper_fxir", "torch._inductor.codegen.xpu.device_op_overrides",
    "torch._inductor.codegen.xpu.xpu_combined_scheduling",
    "torch._inductor.fx_passes.apply_gumbel_max_trick",
    "torch._inductor.fx_passes.efficient_conv_bn_eval",
    "torch._inductor.fx_passes.freezing_patterns", "torch._inductor.fx_passes.fuse_attention",
    "torch._inductor.fx_passes.mkldnn_fusion", "torch._inductor.fx_passes.pad_mm",
    "torch._inductor.fx_passes.quantization", _PATTERNS,
    *(f"{_PATTERNS}._sfdp_pattern_{i}" for i in range(1, 31)),
    *(f"{_PATTERNS}.{op}_pattern" for op in ("addmm", "bmm", "mm")),
    "torch._inductor.runtime.caching", "torch._subclasses.schema_check_mode",
    "torch.distributed.tensor.experimental", "torch.export._trace", "torch.export._unlift",
    "torch.fx.experimental.validator",
)



def tail(text: str, limit: int = ERROR_TAIL) -> str:
    """The end of an error text, without NULs (databases refuse them in text columns)."""
    text = text.replace("\x00", "")
    return text if len(text) <= limit else "..." + text[-limit:]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class RemoteRead(_Frozen):
    """What a ``remote`` phase reads: the measuring parent's socket that reads the shared cache
    for it (``compiler/remoteproxy.py``: no credential reaches the worker), the trusted
    namespace its keys are signed under, and the public keys whose signed entries it loads."""

    socket: Text
    namespace: Text
    trusted_keys: tuple[Short, ...] = Field(default=(), max_length=64)


class WorkerSpec(_Frozen):
    """One worker process's task: which model, which phase, and what to do in it."""

    suite: str  # as the user passed it; the worker resolves it again (never a pickled model)
    model: str
    config: Config
    phase: Phase
    large: bool  # real model sizes (GPU) or small ones (CPU)
    rounds: int = Field(ge=1)
    block_ms: float = Field(gt=0)
    time_steady_state: bool = False
    measure_memory: bool = False
    check_accuracy: bool = False
    save_artifact: str | None = None
    load_artifact: str | None = None
    trace_dir: str | None = None  # keep the structured trace of this compile here
    pin_cpus: tuple[int, ...] = ()  # where the measuring section runs
    prepare_cpus: tuple[int, ...] = ()  # where the rest runs (off the timing cores)
    # Inductor's compile workers: as many as the cores this process compiles on (its compile
    # slot's group, ``cpus.CoreGroups``); None: torch's default (every core it saw at import)
    compile_threads: int | None = Field(None, ge=1)
    # start Inductor's compile workers early and wait for them before the compile's clock
    # (``compiler/compileworkers.py``)
    ready_compile_workers: bool = False
    # a spawned worker also imports ``COMPILE_PATH`` with torch (a fork server has)
    preload_compile_path: bool = False
    # a file (GPU runs): one timing section at a time, and every other GPU section waits while
    # one runs (``compiler/quiet.py``)
    device_lock: str | None = None
    # the CUDA device this process runs on (a GPU's timing lane, ``compiler/lanes.py``); None:
    # torch's current device
    gpu: int | None = Field(None, ge=0)
    gpu_warmup_s: float = Field(0.0, ge=0)
    # timing: also time this suite's eager model of the same name in every round, the host's
    # witness that both sides' processes share (the first side's suite; this one's own: reuse)
    reference_suite: str | None = None
    reference_code: SideCode | None = None  # that suite's own code (what its import brings is
    # undone before this side's suite is imported)
    # this side's own code: its folders first on sys.path, and what must not come from elsewhere
    code: SideCode | None = None
    remote_read: RemoteRead | None = None  # remote: the shared cache it reads
    # a trusted run's first cold compile: keep what it compiled here, for the parent to sign
    # and store in the shared cache (the worker holds no credential that writes it)
    remote_outbox: str | None = None
    kernel_trace: str | None = None  # profile: write the profiler's chrome trace here
    watch_root: str | None = None  # scan: record what is read under this folder (a checkout)
    home_root: str | None = None  # scan: and count what is read under this one (the user's)
    out: str
    status_file: str


class CompileSample(_Frozen):
    """The first compiled call in this process (the compile), and what torch recorded of it."""

    wall_s: Seconds
    cpu_s: Seconds | None = None  # the worker's process tree, compile workers included
    instructions: int | None = Field(None, ge=0)
    phases: dict[Short, Seconds] = Field(default_factory=dict, max_length=64)
    frames: int = Field(0, ge=0)
    graphs: int = Field(0, ge=0)
    compiled_autograd_frames: int = Field(0, ge=0)
    guard_count: int | None = Field(None, ge=0)


class LatencySample(_Frozen):
    """Interleaved eager/compiled blocks of one process (per-call microseconds)."""

    timer: Short
    calls_per_block: int = Field(ge=1)
    eager_us: Floats
    compiled_us: Floats
    host_fraction: float | None = Field(None, ge=0)
    host_us: float | None = Field(None, ge=0)  # the host's time launching one compiled call
    cpus: tuple[int, ...] = ()
    reference_us: Floats = Field(default_factory=list)  # the reference's blocks, by round
    gpu: GpuIdentity | None = None  # the GPU it timed on (cuda)


class SavedArtifact(_Frozen):
    """The portable cache this process saved, or why it could not."""

    size_bytes: int | None = Field(None, ge=1)
    sha256: Sha256 | None = None
    fx_keys: list[Short] = Field(default_factory=list, max_length=1024)
    aot_keys: list[Short] = Field(default_factory=list, max_length=1024)
    unsupported: Text | None = None


Paths = Annotated[list[Text], Field(max_length=10_000)]


class Reads(_Frozen):
    """What a scan process read of its checkout: files (paths relative to the checkout's root),
    directories listed, by the model or by the import system, and where a module would change
    what it imports; ``opaque`` when something it did cannot be seen (a subprocess, say)."""

    files: Paths = Field(default_factory=list)
    listed: Paths = Field(default_factory=list)
    import_listed: Paths = Field(default_factory=list)
    # module paths (``pkg/mod``: a ``pkg/mod.py``, ``pkg/mod/`` or extension there) that an
    # import looked for, or that would shadow a module it loaded from elsewhere
    sought: Paths = Field(default_factory=list)
    home_files: int = Field(0, ge=0)  # files read from the user's own checkout instead
    opaque: Text | None = None


class CacheLookups(_Frozen):
    fx: list[CacheKey] = Field(default_factory=list, max_length=1024)
    aot: list[CacheKey] = Field(default_factory=list, max_length=1024)


class WorkerOutput(_Frozen):
    """Everything one worker process measured; ``ok`` False carries the classified failure."""

    ok: bool
    phase: Phase
    category: Category = Category.OK
    error: Text | None = None
    compile: CompileSample | None = None
    import_s: Seconds | None = None  # importing the compiler stack in this process
    graph_breaks: list[GraphBreak] = Field(default_factory=list, max_length=1024)
    recompiles: list[Recompile] = Field(default_factory=list, max_length=1024)
    cache: CacheLookups = CacheLookups()
    counters: CacheCounters | None = None
    cache_unknown: Text | None = None
    accuracy: Accuracy | None = None
    memory: Memory | None = None
    training: Training | None = None
    latency: LatencySample | None = None
    artifact: SavedArtifact | None = None
    reads: Reads | None = None
    kernels: KernelProfile | None = None  # profile: each kernel's time over the profiled steps
    modules: Origins = {}  # where the top-level modules this model brought came from
    harness_s: dict[Short, Seconds] = Field(default_factory=dict, max_length=64)
    notes: list[Text] = Field(default_factory=list, max_length=64)
