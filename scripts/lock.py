"""The hashed locks every workflow installs from, made from one source.

pyproject.toml's ``[project] dependencies`` and ``[build-system] requires`` (and the torch
version of requirements/ci.txt, which CI tests) are the only place a requirement is written.
This script writes each lock's input, ``requirements/NAME.in``, from them, and compiles it with
uv into ``requirements/NAME.txt``: every package pinned, with the sha256 of each of its files on
PyPI, for every platform and Python from 3.11 on (``--universal``). The workflows install a lock
with ``pip install --require-hashes --no-deps`` and then compilewatch's own source with
``--no-deps --no-build-isolation``, so that nothing unhashed is fetched (docs/github.md).

    bash scripts/lock.sh                    # rewrite the inputs, then the locks (needs PyPI)
    bash scripts/lock.sh --upgrade          # the same, newest versions (else pins are kept)
    python3 scripts/lock.py --check         # offline: is every lock current with its source?

``--check`` (also run by tests/scripts/test_lock.py) finds a lock stale when its input differs
from what pyproject.toml makes now, when a requirement of the input has no pin or a pin outside
its range, when a pin has no hash, or when a pin is there for no reason (required by neither the
input nor another pin).
"""

from __future__ import annotations

import argparse
import errno
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INDEX = "https://pypi.org/simple"


@dataclass(frozen=True)
class Lock:
    """One lock: what it is for, and which of pyproject's dependencies it takes."""

    name: str
    purpose: str
    only: tuple[str, ...] | None = None  # None: every dependency
    torch_from_ci: bool = False
    extras: tuple[str, ...] = ()  # [project.optional-dependencies] it takes too


LOCKS = (
    # An allow-list, not a deny-list: a dependency added to pyproject does not enter the jobs
    # that hold a write token until one of them imports it, which their test then shows
    # (tests/github/test_privileged_install.py installs this lock and runs both commands).
    Lock("bot", "The jobs that hold a write token: compilewatch-comment.yml (post) and the\n"
                "nightly's release job (nightly --publish-only). Only what those two commands\n"
                "import: no torch, matplotlib, numpy or scipy.",
         only=("pydantic", "click", "rich", "jinja2", "sqlalchemy", "alembic", "pygithub",
               "filelock", "cryptography", "platformdirs")),
    Lock("gpu", "The jobs that measure on a GPU runner: compilewatch-pr.yml and the nightly's\n"
                "measure job. Every dependency; torch at requirements/ci.txt's version, as PyPI\n"
                "builds it for Linux (with CUDA). The extras postgres and redis: shards ingest\n"
                "into one Postgres and share Inductor's cache on Redis (docs/scale.md).",
         torch_from_ci=True, extras=("postgres", "redis")),
)


class StaleLock(Exception):
    """A lock no longer matches its source."""


def _name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def _pyproject(root: Path) -> dict:
    return tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))


def _ci_torch(root: Path) -> str:
    lines = (root / "requirements" / "ci.txt").read_text(encoding="utf-8").splitlines()
    pins = [ln.split("#")[0].strip() for ln in lines if _is_requirement(ln)]
    torch = [p for p in pins if _name(p) == "torch"]
    if len(torch) != 1:
        raise StaleLock("requirements/ci.txt must pin torch exactly once")
    return torch[0]


def _is_requirement(line: str) -> bool:
    text = line.split("#")[0].strip()
    return bool(text) and not text.startswith("-")


def render_input(lock: Lock, root: Path = ROOT) -> str:
    """``requirements/NAME.in`` as pyproject.toml (and requirements/ci.txt) make it now."""
    project = _pyproject(root)
    deps = list(project["project"]["dependencies"])
    if lock.only is not None:
        named = {_name(d) for d in deps}
        missing = sorted(set(lock.only) - named)
        if missing:
            raise StaleLock(f"the {lock.name} lock names {', '.join(missing)}, which "
                            "pyproject.toml's dependencies no longer have: take it out of "
                            "LOCKS in scripts/lock.py, then run: bash scripts/lock.sh")
        deps = [d for d in deps if _name(d) in lock.only]
    lines = [f"# {ln}" for ln in lock.purpose.splitlines()]
    lines += ["# Written by scripts/lock.sh from pyproject.toml: edit that, not this file.",
              "# [project] dependencies", *deps]
    for extra in lock.extras:
        lines += [f"# [project.optional-dependencies] {extra}",
                  *project["project"]["optional-dependencies"][extra]]
    if lock.torch_from_ci:
        lines += ["# the torch CI tests (requirements/ci.txt)", _ci_torch(root)]
    lines += ["# [build-system] requires: compilewatch is built with --no-build-isolation",
              *project["build-system"]["requires"]]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    marker: str
    hashes: int
    via: tuple[str, ...]


PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)(?:\s*;\s*(.*?))?\s*\\?$")


def parse_lock(text: str) -> list[Pin]:
    """The pins of a uv-compiled, hashed requirements file: name, version, marker, how many
    hashes, and what each is there for (its ``# via`` lines)."""
    pins: list[Pin] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = PIN.match(lines[i])
        i += 1
        if match is None:
            continue
        hashes, via = 0, []
        while i < len(lines) and lines[i].startswith("    "):
            body = lines[i].strip()
            if body.startswith("--hash=sha256:"):
                hashes += 1
            elif body.startswith("# via "):
                via.append(body.removeprefix("# via ").strip())
            elif body.startswith("#   "):
                via.append(body.removeprefix("#").strip())
            i += 1
        pins.append(Pin(_name(match.group(1)), match.group(2), match.group(3) or "",
                        hashes, tuple(v for v in via if v)))
    return pins


def check_lock(lock: Lock, root: Path = ROOT) -> None:
    """Raise ``StaleLock`` naming the first way ``requirements/NAME.txt`` is out of date."""
    from packaging.requirements import Requirement  # in the test extra's venv and lock.sh's

    folder = root / "requirements"
    source, compiled = folder / f"{lock.name}.in", folder / f"{lock.name}.txt"
    rerun = "run: bash scripts/lock.sh"
    if not source.is_file() or source.read_text(encoding="utf-8") != render_input(lock, root):
        raise StaleLock(f"{source.relative_to(root)} differs from what pyproject.toml makes; "
                        f"{rerun}")
    if not compiled.is_file():
        raise StaleLock(f"{compiled.relative_to(root)} is missing; {rerun}")
    pins = parse_lock(compiled.read_text(encoding="utf-8"))
    by_name: dict[str, list[Pin]] = {}
    for pin in pins:
        by_name.setdefault(pin.name, []).append(pin)
    wanted = [Requirement(ln.strip()) for ln in source.read_text(encoding="utf-8").splitlines()
              if _is_requirement(ln)]
    for req in wanted:
        found = by_name.get(_name(req.name), [])
        if not found:
            raise StaleLock(f"{compiled.name} has no pin of {req.name}; {rerun}")
        for pin in found:
            if not req.specifier.contains(pin.version, prereleases=True):
                raise StaleLock(f"{compiled.name} pins {pin.name}=={pin.version}, outside "
                                f"{req}; {rerun}")
    inputs = {_name(r.name) for r in wanted}
    here = f"-r requirements/{lock.name}.in"
    for pin in pins:
        if pin.hashes == 0:
            raise StaleLock(f"{compiled.name} pins {pin.name} without a hash; {rerun}")
        reasons = [v for v in pin.via if (v == here and pin.name in inputs)
                   or (not v.startswith("-") and _name(v) in by_name)]
        if not reasons:
            raise StaleLock(f"{compiled.name} pins {pin.name}, which nothing requires any more"
                            f" (via {', '.join(pin.via) or 'nothing'}); {rerun}")


def write_inputs(root: Path = ROOT) -> None:
    for lock in LOCKS:
        (root / "requirements" / f"{lock.name}.in").write_text(render_input(lock, root),
                                                                encoding="utf-8")


def compile_locks(uv: str, extra: list[str], root: Path = ROOT) -> None:
    """uv, from PyPI only (``--no-config``: no index or setting of this machine's), pinned
    versions kept unless ``extra`` says ``--upgrade``."""
    for lock in LOCKS:
        subprocess.run(
            [uv, "pip", "compile", "--no-config", "--quiet", "--universal",
             "--python-version", "3.11", "--generate-hashes", "--index-url", INDEX,
             "--custom-compile-command", "bash scripts/lock.sh",
             "--output-file", f"requirements/{lock.name}.txt", f"requirements/{lock.name}.in",
             *extra], cwd=root, check=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="Only check, offline, that every lock is current.")
    parser.add_argument("--uv", default="uv", help="The uv to compile with.")
    args, extra = parser.parse_known_args(argv)
    try:
        if not args.check:
            uv = shutil.which(args.uv)
            if uv is None:  # before anything is written
                raise OSError(errno.ENOENT, "not found")
            write_inputs()
            compile_locks(uv, extra)
        for lock in LOCKS:
            check_lock(lock)
    except StaleLock as e:
        print(f"lock: {e}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as e:
        print(f"lock: {e.cmd[0]} failed with exit status {e.returncode}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"lock: cannot run {args.uv}: {e.strerror}; bash scripts/lock.sh installs it",
              file=sys.stderr)
        return 1
    print("lock: " + ", ".join(f"requirements/{lock.name}.txt" for lock in LOCKS) + " current")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
