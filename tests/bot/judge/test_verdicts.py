"""compare(): per-model rows, lists apart, aggregates over common models, baseline and overrides."""

from __future__ import annotations

import pytest

from compilewatch.bot.judge.baseline import Baseline, Expected
from compilewatch.bot.judge.comparison import Comparison, Verdict
from compilewatch.bot.judge.thresholds import ModelOverride, ThresholdPolicy, Thresholds
from compilewatch.bot.judge.verdicts import compare
from compilewatch.core.schema import Category, ModelResult
from tests.factories import BASE_COMPONENTS, GPU, model_result, run_results


def _cmp(base: list, head: list, **kw) -> Comparison:
    return compare(run_results(base), run_results(head), **kw)


# Three timing and three cold processes a side, with a GPU runner's noise.
NOISE = {"processes": 3, "process_spread": 0.007, "spread": 0.01, "cold_processes": 3,
         "cold_spread": 0.03, "config": GPU}


def test_added_removed_failing_and_fixed_are_listed_apart_and_kept_out_of_aggregates():
    base = [model_result("same", seed=1), model_result("gone", seed=1),
            model_result("breaks", seed=1),
            model_result("fixed", seed=1, category=Category.COMPILE_ERROR, error="x")]
    head = [model_result("same", seed=2), model_result("new", seed=2, compiled_us=1.0),
            model_result("breaks", seed=2, category=Category.CRASH, error="SIGSEGV"),
            model_result("fixed", seed=2)]
    c = _cmp(base, head)
    assert [m.model for m in c.added] == ["new"]
    assert [m.model for m in c.removed] == ["gone"]
    assert [(m.model, m.error) for m in c.newly_failing] == [("breaks", "SIGSEGV")]
    assert [m.model for m in c.newly_fixed] == ["fixed"]
    assert c.aggregates.models == 3  # same, breaks, fixed
    # Only "same" ran on both sides: the fast added model does not move the geomean.
    same = next(r for r in c.rows if r.model == "same")
    assert c.aggregates.geomean_speedup_head == same.speedup.head
    assert c.aggregates.pass_rate_base == 2 / 3 and c.aggregates.pass_rate_head == 2 / 3
    row = {r.model: r for r in c.rows}
    assert row["breaks"].verdict is Verdict.REGRESSION and row["breaks"].gating
    assert row["breaks"].accuracy.head == "fail_to_run"
    assert row["fixed"].verdict is Verdict.IMPROVEMENT and not row["fixed"].gating
    assert c.gating_regression


def test_new_graph_break_and_new_recompile_name_their_reasons():
    base = [model_result("m", seed=1, graph_breaks=["call_function print"],
                         recompiles=["L['x'].size()[0] == 8"])]
    head = [model_result("m", seed=2, graph_breaks=["call_function print",
                                                    "Tensor.item() at 0x7f00deadbeef"],
                         recompiles=["L['x'].size()[0] == 8", "L['x'].dtype == torch.float32"])]
    row = _cmp(base, head).rows[0]
    assert row.graph_breaks.base == 1 and row.graph_breaks.head == 2
    assert row.graph_breaks.new_reasons == ["Tensor.item() at 0x7f00deadbeef"]
    assert row.recompiles.new_reasons == ["L['x'].dtype == torch.float32"]
    assert row.graph_breaks.verdict is Verdict.REGRESSION and row.recompiles.gating
    assert row.verdict is Verdict.REGRESSION


def test_reasons_differing_only_in_memory_addresses_are_not_new():
    base = [model_result("m", seed=1, graph_breaks=["obj at 0x7f01"])]
    head = [model_result("m", seed=2, graph_breaks=["obj at 0x7f99"])]
    row = _cmp(base, head).rows[0]
    assert row.graph_breaks.new_reasons == [] and row.graph_breaks.verdict is Verdict.UNCHANGED


def test_accuracy_pass_to_fail_is_a_gating_regression():
    row = _cmp([model_result("m", seed=1)], [model_result("m", seed=2, accuracy_passed=False)])
    assert (row := row.rows[0]).accuracy.base == "pass"
    assert row.accuracy.head == "fail_accuracy" and row.accuracy.gating


def test_cache_key_change_names_the_component():
    changed = {**BASE_COMPONENTS, "example_inputs[0]": "exin0changed0000"}
    c = _cmp([model_result("m", seed=1, **NOISE)],
             [model_result("m", seed=2, components=changed, **NOISE)])
    row = c.rows[0]
    assert [(ch.kind, ch.changed) for ch in row.cache_changes] == [
        ("fx", ["example_inputs[0]"]), ("aot", ["example_inputs[0]"])]
    assert c.cache.models_with_changes == 1
    assert c.cache.components == {"example_inputs[0]": 1}
    assert row.verdict is Verdict.UNCHANGED  # a key change alone is shown, not judged


def test_cold_compile_regression_and_memory():
    base = [model_result("m", seed=1, cold_s=10, peak_bytes=100 * 2**20, **NOISE)]
    head = [model_result("m", seed=2, cold_s=20, peak_bytes=150 * 2**20, **NOISE)]
    row = _cmp(base, head).rows[0]
    assert row.cold_compile.verdict is Verdict.REGRESSION and row.cold_compile.gating
    assert row.memory.verdict is Verdict.REGRESSION and row.memory.ratio == 1.5


def test_a_training_step_s_forward_backward_peak_is_judged_where_the_whole_step_s_hides_it():
    """Adam's step sets the whole step's peak on both sides; the partitioner saving more
    shows in the peak when the backward ended, and is judged (and gates) there."""
    def step(seed: int, fwd_bwd: int):  # type: ignore[no-untyped-def]
        r = model_result("m", seed=seed, peak_bytes=400 * 2**20, **NOISE)
        return r.model_copy(update={"memory": r.memory.model_copy(update={
            "eager_fwd_bwd_peak_bytes": 300 * 2**20, "compiled_fwd_bwd_peak_bytes": fwd_bwd})})

    row = _cmp([step(1, 200 * 2**20)], [step(2, 260 * 2**20)]).rows[0]
    assert row.memory.verdict is Verdict.UNCHANGED
    assert row.fwd_bwd_memory.verdict is Verdict.REGRESSION and row.fwd_bwd_memory.ratio == 1.3
    assert row.verdict is Verdict.REGRESSION and row.gating
    assert row.gating_findings == ["peak memory (forward+backward)"]
    same = _cmp([step(1, 200 * 2**20)], [step(2, 200 * 2**20)]).rows[0]
    assert same.fwd_bwd_memory.verdict is Verdict.UNCHANGED and not same.gating
    inference = _cmp([model_result("m", seed=1, **NOISE)], [model_result("m", seed=2, **NOISE)])
    assert inference.rows[0].fwd_bwd_memory is None


def test_warm_compile_regression_does_not_gate_by_default():
    def warm(seed: int, seconds: float):  # type: ignore[no-untyped-def]
        r = model_result("m", seed=seed, **NOISE)
        samples = [seconds * f for f in (0.98, 1.0, 1.03)]
        return r.model_copy(update={"compile": r.compile.model_copy(update={
            "warm_s": seconds, "warm_samples_s": samples})})

    row = _cmp([warm(1, 2)], [warm(2, 8)]).rows[0]
    assert row.warm_compile.verdict is Verdict.REGRESSION and not row.warm_compile.gating
    assert row.verdict is Verdict.REGRESSION and not row.gating


def test_baseline_expectations_replace_the_base_count():
    base = [model_result("m", seed=1, graph_breaks=["a", "b"])]
    head = [model_result("m", seed=2, graph_breaks=["a", "b"], accuracy_passed=False)]
    ident = ("micro", "m", "cpu-default-float32-auto")
    known = Baseline({ident: Expected(accuracy="fail_accuracy", graph_breaks=1, recompiles=0)})
    row = _cmp(base, head, baseline=known).rows[0]
    assert row.graph_breaks.expected == 1 and row.graph_breaks.verdict is Verdict.REGRESSION
    assert row.accuracy.expected == "fail_accuracy"
    assert row.accuracy.verdict is Verdict.UNCHANGED  # a known failure is not a regression
    star = Baseline({("micro", "m", "*"): Expected(graph_breaks=3)})
    assert _cmp(base, head, baseline=star).rows[0].graph_breaks.verdict is Verdict.IMPROVEMENT


def test_per_model_override_loosens_one_model_only():
    base = [model_result("noisy", seed=1, config=GPU), model_result("quiet", seed=1, config=GPU)]
    head = [model_result("noisy", seed=2, compiled_us=55, config=GPU),
            model_result("quiet", seed=2, compiled_us=55, config=GPU)]
    policy = ThresholdPolicy(models={"nois*": ModelOverride(compiled_time=0.2)})
    rows = {r.model: r for r in _cmp(base, head, thresholds=policy).rows}
    assert rows["noisy"].compiled_time.verdict is not Verdict.REGRESSION
    assert rows["noisy"].compiled_time.threshold == 0.2
    assert rows["quiet"].compiled_time.verdict is Verdict.REGRESSION


def test_ungated_metric_never_sets_gating_regression():
    t = Thresholds().merged({"compiled_time": {"gate": False}})
    c = _cmp([model_result("m", seed=1)], [model_result("m", seed=2, compiled_us=60)],
             thresholds=t)
    assert c.headline.regressions == 1 and not c.gating_regression


def test_different_environments_are_noted():
    from tests.factories import environment
    base = run_results([model_result("m", seed=1)])
    head = run_results([model_result("m", seed=2)], env=environment(fingerprint="e" * 32,
                                                                    torch="2.14.0"))
    assert "different environments" in compare(base, head).notes[0]


def test_json_round_trips():
    c = _cmp([model_result("m", seed=1)], [model_result("m", seed=2, compiled_us=60)])
    assert Comparison.model_validate_json(c.model_dump_json()) == c


def test_eager_nondeterminism_on_head_is_never_a_gating_regression():
    base = run_results([model_result("m")])
    head = run_results([model_result("m", category=Category.EAGER_NONDETERMINISTIC)])
    c = compare(base, head)
    assert not c.gating_regression
    [row] = c.rows
    assert row.accuracy is not None and row.accuracy.verdict is Verdict.WITHIN_NOISE


def test_a_model_that_passed_and_is_skipped_on_head_gates():
    base = run_results([model_result("m"), model_result("n", seed=1)])
    head = run_results([model_result("m", category=Category.PACKAGE_MISSING,
                                     error="skipped: package not installed: x"),
                        model_result("n", seed=2)])
    c = compare(base, head)
    assert c.gating_regression and c.headline.gating == 1
    assert [r.model for r in c.newly_failing] == ["m"]
    from compilewatch.bot.judge.verdicts import raise_on_gating
    from compilewatch.core.errors import RegressionFound

    with pytest.raises(RegressionFound, match=r"1 model\(s\) with a gating regression: m$"):
        raise_on_gating(c)  # the CI message names it


def test_no_cold_compile_verdict_when_a_side_reused_its_cache():
    base = run_results([model_result("m", cold_s=10.0, **NOISE)])
    warm_head = model_result("m", cold_s=1.0, seed=1, **NOISE)
    warm_head = warm_head.model_copy(update={
        "compile": warm_head.compile.model_copy(update={"cache_dir_was_empty": False})})
    [row] = compare(base, run_results([warm_head])).rows
    assert row.cold_compile is None
    [row] = compare(base, run_results([model_result("m", cold_s=1.0, seed=1, **NOISE)])).rows
    assert row.cold_compile is not None and row.cold_compile.verdict is Verdict.IMPROVEMENT


def _warm_started(r, seconds: float, fx_hit: int, fx_miss: int):  # type: ignore[no-untyped-def]
    """``r`` as a run with ``--warm-cache`` writes it: warm-start time and its cache counters."""
    from compilewatch.core.schema import CacheCounters

    r.compile = r.compile.model_copy(update={"warm_start_s": seconds})
    r.cache = r.cache.model_copy(update={"counters": {
        **r.cache.counters, "warm_start": CacheCounters(fx_hit=fx_hit, fx_miss=fx_miss)}})
    return r


def test_warm_start_is_shown_not_judged_and_a_head_miss_is_said():
    from compilewatch.bot.render.formats import render_html, render_markdown

    base = [_warm_started(model_result("hit", seed=1), 1.0, 1, 0),
            _warm_started(model_result("missed", seed=1), 1.0, 1, 0)]
    head = [_warm_started(model_result("hit", seed=2), 1.1, 1, 0),
            _warm_started(model_result("missed", seed=2), 3.0, 0, 2)]
    c = _cmp(base, head)
    row = {r.model: r for r in c.rows}
    assert row["missed"].warm_start.base == 1.0 and row["missed"].warm_start.head == 3.0
    assert row["missed"].warm_start.verdict is None and not row["missed"].gating
    assert any("2 FX graph cache misses on head, none on base" in n and "these graphs cold" in n
               for n in row["missed"].notes)
    assert not any("warm start" in n for n in row["hit"].notes)
    assert c.aggregates.total_warm_start_s_base == 2.0
    assert c.aggregates.total_warm_start_s_head == 4.1
    md = render_markdown(c)
    assert "warm start from published artifacts 2.00 s → 4.10 s" in md
    assert "| warm compile | warm start | breaks |" in md
    assert "3.00 s +200.0%" in md  # the missed model's warm start, in the all-models table
    assert "these graphs cold" in md  # its note, in the details
    html = render_html(c)
    assert "<th>warm start</th>" in html and "warm start total (published artifacts)" in html
    # Without warm starts the column is not there at all.
    plain = render_markdown(_cmp([model_result("a", seed=1)], [model_result("a", seed=2)]))
    assert "warm start" not in plain


def test_an_unfinished_run_is_said():
    base = run_results([model_result("a", seed=1), model_result("b", seed=1)])
    head = run_results([model_result("a", seed=2)])
    head.finished_at = None  # killed after one model: a checkpoint
    c = compare(base, head)
    assert [m.model for m in c.removed] == ["b"]
    assert any("the head run did not finish" in n and "1 model(s)" in n for n in c.notes)
    assert not any("did not finish" in n for n in _cmp([model_result("a")],
                                                       [model_result("a")]).notes)


@pytest.mark.parametrize(("base_cat", "head_cat", "verdict"), [
    (Category.BUILD_ERROR, Category.BUILD_ERROR, Verdict.FAILING),
    (Category.COMPILE_ERROR, Category.CRASH, Verdict.FAILING),
    (Category.TIMEOUT, Category.TIMEOUT, Verdict.FAILING),
    (Category.OK, Category.BUILD_ERROR, Verdict.REGRESSION),
    (Category.BUILD_ERROR, Category.OK, Verdict.IMPROVEMENT),
])
def test_a_model_failing_on_both_sides_is_not_called_unchanged(base_cat, head_cat, verdict):
    """Neither side has a number: "unchanged" would claim a comparison that never happened,
    and the headline counts such models apart; a baseline that expects the failure makes it
    unchanged again."""
    def side(cat: Category, seed: int):  # type: ignore[no-untyped-def]
        return model_result("m", seed=seed, category=cat,
                            error=None if cat is Category.OK else "RuntimeError: no CUDA")
    c = _cmp([side(base_cat, 1), model_result("ok", seed=1)],
             [side(head_cat, 2), model_result("ok", seed=2)])
    row = next(r for r in c.rows if r.model == "m")
    assert row.verdict is verdict
    assert c.headline.failing == (verdict is Verdict.FAILING)
    assert c.headline.unchanged + c.headline.within_noise + c.headline.noisy == 1  # "ok"
    if verdict is Verdict.FAILING:
        assert not row.gating and not c.gating_regression
        from compilewatch.bot.render.filters import reasons
        why = reasons(row)[0]
        assert "fails on both sides" in why.label and why.items == ["RuntimeError: no CUDA"]
        ident = ("micro", "m", "cpu-default-float32-auto")
        known = Baseline({ident: Expected(accuracy=row.accuracy.head)})
        again = _cmp([side(base_cat, 1)], [side(head_cat, 2)], baseline=known)
        assert again.rows[0].verdict is Verdict.UNCHANGED and again.headline.failing == 0


def test_a_break_that_moved_is_not_new_and_is_shown_where_it_is_now():
    """Same reason, another line (the PR added code above it): not a new break. A break of
    another kind at the same place is; each is shown with its id and place."""
    from compilewatch.core.schema import GraphBreak

    def with_breaks(seed: int, *breaks: GraphBreak):  # type: ignore[no-untyped-def]
        r = model_result("m", seed=seed)
        return r.model_copy(update={"graph_breaks": list(breaks)})

    item = "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    base = [with_breaks(1, GraphBreak(reason=item, gb_id="GB0124", location="models.py:10"))]
    head = [with_breaks(2, GraphBreak(reason=item, gb_id="GB0124", location="models.py:14"),
                        GraphBreak(reason="Data-dependent branching", gb_id="GB0170",
                                   location="models.py:14"))]
    row = _cmp(base, head).rows[0]
    assert row.graph_breaks.new_reasons == [
        "Data-dependent branching [GB0170, at models.py:14]"]
    assert row.graph_breaks.gone_reasons == []


def _colds(r: ModelResult, wall: list[float], cpu: list[float]) -> ModelResult:
    """``r`` with these cold compiles, run side by side with other compiles."""
    return r.model_copy(update={"compile": r.compile.model_copy(update={
        "cold_s": sorted(wall)[1], "cold_samples_s": wall, "cold_cpu_samples_s": cpu,
        "cold_concurrent": True})})


# (wall base, wall head, cpu base, cpu head) -> the cold-compile verdict; the first is the H200
# run where a memory-bound model with 5% more elements was called a +22% regression on CPU time
COLD_WITNESSES = {
    "CPU alone sees a change": ([3.1, 3.4, 3.3], [3.2, 3.5, 3.5], [7.5, 6.6, 7.6],
                                [10.0, 8.0, 8.7], Verdict.WITHIN_NOISE),
    "wall alone sees a change": ([3.0, 3.1, 3.0], [3.9, 4.0, 4.1], [7.0, 7.1, 7.0],
                                 [7.1, 7.0, 7.2], Verdict.WITHIN_NOISE),
    "both see +30%": ([3.0, 3.1, 3.0], [3.9, 4.0, 3.95], [7.0, 7.1, 7.0], [9.1, 9.2, 9.3],
                      Verdict.REGRESSION),
    "both see -30%": ([3.9, 4.0, 3.95], [3.0, 3.1, 3.0], [9.1, 9.2, 9.3], [7.0, 7.1, 7.0],
                      Verdict.IMPROVEMENT),
    "neither": ([3.0, 3.1, 3.0], [3.02, 3.08, 3.01], [7.0, 7.1, 7.0], [7.05, 7.1, 6.98],
                Verdict.UNCHANGED),
}


@pytest.mark.parametrize("case", list(COLD_WITNESSES))
def test_concurrent_cold_compiles_change_only_where_wall_and_cpu_time_agree(case: str) -> None:
    wb, wh, cb, ch, want = COLD_WITNESSES[case]
    base = _colds(model_result("m", **NOISE), wb, cb)
    head = _colds(model_result("m", seed=1, **NOISE), wh, ch)
    [row] = compare(run_results([base]), run_results([head])).rows
    cold = row.cold_compile
    assert cold is not None and cold.verdict is want, cold
    assert cold.gating is (want is Verdict.REGRESSION)
    assert cold.base == pytest.approx(sorted(wb)[1]) and "wall and CPU time" in cold.method
    if case.endswith("alone sees a change"):
        assert cold.note and "disagree" in cold.note


def _pooled(r: ModelResult) -> ModelResult:
    """With the pooled medians a real run records (the factory keeps its own)."""
    import statistics

    lat = r.latency
    assert lat is not None
    return r.model_copy(update={"latency": lat.model_copy(update={
        "compiled_median_us": statistics.median(lat.compiled_us),
        "eager_median_us": statistics.median(lat.eager_us)})})


@pytest.mark.parametrize(("base", "head"), [
    # one slow process of three: the pooled median reads 100 -> 150 (+50%), the processes
    # 215 -> 150 (-30%): the comparison once showed the first beside the second
    ([100.0, 100.0, 1000.0], [150.0, 150.0, 150.0]),
    ([150.0, 150.0, 150.0], [100.0, 100.0, 1000.0]),
    ([200.0, 210.0], [200.0, 5000.0]),
    ([50.0], [60.0]),  # one process a side: both scales agree
])
def test_compiled_time_shown_agrees_with_its_ratio(base: list[float], head: list[float]) -> None:
    from tests.factories import timed_result

    b, h = _pooled(timed_result("m", base, seed=1)), _pooled(timed_result("m", head, seed=2))
    row = compare(run_results([b], run_id="base-run-0001"),
                  run_results([h], run_id="head-run-0001")).rows[0]
    for d in (row.compiled_time, row.eager_time):
        assert d is not None and d.ratio is not None
        assert d.head / d.base == pytest.approx(d.ratio, rel=1e-9)
    shown = row.compiled_time
    assert (shown.head > shown.base) == (shown.ratio > 1.0)
