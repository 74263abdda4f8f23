"""What the probes read from torch: graph breaks (kind, id, place), cache lookups and their key
components, recompiles. The matrix compiles one model per kind of break in one measuring call
(one fork server) and runs on any torch >= 2.8: ``python -m pytest tests/compiler/test_probes.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from compilewatch.compiler import breaks, cachekeys, probes, trace
from compilewatch.compiler.plan import Job
from compilewatch.compiler.schedule import LoopSettings, RunOptions, SideJobs, measure_jobs
from compilewatch.core.schema import CacheKey, Config, GraphBreak, Status
from compilewatch.suites.loader import load_suite

SUITE = Path(__file__).parents[1] / "data" / "suites" / "graph_breaks_suite.py"
ITEM = "Unsupported Tensor.item() call with capture_scalar_outputs=False"
BUILTIN = "Failed to trace builtin operator"
# model -> (torch's gb_type, its id, how often the break happens in one compile)
EXPECTED: dict[str, tuple[str, str, int]] = {
    "data_dependent": ("Data-dependent branching", "GB0170", 1),
    "item": (ITEM, "GB0124", 1),
    "prints": (BUILTIN, "GB0059", 1),
    "c_call": ("Attempted to call function marked as skipped", "GB0007", 1),
    "tolist": ("Tensor.tolist() with non-integer tensor", "GB0109", 1),
    "inlined": (BUILTIN, "GB0059", 1),
    "inlined_twice": (BUILTIN, "GB0059", 2),
    "context_manager": ("Unsupported context manager", "GB0142", 1),
    "explicit": ("Call to `torch._dynamo.graph_break()`", "GB0025", 1),
    "dynamic_shape": ("Dynamic shape operator", "GB0036", 1),
    "in_loop": (BUILTIN, "GB0059", 1),
}


def _marked_lines() -> dict[str, int]:
    lines = SUITE.read_text(encoding="utf-8").splitlines()
    return {m.group(1): n for n, text in enumerate(lines, 1)
            if (m := re.search(r"# break: (\w+)", text))}


# --- the matrix: real compiles ------------------------------------------------------------------

@pytest.fixture(scope="module")
def matrix() -> dict[str, dict]:
    """Every model of the suite compiled cold, and the clean one cold then warm."""
    suite = load_suite(str(SUITE))
    jobs = [Job(suite, spec, Config()) for spec in suite.models.values()]
    fast = {"rounds": 3, "block_ms": 2.0, "timeout_s": 600}
    runs = measure_jobs([SideJobs("run", jobs, RunOptions(measure=False, **fast)),
                    SideJobs("warm", [j for j in jobs if j.spec.name == "clean"],
                         RunOptions(timing_processes=1, **fast))],
                   LoopSettings(compile_slots=2, measure_all=True))
    return {side: {r.result.model: r.result for r in rs} for side, rs in runs.items()}


@pytest.mark.slow
def test_every_kind_of_break_has_its_reason_kind_id_and_place(matrix):
    results, lines = matrix["run"], _marked_lines()
    for name, (kind, gb_id, count) in EXPECTED.items():
        r = results[name]
        assert r.status is Status.PASS, (name, r.error)
        want = GraphBreak(reason=kind, count=count, gb_id=gb_id, kind=kind,
                          location=f"graph_breaks_suite.py:{lines[name]}")
        assert r.graph_breaks == [want], name
        assert r.notes == [], (name, r.notes)  # frames and graphs agree with the breaks


@pytest.mark.slow
def test_a_model_without_breaks_has_one_graph_and_nothing_to_note(matrix):
    r = matrix["run"]["clean"]
    assert r.status is Status.PASS, r.error
    assert (r.graph_breaks, r.recompiles, r.notes) == ([], [], [])
    assert (r.compile.frames, r.compile.graphs) == (1, 1)


@pytest.mark.slow
def test_cold_and_warm_lookups_with_keys_states_and_readable_components(matrix):
    import torch

    cold = matrix["warm"]["clean"]
    assert cold.status is Status.PASS, cold.error
    assert cold.notes == [] and cold.cache.unknown_reason is None
    for phase, state in (("cold", "miss"), ("warm", "hit")):
        fx = [k for k in cold.cache.fx if k.phase == phase]
        aot = [k for k in cold.cache.aot if k.phase == phase]
        assert [k.state for k in fx] == [state] and [k.state for k in aot] == [state], phase
        key = fx[0]
        assert {"gm", "example_inputs[0]", "torch_version"} <= key.components.keys()
        assert key.values["example_inputs[0]"] == "float32[8, 8] stride=(8, 1) cpu"
        assert key.values["torch_version"].startswith(torch.__version__)
        assert "gm" not in key.values  # the graph's code: its hash only
        assert any(n.startswith("inductor_config[") for n in key.values)
        assert "example_inputs[0]" in aot[0].components  # AOTAutograd's own lines (2.13: DEBUG)
        counters = cold.cache.counters[phase]
        assert (counters.fx_hit, counters.fx_miss) == ((1, 0) if state == "hit" else (0, 1))
        assert (counters.aot_hit, counters.aot_miss) == ((1, 0) if state == "hit" else (0, 1))
    brk = matrix["run"]["item"]  # one lookup per graph on each side of the break
    assert [k.state for k in brk.cache.fx] == ["miss"] * brk.compile.graphs == ["miss"] * 2
    assert brk.cache.counters["cold"].fx_miss == 2
    cold_fx = next(k for k in cold.cache.fx if k.phase == "cold")
    warm_fx = next(k for k in cold.cache.fx if k.phase == "warm")
    assert cold_fx.key == warm_fx.key and cold_fx.components == warm_fx.components


@pytest.mark.slow
def test_every_recompile_with_all_its_failed_guards(matrix):
    r = matrix["run"]["recompiles"]
    assert r.status is Status.PASS, r.error
    assert [x.compile_id for x in r.recompiles] == ["0/1", "0/2"]
    assert r.graph_breaks == [] and r.notes == []  # three graphs, each from a recompile
    first, second = (x.reason.splitlines() for x in r.recompiles)
    assert first[0].startswith("0/0: ") and "size mismatch" in first[0]
    # the second recompile tried both cache entries: both guard failures, newest first
    assert [x[:5] for x in second if re.match(r"\d+/\d+: ", x)] == ["0/1: ", "0/0: "]


# --- graph-break payloads as each torch writes them ---------------------------------------------

P213 = """Graph break in user code at /src/m.py:12
Graph Break Reason: Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):

Unsupported Tensor.item() call with capture_scalar_outputs=False
  Explanation: Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False.

  Developer debug context: call_method TensorVariable() item () {}

 For more details about this graph break, please visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0124.html


User code traceback:
  File "/src/run.py", line 3, in <module>
    f(x)
  File "/src/m.py", line 12, in f
    s = y.sum().item()
"""  # noqa: E501
P28 = """Graph break in user code at /src/m.py:6
Graph Break Reason: Data-dependent branching
  Explanation: Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`).

  Developer debug context: attempted to jump with TensorVariable()

User code traceback:
  File "/src/m.py", line 6, in f
    if y.sum() > 0:

Traceback (most recent call last):
  File "/venv/torch/_dynamo/symbolic_convert.py", line 834, in wrapper
torch._dynamo.exc.Unsupported: Data-dependent branching
"""
P28_SKIP = """Graph break: skip: from user code at:
  File "/src/m.py", line 42, in f
    with _LOCK:

Traceback (most recent call last):
  File "/venv/torch/_dynamo/convert_frame.py", line 1272, in __call__
    result = self._inner_convert(
torch._dynamo.exc.Unsupported: Unsupported context manager
  Explanation: Dynamo does not know how to enter a `lock` context manager.

from user code:
   File "/src/m.py", line 42, in f
    with _LOCK:
"""
P213_SKIP_LOOP = """Graph break in user code at /src/m.py:59
Graph Break Reason: Failed to handle graph break gracefully. Skipping the function and falling back to eager. Graph break encountered:

Failed to trace builtin operator
  Explanation: Dynamo does not know how to trace builtin operator `print`

 For more details about this graph break, please visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0059.html

*** While handling this graph break, another graph break occurred: ***

graph break in loop
 For more details about this graph break, please visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb7000.html

User code traceback:
  File "/src/m.py", line 59, in f
    print(i)
"""  # noqa: E501


@pytest.mark.parametrize(("payload", "reason", "gb_id", "where", "skipped"), [
    (P213, ITEM, "GB0124", ("/src/m.py", 12), False),
    (P28, "Data-dependent branching", "GB0170", ("/src/m.py", 6), False),
    (P28_SKIP, "Unsupported context manager", "GB0142", ("/src/m.py", 42), True),
    (P213_SKIP_LOOP, BUILTIN, "GB0059", ("/src/m.py", 59), True),
])
def test_break_payloads_of_each_torch_version(payload, reason, gb_id, where, skipped):
    b = breaks.parse(payload)
    assert (b.reason, b.kind, b.gb_id, (b.file, b.line), b.frame_skipped) == \
        (reason, reason, gb_id, where, skipped)


def test_the_shipped_registry_knows_types_older_torch_lacks():
    """2.8's own registry has no "Data-dependent branching"; the ids are stable."""
    assert breaks.registry()["Data-dependent branching"] == "GB0170"
    assert breaks.registry()["Dynamo recompile limit exceeded"] == "GB0039"


def _event(frame: int, compile_: int, payload: str, attempt: int = 0) -> trace.Event:
    return trace.Event("dynamo_graph_break_reason", frame, compile_, attempt, {}, payload)


def _inlined(call_line: int) -> str:
    return (f"Graph break in user code at /src/m.py:32\nGraph Break Reason: {BUILTIN}\n\n"
            f"User code traceback:\n  File \"/src/m.py\", line {call_line}, in f\n"
            f"    z = helper(y)\n  File \"/src/m.py\", line 32, in helper\n    print()\n")


def test_a_break_in_an_inlined_callee_counts_once_per_call_site():
    events = [_event(0, 0, _inlined(37)),  # the caller's frame
              _event(1, 0, _inlined(37)),  # the callee's own frame: the same break
              _event(3, 0, _inlined(38)),  # a second call site (a resume frame)
              _event(0, 1, _inlined(37))]  # the caller recompiled: a break again
    found = breaks.from_events(events)
    assert [(b.compile_id, b.stack[0][1]) for b in found] == [("0/0", 37), ("3/0", 38),
                                                              ("0/1", 37)]
    assert breaks.summarise(found, str) == [{"reason": BUILTIN, "count": 3, "gb_id": "GB0059",
                                             "kind": BUILTIN, "location": "/src/m.py:32"}]


def test_a_later_attempt_of_the_same_compile_is_the_same_break():
    follow_up = P213.replace(ITEM, "Reconstruction failure")
    found = breaks.from_events([_event(0, 0, P213), _event(0, 0, follow_up, attempt=1)])
    assert [b.reason for b in found] == [ITEM]


def test_frames_that_fell_back_to_eager_without_an_event_are_breaks():
    metrics = [{"compile_id": "0/0", "fail_type": "Unsupported", "fail_reason": "covered"},
               {"compile_id": "0/8", "fail_type": "Unsupported",
                "fail_reason": "Dynamo recompile limit exceeded\n  Explanation: ...",
                "fail_user_frame_filename": None, "fail_user_frame_lineno": None}]
    found = breaks.from_failures(metrics, covered={"0/0"})
    assert [(b.reason, b.gb_id, b.file, b.frame_skipped) for b in found] == \
        [("Dynamo recompile limit exceeded", "GB0039", None, True)]


def test_places_are_relative_to_the_deepest_root_that_holds_them():
    roots = ["/repo", "/repo/suites", "/venv/site-packages", "relative"]
    assert breaks.short_path("/repo/suites/s.py", roots) == "s.py"
    assert breaks.short_path("/venv/site-packages/transformers/m.py", roots) == \
        "transformers/m.py"
    assert breaks.short_path("/elsewhere/x.py", roots) == "/elsewhere/x.py"


def test_without_a_trace_breaks_come_from_the_counters(monkeypatch):
    from torch._dynamo.utils import counters

    def unavailable(*_a, **_k):
        raise trace.TraceUnavailable("no structured trace in this torch (test)")

    monkeypatch.setattr(trace, "install", unavailable)
    counters.clear()
    counters["graph_break"][f"{ITEM}\n  Explanation: ..."] += 2
    probe = probes.CompileProbe()
    try:
        probe.install()
        assert probe.unknown and "no structured trace" in probe.unknown[0]
        assert probe.graph_breaks() == [{"reason": ITEM, "count": 2, "gb_id": "GB0124",
                                         "kind": ITEM, "location": None}]
    finally:
        counters.clear()
        probe.close()


def test_closing_a_probe_puts_torch_back():
    import logging

    import torch._functorch._aot_autograd.autograd_cache as aot
    import torch._inductor.codecache as codecache
    from torch._logging._internal import trace_log

    def state() -> tuple:
        lg = logging.getLogger(trace.AOT_CACHE_LOGGER)
        return (codecache.compiled_fx_graph_hash, aot.autograd_cache_key,
                codecache.FxGraphCache.__dict__["load_with_key"],
                getattr(aot, "_get_debug_lines_for_cache_key", None), lg.level,
                list(lg.filters), list(trace_log.handlers))

    before = state()
    probe = probes.CompileProbe()
    probe.install()
    assert state() != before
    probe.close()
    assert state() == before and probes._ACTIVE is None


def _probe_with(events: list[trace.Event]) -> probes.CompileProbe:
    import logging

    capture = trace.Capture(logging.getLogger("compilewatch.test.trace"), trace._Collector())
    capture.events.extend(events)
    return probes.CompileProbe(capture=capture)


def _metrics(*compile_ids: str) -> list[trace.Event]:
    return [trace.Event("compilation_metrics", int(c[0]), int(c[2]), 0,
                        {"compile_id": c, "is_forward": True}, None) for c in compile_ids]


def test_graphs_that_no_break_explains_are_noted_never_silently_zero():
    from torch._dynamo.utils import counters

    counters.clear()
    try:
        counters["stats"]["unique_graphs"] = 2
        probe = _probe_with(_metrics("0/0", "1/0"))
        assert probe.graph_breaks() == []
        assert probe.notes == ["2 graphs from 2 compiled frames (0 recompiles) but no graph "
                               "break was found"]
        # torch counted a break its trace does not show: noted, and the counter's reason kept
        counters["graph_break"][ITEM] += 1
        probe = _probe_with(_metrics("0/0", "1/0"))
        assert [b["reason"] for b in probe.graph_breaks()] == [ITEM]
        assert probe.notes[0].startswith("torch counted 1 graph breaks but its trace shows 0")
    finally:
        counters.clear()


def test_a_trace_dir_that_cannot_be_made_is_a_reason_not_a_crash(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    probe = probes.CompileProbe(trace_dir=str(blocker / "trace"))
    try:
        probe.install()
        assert probe.capture is not None  # breaks and caches are still read
        assert "raw trace not written" in (probe.unknown_text() or "")
    finally:
        probe.close()


def test_recompile_reasons_payloads():
    assert probes._reasons('"0/0: n == 2   \\nUser stack trace:"') == \
        ["0/0: n == 2\nUser stack trace:"]
    assert probes._reasons('[\n"0/1: size mismatch",\n"0/0: n == 2  "\n]') == \
        ["0/1: size mismatch", "0/0: n == 2"]


# --- cache-key components -----------------------------------------------------------------------

LINES = [
    "[abc123] gm: <lambda>()\n    mm = torch.ops.aten.mm.default(arg0_1, arg1_1)",
    "[def456] example_inputs[0]: TensorMetadata(dtype=torch.float32, shape=torch.Size([8, 16]), "
    "stride=(16, 1), device=device(type='cpu'), layout=torch.strided)",
    "[ghi789] inductor_config[max_autotune]: False",
    "[jkl000] torch_version: \x00\xff binary",
    "[mno111] autograd_config: \x80\x02}q binary pickle",
    "not a component line",
]


def test_components_and_readable_values():
    import torch

    comps, values = cachekeys.parse_debug_lines(LINES)
    assert comps == {"gm": "abc123", "example_inputs[0]": "def456",
                     "inductor_config[max_autotune]": "ghi789", "torch_version": "jkl000",
                     "autograd_config": "mno111"}
    assert values == {"example_inputs[0]": "float32[8, 16] stride=(16, 1) cpu",
                      "inductor_config[max_autotune]": "False",
                      "torch_version": values["torch_version"]}
    assert values["torch_version"].startswith(torch.__version__)


def _tensor_line(i: int, shape: str) -> str:
    h = f"h{i:05d}"
    return (f"[{h}] example_inputs[{i}]: TensorMetadata(dtype=torch.float32, "
            f"shape=torch.Size([{shape}]), stride=(1,), device=device(type='cuda'), "
            "layout=torch.strided)")


def test_a_key_of_ten_thousand_inputs_fits_the_schema():
    """A real model's parameters: runs of equal inputs become one component each."""
    shapes = ["3", "5", "7"] + ["768"] * 260 + [str(1000 + i) for i in range(9737)]
    lines = ["[g0] gm: GraphModule()", *(_tensor_line(i, s) for i, s in enumerate(shapes)),
             *(f"[c{i}] inductor_config[opt{i}]: {i}" for i in range(600))]
    key = CacheKey.model_validate(cachekeys.lookup("fx", "fkey", lines, "miss", "cold"))
    assert len(key.components) <= 4096 and len(key.values) <= 4096
    assert key.values["example_inputs[0]"] == "float32[3] stride=(1,) cuda"
    assert key.values["inductor_config[opt7]"] == "7"
    # 9,737 inputs that all differ: consecutive blocks, each with a combined hash
    blocks = [n for n in key.components if n.startswith("example_inputs[") and ".." in n]
    assert blocks and all(len(key.values[n]) <= cachekeys.VALUE_MAX for n in blocks)
    covered = sum(int(b) - int(a) + 1 for a, b in
                  (re.findall(r"\d+", n) for n in blocks))
    single = sum(1 for n in key.components if re.fullmatch(r"example_inputs\[\d+\]", n))
    assert covered + single == 10_000


def test_a_run_of_equal_inputs_is_one_component_whose_hash_sees_each_member():
    shapes = ["3", "5", "7"] + ["768"] * 260 + ["9"] * 2
    lines = [_tensor_line(i, s) for i, s in enumerate(shapes)]
    comps, values = cachekeys.summarise(*cachekeys.parse_debug_lines(lines), limit=100)
    assert list(comps) == ["example_inputs[0]", "example_inputs[1]", "example_inputs[2]",
                           "example_inputs[3..262]", "example_inputs[263]",
                           "example_inputs[264]"]
    assert values["example_inputs[3..262]"] == "float32[768] stride=(1,) cuda"
    lines[100] = lines[100].replace("[h00100]", "[changed]")
    again, _ = cachekeys.summarise(*cachekeys.parse_debug_lines(lines), limit=100)
    assert again["example_inputs[3..262]"] != comps["example_inputs[3..262]"]
    assert {n for n in comps if comps[n] != again[n]} == {"example_inputs[3..262]"}


def test_trace_lookups_agree_with_the_counters_or_say_so():
    import json

    def ev(name: str, **payload: object) -> trace.Event:
        return trace.Event(name, 0, 0, 0, {"name": name}, json.dumps(payload))

    got = cachekeys.from_trace([
        ev("aotautograd_cache_miss", key="akey", cache_state="miss", components=[]),
        ev("fx_graph_cache_miss", key="fkey", cache_state="miss", components=LINES),
        ev("fx_graph_cache_bypass", cache_state="bypass", cache_bypass_reason="freezing"),
    ], "cold")
    assert [(k["key"], k["state"]) for k in got.fx] == [("fkey", "miss"), ("unkeyed", "bypass")]
    assert [k["bypass_reason"] for k in got.fx] == [None, "freezing"]  # kept on the lookup
    assert got.notes == ["aot cache key components not in torch's trace",
                         "fx cache bypassed: freezing"]
    counts = dict.fromkeys(cachekeys._COUNTERS, 0) | {"fx_miss": 1, "aot_miss": 1}
    assert cachekeys.consistency(got.tally, counts, ["fx", "aot"]) == [
        "fx cache bypass: torch counted 0, its trace shows 1"]


def test_lookup_verdict_beats_the_counter_window():
    """Fallback keys: a miss followed, in the same window, by another graph's AOT-path hit
    stays a miss."""
    from torch._dynamo.utils import counters

    counters.clear()
    wrappers = cachekeys.HashWrappers()
    wrappers.events.append(cachekeys.KeyEvent("fx", "keyA", [], cachekeys.counters_now()))
    counters["inductor"]["fxgraph_cache_miss"] += 1
    counters["inductor"]["fxgraph_cache_hit"] += 1  # loaded for another graph, no key event
    wrappers.resolve_states()
    assert wrappers.events[0].state == "hit"  # what the window alone concludes
    wrappers.fx_states["keyA"] = "miss"
    assert [k["state"] for k in wrappers.lookups("fx", "cold")] == ["miss"]
    counters.clear()


@pytest.mark.parametrize(("metrics", "frames"), [
    ([{"is_forward": True}], 1),
    # on a GPU torch records run-time work (autotuning, kernels compiled on the first call)
    # as a metric of its own: not a frame, or the unchanged-by-construction rule never holds
    ([{"is_forward": True}, {"is_runtime": True}], 1),
    ([{"is_forward": True}, {"is_forward": False}], 1),  # the backward of the same frame
    ([{}, {"is_forward": True, "is_runtime": False}], 2),  # older torch: no field at all
    ([], 0),
])
def test_frames_count_compiled_frames_only(metrics: list[dict], frames: int) -> None:
    assert probes._stats(metrics)["frames"] == frames


def test_a_lazily_compiled_backward_is_in_the_total_and_the_backend():
    """torch records a training step's backward apart (``is_forward`` False, only Inductor's
    times): the phases still add up to the total, and the backward is shown on its own."""
    forward = {"dynamo_cumulative_compile_time_us": 22_000_000,
               "aot_autograd_cumulative_compile_time_us": 21_000_000,
               "inductor_cumulative_compile_time_us": 20_000_000,
               "inductor_code_gen_cumulative_compile_time_us": 19_000_000, "is_forward": True}
    backward = {"inductor_cumulative_compile_time_us": 3_000_000,
                "inductor_code_gen_cumulative_compile_time_us": 2_500_000,
                "backward_cumulative_compile_time_us": 3_100_000, "is_forward": False}
    phases = probes._stats([forward, backward])["phases"]
    assert phases["total"] == pytest.approx(25.1) and phases["backward"] == pytest.approx(3.1)
    assert phases["dynamo"] == pytest.approx(1.0)
    exclusive = ("dynamo", "aot_autograd", "inductor", "codegen")
    assert sum(phases[k] for k in exclusive) == pytest.approx(phases["total"])
    assert "backward" not in probes._stats([forward])["phases"]  # inference: none
