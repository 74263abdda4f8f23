"""Which models a pull request reaches, by ``pr``'s "reads none of it" rule: a repository shaped
like a user's (its package, a suite, a pyproject with ``[tool.compilewatch]``), a head branch per
kind of change, real scan processes on each side's own checkout, and the decision ``pr`` makes
from them (``bot/pr.changed_files``, then ``compiler/unchanged.by_files``).

Adding docs, tests, CI files or a module nothing imports reaches no model; a module an import
looks for, a file beside a data file a model reads, an entry of a folder a model lists, and a
pyproject change to what is measured reach the models that could read them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.commands.pr import Refs, changed_files
from compilewatch.bot.measure.harness import side_code
from compilewatch.compiler.processes import Launcher
from compilewatch.compiler.protocol import Reads
from compilewatch.compiler.unchanged import by_files
from tests.one_job import scan_reads
from tests.userrepo import MODEL, git, model_repo, write

MODELS = '''
import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@model("sized", compile_kwargs={"backend": "eager"})
def sized():
    """Its width from a data file, where there is one."""
    path = ROOT / "data" / "sizes.json"
    n = json.loads(path.read_text())["n"] if path.exists() else 8
    return torch.nn.Linear(n, n), (torch.randn(2, n),)


@model("plugged", compile_kwargs={"backend": "eager"})
def plugged():
    """An input column per entry of plugins/: it lists the folder."""
    n = len(os.listdir(ROOT / "plugins"))
    return torch.nn.Linear(n, 1), (torch.randn(2, n),)


@model("optional", compile_kwargs={"backend": "eager"})
def optional():
    """The package's fast part, where it has one."""
    try:
        from flatgpt import fast as impl
    except ImportError:
        from flatgpt import model as impl
    return impl.Part(), (torch.randn(2, 16),)
'''
FILES = {"data/sizes.json": '{"n": 8}', "plugins/a.txt": "a\n", "docs/a.md": "# Docs\n",
         "tests/test_model.py": "def test_part():\n    pass\n", "README.md": "# userproj\n"}
ALL = {"net", "sized", "plugged", "optional"}
SUITE = "bench/models.py"


# a file's new text, None to delete it, or (old, new): its text with old replaced by new
Edit = str | None | tuple[str, str]
TOOL = "[tool.compilewatch]\n"

# head's change -> the models it reaches
CASES: dict[str, tuple[dict[str, Edit], set[str]]] = {
    "a doc is added": ({"docs/new.md": "# New\n"}, set()),
    "a test file is added": ({"tests/test_more.py": "def test_more():\n    pass\n"}, set()),
    "root files are added": ({"CHANGELOG.md": "0.2\n", "Makefile": "all:\n",
                              "noxfile.py": "import nox\n"}, set()),
    "a CI file is added": ({".github/workflows/ci.yml": "on: push\n"}, set()),
    "a module nothing imports is added": ({"flatgpt/unused.py": MODEL}, set()),
    "a module a suite now imports is added": ({"flatgpt/fast.py": MODEL}, {"optional"}),
    "a data file is added beside one a model reads": ({"data/more.json": "{}"}, {"sized"}),
    "a file is added to a folder a model lists": ({"plugins/b.txt": "b\n"}, {"plugged"}),
    "a doc is deleted": ({"docs/a.md": None}, set()),
    "a file a model reads is deleted": ({"data/sizes.json": None}, {"sized"}),
    "the version is bumped": (
        {"pyproject.toml": ('version = "0.1.0"', 'version = "0.2.0"')}, set()),
    "a threshold changes": (
        {"pyproject.toml": (TOOL, TOOL + "thresholds = { compiled_time = 0.2 }\n")}, set()),
    "[tool.compilewatch] changes what is measured": (
        {"pyproject.toml": (TOOL, TOOL + 'tasks = ["inference"]\n')}, ALL),
}


def _apply(root: Path, change: dict[str, Edit]) -> None:
    for rel, edit in change.items():
        if isinstance(edit, tuple):
            text = (root / rel).read_text()
            assert edit[0] in text
            edit = text.replace(*edit)
        write(root, {rel: edit})


Scans = dict[str, dict[str, Reads]]  # tree -> model -> what its scan read


@pytest.fixture(scope="module")
def scanned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Scans, dict[str, set[str]]]:
    """Each case's head branch off ``main``, both sides checked out and scanned for real: the
    scans, and the models ``pr`` would measure in each case."""
    tmp = tmp_path_factory.mktemp("reach")
    repo = model_repo(tmp / "repo", ["flat"], models=MODELS, files=FILES)
    base = git(repo, "rev-parse", "main")
    trees, heads = {"main": tmp / "trees" / "main"}, {}
    git(repo, "worktree", "add", "-q", "--detach", str(trees["main"]), "main")
    for i, (case, (change, _)) in enumerate(CASES.items()):
        git(repo, "checkout", "-q", "-b", f"case{i}", "main")
        _apply(repo, change)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", case)
        heads[case], trees[case] = git(repo, "rev-parse", "HEAD"), tmp / "trees" / f"case{i}"
        git(repo, "worktree", "add", "-q", "--detach", str(trees[case]), heads[case])
    with Launcher("fork", needs_cuda=False) as launcher:
        scans = {name: scan_reads(str(tree / SUITE), sorted(ALL), side_code(tree, home=repo),
                                  launcher) for name, tree in trees.items()}
    measured = {}
    for case, head in heads.items():
        changed = changed_files(repo, Refs("main", case, base, head),
                                {"base": trees["main"], "head": trees[case]})
        measured[case] = {m for m in ALL
                          if by_files(scans["main"][m], scans[case][m], changed) is None}
    return scans, measured


def test_the_harness_finding_the_sides_modules_is_not_the_model_listing_folders(
        scanned: tuple[Scans, dict[str, set[str]]]) -> None:
    """The listings made while finding which modules the side provides (every top folder)
    are the import system's; a model's own listing is its own."""
    base = scanned[0]["main"]
    assert all(r.opaque is None for r in base.values())
    assert {"."} <= set(base["net"].import_listed) and base["net"].listed == []
    assert base["plugged"].listed == ["plugins"]
    assert "flatgpt/fast" in base["optional"].sought and "flatgpt/fast" not in base["net"].sought


@pytest.mark.parametrize("case", list(CASES))
def test_a_change_reaches_only_the_models_that_could_read_it(
        case: str, scanned: tuple[Scans, dict[str, set[str]]]) -> None:
    assert scanned[1][case] == CASES[case][1]


@pytest.mark.slow
def test_a_pr_adding_docs_tests_and_a_data_file_measures_only_the_model_beside_the_data(
        tmp_path: Path) -> None:
    """``compilewatch pr`` end to end: head adds a doc beside another, a test file and a data
    file beside the one ``sized`` reads. Only ``sized`` is compiled; the others are not
    (their scans read nothing the change reaches)."""
    repo = model_repo(tmp_path / "repo", ["flat"], models=MODELS, files=FILES)
    git(repo, "checkout", "-q", "-b", "docs", "main")
    write(repo, {"docs/new.md": "# New\n", "tests/test_more.py": "def test_more():\n    pass\n",
                 "data/more.json": "{}"})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "docs, a test, a data file")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["pr", "--repo", str(repo), "--base", "main", "--head",
                                       "docs", "--out", str(out), "--rounds", "3",
                                       "--block-ms", "2", "--no-db"])
    assert result.exit_code == 0, result.output
    rows = {r["model"]: r for r in json.loads((out / "comparison.json").read_text())["rows"]}
    assert {m for m, r in rows.items() if not r["compile_skipped"]} == {"sized"}
    assert rows["sized"]["cold_compile"] is not None
    assert all(rows[m]["verdict"] == "unchanged" for m in ALL - {"sized"})
