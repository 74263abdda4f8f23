"""The result of a bisection: what was searched, every step measured, and what it found.
Plain data that every renderer (markdown, HTML, JSON, the terminal) reads and ``post`` reads
back from ``bisect.json``, so it is strict (unknown fields refused) and bounded (it may have
come from another machine's job): the same kind of object as the comparison.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from compilewatch.bot.judge.bisect_metrics import Call

VERSION = 1
MAX_CANDIDATES = 100_000
MAX_STEPS = 1_000
Line = Annotated[str, StringConstraints(max_length=512)]
Text = Annotated[str, StringConstraints(max_length=8192)]
Sha = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$|^[0-9a-f]{64}$")]
Outcome = Literal["found", "range", "not_reproduced", "out_of_steps"]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Candidate(_Data):
    """One commit of the first-parent history (or one torch build), oldest first: index 0
    is the good end, the last one the bad end."""

    index: int = Field(ge=0)
    commit: Sha | None = None
    subject: Line | None = None  # the commit's first line
    python: Line | None = None  # the interpreter (a build), in ``--pythons`` mode
    torch: Line | None = None  # that build's torch version, where it was asked

    @property
    def label(self) -> str:
        if self.python is not None:
            return f"{self.torch or 'torch ?'} ({self.python})"
        return (self.commit or "?")[:10]


class ModelReading(_Data):
    """One model at one step."""

    model: Line  # suite/model [config]
    value: Line
    call: Call
    why: Text = ""


class Step(_Data):
    """One measuring step: one run of the measuring loop, of one candidate alone (a
    deterministic metric) or beside the good end (a timed one); ``ends`` measures both ends
    together."""

    number: int = Field(ge=1)
    kind: Literal["ends", "candidate", "flags"]
    candidate: int = Field(ge=0)  # the candidate called (ends: the bad end)
    reference: int | None = Field(None, ge=0)  # measured beside it
    processes: int = Field(0, ge=0)  # timing (or cold) processes a side, for a timed metric
    call: Call
    readings: list[ModelReading] = Field(default_factory=list, max_length=1024)
    reference_readings: list[ModelReading] = Field(default_factory=list, max_length=1024)
    run_ids: list[Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{32}$")]] = Field(
        default_factory=list, max_length=4)
    flags: list[Line] = Field(default_factory=list, max_length=4096)  # applied (flags steps)
    note: Text | None = None


class CompilerFinding(_Data):
    """What torch's ``CompilerBisector`` named in the first bad commit (or build): the first
    backend that reproduces the failure, the subsystem whose disabling fixes it, and the
    N-th application of it that breaks."""

    candidate: int = Field(ge=0)
    model: Line
    backend: Line | None = None  # None: no backend reproduced it (fine with every one)
    subsystem: Line | None = None
    bisect_number: int | None = None
    debug_info: Text | None = None
    note: Text | None = None


class FlagChange(_Data):
    name: Line  # inductor_config[...]
    good: Text
    bad: Text


class FlagFinding(_Data):
    """The Inductor config flags whose cache-key values differ between the last good and the
    first bad candidate, and the one whose change (applied on the good side) regressed."""

    flags: list[FlagChange] = Field(default_factory=list, max_length=4096)
    culprit: Line | None = None
    not_applied: list[Line] = Field(default_factory=list, max_length=4096)
    note: Text | None = None


class BisectReport(_Data):
    """One bisection: the request, the candidates, every step, the finding."""

    kind: Literal["bisect"] = "bisect"
    version: Literal[1] = 1
    mode: Literal["commits", "builds"]
    metric: Line
    metric_label: Line
    models: list[Line] = Field(max_length=64)
    repository: Line | None = None
    device: Line = "cpu"
    good: Line  # as given (a ref, or the first interpreter)
    bad: Line
    candidates: list[Candidate] = Field(max_length=MAX_CANDIDATES)
    steps: list[Step] = Field(default_factory=list, max_length=MAX_STEPS)
    outcome: Outcome
    first_bad: int | None = None
    last_good: int | None = None
    suspects: list[int] = Field(default_factory=list, max_length=MAX_CANDIDATES)
    compiler: CompilerFinding | None = None
    flags: FlagFinding | None = None
    notes: list[Text] = Field(default_factory=list, max_length=64)
    command: Text = ""  # the command line that reproduces this bisection
    started_at: Line = ""
    finished_at: Line = ""

    @property
    def measured(self) -> int:
        """Commits (or builds) measured, the ends counted once each."""
        return len({i for s in self.steps if s.kind != "flags"
                    for i in (s.candidate, s.reference) if i is not None})

    def candidate(self, index: int | None) -> Candidate | None:
        return self.candidates[index] if index is not None and \
            0 <= index < len(self.candidates) else None
