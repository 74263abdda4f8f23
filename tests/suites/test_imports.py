"""Whose code a side imports (suites/imports.py): real packages on disk, real imports, real
distribution metadata; each case in its own copy of sys.path and sys.modules."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from compilewatch.suites import imports
from compilewatch.suites.imports import ForeignCode, SideCode


@pytest.fixture(autouse=True)
def _own_import_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    monkeypatch.setattr(sys, "path_importer_cache", dict(sys.path_importer_cache))


def _package(folder: Path, name: str, value: str) -> Path:
    (folder / name).mkdir(parents=True, exist_ok=True)
    (folder / name / "__init__.py").write_text(f"WHO = {value!r}\n")
    return folder / name


def _dist(site: Path, name: str, *, tops: list[str] | None = None,
          editable_from: Path | None = None) -> None:
    """Real distribution metadata, as pip writes it, that importlib.metadata finds."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"  # escaped as a wheel does
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    files = [f"{t}/__init__.py" for t in tops or []]
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))
    if editable_from is not None:
        (info / "direct_url.json").write_text(json.dumps(
            {"url": editable_from.as_uri(), "dir_info": {"editable": True}}))


def _code(root: Path, *extra: str, **kw: object) -> SideCode:
    paths = [str(root / e) for e in extra] + [str(root)]
    return SideCode(root=str(root), paths=tuple(paths), **kw)  # type: ignore[arg-type]


def test_the_sides_folders_come_first_and_its_own_copy_wins(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _package(site, "proj", "installed")
    sys.path.append(str(site))
    root = tmp_path / "checkout"
    _package(root / "src", "proj", "checkout")
    code = _code(root, "src")
    imports.activate(code)
    assert sys.path[:2] == [str(root / "src"), str(root)]
    assert importlib.import_module("proj").WHO == "checkout"
    origins = imports.check(code, ["proj"])
    assert origins["proj"].where == "checkout" and origins["proj"].path == "src/proj/__init__.py"


def test_a_module_imported_before_the_side_took_over_is_imported_again(tmp_path: Path) -> None:
    """A fork server imported the installed copy before the worker knew its side."""
    site = tmp_path / "site"
    _package(site, "proj", "installed")
    sys.path.append(str(site))
    assert importlib.import_module("proj").WHO == "installed"
    importlib.import_module("proj")
    root = tmp_path / "checkout"
    _package(root, "proj", "checkout")
    imports.activate(_code(root))
    assert importlib.import_module("proj").WHO == "checkout"


@pytest.mark.parametrize("how", ["on_its_paths", "from_home", "editable_url", "distribution",
                                 "deeper_folder"])
def test_the_repositorys_module_from_elsewhere_is_refused(tmp_path: Path, how: str) -> None:
    """Each way the repository provides a module, with the module imported from outside the
    side's checkout: a refusal that names the module, where it came from and the fix."""
    root, home, site = tmp_path / "checkout", tmp_path / "home", tmp_path / "site"
    kw: dict[str, object] = {}
    if how == "on_its_paths":  # imported (from an install) before its folders were in place
        _package(root, "proj", "checkout")
        _package(site, "proj", "installed")
        sys.path.insert(0, str(site))
    elif how == "from_home":  # an editable install pointing at the user's own checkout
        _package(home / "lib", "proj", "home")
        sys.path.insert(0, str(home / "lib"))
        kw["home"] = str(home)
    elif how == "editable_url":  # the same, found through the install's direct_url.json
        _package(home / "lib", "proj", "home")
        sys.path.insert(0, str(home / "lib"))
        _dist(site, "proj-dist", editable_from=home)
        sys.path.append(str(site))
        kw["distribution"] = "proj-dist"
    elif how == "distribution":  # a regular install of the project, its folder not searched
        _package(site, "proj", "installed")
        _dist(site, "proj-dist", tops=["proj"])
        sys.path.insert(0, str(site))
        kw["distribution"] = "proj-dist"
    else:  # a package the checkout keeps in a folder that is not on the path
        _package(root / "lib", "proj", "checkout")
        _package(site, "proj", "installed")
        sys.path.insert(0, str(site))
    importlib.import_module("proj")
    code = _code(root, **kw)
    with pytest.raises(ForeignCode) as e:
        imports.check(code)
    text = str(e.value)
    assert "module proj was imported from" in text and str(root) in text
    assert "--allow-installed proj" in text
    if how == "deeper_folder":
        assert 'add "lib" to [tool.compilewatch] pythonpath' in text


def test_allowed_modules_pass_and_are_recorded_as_allowed(tmp_path: Path) -> None:
    root, site = tmp_path / "checkout", tmp_path / "site"
    _package(root / "lib", "proj", "checkout")
    _package(site, "proj", "installed")
    sys.path.insert(0, str(site))
    importlib.import_module("proj")
    origins = imports.check(_code(root, allow_installed=("proj",)), ["proj"])
    assert origins["proj"].where == "installed" and origins["proj"].allowed
    assert origins["proj"].path == str(site / "proj" / "__init__.py")


def test_other_projects_and_the_standard_library_are_neither_refused_nor_recorded(
        tmp_path: Path) -> None:
    root, site = tmp_path / "checkout", tmp_path / "site"
    _package(root, "proj", "checkout")
    _package(site, "thirdparty", "installed")
    sys.path.append(str(site))
    code = _code(root)
    imports.activate(code)
    for name in ("proj", "thirdparty", "json", "compilewatch.suites"):
        importlib.import_module(name)
    origins = imports.check(code, ["proj", "thirdparty", "json", "compilewatch", "math"])
    assert set(origins) == {"proj", "thirdparty"}
    assert origins["thirdparty"].where == "installed" and not origins["thirdparty"].allowed


def test_a_namespace_package_with_a_portion_in_the_checkout(tmp_path: Path) -> None:
    """``acme`` has no __init__.py: its portions are merged from every folder on the path;
    the side's own ``acme.models`` must be the checkout's."""
    root, site = tmp_path / "checkout", tmp_path / "site"
    (root / "src" / "acme" / "models").mkdir(parents=True)
    (root / "src" / "acme" / "models" / "__init__.py").write_text("WHO = 'checkout'\n")
    (site / "acme" / "models").mkdir(parents=True)
    (site / "acme" / "models" / "__init__.py").write_text("WHO = 'installed'\n")
    (site / "acme" / "other").mkdir(parents=True)
    (site / "acme" / "other" / "__init__.py").write_text("")
    sys.path.append(str(site))
    code = _code(root, "src")
    imports.activate(code)
    assert importlib.import_module("acme.models").WHO == "checkout"
    importlib.import_module("acme.other")  # another project's portion: not the repository's
    assert imports.check(code, ["acme"])["acme"].where == "checkout"


def test_a_submodule_of_the_repository_from_elsewhere_is_refused(tmp_path: Path) -> None:
    """A namespace package: the checkout's ``acme.b`` was imported from another copy before
    the side took over (another project's ``acme.c`` beside it is fine)."""
    root, site = tmp_path / "checkout", tmp_path / "site"
    (root / "acme").mkdir(parents=True)
    (root / "acme" / "b.py").write_text("")
    (site / "acme").mkdir(parents=True)
    (site / "acme" / "b.py").write_text("")
    (site / "acme" / "c.py").write_text("")
    sys.path.append(str(site))
    importlib.import_module("acme.b")
    importlib.import_module("acme.c")
    with pytest.raises(ForeignCode, match=r"module acme(\.b)? was imported from .*site.*this "
                                          r"side's checkout has acme/"):
        imports.check(_code(root))


@pytest.mark.parametrize("install", ["site-packages", "dist-packages"])
def test_an_environment_inside_the_users_checkout_is_not_the_repositorys_code(
        tmp_path: Path, install: str) -> None:
    """The usual layout, a .venv at the root of the user's checkout: a pr's side (a worktree
    elsewhere) imports torch and every other package from there. Those are installed copies,
    not the repository's code; they were refused as "the repository's own checkout"."""
    home, tree = tmp_path / "checkout", tmp_path / "worktree"
    _package(tree, "proj", "tree")
    _package(home, "proj", "home")
    site = home / ".venv" / "lib" / "python3.11" / install
    _package(site, "thirdparty", "installed")
    sys.path.append(str(site))
    code = _code(tree, home=str(home))
    imports.activate(code)
    importlib.import_module("thirdparty")
    assert importlib.import_module("proj").WHO == "tree"
    origins = imports.check(code, ["thirdparty", "proj"])
    assert origins["thirdparty"].where == "installed"
    assert origins["proj"].where == "checkout"
    # the repository's own module from the user's checkout is still refused
    sys.modules.pop("proj")
    sys.path.insert(0, str(home))
    sys.path.remove(str(tree))
    importlib.import_module("proj")
    with pytest.raises(ForeignCode, match=r"module proj was imported from .*/checkout/proj/"):
        imports.check(code, ["proj"])
