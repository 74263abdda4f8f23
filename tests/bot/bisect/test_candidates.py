"""What a bisection searches, from a real git repository and real interpreter files: the
first-parent history between the ends, and every refusal before anything is measured."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compilewatch.bot.bisect.candidates import commits_between, read_pythons
from compilewatch.core.errors import GitError, UsageError


def sh(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """main: c0..c3 with a merge of a side branch (s1, s2) after c1."""
    r = tmp_path / "repo"
    r.mkdir()
    sh(r, "init", "-q", "-b", "main")
    sh(r, "config", "user.email", "t@example.com")
    sh(r, "config", "user.name", "t")
    (r / "f").write_text("c0")
    sh(r, "add", "f")
    sh(r, "commit", "-qm", "c0")
    (r / "f").write_text("c1")
    sh(r, "commit", "-qam", "c1")
    sh(r, "checkout", "-qb", "side")
    for name in ("s1", "s2"):
        (r / name).write_text(name)
        sh(r, "add", name)
        sh(r, "commit", "-qm", name)
    sh(r, "checkout", "-q", "main")
    sh(r, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    for name in ("c2", "c3"):
        (r / "f").write_text(name)
        sh(r, "commit", "-qam", name)
    return r


def test_the_first_parent_history_oldest_first_the_merge_one_commit(repo):
    cands = commits_between(repo, "main~3", "main")
    assert [c.subject for c in cands] == ["c1", "merge side", "c2", "c3"]
    assert [c.index for c in cands] == [0, 1, 2, 3]
    assert cands[0].commit == sh(repo, "rev-parse", "main~3")


def test_a_good_end_off_the_first_parent_line_is_refused(repo):
    with pytest.raises(UsageError, match="second parent"):
        commits_between(repo, "side", "main")


@pytest.mark.parametrize(("good", "bad", "said"), [
    ("main", "main~2", "is not an ancestor"),
    ("main", "main", "the same commit"),
])
def test_ends_in_the_wrong_order_or_equal_are_refused(repo, good, bad, said):
    with pytest.raises(UsageError, match=said):
        commits_between(repo, good, bad)


def test_a_typo_in_a_ref_names_it(repo):
    with pytest.raises(GitError, match="'mian' is not a commit"):
        commits_between(repo, "mian", "main")


def test_within_refuses_ends_its_ref_does_not_hold(repo):
    assert len(commits_between(repo, "main~1", "main", within="main")) == 2
    with pytest.raises(UsageError, match="is not on the history of main~2"):
        commits_between(repo, "main~3", "main", within="main~2")


def test_pythons_one_a_line_comments_and_relative_paths(tmp_path):
    listed = tmp_path / "builds.txt"
    link = tmp_path / "py"
    os.symlink(sys.executable, link)
    listed.write_text(f"# the oldest first\n{sys.executable}\n\npy  # relative to the file\n")
    cands = read_pythons(listed)
    assert [c.python for c in cands] == [sys.executable, str(link)]
    assert [c.index for c in cands] == [0, 1] and cands[1].label.endswith(f"({link})")


@pytest.mark.parametrize(("text", "said"), [
    (f"{sys.executable}\n", "lists 1 interpreter"),
    (f"{sys.executable}\n/no/such/python\n", "line 2: '/no/such/python' is not an "
                                             "executable interpreter"),
    ("", "lists 0"),
])
def test_a_pythons_file_that_cannot_be_bisected_is_refused_naming_the_line(tmp_path, text,
                                                                          said):
    listed = tmp_path / "builds.txt"
    listed.write_text(text)
    with pytest.raises(UsageError, match=said.replace("(", r"\(")):
        read_pythons(listed)
