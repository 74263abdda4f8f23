"""The endpoints of ``tests.fakegithub``: each takes the fake, the request and the URL's groups and
returns ``(status, payload, headers)``; validation errors mirror GitHub's 404/403/422 answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import jwt

from tests.fakegithub import APP_BOT, BOT, FakeGitHub, Reply, Req, paginate

Answer = tuple[int, Any, dict[str, str]]
CONCLUSIONS = {"action_required", "cancelled", "failure", "neutral", "success", "skipped",
               "stale", "timed_out"}


def _repo(fake: FakeGitHub, full: str) -> None:
    if full not in fake.repos:
        raise Reply(404, "Not Found")


def _owned(store: dict[int, dict[str, Any]], full: str, ident: str) -> dict[str, Any]:
    """A comment, release or asset by id, 404 unless it belongs to repository ``full``."""
    item = store.get(int(ident))
    if item is None or item["repo"] != full:
        raise Reply(404, "Not Found")
    return item


def _pull(fake: FakeGitHub, full: str, n: str) -> dict[str, Any]:
    _repo(fake, full)
    pull = fake.pulls.get((full, int(n)))
    if pull is None:
        raise Reply(404, "Not Found")
    return pull


def _issue(fake: FakeGitHub, full: str, n: str) -> bool:
    """An issue or a pull request (every pull request is an issue); True for a pull request,
    404 for neither."""
    _repo(fake, full)
    if (full, int(n)) in fake.pulls:
        return True
    if (full, int(n)) in fake.issues:
        return False
    raise Reply(404, "Not Found")


def _validation(field: str, code: str = "invalid", message: str = "") -> Reply:
    return Reply(422, "Validation Failed", errors=[{"field": field, "code": code,
                                                    "message": message}])


# ---- App auth ------------------------------------------------------------------------------
def check_jwt(fake: FakeGitHub, token: str) -> dict[str, Any]:
    try:
        iss = str(jwt.decode(token, options={"verify_signature": False})["iss"])
        key = fake.apps[iss][0]
        jwt.decode(token, key, algorithms=["RS256"])
    except (jwt.PyJWTError, KeyError) as e:
        raise Reply(401, f"A JSON web token could not be decoded: {e}") from None
    return {"login": f"app-{iss}", "type": "Bot", "app_id": iss}


def app_token(fake: FakeGitHub, req: Req, inst: str) -> Answer:
    assert req.user is not None
    if int(inst) not in fake.apps[req.user["app_id"]][1]:
        raise Reply(404, "Not Found")
    token = f"ghs_installation_{len(fake.tokens)}"
    fake.tokens[token] = APP_BOT
    expires = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return 201, {"token": token, "expires_at": expires, "repository_selection": "selected",
                 "permissions": {"checks": "write", "pull_requests": "write"}}, {}


def repo_installation(fake: FakeGitHub, req: Req, full: str) -> Answer:
    _repo(fake, full)
    if full not in fake.installations:
        raise Reply(404, "Not Found")
    assert req.user is not None
    return 200, {"id": fake.installations[full], "app_id": int(req.user["app_id"]),
                 "account": {"login": full.split("/")[0], "id": 1}, "target_type": "Organization",
                 "permissions": {}, "events": []}, {}


def get_user(fake: FakeGitHub, req: Req) -> Answer:
    """The token's user; an installation (App or Actions) token has none, as on GitHub."""
    assert req.user is not None
    if req.user.get("type") == "Bot":
        raise Reply(403, "Resource not accessible by integration")
    return 200, {**req.user, "url": fake._api(f"/users/{req.user['login']}")}, {}


# ---- repository, pulls, issues -------------------------------------------------------------
def get_repo(fake: FakeGitHub, req: Req, full: str) -> Answer:
    _repo(fake, full)
    return 200, fake._repo_json(full), {}


def get_pull(fake: FakeGitHub, req: Req, full: str, n: str) -> Answer:
    return 200, _pull_json(fake, full, int(n)), {}


def list_pulls(fake: FakeGitHub, req: Req, full: str) -> Answer:
    _repo(fake, full)
    state, head = req.query.get("state", "open"), req.query.get("head")
    found = [_pull_json(fake, f, n) for (f, n), p in sorted(fake.pulls.items())
             if f == full and state in ("all", p["state"]) and head in (None, p["label"])]
    return paginate(fake, req, found)


def commit_pulls(fake: FakeGitHub, req: Req, full: str, sha: str) -> Answer:
    _repo(fake, full)
    found = [_pull_json(fake, f, n) for (f, n), p in sorted(fake.pulls.items())
             if f == full and p["head"] == sha]
    return paginate(fake, req, found)


def _pull_json(fake: FakeGitHub, full: str, n: int) -> dict[str, Any]:
    pull = _pull(fake, full, str(n))
    repo = fake._repo_json(full)
    api = fake._api(f"/repos/{full}")
    return {
        "id": 5000 + n, "number": n, "state": pull["state"], "title": f"PR {n}",
        "url": f"{api}/pulls/{n}", "issue_url": f"{api}/issues/{n}",
        "comments_url": f"{api}/issues/{n}/comments",
        "html_url": f"https://github.example/{full}/pull/{n}", "user": BOT,
        "head": {"sha": pull["head"], "ref": pull["label"].split(":")[-1],
                 "label": pull["label"], "repo": repo},
        "base": {"sha": pull["base"], "ref": "main", "label": "main", "repo": repo},
        "merged": False, "draft": False,
    }


def get_issue(fake: FakeGitHub, req: Req, full: str, n: str) -> Answer:
    pull = _issue(fake, full, n)
    api = fake._api(f"/repos/{full}")
    kind = "pull" if pull else "issues"
    issue = {"id": 6000 + int(n), "number": int(n), "state": "open",
             "title": f"{'PR' if pull else 'Issue'} {n}", "url": f"{api}/issues/{n}",
             "comments_url": f"{api}/issues/{n}/comments",
             "html_url": f"https://github.example/{full}/{kind}/{n}", "user": BOT,
             "labels": []}
    if pull:
        issue["pull_request"] = {"url": f"{api}/pulls/{n}"}
    return 200, issue, {}


def list_comments(fake: FakeGitHub, req: Req, full: str, n: str) -> Answer:
    _issue(fake, full, n)
    return paginate(fake, req, [fake._comment_json(c) for c in fake.issue_comments(full, int(n))])


def _check_body(body: Any) -> str:
    if not isinstance(body, str) or not body:
        raise _validation("body", "missing_field")
    if len(body) > 65536:
        raise _validation("body", "custom", "Body is too long (maximum is 65536 characters)")
    return body


def create_comment(fake: FakeGitHub, req: Req, full: str, n: str) -> Answer:
    _issue(fake, full, n)
    assert req.user is not None
    cid = fake.add_comment(full, int(n), _check_body(req.json().get("body")), req.user)
    return 201, fake._comment_json(fake.comments[cid]), {}


def _comment(fake: FakeGitHub, full: str, cid: str) -> dict[str, Any]:
    return _owned(fake.comments, full, cid)


def get_comment(fake: FakeGitHub, req: Req, full: str, cid: str) -> Answer:
    return 200, fake._comment_json(_comment(fake, full, cid)), {}


def edit_comment(fake: FakeGitHub, req: Req, full: str, cid: str) -> Answer:
    c = _comment(fake, full, cid)
    c["body"] = _check_body(req.json().get("body"))
    c["updated_at"] = fake._now()
    return 200, fake._comment_json(c), {}


def delete_comment(fake: FakeGitHub, req: Req, full: str, cid: str) -> Answer:
    _comment(fake, full, cid)
    del fake.comments[int(cid)]
    return 204, None, {}


def get_commit(fake: FakeGitHub, req: Req, full: str, sha: str) -> Answer:
    _repo(fake, full)
    return 200, {"sha": sha, "url": fake._api(f"/repos/{full}/commits/{sha}"),
                 "html_url": f"https://github.example/{full}/commit/{sha}",
                 "commit": {"message": "change"}, "parents": [], "files": []}, {}


# ---- checks and statuses -------------------------------------------------------------------
def _apply_check(fake: FakeGitHub, run: dict[str, Any], data: dict[str, Any]) -> None:
    for key in ("name", "status", "conclusion", "details_url", "external_id", "head_sha"):
        if key in data:
            run[key] = data[key]
    if run.get("conclusion") is not None:
        if run["conclusion"] not in CONCLUSIONS:
            raise _validation("conclusion")
        run["status"], run["completed_at"] = "completed", fake._now()
    output = data.get("output")
    if output is not None:
        if len(output.get("summary") or "") > 65535 or len(output.get("text") or "") > 65535:
            raise _validation("output", "custom", "Output summary exceeds 65535 characters")
        if not output.get("title") or not output.get("summary"):
            raise _validation("output", "missing_field")
        run["output"] = {"title": output["title"], "summary": output["summary"],
                         "text": output.get("text"), "annotations_count": 0,
                         "annotations_url": ""}


def create_check(fake: FakeGitHub, req: Req, full: str) -> Answer:
    _repo(fake, full)
    if fake.deny_checks:
        raise Reply(403, "Resource not accessible by integration")
    data = req.json()
    if not data.get("name") or not data.get("head_sha"):
        raise _validation("name" if not data.get("name") else "head_sha", "missing_field")
    run: dict[str, Any] = {"id": next(fake._ids), "repo": full, "status": "queued",
                           "conclusion": None, "started_at": fake._now(), "completed_at": None,
                           "output": {"title": None, "summary": None, "text": None,
                                      "annotations_count": 0, "annotations_url": ""}}
    _apply_check(fake, run, data)
    fake.check_runs[run["id"]] = run
    return 201, fake._check_json(run), {}


def edit_check(fake: FakeGitHub, req: Req, full: str, rid: str) -> Answer:
    run = fake.check_runs.get(int(rid))
    if run is None or run["repo"] != full:
        raise Reply(404, "Not Found")
    if fake.deny_checks:
        raise Reply(403, "Resource not accessible by integration")
    _apply_check(fake, run, req.json())
    return 200, fake._check_json(run), {}


def list_checks(fake: FakeGitHub, req: Req, full: str, sha: str) -> Answer:
    _repo(fake, full)
    name = req.query.get("check_name")
    runs = [fake._check_json(r) for r in fake.check_runs.values()
            if r["repo"] == full and r["head_sha"] == sha and name in (None, r["name"])]
    return paginate(fake, req, runs[::-1], wrap="check_runs")


def create_status(fake: FakeGitHub, req: Req, full: str, sha: str) -> Answer:
    _repo(fake, full)
    data = req.json()
    if data.get("state") not in ("error", "failure", "pending", "success"):
        raise _validation("state")
    if len(data.get("description") or "") > 140:
        raise _validation("description", "custom",
                          "description is too long (maximum is 140 characters)")
    status = {"id": next(fake._ids), "sha": sha, "repo": full, "state": data["state"],
              "description": data.get("description"), "target_url": data.get("target_url"),
              "context": data.get("context", "default"), "created_at": fake._now(),
              "creator": BOT}
    fake.statuses.append(status)
    out = {k: v for k, v in status.items() if k not in ("repo", "sha")}
    return 201, {**out, "url": fake._api(f"/repos/{full}/statuses/{sha}")}, {}


# ---- releases, assets, tags ----------------------------------------------------------------
def _release(fake: FakeGitHub, full: str, rid: str) -> dict[str, Any]:
    return _owned(fake.releases, full, rid)


def list_releases(fake: FakeGitHub, req: Req, full: str) -> Answer:
    _repo(fake, full)
    rels = sorted((r for r in fake.releases.values() if r["repo"] == full),
                  key=lambda r: r["id"], reverse=True)
    return paginate(fake, req, [fake._release_json(r) for r in rels])


def create_release(fake: FakeGitHub, req: Req, full: str) -> Answer:
    _repo(fake, full)
    data = req.json()
    tag = data.get("tag_name")
    if not tag:
        raise _validation("tag_name", "missing_field")
    if any(r["repo"] == full and r["tag_name"] == tag for r in fake.releases.values()):
        raise _validation("tag_name", "already_exists")
    stamp = fake._now()
    rel = {"id": next(fake._ids), "repo": full, "tag_name": tag, "node_id": "RE_x",
           "name": data.get("name") or tag, "body": data.get("body") or "",
           "draft": bool(data.get("draft")), "prerelease": bool(data.get("prerelease")),
           "target_commitish": data.get("target_commitish") or "main",
           "created_at": stamp, "published_at": stamp}
    fake.releases[rel["id"]] = rel
    fake.tags[full].add(tag)
    return 201, fake._release_json(rel), {}


def release_by_tag(fake: FakeGitHub, req: Req, full: str, tag: str) -> Answer:
    _repo(fake, full)
    for r in fake.releases.values():
        if r["repo"] == full and r["tag_name"] == tag:
            return 200, fake._release_json(r), {}
    raise Reply(404, "Not Found")


def get_release(fake: FakeGitHub, req: Req, full: str, rid: str) -> Answer:
    return 200, fake._release_json(_release(fake, full, rid)), {}


def edit_release(fake: FakeGitHub, req: Req, full: str, rid: str) -> Answer:
    rel = _release(fake, full, rid)
    for key in ("name", "body", "draft", "prerelease", "target_commitish"):
        if key in req.json():
            rel[key] = req.json()[key]
    return 200, fake._release_json(rel), {}


def delete_release(fake: FakeGitHub, req: Req, full: str, rid: str) -> Answer:
    _release(fake, full, rid)
    for aid in [a for a, v in fake.assets.items() if v["release"] == int(rid)]:
        del fake.assets[aid], fake.blobs[aid]
    del fake.releases[int(rid)]
    return 204, None, {}


def list_assets(fake: FakeGitHub, req: Req, full: str, rid: str) -> Answer:
    _release(fake, full, rid)
    items = [fake._asset_json(a) for a in fake.assets.values() if a["release"] == int(rid)]
    return paginate(fake, req, items)


def upload_asset(fake: FakeGitHub, req: Req, full: str, rid: str) -> Answer:
    with fake.lock:
        _release(fake, full, rid)
        name = req.query.get("name")
        if not name:
            raise _validation("name", "missing_field")
        if any(a["release"] == int(rid) and a["name"] == name for a in fake.assets.values()):
            raise _validation("name", "already_exists")
        stamp = fake._now()
        asset = {"id": next(fake._ids), "repo": full, "release": int(rid), "name": name,
                 "label": req.query.get("label") or "", "size": len(req.body),
                 "content_type": req.headers.get("Content-Type", "application/octet-stream"),
                 "created_at": stamp, "updated_at": stamp, "node_id": "RA_x"}
        fake.assets[asset["id"]], fake.blobs[asset["id"]] = asset, req.body
        return 201, fake._asset_json(asset), {}


def _asset(fake: FakeGitHub, full: str, aid: str) -> dict[str, Any]:
    return _owned(fake.assets, full, aid)


def get_asset(fake: FakeGitHub, req: Req, full: str, aid: str) -> Answer:
    a = _asset(fake, full, aid)
    if "application/octet-stream" in (req.headers.get("Accept") or ""):
        return 200, fake.blobs[a["id"]], {}
    return 200, fake._asset_json(a), {}


def edit_asset(fake: FakeGitHub, req: Req, full: str, aid: str) -> Answer:
    a = _asset(fake, full, aid)
    name = req.json().get("name") or a["name"]
    if any(o["release"] == a["release"] and o["name"] == name and o is not a
           for o in fake.assets.values()):
        raise _validation("name", "already_exists")
    a["name"], a["label"] = name, req.json().get("label", a["label"])
    a["updated_at"] = fake._now()
    return 200, fake._asset_json(a), {}


def delete_asset(fake: FakeGitHub, req: Req, full: str, aid: str) -> Answer:
    a = _asset(fake, full, aid)
    del fake.assets[a["id"]], fake.blobs[a["id"]]
    return 204, None, {}


def download(fake: FakeGitHub, full: str, tag: str, name: str) -> Answer:
    with fake.lock:
        for a in fake.assets.values():
            if (a["repo"] == full and a["name"] == name
                    and fake.releases[a["release"]]["tag_name"] == tag):
                return 200, fake.blobs[a["id"]], {}
    raise Reply(404, "Not Found")


def get_tag_ref(fake: FakeGitHub, req: Req, full: str, tag: str) -> Answer:
    _repo(fake, full)
    if tag not in fake.tags[full]:
        raise Reply(404, "Not Found")
    return 200, {"ref": f"refs/tags/{tag}", "url": fake._api(f"/repos/{full}/git/refs/tags/{tag}"),
                 "object": {"sha": "c" * 40, "type": "commit", "url": ""}}, {}


def delete_tag_ref(fake: FakeGitHub, req: Req, full: str, tag: str) -> Answer:
    _repo(fake, full)
    if tag not in fake.tags[full]:
        raise _validation("ref", "custom", "Reference does not exist")
    fake.tags[full].discard(tag)
    return 204, None, {}
