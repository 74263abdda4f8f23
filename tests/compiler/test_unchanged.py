"""The two unchanged-by-construction rules (``compiler/unchanged.py``): a case for each way a
model stops being provably the same on both sides."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from compilewatch.compiler.protocol import Reads, WorkerOutput
from compilewatch.compiler.reads import ChangedFiles
from compilewatch.compiler.unchanged import by_files, by_keys
from compilewatch.core.schema import GraphBreak, Recompile
from tests.factories import worker_output


def _reads(*files: str) -> Reads:
    return Reads(files=list(files))


def _diff(*paths: str) -> ChangedFiles:
    return ChangedFiles.of([("M", p) for p in paths], lambda _: True)


def test_by_files_only_when_both_sides_read_the_same_and_nothing_changed() -> None:
    same = _reads("models.py")
    nothing = _diff("README.md")
    reason = by_files(same, same, nothing)
    assert reason and "models.py" in reason and "unchanged by construction" in reason
    assert by_files(same, _reads("models.py", "extra.py"), nothing) is None
    assert by_files(same, same, _diff("models.py")) is None
    opaque = Reads(files=["models.py"], opaque="started a subprocess")
    assert by_files(opaque, opaque, nothing) is None
    # where imports looked is part of what both sides must share; the import system's
    # listings are not (a folder deleted on head is listed on base only)
    assert by_files(same, Reads(files=["models.py"], sought=["fast"]), nothing) is None
    gone = ChangedFiles.of([("D", "docs/a.md")], lambda d: d != "docs")
    assert by_files(Reads(files=["models.py"], import_listed=[".", "docs"]),
                    Reads(files=["models.py"], import_listed=["."]), gone) is not None


def _cold(**update: object) -> WorkerOutput:
    spec = SimpleNamespace(model="m", phase="cold", time_steady_state=False, rounds=3,
                           check_accuracy=False)
    out = worker_output(spec)
    if "frames" in update or "graphs" in update:
        update["compile"] = out.compile.model_copy(update={  # type: ignore[union-attr]
            k: update.pop(k) for k in ("frames", "graphs") if k in update})
    return out.model_copy(update=update)


def _other_key(out: WorkerOutput, which: str) -> WorkerOutput:
    keys = [k.model_copy(update={"key": k.key[::-1]}) for k in getattr(out.cache, which)]
    return out.model_copy(update={"cache": out.cache.model_copy(update={which: keys})})


# head's first cold compile -> whether the model is still the same by construction
CASES = {
    "the same": (lambda b: b, True),
    "another FX key": (lambda b: _other_key(b, "fx"), False),
    "another AOT key": (lambda b: _other_key(b, "aot"), False),
    "a graph break": (lambda b: b.model_copy(update={
        "graph_breaks": [GraphBreak(reason="Data-dependent branching")]}), False),
    "a recompile": (lambda b: b.model_copy(update={
        "recompiles": [Recompile(reason="size mismatch")]}), False),
    "two frames": (lambda b: _cold(frames=2), False),
    "two graphs": (lambda b: _cold(graphs=2), False),
    "a failed compile": (lambda b: b.model_copy(update={"ok": False, "compile": None}), False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_by_keys(case: str) -> None:
    make, same = CASES[case]
    base = _cold()
    assert (by_keys(base, make(base), same_environment=True) is not None) is same
    # never across environments, whatever the keys say
    assert by_keys(base, make(base), same_environment=False) is None
