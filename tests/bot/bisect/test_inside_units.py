"""The parts of "inside the first bad commit" that need no compile: which Inductor flags
differ between two results' cache keys and what can be set of them, and how the compiler
bisector's answer (untrusted: a model's process wrote it) is read."""

from __future__ import annotations

from pathlib import Path

from compilewatch.bot.bisect.compiler import read_finding
from compilewatch.bot.bisect.flags import differing, setting
from compilewatch.bot.bisect.measure import Side
from compilewatch.bot.judge.bisection import Candidate
from compilewatch.compiler.bisector import BisectorOutput
from compilewatch.core.schema import Cache, CacheKey
from tests.factories import model_result


def keyed(values: dict[str, str], hashes: dict[str, str] | None = None):
    comps = {n: f"h{abs(hash(v)) % 10**8:08d}" for n, v in values.items()} | (hashes or {})
    key = CacheKey(key="f" * 40, components=comps, values=values, phase="cold")
    return model_result("m").model_copy(update={"cache": Cache(fx=[key])})


def test_the_flags_that_differ_and_those_that_cannot_be_set():
    good = keyed({"inductor_config[cpp.simdlen]": "None", "inductor_config[debug]": "False",
                  "inductor_config[custom]": "<function f at 0x1>", "gm": "x"},
                 {"inductor_config[long]": "aaaa1111"})
    bad = keyed({"inductor_config[cpp.simdlen]": "1", "inductor_config[debug]": "False",
                 "inductor_config[custom]": "<function g at 0x2>", "gm": "y"},
                {"inductor_config[long]": "bbbb2222"})
    changes, not_applied = differing(good, bad)
    assert [(c.name, c.good, c.bad) for c in changes] == [
        ("inductor_config[cpp.simdlen]", "None", "1")]
    assert not_applied == ["inductor_config[custom]", "inductor_config[long]"]
    assert setting(changes) == {"cpp.simdlen": 1}


def side() -> Side:
    return Side("bisector", Candidate(index=3, commit="3" * 40))


def test_a_bisector_answer_that_is_not_one_is_a_note(tmp_path: Path):
    out = tmp_path / "out.json"
    out.write_text('{"ok": true, "backend": 7}')
    f = read_finding(out, side(), "micro/m [cpu]", "Traceback ... boom")
    assert f.backend is None and f.note.startswith("the bisector wrote no result") \
        and "boom" in f.note and f.candidate == 3


def test_the_bisector_s_own_failure_and_a_failure_it_did_not_see_are_said(tmp_path: Path):
    out = tmp_path / "out.json"
    out.write_text(BisectorOutput(ok=False, error="ImportError: no suite").model_dump_json())
    assert "ImportError: no suite" in read_finding(out, side(), "m", "").note
    out.write_text(BisectorOutput(ok=True, reproduced=False).model_dump_json())
    assert "did not reproduce" in read_finding(out, side(), "m", "").note


def test_a_named_pass_is_reported_as_the_bisector_named_it(tmp_path: Path):
    out = tmp_path / "out.json"
    out.write_text(BisectorOutput(ok=True, reproduced=True, backend="inductor",
                                  subsystem="lowerings", bisect_number=1, debug_info="relu",
                                  tests=15).model_dump_json())
    f = read_finding(out, side(), "micro/m [cpu]", "")
    assert (f.backend, f.subsystem, f.bisect_number, f.debug_info, f.note) == (
        "inductor", "lowerings", 1, "relu", "15 compiles")
