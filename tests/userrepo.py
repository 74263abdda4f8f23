"""Model repositories shaped like real ones, for the tests of whose code each side measures.

A repository has its own package (flat, ``src/`` or a namespace package), a suite that imports
it (in a subfolder or at the root), a pyproject a real ``pip install`` builds, and two commits:
``main``, and ``pr``, which adds a data-dependent branch (a graph break) to the package's
forward, never to the suite file. ``venv`` makes a real virtual environment whose own
site-packages receives the repository's install, with torch and compilewatch taken from the
test environment's site-packages (a ``.pth``), so nothing large is installed again.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Mapping
from pathlib import Path

MODEL = '''
"""One part of a small GPT-like network: a pre-norm MLP block."""
from torch import nn


class Part(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(),
                                 nn.Linear(2 * width, width))

    def forward(self, x):
        x = x + self.mlp(self.ln(x))
        return x
'''
BRANCH = ("        x = x + self.mlp(self.ln(x))\n",
          "        x = x + self.mlp(self.ln(x))\n"
          "        if x.sum() > 0:  # data-dependent: a graph break\n"
          "            x = x * 2\n")

# where each layout keeps its package, and what the suite imports
LAYOUTS = {
    "flat": ("flatgpt", "flatgpt.model"),
    "src": ("src/srcgpt", "srcgpt.model"),
    "namespace": ("src/acme/nsgpt", "acme.nsgpt.model"),
    "lib": ("lib/libgpt", "libgpt.model"),  # found only through [tool.compilewatch] pythonpath
}
SUITE = '''
import torch

{imports}
from compilewatch.suites import model

SUITE_NAME = "{name}"


@model("net", compile_kwargs={{"backend": "{backend}"}})
def net():
{lazy}    torch.manual_seed(0)
    parts = [{parts}]
    return torch.nn.Sequential(torch.nn.Embedding(32, 16), *parts), (torch.randint(0, 32, (2, 8)),)
'''


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _suite(name: str, layouts: list[str], backend: str, lazy: bool = False) -> str:
    """``lazy``: the factory imports the packages, so only the worker that builds the model
    does (the listing child never sees them)."""
    mods = [LAYOUTS[lay][1] for lay in layouts]
    lines = [f"import {m}" for m in mods]
    return SUITE.format(imports="" if lazy else "\n".join(lines), name=name, backend=backend,
                        lazy="".join(f"    {x}\n" for x in lines) if lazy else "",
                        parts=", ".join(f"{m}.Part()" for m in mods))


def _pyproject(name: str, layouts: list[str], suites: list[str], extra: str) -> str:
    where = sorted({LAYOUTS[lay][0].split("/")[0] if "/" in LAYOUTS[lay][0] else "."
                    for lay in layouts})
    listed = ", ".join(f'"{s}"' for s in suites)
    return textwrap.dedent(f'''\
        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "{name}"
        version = "0.1.0"

        [tool.setuptools.packages.find]
        where = [{", ".join(f'"{w}"' for w in where)}]
        include = ["flatgpt*", "srcgpt*", "acme*", "libgpt*"]
        namespaces = true

        [tool.compilewatch]
        suites = [{listed}]
        ''') + extra


def model_repo(root: Path, layouts: list[str] | None = None, *, suite_at_root: bool = False,
               backend: str = "eager", name: str = "userproj", extra: str = "",
               lazy: bool = False, models: str = "", files: dict[str, str] | None = None
               ) -> Path:
    """A repository with ``layouts``' packages and one suite (``bench/models.py``, or
    ``models.py`` at the root) whose model chains a part of each, committed as ``main``, and a
    ``pr`` branch whose packages break the graph (one break a package). Left at ``pr``.
    ``models``: more of the suite's source, after its model; ``files``: more files on
    ``main`` (path relative to the root -> text)."""
    layouts = layouts or ["flat", "src", "namespace"]
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    for lay in layouts:
        folder = root / LAYOUTS[lay][0]
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        (folder / "model.py").write_text(MODEL)
    write(root, files or {})
    suite = Path("models.py") if suite_at_root else Path("bench") / "models.py"
    (root / suite).parent.mkdir(exist_ok=True)
    (root / suite).write_text(_suite("models", layouts, backend, lazy) + models)
    (root / "pyproject.toml").write_text(_pyproject(name, layouts, [suite.as_posix()], extra))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "a model repository")
    git(root, "checkout", "-qb", "pr")
    for lay in layouts:
        path = root / LAYOUTS[lay][0] / "model.py"
        path.write_text(path.read_text().replace(*BRANCH))
    git(root, "commit", "-qam", "a data-dependent branch in the package")
    return root


def write(root: Path, files: Mapping[str, str | None]) -> None:
    """Write each file (its folders too); None deletes it."""
    for rel, text in files.items():
        path = root / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def venv(path: Path) -> Path:
    """A real venv (no pip of its own: the test environment's pip installs into it) that also
    sees the test environment's packages; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = next(path.glob("lib/python*/site-packages"))
    outer = sysconfig.get_paths()["purelib"]
    # after the venv's own site-packages: the repository's install there is found first
    (site / "zz_outer.pth").write_text(f"import site; site.addsitedir({outer!r})\n")
    return path / "bin" / "python"


def pip_install(python: Path, target: Path, *, editable: bool) -> None:
    """``pip install [-e] TARGET`` into ``python``'s venv, as a CI step does (no build
    isolation, so it builds with the setuptools already here instead of fetching one)."""
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
           "--no-build-isolation", *(["-e"] if editable else []), str(target)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
