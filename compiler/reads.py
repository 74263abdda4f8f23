"""Which files of a checkout a model depends on, and whether a change touches any of them.

A pull request that changes none of the files a model reads cannot have changed that model:
the same interpreter and environment run the same code on the same data. ``pr`` asks a cheap
``scan`` process per side (build the model, run it eagerly and under Dynamo with the eager
backend, on its inputs and its shape sweep) what it read, through an audit hook
(:pep:`578`): every file opened (imports included) and every directory listed under the side's
worktree. ``touched`` then says whether the PR's diff reaches any of it; ``compiler/unchanged.py``
makes a verdict of that.

What an audit hook cannot see is treated as unknown, never as "read nothing": a process that
started another program (a subprocess, ``os.system``, an ``exec``), forked, or loaded a shared
library from the checkout may have read anything, so its model is measured. Files read by
native code that takes a path (a safetensors reader, say) are covered by a neighbour rule: a
changed file beside any data file the model read counts as read.
"""

from __future__ import annotations

import importlib.machinery
import os
import posixpath
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from compilewatch.compiler.protocol import Reads

MAX_FILES = 10_000  # beyond this the record is not kept: the model is measured instead
_OPAQUE = {"subprocess.Popen": "started a subprocess", "os.system": "ran os.system",
           "os.exec": "exec'd a program", "os.posix_spawn": "spawned a program",
           "os.spawn": "spawned a program", "os.fork": "forked", "os.forkpty": "forked",
           "pty.spawn": "spawned a program"}
_LISTING = ("os.listdir", "os.scandir")
_IMPORT_SUFFIXES = tuple(importlib.machinery.all_suffixes())
_IMPORTER = "<frozen importlib._bootstrap_external>"


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
    home_files: set[str] = field(default_factory=set)
    opaque: str | None = None
    active: bool = False
    _roots: list[tuple[str, str]] = field(default_factory=list)

    def start(self) -> None:
        self._roots = _forms(self.root)
        sys.addaudithook(self._hook)
        self.active = True

    def stop(self) -> Reads:
        self.active = False
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if isinstance(path, str):
                self._add_file(path)
        files = sorted({source_of(f) for f in self.files})
        opaque = self.opaque
        if len(files) > MAX_FILES:
            files, opaque = [], opaque or f"read more than {MAX_FILES} files of the checkout"
        return Reads(files=files, listed=sorted(self.listed),
                     import_listed=sorted(self.import_listed - self.listed),
                     home_files=len(self.home_files), opaque=opaque)

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
                    by_importer = sys._getframe(1).f_code.co_filename == _IMPORTER
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
    added or deleted (a rename is both); ``listings``: directories whose listing differs (the
    parent of a named file, and each ancestor whose child directory appeared or vanished).
    """

    modified: frozenset[str] = frozenset()
    named: frozenset[str] = frozenset()
    listings: frozenset[str] = frozenset()

    @property
    def paths(self) -> frozenset[str]:
        return self.modified | self.named

    @classmethod
    def of(cls, entries: Iterable[tuple[str, str]], is_dir: Callable[[str], bool]
           ) -> ChangedFiles:
        """From ``git diff --name-status --no-renames`` entries ``(status, path)``;
        ``is_dir(path)`` says whether a directory exists on *both* sides."""
        modified, named, listings = set(), set(), set()
        for status, path in entries:
            if status[:1] in ("A", "D"):
                named.add(path)
                child = path
                while True:
                    parent = posixpath.dirname(child) or "."
                    listings.add(parent)
                    if parent == "." or is_dir(parent):
                        break
                    child = parent
            else:
                modified.add(path)
        return cls(frozenset(modified), frozenset(named), frozenset(listings))


def _entry_below(directory: str, path: str) -> str:
    """The name under ``directory`` on the way to ``path``."""
    rest = path if directory == "." else path[len(directory) + 1:]
    return rest.split("/", 1)[0]


def _parents(path: str) -> set[str]:
    """The folders above ``path``: ``a/b/c.py`` -> ``{"a", "a/b"}``."""
    parts = path.split("/")[:-1]
    return {"/".join(parts[:k]) for k in range(1, len(parts) + 1)}


def touched(reads: Reads, changed: ChangedFiles) -> bool:
    """Whether the change reaches what the model read (always, when that is not known)."""
    if reads.opaque:
        return True
    paths = changed.paths
    # a file it read, or a path above one (a submodule, a link to a folder)
    if any(f in paths or not paths.isdisjoint(_parents(f)) for f in reads.files):
        return True
    data_dirs = {posixpath.dirname(f) for f in reads.files if not f.endswith(".py")}
    if any(posixpath.dirname(p) in data_dirs for p in paths):
        return True
    for directory in changed.listings & {*reads.listed, *reads.import_listed}:
        if directory in reads.listed:
            return True
        names = {_entry_below(directory, p) for p in changed.named
                 if directory == "." or p.startswith(directory + "/")}
        if any("." not in n or n.endswith(_IMPORT_SUFFIXES) for n in names):
            return True
    return False
