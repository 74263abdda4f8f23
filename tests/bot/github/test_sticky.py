"""The one sticky comment per PR: in-place edits, races, pagination, spoofing, size."""

from __future__ import annotations

import threading

from github.Repository import Repository

from compilewatch.bot.github.client import Credentials, open_repo
from compilewatch.bot.github.sticky import MAX_COMMENT_CHARS, fit_comment, upsert_comment, utf16_len
from tests.bot.conftest import FAST
from tests.fakegithub import BOT, PR, REPO, TOKEN, FakeGitHub

MARK = "<!-- compilewatch-sticky -->"
HUMAN = {"login": "alice", "id": 5, "type": "User"}


def test_second_post_edits_the_first_in_place(fake_github: FakeGitHub,
                                              gh_repo: Repository) -> None:
    first = upsert_comment(gh_repo, PR, "run 1", MARK)
    second = upsert_comment(gh_repo, PR, "run 2", MARK)
    [comment] = fake_github.issue_comments(REPO, PR)
    assert (first.action, second.action) == ("created", "updated")
    assert first.comment_id == second.comment_id == comment["id"]
    assert comment["body"] == f"{MARK}\nrun 2"


def test_only_if_changed_leaves_an_identical_comment_alone(fake_github: FakeGitHub,
                                                           gh_repo: Repository) -> None:
    upsert_comment(gh_repo, PR, "same", MARK)
    again = upsert_comment(gh_repo, PR, "same", MARK, only_if_changed=True)
    assert again.action == "unchanged"
    assert fake_github.calls("PATCH", "comments") == []
    assert upsert_comment(gh_repo, PR, "other", MARK, only_if_changed=True).action == "updated"


def test_two_racing_runs_leave_one_comment(fake_github: FakeGitHub) -> None:
    # Both runs list the comments before either creates one: both create, then they settle.
    fake_github.barrier("GET", r"/issues/7/comments$", parties=2)
    results, errors = [], []

    def run(body: str) -> None:
        try:
            repo = open_repo(Credentials(token=TOKEN), REPO, base_url=fake_github.base_url,
                             policy=FAST)
            results.append(upsert_comment(repo, PR, body, MARK))
        except Exception as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(f"body {i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    assert len(fake_github.calls("POST", r"/comments$")) == 2  # the race really happened
    [comment] = fake_github.issue_comments(REPO, PR)
    assert comment["body"] in (f"{MARK}\nbody 0", f"{MARK}\nbody 1")
    assert {r.comment_id for r in results} == {comment["id"]}


def test_marker_on_a_later_page_is_found(fake_github: FakeGitHub, gh_repo: Repository) -> None:
    for i in range(150):
        fake_github.add_comment(REPO, PR, f"chatter {i}", HUMAN)
    ours = fake_github.add_comment(REPO, PR, f"{MARK}\nold", BOT)
    for i in range(100):
        fake_github.add_comment(REPO, PR, f"more chatter {i}", HUMAN)
    result = upsert_comment(gh_repo, PR, "new", MARK)
    assert result.comment_id == ours and result.action == "updated"
    assert fake_github.comments[ours]["body"] == f"{MARK}\nnew"
    pages = {c.query.get("page", "1") for c in fake_github.calls("GET", r"/comments$")}
    assert {"2", "3"} <= pages
    assert fake_github.calls("POST", r"/comments$") == []


def test_a_person_quoting_the_marker_does_not_take_over(fake_github: FakeGitHub,
                                                        gh_repo: Repository) -> None:
    spoof = fake_github.add_comment(REPO, PR, f"{MARK}\n@everyone look", HUMAN)
    result = upsert_comment(gh_repo, PR, "real", MARK)
    assert result.action == "created" and result.comment_id != spoof
    assert fake_github.comments[spoof]["body"] == f"{MARK}\n@everyone look"


def test_author_selects_whose_comment_is_ours(fake_github: FakeGitHub,
                                              gh_repo: Repository) -> None:
    mine = fake_github.add_comment(REPO, PR, f"{MARK}\nold", HUMAN)
    result = upsert_comment(gh_repo, PR, "new", MARK, author="alice")
    assert result.comment_id == mine
    assert fake_github.comments[mine]["body"] == f"{MARK}\nnew"


def test_leftover_duplicates_are_removed_keeping_the_oldest(fake_github: FakeGitHub,
                                                            gh_repo: Repository) -> None:
    oldest = fake_github.add_comment(REPO, PR, f"{MARK}\na")
    fake_github.add_comment(REPO, PR, f"{MARK}\nb")
    result = upsert_comment(gh_repo, PR, "c", MARK)
    assert result.duplicates_removed == 1
    assert [c["id"] for c in fake_github.issue_comments(REPO, PR)] == [oldest]


def test_an_oversized_body_is_cut_to_githubs_limit(fake_github: FakeGitHub,
                                                   gh_repo: Repository) -> None:
    upsert_comment(gh_repo, PR, "x" * 100_000, MARK)
    [comment] = fake_github.issue_comments(REPO, PR)
    assert len(comment["body"]) == MAX_COMMENT_CHARS
    assert comment["body"].startswith(MARK) and "Truncated" in comment["body"]


def test_limit_counts_utf16_units() -> None:
    body = fit_comment("😀" * 40_000)  # 80,000 UTF-16 units in 40,000 characters
    assert utf16_len(body) <= MAX_COMMENT_CHARS and body.endswith("artifact.)*\n")
    assert utf16_len(fit_comment("😀" * 30_000)) == 60_000
