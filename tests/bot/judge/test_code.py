"""The comparison's notes on whose code each side imported (bot/judge/code.py)."""

from __future__ import annotations

import pytest

from compilewatch.bot.judge.code import code_notes
from compilewatch.bot.judge.verdicts import compare
from compilewatch.core.schema import Code, ModuleOrigin, RunResults
from tests.factories import run_results


def _run(**modules: ModuleOrigin) -> RunResults:
    return run_results().model_copy(update={"code": Code(paths=["."], modules=modules)})


MINE = ModuleOrigin(where="checkout", path="proj/__init__.py")
MOVED = ModuleOrigin(where="checkout", path="src/proj/__init__.py")
SITE = ModuleOrigin(where="installed", path="/venv/site-packages/proj/__init__.py")
TORCH = ModuleOrigin(where="installed", path="/venv/site-packages/torch/__init__.py")
TORCH2 = ModuleOrigin(where="installed", path="/other/site-packages/torch/__init__.py")


@pytest.mark.parametrize(("base", "head", "said"), [
    ({"proj": MINE, "torch": TORCH}, {"proj": MINE, "torch": TORCH}, []),
    # another interpreter: its own torch is the environment's note, not this one
    ({"torch": TORCH}, {"torch": TORCH2}, []),
    ({"proj": MINE}, {"proj": MOVED}, ["proj: base from the checkout (proj/__init__.py), head "
                                       "from the checkout (src/proj/__init__.py)"]),
    ({"proj": MINE}, {"proj": SITE}, ["proj: base from the checkout (proj/__init__.py), head "
                                      "from an installed copy (/venv/site-packages/proj"]),
    ({"proj": SITE.model_copy(update={"allowed": True})},
     {"proj": SITE.model_copy(update={"allowed": True})},
     ["proj came from an installed copy (--allow-installed)", "is not measured"]),
])
def test_notes_say_where_the_sides_code_differs(base: dict[str, ModuleOrigin],
                                                head: dict[str, ModuleOrigin],
                                                said: list[str]) -> None:
    notes = " ".join(code_notes(_run(**base), _run(**head)))
    assert all(s in notes for s in said), notes
    assert bool(notes) == bool(said)


def test_runs_from_before_the_record_say_nothing_and_compare_carries_the_note() -> None:
    assert code_notes(run_results(), run_results()) == []
    comparison = compare(_run(proj=MINE), _run(proj=SITE))
    assert any("different places" in n for n in comparison.notes)
