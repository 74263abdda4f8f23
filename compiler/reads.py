"""Which files of a checkout a model depends on, and whether a change touches any of them.

A pull request that changes none of the files a model reads cannot have changed that model:
the same interpreter and environment run the same code on the same data. ``pr`` asks a cheap
``scan`` process per side (build the model, run it eagerly and under Dynamo with the eager
backend, on its inputs and its shape sweep) what it read, through an audit hook
(:pep:`578`): every file opened (imports included) and every directory listed under the side's
worktree, and, through a finder first on ``sys.meta_path`` that finds nothing, every place in
the worktree an import looked for a module. ``touched`` then says whether the PR's diff reaches
any of it; ``compiler/unchanged.py`` makes a verdict of that.

A listing by the import system (its path finders cache each folder's entries, its
distribution finders look for metadata) or by the harness finding the side's own modules
(``suites/imports.py``) is not the model reading the folder: only a module an import looks
for there (or distribution metadata) can change what runs, so a file added beside the
model's modules (a doc, a test, a module nothing imports) reaches nothing.

What an audit hook cannot see is treated as unknown, never as "read nothing": a process that
started another program (a subprocess, ``os.system``, an ``exec``), forked, or loaded a shared
library from the checkout may have read anything, so its model is measured. Files read by
native code that takes a path (a safetensors reader, say) are covered by a neighbour rule: a
changed file beside any data file the model read counts as read.
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import os
import posixpath
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from compilewatch.compiler.protocol import Reads
from compilewatch.suites import imports
from compilewatch.suites.loader import SUITE_MODULE_PREFIX

MAX_FILES = 10_000  # beyond this the record is not kept: the model is measured instead
_OPAQUE = {"subprocess.Popen": "started a subprocess", "os.system": "ran os.system",
           "os.exec": "exec'd a program", "os.posix_spawn": "spawned a program",
           "os.spawn": "spawned a program", "os.fork": "forked", "os.forkpty": "forked",
           "pty.spawn": "spawned a program"}
_LISTING = ("os.listdir", "os.scandir")
_IMPORT_SUFFIXES = tuple(importlib.machinery.all_suffixes())
# whose listings are the import system's: its path finders, its distribution finders (a
# library asking its own version lists every folder on sys.path), and the harness finding
# which modules the side provides
_IMPORTERS = frozenset({"<frozen importlib._bootstrap_external>",
                        importlib.metadata.distribution.__code__.co_filename,
                        imports.on_paths.__code__.co_filename})
_METADATA = (".dist-info", ".egg-info")  # what a distribution finder looks for in a folder


def source_of(rel: str) -> str:
    """``pkg/__pycache__/mod.cpython-312.pyc`` is ``pkg/mod.py`` (a cached import reads only
    the cache file, but depends on the source)."""
    head, name = posixpath.split(rel)
    if posixpath.basename(head) == "__pycache__" and name.endswith(".pyc"):
        return posixpath.join(posixpath.dirname(head), name.split(".", 1)[0] + ".py")
    return rel


@dataclass
class Recorder:
    """An audit hook that records what this process reads under ``root`` (and, apart, under
    ``home``: the user's own checkout, which an installed copy of the project reads from)."""

    root: str
    home: str | None = None
    files: set[str] = field(default_factory=set)
    listed: set[str] = field(default_factory=set)
    import_listed: set[str] = field(default_factory=set)
    sought: set[str] = field(default_factory=set)
    home_files: set[str] = field(default_factory=set)
    opaque: str | None = None
    active: bool = False
    _roots: list[tuple[str, str]] = field(default_factory=list)
    _folders: dict[str, str | None] = field(default_factory=dict)
    _seeker: _Seeker | None = None

    def start(self) -> None:
        self._roots = _forms(self.root)
        sys.addaudithook(self._hook)
        self._seeker = _Seeker(self._seek)
        sys.meta_path.insert(0, self._seeker)
        self.active = True

    def stop(self) -> Reads:
        self.active = False
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self._seeker]
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if isinstance(path, str):
                self._add_file(path)
        self._add_shadows()
        files = sorted({source_of(f) for f in self.files})
        sought, opaque = sorted(self.sought), self.opaque
        if len(files) > MAX_FILES or len(sought) > MAX_FILES:
            opaque = opaque or (f"read more than {MAX_FILES} files of the checkout"
                                if len(files) > MAX_FILES else
                                f"looked for more than {MAX_FILES} modules in the checkout")
            files, sought = [], []
        return Reads(files=files, listed=sorted(self.listed),
                     import_listed=sorted(self.import_listed - self.listed), sought=sought,
                     home_files=len(self.home_files), opaque=opaque)

    def _seek(self, fullname: str, path: Any) -> None:
        """An import looks for ``fullname`` in ``path`` (None: ``sys.path``): the module path
        it would find there, in each folder of the checkout."""
        if not self.active:
            return
        self.active = False  # nothing in here may re-enter
        try:
            self._add_sought(fullname.rpartition(".")[2], sys.path if path is None else path)
        except Exception:  # a hostile __path__, say: the import goes on, unknown to us
            self.opaque = self.opaque or f"where an import of {fullname} looked is unknown"
        finally:
            self.active = True

    def _add_shadows(self) -> None:
        """A module of the name of one this process loaded from anywhere, put in a folder of
        the checkout on ``sys.path``, would be imported in its place (the side's own modules
        come first, ``suites/imports.py``), even where this process found it already loaded.
        Suites are loaded from their file, under a name of their path, never searched for."""
        for top in {name.partition(".")[0] for name in list(sys.modules)}:
            if not top.startswith(SUITE_MODULE_PREFIX):
                self._add_sought(top, sys.path)

    def _add_sought(self, name: str, folders: Iterable[Any]) -> None:
        for folder in list(folders):
            if not isinstance(folder, str):
                continue
            if folder not in self._folders:
                self._folders[folder] = self._relative(folder or ".")
            rel = self._folders[folder]
            if rel is not None:
                self.sought.add(name if rel == "." else f"{rel}/{name}")

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.active:
            return
        self.active = False  # nothing in here may re-enter
        try:
            if event == "open":
                self._add_file(args[0])
            elif event in _LISTING:
                rel = self._relative(args[0] if args and args[0] is not None else ".")
                if rel is not None:
                    by_importer = sys._getframe(1).f_code.co_filename in _IMPORTERS
                    (self.import_listed if by_importer else self.listed).add(rel)
            elif event == "ctypes.dlopen":
                if args and args[0] is not None and self._relative(args[0]) is not None:
                    self.opaque = self.opaque or "loaded a shared library from the checkout"
            elif event in _OPAQUE:
                self.opaque = self.opaque or _OPAQUE[event]
        except Exception:
            self.opaque = self.opaque or f"its {event} event could not be read"
        finally:
            self.active = True

    def _add_file(self, path: Any) -> None:
        rel = self._relative(path)
        if rel is not None:
            self.files.add(rel)
        elif self.home is not None and _under(path, _forms(self.home)) is not None:
            self.home_files.add(str(path))

    def _relative(self, path: Any) -> str | None:
        return _under(path, self._roots)


@dataclass(frozen=True)
class _Seeker:
    """First on ``sys.meta_path``: tells ``seen`` where each import looks, finds nothing (the
    finders after it find the module as they would without it)."""

    seen: Callable[[str, Any], None]  # never raises

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        self.seen(fullname, path)


def _forms(root: str) -> list[tuple[str, str]]:
    """A root as written and as resolved: a path through a link in the checkout counts by the
    name it was opened with, and one that resolves into the checkout by where it lands."""
    return [(r, r + os.sep) for r in dict.fromkeys([os.path.abspath(root),
                                                    os.path.realpath(root)])]


def _under(path: Any, roots: list[tuple[str, str]]) -> str | None:
    """``path`` relative to the first root it is under, in posix form; None if under none
    (or not a path: a file descriptor)."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    elif not isinstance(path, str):
        path = os.fspath(path) if hasattr(path, "__fspath__") else None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
    if not isinstance(path, str):
        return None
    absolute = os.path.abspath(path)
    for candidate in dict.fromkeys([absolute, os.path.realpath(absolute)]):
        for root, prefix in roots:
            if candidate == root:
                return "."
            if candidate.startswith(prefix):
                return candidate[len(prefix):].replace(os.sep, "/")
    return None


# --- what a pull request changed -------------------------------------------------------------

@dataclass(frozen=True)
class ChangedFiles:
    """The diff between the two sides, as paths relative to the checkout's root.

    ``modified``: files whose content changed (or mode, or a link's target); ``named``: files
    added or deleted (a rename is both); ``one_sided``: what exists on one side only (each
    named file, and each folder above one that exists on one side only); ``settings``: the
    settings it changes that change what is measured (``tool.compilewatch.tasks``, say): such
    a change reaches every model.
    """

    modified: frozenset[str] = frozenset()
    named: frozenset[str] = frozenset()
    one_sided: frozenset[str] = frozenset()
    settings: frozenset[str] = frozenset()

    @property
    def paths(self) -> frozenset[str]:
        return self.modified | self.named

    @property
    def listings(self) -> frozenset[str]:
        """The folders whose listing differs between the sides."""
        return frozenset(posixpath.dirname(p) or "." for p in self.one_sided)

    @classmethod
    def of(cls, entries: Iterable[tuple[str, str]], is_dir: Callable[[str], bool]
           ) -> ChangedFiles:
        """From ``git diff --name-status --no-renames`` entries ``(status, path)``;
        ``is_dir(path)`` says whether a directory exists on *both* sides."""
        modified, named, one_sided = set(), set(), set()
        for status, path in entries:
            if status[:1] not in ("A", "D"):
                modified.add(path)
                continue
            named.add(path)
            one_sided.add(path)
            parent = posixpath.dirname(path)
            while parent and not is_dir(parent):
                one_sided.add(parent)
                parent = posixpath.dirname(parent)
        return cls(frozenset(modified), frozenset(named), frozenset(one_sided))


def _parents(path: str) -> set[str]:
    """The folders above ``path``: ``a/b/c.py`` -> ``{"a", "a/b"}``."""
    parts = path.split("/")[:-1]
    return {"/".join(parts[:k]) for k in range(1, len(parts) + 1)}


def _module_path(entry: str) -> str | None:
    """Where an import would find ``entry`` as a module: ``pkg/mod`` for ``pkg/mod.py``, an
    extension ``pkg/mod.cpython-311-x86_64-linux-gnu.so`` or a folder (or submodule)
    ``pkg/mod``; None for what no import finds (a doc, a data file)."""
    head, name = posixpath.split(entry)
    if "." in name:
        if not name.endswith(_IMPORT_SUFFIXES):
            return None
        name = name.split(".", 1)[0]
    return posixpath.join(head, name)


def touched(reads: Reads, changed: ChangedFiles) -> bool:
    """Whether the change reaches what the model read (always, when that is not known)."""
    if reads.opaque or changed.settings:
        return True
    return (_changes_a_read(reads, changed) or _beside_data(reads, changed)
            or _in_a_listing(reads, changed) or _resolves_anew(reads, changed))


def _changes_a_read(reads: Reads, changed: ChangedFiles) -> bool:
    """A file it read (or looked for and did not find) is changed, added or deleted, or a path
    above one is (a submodule, a link to a folder)."""
    paths = changed.paths
    return any(f in paths or not paths.isdisjoint(_parents(f)) for f in reads.files)


def _beside_data(reads: Reads, changed: ChangedFiles) -> bool:
    """A file is changed, added or deleted in a folder it read a data file (anything but
    Python source) from: native readers, such as safetensors, open files the hook cannot
    see, by names made from the one it saw."""
    folders = {posixpath.dirname(f) for f in reads.files if not f.endswith(".py")}
    return any(posixpath.dirname(p) in folders for p in changed.paths)


def _in_a_listing(reads: Reads, changed: ChangedFiles) -> bool:
    """An entry appeared in or vanished from a folder the model itself listed: what it
    listed is different."""
    return not changed.listings.isdisjoint(reads.listed)


def _resolves_anew(reads: Reads, changed: ChangedFiles) -> bool:
    """A module appeared or vanished where an import looked for it, or where it would shadow
    one loaded from elsewhere; or distribution metadata did, in a folder the import system
    searched. Any other entry of a folder only the import system listed is found by no
    import."""
    sought, searched = set(reads.sought), set(reads.import_listed)
    return any(_module_path(e) in sought
               or (e.endswith(_METADATA) and (posixpath.dirname(e) or ".") in searched)
               for e in changed.one_sided)
