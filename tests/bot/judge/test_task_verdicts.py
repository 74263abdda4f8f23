"""Both tasks of one model are two measurements: compared, rendered and stored apart, under
their own slugs (an inference slug unchanged, a training slug ending in ``-training``)."""

from __future__ import annotations

from compilewatch.bot.judge.verdicts import compare
from compilewatch.bot.render.formats import render_markdown
from compilewatch.core.schema import Config, Training
from compilewatch.db import connect, ingest, load_run
from tests.factories import model_result, run_results

TRAIN = Config(task="training")


def _side(training_us: float):  # type: ignore[no-untyped-def]
    trained = model_result("ln_mlp_block", config=TRAIN, compiled_us=training_us).model_copy(
        update={"training": Training(optimizer="adam")})
    return run_results([model_result("ln_mlp_block", compiled_us=50.0), trained])


def test_a_training_regression_is_judged_and_shown_apart_from_inference() -> None:
    c = compare(_side(200.0), _side(300.0))
    rows = {r.config: r for r in c.rows}
    assert set(rows) == {"cpu-default-float32-auto", "cpu-default-float32-auto-training"}
    assert rows["cpu-default-float32-auto-training"].verdict.value == "regression"
    assert rows["cpu-default-float32-auto"].verdict.value != "regression"
    # markdown escapes the name and the slug
    assert r"<sub>micro · cpu\-default\-float32\-auto\-training</sub> | 🔴 regression" in \
        render_markdown(c)


def test_the_database_keeps_both_tasks_and_gives_the_training_setup_back(tmp_path) -> None:
    run = _side(200.0)
    with connect(f"sqlite:///{tmp_path / 'runs.db'}") as db:
        ingest(db, run)
        back = load_run(db, run.run_id)
    assert [r.config.slug for r in back.results] == [r.config.slug for r in run.results]
    assert back.results[1].training == Training(optimizer="adam")


def test_a_training_step_set_up_differently_on_the_two_sides_is_said():
    """A base stored before train mode (eval) against a head in train mode: the numbers
    compare two different steps, and the row says which setting moved."""
    from compilewatch.bot.judge.verdicts import compare
    from compilewatch.core.schema import Config, Training
    from tests.factories import model_result, run_results

    cfg = Config(task="training")
    old = Training(optimizer="adam")
    new = Training(optimizer="adam", mode="train", dropouts_zeroed=2)
    base = model_result("mlp", config=cfg, seed=1).model_copy(update={"training": old})
    head = model_result("mlp", config=cfg, seed=2).model_copy(update={"training": new})
    row = compare(run_results([base]), run_results([head])).rows[0]
    assert any("the training step differs between the sides (mode eval → train): its "
               "numbers compare two different steps" in n for n in row.notes), row.notes
    same = compare(run_results([base]), run_results([base.model_copy()])).rows[0]
    assert not any("training step differs" in n for n in same.notes)
    # a model with one more dropout (zeroed too) is a changed model, not another setup
    more = head.model_copy(update={"training": new.model_copy(update={"dropouts_zeroed": 3})})
    added = compare(run_results([head]), run_results([more])).rows[0]
    assert not any("training step differs" in n for n in added.notes)


def _gpu_step(compiled_us: float, host_fraction: float, graph: str, seed: int = 0):  # type: ignore[no-untyped-def]
    """A changed model's training step timed on a GPU, three processes a side, whose blocks
    kept the GPU waiting for the host ``host_fraction`` of the time."""
    cuda = Config(device="cuda", task="training")
    r = model_result("gpt", config=cuda, compiled_us=compiled_us, eager_us=2 * compiled_us,
                     processes=3, process_spread=0.01, seed=seed,
                     components={"gm": graph, "torch_version": "v211"})
    assert r.latency is not None
    return r.model_copy(update={"latency": r.latency.model_copy(update={
        "host_fraction": host_fraction, "compiled_host_us": compiled_us * host_fraction,
        "launch_bound": host_fraction >= 0.8})})


def _row(base, head):  # type: ignore[no-untyped-def]
    [row] = compare(run_results([base]), run_results([head])).rows
    return row


def test_a_changed_step_that_kept_the_gpu_waiting_for_the_host_is_not_called_unchanged() -> None:
    """The host's launches were the step's time on both sides: a heavier GPU step can hide
    under them, so "unchanged" would be a claim the timing cannot make."""
    row = _row(_gpu_step(16_000, 1.0, "flash"), _gpu_step(16_100, 1.0, "manual", seed=1))
    assert row.compiled_time.verdict.value == "noisy"
    assert "host-bound" in row.compiled_time.note and "16.00 ms" in row.compiled_time.note
    assert "benchmarks/plain_loop.py" in row.compiled_time.note
    assert not row.gating


def test_a_gpu_bound_step_and_a_found_change_keep_their_verdicts() -> None:
    gpu_bound = _row(_gpu_step(16_000, 0.4, "flash"), _gpu_step(16_050, 0.4, "manual", seed=1))
    assert gpu_bound.compiled_time.verdict.value in ("unchanged", "within_noise")
    found = _row(_gpu_step(16_000, 1.0, "flash"), _gpu_step(20_000, 1.0, "manual", seed=1))
    assert found.compiled_time.verdict.value == "regression"
    # the same code on both sides is judged per round on compiled/eager, the host cancelling
    same = _row(_gpu_step(16_000, 1.0, "flash"), _gpu_step(16_050, 1.0, "flash", seed=1))
    assert same.compiled_time.verdict.value != "noisy"
