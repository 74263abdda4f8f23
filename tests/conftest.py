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
