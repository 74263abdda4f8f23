"""Suites from built-in names, files and modules; registrations validated."""

from __future__ import annotations

from pathlib import Path

import pytest

from compilewatch.compiler.plan import plan_jobs
from compilewatch.core.errors import SuiteError, UsageError
from compilewatch.suites import model
from compilewatch.suites.loader import load_suite, resolve_suites


def test_builtin_micro_has_the_seed_workloads():
    suite = load_suite("micro")
    assert set(suite.models) == {"pointwise", "gelu_mm", "linear32", "ln_mlp_block",
                                 "graph_break", "shape_branch", "bf16_block_dynamic"}
    assert suite.models["linear32"].default_mode("cuda") == "reduce-overhead"
    assert suite.models["linear32"].default_mode("cpu") == "default"
    bf16 = suite.models["bf16_block_dynamic"]
    assert (bf16.dtype, bf16.dynamic) == ("bfloat16", True)


def test_optional_suites_list_models_and_their_package(tmp_path):
    for name, pkg in (("hf", "transformers"), ("vision", "torchvision"), ("timm", "timm")):
        suite = load_suite(name)
        assert suite.models and all(pkg in m.requires for m in suite.models.values())


def test_file_suite_and_name(tmp_path):
    f = tmp_path / "my_models.py"
    f.write_text("import torch\nfrom compilewatch.suites import model\n"
                 "@model('tiny')\ndef tiny():\n    return torch.sin, (torch.randn(2),)\n")
    suite = load_suite(str(f))
    assert suite.name == "my_models" and list(suite.models) == ["tiny"]


def test_a_relative_file_is_handed_on_by_its_absolute_path(tmp_path, monkeypatch):
    """Workers run in folders of their own: ``--suite models.py`` must still find the file."""
    (tmp_path / "models.py").write_text("import torch\nfrom compilewatch.suites import model\n"
                                        "@model('tiny')\ndef tiny():\n"
                                        "    return torch.sin, (torch.randn(2),)\n")
    monkeypatch.chdir(tmp_path)
    suite = load_suite("models.py")
    assert suite.source == str(tmp_path.resolve() / "models.py")
    monkeypatch.chdir("/")
    assert list(load_suite(suite.source).models) == ["tiny"]
    # a link keeps its own path (the diff names the link, not its target)
    (tmp_path / "linked.py").symlink_to(tmp_path / "models.py")
    monkeypatch.chdir(tmp_path)
    assert load_suite("linked.py").source == str(Path.cwd() / "linked.py")


def test_module_suite(harness_suite, monkeypatch, tmp_path):
    (tmp_path / "team_suite.py").write_text(
        "import torch\nfrom compilewatch.suites import model\nSUITE_NAME = 'team'\n"
        "@model('m1')\ndef m1():\n    return torch.cos, (torch.randn(2),)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    suite = load_suite("team_suite")
    assert suite.name == "team" and list(suite.models) == ["m1"]


@pytest.mark.parametrize("source, needle", [
    ("no_such_suite_anywhere", "not a built-in"),
    ("missing.py", "does not exist"),
])
def test_unknown_suites(source, needle):
    with pytest.raises(SuiteError, match=needle):
        load_suite(source)


def test_broken_suite_file_names_the_error(tmp_path):
    f = tmp_path / "broken.py"
    f.write_text("raise RuntimeError('boom at import')\n")
    with pytest.raises(SuiteError, match="boom at import"):
        load_suite(str(f))


@pytest.mark.parametrize("name", ["", "a b", "<script>", "@team", "x" * 200, "../etc"])
def test_hostile_model_names_refused(name):
    with pytest.raises(SuiteError, match="invalid"):
        model(name)


def test_bad_extras_refused():
    with pytest.raises(SuiteError, match="mode"):
        model("m", mode="turbo")
    with pytest.raises(SuiteError, match="tolerance"):
        model("m", tolerances={"float32": (-1, 0)})


def test_plan_jobs_expands_sweeps_and_filters(harness_suite):
    suites = resolve_suites(["micro"])
    jobs = plan_jobs(suites, device="cpu", models=["gelu*", "bf16_*"])
    assert [(j.spec.name, j.config.slug) for j in jobs] == [
        ("gelu_mm", "cpu-default-float32-auto"),
        ("bf16_block_dynamic", "cpu-default-bfloat16-dynamic")]
    jobs = plan_jobs(suites, device="cuda", models=["linear32"], dtypes=["float32", "amp"],
                     dynamics=["false"])
    assert [j.config.slug for j in jobs] == ["cuda-reduce-overhead-float32-static",
                                             "cuda-reduce-overhead-amp-static"]
    with pytest.raises(UsageError, match="nope"):
        plan_jobs(suites, device="cpu", models=["nope"])
