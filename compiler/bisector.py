"""torch's ``CompilerBisector`` on one model, in a worker process of its own.

For a model whose compiled output is wrong (or whose compile or compiled call raises) at a
commit or torch build, the bisector compiles it again and again: with each backend in turn
(eager, aot_eager, aot_eager_decomp_partition, inductor) until one reproduces the failure,
then with that backend's subsystems disabled one at a time, then with the N-th application of
the guilty subsystem's pass found by bisection. Each test builds nothing new: the model is
built once, from its suite in the side's checkout (its own code first on ``sys.path``), and
each test compiles it afresh and compares with eager within the model's tolerance.

Run as ``python -P -m compilewatch.compiler.bisector SPEC OUT``; the parent reads OUT, a
``BisectorOutput``, as untrusted (a model can make its process write anything).
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from compilewatch.compiler import accuracy, overrides
from compilewatch.compiler.model import Model, clone, fp64_reference, run_eager
from compilewatch.compiler.protocol import WorkerSpec, tail
from compilewatch.compiler.worker import compile_kwargs
from compilewatch.core.files import write_atomic
from compilewatch.core.schema import Config, Short, Text
from compilewatch.suites.imports import SideCode


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BisectorSpec(_Frozen):
    suite: str
    model: str
    config: Config
    large: bool = False
    code: SideCode | None = None


class BisectorOutput(_Frozen):
    """What the bisector named; ``ok`` False: the worker itself failed (``error``)."""

    ok: bool
    reproduced: bool = False  # the model failed with the default backend in this process
    backend: Short | None = None
    subsystem: Short | None = None
    bisect_number: int | None = Field(None, ge=0)
    debug_info: Text | None = None
    error: Text | None = None
    tests: int = Field(0, ge=0)  # compiles the bisection made


def _kwargs(m: Model, config: Config, backend: str) -> dict[str, Any]:
    """The model's own ``torch.compile`` arguments with the bisector's backend: options and
    mode are Inductor's, so only the inductor backend takes them."""
    kwargs = {k: v for k, v in compile_kwargs(m.mspec.compile_kwargs, config).items()
              if k != "backend"}
    if backend != "inductor":
        kwargs.pop("mode", None)
        kwargs.pop("options", None)
    return {**kwargs, "backend": backend}


def bisect(spec: BisectorSpec) -> BisectorOutput:
    import torch
    from torch._inductor.compiler_bisector import CompilerBisector

    overrides.apply()
    ws = WorkerSpec(suite=spec.suite, model=spec.model, config=spec.config, phase="cold",
                    large=spec.large, rounds=1, block_ms=1.0, code=spec.code, out="",
                    status_file="")
    m = Model(ws)
    want, _ = run_eager(m, check=False)
    atol, rtol = m.tolerance
    tests = [0]

    def passes(backend: str) -> bool:
        tests[0] += 1
        torch._dynamo.reset()
        try:
            got = clone(m.call(torch.compile(m.fn, **_kwargs(m, spec.config, backend))))
        except Exception:
            return False  # a compile error or a crash of the compiled call: the failure
        return accuracy.compare(got, want, atol, rtol, fp64=lambda: fp64_reference(
            m.fn, m.inputs, m.device)).passed

    if passes("inductor"):
        return BisectorOutput(ok=True, reproduced=False, tests=tests[0])
    found = CompilerBisector.do_bisect(lambda: passes(CompilerBisector.get_backend()
                                                      or "inductor"))
    if found is None:
        return BisectorOutput(ok=True, reproduced=True, tests=tests[0])
    return BisectorOutput(ok=True, reproduced=True, backend=found.backend[:256],
                          subsystem=(found.subsystem or None) and found.subsystem[:256],
                          bisect_number=found.bisect_number,
                          debug_info=tail(str(found.debug_info), 8000)
                          if found.debug_info is not None else None, tests=tests[0])


def main(argv: list[str]) -> int:
    spec = BisectorSpec.model_validate(json.loads(Path(argv[1]).read_text(encoding="utf-8")))
    try:
        out = bisect(spec)
    except Exception:
        out = BisectorOutput(ok=False, error=tail(traceback.format_exc(), 8000))
    write_atomic(argv[2], out.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
