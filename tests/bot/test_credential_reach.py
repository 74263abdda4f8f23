"""A PR's code searches every place it can reach for the job's credentials, and finds none.

The suite below runs the search where PR code runs: at import (in the listing child) and while
its model is built and called (in the workers, forked and spawned). It reads every process of
the run it can find (its ancestors up to the test, anything named compilewatch) through
``/proc/<pid>/environ``, ``cmdline``, the regular files they hold open, and their anonymous
memory through ``/proc/<pid>/mem`` where ptrace permits. The same search pointed at a process
that does hold the secrets finds them.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.userrepo import git

TOKEN = "ghp_FAKEtoken0123456789abcdefABCDEF0123"
SIGNING = "-----BEGIN PRIVATE KEY-----MC4CAQAwBQYDK2VwBCIEIFAKEsigningKEY0123456789abcdefgh"
AWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYFAKEKEY0123"
# the shared compile cache's trusted writer: its URL (a password) and its signing key
WRITER = "redis://nightly:FAKEwriterPW0123456789abcdef@127.0.0.1:1/0"
WRITER_KEY = "-----BEGIN PRIVATE KEY-----MC4CAQAwBQYDK2VwBCIEIFAKEwriterKEY0123456789abcd"
CONTROL = "cw-control-process"

SEARCH = '''
import hashlib, json, os, stat, sys

NEEDLES = {needles!r}
EXCLUDE = {exclude}
CONTROL = {control!r}
FINDINGS = {findings!r}


def _read(path, limit=1 << 20):
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return None


def _ppid(pid):
    text = _read(f"/proc/{{pid}}/stat")
    return int(text[text.rfind(b")") + 2:].split()[1]) if text else None


def _targets(control):
    """The run's processes (never the control: what a search finds stays in the searcher's
    memory, where the next searcher would find it), or the control alone."""
    out, pid = set(), _ppid(os.getpid())
    while not control and pid and pid > 1 and pid != EXCLUDE:  # our ancestors, to the test
        out.add(pid)
        pid = _ppid(pid)
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in (os.getpid(), EXCLUDE):
            cmd = _read(f"/proc/{{name}}/cmdline") or b""
            if CONTROL.encode() in cmd:
                if control:
                    out.add(int(name))
            elif b"compilewatch" in cmd and not control:
                out.add(int(name))
    return out - ({{pid}} if control else set())


def _hits(data):
    """Which secrets ``data`` holds. The search knows each by a short prefix, its length and
    its hash, never by its value: a searcher holding the values would be found by the next."""
    found = []
    for name, (prefix, size, digest) in NEEDLES.items():
        at = data.find(prefix.encode()) if data else -1
        while at >= 0:
            if hashlib.sha256(data[at:at + size]).hexdigest() == digest:
                found.append(name)
                break
            at = data.find(prefix.encode(), at + 1)
    return sorted(found)


def _memory(pid):
    maps = _read(f"/proc/{{pid}}/maps", 1 << 24)
    if maps is None:
        return None
    try:
        fd = os.open(f"/proc/{{pid}}/mem", os.O_RDONLY)
    except OSError:
        return None
    found, read = set(), 0
    try:
        for line in maps.decode().splitlines():
            parts = line.split()
            start, end = (int(x, 16) for x in parts[0].split("-"))
            name = parts[5] if len(parts) > 5 else ""
            # anonymous memory, heap and stack: where a process keeps what it was given
            if "r" not in parts[1] or (name and name not in ("[heap]", "[stack]")):
                continue
            if end - start > 1 << 30:
                continue
            at = start
            while at < end:
                try:
                    chunk = os.pread(fd, min(1 << 22, end - at), at)
                except OSError:
                    break
                if not chunk:
                    break
                read += len(chunk)
                found.update(_hits(chunk))
                # the next chunk overlaps this one: a secret across the boundary is seen
                at += len(chunk) - 256 if len(chunk) > 512 and at + len(chunk) < end \
                    else len(chunk)
    finally:
        os.close(fd)
    return sorted(found) if read else None


def search(where, control=False):
    report = {{}}
    for pid in sorted(_targets(control)):
        cmd = (_read(f"/proc/{{pid}}/cmdline") or b"").replace(b"\\0", b" ")[:200].decode()
        places = {{"environ": _hits(_read(f"/proc/{{pid}}/environ")),
                   "cmdline": _hits(_read(f"/proc/{{pid}}/cmdline"))}}
        files = []
        try:
            fds = os.listdir(f"/proc/{{pid}}/fd")
        except OSError:
            fds = []
        for fd in fds:
            path = f"/proc/{{pid}}/fd/{{fd}}"
            try:
                if not stat.S_ISREG(os.stat(path).st_mode):
                    continue  # a pipe read here would take the run's own messages
            except OSError:
                continue
            files += _hits(_read(path))
        places["files"] = sorted(set(files))
        mem = _memory(pid)
        places["mem"] = "denied" if mem is None else mem
        report[str(pid)] = {{"cmd": cmd, **places}}
    report["self"] = {{"environ": _hits(_read("/proc/self/environ"))}}
    os.makedirs(FINDINGS, exist_ok=True)
    with open(os.path.join(FINDINGS, f"{{where}}-{{os.getpid()}}.json"), "w") as f:
        json.dump(report, f)
'''

SUITE = '''
import torch

from compilewatch.suites import model

{search}

search("listing")
SUITE_NAME = "hostile"


@model("net", compile_kwargs={{"backend": "eager"}})
def net():
    search("worker")
    return torch.nn.Linear(4, 4), (torch.randn(2, 4),)
'''


NEEDLES = {name: (value[:6], len(value), hashlib.sha256(value.encode()).hexdigest())
           for name, value in {"token": TOKEN, "signing": SIGNING, "aws": AWS,
                               "writer": WRITER, "writer_key": WRITER_KEY}.items()}
SECRETS = {"GITHUB_TOKEN": TOKEN, "COMPILEWATCH_SIGNING_KEY": SIGNING,
           "AWS_SECRET_ACCESS_KEY": AWS, "COMPILEWATCH_REMOTE_CACHE_WRITER": WRITER,
           "COMPILEWATCH_REMOTE_CACHE_KEY": WRITER_KEY}


SHADOW = '''
import os
os.makedirs({findings!r}, exist_ok=True)
open(os.path.join({findings!r}, f"shadow-{{os.getpid()}}"), "w").close()
raise ImportError("the PR's compilewatch package")
'''


def _repo(root: Path, findings: Path) -> None:
    search = SEARCH.format(needles=NEEDLES, exclude=os.getpid(), control=CONTROL,
                           findings=str(findings))
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "t@example.com")
    git(root, "config", "user.name", "t")
    (root / "bench").mkdir()
    (root / "bench" / "models.py").write_text(SUITE.format(search=textwrap.dedent(search)))
    (root / "pyproject.toml").write_text('[tool.compilewatch]\nsuites = ["bench/models.py"]\n')
    git(root, "add", "-A")
    git(root, "commit", "-qm", "a suite")
    git(root, "checkout", "-qb", "pr")
    with (root / "bench" / "models.py").open("a") as f:
        f.write("# a change\n")
    # and a package of compilewatch's name, for anything that imports from the folder it runs in
    (root / "compilewatch").mkdir()
    (root / "compilewatch" / "__init__.py").write_text(SHADOW.format(findings=str(findings)))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "a change")


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["fork", "spawn"])
def test_pr_code_finds_no_credential_anywhere_it_can_reach(isolation: str,
                                                          tmp_path: Path) -> None:
    findings = tmp_path / "findings"
    repo = tmp_path / "repo"
    _repo(repo, findings)
    secrets = SECRETS
    # as the workflow starts it, from the PR's checkout: its console script
    script = Path(sys.executable).with_name("compilewatch")
    start = [str(script)] if script.is_file() else [sys.executable, "-P", "-m",
                                                     "compilewatch.bot.cli"]
    proc = subprocess.run(
        [*start, "pr", "--base", "main", "--head", "pr",
         "--out", str(tmp_path / "out"), "--no-db", "--no-warm", "--rounds", "1",
         "--block-ms", "1", "--isolation", isolation, "--timeout", "300"],
        cwd=repo, env={**os.environ, **secrets}, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # no process imported the PR's compilewatch/ in place of compilewatch's own
    assert list(findings.glob("shadow-*")) == []
    reports = {p.name: json.loads(p.read_text()) for p in sorted(findings.glob("*.json"))}
    # both sides' listing children and workers searched
    assert sum(n.startswith("listing") for n in reports) >= 2
    assert sum(n.startswith("worker") for n in reports) >= 2
    found, searched = [], set()
    for name, report in reports.items():
        assert report.pop("self")["environ"] == [], name
        for pid, places in report.items():
            searched.add(places["cmd"].split(" -m ")[-1].split()[0] if " -m " in
                          places["cmd"] else places["cmd"][:40])
            hits = {k: v for k, v in places.items() if k != "cmd" and v and v != "denied"}
            if hits:
                found.append((name, pid, places["cmd"], hits))
    assert found == []
    # the pr process itself (its re-executed self) was among those searched, with the fork
    # server or the spawned workers' parents
    assert "compilewatch.bot.cli" in searched, searched
    assert "let go of the credentials AWS_SECRET_ACCESS_KEY, COMPILEWATCH_REMOTE_CACHE_KEY, " \
        "COMPILEWATCH_REMOTE_CACHE_WRITER, COMPILEWATCH_SIGNING_KEY, GITHUB_TOKEN " \
        "before running the repository's code" in proc.stderr


def test_the_search_finds_what_a_process_holds(tmp_path: Path) -> None:
    """The control for the test above: the same search, pointed at a process that holds the
    secrets (as compilewatch did before it let go of them), finds each of them."""
    findings = tmp_path / "findings"
    script = tmp_path / "search.py"
    script.write_text(textwrap.dedent(SEARCH.format(
        needles=NEEDLES, exclude=os.getpid(), control=CONTROL, findings=str(findings)))
        + '\nsearch("control", control=True)\n')
    secrets = SECRETS
    control = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)", CONTROL],
                               env={**os.environ, **secrets})
    try:
        time.sleep(0.5)
        subprocess.run([sys.executable, str(script)], check=True, timeout=120)
    finally:
        control.kill()
        control.wait()
    (report,) = [json.loads(p.read_text()) for p in findings.glob("control-*.json")]
    report.pop("self")
    (places,) = report.values()
    every = ["aws", "signing", "token", "writer", "writer_key"]
    assert places["environ"] == every
    assert places["mem"] in ("denied", every)
    if os.geteuid() == 0:  # root may read any process's memory: so may the search
        assert places["mem"] == every
