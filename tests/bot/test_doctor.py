"""``compilewatch doctor``: one screen of what will and will not work on this machine, exit 0
when the main job (``compilewatch run`` on CPU) can run. The environment probe and the compiler
lookup are injected; GitHub is the fake, spoken to by the real client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.commands.doctor import doctor
from compilewatch.core.errors import UsageError
from compilewatch.db import connect, ingest
from tests.factories import environment, run_results
from tests.fakegithub import REPO, TOKEN, FakeGitHub

CPU = environment(torch="2.13.0+cpu")
GPU = environment(torch="2.11.0+cu128", cuda="12.8", gpu="NVIDIA H200", gpu_count=1,
                  triton="3.5.0")


def _run(tmp_path: Path, env=CPU, which=lambda name: f"/usr/bin/{name}", **kw):  # type: ignore[no-untyped-def]
    def probe(python: str):  # type: ignore[no-untyped-def]
        if isinstance(env, Exception):
            raise env
        return env

    kw.setdefault("db_url", f"sqlite:///{tmp_path / 'cw.db'}")
    kw.setdefault("token_env", "CW_DOCTOR_TEST_TOKEN")
    return doctor(environment=probe, which=which, **kw)


def _line(report, name: str):  # type: ignore[no-untyped-def]
    return next(c for c in report.checks if c.name == name)


def test_a_cpu_machine_can_run_the_main_job(tmp_path: Path) -> None:
    report = _run(tmp_path)
    assert report.can_run
    assert _line(report, "torch").status == "ok" and "2.13.0+cpu" in _line(report, "torch").detail
    gpu = _line(report, "GPU")
    assert gpu.status == "warn" and "--device cuda" in gpu.detail
    assert _line(report, "C++ compiler").status == "ok"
    assert _line(report, "cache dirs").status == "ok"
    db = _line(report, "database")
    assert db.status == "ok" and "no database yet" in db.detail
    assert not (tmp_path / "cw.db").exists()  # doctor never creates one
    assert _line(report, "GitHub").status == "info" and "no token" in _line(report,
                                                                            "GitHub").detail


def test_a_gpu_machine_shows_its_gpu(tmp_path: Path) -> None:
    report = _run(tmp_path, env=GPU)
    assert _line(report, "GPU").status == "ok" and "NVIDIA H200" in _line(report, "GPU").detail
    assert "3.5.0" in _line(report, "triton").detail


def test_no_compiler_or_no_torch_cannot_run(tmp_path: Path) -> None:
    report = _run(tmp_path, which=lambda name: None)
    assert not report.can_run and _line(report, "C++ compiler").status == "fail"
    report = _run(tmp_path, env=UsageError("No module named 'torch'"))
    assert not report.can_run and "No module named 'torch'" in _line(report, "torch").detail


def test_database_states(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cw.db'}"
    with connect(url) as db:
        ingest(db, run_results())
        ingest(db, run_results())
    report = _run(tmp_path, db_url=url)
    assert _line(report, "database").status == "ok"
    assert "(head)" in _line(report, "database").detail and "2 runs" in _line(report,
                                                                            "database").detail
    with connect(url) as db, db.write() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = 'ffff'")
    report = _run(tmp_path, db_url=url)
    assert _line(report, "database").status == "fail" and not report.can_run
    assert "newer" in _line(report, "database").detail


def test_github_token_kinds(tmp_path: Path, fake_github: FakeGitHub,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    fake_github.add_token("ghp_classic", "alice", scopes="repo, workflow")
    fake_github.add_token("ghp_narrow", "bob", scopes="read:org")
    cases = {"ghp_classic": ("ok", ["alice", "repo, workflow"]),
             "ghp_narrow": ("warn", ["bob", "read:org", "repo or public_repo"]),
             TOKEN: ("ok", ["installation token"]),
             "ghp_wrong": ("warn", ["refused (401)"])}
    for token, (status, words) in cases.items():
        monkeypatch.setenv("CW_DOCTOR_TEST_TOKEN", token)
        report = _run(tmp_path, github_url=fake_github.base_url, repo=REPO)
        line = _line(report, "GitHub")
        assert line.status == status, line
        assert all(w in line.detail for w in words), line.detail
        assert report.can_run  # GitHub is not needed for the main job
    assert fake_github.calls("GET", r"/user$") and fake_github.calls("GET", rf"/repos/{REPO}$")


def test_doctor_command_prints_one_screen_and_exits_by_the_main_job(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["doctor", "--db", f"sqlite:///{tmp_path / 'cw.db'}",
                                    "--token-env", "CW_DOCTOR_TEST_TOKEN"])
    assert res.exit_code == 0, res.output
    for name in ("python", "torch", "GPU", "C++ compiler", "cache dirs", "database", "GitHub"):
        assert name in res.output
    assert "main job (compilewatch run --device cpu): can run" in res.output
    assert not (tmp_path / "cw.db").exists()


@pytest.mark.parametrize("columns", ["80", "60"])
def test_doctor_fits_the_terminal_and_loses_no_word(tmp_path: Path, columns: str) -> None:
    args = ["doctor", "--db", f"sqlite:///{tmp_path / 'cw.db'}", "--token-env",
            "CW_DOCTOR_TEST_TOKEN"]
    narrow = CliRunner().invoke(main, args, env={"COLUMNS": columns})
    wide = CliRunner().invoke(main, args, env={"COLUMNS": "400"})
    assert narrow.exit_code == wide.exit_code == 0, narrow.output
    assert max(len(line) for line in narrow.output.splitlines()) <= int(columns)
    assert max(len(line) for line in wide.output.splitlines()) > int(columns)
    assert "".join(narrow.output.split()) == "".join(wide.output.split())  # only wrapped


def test_doctor_json_is_one_object_with_every_check(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["doctor", "--json", "--db", f"sqlite:///{tmp_path / 'cw.db'}",
                                    "--token-env", "CW_DOCTOR_TEST_TOKEN"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert (data["kind"], data["version"], data["can_run"]) == ("doctor", 1, True)
    names = [c["name"] for c in data["checks"]]
    for name in ("python", "torch", "GPU", "C++ compiler", "cache dirs", "database", "GitHub"):
        assert name in names
    assert all(set(c) == {"name", "status", "detail"} for c in data["checks"])
    assert {c["status"] for c in data["checks"]} <= {"ok", "info", "warn", "fail"}
    assert not (tmp_path / "cw.db").exists()


def test_doctor_json_of_a_machine_that_cannot_run_exits_2_after_the_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXX", "surely-no-such-compiler")
    monkeypatch.setenv("PATH", "/nonexistent")
    res = CliRunner().invoke(main, ["doctor", "--json", "--db", f"sqlite:///{tmp_path / 'cw.db'}",
                                    "--token-env", "CW_DOCTOR_TEST_TOKEN"])
    assert res.exit_code == 2, res.output
    data = json.loads(res.stdout)
    assert data["can_run"] is False
    assert next(c for c in data["checks"] if c["name"] == "C++ compiler")["status"] == "fail"


def test_doctor_says_when_the_shared_cache_cannot_work(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The redis package is an extra: without it --remote-cache is off, and doctor says how to
    install it; a URL in the environment is checked and read once."""
    missing = _line(_run(tmp_path, redis=lambda: None), "shared cache")
    assert missing.status == "warn" and "pip install 'compilewatch[redis]'" in missing.detail
    assert _run(tmp_path, redis=lambda: None).can_run  # not the main job's
    monkeypatch.setenv("COMPILEWATCH_REMOTE_CACHE", "redis://pr:hunter2@127.0.0.1/x")
    bad = _line(_run(tmp_path, redis=lambda: "8.2.0"), "shared cache")
    assert bad.status == "warn" and "database 'x'" in bad.detail and "hunter2" not in bad.detail
    from tests.redisserver import redis_server

    with redis_server(tmp_path / "redis") as server:
        monkeypatch.setenv("COMPILEWATCH_REMOTE_CACHE", f"redis://127.0.0.1:{server.port}/2")
        good = _line(_run(tmp_path, redis=lambda: "8.2.0"), "shared cache")
    assert good.status == "ok" and f"127.0.0.1:{server.port}/2" in good.detail
    refused = _line(_run(tmp_path, redis=lambda: "8.2.0"), "shared cache")  # stopped now
    assert refused.status == "warn" and "ConnectionError" in refused.detail
