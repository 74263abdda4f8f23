"""What a measuring command lets go of before repository code runs, and the databases it
refuses (``bot/measure/credentials.py``). The exec itself is seen by
tests/bot/test_credential_reach.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.measure.credentials import check_database, credentials
from compilewatch.core.errors import UsageError

HOST = {"PATH": "/bin", "HOME": "/root", "GITHUB_TOKEN": "ghp_x", "HF_TOKEN": "hf_x",
        "AWS_SECRET_ACCESS_KEY": "k", "AWS_REGION": "us-east-1", "SSH_AUTH_SOCK": "/s",
        "COMPILEWATCH_SIGNING_KEY": "pem", "ACTIONS_RUNTIME_TOKEN": "t",
        "ACTIONS_ID_TOKEN_REQUEST_URL": "https://x", "GITHUB_STEP_SUMMARY": "/tmp/s",
        "GITHUB_API_URL": "https://api.github.com", "RUNNER_TEMP": "/tmp/r",
        "PGHOST": "db", "PGUSER": "ci", "PGPASSWORD": "pw", "REDIS_URL": "redis://:pw@r",
        "TORCH_LOGS": "+dynamo", "COMPILEWATCH_DB": "postgresql://ci@db/cw"}


def test_every_credential_goes_and_plain_settings_stay() -> None:
    assert credentials(HOST) == [
        "ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_RUNTIME_TOKEN", "AWS_REGION",
        "AWS_SECRET_ACCESS_KEY", "COMPILEWATCH_SIGNING_KEY", "GITHUB_TOKEN", "HF_TOKEN",
        "PGPASSWORD", "REDIS_URL", "SSH_AUTH_SOCK"]
    # a database URL with a password is a credential; the database's own is kept on request
    with_pw = {**HOST, "COMPILEWATCH_DB": "postgresql://ci:pw@db/cw"}
    assert "COMPILEWATCH_DB" in credentials(with_pw)
    kept = credentials(with_pw, keep_database=True)
    assert "COMPILEWATCH_DB" not in kept and "PGPASSWORD" not in kept
    assert "GITHUB_TOKEN" in kept


def test_a_ca_bundle_is_no_credential_to_let_go_of() -> None:
    """Paths to public certificates are not named in the note (a newcomer read "let go of
    AWS_CA_BUNDLE" on every run); a name that says secret still is, and workers see neither."""
    from compilewatch.compiler.processes import allowed_env

    paths = {"AWS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt",
             "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE": "/etc/ssl/certs/ca-certificates.crt",
             "GOOGLE_SSL_CERT_FILE": "/etc/ssl/cert.pem",
             "AWS_CA_BUNDLE_SECRET_KEY": "not a path"}
    assert credentials({**HOST, **paths}) == sorted([*credentials(HOST),
                                                     "AWS_CA_BUNDLE_SECRET_KEY"])
    assert not set(paths) & set(allowed_env({**HOST, **paths}))


@pytest.mark.parametrize(("url", "env", "named"), [
    ("postgresql://ci:pw@db/cw", {}, "--db"),
    (None, {"COMPILEWATCH_DB": "postgresql://ci:pw@db/cw"}, "COMPILEWATCH_DB"),
    ("postgresql://ci@db/cw", {"PGPASSWORD": "pw"}, "PGPASSWORD"),
    ("postgresql+psycopg://ci@db/cw", {"PGPASSFILE": "/root/.pgpass"}, "PGPASSFILE"),
])
def test_pr_refuses_a_database_it_would_need_a_password_for(url: str | None,
                                                             env: dict[str, str],
                                                             named: str) -> None:
    with pytest.raises(UsageError, match=named) as e:
        check_database(url, False, env)
    assert "compilewatch ingest" in str(e.value)
    check_database(url, True, env)  # --no-db: nothing to refuse


@pytest.mark.parametrize("url", ["sqlite:///r.db", "postgresql://ci@db/cw", None])
def test_a_database_without_a_secret_is_fine(url: str | None) -> None:
    check_database(url, False, {"PGHOST": "db"})
    check_database("sqlite:///r.db", False, {"PGPASSWORD": "pw"})  # not libpq's to use


def test_the_pr_command_exits_2_naming_the_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPILEWATCH_DB", "postgresql://ci:hunter2@127.0.0.1/cw")
    result = CliRunner().invoke(main, ["pr", "--base", "main", "--head", "pr"])
    assert result.exit_code == 2, result.output
    assert "COMPILEWATCH_DB holds a password" in result.output
    assert "hunter2" not in result.output


SHARED = {"COMPILEWATCH_REMOTE_CACHE": "redis://pr:reader-pw@cache:6379/1",
          "COMPILEWATCH_REMOTE_CACHE_WRITER": "redis://trusted:writer-pw@cache:6379/1",
          "COMPILEWATCH_REMOTE_CACHE_KEY": "-----BEGIN PRIVATE KEY-----writer",
          "TORCHINDUCTOR_REDIS_URL": "redis://:torch-pw@cache", "TORCHINDUCTOR_REDIS_HOST": "cache"}


def test_the_shared_cache_s_writer_goes_unless_the_command_is_its_writer() -> None:
    """The writer's URL and key are let go of (a pr; a run that does not store); the reader's
    URL stays with the parent, which reads for the remote phase's workers."""
    names = credentials({**HOST, **SHARED})
    assert {"COMPILEWATCH_REMOTE_CACHE_WRITER", "COMPILEWATCH_REMOTE_CACHE_KEY",
            "TORCHINDUCTOR_REDIS_URL", "TORCHINDUCTOR_REDIS_HOST"} <= set(names)
    assert "COMPILEWATCH_REMOTE_CACHE" not in names
    kept = credentials({**HOST, **SHARED}, keep_remote_writer=True)
    assert "COMPILEWATCH_REMOTE_CACHE_WRITER" not in kept
    assert "COMPILEWATCH_REMOTE_CACHE_KEY" not in kept
    assert "TORCHINDUCTOR_REDIS_URL" in kept and "GITHUB_TOKEN" in kept


def test_no_worker_environment_holds_the_shared_cache_s_credentials(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither the writer's nor the reader's, nor torch's own Redis settings: a remote phase
    gets a socket to its parent, which reads the shared cache for it."""
    from compilewatch.compiler.processes import Redactor, allowed_env, worker_env

    for name, value in SHARED.items():
        monkeypatch.setenv(name, value)
    for env in (allowed_env(), worker_env(Path("/tmp/c"))):
        assert not [k for k in env if "REDIS" in k or k.startswith("COMPILEWATCH_REMOTE")]
        assert not [v for v in env.values() if "-pw" in v or "PRIVATE KEY" in v]
    # and what still reaches a worker's output is redacted
    assert "writer-pw" not in Redactor()("leaked redis://trusted:writer-pw@cache:6379/1")
