"""git runs nothing a repository configures: hooks, filters, diff drivers and fsmonitor each
write a marker file when they run, and ``pr``'s git operations (resolve, merge-base, changed
paths, fetch, worktree add and remove) still work beside them, on real repositories in the CI
layout (the PR head checked out, its files named by the repository's configuration)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from compilewatch.bot.checkout import gitenv
from compilewatch.bot.checkout.git import (
    UnsafeRepository,
    changed_paths,
    fetch_pr_head,
    head_info,
    is_repo,
    resolve_commit,
)
from compilewatch.bot.checkout.worktrees import worktrees
from compilewatch.bot.commands.pr import resolve_refs

TOKEN = "ghp_notARealTokenButShapedLikeOne1234567890"
# every hook git documents (githooks(5), git 2.39)
HOOKS = ("applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit",
         "pre-merge-commit", "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase",
         "post-checkout", "post-merge", "pre-push", "pre-receive", "update", "proc-receive",
         "post-receive", "post-update", "reference-transaction", "push-to-checkout",
         "pre-auto-gc", "post-rewrite", "sendemail-validate", "fsmonitor-watchman",
         "p4-changelist", "p4-prepare-changelist", "p4-post-changelist", "p4-pre-submit",
         "post-index-change")
BASE_MODELS, HEAD_MODELS = "x = 1\n", "x = 2\n"


def sh(repo: Path, *args: str) -> str:
    """Test setup with the plain git (nothing pinned)."""
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _hooks(directory: Path, marker: Path) -> None:
    for name in HOOKS:
        _script(directory / name, f'cat >/dev/null; echo "{name} $GITHUB_TOKEN" >> {marker}')


class Layout:
    """A repository with a base commit on main and a PR head on ``pr`` that carries the
    attack's files, the head checked out (as actions/checkout leaves it), and a bare origin
    that publishes the head as ``refs/pull/7/head``."""

    def __init__(self, tmp: Path, head_files: dict[str, str]) -> None:
        self.tmp, self.marker = tmp, tmp / "marker"
        self.repo = tmp / "repo"
        self.repo.mkdir()
        sh(self.repo, "init", "-q", "-b", "main")
        sh(self.repo, "config", "user.email", "ci@example.com")
        sh(self.repo, "config", "user.name", "ci")
        self.base = self._commit({"models.py": BASE_MODELS, "kept.py": "k = 0\n"}, "base")
        sh(self.repo, "checkout", "-q", "-b", "pr")
        self.head = self._commit({"models.py": HEAD_MODELS, **head_files}, "head")
        origin = tmp / "origin.git"
        subprocess.run(["git", "clone", "-q", "--bare", str(self.repo), str(origin)],
                       check=True, capture_output=True)
        sh(origin, "update-ref", "refs/pull/7/head", self.head)
        sh(self.repo, "remote", "add", "origin", str(origin))

    def _commit(self, files: dict[str, str], message: str) -> str:
        for name, text in files.items():
            path = self.repo / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            if name.endswith(".sh") or "/" in name:
                path.chmod(0o755)
        sh(self.repo, "add", "-A")
        sh(self.repo, "commit", "-q", "-m", message)
        return sh(self.repo, "rev-parse", "HEAD")

    def config(self, *pairs: tuple[str, str]) -> None:
        for key, value in pairs:
            sh(self.repo, "config", key, value)


def _marker_writer(marker: Path, what: str) -> str:
    """A command line that records that it ran (and passes its input through, as a filter)."""
    return f"sh -c 'echo \"{what} $GITHUB_TOKEN\" >> {marker}; cat'"


def _config_value(text: str) -> str:
    """``text`` quoted for a configuration file (where ``;`` would start a comment)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# case -> (files the PR head adds, given the marker; what the repository or the user's
# configuration then says, given the layout)
Case = tuple[Callable[[Path], dict[str, str]], Callable[[Layout], None]]


def _no_files(marker: Path) -> dict[str, str]:
    return {}


def _tracked_hooks(marker: Path) -> dict[str, str]:
    return {f".githooks/{name}": f'#!/bin/sh\ncat >/dev/null; echo "{name} $GITHUB_TOKEN" '
            f">> {marker}\n" for name in HOOKS}


def _global_hooks(lay: Layout) -> None:
    _hooks(lay.tmp / "global-hooks", lay.marker)
    home = lay.tmp / "home"
    home.mkdir(exist_ok=True)
    (home / ".gitconfig").write_text(f"[core]\n\thooksPath = {lay.tmp / 'global-hooks'}\n")


def _filter_attrs(name: str) -> dict[str, str]:
    return {".gitattributes": f"*.py filter={name} diff={name} merge={name}\n"}


CASES: dict[str, Case] = {
    "hooks in .git/hooks": (_no_files, lambda lay: _hooks(lay.repo / ".git" / "hooks",
                                                          lay.marker)),
    "a relative core.hooksPath naming the PR's own hooks": (
        _tracked_hooks, lambda lay: lay.config(("core.hooksPath", ".githooks"))),
    "an absolute core.hooksPath": (
        _no_files, lambda lay: (_hooks(lay.tmp / "hooks", lay.marker),
                                lay.config(("core.hooksPath", str(lay.tmp / "hooks"))))),
    "core.hooksPath in the user's global configuration": (_no_files, _global_hooks),
    "a smudge/clean filter in .git/config, selected by the PR's .gitattributes": (
        lambda m: _filter_attrs("evil"),
        lambda lay: lay.config(("filter.evil.smudge", _marker_writer(lay.marker, "smudge")),
                               ("filter.evil.clean", _marker_writer(lay.marker, "clean")))),
    "a required long-running filter process": (
        lambda m: _filter_attrs("evil"),
        lambda lay: lay.config(("filter.evil.process", _marker_writer(lay.marker, "process")),
                               ("filter.evil.required", "true"))),
    "a filter the PR defines in a tracked file that the configuration includes": (
        lambda m: {**_filter_attrs("we=ird.x"), "evil.gitconfig": (
            f'[filter "we=ird.x"]\n'
            f'\tsmudge = {_config_value(_marker_writer(m, "included smudge"))}\n'
            f'\tclean = {_config_value(_marker_writer(m, "included clean"))}\n')},
        lambda lay: lay.config(("include.path", "../evil.gitconfig"))),
    "an fsmonitor hook the PR carries": (
        lambda m: {"tools/fsmonitor.sh": f'#!/bin/sh\necho "fsmonitor $GITHUB_TOKEN" >> {m}\n'},
        lambda lay: lay.config(("core.fsmonitor", str(lay.repo / "tools" / "fsmonitor.sh")))),
    "a textconv and an external diff driver, and diff.external": (
        lambda m: _filter_attrs("evil"),
        lambda lay: lay.config(("diff.evil.textconv", _marker_writer(lay.marker, "textconv")),
                               ("diff.evil.command", _marker_writer(lay.marker, "diff")),
                               ("diff.external", _marker_writer(lay.marker, "external")))),
    "a merge driver": (
        lambda m: _filter_attrs("evil"),
        lambda lay: lay.config(("merge.evil.driver", _marker_writer(lay.marker, "merge")))),
}


def _pr_git(lay: Layout) -> None:
    """What ``pr`` asks of git, checked to still work: resolve and merge-base, the PR head
    fetched from origin, the changed paths, the checkout's git block, two worktrees added and
    removed."""
    refs = resolve_refs(lay.repo, base="main", head="pr", pr=None)
    assert (refs.base, refs.head) == (lay.base, lay.head)
    assert fetch_pr_head(lay.repo, 7) == lay.head
    changed = dict((path, status) for status, path in changed_paths(lay.repo, lay.base,
                                                                    lay.head))
    assert changed["models.py"] == "M" and "kept.py" not in changed
    info = head_info(lay.repo)
    assert info["commit"] == lay.head and info["ref"] == "pr"
    with worktrees(lay.repo, {"base": refs.base, "head": refs.head}) as trees:
        assert (trees["base"] / "models.py").read_text() == BASE_MODELS
        assert (trees["head"] / "models.py").read_text() == HEAD_MODELS
        (trees["head"] / "models.py").write_text("x = 3\n")  # the side's run leaves changes
    assert not trees["base"].exists() and not trees["head"].exists()
    assert len(sh(lay.repo, "worktree", "list").splitlines()) == 1


@pytest.mark.parametrize("case", list(CASES))
def test_nothing_the_repository_configures_runs(case: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    files, configure = CASES[case]
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    lay = Layout(tmp_path, files(tmp_path / "marker"))
    configure(lay)
    (lay.repo / "kept.py").touch()  # stat-dirty: status looks at its content (clean filter)
    lay.marker.unlink(missing_ok=True)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    _pr_git(lay)
    assert not lay.marker.exists(), lay.marker.read_text()


def test_the_pins_name_every_driver_however_it_is_spelled(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    files, configure = CASES["a filter the PR defines in a tracked file that the "
                             "configuration includes"]
    lay = Layout(tmp_path, files(tmp_path / "marker"))
    configure(lay)
    lay.config(("diff.Evil.textconv", "x"), ("merge.m.driver", "y"), ("diff.renames", "true"))
    env = gitenv.environment(lay.repo)
    pins = {env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"]
            for i in range(int(env["GIT_CONFIG_COUNT"]))}
    assert pins["core.hooksPath"] == os.devnull and pins["core.fsmonitor"] == "false"
    assert pins["filter.we=ird.x.smudge"] == pins["filter.we=ird.x.process"] == ""
    assert pins["filter.we=ird.x.required"] == "false"
    assert pins["diff.Evil.textconv"] == "" and pins["merge.m.driver"] == ""
    assert "diff.renames" not in pins and "diff..renames" not in pins


def test_git_sees_no_credential_and_no_git_variable_of_a_caller(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every git process gets the allow-listed environment: a wrapper in front of git records
    what each call saw. A caller's ``GIT_DIR`` would have pointed the calls at another
    repository."""
    lay = Layout(tmp_path, {})
    other = tmp_path / "other"
    other.mkdir()
    sh(other, "init", "-q")
    log, real = tmp_path / "env.log", shutil.which("git")
    _script(tmp_path / "bin" / "git", f'env >> {log}; echo "--" >> {log}; exec {real} "$@"')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    for name in ("GITHUB_TOKEN", "GH_TOKEN", "AWS_SECRET_ACCESS_KEY",
                 "COMPILEWATCH_SIGNING_KEY", "ACTIONS_RUNTIME_TOKEN"):
        monkeypatch.setenv(name, TOKEN + name)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    assert head_info(lay.repo)["commit"] == lay.head
    assert fetch_pr_head(lay.repo, 7) == lay.head
    seen = log.read_text()
    assert seen.count("--") >= 6 and TOKEN not in seen
    for block in seen.split("--\n")[:-1]:
        names = {line.split("=", 1)[0] for line in block.splitlines() if "=" in line}
        assert names <= {*gitenv.KEEP, *gitenv.KEEP_NETWORK, "PWD", "SHLVL", "_", "LC_ALL",
                         "GIT_TERMINAL_PROMPT", "GIT_OPTIONAL_LOCKS", "GIT_CONFIG_COUNT"} | {
            n for n in names if n.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))}, names


@pytest.mark.skipif(os.geteuid() != 0, reason="making a repository another user's needs root")
def test_a_repository_another_user_owns_is_refused_until_the_user_trusts_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git's ownership check stays on: compilewatch adds no ``safe.directory`` of its own,
    says how to trust the repository, and honours it once the user has."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    lay = Layout(tmp_path, {})
    nobody = 65534
    for path in [lay.repo, *lay.repo.rglob("*")]:
        os.lchown(path, nobody, nobody)
    with pytest.raises(UnsafeRepository, match=r"safe\.directory"):
        is_repo(lay.repo)
    with pytest.raises(UnsafeRepository, match="owned by another user"):
        resolve_commit(lay.repo, "pr")
    sh(tmp_path, "config", "--global", "--add", "safe.directory", str(lay.repo))
    assert resolve_commit(lay.repo, "pr") == lay.head


def test_outside_a_checkout_is_still_no_checkout(tmp_path: Path) -> None:
    assert not is_repo(tmp_path) and head_info(tmp_path) == {}
    assert not is_repo(tmp_path / "missing")


# what git offers against a driver (flags, variables, or None for gitenv's pins); only the
# pins stop a filter that the repository's own configuration defines and its tracked
# .gitattributes selects
ALTERNATIVES: dict[str, tuple[list[str], dict[str, str]] | None] = {
    "nothing": ([], {}),
    "core.attributesFile=/dev/null": (["-c", "core.attributesFile=/dev/null"], {}),
    "GIT_ATTR_NOSYSTEM": ([], {"GIT_ATTR_NOSYSTEM": "1"}),
    "no system or global configuration": (
        [], {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}),
    "the driver's commands pinned empty (gitenv)": None,
}


@pytest.mark.parametrize("alternative", list(ALTERNATIVES))
def test_only_pinning_the_driver_stops_a_filter_of_the_repository(
        alternative: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Why gitenv pins each driver by name: the switches git has for attributes and for other
    configuration files leave the repository's own driver and the tree's attributes alone."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    files, configure = CASES["a smudge/clean filter in .git/config, selected by the PR's "
                             ".gitattributes"]
    lay = Layout(tmp_path, files(tmp_path / "marker"))
    configure(lay)
    chosen = ALTERNATIVES[alternative]
    flags, env = chosen if chosen is not None else ([], gitenv.environment(lay.repo))
    if chosen is not None:  # hooks off, so that only the filter can write the marker
        env = {**gitenv.base_environment(), **env, "GIT_CONFIG_COUNT": "1",
               "GIT_CONFIG_KEY_0": "core.hooksPath", "GIT_CONFIG_VALUE_0": os.devnull}
    lay.marker.unlink(missing_ok=True)
    subprocess.run(["git", "-C", str(lay.repo), *flags, "worktree", "add", "--detach", "-q",
                    str(tmp_path / "wt"), lay.head], env=env, check=True, capture_output=True)
    assert (tmp_path / "wt" / "models.py").read_text() == HEAD_MODELS
    assert lay.marker.exists() is (chosen is not None)
