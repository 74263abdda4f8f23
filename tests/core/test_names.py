"""A mistyped --model gets the names it probably meant."""

from __future__ import annotations

from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.core.names import did_you_mean, unmatched_models
from compilewatch.suites.loader import load_suite

MICRO = list(load_suite("micro").models)


def test_a_typo_gets_did_you_mean() -> None:
    assert did_you_mean("pointwsie", MICRO) == ["pointwise"]
    msg = unmatched_models(["pointwsie"], MICRO, "micro")
    assert msg == "--model pointwsie (did you mean pointwise?) matches no model in micro"


def test_nothing_close_lists_the_models() -> None:
    msg = unmatched_models(["resnet50"], MICRO, "micro")
    assert msg.startswith("--model resnet50 matches no model in micro; models there: ")
    assert "pointwise" in msg and "compilewatch suites" in msg


def test_several_patterns_each_get_their_own_suggestion() -> None:
    msg = unmatched_models(["pointwsie", "gelu_m"], MICRO, "either side")
    assert "pointwsie (did you mean pointwise?)" in msg and "gelu_m (did you mean gelu_mm" in msg


def test_run_with_a_typo_suggests_the_model(tmp_path) -> None:  # type: ignore[no-untyped-def]
    res = CliRunner().invoke(main, ["run", "--suite", "micro", "--model", "pointwsie", "--out",
                                    str(tmp_path / "r.json"), "--no-db"])
    assert res.exit_code == 2 and "did you mean pointwise?" in res.output
