"""The one results schema: written by the harness, read by db/, compare, templates and the bot.

The types every stage shares, each field bounded (string lengths, integer ranges, characters a
database cannot store, names in a safe alphabet: ``core/fields.py``, with the limits on one
file), and a model's kernel profile (``core/kernels.py``). Reading a file,
strictly and within those limits, and the upgraders of older versions are
``core/results_file.py``'s. Documented in docs/results-schema.md.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from compilewatch.core.fields import (  # noqa: F401  (names other modules import from here)
    INT32_MAX,
    INT64_MAX,
    MAX_CONTAINERS,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_FILE_SAMPLES,
    MAX_INT_CHARS,
    MAX_MODEL_SAMPLES,
    MAX_MODELS,
    MAX_ORIGINS,
    MAX_SHORT_CHARS,
    MAX_TEXT_CHARS,
    NAME_PATTERN,
    CommitSha,
    Count32,
    Count64,
    Hash,
    ModuleName,
    Name,
    Positive32,
    Positive64,
    RunId,
    Samples,
    Seconds,
    Sha256,
    Short,
    Strict,
    Text,
    Time,
    utc_time,
)
from compilewatch.core.kernels import KernelProfile
from compilewatch.core.runinfo import (  # noqa: F401  (names other modules import from here)
    MAX_SHARDS,
    Code,
    Environment,
    GitInfo,
    GpuSpread,
    HostCheck,
    ModuleOrigin,
    Origins,
    RunSettings,
    ShardIdent,
    Sharding,
    ShardRun,
    fingerprint,
)

SCHEMA_VERSION = 2

_Model = Strict


def _member_of(kind: type[StrEnum]) -> Any:
    """A JSON string as a member of ``kind`` before a strict reading checks its type (strict
    validation of parsed JSON wants the enum itself, though a file can only hold its value)."""

    def member(value: Any) -> Any:
        if isinstance(value, str) and not isinstance(value, kind):
            try:
                return kind(value)
            except ValueError:
                raise ValueError(f"{value[:64]!r} is not one of "
                                 f"{', '.join(m.value for m in kind)}") from None
        return value

    return BeforeValidator(member)


class Status(StrEnum):
    """Coarse outcome; every consumer can rely on these six."""

    PASS = "pass"
    FAIL = "fail"
    ERROR = "error"
    TIMEOUT = "timeout"
    CRASH = "crash"
    SKIP = "skip"


class Category(StrEnum):
    """Precise cause behind a status, so a report can say *why* (eager bug vs compiler bug)."""

    OK = "ok"
    ACCURACY = "accuracy"  # fail: compiled output differs from eager beyond tolerance
    # fail: the output holds a part of a type no rule compares (never a pass unjudged)
    ACCURACY_UNCOMPARABLE = "accuracy_uncomparable"
    EAGER_NONDETERMINISTIC = "eager_nondeterministic"  # fail is not the compiler's fault
    EAGER_ERROR = "eager_error"  # the model itself raises without torch.compile
    COMPILE_ERROR = "compile_error"  # torch.compile raised
    RUNTIME_ERROR = "runtime_error"  # compiled code raised after compiling
    OOM = "oom"
    TIMEOUT = "timeout"
    CRASH = "crash"  # the worker died (signal, abort, segfault)
    INFRA = "infra"  # the harness itself failed (could not start a worker, bad output)
    PACKAGE_MISSING = "package_missing"
    UNSUPPORTED = "unsupported"  # e.g. cuda asked for on a machine without a GPU
    BUILD_ERROR = "build_error"  # the suite's model factory raised
    FOREIGN_CODE = "foreign_code"  # the repository's code came from outside the side's checkout


STATUS_OF: dict[Category, Status] = {
    Category.OK: Status.PASS,
    Category.ACCURACY: Status.FAIL,
    Category.ACCURACY_UNCOMPARABLE: Status.FAIL,
    Category.EAGER_NONDETERMINISTIC: Status.FAIL,
    Category.EAGER_ERROR: Status.ERROR,
    Category.COMPILE_ERROR: Status.ERROR,
    Category.RUNTIME_ERROR: Status.ERROR,
    Category.OOM: Status.ERROR,
    Category.TIMEOUT: Status.TIMEOUT,
    Category.CRASH: Status.CRASH,
    Category.INFRA: Status.ERROR,
    Category.PACKAGE_MISSING: Status.SKIP,
    Category.UNSUPPORTED: Status.SKIP,
    Category.BUILD_ERROR: Status.ERROR,
    Category.FOREIGN_CODE: Status.ERROR,
}

Device = Literal["cpu", "cuda"]
Mode = Literal["default", "reduce-overhead", "max-autotune"]
DType = Literal["float32", "bfloat16", "amp"]
Task = Literal["inference", "training"]
# The same vocabularies as tuples, for whoever lists or checks them (the registry, the CLI).
DEVICES: tuple[str, ...] = get_args(Device)
MODES: tuple[str, ...] = get_args(Mode)
DTYPES: tuple[str, ...] = get_args(DType)
TASKS: tuple[str, ...] = get_args(Task)
DYNAMIC = {"auto": None, "true": True, "false": False}  # torch.compile(dynamic=...)


class Config(_Model):
    """One compile configuration; ``slug`` is its stable identity across runs.

    ``task``: what one measured call is, the model's forward (``inference``) or a whole
    training step (``compiler/training.py``). A result without it was inference (the default
    says so, so no upgrader is needed), and the slug names the task only for training, so every
    inference slug stays what it was before training existed.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    device: Device = "cpu"
    mode: Mode = "default"
    dtype: DType = "float32"
    dynamic: bool | None = None
    task: Task = "inference"

    @property
    def slug(self) -> str:
        dyn = {None: "auto", True: "dynamic", False: "static"}[self.dynamic]
        slug = f"{self.device}-{self.mode}-{self.dtype}-{dyn}"
        return slug if self.task == "inference" else f"{slug}-{self.task}"


class Interval(_Model):
    """A point estimate with its confidence interval (``confidence`` level): for a speedup, the
    geometric mean of the timing processes' medians with a t-interval from their spread."""

    value: float
    ci_low: float
    ci_high: float
    confidence: float = Field(0.95, gt=0, lt=1)


class GpuIdentity(_Model):
    """The GPU one timing process ran on: a verdict compares samples of one GPU only."""

    index: Count32  # torch's index of the device in that process
    uuid: Short | None = None  # the physical GPU ("GPU-..."), None where torch gave none
    name: Short | None = None
    sm_clock_mhz: Count32 | None = None  # after timing (its steady clocks); None: unknown
    mem_clock_mhz: Count32 | None = None


class Latency(_Model):
    """Steady-state timing. Samples are per-call microseconds of interleaved blocks.

    ``eager_us[i]`` and ``compiled_us[i]`` were measured back to back in round ``i`` (alternating
    which went first), so they are paired: host drift hits both. Compare judges a compiler change
    on ``compiled_us``; eager is the witness of the host's speed in that process.
    """

    method: Short
    timer: Short
    calls_per_block: Positive64
    eager_us: Samples
    compiled_us: Samples
    eager_median_us: float = Field(ge=0)
    compiled_median_us: float = Field(ge=0)
    compiled_ci_us: Interval | None = None
    processes: Positive64 = 1
    # samples of each timing process, in order (the samples are stored process after process);
    # empty in version 1, where processes of equal size are assumed
    process_sizes: list[Positive64] = Field(default_factory=list,
                                                              max_length=1024)
    # host launch time over GPU time per block: near 1, the GPU waits for the CPU (launch-bound)
    host_fraction: float | None = Field(None, ge=0)
    # the host's time launching one compiled call (median over the processes; cuda): beside
    # the call's time, how much of it the GPU spent waiting for the host
    compiled_host_us: float | None = Field(None, ge=0)
    launch_bound: bool | None = None
    pinned_cpus: list[Count32] = Field(default_factory=list, max_length=1024)
    # the reference (base's eager model, timed as a third block of each round by the timing
    # processes of a GPU model that changed between the sides): samples of the processes that
    # timed one, stored like the others; per process, how many (0: that process timed none)
    reference_us: Samples = Field(default_factory=list)
    reference_sizes: list[Count32] = Field(default_factory=list, max_length=1024)
    # the GPU each timing process ran on, in process order (empty: a CPU run, or a result
    # written before GPUs were recorded)
    gpus: list[GpuIdentity] = Field(default_factory=list, max_length=1024)

    @model_validator(mode="after")
    def _references_fit(self) -> Latency:
        # a hostile file must not pair one process's compiled rounds with another's reference
        if sum(self.reference_sizes) != len(self.reference_us):
            raise ValueError(f"reference_sizes add up to {sum(self.reference_sizes)}, but "
                             f"reference_us holds {len(self.reference_us)} samples")
        sizes = [len(c) for _, c in self.per_process()]
        if self.reference_sizes and (len(self.reference_sizes) != len(sizes) or any(
                n and n != size for n, size in zip(self.reference_sizes, sizes, strict=False))):
            raise ValueError("reference_sizes: each process times its reference in every round "
                             f"or not at all; got {self.reference_sizes} for processes of "
                             f"{sizes} rounds")
        if self.gpus and len(self.gpus) != len(sizes):
            raise ValueError(f"gpus names {len(self.gpus)} GPUs for {len(sizes)} timing "
                             "processes: one a process, in order")
        return self

    def gpu_uuids(self) -> set[str]:
        """The physical GPUs the processes ran on (empty: not recorded)."""
        return {g.uuid for g in self.gpus if g.uuid}

    def on_gpus(self, uuids: set[str]) -> Latency:
        """Only the timing processes that ran on these GPUs (all where none was recorded)."""
        if not self.gpus or all(g.uuid in uuids for g in self.gpus):
            return self
        keep = [i for i, g in enumerate(self.gpus) if g.uuid in uuids]
        per, refs = self.per_process(), self._reference_groups()
        return self.model_copy(update={
            "eager_us": [x for i in keep for x in per[i][0]],
            "compiled_us": [x for i in keep for x in per[i][1]],
            "process_sizes": [len(per[i][1]) for i in keep], "processes": max(1, len(keep)),
            "reference_us": [x for i in keep if i < len(refs) for x in refs[i]],
            "reference_sizes": [len(refs[i]) for i in keep if i < len(refs)],
            "gpus": [self.gpus[i] for i in keep]})

    def _reference_groups(self) -> list[list[float]]:
        """The reference samples of each timing process (empty for one that timed none)."""
        out, at = [], 0
        for n in self.reference_sizes:
            out.append(self.reference_us[at:at + n])
            at += n
        return out

    def per_process(self) -> list[tuple[list[float], list[float]]]:
        """(eager, compiled) samples of each timing process."""
        sizes = self.process_sizes or _equal_sizes(len(self.compiled_us), self.processes)
        out, at = [], 0
        for n in sizes:
            out.append((self.eager_us[at:at + n], self.compiled_us[at:at + n]))
            at += n
        return out

    def normalised_per_process(self) -> list[list[float]]:
        """Per process, compiled over eager of the same round: the host's speed cancels."""
        return [[c / e for e, c in zip(eager, comp, strict=False) if e > 0]
                for eager, comp in self.per_process()]

    def referenced_per_process(self) -> list[list[float]]:
        """Per process that timed the reference, compiled over the reference of the same round:
        the host's speed cancels, and the reference is the same model on both sides."""
        out = []
        for (_, comp), ref in zip(self.per_process(), self._reference_groups(), strict=False):
            ratios = [c / r for c, r in zip(comp, ref, strict=False) if r > 0]
            if ratios:  # a process whose reference read 0 throughout tells nothing
                out.append(ratios)
        return out


def _equal_sizes(n: int, parts: int) -> list[int]:
    parts = max(1, min(parts, n)) if n else 1
    return [len(c) for c in _split(n, parts)]


def _split(n: int, parts: int) -> list[range]:
    q, r = divmod(n, parts)
    out, at = [], 0
    for i in range(parts):
        size = q + (i < r)
        out.append(range(at, at + size))
        at += size
    return out


class Compile(_Model):
    """Compile cost: first compiled call in a fresh process, with the phase breakdown.

    ``cold_s`` is the median of ``cold_samples_s`` (one per cold process, each on its own empty
    cache dir), ``warm_s`` of ``warm_samples_s``. ``cold_cpu_samples_s`` is each cold compile's
    CPU time over the worker's whole process tree (compile workers included): the clock to judge
    when compiles ran beside each other. ``import_s`` is what a fresh process pays to import the
    compiler stack before its first compile; ``first_output_s`` = import + cold compile.
    """

    cold_s: Seconds | None = None
    warm_s: Seconds | None = None
    cold_samples_s: list[Seconds] = Field(default_factory=list, max_length=1024)
    cold_cpu_samples_s: list[Seconds] = Field(default_factory=list, max_length=1024)
    warm_samples_s: list[Seconds] = Field(default_factory=list, max_length=1024)
    cold_concurrent: bool = False  # cold compiles ran beside other compiles
    import_s: Seconds | None = None
    first_output_s: Seconds | None = None
    warm_start_s: Seconds | None = None  # empty cache dir + portable cache artifact loaded
    # empty cache dir + the shared compile cache read (docs/scale.md); None: not measured
    remote_s: Seconds | None = None
    phases: dict[Short, Seconds] = Field(default_factory=dict, max_length=64)
    warm_phases: dict[Short, Seconds] = Field(default_factory=dict, max_length=64)
    warm_start_phases: dict[Short, Seconds] = Field(default_factory=dict, max_length=64)
    remote_phases: dict[Short, Seconds] = Field(default_factory=dict, max_length=64)
    frames: Count32 = 0
    graphs: Count32 = 0
    # frames compiled autograd handed to Dynamo (a training step's backward, captured at run
    # time): not frames of the model's code, so apart from ``frames``
    compiled_autograd_frames: Count32 = 0
    guard_count: Count32 | None = None
    cold_instructions: Count64 | None = None
    cache_dir_was_empty: bool = True


class GraphBreak(_Model):
    """One distinct graph break: torch's reason, how often, and where in the user's code."""

    reason: Text
    count: Positive32 = 1
    gb_id: Short | None = None  # torch's stable graph-break id (GB0000...), where it has one
    kind: Short | None = None  # torch's graph-break type, e.g. "Data-dependent branching"
    location: Short | None = None  # the user's file:line


class Recompile(_Model):
    reason: Text
    compile_id: Short | None = None


class CacheKey(_Model):
    """One compiled graph's cache key and the hash of each component that went into it."""

    key: Hash
    components: dict[Short, Hash] = Field(default_factory=dict, max_length=4096)
    values: dict[Short, Text] = Field(default_factory=dict, max_length=4096)
    hit: bool | None = None
    state: Literal["hit", "miss", "bypass", "unknown"] = "unknown"
    phase: Literal["cold", "warm", "warm_start", "remote"] = "cold"
    # torch's own reason where the lookup bypassed the cache (the graph is not keyed, so every
    # process compiles it from scratch: a warm start costs a cold compile)
    bypass_reason: Text | None = None


CachePhase = Literal["cold", "warm", "warm_start", "remote"]


class CacheCounters(_Model):
    """One process's cache lookups. ``fx_hit`` counts every FX graph hit, local or remote;
    ``fx_remote_*`` count the shared compile cache apart: verified entries it loaded, lookups
    it had nothing for (or could not be reached), entries it held that were refused (unsigned,
    a key not pinned, altered) and never loaded, and entries stored in it from this process's
    compile (a trusted run's first cold compile). None: the shared cache was not used in that
    process (and in files written before it was counted apart)."""

    fx_hit: Count64 = 0
    fx_miss: Count64 = 0
    fx_bypass: Count64 = 0
    aot_hit: Count64 = 0
    aot_miss: Count64 = 0
    aot_bypass: Count64 = 0
    fx_remote_hit: Count64 | None = None
    fx_remote_miss: Count64 | None = None
    fx_remote_refused: Count64 | None = None
    fx_remote_put: Count64 | None = None

    @property
    def fx_local_hit(self) -> int:
        """FX graph hits served by the local cache dir."""
        return max(self.fx_hit - (self.fx_remote_hit or 0), 0)


class Cache(_Model):
    fx: list[CacheKey] = Field(default_factory=list, max_length=1024)
    aot: list[CacheKey] = Field(default_factory=list, max_length=1024)
    counters: dict[CachePhase, CacheCounters] = Field(default_factory=dict)
    unknown_reason: Text | None = None


class Accuracy(_Model):
    passed: bool | None = None
    max_abs_err: float | None = Field(None, ge=0)
    max_rel_err: float | None = Field(None, ge=0)
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)
    reference: Literal["eager", "fp64"] = "eager"
    fp64_max_abs_err: float | None = Field(None, ge=0)
    eager_deterministic: bool | None = None
    # where in the output the failing part is (``out.logits[0]``), how it failed (numbers
    # beyond tolerance, another structure or type, a type no rule compares) and why; absent
    # in files written before they were recorded, and when the output passed
    where: Short | None = None
    failure: Literal["values", "structure", "uncomparable"] | None = None
    reason: Text | None = None


class Memory(_Model):
    """Peak allocated device memory of one call; for a training step, also the peak up to the
    end of its backward (before ``optimizer.step()``): where what the partitioner saves for the
    backward shows, which an optimizer's own peak (Adam over a large model) can hide."""

    eager_peak_bytes: Count64 | None = None
    compiled_peak_bytes: Count64 | None = None
    eager_fwd_bwd_peak_bytes: Count64 | None = None
    compiled_fwd_bwd_peak_bytes: Count64 | None = None
    # what the measuring process held beside the compiled call (copies of the model, the
    # other step and its optimizer state, the reference), left out of the peaks above
    harness_bytes: Count64 | None = None
    unknown_reason: Short | None = None

    @property
    def compression(self) -> float | None:
        """Eager's peak over compiled's (the harness's compression ratio): above 1, the
        compiled step needs less memory (a training step: the partitioner saved less)."""
        if not self.eager_peak_bytes or not self.compiled_peak_bytes:
            return None
        return self.eager_peak_bytes / self.compiled_peak_bytes


def _relative(path: str) -> str:
    if path.startswith("/") or ".." in path.split("/"):
        raise ValueError("must be a relative path inside the output directory")
    return path


# A path a report links to: relative, inside the output directory, of a plain alphabet (no
# scheme such as ``javascript:``, no ``..``).
RelPath = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.][A-Za-z0-9_.\-/]{0,255}$"),
                    AfterValidator(_relative)]


class Diagnostics(_Model):
    """What travels with a model for a compiler engineer to act on: files beside the results
    (relative paths inside the output directory)."""

    trace: RelPath | None = None  # the cold compile's TORCH_TRACE log, gzip
    tlparse: RelPath | None = None  # tlparse's report of that log (a folder with index.html)
    recompiles: RelPath | None = None  # graph breaks and recompile reasons, text (pr)
    code_diff: RelPath | None = None  # base -> head diff of the generated code (pr)
    tlparse_missing: Text | None = None  # why tlparse made no report of a flagged model (pr)
    kernel_trace: RelPath | None = None  # the profile process's chrome trace (Perfetto), gzip


class Training(_Model):
    """How a training step was set up (``compiler/training.py``); present for task training."""

    optimizer: Literal["adam", "sgd"]
    optimizer_compiled: bool = False  # whether ``optimizer.step()`` ran inside the compile
    compiled_autograd: bool = False  # whether the compiled step's backward ran under it
    loss: Literal["default", "suite"] = "default"  # the output's own loss or a reduction; loss=
    autocast: Literal["bfloat16"] | None = None  # the forward's autocast dtype, None: none
    # train mode with dropout at zero; a result written before train mode stepped in eval
    mode: Literal["train", "eval"] = "eval"
    dropouts_zeroed: Count32 = 0  # dropout probabilities set to zero for a deterministic step


class ModelResult(_Model):
    model: Name
    suite: Name
    config: Config
    status: Annotated[Status, _member_of(Status)]
    category: Annotated[Category, _member_of(Category)] = Category.OK
    error: Text | None = None
    tags: list[Name] = Field(default_factory=list, max_length=32)
    speedup: Interval | None = None
    latency: Latency | None = None
    compile: Compile = Field(default_factory=Compile)
    graph_breaks: list[GraphBreak] = Field(default_factory=list, max_length=1024)
    recompiles: list[Recompile] = Field(default_factory=list, max_length=1024)
    cache: Cache = Field(default_factory=Cache)
    accuracy: Accuracy | None = None
    memory: Memory = Field(default_factory=Memory)
    training: Training | None = None  # the step's setup, for config.task training
    duration_s: Seconds = 0.0
    notes: list[Text] = Field(default_factory=list, max_length=64)
    # where the harness's own time went (build, eager, compile, probes, accuracy, timing, ...),
    # summed over this model's worker processes
    harness_s: dict[Short, Seconds] = Field(default_factory=dict, max_length=64)
    # why steady state was not timed although the model ran (the compiled code is the same on
    # both sides by construction); None when it was timed or did not run
    timing_skipped: Text | None = None
    # not compiled either (nothing but ``timing_skipped`` was measured): the change touches no
    # file this model reads, so the same code runs on both sides
    compile_skipped: bool = False
    diagnostics: Diagnostics | None = None
    modules: Origins = Field(default_factory=dict)  # what building this model imported
    # each kernel's time over a profile process's steps (``core/kernels.py``): for a model
    # whose compiled time changed, or every timed model with --profile-kernels
    kernels: KernelProfile | None = None

    @model_validator(mode="after")
    def _break_count_fits(self) -> ModelResult:
        # Stored as the result's graph_break_count, an INTEGER column.
        if self.break_count > INT32_MAX:
            raise ValueError(f"graph_breaks: the counts add up to {self.break_count}, over "
                             f"{INT32_MAX}")
        return self

    @property
    def ident(self) -> tuple[str, str, str]:
        """What identifies "the same measurement" on both sides of a comparison."""
        return (self.suite, self.model, self.config.slug)

    @property
    def break_count(self) -> int:
        """Graph breaks counted with their repeats (each reason is recorded once)."""
        return sum(b.count for b in self.graph_breaks)


class RunResults(_Model):
    schema_version: Literal[2]
    run_id: RunId
    created_at: Time
    finished_at: Time | None = None
    environment: Environment
    git: GitInfo = Field(default_factory=GitInfo)
    settings: RunSettings
    results: list[ModelResult] = Field(max_length=MAX_MODELS)
    host: HostCheck | None = None
    code: Code | None = None  # None: a run from before the record
    shards: Sharding | None = None  # None: not sharded (one runner measured the whole suite)

    @model_validator(mode="after")
    def _in_order(self) -> RunResults:
        if self.finished_at is not None and \
                utc_time(self.finished_at) < utc_time(self.created_at):
            raise ValueError(f"finished_at {self.finished_at[:64]!r} is before created_at "
                             f"{self.created_at[:64]!r}")
        return self

    @model_validator(mode="after")
    def _planned(self) -> RunResults:
        if self.shards is not None:
            check_planned(self.shards, self.results)
        return self

    def by_ident(self) -> dict[tuple[str, str, str], ModelResult]:
        return {r.ident: r for r in self.results}


def shard_ident(result: ModelResult) -> str:
    """A result's job as a shard plan names it (``suite/model/config``)."""
    return "/".join(result.ident)


def check_planned(shards: Sharding, results: Iterable[ModelResult]) -> None:
    """Refuse results the shard's plan did not give it, naming the first."""
    extra = shards.unplanned(shard_ident(r) for r in results)
    if extra:
        whose = (f"shard {shards.index + 1}/{shards.count}" if shards.index is not None
                 else f"the plan of group {shards.group}")
        raise ValueError(f"shards: {len(extra)} result(s) not in {whose}, e.g. "
                         f"{extra[0][:200]!r}: a shard reports only the models planned for it")


def json_schema() -> dict[str, Any]:
    """The JSON Schema of the current version (published in docs/results-schema.json)."""
    return RunResults.model_json_schema()

