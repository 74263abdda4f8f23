"""The shared compile cache's parts, each against a real redis-server of the test's own (users,
a password, a database number, TLS): URLs, sealed entries, what each credential may do, what
a command's role lets it hold, the worker's reader and torch's own remote caches turned off.
No compile: tests/bot/test_shared_cache.py runs whole commands with real Inductor compiles."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.measure.remote import KEY_ENV, WRITER_ENV, RemoteCacheOptions, setup
from compilewatch.compiler import remoteentries, remotestore, remoteurl
from compilewatch.compiler.protocol import RemoteRead
from compilewatch.compiler.remotecache import Reader, Tally
from compilewatch.core import signing
from compilewatch.core.errors import RemoteCacheError, UsageError
from tests.redisserver import certificates, redis_server

pytest.importorskip("redis")
PREFIX = f"cwt-{uuid.uuid4().hex[:8]}"
KEY = "pt2:fx-graph-v1::fabc123:c1"  # a key as torch names it
ONLY = "resetchannels -@all +select"  # +select: the URLs name database 3
USERS = (
    "user default off",
    f"user trusted on >trusted-pw resetkeys ~{PREFIX}:trusted:* {ONLY} +get +set",
    f"user pr on >pr-pw resetkeys ~{PREFIX}:trusted:* {ONLY} +get",
    f"user lax on >lax-pw resetkeys ~{PREFIX}:* {ONLY} +get +set",
)


def url(port: int, user: str | None = None, db: int = 3) -> str:
    who = f"{user}:{user}-pw@" if user else ""
    return f"redis://{who}127.0.0.1:{port}/{db}?prefix={PREFIX}"


@pytest.fixture(scope="module")
def acl(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with redis_server(tmp_path_factory.mktemp("redis-acl"), users=USERS) as server:
        yield server.port


# --- URLs ---------------------------------------------------------------------------------

def test_a_url_says_who_where_which_database_and_tls(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    e = remoteurl.parse(f"rediss://pr:p%40ss@cache.internal:6380/4?prefix=team-a&"
                        f"ssl_ca_certs={ca}")
    assert (e.host, e.port, e.db, e.username, e.password, e.tls, e.ca_certs, e.prefix) == \
        ("cache.internal", 6380, 4, "pr", "p@ss", True, str(ca), "team-a")
    assert e.namespace == "team-a:trusted:"
    assert "p@ss" not in e.shown() and ":***@" in e.shown()
    plain = remoteurl.parse("redis://10.0.0.5")
    assert (plain.port, plain.db, plain.has_credential, plain.prefix) == \
        (6379, 0, False, "compilewatch")
    assert remoteurl.parse("redis://:only-a-password@h").password == "only-a-password"


@pytest.mark.parametrize(("bad", "says"), [
    ("http://host", "scheme 'http' is neither redis nor rediss"),
    ("host:6379", "scheme"),
    ("redis://", "no host"),
    ("redis://ho st", "no host"),
    ("redis://host:99999", "port"),
    ("redis://host:abc", "port"),
    ("redis://host/zero", "database 'zero' is not a number"),
    ("redis://host/?db=1", "unknown parameter 'db'"),
    ("redis://host/?prefix=a&prefix=b", "parameter 'prefix' given twice"),
    ("redis://host/?prefix=a:b", "prefix 'a:b'"),
    ("redis://host/?ssl_ca_certs=/etc/hostname", "ssl_ca_certs is for rediss://"),
    ("rediss://host/?ssl_ca_certs=/no/such/ca.pem", "is not a file"),
    ("redis://host/#frag", "fragment"),
])
def test_a_bad_url_is_refused_naming_the_part(bad: str, says: str) -> None:
    with pytest.raises(UsageError, match="remote cache URL") as e:
        remoteurl.parse(bad)
    assert says in str(e.value)


@pytest.mark.parametrize(("bad", "shown"), [
    ("redis://pr:s3cret-value@host:99999", "redis://pr:***@host:99999"),
    ("redis://pr:s3cret/value@host", "redis://pr:***@host"),  # '/' unescaped: still hidden
    ("redis://s3cret-value@host:0", "redis://***@host:0"),  # a password given as a user
])
def test_a_refused_url_never_shows_its_password(bad: str, shown: str) -> None:
    with pytest.raises(UsageError) as e:
        remoteurl.parse(bad)
    assert "s3cret" not in str(e.value) and shown in str(e.value)


@pytest.mark.parametrize(("args", "env", "says"), [
    (["--remote-cache", "http://127.0.0.1"], {}, "scheme 'http'"),
    (["--remote-cache", "redis://127.0.0.1:0"], {}, "port 0 is not from 1 to 65535"),
    (["--remote-cache", "redis://pr:hunter2@127.0.0.1"], {},
     "a password on the command line is readable by every process"),
    ([], {"COMPILEWATCH_REMOTE_CACHE": "redis://127.0.0.1/x"}, "database 'x'"),
])
@pytest.mark.parametrize("command", ["run", "pr", "nightly"])
def test_the_commands_exit_2_on_a_bad_remote_cache(command: str, args: list[str],
                                                   env: dict[str, str], says: str,
                                                   tmp_path: Path) -> None:
    result = CliRunner().invoke(main, [command, *args, "--out", str(tmp_path / "o")], env=env)
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output
    assert "hunter2" not in result.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", ["run", "pr", "nightly"])
def test_without_the_redis_package_a_command_says_so_and_measures_without_it(
        command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The redis package is an extra: its absence is said before anything is measured, and
    the shared cache is then not used (no server is asked: this one does not exist)."""
    from compilewatch.compiler import remoteurl

    monkeypatch.setattr(remoteurl, "available", lambda: False)
    result = CliRunner().invoke(main, [command, "--remote-cache", "redis://127.0.0.1:1",
                                       "--suite", str(tmp_path / "missing.py"),
                                       "--out", str(tmp_path / "o")], env={})
    assert "the redis package is not installed (pip install 'compilewatch[redis]')" \
        in result.output, result.output
    assert "measuring without the shared compile cache" in result.output
    assert "ConnectionError" not in result.output and "Traceback" not in result.output


def test_storing_needs_a_shared_cache_to_store_in(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--remote-cache-write", "--out",
                                       str(tmp_path / "r.json")], env={})
    assert result.exit_code == 2 and "--remote-cache URL" in result.output


# --- sealed entries --------------------------------------------------------------------------

def test_an_entry_loads_only_as_its_trusted_writer_sealed_it() -> None:
    pem, public = signing.generate()
    other_pem, other = signing.generate()
    key, where = signing.load_private_key(pem), f"{PREFIX}:trusted:{KEY}"
    blob = remoteentries.seal(where, b'{"data": "AAAA"}', key)
    assert remoteentries.unseal(where, blob, [public]) == b'{"data": "AAAA"}'
    refusals = {
        "unsigned (torch's own form)": (where, b'{"data": "AAAA"}', [public]),
        "signed by another key": (where, remoteentries.seal(
            where, b"x", signing.load_private_key(other_pem)), [public]),
        "altered after sealing": (where, blob[:-1] + b"B", [public]),
        "moved to another key": (f"{PREFIX}:trusted:pt2:fx-graph-v1::fother:c1", blob,
                                 [public]),
        "truncated": (where, blob[:40], [public]),
        "no key pinned": (where, blob, []),
    }
    for what, (at, stored, pinned) in refusals.items():
        with pytest.raises(remoteentries.EntryRefused):
            remoteentries.unseal(at, stored, pinned)
        assert what  # each case is refused
    with pytest.raises(remoteentries.EntryRefused, match="not a pinned cache public key"):
        remoteentries.unseal(where, blob, [other])


# --- credentials, on a Redis with users -------------------------------------------------------

def test_each_credential_may_do_what_redis_grants(acl: int) -> None:
    access = remotestore.access
    assert access(remoteurl.parse(url(acl, "trusted"))) == remotestore.Access(True, True)
    assert access(remoteurl.parse(url(acl, "pr"))) == remotestore.Access(True, False)
    assert access(remoteurl.parse(url(acl, "lax"))) == remotestore.Access(True, True)
    for bad, says in ((url(acl), "NOAUTH|Authentication"),
                      (url(acl, "pr").replace("pr-pw", "wrong"), "WRONGPASS|invalid"),
                      (f"redis://127.0.0.1:{acl + 1 if acl < 65535 else acl - 1}", "Connection")):
        with pytest.raises(RemoteCacheError, match=says) as e:
            access(remoteurl.parse(bad))
        assert "pr-pw" not in str(e.value)


def test_pr_refuses_a_credential_that_may_write_what_trusted_runs_read(acl: int) -> None:
    _, public = signing.generate()
    for writer in ("lax", "trusted"):
        with pytest.raises(RemoteCacheError, match="may write") as e:
            setup(RemoteCacheOptions(url(acl, writer)), trusted_keys=[public],
                  runs_pr_code=True)
        assert "ACL SETUSER" in str(e.value) and f"{writer}-pw" not in str(e.value)
    shared = setup(RemoteCacheOptions(url(acl, "pr")), trusted_keys=[public], runs_pr_code=True)
    assert shared is not None and shared.writer is None and shared.role == "read"
    assert shared.read.trusted_keys == (public,)


def test_a_reader_that_may_write_is_said_where_no_pr_code_runs(
        acl: int, caplog: pytest.LogCaptureFixture) -> None:
    _, public = signing.generate()
    with caplog.at_level(logging.WARNING):
        shared = setup(RemoteCacheOptions(url(acl, "lax")), trusted_keys=[public],
                       runs_pr_code=False)
    assert shared is not None and shared.writer is None
    assert "this reader may write" in caplog.text and "lax-pw" not in caplog.text


def test_a_trusted_writer_needs_its_key_and_a_credential_that_writes(acl: int) -> None:
    pem, public = signing.generate()
    env = {KEY_ENV: pem.decode(), WRITER_ENV: url(acl, "trusted")}
    shared = setup(RemoteCacheOptions(url(acl, "pr"), write=True), trusted_keys=[],
                   runs_pr_code=False, environ=env)
    assert shared is not None and shared.writer is not None and shared.role == "write"
    assert shared.writer.endpoint.username == "trusted"
    assert shared.read.trusted_keys == (public,)  # its own key: what it stores it may load
    assert "trusted-pw" not in shared.read.model_dump_json()  # workers get the reader's only
    with pytest.raises(UsageError, match=KEY_ENV):
        setup(RemoteCacheOptions(url(acl, "pr"), write=True), trusted_keys=[],
              runs_pr_code=False, environ={WRITER_ENV: url(acl, "trusted")})
    with pytest.raises(RemoteCacheError, match="the writer's credential may not write"):
        setup(RemoteCacheOptions(url(acl, "pr"), write=True), trusted_keys=[],
              runs_pr_code=False, environ={KEY_ENV: pem.decode()})
    with pytest.raises(UsageError, match="no cache public key is pinned"):
        setup(RemoteCacheOptions(url(acl, "pr")), trusted_keys=[], runs_pr_code=False)


def test_the_commands_check_their_role_before_anything_runs(acl: int, tmp_path: Path) -> None:
    """A nightly (a trusted writer) without its key, and a pr given a credential that may
    write: exit 2, named, before a suite is listed or a worktree made."""
    from tests.userrepo import git

    out = tmp_path / "out"
    nightly = CliRunner().invoke(main, ["nightly", "--out", str(out)],
                                 env={"COMPILEWATCH_REMOTE_CACHE": url(acl, "pr")})
    assert nightly.exit_code == 2 and KEY_ENV in nightly.output, nightly.output
    bad = CliRunner().invoke(main, ["nightly", "--out", str(out)], env={
        "COMPILEWATCH_REMOTE_CACHE": url(acl, "pr"), KEY_ENV: "not a key",
        WRITER_ENV: "redis://trusted:trusted-pw@127.0.0.1:0"})
    assert bad.exit_code == 2 and "not an unencrypted PEM private key" in bad.output
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-q", "--allow-empty",
        "-m", "base")
    git(repo, "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-q", "--allow-empty",
        "-m", "head")
    _, public = signing.generate()
    pr = CliRunner().invoke(main, ["pr", "--repo", str(repo), "--base", "HEAD~1", "--head",
                                   "HEAD", "--cache-public-key", public, "--out", str(out)],
                            env={"COMPILEWATCH_REMOTE_CACHE": url(acl, "lax")})
    assert pr.exit_code == 2, pr.output
    assert "may write" in pr.output and "lax-pw" not in pr.output
    assert not out.exists()


def test_the_reader_loads_what_the_writer_stored_and_refuses_the_rest(acl: int,
                                                                      tmp_path: Path) -> None:
    """The worker's backend against what the parent stored, in database 3 (the same name in
    database 0 is another entry), as torch calls it: ``get(torch's key)``, through the
    measuring parent's proxy."""
    import redis

    pem, public = signing.generate()
    writer = remotestore.Writer(remoteurl.parse(url(acl, "trusted")),
                                signing.load_private_key(pem))
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    (outbox / "a.entry").write_bytes(KEY.encode() + b"\n" + b'{"data": "UE9JU09O"}')
    (outbox / "b.entry").write_bytes(b"not a torch key\nxx")  # skipped
    assert remotestore.store(outbox, writer) == 1
    tally = Tally(reading=True)
    shared = setup(RemoteCacheOptions(url(acl, "pr")), trusted_keys=[public], runs_pr_code=True)
    assert shared is not None and shared.proxy is not None
    reader = Reader(shared.read, tally)
    assert reader.get(KEY) == b'{"data": "UE9JU09O"}'
    assert reader.get("pt2:fx-graph-v1::fmissing:c1") is None
    other = setup(RemoteCacheOptions(url(acl, "pr", db=0)), trusted_keys=[public],
                  runs_pr_code=True)
    assert other is not None and Reader(other.read, tally).get(KEY) is None
    # what a PR with a credential that writes would leave: torch's own (unsigned) form
    lax = redis.Redis(host="127.0.0.1", port=acl, db=3, username="lax", password="lax-pw")
    lax.set(f"{PREFIX}:trusted:{KEY}", b'{"data": "UE9JU09O"}')
    assert reader.get(KEY) is None
    reader.put(KEY, b"anything")  # a reader writes nothing
    assert lax.get(f"{PREFIX}:trusted:{KEY}") == b'{"data": "UE9JU09O"}'
    assert (tally.hits, tally.misses, tally.refused) == (1, 2, 1)
    assert any("not a signed entry" in n for n in tally.notes)
    for s in (shared, other):
        assert s.proxy is not None
        s.proxy.close()


def test_a_worker_holds_no_credential_and_the_parent_only_reads(acl: int) -> None:
    """What a remote phase's worker is given names a socket, never the server or its
    password; the parent answers only keys of torch's form, and only by reading."""
    import redis

    from compilewatch.compiler import remoteproxy

    _, public = signing.generate()
    shared = setup(RemoteCacheOptions(url(acl, "pr")), trusted_keys=[public], runs_pr_code=True)
    assert shared is not None and shared.proxy is not None
    spec = shared.read.model_dump_json()
    assert "pr-pw" not in spec and "redis://" not in spec and str(acl) not in spec
    assert (Path(shared.read.socket).parent.stat().st_mode & 0o777) == 0o700
    trusted = redis.Redis(host="127.0.0.1", port=acl, db=3, username="trusted",
                          password="trusted-pw")
    sentinel = f"{PREFIX}:trusted:pt2:fx-graph-v1::fsentinel:c1"
    trusted.set(sentinel, b"as stored")
    for request in ("../etc/passwd", "pt2:fx::x:c1\nSET a b", "*", "x" * 400,
                    "pt2:fx-graph-v1::fsentinel:c1\nDEL " + sentinel):
        assert remoteproxy.ask(shared.read.socket, request) in (None, b"as stored")
    assert trusted.get(sentinel) == b"as stored"
    assert trusted.get(f"{PREFIX}:trusted:a") is None
    shared.proxy.close()
    # the parent gone: the worker compiles without the shared cache, saying why
    tally = Tally(reading=True)
    assert Reader(shared.read, tally).get(KEY) is None
    assert tally.errors == 1 and "could not be asked" in tally.notes[0]


def test_a_server_gone_is_said_to_the_worker(tmp_path: Path) -> None:
    from compilewatch.compiler import remoteproxy

    with redis_server(tmp_path / "gone") as server:
        proxy = remoteproxy.Proxy(remoteurl.parse(f"redis://127.0.0.1:{server.port}/1"))
    try:
        with pytest.raises(remoteproxy.ProxyDown, match="ConnectionError"):
            remoteproxy.ask(proxy.path, KEY)
    finally:
        proxy.close()


# --- TLS ----------------------------------------------------------------------------------------

def test_rediss_with_the_servers_ca_and_only_with_it(tmp_path: Path) -> None:
    with redis_server(tmp_path / "tls", tls=True) as server:
        assert server.ca is not None
        good = remoteurl.parse(f"rediss://127.0.0.1:{server.port}/1?prefix={PREFIX}"
                               f"&ssl_ca_certs={server.ca}")
        assert remotestore.access(good) == remotestore.Access(True, True)
        other, _, _ = certificates(tmp_path / "other-ca")
        for bad in (f"rediss://127.0.0.1:{server.port}/1?ssl_ca_certs={other}",
                    f"rediss://127.0.0.1:{server.port}/1"):
            with pytest.raises(RemoteCacheError, match=r"CERTIFICATE_VERIFY_FAILED"):
                remotestore.access(remoteurl.parse(bad))
        with pytest.raises(RemoteCacheError):  # plain text to a TLS port
            remotestore.access(remoteurl.parse(f"redis://127.0.0.1:{server.port}/1"))


# --- torch's own remote caches --------------------------------------------------------------------

PREPARE = """
import json, sys
from compilewatch.compiler import remotecache
from compilewatch.compiler.protocol import WorkerSpec
import torch._inductor.config as ic, torch._functorch.config as fc
from torch._inductor import remote_cache
before = [ic.fx_graph_remote_cache, fc.enable_remote_autograd_cache]
spec = WorkerSpec.model_validate_json(sys.argv[1])
print(json.dumps({"before": before, "why": remotecache.prepare(spec),
                  "fx": ic.fx_graph_remote_cache, "aot": fc.enable_remote_autograd_cache,
                  "autotune": ic.autotune_remote_cache,
                  "backend": getattr(remote_cache.RemoteFxGraphCache.backend_override_cls,
                                     "__name__", None)}))
"""


@pytest.mark.parametrize(("phase", "fx"), [("cold", False), ("warm", False), ("remote", True)])
def test_torch_s_own_remote_caches_are_off_and_ours_only_where_asked(phase: str,
                                                                     fx: bool) -> None:
    """The environment may turn torch's remote caches on (TORCHINDUCTOR_* reaches workers):
    torch's own Redis backend would load what it finds, unverified."""
    from compilewatch.compiler.processes import worker_env
    from compilewatch.compiler.protocol import WorkerSpec
    from compilewatch.core.schema import Config

    spec = WorkerSpec(suite="micro", model="m", config=Config(), phase=phase, large=False,
                      rounds=1, block_ms=1.0, out="", status_file="",
                      remote_read=RemoteRead(socket="/nonexistent", namespace="p:trusted:")
                      if phase == "remote" else None)
    env = {**worker_env(Path("/nonexistent")), "TORCHINDUCTOR_FX_GRAPH_REMOTE_CACHE": "1",
           "TORCHINDUCTOR_AUTOGRAD_REMOTE_CACHE": "1", "TORCHINDUCTOR_AUTOTUNE_REMOTE_CACHE": "1"}
    out = subprocess.run([sys.executable, "-c", PREPARE, spec.model_dump_json()], env=env,
                         capture_output=True, text=True, timeout=300, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["before"] == [True, True]  # the environment did turn them on
    assert got["why"] is None
    assert (got["fx"], got["aot"], got["autotune"]) == (fx, False, False)
    assert (got["backend"] is not None) == fx
