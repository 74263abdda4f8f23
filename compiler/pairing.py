"""Base and head measured as pairs: what the loop does only with two sides (``Pairing``), and
what it does with one (``Alone``: no order to alternate, nothing to skip or follow up). The loop
is given one of them and hands itself to each call that queues or finishes work, so neither
holds the other.

The processes interleave: base and head alternate (ABBA...), the cold compiles of a pair run
side by side, so host drift hits both alike. A model whose compiled code is the same on both
sides by construction (one frame, one graph, no break, equal FX and AOT keys, same environment)
is not timed: its result says why (``timing_skipped``), unless ``measure_all``. Where the loop
knows what changed between the sides (``changed``: a pull request's diff), a cheap scan process
per side first records which files of its checkout the model reads (``compiler/reads.py``); a
model that reads none of the changed files is not measured at all (``compile_skipped``). A GPU
model whose graph changed also times base's eager model in every timing process (the
reference), and a model whose first verdict is open gets more processes (follow-ups).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from compilewatch.compiler import unchanged
from compilewatch.compiler.job import RunOptions, SideJob
from compilewatch.compiler.lanes import Ident, Kind, Task, ident
from compilewatch.compiler.plan import Job
from compilewatch.compiler.reads import ChangedFiles
from compilewatch.core.followup import FollowUp
from compilewatch.core.schema import ModelResult
from compilewatch.core.unchanged import same_model
from compilewatch.suites.imports import SideCode


@dataclass(frozen=True)
class PairRules:
    """What the pairing decides by: the loop settings that concern two sides only."""

    measure_all: bool = False
    same_environment: bool = True
    changed: ChangedFiles | None = None
    follow_up: FollowUp | None = None
    extra_timing: int = 0
    cold_follow_up: FollowUp | None = None
    extra_cold: int = 0
    cold_concurrent: bool = False  # compiles run side by side (a result says so)
    profile: FollowUp | None = None  # why a model gets a profile process a side
    profile_kernels: bool = False  # every timed model gets one


class Loop(Protocol):
    """What the pairing asks of the loop."""

    def push(self, sj: SideJob, kind: Kind, index: int) -> None: ...

    def finish(self, sj: SideJob) -> None: ...

    def settle(self, sj: SideJob) -> None: ...

    def drop(self, which: Callable[[Task], bool]) -> int: ...


Asker = tuple[Kind, FollowUp, int]


class Alone:
    """One side: every model measured as planned, in the sides' order, with no partner to wait
    for, no skip by construction and no follow-up; a profile process only with
    ``profile_kernels``, for every timed model."""

    def __init__(self, names: tuple[str, ...], rules: PairRules) -> None:
        self.names = names
        self.rules = rules
        # every (side, model) in flight: the loop's jobs, which the pairing looks at too
        self.jobs: dict[tuple[str, Ident], SideJob] = {}

    def in_order(self, n: int) -> tuple[str, ...]:
        return self.names

    def rank(self, side: str, order: int, index: int) -> int:
        return 0

    def most_timing(self, opts: RunOptions) -> int:
        return opts.timing_processes

    def scans(self, jobs: dict[str, Job]) -> bool:
        return False

    def scan_done(self, key: Ident, loop: Loop) -> None:
        raise AssertionError("a scan without a partner to compare its reads with")

    def waits(self, key: Ident) -> bool:
        return False

    def reference(self, key: Ident) -> str | None:
        return None

    def reference_code(self) -> SideCode | None:
        return None

    def skip_timing(self, key: Ident, loop: Loop) -> None:
        return None

    def follow_up(self, sj: SideJob, key: Ident, loop: Loop) -> bool:
        return False

    def profile(self, sj: SideJob, key: Ident, loop: Loop) -> bool:
        """Whether ``sj`` waits for a profile process: every timed model with
        ``profile_kernels``."""
        if sj.profile_asked:
            return not sj.idle
        sj.profile_asked = True
        if not (self.rules.profile_kernels and sj.timed()):
            return False
        loop.push(sj, "profile", 1)
        return True


class Pairing(Alone):
    """The two sides' jobs of each model, and the rules that look at both."""

    def __init__(self, names: tuple[str, str], opts: tuple[RunOptions, RunOptions],
                 rules: PairRules) -> None:
        super().__init__(names, rules)
        self.opts = dict(zip(names, opts, strict=True))

    def pair(self, key: Ident) -> list[SideJob]:
        """The model's jobs, base's first (one alone where the other side lacks the model)."""
        return [sj for name in self.names if (sj := self.jobs.get((name, key))) is not None]

    def partner(self, sj: SideJob, key: Ident) -> SideJob | None:
        return next((o for o in self.pair(key) if o is not sj), None)

    # --- order ------------------------------------------------------------------------------

    def in_order(self, n: int) -> tuple[str, ...]:
        """Base, head for even rounds, head, base for odd ones (ABBA...)."""
        return self.names if n % 2 == 0 else self.names[::-1]

    def rank(self, side: str, order: int, index: int) -> int:
        """Where a cold compile or timing process of ``side`` stands among the pair: timing
        processes alternate base/head as ABBA..., and so do the two cold compiles of a pair in
        the order they start (the one started first no longer always base's)."""
        pos = self.names.index(side)
        return pos if (order + index) % 2 == 1 else len(self.names) - 1 - pos

    def most_timing(self, opts: RunOptions) -> int:
        """Timing processes a side may run, a follow-up's included."""
        extra = self.rules.extra_timing if self.rules.follow_up is not None else 0
        return opts.timing_processes + extra

    # --- scans: what a model reads --------------------------------------------------------

    def scans(self, jobs: dict[str, Job]) -> bool:
        """Whether to ask first what the model reads: only with a diff between two sides in one
        environment, and not where the diff touches the suite file itself (its models all
        read it) or changes what is measured (``ChangedFiles.settings``)."""
        r = self.rules
        if r.changed is None or r.changed.settings or r.measure_all or not r.same_environment \
                or len(jobs) != 2:
            return False
        for name, job in jobs.items():
            root = self.opts[name].watch_root
            if root is None:
                return False
            source = Path(job.suite.source)
            if source.is_absolute() and source.is_relative_to(root) \
                    and source.relative_to(root).as_posix() in r.changed.paths:
                return False
        return True

    def scan_done(self, key: Ident, loop: Loop) -> None:
        """With both sides' scans in: a model that reads nothing the change touches is done;
        any other (or one whose scan failed) goes on to its first cold compile."""
        sjs = self.pair(key)
        if any(sj.outputs.scan is None for sj in sjs):
            return
        scans = [sj.outputs.scan.reads if sj.outputs.scan and sj.outputs.scan.ok else None
                 for sj in sjs]
        assert self.rules.changed is not None
        reason = unchanged.by_files(scans[0], scans[1], self.rules.changed) \
            if len(scans) == 2 and scans[0] is not None and scans[1] is not None else None
        for sj, found in zip(sjs, scans, strict=True):
            if found is not None and found.home_files:
                sj.outputs.notes.append(
                    f"it read {found.home_files} files from the repository's own checkout, "
                    "not from this side's worktree: an installed copy of the project is "
                    "measured on both sides, and the change to those files is not")
            if reason is None:
                loop.push(sj, "cold", 1)
                continue
            sj.outputs.timing_skipped, sj.outputs.compile_skipped = reason, True
            sj.planned = True
            loop.finish(sj)

    # --- after the first cold compiles ---------------------------------------------------

    def waits(self, key: Ident) -> bool:
        """Whether a side waits for its partner's first cold compile before planning the rest,
        so that nothing more is spent on a model found unchanged by construction, and so that
        its timing processes know whether the model changed; the pair's first cold compiles
        run side by side, so the wait is short. With ``measure_all`` nothing is skipped, but a
        GPU model's timing processes still need both sides' keys to know whether to time
        base's model beside their own."""
        sjs = [sj for sj in self.pair(key) if not sj.done]
        pairs = not self.rules.measure_all or any(self.may_reference(sj.job) for sj in sjs)
        return pairs and any(not sj.outputs.cold for sj in sjs)

    def may_reference(self, job: Job) -> bool:
        """Whether this job's timing processes may time the first side's model beside their
        own (``reference`` decides, once both first cold compiles are in)."""
        return job.config.device == "cuda" and self.rules.same_environment

    def reference(self, key: Ident) -> str | None:
        """The suite whose eager model a job's timing processes also time: the first side's,
        for a GPU model whose graph or inputs differ between two sides run in one environment
        (None: neither). Launch-bound models run slower in one process than another, eager and
        compiled alike (docs/verdict-quality.md, "A reference beside the compiled model"), so
        their compiled time is judged over a model that is the same code on both sides, timed
        in the same rounds; their own eager moved with the change. Asked once both sides'
        first cold compiles are in."""
        pair = self.pair(key)
        if len(pair) != 2 or any(not sj.outputs.cold for sj in pair):
            return None  # the model on one side only
        base, head = (sj.outputs.cold[0] for sj in pair)
        if not (self.may_reference(pair[0].job) and base.ok and head.ok) \
                or same_model(base.cache.fx, head.cache.fx):
            return None
        return pair[0].job.suite.source

    def reference_code(self) -> SideCode | None:
        """The first side's code: its reference is built from its own checkout, and what
        importing it brought from there is undone."""
        opts = self.opts[self.names[0]]
        if opts.code is not None:
            return opts.code
        return SideCode(root=str(opts.watch_root)) if opts.watch_root is not None else None

    def skip_timing(self, key: Ident, loop: Loop) -> None:
        """With both sides' first cold compile done: skip what cannot differ."""
        if self.rules.measure_all:
            return
        pair = self.pair(key)
        if len(pair) != 2 or any(sj.done or not sj.outputs.cold for sj in pair):
            return
        reason = unchanged.by_keys(pair[0].outputs.cold[0], pair[1].outputs.cold[0],
                                   same_environment=self.rules.same_environment)
        if reason is None:
            return
        for sj in pair:
            sj.outputs.timing_skipped = reason
            sj.drop_held()
            sj.dropped(loop.drop(lambda t, side=sj.side: t.side == side
                                 and ident(t.job) == key
                                 and t.kind not in ("warm_start", "remote")))
            loop.settle(sj)

    # --- follow-ups ------------------------------------------------------------------------

    def follow_up(self, sj: SideJob, key: Ident, loop: Loop) -> bool:
        """Once both sides have run everything, ask (once) whether more processes would settle
        the model: ``extra_timing`` more timing processes (``follow_up``, where both sides
        timed) and ``extra_cold`` more cold compiles (``cold_follow_up``, where both sides
        have two or more), queued interleaved and paired as before. True: ``sj`` is not
        finished yet (it waits for its partner, or for those processes)."""
        if sj.followed_up:
            return False
        other = self.partner(sj, key)
        if other is None or other.done:
            return False
        if not self.askers(sj):
            # nothing to ask of this side, so nothing of the pair: a partner that waited
            # for it to decide is finished too
            if other.idle and not other.followed_up:
                loop.finish(other)
            return False
        if not other.idle:
            return True  # its partner is still measuring: decide when both are in
        queued = self._ask_all(sj, self.pair(key), loop)
        if not queued:
            loop.finish(other)
        return queued

    def _ask_all(self, sj: SideJob, pair: list[SideJob], loop: Loop) -> bool:
        """Ask each question that applies to both sides; queue what an answer asks for."""
        for o in pair:
            o.followed_up = True
        so_far = [o.so_far(self.rules.cold_concurrent) for o in pair]
        queued = False
        for kind, ask, extra in self.askers(sj):
            if not all(self.askers(o, kind) for o in pair):
                continue
            why = self._ask(ask, pair, so_far)
            if why is None:
                continue
            queued = True
            what = "timing processes" if kind == "timing" else "cold compiles"
            for o in pair:
                o.outputs.notes.append(f"{extra} more {what} a side: {why}")
                own = o.opts.own(kind)
                for k in range(own + 1, own + extra + 1):
                    loop.push(o, kind, k)
        return queued

    def askers(self, sj: SideJob, only: Kind | None = None) -> list[Asker]:
        """The follow-up questions that apply to ``sj`` now: timing, where it timed; cold, where
        it has two or more cold compiles (one alone is shown, not judged)."""
        r, out = self.rules, sj.outputs
        asks: list[Asker] = []
        if r.follow_up is not None and r.extra_timing > 0 and out.timing:
            asks.append(("timing", r.follow_up, r.extra_timing))
        if r.cold_follow_up is not None and r.extra_cold > 0 \
                and sum(1 for c in out.cold if c.ok) >= 2:
            asks.append(("cold", r.cold_follow_up, r.extra_cold))
        return [a for a in asks if only is None or a[0] == only]

    # --- the profile process ---------------------------------------------------------------

    def profile(self, sj: SideJob, key: Ident, loop: Loop) -> bool:
        """Once both sides have run everything (follow-ups included), ask once whether the
        model gets a profile process a side (``compiler/kernels.py``): every timed model with
        ``profile_kernels``, else one whose verdict ``profile`` says warrants it (a change in
        compiled time). Both sides, or neither: a profile is diffed against its partner's.
        True: ``sj`` is not finished yet (its partner is still measuring, or its profile
        process is queued)."""
        r = self.rules
        if sj.profile_asked:
            return not sj.idle
        if r.profile is None and not r.profile_kernels:
            return False
        other = self.partner(sj, key)
        if other is not None and not other.done and not other.idle:
            return True  # decided once both are in
        pair = [o for o in self.pair(key) if not o.done]
        for o in pair:
            o.profile_asked = True
        why = "--profile-kernels" if r.profile_kernels else None
        if why is None and r.profile is not None and len(pair) == 2 \
                and all(o.timed() for o in pair):
            why = self._ask(r.profile, pair, [o.so_far(r.cold_concurrent) for o in pair])
        timed = [o for o in pair if o.timed()] if why else []
        for o in timed:
            if not r.profile_kernels:
                o.outputs.notes.append(f"kernel profile: {why}")
            loop.push(o, "profile", 1)
        for o in pair:
            if o is not sj and o not in timed:
                loop.finish(o)
        return sj in timed

    @staticmethod
    def _ask(ask: FollowUp, pair: list[SideJob], so_far: list[ModelResult]) -> str | None:
        """One asker's answer on the pair's results so far; a judging bug must not stop the
        measuring: it is a note, and no follow-up."""
        try:
            return ask(*so_far)
        except Exception as e:
            for o in pair:
                o.outputs.notes.append(f"no follow-up: asking failed ({type(e).__name__}: {e})")
            return None
