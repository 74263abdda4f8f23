"""How a bisection's step is called: the spellings of --metric, the deterministic reads and the
timed verdicts (on made-up results whose noise is known)."""

from __future__ import annotations

import pytest

from compilewatch.bot.judge.bisect_metrics import (
    Call,
    check_component,
    combine,
    deterministic_call,
    parse_metric,
    timed_call,
)
from compilewatch.bot.judge.host import HostNoise
from compilewatch.bot.judge.thresholds import Thresholds
from compilewatch.core.errors import UsageError
from compilewatch.core.schema import Category
from tests.factories import BASE_COMPONENTS, model_result

T = Thresholds()


@pytest.mark.parametrize(("typed", "name", "timed"), [
    ("compiled-time", "compiled-time", True), ("cold_compile", "cold-compile", True),
    ("Warm-Compile", "warm-compile", True), ("graph-breaks", "graph-breaks", False),
    ("recompiles", "recompiles", False), ("accuracy", "accuracy", False),
    ("peak_memory", "peak-memory", False), ("cache:gm", "cache:gm", False),
    ("cache:example_inputs[0]", "cache:example_inputs[0]", False),
    ("cache:inductor_config[triton.cudagraphs]", "cache:inductor_config[triton.cudagraphs]",
     False),
])
def test_every_metric_has_one_clear_spelling(typed, name, timed):
    m = parse_metric(typed)
    assert (m.name, m.timed) == (name, timed)


@pytest.mark.parametrize(("typed", "said"), [
    ("graph-break", "did you mean graph-breaks"), ("speed", "one of compiled-time"),
    ("cache:", "not a cache-key component"), ("cache:a b", "not a cache-key component"),
    ("cache:g\nm", "not a cache-key component"),
    ("", "is not a metric"),
])
def test_a_bad_metric_is_refused_naming_it(typed, said):
    with pytest.raises(UsageError) as e:
        parse_metric(typed)
    assert said in str(e.value) and repr(typed) in str(e.value)


def test_more_graph_breaks_than_the_good_end_is_bad_fewer_is_not():
    m = parse_metric("graph-breaks")
    good = model_result("m", graph_breaks=["a"])
    assert deterministic_call(m, good, model_result("m", graph_breaks=["a", "b"])).call \
        is Call.BAD
    assert deterministic_call(m, good, model_result("m")).call is Call.GOOD
    assert deterministic_call(m, good, model_result("m", graph_breaks=["x"])).call is Call.GOOD


def test_a_recompile_more_is_bad():
    m = parse_metric("recompiles")
    r = deterministic_call(m, model_result("m"), model_result("m", recompiles=["size"]))
    assert (r.call, r.value) == (Call.BAD, "1")


def test_a_changed_component_is_bad_and_says_what_it_was():
    m = parse_metric("cache:example_inputs[0]")
    good = model_result("m")
    moved = model_result("m", components={**BASE_COMPONENTS, "example_inputs[0]": "other"})
    other = model_result("m", components={**BASE_COMPONENTS, "gm": "anothergraph"})
    r = deterministic_call(m, good, moved)
    assert r.call is Call.BAD and r.why.startswith("was exin0aaaa") and "good end" in r.why
    assert deterministic_call(m, good, other).call is Call.GOOD  # another component moved


def test_a_component_no_key_has_is_refused_with_the_ones_it_has():
    with pytest.raises(UsageError) as e:
        check_component(parse_metric("cache:example_input[0]"), [model_result("m")])
    assert "did you mean example_inputs[0]" in str(e.value)
    check_component(parse_metric("cache:gm"), [model_result("m")])


def test_accuracy_bad_on_a_wrong_output_or_a_crash_skipped_where_eager_fails():
    m = parse_metric("accuracy")
    good = model_result("m")
    assert deterministic_call(m, good, model_result("m", accuracy_passed=False)).call \
        is Call.BAD
    crash = model_result("m", category=Category.CRASH, error="Segmentation fault")
    assert deterministic_call(m, good, crash).call is Call.BAD
    for category in (Category.EAGER_ERROR, Category.BUILD_ERROR, Category.TIMEOUT):
        r = deterministic_call(m, good, model_result("m", category=category, error="boom"))
        assert r.call is Call.SKIP and "boom" in r.why


def test_a_model_that_did_not_run_or_is_missing_is_skipped():
    m = parse_metric("graph-breaks")
    good = model_result("m")
    failed = model_result("m", category=Category.COMPILE_ERROR, error="Unsupported: x\nmore")
    assert deterministic_call(m, good, failed).why == "compile error: Unsupported: x"
    assert deterministic_call(m, good, None).call is Call.SKIP


def _timed(compiled_us: float, processes: int = 3, seed: int = 2, spread: float = 0.01):
    return model_result("m", processes=processes, process_spread=spread, spread=0.01,
                        seed=seed, compiled_us=compiled_us)


def test_a_ten_times_slower_step_is_bad():
    r = timed_call(parse_metric("compiled-time"), _timed(50.0, seed=1), _timed(500.0), T)
    assert r.call is Call.BAD and "+9" in r.value


def test_a_step_within_the_threshold_is_good():
    r = timed_call(parse_metric("compiled-time"), _timed(50.0, seed=1), _timed(50.0), T)
    assert r.call is Call.GOOD


def test_an_open_verdict_is_unsettled_not_a_guess():
    r = timed_call(parse_metric("compiled-time"), _timed(50.0, seed=1),
                   _timed(52.0, processes=2, seed=3, spread=0.08), T)
    assert r.call is Call.UNSETTLED and "within noise" in r.why


def test_a_host_too_noisy_to_judge_leaves_the_step_unsettled():
    r = timed_call(parse_metric("compiled-time"), _timed(50.0, seed=1), _timed(500.0), T,
                   host=HostNoise(cpu=True, detail="CPU workload spread 40%"))
    assert r.call is Call.UNSETTLED


def test_one_cold_compile_a_side_is_not_judged_three_are():
    m = parse_metric("cold-compile")
    one = timed_call(m, model_result("m", seed=1), model_result("m", seed=2, cold_s=40.0), T)
    assert one.call is Call.UNSETTLED
    three = timed_call(m, model_result("m", seed=1, cold_processes=3, cold_spread=0.02),
                       model_result("m", seed=2, cold_processes=3, cold_spread=0.02,
                                    cold_s=40.0), T)
    assert three.call is Call.BAD


def test_several_models_are_bad_where_any_is():
    assert combine([Call.GOOD, Call.BAD, Call.SKIP]) is Call.BAD
    assert combine([Call.GOOD, Call.UNSETTLED, Call.SKIP]) is Call.UNSETTLED
    assert combine([Call.GOOD, Call.SKIP]) is Call.SKIP
    assert combine([Call.GOOD, Call.GOOD]) is Call.GOOD
