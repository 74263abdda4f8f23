"""What a run records beside its models: where it ran (``Environment``, ``GitInfo``), whose code
it imported (``Code``, each module's ``ModuleOrigin``), how it
measured (``RunSettings``), the host's preflight (``HostCheck``) and, for a sharded run, its
shards (``Sharding``). Part of the one results schema: ``core/schema.py`` ``RunResults`` holds
them, and every other module imports them from there (the measuring defaults below from here)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from compilewatch.core.fields import (
    MAX_MODELS,
    MAX_ORIGINS,
    CommitSha,
    Count32,
    Count64,
    Hash,
    ModuleName,
    Positive32,
    Positive64,
    RunId,
    Seconds,
    Short,
    Strict,
    Text,
)

_Model = Strict


class ModuleOrigin(_Model):
    """Where a top-level module a side imported came from (``suites/imports.py``)."""

    where: Literal["checkout", "installed"]
    path: Text  # relative to the side's checkout, or absolute for an installed copy
    allowed: bool = False  # the repository provides it, and --allow-installed took the copy


Origins = Annotated[dict[ModuleName, ModuleOrigin], Field(max_length=MAX_ORIGINS)]


class Code(_Model):
    """Whose code a run imported: the folders put first on ``sys.path`` (relative to the
    checkout) and where each top-level module its suites imported came from."""

    paths: list[Short] = Field(default_factory=list, max_length=64)
    allow_installed: list[ModuleName] = Field(default_factory=list, max_length=MAX_ORIGINS)
    modules: Origins = Field(default_factory=dict)


def fingerprint(parts: dict[str, str | None]) -> str:
    """Stable short hash of environment parts that decide cache compatibility."""
    blob = json.dumps(parts, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:32]


class Environment(_Model):
    """Where a run happened. ``fingerprint`` hashes what decides cache compatibility."""

    fingerprint: Hash
    python: Short
    platform: Short
    machine: Short
    cpu: Short | None = None
    cpu_count: Count64 | None = None
    torch: Short
    torch_git: Short | None = None
    triton: Short | None = None
    cuda: Short | None = None
    cudnn: Short | None = None
    driver: Short | None = None
    gpu: Short | None = None
    gpu_count: Count64 = 0
    config: dict[Short, Short] = Field(default_factory=dict, max_length=256)


class GitInfo(_Model):
    commit: CommitSha | None = None
    ref: Short | None = None
    merge_base: CommitSha | None = None
    pr: Positive32 | None = None
    repository: Short | None = None
    dirty: bool | None = None


# how a side is measured unless asked otherwise: the command line's defaults, the library's
# (``MeasureOptions``) and the loop's (``RunOptions``), written here once
DEFAULT_ROUNDS = 30  # interleaved eager/compiled rounds a timing process
DEFAULT_BLOCK_MS = 20.0  # the target wall time of one timed block
DEFAULT_TIMEOUT_S = 900.0  # one worker process (one model, one phase)


class RunSettings(_Model):
    suites: list[Short] = Field(default_factory=list, max_length=64)
    timeout_s: Seconds
    rounds: Positive64
    block_ms: float = Field(gt=0)
    trigger: Literal["pr", "nightly", "local", "bisect"] = "local"
    side: Literal["base", "head"] | None = None
    cold_processes: Positive32 = 1
    # 0: ``--no-warm``, the first cold process timed steady state itself (files written before
    # 0 was allowed recorded 1 for it)
    timing_processes: Count32 = 1
    isolation: Literal["spawn", "fork"] = "spawn"
    # Inductor's compile workers started early and ready before each compile's clock
    # (``compiler/compileworkers.py``); False: torch's own race decides where kernels compile
    ready_compile_workers: bool = False
    # the compile path's first-use imports made before any compile's clock
    # (``--preload-compile-path``, ``compiler/protocol.py`` COMPILE_PATH)
    preload_compile_path: bool = False
    # a pr's follow-ups: timing processes and cold compiles a side that a model whose first
    # verdict was left open near its threshold (cold compiles also: a change called on the
    # first ones, to confirm it) could get (its notes say when it did)
    extra_processes: Count32 = 0
    extra_cold_processes: Count32 = 0
    # the folder the results file was written to, absolute, on the machine that measured: where
    # the models' ``diagnostics`` paths start, so a run read back from the database still finds
    # its traces (None: not recorded, or too long to record)
    results_dir: Short | None = None
    # the shared compile cache (``--remote-cache``): "read" by each model's remote phase,
    # "write": also stored what this run's cold compiles compiled (a trusted run); None: unused
    remote_cache: Literal["read", "write"] | None = None
    # every timed model got a profile process (--profile-kernels), not only those whose
    # compiled time changed
    profile_kernels: bool = False


class GpuSpread(_Model):
    """One GPU's preflight: the spread of the fixed GPU workload on it; ``left_out``: too
    noisy beside GPUs that were not, so nothing was timed on it."""

    index: Count32  # torch's device index
    spread: float = Field(ge=0)
    left_out: bool = False


class HostCheck(_Model):
    """A short preflight of the host's own noise, before measuring: the spread of a fixed CPU
    workload (and, on CUDA, of a fixed GPU workload on each GPU) over repeats. Stored with the
    run; a verdict whose interval the noise makes meaningless says so instead of judging."""

    cpu_spread: float = Field(ge=0)  # (p90 - p10) / median of the CPU workload's times
    # the GPU workload's spread: of the noisiest GPU timed on, where there are several
    gpu_spread: float | None = Field(None, ge=0)
    noisy: bool = False
    detail: Short | None = None
    # each GPU's own, where the run could time on several (one timing lane each)
    gpus: list[GpuSpread] = Field(default_factory=list, max_length=256)

    def timing_gpus(self) -> tuple[int, ...]:
        """The GPUs timing may use: every one the preflight measured but those left out."""
        return tuple(g.index for g in self.gpus if not g.left_out)


MAX_SHARDS = 256  # shards of one group (a matrix of GitHub Actions jobs holds at most 256)
ShardIdent = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-/]{0,255}$")]


class ShardRun(_Model):
    """One shard of a group as the group's results know it: ``finished`` (its run ended),
    ``unfinished`` (a checkpoint of a shard that was killed or failed), ``missing`` (no
    results came back at all)."""

    index: Count32
    state: Literal["finished", "unfinished", "missing"]
    run_id: RunId | None = None
    runner: Short | None = None  # the machine it ran on (GitHub's RUNNER_NAME, else the host)
    wall_s: Seconds | None = None  # from its start to its last result
    models: Count32 = 0  # results it holds


class Sharding(_Model):
    """A run that is one shard of a group (``index`` set), or a group's shards merged into one
    side (``index`` None). ``plan`` is the whole group's split, the same in every shard (each
    computes it alone, deterministically): per shard, ``suite/model/config`` of each job."""

    group: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")]
    count: Annotated[int, Field(ge=1, le=MAX_SHARDS)]
    index: Count32 | None = None
    balanced_by: Literal["duration", "count"] = "count"
    plan: list[Annotated[list[ShardIdent], Field(max_length=MAX_MODELS)]] = Field(
        default_factory=list, max_length=MAX_SHARDS)
    runs: list[ShardRun] = Field(default_factory=list, max_length=MAX_SHARDS)

    @model_validator(mode="after")
    def _fits(self) -> Sharding:
        if self.index is not None and self.index >= self.count:
            raise ValueError(f"index {self.index} is not below count {self.count}")
        if self.plan and len(self.plan) != self.count:
            raise ValueError(f"plan holds {len(self.plan)} shards, count says {self.count}")
        if sum(len(p) for p in self.plan) > MAX_MODELS:
            raise ValueError(f"plan: more than {MAX_MODELS} jobs")
        if any(r.index >= self.count for r in self.runs):
            raise ValueError(f"runs: a shard index is not below count {self.count}")
        if len({r.index for r in self.runs}) != len(self.runs):
            raise ValueError("runs: a shard is listed twice")
        if self.index is not None and not self.plan:
            raise ValueError("a shard carries its group's plan: plan is empty")
        return self

    def unplanned(self, idents: Iterable[str]) -> list[str]:
        """Of ``idents`` (``suite/model/config``), those the plan did not give this shard (a
        merged side: any shard). A shard that reports another's models, or models never
        planned, would make ``merge`` believe it and compare measure what nobody asked."""
        if self.index is not None:
            mine = set(self.plan[self.index])
        else:
            mine = {i for part in self.plan for i in part}
        return [i for i in idents if i not in mine] if self.plan else []
