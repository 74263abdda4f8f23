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
