"""Whose code a side imports: its own checkout first, and a refusal when it is not.

A pull request changes the repository's own package as often as its suite file. Each side of a
comparison must import its own checkout's copy; an installed copy of the project (``pip install
-e .`` in the PR's checkout, the usual CI step) would otherwise make base measure head's code.
``activate`` puts the side's folders first on ``sys.path`` (the checkout's root and its
``[tool.compilewatch] pythonpath``, ``src`` by default where it exists, as pytest's
``pythonpath`` does), and forgets modules the side provides that were imported from elsewhere
before (a fork server's preload). ``check`` then looks at every module the process imported:
one the repository provides that still came from outside the checkout is a ``ForeignCode``
error naming the module, where it came from and the fix, unless the user allowed it
(``--allow-installed``). ``origins`` says where each top-level module came from, for the
results.

The repository "provides" a module when its import folders hold it, when it was imported from
the user's own checkout or from the source folder of the project's editable install (its
``direct_url.json``), when the project's installed distribution (``[project] name``) ships it,
or when a package of that name sits deeper in the checkout (a folder missing from
``pythonpath``).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import json
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from compilewatch.core.errors import SuiteError
from compilewatch.core.schema import MAX_ORIGINS, ModuleName, ModuleOrigin
from compilewatch.suites.loader import SUITE_MODULE_PREFIX

Folder = Annotated[str, StringConstraints(min_length=1, max_length=4096)]
# what ``check`` never judges: the harness's own code and the interpreter's
_OURS = frozenset({"compilewatch", "__main__", "__mp_main__"})
_SKIP_DIRS = frozenset({".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "env",
                        "node_modules", "build", "dist", "site-packages", "__pycache__",
                        ".eggs", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
SEARCH_DEPTH = 3  # how deep ``check`` looks for a package folder missing from the path


class ForeignCode(SuiteError):
    """A module the repository provides was imported from outside this side's checkout."""


class SideCode(BaseModel):
    """One side's own code: the folders its imports must come from, as a worker is told."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    root: Folder  # the side's checkout (absolute)
    paths: tuple[Folder, ...] = Field(default=(), max_length=64)  # first on sys.path, in order
    home: Folder | None = None  # the user's own checkout, where an editable install points
    distribution: Annotated[str, StringConstraints(max_length=256)] | None = None
    allow_installed: tuple[ModuleName, ...] = Field(default=(), max_length=256)


def top_levels() -> frozenset[str]:
    """The top-level names in ``sys.modules`` now."""
    return frozenset(name.partition(".")[0] for name in list(sys.modules))


def activate(code: SideCode) -> None:
    """Put the side's folders first on ``sys.path`` and forget what it provides that came from
    elsewhere, so that the next import finds the side's own copy."""
    for folder in reversed(code.paths):
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)
        sys.path.insert(0, folder)
    provided = on_paths(code)
    for name, module in list(sys.modules.items()):
        top = name.partition(".")[0]
        if top in provided and top not in code.allow_installed \
                and not _inside(_locations(module), code.root):
            del sys.modules[name]
    importlib.invalidate_caches()


def check(code: SideCode, names: Iterable[str] | None = None) -> dict[str, ModuleOrigin]:
    """Every imported module the repository provides must come from this side's checkout;
    returns where the top-level modules of ``names`` (None: every one) came from. Raises
    ``ForeignCode``."""
    provided, homes = on_paths(code), _homes(code)
    shipped: frozenset[str] | None = None
    for name, module in sorted(list(sys.modules.items())):
        top = name.partition(".")[0]
        if _ignored(top) or top in code.allow_installed:
            continue
        where = _locations(module)
        if not where or _inside(where, code.root):
            continue
        mine = _provides(code, name) if top in provided else None
        if mine is not None:
            raise _refusal(code, name, where[0], f"this side's checkout has {mine}")
        # an environment inside the user's checkout (its .venv) holds installed copies, not
        # the repository's code: torch from there is no more the repository's than elsewhere
        home = None if _installed(where) else next((h for h in homes if _inside(where, h)),
                                                   None)
        if home is not None:
            raise _refusal(code, name, where[0], f"that is the repository's own checkout at "
                                                  f"{home}, not this side's")
        if "." in name:
            continue
        if shipped is None:
            shipped = _shipped(code.distribution)
        if top in shipped:
            raise _refusal(code, name, where[0], f"it is installed as {code.distribution}, "
                                                  "this repository's own project")
        if _deeper(Path(code.root), top) is not None:
            raise _refusal(code, name, where[0], "this side's checkout has it too")
    return origins(code, names)


def origins(code: SideCode, names: Iterable[str] | None = None) -> dict[str, ModuleOrigin]:
    """Where each top-level module (of ``names``, else every one not the interpreter's or
    ours) came from: the checkout (a path relative to it) or an installed copy."""
    chosen = sorted(t for t in (set(names) if names is not None else top_levels())
                    if not _ignored(t))
    out: dict[str, ModuleOrigin] = {}
    for top in chosen:
        module = sys.modules.get(top)
        where = _locations(module) if module is not None else []
        if not where or len(out) >= MAX_ORIGINS:
            continue
        inside = next((w for w in where if _inside([w], code.root)), None)
        if inside is not None:
            rel = os.path.relpath(os.path.realpath(inside), os.path.realpath(code.root))
            out[top] = ModuleOrigin(where="checkout", path=Path(rel).as_posix())
        else:
            out[top] = ModuleOrigin(where="installed", path=where[0][-512:],
                                    allowed=top in code.allow_installed)
    return out


def _ignored(top: str) -> bool:
    return top in _OURS or top.startswith(SUITE_MODULE_PREFIX) or top in sys.stdlib_module_names \
        or top in sys.builtin_module_names


def _locations(module: ModuleType) -> list[str]:
    """The files or folders a module was loaded from (a namespace package has several)."""
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None) or getattr(module, "__file__", None)
    if isinstance(origin, str) and origin not in ("built-in", "frozen") and os.path.isabs(origin):
        return [origin]
    path = getattr(module, "__path__", None)
    try:
        return [p for p in list(path or ()) if isinstance(p, str) and os.path.isabs(p)]
    except Exception:  # a hostile __path__; then nothing is known of it
        return []


def _installed(locations: list[str]) -> bool:
    """Loaded from an environment's install folder (site-packages, dist-packages)."""
    return any(part in ("site-packages", "dist-packages")
               for p in locations for part in Path(p).parts)


def _inside(locations: list[str], root: str) -> bool:
    real = os.path.realpath(root)
    return any(Path(os.path.realpath(p)).is_relative_to(real) or Path(p).is_relative_to(root)
               for p in locations)


def on_paths(code: SideCode) -> dict[str, str]:
    """Top-level names the side's import folders hold -> their path in the checkout."""
    found: dict[str, str] = {}
    for folder in code.paths:
        with contextlib.suppress(OSError):
            for entry in sorted(os.scandir(folder), key=lambda e: e.name):
                name = _module_name(entry)
                if name and name not in found and not _ignored(name):
                    rel = os.path.relpath(entry.path, code.root)
                    found[name] = Path(rel).as_posix() + ("/" if entry.is_dir() else "")
    return found


def _provides(code: SideCode, name: str) -> str | None:
    """Where the side's import folders hold module ``name`` (a dotted name): its file or
    package folder, or its top level's regular package (whose modules can come from nowhere
    else); None for another project's portion of a namespace package."""
    parts = name.split(".")
    for folder in code.paths:
        base = Path(folder)
        if len(parts) > 1 and (base / parts[0] / "__init__.py").is_file():
            return _rel(code, base / parts[0]) + "/"
        target = base.joinpath(*parts)
        for candidate in (target / "__init__.py", target.with_suffix(".py")):
            if candidate.is_file():
                return _rel(code, candidate)
        if target.is_dir() and _has_python(str(target)):
            return _rel(code, target) + "/"
    return None


def _rel(code: SideCode, path: Path) -> str:
    return Path(os.path.relpath(path, code.root)).as_posix()


def _module_name(entry: os.DirEntry[str]) -> str | None:
    """The module an entry of an import folder is, if any: a package (regular or namespace:
    a folder with Python files) or a module file."""
    if entry.name.startswith("."):
        return None
    if entry.is_dir():
        return entry.name if entry.name.isidentifier() and _has_python(entry.path) else None
    stem, _, suffix = entry.name.partition(".")
    ok = suffix == "py" or (suffix.endswith("so") and "." in entry.name)
    return stem if ok and stem.isidentifier() else None


def _has_python(folder: str, depth: int = 2) -> bool:
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if entry.is_file() and entry.name.endswith(".py"):
                return True
            if depth > 1 and entry.is_dir() and entry.name.isidentifier() \
                    and _has_python(entry.path, depth - 1):
                return True
    return False


def _homes(code: SideCode) -> list[str]:
    """Folders whose code is this repository's but not this side's: the user's checkout and
    the source folder of the project's editable install."""
    homes = [code.home] if code.home and not _inside([code.home], code.root) else []
    dist = _distribution(code.distribution)
    if dist is not None:
        with contextlib.suppress(Exception):
            url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
            if url.startswith("file://"):
                folder = url.removeprefix("file://")
                if not _inside([folder], code.root):
                    homes.append(folder)
    return homes


def _distribution(name: str | None) -> importlib.metadata.Distribution | None:
    if not name:
        return None
    try:
        return importlib.metadata.distribution(name)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def _shipped(name: str | None) -> frozenset[str]:
    """The top-level modules the project's installed distribution ships."""
    dist = _distribution(name)
    if dist is None:
        return frozenset()
    listed = (dist.read_text("top_level.txt") or "").split()
    tops = {line.strip() for line in listed if line.strip().isidentifier()}
    for file in dist.files or ():
        parts = Path(str(file)).parts
        if not parts or parts[0] in ("..", "__pycache__") or parts[0].endswith(
                (".dist-info", ".egg-info", ".data")) or parts[0].startswith("__editable__"):
            continue
        stem = parts[0].partition(".")[0]
        if stem.isidentifier() and (len(parts) > 1 or parts[0].endswith((".py", ".so"))):
            tops.add(stem)
    return frozenset(tops)


def _deeper(root: Path, top: str) -> str | None:
    """A package ``top`` deeper in the checkout than its import folders (e.g. ``lib/top``)."""
    for folder in _walk(root, SEARCH_DEPTH):
        candidate = folder / top / "__init__.py"
        if candidate.is_file():
            return (candidate.parent.relative_to(root)).as_posix() + "/__init__.py"
    return None


def _walk(root: Path, depth: int) -> Iterator[Path]:
    """Folders under ``root`` down to ``depth``, breadth first, skipping tool folders."""
    level = [root]
    for _ in range(depth):
        nxt: list[Path] = []
        for folder in level:
            yield folder
            with contextlib.suppress(OSError):
                nxt += sorted(Path(e.path) for e in os.scandir(folder)
                              if e.is_dir(follow_symlinks=False) and e.name not in _SKIP_DIRS
                              and not e.name.startswith("."))
        level = nxt


def _refusal(code: SideCode, name: str, where: str, why: str) -> ForeignCode:
    top = name.partition(".")[0]
    deeper = _deeper(Path(code.root), top)
    if deeper is not None and not why.startswith("this side's checkout has "):
        why = f"{why}; this side's checkout has {deeper}"
    elif deeper is not None:
        why = f"this side's checkout has {deeper}"
    folder = Path(deeper).parent.parent.as_posix() if deeper is not None else None
    fix = (f'add "{folder}" to [tool.compilewatch] pythonpath' if folder and folder != "."
           else "uninstall the installed copy or make this side's checkout importable "
                "([tool.compilewatch] pythonpath)")
    return ForeignCode(
        f"module {name} was imported from {where}, outside this side's checkout "
        f"({code.root}), but {why}: the side would measure other code than its own. "
        f"Fix: {fix}; or pass --allow-installed {top} to measure the installed copy on "
        "purpose")
