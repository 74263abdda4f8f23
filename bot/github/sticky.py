"""One comment per pull request, found by a hidden marker and replaced in place (bedevere's way).

Two runs racing on the same PR can both see no comment and both create one; after creating, the
list is read again and every marked comment but the oldest is deleted, and the oldest gets the
newest text, so the PR is left with one comment whichever run finishes last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from github.IssueComment import IssueComment
from github.Repository import Repository

from compilewatch.bot.github.client import github_errors, status_of
from compilewatch.core.errors import GitHubError

MAX_COMMENT_CHARS = 65536
TRUNCATED_NOTE = "\n\n*(Truncated: the full report is in the workflow run's artifact.)*\n"


@dataclass(frozen=True)
class CommentResult:
    action: Literal["created", "updated", "unchanged"]
    comment_id: int
    url: str
    duplicates_removed: int = 0


def utf16_len(text: str) -> int:
    """Length as GitHub may count it (UTF-16 code units); never less than ``len(text)``."""
    return len(text.encode("utf-16-le")) // 2


def fit_comment(body: str, limit: int = MAX_COMMENT_CHARS) -> str:
    """Cut ``body`` to GitHub's limit, saying so, instead of having the post refused."""
    if utf16_len(body) <= limit:
        return body
    keep = limit - len(TRUNCATED_NOTE)
    while utf16_len(body[:keep]) > limit - len(TRUNCATED_NOTE):
        keep -= utf16_len(body[:keep]) - (limit - len(TRUNCATED_NOTE))
    return body[:keep] + TRUNCATED_NOTE


def _is_ours(comment: IssueComment, marker: str, author: str | None) -> bool:
    """A marked comment by the bot; a person quoting the marker must not hijack the thread."""
    if marker not in (comment.body or ""):
        return False
    user = comment.user
    return user.login == author if author is not None else user.type == "Bot"


def _marked(repo: Repository, pr_number: int, marker: str,
            author: str | None) -> list[IssueComment]:
    with github_errors(f"list the comments of {repo.full_name}#{pr_number}"):
        comments = repo.get_issue(pr_number).get_comments()
        ours = [c for c in comments if _is_ours(c, marker, author)]
    return sorted(ours, key=lambda c: (c.created_at, c.id))


def _delete_quietly(comment: IssueComment) -> None:
    """Delete a duplicate; another racing run may have deleted it first (404)."""
    try:
        with github_errors(f"delete duplicate comment {comment.id}"):
            comment.delete()
    except GitHubError as e:
        if status_of(e) != 404:
            raise


def upsert_comment(repo: Repository, pr_number: int, body: str, marker: str, *,
                   only_if_changed: bool = False, author: str | None = None) -> CommentResult:
    """Create or edit the one marked comment on ``pr_number``.

    ``only_if_changed`` leaves an identical comment untouched (no edit, no "edited" mark).
    ``author``: the login whose comments count as ours; None means any bot account.
    """
    if marker not in body:
        body = f"{marker}\n{body}"
    body = fit_comment(body)
    existing = _marked(repo, pr_number, marker, author)
    if existing:
        keep, removed = existing[0], existing[1:]
        for dup in removed:
            _delete_quietly(dup)
        if only_if_changed and keep.body == body:
            return CommentResult("unchanged", keep.id, keep.html_url, len(removed))
        with github_errors(f"edit comment {keep.id} on {repo.full_name}#{pr_number}"):
            keep.edit(body)
        return CommentResult("updated", keep.id, keep.html_url, len(removed))
    with github_errors(f"comment on {repo.full_name}#{pr_number}"):
        created = repo.get_issue(pr_number).create_comment(body)
    return _settle_race(repo, pr_number, body, marker, author, created)


def _settle_race(repo: Repository, pr_number: int, body: str, marker: str, author: str | None,
                 created: IssueComment) -> CommentResult:
    marked = _marked(repo, pr_number, marker, author)
    if not marked:  # our comment was deleted by a racing run that kept an older one
        return CommentResult("created", created.id, created.html_url)
    keep, removed = marked[0], marked[1:]
    for dup in removed:
        _delete_quietly(dup)
    if keep.id != created.id and keep.body != body:
        with github_errors(f"edit comment {keep.id} on {repo.full_name}#{pr_number}"):
            keep.edit(body)
    action = "created" if keep.id == created.id else "updated"
    return CommentResult(action, keep.id, keep.html_url, len(removed))
