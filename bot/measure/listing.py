"""A side's suites, listed by a child process that imports them from the side's own code.

A suite file is the repository's code (in a ``pr``, the PR's): its module-level code never runs
in the process that holds the job's options and database, only in a child with the workers'
allow-listed environment (``suites/listing.py``), which puts the side's folders first on the
import path and refuses the repository's modules imported from elsewhere. Built-in suites are
ours and load here.
"""

from __future__ import annotations

import contextlib
import json
import stat
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from compilewatch.compiler.children import run_module
from compilewatch.compiler.processes import base_env
from compilewatch.compiler.tempdirs import owned_temporary
from compilewatch.core.errors import SuiteError
from compilewatch.core.schema import ModuleOrigin
from compilewatch.suites import listing
from compilewatch.suites.imports import SideCode
from compilewatch.suites.loader import BUILTIN, Suite, load_suite, resolve_suites

LISTING_TIMEOUT_S = 300.0  # importing a suite imports torch, and maybe transformers
MAX_LISTING_BYTES = 4 * 1024 * 1024


def _listing_text(out: Path, source: str) -> str:
    """The child's answer: a plain file of bounded size (the child ran the PR's code: a link
    to ``/dev/zero`` or a huge file is refused before a byte is read)."""
    try:
        st = out.lstat()
    except FileNotFoundError:
        return ""
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_LISTING_BYTES:
        raise SuiteError(f"listing the models of {source} gave an answer that is not a plain "
                         f"file of at most {MAX_LISTING_BYTES} bytes")
    return out.read_text(encoding="utf-8", errors="replace")


def list_suite(source: str, python: str = sys.executable, code: SideCode | None = None
               ) -> Suite:
    """The repository's suite, imported in a child with the workers' allow-listed environment
    (its module-level code must not see the job's credentials) from the side's own ``code``;
    its answer is checked."""
    if source.endswith(".py") or Path(source).is_file():
        # the child runs in a folder of its own: a file relative to ours (``--suite
        # models.py``, or the pyproject's suites from ``.``) would not be found there
        source = str(Path(source).absolute())
    with owned_temporary("compilewatch-listing-") as tmp:
        out = Path(tmp) / "listing.json"
        args = [source, str(out)]
        if code is not None:
            (Path(tmp) / "code.json").write_text(code.model_dump_json(), encoding="utf-8")
            args.append(str(Path(tmp) / "code.json"))
        try:
            # killed with its session when it returns: a daemon the suite starts at import
            # does not outlive the listing
            proc = run_module(python, "compilewatch.suites.listing", *args, env=base_env(),
                              cwd=Path(tmp), timeout=LISTING_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as e:
            raise SuiteError(f"listing the models of {source} failed: {e}") from None
        text = _listing_text(out, source)
    if not text:
        raise SuiteError(f"listing the models of {source} failed (exit {proc.returncode}): "
                         f"{proc.stderr[-2000:]}")
    with contextlib.suppress(ValueError):
        answer = json.loads(text)
        if isinstance(answer, dict) and set(answer) == {"error"}:
            raise SuiteError(str(answer["error"])[:4000])
    return listing.read(source, text)


def load_suites(sources: Iterable[str], *, python: str = sys.executable,
                code: SideCode | None = None) -> list[Suite]:
    """Each suite once, built-ins here and the rest by a listing child; two sources with the
    same suite name are an error (as ``suites.loader.resolve_suites``)."""
    return resolve_suites(sources, lambda src: load_suite(src) if src in BUILTIN
                          else list_suite(src, python, code))


def modules_of(suites: Iterable[Suite]) -> dict[str, ModuleOrigin]:
    """Where the suites' own imports came from, over all of them."""
    found: dict[str, ModuleOrigin] = {}
    for suite in suites:
        for name, origin in suite.modules.items():
            found.setdefault(name, origin)
    return found
