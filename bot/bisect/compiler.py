"""Inside the first bad commit (or build): which part of the compiler breaks the model.

torch's ``CompilerBisector`` runs in a worker of its own (``compiler/bisector.py``) on the
candidate's worktree and interpreter, in the allow-listed environment every worker gets, with
a fresh Inductor cache; what it writes back is validated before it is believed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from pydantic import ValidationError

from compilewatch.bot.bisect.measure import Setup, Side, code_of, env_of, side_plan
from compilewatch.bot.checkout.worktrees import worktrees
from compilewatch.bot.judge.bisection import CompilerFinding
from compilewatch.bot.measure.harness import Measuring
from compilewatch.compiler.bisector import BisectorOutput, BisectorSpec
from compilewatch.compiler.children import run_module
from compilewatch.compiler.processes import worker_env
from compilewatch.compiler.tempdirs import owned_temporary

# the bisector compiles the model once per backend, subsystem and bisection step (Inductor's
# ReLU fault on CPU: about fifteen compiles), each given the time a worker has
COMPILES = 20
MAX_OUTPUT = 1024 * 1024


def compiler_bisect(setup: Setup, side: Side, model: tuple[str, str, str],
                    measuring: Measuring) -> CompilerFinding:
    """Run the bisector on ``model`` (suite, name, config) at ``side``'s candidate."""
    label = f"{model[0]}/{model[1]} [{model[2]}]"
    with worktrees(setup.repo, {side.name: side.commit}) as trees, \
            owned_temporary("compilewatch-bisector-") as tmp:
        plan, why = side_plan(setup, side, trees[side.name], measuring)
        job = next((j for j in (plan.jobs if plan else [])
                    if (j.suite.name, j.spec.name, j.config.slug) == model), None)
        if job is None:
            return CompilerFinding(candidate=side.candidate.index, model=label,
                                   note=f"not run: the model {why or 'is not here'}")
        spec = BisectorSpec(suite=job.suite.source, model=job.spec.name, config=job.config,
                            large=job.config.device == "cuda",
                            code=code_of(setup, trees[side.name]))
        (tmp / "spec.json").write_text(spec.model_dump_json(), encoding="utf-8")
        env = worker_env(tmp / "inductor", env_of(side))
        try:
            done = run_module(side.python, "compilewatch.compiler.bisector",
                              str(tmp / "spec.json"), str(tmp / "out.json"), env=env,
                              timeout=measuring.timeout_s * COMPILES, cwd=tmp)
        except (OSError, subprocess.SubprocessError) as e:
            return CompilerFinding(candidate=side.candidate.index, model=label,
                                   note=f"the bisector did not finish: {e}"[:8000])
        return read_finding(tmp / "out.json", side, label, done.stderr or done.stdout)


def read_finding(path: Path, side: Side, label: str, log: str) -> CompilerFinding:
    """What the worker wrote, checked; its log's end where it wrote nothing usable."""
    index = side.candidate.index
    try:
        out = BisectorOutput.model_validate_json(path.read_bytes()[:MAX_OUTPUT])
    except (OSError, ValidationError, ValueError):
        return CompilerFinding(candidate=index, model=label,
                               note=f"the bisector wrote no result: {log[-2000:]}")
    if not out.ok:
        return CompilerFinding(candidate=index, model=label,
                               note=f"the bisector failed: {(out.error or '')[-4000:]}")
    if not out.reproduced:
        return CompilerFinding(candidate=index, model=label,
                               note="the failure did not reproduce in the bisector's "
                                    "process (compiled output matched eager)")
    if out.backend is None:
        note = "every backend, every subsystem on, passed in the bisector: not isolated"
    else:
        note = f"{out.tests} compiles"
    return CompilerFinding(candidate=index, model=label, backend=out.backend,
                           subsystem=out.subsystem, bisect_number=out.bisect_number,
                           debug_info=out.debug_info, note=note)
