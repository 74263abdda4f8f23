"""``compilewatch doctor``: what will and will not work on this machine, on one screen.

Each check is a line: ``ok``, ``info``, ``warn`` (something beyond the main job will not work)
or ``fail`` (the main job, ``compilewatch run`` on CPU, cannot run). Nothing is created or
changed: a database that does not exist yet is reported, not made.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from github import GithubException

from compilewatch.bot.github.client import (
    Credentials,
    RetryPolicy,
    connect,
    github_errors,
    split_repo,
)
from compilewatch.bot.measure.harness import collect_environment
from compilewatch.bot.measure.remote import READER_ENV
from compilewatch.bot.render.diagnostics import Find, find_tlparse
from compilewatch.compiler import remoteurl
from compilewatch.core.errors import CompilewatchError
from compilewatch.core.schema import Environment

Status = Literal["ok", "info", "warn", "fail"]
Probe = Callable[[str], Environment]
Which = Callable[[str], str | None]
Version = Callable[[], str | None]
QUICK = RetryPolicy(retries=1, backoff_s=0.5, max_wait_s=10.0, timeout_s=10.0)
COMPILERS = ("c++", "g++", "clang++")
POST_SCOPES = ("repo", "public_repo")


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str


@dataclass(frozen=True)
class DoctorReport:
    checks: list[Check]

    @property
    def can_run(self) -> bool:
        """The main job (``compilewatch run --device cpu``) can run: no check failed."""
        return all(c.status != "fail" for c in self.checks)


def _python() -> Check:
    ok = sys.version_info >= (3, 11)
    return Check("python", "ok" if ok else "fail",
                 f"{sys.version.split()[0]} ({sys.executable})" + ("" if ok else
                                                                   ": 3.11 or newer needed"))


def _environment(python: str, probe: Probe) -> tuple[list[Check], Environment | None]:
    try:
        env = probe(python)
    except CompilewatchError as e:
        return [Check("torch", "fail", f"cannot import torch in {python}: {e}")], None
    gpu = (Check("GPU", "ok", f"{env.gpu} ×{env.gpu_count} (CUDA {env.cuda or '?'}, driver "
                              f"{env.driver or '?'}): --device cuda works")
           if env.gpu_count else
           Check("GPU", "warn", "none visible: --device cuda is refused (exit 2); "
                                "CPU runs work"))
    triton = env.triton or "not installed (needed for GPU compiles only)"
    return [Check("torch", "ok", f"{env.torch}" + (f" (git {env.torch_git[:10]})"
                                                   if env.torch_git else "")),
            Check("triton", "ok" if env.triton else "warn" if env.gpu_count else "info",
                  triton),
            gpu], env


def _compiler(which: Which) -> Check:
    wanted = [os.environ["CXX"]] if os.environ.get("CXX") else list(COMPILERS)
    found = next((p for name in wanted if (p := which(name))), None)
    if found is None:
        return Check("C++ compiler", "fail", f"none of {', '.join(wanted)} on PATH: Inductor's "
                                             "CPU backend compiles C++ (install g++)")
    return Check("C++ compiler", "ok", f"{found} (Inductor's CPU backend)")


def _tlparse(find: Find) -> Check:
    """tlparse turns a flagged model's trace into the report compiler engineers read; it is a
    dependency, so missing means compilewatch was installed without its dependencies or runs
    in another interpreter."""
    exe = find()
    if exe is None:
        return Check("tlparse", "warn", f"not beside {sys.executable} nor on PATH: `pr` writes "
                                        "no tlparse report of a flagged model (its comment "
                                        "says why); pip install tlparse")
    try:
        version = subprocess.run([exe, "--version"], capture_output=True, text=True,
                                 timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return Check("tlparse", "warn", f"{exe} does not run ({type(e).__name__}): `pr` writes "
                                        "no tlparse report of a flagged model")
    return Check("tlparse", "ok", f"{version or 'tlparse'} ({exe}): `pr` writes a report of "
                                  "each flagged model's trace")


def redis_version() -> str | None:
    """The installed ``redis`` package's version; None: not installed."""
    try:
        return importlib.metadata.version("redis") if remoteurl.available() else None
    except importlib.metadata.PackageNotFoundError:
        return None


def _shared_cache(version: Version, url: str | None) -> Check:
    """``--remote-cache`` needs the redis package (the ``redis`` extra, not installed by
    default); a URL in the environment is checked as the commands check it, and read once."""
    found = version()
    if found is None:
        return Check("shared cache", "warn", "the redis package is not installed: "
                                             "--remote-cache is off, with a warning (pip install "
                                             "'compilewatch[redis]')")
    if url is None:
        return Check("shared cache", "ok", f"redis {found}: --remote-cache can share compiles")
    try:
        endpoint = remoteurl.parse(url)
        remoteurl.connect(endpoint).get(endpoint.namespace + ".probe")
    except CompilewatchError as e:
        return Check("shared cache", "warn", f"{READER_ENV}: {e}")
    except Exception as e:  # redis' own errors: unreachable, refused, TLS
        return Check("shared cache", "warn", f"{READER_ENV} {endpoint.shown()}: "
                                             f"{type(e).__name__}: {str(e)[:200]}")
    return Check("shared cache", "ok", f"redis {found}: {endpoint.shown()} answers")


def _writable(path: Path) -> bool:
    """``path`` (or, when missing, its nearest existing parent) accepts a new file."""
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".compilewatch-doctor-"):
            return True
    except OSError:
        return False


def _cache_dirs() -> Check:
    tmp = Path(tempfile.gettempdir())
    dirs = {"temp dir (fresh Inductor cache per model)": tmp}
    for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        if os.environ.get(var):
            dirs[f"${var}"] = Path(os.environ[var])
    bad = [f"{what} {path}" for what, path in dirs.items() if not _writable(path)]
    if bad:
        return Check("cache dirs", "fail", "not writable: " + "; ".join(bad))
    return Check("cache dirs", "ok", "writable: " + "; ".join(f"{p}" for p in dirs.values()))


def _database(db_url: str | None) -> Check:
    from compilewatch.db import count_runs
    from compilewatch.db.engine import create, resolve_url, sqlite_file
    from compilewatch.db.migrate import known, state

    try:
        url = resolve_url(db_url)
        path = sqlite_file(url)
        if path is not None and not path.is_file():
            where = "writable" if _writable(path.parent) else "NOT writable"
            return Check("database", "ok" if where == "writable" else "fail",
                         f"no database yet at {path}; the first run creates it (folder "
                         f"{where})")
        with create(url) as db:
            st = state(db)
            runs = f", {count_runs(db)} runs" if st.is_current else ""
            if st.is_current:
                return Check("database", "ok", f"{db.url}: {st.describe()}{runs}")
            if st.current is not None and not known(st.current):
                return Check("database", "fail", f"{db.url}: schema {st.current} is newer than "
                                                 "this compilewatch knows; upgrade compilewatch")
            fix = ("migrated on first use" if path is not None
                   else "run `compilewatch db upgrade --db URL`")
            return Check("database", "warn" if path is not None else "fail",
                         f"{db.url}: {st.describe()}; {fix}")
    except CompilewatchError as e:
        return Check("database", "fail", str(e))


def _github(token_env: str, repo: str | None, github_url: str | None) -> Check:
    token = os.environ.get(token_env, "").strip()
    if not token:
        return Check("GitHub", "info", f"no token in ${token_env}: `post` and `--warm-cache "
                                       "release` need one; run, compare, pr and trends do not")
    try:
        gh = connect(Credentials(token=token), repo=repo or "", base_url=github_url,
                     policy=QUICK)
        with github_errors("check the token"):
            try:
                who = f"token of {gh.get_user().login}"
            except GithubException as e:
                if e.status != 403:
                    raise
                who = "an installation token (GitHub App or Actions: no scopes to list)"
            scopes = gh.oauth_scopes
        reach = ""
        if repo:
            split_repo(repo)
            with github_errors(f"open {repo}"):
                gh.get_repo(repo).full_name  # noqa: B018  (the request is the check)
            reach = f"; {repo} reachable"
    except CompilewatchError as e:
        return Check("GitHub", "warn", str(e).replace("cannot check the token: ", "token "))
    if scopes is None:
        return Check("GitHub", "ok", f"{who}{reach}")
    listed = ", ".join(scopes) or "none"
    if not set(scopes) & set(POST_SCOPES):
        return Check("GitHub", "warn", f"{who}, scopes: {listed}{reach}; `post` needs repo or "
                                       "public_repo")
    return Check("GitHub", "ok", f"{who}, scopes: {listed}{reach}")


def doctor(*, db_url: str | None = None, token_env: str = "GITHUB_TOKEN",
           repo: str | None = None, github_url: str | None = None,
           python: str = sys.executable, environment: Probe = collect_environment,
           which: Which = shutil.which, tlparse: Find = find_tlparse,
           redis: Version = redis_version) -> DoctorReport:
    """Every check, in the order they are shown."""
    env_checks, _ = _environment(python, environment)
    return DoctorReport([_python(), *env_checks, _compiler(which), _tlparse(tlparse),
                         _shared_cache(redis, os.environ.get(READER_ENV)), _cache_dirs(),
                         _database(db_url), _github(token_env, repo, github_url)])


def render_report(report: DoctorReport, columns: int | None = None) -> str:
    """One line a check; with ``columns`` (a terminal's width) each detail wraps under itself
    to fit it."""
    import textwrap

    width = max(len(c.name) for c in report.checks)
    lines = ["compilewatch doctor: what works on this machine"]
    for c in report.checks:
        lead = f"  {c.status:<4}  {c.name:<{width}}  "
        if columns is None or len(lead) + len(c.detail) <= columns:
            lines.append(lead + c.detail)
            continue
        room = max(20, columns - len(lead))
        wrapped = textwrap.wrap(c.detail, room, break_on_hyphens=False) or [""]
        lines.append(lead + wrapped[0])
        lines += [" " * len(lead) + w for w in wrapped[1:]]
    verdict = "can run" if report.can_run else "CANNOT run (see the fail lines)"
    lines.append(f"main job (compilewatch run --device cpu): {verdict}")
    return "\n".join(lines)
