"""[tool.compilewatch] thresholds, per-model overrides and the baseline path."""

from __future__ import annotations

from pathlib import Path

import pytest

from compilewatch.bot.judge.project import load_project_config
from compilewatch.core.errors import UsageError


def _repo(tmp_path, body: str):
    (tmp_path / "pyproject.toml").write_text("[tool.compilewatch]\n" + body)
    return load_project_config(tmp_path)


def test_defaults_without_a_pyproject(tmp_path):
    cfg = load_project_config(tmp_path)
    t = cfg.threshold_policy().for_model("anything")
    assert t.compiled_time.regression == 0.03 and t.cold_compile.regression == 0.15
    assert not t.warm_compile.gate
    assert cfg.baseline_path == tmp_path / ".compilewatch" / "baseline.csv"


def test_thresholds_shorthand_partial_tables_and_model_overrides(tmp_path):
    cfg = _repo(tmp_path, """
suites = ["micro"]
baseline = "ci/expected.csv"
[tool.compilewatch.thresholds]
compiled_time = 0.05
cold_compile = { gate = false }
[tool.compilewatch.models."hf_*"]
compiled_time = { regression = 0.10, min_abs = 2.0 }
[tool.compilewatch.models.hf_gpt2]
recompiles = 2
""")
    policy = cfg.threshold_policy()
    plain = policy.for_model("resnet")
    assert plain.compiled_time.regression == 0.05
    assert plain.cold_compile.regression == 0.15 and not plain.cold_compile.gate
    bert = policy.for_model("hf_bert")
    assert bert.compiled_time.regression == 0.10 and bert.compiled_time.min_abs == 2.0
    gpt2 = policy.for_model("hf_gpt2")
    assert gpt2.compiled_time.regression == 0.10 and gpt2.recompiles.regression == 2
    assert cfg.baseline_path == tmp_path / "ci" / "expected.csv"
    assert cfg.suites == ("micro",)


@pytest.mark.parametrize(("body", "message"), [
    ("[tool.compilewatch.thresholds]\ncompiled_tme = 0.05\n", "thresholds.compiled_tme"),
    ("[tool.compilewatch.thresholds]\ncompiled_time = -1\n", "thresholds.compiled_time"),
    ("[tool.compilewatch.models.gpt2]\ncompiled_time = { regresion = 0.1 }\n",
     "models.gpt2.compiled_time.regresion"),
    ("[tool.compilewatch.models.gpt2]\nspeed = 0.1\n", "models.gpt2.speed"),
])
def test_typos_are_errors_that_name_the_key(tmp_path, body, message):
    with pytest.raises(UsageError, match=message):
        _repo(tmp_path, body)


def test_cache_public_keys_are_validated_at_load(tmp_path: Path) -> None:
    from compilewatch.core import signing

    _, public = signing.generate()
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.compilewatch]\ncache_public_keys = ["{public}"]\n')
    assert load_project_config(tmp_path).cache_public_keys == (public,)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.compilewatch]\ncache_public_keys = ["ed25519:nope"]\n')
    with pytest.raises(UsageError, match="cache_public_keys"):
        load_project_config(tmp_path)


def test_tasks_are_read_and_checked(tmp_path):
    assert _repo(tmp_path, 'tasks = ["training"]').tasks == ("training",)
    with pytest.raises(UsageError, match="tasks"):
        _repo(tmp_path, 'tasks = ["serving"]')


PYPROJECT = '''[project]
name = "userproj"
version = "0.1.0"
dependencies = ["torch"]

[tool.compilewatch]
suites = ["bench/models.py"]
tasks = ["inference"]
pythonpath = ["src"]
thresholds = { compiled_time = 0.05 }
'''


@pytest.mark.parametrize(("old", "new", "keys"), [
    ('suites = ["bench/models.py"]', 'suites = ["bench/models.py", "micro"]',
     {"tool.compilewatch.suites"}),
    ('tasks = ["inference"]', 'tasks = ["inference", "training"]', {"tool.compilewatch.tasks"}),
    ('pythonpath = ["src"]', 'pythonpath = ["lib"]', {"tool.compilewatch.pythonpath"}),
    ('name = "userproj"', 'name = "userproj2"', {"project.name"}),
    ('version = "0.1.0"', 'version = "0.2.0"', set()),
    ('dependencies = ["torch"]', 'dependencies = ["torch", "numpy"]', set()),
    ("compiled_time = 0.05", "compiled_time = 0.2", set()),
    ('tasks = ["inference"]', 'tasks = ["inference"]  # one task\n# a comment', set()),
    ('suites = ["bench/models.py"]\ntasks = ["inference"]',
     'tasks = ["inference"]\nsuites = ["bench/models.py"]', set()),
])
def test_only_a_change_to_what_is_measured_is_a_measuring_setting(
        tmp_path: Path, old: str, new: str, keys: set[str]) -> None:
    """``pr`` sends every model to be measured again only for these keys (``changed_files``)."""
    from compilewatch.bot.judge.project import measuring_settings

    sides = {}
    for side, text in (("base", PYPROJECT), ("head", PYPROJECT.replace(old, new))):
        assert side == "base" or text != PYPROJECT
        (tmp_path / side).mkdir()
        (tmp_path / side / "pyproject.toml").write_text(text)
        sides[side] = measuring_settings(tmp_path / side)
    assert {k for k in sides["base"] if sides["base"][k] != sides["head"][k]} == keys
