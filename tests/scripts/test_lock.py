"""The hashed locks (``scripts/lock.py``): current with pyproject.toml, and every way of going
stale is caught, offline, with the command that makes the lock current again."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.benchmark_scripts import ROOT, load

lock = load("lock", "scripts")
BOT, GPU = lock.LOCKS


def test_without_uv_it_says_how_to_get_it(tree: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "lock.py"), "--uv",
                           str(tree / "no-uv")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "bash scripts/lock.sh installs it" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_committed_locks_are_current() -> None:
    for each in lock.LOCKS:
        lock.check_lock(each)
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "lock.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "current" in proc.stdout


def test_every_pin_is_parsed_with_its_hashes_and_reasons() -> None:
    for each in lock.LOCKS:
        text = (ROOT / "requirements" / f"{each.name}.txt").read_text()
        pins = lock.parse_lock(text)
        assert len(pins) == len(re.findall(r"^[A-Za-z0-9][\w.-]*==", text, re.MULTILINE))
        assert all(p.hashes >= 1 and p.via for p in pins)
        assert text.count("--hash=sha256:") == sum(p.hashes for p in pins)


def test_the_privileged_lock_holds_only_what_post_and_publishing_import() -> None:
    names = {p.name for p in lock.parse_lock((ROOT / "requirements" / "bot.txt").read_text())}
    assert {"pydantic", "pygithub", "cryptography", "sqlalchemy", "setuptools", "wheel"} <= names
    assert not names & {"torch", "numpy", "scipy", "matplotlib", "triton", "sympy"}
    gpu = {p.name: p for p in lock.parse_lock((ROOT / "requirements" / "gpu.txt").read_text())}
    ci = (ROOT / "requirements" / "ci.txt").read_text()
    assert f"torch=={gpu['torch'].version}" in ci  # the torch CI tests
    assert {"numpy", "scipy", "matplotlib", "triton"} <= set(gpu)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """The lock's sources and locks, copied: each case edits the copy."""
    shutil.copy2(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(ROOT / "requirements", tmp_path / "requirements")
    return tmp_path


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


NEW = "compilewatch-example-dependency"  # in no lock, whatever pyproject comes to hold


def _add_dependency(tree: Path) -> None:
    """What making a package (tlparse, say) a regular dependency does."""
    _edit(tree / "pyproject.toml", '    "cryptography>=42",\n',
          f'    "cryptography>=42",\n    "{NEW}>=0.3",\n')


def _drop_pin(tree: Path, name: str, lock_name: str = "gpu") -> None:
    path = tree / "requirements" / f"{lock_name}.txt"
    text = path.read_text()
    path.write_text(re.sub(rf"^{name}==.*?(?=^\S)", "", text, count=1,
                           flags=re.MULTILINE | re.DOTALL))


def _rewrite_inputs(tree: Path) -> None:
    lock.write_inputs(tree)


CASES: dict[str, tuple[Callable[[Path], None], object, str]] = {
    "a new dependency": (_add_dependency, GPU, "gpu.in differs"),
    "a new dependency, inputs rewritten, not compiled": (
        lambda t: (_add_dependency(t), _rewrite_inputs(t)), GPU, f"no pin of {NEW}"),
    "a raised lower bound": (
        lambda t: _edit(t / "pyproject.toml", '"pydantic>=2.6"', '"pydantic>=2.99"'),
        BOT, "bot.in differs"),
    "a raised lower bound, inputs rewritten": (
        lambda t: (_edit(t / "pyproject.toml", '"pydantic>=2.6"', '"pydantic>=2.99"'),
                   _rewrite_inputs(t)), BOT, "outside pydantic>=2.99"),
    "a dependency dropped that the privileged lock names": (
        lambda t: _edit(t / "pyproject.toml", '    "filelock>=3.12",\n', ""), BOT,
        "names filelock, which pyproject.toml's dependencies no longer have"),
    "a new torch in ci.txt": (
        lambda t: _edit(t / "requirements" / "ci.txt", "torch==2.13.0", "torch==2.14.1"),
        GPU, "gpu.in differs"),
    "a new torch in ci.txt, inputs rewritten": (
        lambda t: (_edit(t / "requirements" / "ci.txt", "torch==2.13.0", "torch==2.14.1"),
                   _rewrite_inputs(t)), GPU, "outside torch==2.14.1"),
    "a new build requirement": (
        lambda t: _edit(t / "pyproject.toml", 'requires = ["setuptools>=77", "wheel"]',
                        'requires = ["setuptools>=80", "wheel", "setuptools-scm>=8"]'),
        BOT, "bot.in differs"),
    "an input edited by hand": (
        lambda t: _edit(t / "requirements" / "bot.in", "rich>=13\n", "rich>=13\nnumpy\n"),
        BOT, "bot.in differs"),
    "a pin left behind": (
        lambda t: (t / "requirements" / "bot.txt").write_text(
            (t / "requirements" / "bot.txt").read_text()
            + "numpy==2.4.6 \\\n    --hash=sha256:" + "0" * 64 + "\n"
            "    # via -r requirements/bot.in\n"), BOT, "pins numpy, which nothing requires"),
    "a pin left behind by another tool": (
        lambda t: _edit(t / "requirements" / "bot.txt", "# via -r requirements/bot.in",
                        "# via -r bot.in"), BOT, "which nothing requires any more (via -r bot.in)"),
    "a pin whose only dependent is gone": (
        lambda t: _drop_pin(t, "sympy"), GPU, "pins mpmath, which nothing requires"),
    "a pin without a hash": (
        lambda t: (t / "requirements" / "bot.txt").write_text(re.sub(
            r"^(mdurl==\S+) \\\n(?:    --hash=\S+(?: \\)?\n)+", r"\1\n",
            (t / "requirements" / "bot.txt").read_text(), flags=re.MULTILINE)),
        BOT, "pins mdurl without a hash"),
    "a lock deleted": (lambda t: (t / "requirements" / "gpu.txt").unlink(), GPU,
                       "gpu.txt is missing"),
}


@pytest.mark.parametrize("case", CASES)
def test_each_way_of_going_stale_is_caught(tree: Path, case: str) -> None:
    change, which, message = CASES[case]
    for each in lock.LOCKS:
        lock.check_lock(each, tree)  # current before the change
    change(tree)
    with pytest.raises(lock.StaleLock, match=re.escape(message)) as caught:
        lock.check_lock(which, tree)
    assert "bash scripts/lock.sh" in str(caught.value)

