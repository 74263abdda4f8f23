"""A PR's suite listed by a process of its own: the same models as an import here, no
credential seen by its module-level code, and every bad answer refused by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compilewatch.bot.measure.listing import list_suite
from compilewatch.core.errors import SuiteError
from compilewatch.suites import listing
from compilewatch.suites.loader import load_suite

SECRET = "ghp_listingMustNotSeeThisToken0123456789"

SUITE = '''
import os, pathlib, torch
from compilewatch.suites import model

SUITE_NAME = "listed"
pathlib.Path(__file__).with_name("seen.txt").write_text(os.environ.get("GITHUB_TOKEN", "none"))
print("module-level output must not spoil the answer")

@model("a", tags=("x",), mode={"cuda": "reduce-overhead"}, dynamic=True)
def a():
    return torch.sin, (torch.randn(4),)

@model("b", dtype="bfloat16", devices=("cuda",), requires=("no_such_package_here",))
def b():
    return torch.cos, (torch.randn(4),)
'''


def test_a_listed_suite_plans_like_an_imported_one_and_sees_no_credential(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "models.py"
    path.write_text(SUITE)
    seen = tmp_path / "seen.txt"
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)
    listed = list_suite(str(path))
    assert seen.read_text() == "none"  # the child's environment is the workers' allow-list
    here = load_suite(str(path))
    assert (listed.name, listed.source, sorted(listed.models)) == \
        (here.name, here.source, sorted(here.models))
    for name, spec in here.models.items():
        got = listed.models[name]
        assert (got.tags, got.dtype, got.dynamic, got.devices, got.requires) == \
            (spec.tags, spec.dtype, spec.dynamic, spec.devices, spec.requires)
        assert got.default_mode("cuda") == spec.default_mode("cuda")
    assert listed.models["b"].missing_packages() == ["no_such_package_here"]
    with pytest.raises(SuiteError, match="built by its worker"):
        listed.models["a"].factory()


def test_a_suite_that_fails_to_import_says_why(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("raise RuntimeError('no models today')\n")
    with pytest.raises(SuiteError, match="no models today"):
        list_suite(str(path))


GOOD = {"name": "s", "module": "m", "models": [{"name": "a", "devices": ["cpu"]}]}


def _with(**over: object) -> str:
    model = {**GOOD["models"][0], **over}  # type: ignore[index]
    return json.dumps({**GOOD, "models": [model]})


@pytest.mark.parametrize(("text", "field"), [
    (_with(name="../etc"), "models.0.name"),
    (_with(mode="fastest"), "models.0.mode"),
    (_with(devices=["tpu"]), "models.0.devices"),
    (_with(requires=["os; rm -rf /"]), "models.0.requires.0"),
    (_with(extra=1), "models.0.extra"),
    (json.dumps({**GOOD, "models": []}), "models"),
    (json.dumps({**GOOD, "name": "a b"}), "name"),
    ("[1, 2]", ""),
    ("{not json", ""),
])
def test_every_bad_answer_is_refused_by_name(text: str, field: str) -> None:
    with pytest.raises(SuiteError, match="invalid answer") as e:
        listing.read("models.py", text)
    assert field in str(e.value)


def test_an_answer_that_is_not_a_plain_file_is_never_read(tmp_path: Path) -> None:
    from compilewatch.bot.measure.listing import _listing_text

    link = tmp_path / "listing.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(SuiteError, match="not a plain file"):
        _listing_text(link, "models.py")
    assert _listing_text(tmp_path / "absent.json", "models.py") == ""
