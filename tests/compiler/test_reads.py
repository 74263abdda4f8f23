"""What a model reads of its checkout (an audit hook), and whether a diff reaches it.

The recorder runs in a child process per case (an audit hook cannot be removed), over a real
directory tree: one case per way of reading a file, and the ways that cannot be seen.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from compilewatch.compiler.protocol import Reads
from compilewatch.compiler.reads import ChangedFiles, source_of, touched

CHILD = """
import json, os, sys
from compilewatch.compiler.reads import Recorder
root, home = sys.argv[1], sys.argv[2]
os.chdir(root)
rec = Recorder(root, home)
rec.start()
{body}
print(json.dumps(rec.stop().model_dump()))
"""


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A checkout (root), the user's own checkout (home) and a folder outside both."""
    root, home, outside = tmp_path / "root", tmp_path / "home", tmp_path / "outside"
    for d in (root / "data", root / "pkg", home, outside):
        d.mkdir(parents=True)
    (root / "helper.py").write_text("VALUE = 1\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text("X = 2\n")
    (root / "data" / "config.json").write_text("{}")
    (root / "data" / "weights.bin").write_bytes(b"\0" * 8)
    (root / "notes.txt").write_text("n")
    (home / "installed.py").write_text("")
    (outside / "far.txt").write_text("far")
    (root / "link").symlink_to(outside)
    (outside / "into.json").symlink_to(root / "data" / "config.json")
    return root, home, outside


def record(tree: tuple[Path, Path, Path], body: str) -> Reads:
    root, home, outside = tree
    code = CHILD.format(body=textwrap.dedent(body).replace("OUTSIDE", repr(str(outside)))
                        .replace("HOME", repr(str(home))))
    out = subprocess.run([sys.executable, "-c", code, str(root), str(home)], check=True,
                         capture_output=True, text=True, timeout=120)
    return Reads.model_validate(json.loads(out.stdout.strip().splitlines()[-1]))


READ_KINDS = {
    "import a sibling module": ("sys.path.insert(0, root); import helper", {"helper.py"}),
    "import a package": ("sys.path.insert(0, root); import pkg.mod",
                         {"pkg/__init__.py", "pkg/mod.py"}),
    "open a data file": ("open('data/config.json').read()", {"data/config.json"}),
    "pathlib": ("import pathlib; pathlib.Path(root, 'notes.txt').read_text()", {"notes.txt"}),
    "os.open": ("os.close(os.open('notes.txt', os.O_RDONLY))", {"notes.txt"}),
    "a bytes path": ("open(os.fsencode(os.path.join(root, 'notes.txt'))).read()",
                     {"notes.txt"}),
    "numpy": ("import numpy; numpy.fromfile('data/weights.bin', dtype='u1')",
              {"data/weights.bin"}),
    "a file that is not there": ("""
        try:
            open('absent.json')
        except FileNotFoundError:
            pass""", {"absent.json"}),
    "after chdir, relative": ("os.chdir('data'); open('config.json').read()",
                              {"data/config.json"}),
    "through a link in the checkout": ("open(os.path.join('link', 'far.txt')).read()",
                                       {"link/far.txt"}),
    "through a link outside into the checkout": (
        "open(os.path.join(OUTSIDE, 'into.json')).read()", {"data/config.json"}),
    "outside the checkout": ("open(os.path.join(OUTSIDE, 'far.txt')).read()", set()),
}


@pytest.mark.parametrize("kind", list(READ_KINDS))
def test_every_way_of_reading_a_file_is_recorded(kind: str, tree: tuple[Path, Path, Path]
                                                 ) -> None:
    body, files = READ_KINDS[kind]
    reads = record(tree, body)
    assert files <= set(reads.files), reads.files
    assert reads.opaque is None
    if not files:
        assert reads.files == []


LISTINGS = {
    "os.listdir": ("os.listdir('data')", "data"),
    "os.scandir": ("list(os.scandir('data'))", "data"),
    "glob": ("import glob; glob.glob(os.path.join(root, 'data', '*.json'))", "data"),
    "os.walk": ("list(os.walk(root))", "."),
    "pathlib iterdir": ("import pathlib; list(pathlib.Path(root, 'data').iterdir())", "data"),
}


@pytest.mark.parametrize("kind", list(LISTINGS))
def test_listing_a_directory_is_recorded(kind: str, tree: tuple[Path, Path, Path]) -> None:
    body, directory = LISTINGS[kind]
    assert directory in record(tree, body).listed


def test_the_import_systems_listings_are_kept_apart(tree: tuple[Path, Path, Path]) -> None:
    reads = record(tree, "sys.path.insert(0, root); import helper")
    assert "." in reads.import_listed and "." not in reads.listed


IMPORT_LISTINGS = {
    "the harness finding the side's modules": """
        from compilewatch.suites.imports import SideCode, on_paths
        on_paths(SideCode(root=root, paths=(root,)))""",
    "a library asking a distribution's version": """
        import importlib.metadata
        sys.path.insert(0, root)
        importlib.metadata.distributions(name='userproj')
        list(importlib.metadata.distributions())""",
}


@pytest.mark.parametrize("kind", list(IMPORT_LISTINGS))
def test_listings_made_to_find_modules_are_the_import_systems(
        kind: str, tree: tuple[Path, Path, Path]) -> None:
    """Not the model reading the folders: only a module (or metadata) an import looks for
    there changes what runs."""
    reads = record(tree, IMPORT_LISTINGS[kind])
    assert "." in reads.import_listed and reads.listed == []


def test_where_imports_looked_is_recorded(tree: tuple[Path, Path, Path]) -> None:
    """Each name an import looked for, at each folder of the checkout it looked in (found or
    not), and each module already loaded (json, before the recorder started): a module of its
    name first on the path would be imported instead."""
    reads = record(tree, """
        sys.path.insert(0, root)
        import pkg.mod
        try:
            import pkg.fast
        except ImportError:
            pass
        try:
            import not_here
        except ImportError:
            pass""")
    assert {"pkg", "pkg/mod", "pkg/fast", "not_here", "json"} <= set(reads.sought)
    assert "helper" not in reads.sought and "pkg/helper" not in reads.sought
    assert all(not s.startswith("compilewatch_user_suite") for s in reads.sought)


OPAQUE = {
    "a subprocess": "import subprocess; subprocess.run(['true'])",
    "os.system": "os.system('true')",
    "fork": """
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)""",
    "exec": """
        pid = os.fork()
        if pid == 0:
            os.execv('/bin/true', ['true'])
        os.waitpid(pid, 0)""",
    "an import through a __path__ that cannot be read": """
        import types
        class Hostile:
            def __iter__(self):
                raise RuntimeError('no')
        sys.modules['hostile'] = types.ModuleType('hostile')
        sys.modules['hostile'].__path__ = Hostile()
        try:
            import hostile.sub
        except Exception:
            pass""",
}


@pytest.mark.parametrize("kind", list(OPAQUE))
def test_what_a_hook_cannot_follow_makes_the_reads_unknown(kind: str,
                                                            tree: tuple[Path, Path, Path]
                                                            ) -> None:
    reads = record(tree, OPAQUE[kind])
    assert reads.opaque
    assert touched(reads, ChangedFiles())  # never "reads nothing"


def test_reads_from_the_users_own_checkout_are_counted_apart(tree: tuple[Path, Path, Path]
                                                             ) -> None:
    reads = record(tree, "open(os.path.join(HOME, 'installed.py')).read()")
    assert reads.home_files == 1 and reads.files == []


def test_a_cached_import_counts_as_its_source() -> None:
    assert source_of("pkg/__pycache__/mod.cpython-312.pyc") == "pkg/mod.py"
    assert source_of("__pycache__/m.cpython-311.opt-1.pyc") == "m.py"
    assert source_of("pkg/mod.py") == "pkg/mod.py"


def test_changed_files_from_a_diff() -> None:
    existing = {"docs", "src"}
    changed = ChangedFiles.of([("M", "README.md"), ("A", "docs/new.md"),
                               ("D", "src/old.py"), ("A", "fresh/deep/x.py"),
                               ("T", "link")], lambda d: d in existing)
    assert changed.modified == {"README.md", "link"}
    assert changed.named == {"docs/new.md", "src/old.py", "fresh/deep/x.py"}
    # a new folder changes its parent's listing too, up to a folder both sides have
    assert changed.listings == {"docs", "src", "fresh/deep", "fresh", "."}
    assert changed.one_sided == {"docs/new.md", "src/old.py", "fresh/deep/x.py", "fresh/deep",
                                 "fresh"}


def reads(files: list[str] = (), listed: list[str] = (),  # type: ignore[assignment]
          import_listed: list[str] = (), sought: list[str] = ()  # type: ignore[assignment]
          ) -> Reads:
    return Reads(files=list(files), listed=list(listed), import_listed=list(import_listed),
                 sought=list(sought))


def diff(*entries: tuple[str, str], new: str = "") -> ChangedFiles:
    """A diff whose folders exist on both sides, except ``new`` (on one side only)."""
    return ChangedFiles.of(entries, lambda d: d != new)


TOUCHES = {
    "a file it reads is modified": (reads(["models.py"]), diff(("M", "models.py")), True),
    "another file is modified": (reads(["models.py"]), diff(("M", "README.md")), False),
    "a file it reads is deleted": (reads(["helper.py"]), diff(("D", "helper.py")), True),
    "a file it looked for is added": (reads(["absent.json"]), diff(("A", "absent.json")), True),
    "a submodule it reads from moves": (reads(["vendor/lib/x.py"]), diff(("M", "vendor/lib")),
                                        True),
    "a file appears in a folder it lists": (reads(listed=["data"]),
                                            diff(("A", "data/extra.json")), True),
    "a file in a folder it lists is only edited": (reads(listed=["data"]),
                                                   diff(("M", "data/extra.json")), False),
    "a module appears where an import looked for it": (
        reads(import_listed=["."], sought=["helper2"]), diff(("A", "helper2.py")), True),
    "a module vanishes where an import looked for it": (
        reads(import_listed=["."], sought=["helper2"]), diff(("D", "helper2.py")), True),
    "a module nothing looks for appears where it imports from": (
        reads(import_listed=["."], sought=["helper"]), diff(("A", "helper2.py")), False),
    "a package appears where an import looked for it": (
        reads(import_listed=["."], sought=["newpkg"]),
        diff(("A", "newpkg/__init__.py"), new="newpkg"), True),
    "a module appears in a package under a name looked for there": (
        reads(import_listed=["pkg"], sought=["pkg", "pkg/fast"]), diff(("A", "pkg/fast.py")),
        True),
    "an extension module appears where an import looked for it": (
        reads(sought=["pkg/mod"]), diff(("A", "pkg/mod.cpython-311-x86_64-linux-gnu.so")), True),
    "a module appears in a package it imports, under no name looked for": (
        reads(import_listed=["pkg"], sought=["pkg", "pkg/mod"]), diff(("A", "pkg/unused.py")),
        False),
    "a file appears in a package that is new, inside one it imports": (
        reads(import_listed=["pkg"], sought=["pkg", "pkg/mod"]),
        diff(("A", "pkg/sub/__init__.py"), new="pkg/sub"), False),
    "a text file appears where it imports from": (reads(import_listed=["."], sought=["CHANGES"]),
                                                  diff(("A", "CHANGES.md")), False),
    "a folder of docs appears where it imports from": (
        reads(import_listed=["."], sought=["flatgpt"]), diff(("A", "docs/a.md"), new="docs"),
        False),
    "distribution metadata appears where the import system searched": (
        reads(import_listed=["."]),
        diff(("A", "userproj-0.2.dist-info/METADATA"), new="userproj-0.2.dist-info"), True),
    "a file changes beside a data file it reads": (reads(["data/config.json"]),
                                                   diff(("M", "data/weights.safetensors")),
                                                   True),
    "a file changes beside a module it reads": (reads(["models.py"]),
                                                diff(("M", "setup.cfg")), False),
}


@pytest.mark.parametrize("case", list(TOUCHES))
def test_whether_a_change_reaches_what_was_read(case: str) -> None:
    found, changed, reached = TOUCHES[case]
    assert touched(found, changed) is reached


def test_the_checkout_root_itself_and_file_descriptors(tmp_path: Path) -> None:
    from compilewatch.compiler.reads import _forms, _under

    roots = _forms(str(tmp_path))
    assert _under(str(tmp_path), roots) == "."
    assert _under(3, roots) is None
    assert _under(os.path.join(str(tmp_path) + "x", "f"), roots) is None  # a sibling prefix
