"""A suite's models, listed by a process of its own.

``python -m compilewatch.suites.listing SOURCE OUT [CODE]`` imports the suite and writes what
planning needs of each model (name, tags, mode, dtype, dynamic, devices, requires, tasks) to
OUT as JSON. CODE, a ``SideCode`` as JSON, is the side's own code: its folders go first on the
import path, and the repository's modules imported from elsewhere are refused
(``suites/imports.py``).
``pr`` lists a pull request's suites this way, in the workers' allow-listed environment, so a
suite file's module-level code never runs in the process that holds the job's credentials;
``read`` checks what comes back as strictly as any other input from a PR.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from compilewatch.core.errors import SuiteError
from compilewatch.core.schema import TASKS, Device, DType, Mode, Origins, Task
from compilewatch.suites import imports
from compilewatch.suites.imports import SideCode
from compilewatch.suites.loader import Suite, load_suite
from compilewatch.suites.registry import NAME_RE, ModelSpec

Name = Annotated[str, StringConstraints(pattern=NAME_RE.pattern)]
Package = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_]\w*)*$",
                                           max_length=128)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ListedModel(_Strict):
    name: Name
    tags: list[Name] = Field(default_factory=list, max_length=32)
    mode: Mode | dict[Device, Mode] | None = None
    dtype: DType | None = None
    dynamic: bool | None = None
    devices: list[Device] = Field(min_length=1, max_length=8)
    requires: list[Package] = Field(default_factory=list, max_length=32)
    tasks: list[Task] = Field(default_factory=lambda: list(TASKS), min_length=1, max_length=2)


class Listing(_Strict):
    name: Name
    module: Annotated[str, StringConstraints(max_length=256)]
    models: list[ListedModel] = Field(min_length=1, max_length=2000)
    modules: Origins = Field(default_factory=dict)


def describe(source: str, code: SideCode | None = None) -> dict[str, Any]:
    """The child's side: import the suite (from the side's own code) and say what it
    registers and where its imports came from."""
    if code is not None:
        imports.activate(code)
    before = imports.top_levels()
    suite = load_suite(source)
    modules = imports.check(code, imports.top_levels() - before) if code is not None else {}
    return {"name": suite.name, "module": suite.module,
            "modules": {k: v.model_dump() for k, v in modules.items()}, "models": [
        {"name": s.name, "tags": list(s.tags),
         "mode": dict(s.mode) if isinstance(s.mode, dict) else s.mode, "dtype": s.dtype,
         "dynamic": s.dynamic, "devices": list(s.devices), "requires": list(s.requires),
         "tasks": list(s.tasks)}
        for s in suite.models.values()]}


def _built_in_the_worker(*_: Any) -> Any:
    raise SuiteError("a listed model is built by its worker, which imports the suite itself")


def read(source: str, text: str) -> Suite:
    """The parent's side: the child's JSON, checked, as a ``Suite`` whose models plan jobs (a
    worker imports the suite again to build them)."""
    try:
        listing = Listing.model_validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise SuiteError(f"listing the models of {source} gave an invalid answer: "
                         f"{where}: {first['msg']}") from None
    models = {m.name: ModelSpec(name=m.name, factory=_built_in_the_worker,
                                module=listing.module, tags=tuple(m.tags), mode=m.mode,
                                dtype=m.dtype, dynamic=m.dynamic, devices=tuple(m.devices),
                                requires=tuple(m.requires), tasks=tuple(m.tasks))
              for m in listing.models}
    return Suite(name=listing.name, source=source, module=listing.module, models=models,
                 modules=dict(listing.modules))


def main(argv: list[str]) -> int:
    source, out = argv[1], Path(argv[2])
    try:
        code = SideCode.model_validate_json(Path(argv[3]).read_text(encoding="utf-8")) \
            if len(argv) > 3 else None
        data: dict[str, Any] = describe(source, code)
    except SuiteError as e:
        data = {"error": str(e)}
    out.write_text(json.dumps(data), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
