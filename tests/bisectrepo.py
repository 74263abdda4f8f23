"""Model repositories with a history, for the bisection tests: every commit on ``main``, each
change at a known commit (a graph break, a recompile, another input shape, ten times the work,
a suite that does not load, an Inductor fault or flag), the others touching only a notes file.

Models are kept cheap: ``tiny``, ``scalar`` and ``work`` compile with the eager backend (Dynamo's
graph breaks and recompiles are real, no C++ is built); ``shape``, ``relu`` and ``vec`` need
Inductor (its cache key, its code).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

PYPROJECT = '[project]\nname = "histproj"\nversion = "0.1"\n\n' \
            '[tool.compilewatch]\nsuites = ["bench/models.py"]\n'
SIZES = "BRANCH = False\nSWEEP = [16]\nSIZE = 16\nREPEAT = 1\n"
MODEL = '''import torch

from tinylib import sizes


def forward(x):
    y = torch.sin(x) * 2
    if sizes.BRANCH and y.sum() > 0:  # data-dependent: a graph break
        y = y - 1
    return y + 1


def scalar(x):
    return x * x.sum().item()  # a graph break unless Dynamo captures scalar outputs


class Work(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(128, 128) / 12)

    def forward(self, x):
        for _ in range(8 * sizes.REPEAT):
            x = torch.tanh(x @ self.w)
        return x
'''
SUITE = '''import torch

from compilewatch.suites import model
from tinylib import sizes
from tinylib.model import Work, forward, scalar

SUITE_NAME = "hist"
{config}

@model("tiny", compile_kwargs={{"backend": "eager"}},
       sweep=lambda: [(torch.randn(n),) for n in sizes.SWEEP])
def tiny():
    return forward, (torch.randn(16),)


@model("scalar", compile_kwargs={{"backend": "eager"}})
def scalar_model():
    return scalar, (torch.randn(16),)


@model("work", compile_kwargs={{"backend": "eager"}})
def work():
    torch.manual_seed(0)
    return Work(), (torch.randn(64, 128),)


@model("shape")
def shape():
    return (lambda x: torch.sin(x) * 2 + 1), (torch.randn(sizes.SIZE, 8),)


@model("relu")
def relu():
    return (lambda x: torch.relu(x * 2) + 1), (torch.randn(256),)


@model("vec")
def vec():
    return (lambda x: (x.sin() * x.cos()).exp() + x.tanh()), (torch.randn(1 << 18),)
'''
BROKEN = "def broken(:\n"

Change = Callable[[Path], None]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def sizes(**values: object) -> Change:
    """Set constants of ``tinylib/sizes.py`` from this commit on."""
    def change(repo: Path) -> None:
        path = repo / "tinylib" / "sizes.py"
        lines = dict(line.split(" = ", 1) for line in path.read_text().splitlines())
        lines.update({k: repr(v) for k, v in values.items()})
        path.write_text("".join(f"{k} = {v}\n" for k, v in lines.items()))
    return change


def suite_config(*lines: str) -> Change:
    """Lines run when the suite is imported (Inductor config), from this commit on."""
    def change(repo: Path) -> None:
        (repo / "bench" / "models.py").write_text(SUITE.format(config="\n".join(lines)))
    return change


def together(*changes: Change) -> Change:
    """Several changes in one commit."""
    def change(repo: Path) -> None:
        for c in changes:
            c(repo)
    return change


def break_suite(repo: Path) -> None:
    (repo / "bench" / "models.py").write_text(BROKEN)


def build(root: Path, commits: int, changes: dict[int, Change]) -> tuple[Path, list[str]]:
    """``commits`` commits on main: c0 is the model repository, commit k applies
    ``changes[k]`` (else appends to NOTES). Returns the repository and the commits, oldest
    first."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    (root / "tinylib").mkdir()
    (root / "bench").mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "tinylib" / "__init__.py").write_text("")
    (root / "tinylib" / "sizes.py").write_text(SIZES)
    (root / "tinylib" / "model.py").write_text(MODEL)
    suite_config()(root)
    shas = []
    for k in range(commits):
        if k in changes:
            changes[k](root)
        elif k:
            with (root / "NOTES").open("a") as f:
                f.write(f"note {k}\n")
        git(root, "add", "-A")
        git(root, "commit", "-qm", f"c{k}")
        shas.append(git(root, "rev-parse", "HEAD"))
    return root, shas
