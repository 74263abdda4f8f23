"""The shared compile cache across runners, as the commands run it: real ``compilewatch``
processes, a real redis-server (database 3, a writer with a password) and real Inductor
compiles on CPU (two per run: the cold compile and the remote phase).

In order, each stage a fixture of the next: a trusted shard stores its graphs; a second shard,
on another (empty) cache dir, loads them; a PR whose suite finds the Redis in the processes
above it overwrites every entry with a pickle of its own, signed with a key of its own; a
trusted run loads none of it, compiles, and the pickle never runs. The Redis here takes
anyone's writes, as one without users does: what stops the PR is the signature.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compilewatch.core import signing
from compilewatch.core.schema import ModelResult, RunResults
from tests.redisserver import redis_server
from tests.userrepo import git

pytest.importorskip("redis")
pytestmark = pytest.mark.slow

WRITER_PW = "writer-pw-0123456789abcdef"
SUITE = '''
import json, os
import torch
from compilewatch.suites import model

SUITE_NAME = "shared"
FINDINGS = {findings!r}


def f(x):  # both models compile this one graph: one FX key
    return torch.sin(x) * {scale!r} + 1.0


def _seen():
    """What this worker could read of any credential: its environment and its folder."""
    os.makedirs(FINDINGS, exist_ok=True)
    text = json.dumps(dict(os.environ))
    for name in os.listdir("."):
        if os.path.isfile(name):
            with open(name, errors="replace") as fh:
                text += fh.read()
    with open(os.path.join(FINDINGS, f"seen-{{os.getpid()}}.txt"), "w") as out:
        out.write(text)


@model("m1")
def m1():
    _seen()
    return f, (torch.randn(64),)


@model("m2")
def m2():
    _seen()
    return f, (torch.randn(64),)
'''

HOSTILE = '''
import base64, json, os, pickle
import torch
from compilewatch.suites import model

MARKER = {marker!r}
FINDINGS = {findings!r}
SUITE_NAME = "hostile"


class Evil:
    def __reduce__(self):
        return (exec, (f"open({{MARKER!r}}, 'w').write('ran')",))


def _urls():
    """Every redis URL in the command lines and environments of the processes above."""
    found, pid = set(), os.getpid()
    while pid > 1:
        for part in ("cmdline", "environ"):
            try:
                data = open(f"/proc/{{pid}}/{{part}}", "rb").read()
            except OSError:
                continue
            for item in data.split(b"\\0"):
                text = item.decode(errors="replace")
                for word in (text, text.partition("=")[2]):  # an argument, NAME=value
                    if word.startswith(("redis://", "rediss://")):
                        found.add(word)
        try:
            pid = int(open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return sorted(found)


def poison():
    from compilewatch.compiler import remoteentries, remoteurl
    from compilewatch.core import signing

    pem, _ = signing.generate()
    key = signing.load_private_key(pem)
    evil = json.dumps({{"data": base64.b64encode(pickle.dumps(Evil())).decode(),
                       "time_taken_ms": 0}}).encode()
    report = {{"urls": _urls(), "poisoned": [], "errors": []}}
    for url in report["urls"]:
        e = remoteurl.parse(url)
        client = remoteurl.connect(e)
        try:
            for name in client.scan_iter(match=e.namespace + "pt2:*"):
                k = name.decode()
                client.set(k, remoteentries.seal(k, evil, key))
                report["poisoned"].append(k)
        except Exception as err:
            report["errors"].append(f"{{type(err).__name__}}: {{err}}")
    os.makedirs(FINDINGS, exist_ok=True)
    with open(os.path.join(FINDINGS, f"hostile-{{os.getpid()}}.json"), "w") as out:
        json.dump(report, out)


poison()


@model("net", compile_kwargs={{"backend": "eager"}})
def net():
    poison()
    return torch.nn.Linear(4, 4), (torch.randn(2, 4),)
'''


def _cli() -> list[str]:
    script = Path(sys.executable).with_name("compilewatch")
    return [str(script)] if script.is_file() else [sys.executable, "-P", "-m",
                                                   "compilewatch.bot.cli"]


def _run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    fast = ["--no-db", "--no-warm", "--rounds", "1", "--block-ms", "1", "--timeout", "600"]
    proc = subprocess.run([*_cli(), *args, *fast], cwd=cwd, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    return proc


def _one(path: Path) -> ModelResult:
    run = RunResults.model_validate_json(path.read_text())
    (result,) = run.results
    return result


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("shared-cache")
    prefix = f"cwt-{uuid.uuid4().hex[:8]}"
    users = ("user default on nopass ~* +@all", f"user trusted on >{WRITER_PW} ~* +@all")
    pem, public = signing.generate()
    suite = root / "shared_suite.py"
    suite.write_text(SUITE.format(findings=str(root / "seen"),
                                  scale=2.0 + uuid.uuid4().int % 1000 / 1e4))
    with redis_server(root / "redis", users=users) as server:
        reader = f"redis://127.0.0.1:{server.port}/3?prefix={prefix}"
        yield {"root": root, "suite": suite, "pem": pem, "public": public,
               "prefix": prefix, "reader": reader, "port": server.port,
               "writer": f"redis://trusted:{WRITER_PW}@127.0.0.1:{server.port}/3"
                         f"?prefix={prefix}"}


@pytest.fixture(scope="module")
def stored(world: dict[str, Any]) -> dict[str, Any]:
    """Shard 1 of 2, a trusted writer: its cold compile's graph stored, signed."""
    out = world["root"] / "shard1" / "results.json"
    env = {"COMPILEWATCH_REMOTE_CACHE": world["reader"],
           "COMPILEWATCH_REMOTE_CACHE_WRITER": world["writer"],
           "COMPILEWATCH_REMOTE_CACHE_KEY": world["pem"].decode()}
    _run(["run", "--suite", str(world["suite"]), "--shard", "1/2", "--group", "g",
          "--remote-cache-write", "--out", str(out)], env, world["root"])
    return {**world, "first": _one(out), "first_run": RunResults.model_validate_json(
        out.read_text())}


@pytest.fixture(scope="module")
def second(stored: dict[str, Any]) -> dict[str, Any]:
    """Shard 2 of 2, a reader on another empty cache dir."""
    out = stored["root"] / "shard2" / "results.json"
    proc = _run(["run", "--suite", str(stored["suite"]), "--shard", "2/2", "--group", "g",
                 "--cache-public-key", stored["public"], "--out", str(out)],
                {"COMPILEWATCH_REMOTE_CACHE": stored["reader"]}, stored["root"])
    return {**stored, "second": _one(out), "second_stderr": proc.stderr}


def test_a_trusted_shard_stores_its_graphs_and_no_worker_sees_how(
        stored: dict[str, Any]) -> None:
    first = stored["first"]
    assert first.status == "pass", first.error
    assert stored["first_run"].settings.remote_cache == "write"
    cold, remote = first.cache.counters["cold"], first.cache.counters["remote"]
    assert cold.fx_miss >= 1 and cold.fx_hit == 0 and cold.fx_remote_put >= 1
    assert remote.fx_remote_hit >= 1  # its own remote phase loads what it stored
    seen = [p.read_text() for p in (stored["root"] / "seen").glob("seen-*.txt")]
    assert seen  # the cold compile's and the remote phase's workers
    for text in seen:
        assert WRITER_PW not in text and "PRIVATE KEY" not in text
        assert "COMPILEWATCH_REMOTE_CACHE" not in text
        assert "redis://" not in text  # the remote phase asks the parent, holding no URL


def test_a_second_shard_on_an_empty_cache_loads_the_first_shard_s_graphs(
        second: dict[str, Any]) -> None:
    first, other = second["first"], second["second"]
    assert {first.model, other.model} == {"m1", "m2"}  # one model each, one graph for both
    assert other.status == "pass", other.error
    cold, remote = other.cache.counters["cold"], other.cache.counters["remote"]
    assert cold.fx_hit == 0 and cold.fx_remote_hit is None  # a cold compile reads nothing
    assert remote.fx_remote_hit >= 1 and remote.fx_remote_miss == 0
    assert remote.fx_remote_refused == 0 and remote.fx_local_hit == 0
    assert other.compile.remote_s is not None and other.compile.cache_dir_was_empty
    # the reader may write here (a Redis without users), and says so
    assert "this reader may write" in second["second_stderr"]


def _hostile_repo(root: Path, suite: str, public: str) -> Path:
    repo = root / "pr-repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    (repo / "bench").mkdir()
    (repo / "bench" / "models.py").write_text("import torch\nfrom compilewatch.suites import "
                                              "model\nSUITE_NAME = 'hostile'\n\n\n@model('net',"
                                              " compile_kwargs={'backend': 'eager'})\ndef net()"
                                              ":\n    return torch.nn.Linear(4, 4), "
                                              "(torch.randn(2, 4),)\n")
    (repo / "pyproject.toml").write_text('[tool.compilewatch]\nsuites = ["bench/models.py"]\n'
                                         f'cache_public_keys = ["{public}"]\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a suite")
    git(repo, "checkout", "-qb", "pr")
    (repo / "bench" / "models.py").write_text(suite)
    git(repo, "commit", "-qam", "a change")
    return repo


@pytest.fixture(scope="module")
def poisoned(second: dict[str, Any]) -> dict[str, Any]:
    """A PR's suite overwrites every entry; then a trusted run of the same graph."""
    root = second["root"]
    marker, findings = root / "owned", root / "hostile"
    suite = textwrap.dedent(HOSTILE.format(marker=str(marker), findings=str(findings)))
    repo = _hostile_repo(root, suite, second["public"])
    pr = _run(["pr", "--base", "main", "--head", "pr", "--remote-cache", second["reader"],
               "--out", str(root / "pr-out")], {}, repo)
    out = root / "trusted" / "results.json"
    _run(["run", "--suite", str(second["suite"]), "--model", "m1",
          "--cache-public-key", second["public"], "--out", str(out)],
         {"COMPILEWATCH_REMOTE_CACHE": second["reader"]}, root)
    reports = [json.loads(p.read_text()) for p in findings.glob("hostile-*.json")]
    return {**second, "marker": marker, "reports": reports, "victim": _one(out),
            "pr_stderr": pr.stderr}


def test_a_pr_s_poisoned_entry_is_never_loaded_by_a_trusted_run(
        poisoned: dict[str, Any]) -> None:
    reports, victim = poisoned["reports"], poisoned["victim"]
    # the PR's code found the Redis and overwrote the trusted entry...
    assert any(r["poisoned"] for r in reports), reports
    assert all(poisoned["reader"] in r["urls"] for r in reports)
    assert not any(WRITER_PW in u for r in reports for u in r["urls"])
    # ...and the trusted run refused it, compiled, and the pickle never ran
    assert not poisoned["marker"].exists()
    assert victim.status == "pass", victim.error
    remote = victim.cache.counters["remote"]
    assert remote.fx_remote_refused >= 1 and remote.fx_remote_hit == 0
    assert remote.fx_miss >= 1
    assert any("not a pinned cache public key" in n for n in victim.notes), victim.notes
    assert "this reader may write" in poisoned["pr_stderr"]


def test_the_refused_entry_was_code_that_would_have_run(poisoned: dict[str, Any],
                                                        tmp_path: Path) -> None:
    """The control: what torch's own Redis backend does with an entry (base64, then pickle)
    runs the PR's code when given the entry the trusted run refused."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=poisoned["port"], db=3)
    (name,) = list(client.scan_iter(match=f"{poisoned['prefix']}:trusted:pt2:*"))
    torch_form = client.get(name)[6 + 32 + 64:]  # past the seal
    data = base64.b64encode(torch_form).decode()
    subprocess.run([sys.executable, "-c", "import base64, json, pickle, sys; pickle.loads("
                    "base64.b64decode(json.loads(base64.b64decode(sys.argv[1]))['data']))",
                    data], check=True, timeout=60, cwd=tmp_path)
    assert poisoned["marker"].read_text() == "ran"
    poisoned["marker"].unlink()
