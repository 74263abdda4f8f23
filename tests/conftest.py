"""Shared fixtures. Compiles are expensive on CPU (~10 s cold), so tests that do not test
coldness share one Inductor cache root for the whole session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inductor-shared")


@pytest.fixture(scope="session")
def harness_suite() -> str:
    return str(DATA / "suites" / "harness_suite.py")


@pytest.fixture(scope="session", autouse=True)
def _no_host_credentials() -> Iterator[None]:
    """The host's own credentials (a token, a cloud key, an ssh agent) are not the tests':
    without them a measuring command has nothing to let go of unless a test gives it one. Nor
    is the terminal size a parallel test process is given (``COLUMNS=80``): a test sets the
    width it means."""
    from compilewatch.bot.measure.credentials import credentials

    saved = {name: os.environ.pop(name) for name in [*credentials(), "COLUMNS", "LINES"]
             if name in os.environ}
    yield
    os.environ.update(saved)


@pytest.fixture(autouse=True)
def _no_home_database(tmp_path_factory: pytest.TempPathFactory,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that forgets to choose a database must not write into the user's own one."""
    db = tmp_path_factory.getbasetemp() / "default-compilewatch.db"
    monkeypatch.setenv("COMPILEWATCH_DB", f"sqlite:///{db}")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.getbasetemp() / "xdg"))


@pytest.fixture(scope="session")
def signing_pair() -> tuple[bytes, str]:
    """A publisher's key pair: the private key (PEM) and the public key a consumer pins."""
    from compilewatch.core import signing

    return signing.generate()


@pytest.fixture(autouse=True)
def _in_a_temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs in its own empty directory: a command's default output (results.json,
    compilewatch-out/) lands there, and no test depends on what the checkout holds (after the
    quickstart, compilewatch-out/ made pr's not-a-repository test fail on the output folder)."""
    monkeypatch.chdir(tmp_path)


KERNEL_MODELS = ("base", "heavier", "added", "fenced", "broken")


@pytest.fixture(scope="session")
def kernel_profiles(tmp_path_factory: pytest.TempPathFactory,
                    worker_id: str) -> dict[str, object]:
    """A real profile process (``compiler/kernels.py``) of each model of
    ``tests/data/suites/kernels_suite.py`` on Inductor's C++ kernels, and a second one of
    ``base`` on a copy of the first's cache (an A/A pair): name -> WorkerOutput, and
    ``"<name>.trace"`` -> its chrome trace. One intra-op thread (``OMP_NUM_THREADS=1``): the
    2-core test machine's other processes otherwise stall OpenMP's kernels by milliseconds.
    Made once per test run, whichever test process asks first (three minutes of compiles on
    the 2-core machine); the others wait for it and read it."""
    import json

    from filelock import FileLock

    from compilewatch.compiler.protocol import WorkerOutput

    base = tmp_path_factory.getbasetemp()
    root = (base if worker_id == "master" else base.parent) / "kernel-profiles"
    with FileLock(f"{root}.lock"):
        made = root / "outputs.json"
        if not made.is_file():
            outputs = _profile_kernels(root)
            made.write_text(json.dumps({k: v.model_dump_json() for k, v in outputs.items()}))
        saved = json.loads(made.read_text())
    out: dict[str, object] = {k: WorkerOutput.model_validate_json(v) for k, v in saved.items()}
    for name in (*KERNEL_MODELS, "again"):
        out[f"{name}.trace"] = root / f"{name}.json"
    out["again.cache"] = root / "cache-again"
    return out


def _profile_kernels(root: Path) -> dict[str, object]:
    import shutil

    from compilewatch.compiler.plan import plan_jobs
    from compilewatch.suites.loader import load_suite
    from tests.one_job import profile_job

    root.mkdir(parents=True, exist_ok=True)
    suite = load_suite(str(DATA / "suites" / "kernels_suite.py"))
    env = {"OMP_NUM_THREADS": "1"}
    out: dict[str, object] = {}
    for job in plan_jobs([suite], device="cpu", models=KERNEL_MODELS):
        name = job.spec.name
        out[name] = profile_job(job, root / f"cache-{name}", root / f"{name}.json",
                                extra_env=env)
        if name == "base":
            shutil.copytree(root / "cache-base", root / "cache-again")
            out["again"] = profile_job(job, root / "cache-again", root / "again.json",
                                       extra_env=env)
    return out
