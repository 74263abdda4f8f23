"""A local fake of the GitHub REST API, for tests of the bot (not shipped).

It speaks the endpoints and JSON shapes PyGithub reads (repository, pull request, issue comments,
check runs, statuses, releases and their assets, git tag refs, App installation tokens) so that the
real client runs against it through ``base_url``. It serves under the GitHub Enterprise layout
(``/api/v3`` for the API, ``/api/uploads`` for uploads), which also exercises ``--github-url``.

Faults are injected per request: ``fail_next(2, status=502)``, ``rate_limit_next(...)``,
``down()``; ``barrier(...)`` makes concurrent requests meet so races are reproducible. Every
request is logged in ``requests`` for assertions.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

REPO, PR, HEAD_SHA, TOKEN = "acme/models", 7, "a1" * 20, "ghp_fake_token"
API = "/api/v3"
UPLOADS = "/api/uploads"
BOT = {"login": "github-actions[bot]", "id": 41898282, "type": "Bot"}
APP_BOT = {"login": "compilewatch[bot]", "id": 777, "type": "Bot"}


@dataclass
class Logged:
    method: str
    path: str
    query: dict[str, str]
    status: int = 0
    user: str | None = None
    scopes: str | None = None  # X-OAuth-Scopes of a classic token, sent back on the reply


@dataclass
class Fault:
    status: int
    remaining: float
    method: str | None = None
    path: re.Pattern[str] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "Server Error"

    def matches(self, method: str, path: str) -> bool:
        return (self.remaining > 0 and (self.method is None or self.method == method)
                and (self.path is None or bool(self.path.search(path))))


@dataclass
class Req:
    method: str
    path: str
    query: dict[str, str]
    headers: Any
    body: bytes
    user: dict[str, Any] | None

    def json(self) -> dict[str, Any]:
        return json.loads(self.body or b"{}")


class Reply(Exception):
    """Raised by a route to answer with an error status."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.payload = status, {"message": message, **extra}


class FakeGitHub:
    """In-memory GitHub; ``start()`` serves it on 127.0.0.1 with a free port."""

    def __init__(self, token: str = "ghp_fake_token") -> None:
        self.lock = threading.RLock()
        self.tokens: dict[str, dict[str, Any]] = {token: BOT}
        self.token_scopes: dict[str, str] = {}  # classic tokens: what X-OAuth-Scopes says
        self.repos: dict[str, dict[str, Any]] = {}
        self.pulls: dict[tuple[str, int], dict[str, Any]] = {}
        self.issues: set[tuple[str, int]] = set()  # issues that are not pull requests
        self.comments: dict[int, dict[str, Any]] = {}
        self.check_runs: dict[int, dict[str, Any]] = {}
        self.statuses: list[dict[str, Any]] = []
        self.releases: dict[int, dict[str, Any]] = {}
        self.assets: dict[int, dict[str, Any]] = {}
        self.blobs: dict[int, bytes] = {}
        self.tags: dict[str, set[str]] = {}
        self.apps: dict[str, tuple[bytes, set[int]]] = {}
        self.installations: dict[str, int] = {}
        self.faults: list[Fault] = []
        self.barriers: list[tuple[str, re.Pattern[str], threading.Barrier, list[int]]] = []
        self.requests: list[Logged] = []
        self.deny_checks = False
        self._ids = itertools.count(1001)
        self._tick = itertools.count()
        self._server: ThreadingHTTPServer | None = None

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> FakeGitHub:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        return self

    def stop(self) -> None:
        """Close the port: clients get 'connection refused' afterwards."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def root(self) -> str:
        assert self._server is not None, "call start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def base_url(self) -> str:
        return self.root + API

    # ---- state set-up ----------------------------------------------------------------------
    def add_repo(self, full_name: str) -> None:
        with self.lock:
            self.repos.setdefault(full_name, {"id": next(self._ids)})
            self.tags.setdefault(full_name, set())

    def add_pull(self, full_name: str, number: int, head_sha: str, base_sha: str = "b" * 40,
                 head_label: str = "contributor:feature", state: str = "open") -> None:
        self.add_repo(full_name)
        self.pulls[(full_name, number)] = {"head": head_sha, "base": base_sha,
                                           "label": head_label, "state": state}

    def add_issue(self, full_name: str, number: int) -> None:
        """An issue that is not a pull request (GitHub numbers both in one sequence)."""
        self.add_repo(full_name)
        self.issues.add((full_name, number))

    def add_comment(self, full_name: str, number: int, body: str,
                    user: dict[str, Any] = BOT) -> int:
        with self.lock:
            cid = next(self._ids)
            stamp = self._now()
            self.comments[cid] = {"id": cid, "repo": full_name, "issue": number, "body": body,
                                  "user": user, "created_at": stamp, "updated_at": stamp}
            return cid

    def add_token(self, token: str, login: str, scopes: str | None = None) -> None:
        """A user's token; ``scopes`` ("repo, workflow") makes it a classic token, whose
        replies carry ``X-OAuth-Scopes`` as GitHub's do (fine-grained tokens: None)."""
        with self.lock:
            self.tokens[token] = {"login": login, "id": next(self._ids), "type": "User"}
            if scopes is not None:
                self.token_scopes[token] = scopes

    def register_app(self, app_id: int, public_key_pem: bytes, installation_id: int,
                     repo: str) -> None:
        self.apps[str(app_id)] = (public_key_pem, {installation_id})
        self.installations[repo] = installation_id

    # ---- fault injection -------------------------------------------------------------------
    def fail_next(self, n: int, status: int = 502, method: str | None = None,
                  path: str | None = None, headers: dict[str, str] | None = None,
                  message: str = "Server Error") -> None:
        """The next ``n`` requests (matching ``method``/``path`` regex if given) fail."""
        with self.lock:
            self.faults.append(Fault(status, n, method, re.compile(path) if path else None,
                                     headers or {}, message))

    def rate_limit_next(self, n: int = 1, *, kind: str = "secondary", retry_after: int = 1,
                        reset_in: int = 0, method: str | None = None,
                        path: str | None = None) -> None:
        """Rate-limit the next requests as GitHub does.

        ``secondary``: 403 + Retry-After; ``429``: 429 + Retry-After; ``primary``: 403 with
        X-RateLimit-Remaining 0 and X-RateLimit-Reset ``reset_in`` seconds from now.
        """
        if kind == "primary":
            headers = {"X-RateLimit-Remaining": "0",
                       "X-RateLimit-Reset": str(int(time.time()) + reset_in)}
            msg = "API rate limit exceeded for installation ID 1."
            self.fail_next(n, 403, method, path, headers, msg)
        else:
            msg = "You have exceeded a secondary rate limit. Please wait a few minutes."
            status = 429 if kind == "429" else 403
            self.fail_next(n, status, method, path, {"Retry-After": str(retry_after)}, msg)

    def down(self, status: int = 503) -> None:
        """Every request fails until ``up()``."""
        self.fail_next(1 << 30, status, message="Service Unavailable")

    def up(self) -> None:
        with self.lock:
            self.faults.clear()

    def barrier(self, method: str, path: str, parties: int) -> None:
        """The first ``parties`` matching requests wait for each other (up to 60 s) once their
        answers are made and before any is sent. Waiting before the answers were made let one
        thread's whole create finish before the other's listing was made, now and then, so the
        race did not happen."""
        self.barriers.append((method, re.compile(path), threading.Barrier(parties, timeout=60),
                              [parties]))

    # ---- queries for assertions ------------------------------------------------------------
    def issue_comments(self, full_name: str, number: int) -> list[dict[str, Any]]:
        return sorted((c for c in self.comments.values()
                       if c["repo"] == full_name and c["issue"] == number), key=lambda c: c["id"])

    def calls(self, method: str, pattern: str) -> list[Logged]:
        rx = re.compile(pattern)
        return [r for r in self.requests if r.method == method and rx.search(r.path)]

    # ---- helpers used by routes ------------------------------------------------------------
    def _now(self) -> str:
        t = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=next(self._tick))
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")

    def _api(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def _repo_json(self, full: str) -> dict[str, Any]:
        owner, name = full.split("/")
        return {
            "id": self.repos[full]["id"], "name": name, "full_name": full, "private": False,
            "owner": {"login": owner, "id": 1, "type": "Organization"},
            "url": self._api(f"/repos/{full}"), "html_url": f"https://github.example/{full}",
            "default_branch": "main", "fork": False,
        }

    def _comment_json(self, c: dict[str, Any]) -> dict[str, Any]:
        full, n = c["repo"], c["issue"]
        return {
            "id": c["id"], "node_id": f"IC_{c['id']}", "body": c["body"], "user": c["user"],
            "url": self._api(f"/repos/{full}/issues/comments/{c['id']}"),
            "html_url": f"https://github.example/{full}/"
                        f"{'issues' if (full, n) in self.issues else 'pull'}/{n}"
                        f"#issuecomment-{c['id']}",
            "issue_url": self._api(f"/repos/{full}/issues/{n}"),
            "created_at": c["created_at"], "updated_at": c["updated_at"],
            "author_association": "NONE",
        }

    def _check_json(self, r: dict[str, Any]) -> dict[str, Any]:
        full = r["repo"]
        return {**{k: v for k, v in r.items() if k != "repo"},
                "url": self._api(f"/repos/{full}/check-runs/{r['id']}"),
                "html_url": f"https://github.example/{full}/runs/{r['id']}",
                "check_suite": {"id": 1}, "app": {"id": 15368, "slug": "github-actions"}}

    def _release_json(self, r: dict[str, Any]) -> dict[str, Any]:
        full, rid = r["repo"], r["id"]
        assets = [self._asset_json(a) for a in self.assets.values() if a["release"] == rid]
        return {**{k: v for k, v in r.items() if k != "repo"},
                "url": self._api(f"/repos/{full}/releases/{rid}"),
                "assets_url": self._api(f"/repos/{full}/releases/{rid}/assets"),
                "upload_url": f"{self.root}{UPLOADS}/repos/{full}/releases/{rid}/assets"
                              "{?name,label}",
                "html_url": f"https://github.example/{full}/releases/tag/{r['tag_name']}",
                "author": BOT, "assets": assets}

    def _asset_json(self, a: dict[str, Any]) -> dict[str, Any]:
        full = a["repo"]
        tag = self.releases[a["release"]]["tag_name"]
        return {**{k: v for k, v in a.items() if k not in ("repo", "release")},
                "url": self._api(f"/repos/{full}/releases/assets/{a['id']}"),
                "browser_download_url": f"{self.root}/{full}/releases/download/{tag}/{a['name']}",
                "state": "uploaded", "download_count": 0, "uploader": BOT}


# ---- routes ----------------------------------------------------------------------------------
R = r"(?P<full>[^/]+/[^/]+)"
ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    (m, re.compile(f"^{p}$"), h) for m, p, h in [
        ("POST", r"/app/installations/(?P<inst>\d+)/access_tokens", "app_token"),
        ("GET", rf"/repos/{R}/installation", "repo_installation"),
        ("GET", r"/user", "get_user"),
        ("GET", rf"/repos/{R}", "get_repo"),
        ("GET", rf"/repos/{R}/pulls", "list_pulls"),
        ("GET", rf"/repos/{R}/pulls/(?P<n>\d+)", "get_pull"),
        ("GET", rf"/repos/{R}/commits/(?P<sha>\w+)/pulls", "commit_pulls"),
        ("GET", rf"/repos/{R}/issues/(?P<n>\d+)", "get_issue"),
        ("GET", rf"/repos/{R}/issues/(?P<n>\d+)/comments", "list_comments"),
        ("POST", rf"/repos/{R}/issues/(?P<n>\d+)/comments", "create_comment"),
        ("GET", rf"/repos/{R}/issues/comments/(?P<cid>\d+)", "get_comment"),
        ("PATCH", rf"/repos/{R}/issues/comments/(?P<cid>\d+)", "edit_comment"),
        ("DELETE", rf"/repos/{R}/issues/comments/(?P<cid>\d+)", "delete_comment"),
        ("GET", rf"/repos/{R}/commits/(?P<sha>\w+)", "get_commit"),
        ("POST", rf"/repos/{R}/check-runs", "create_check"),
        ("PATCH", rf"/repos/{R}/check-runs/(?P<rid>\d+)", "edit_check"),
        ("GET", rf"/repos/{R}/commits/(?P<sha>\w+)/check-runs", "list_checks"),
        ("POST", rf"/repos/{R}/statuses/(?P<sha>\w+)", "create_status"),
        ("GET", rf"/repos/{R}/releases", "list_releases"),
        ("POST", rf"/repos/{R}/releases", "create_release"),
        ("GET", rf"/repos/{R}/releases/tags/(?P<tag>[^/]+)", "release_by_tag"),
        ("GET", rf"/repos/{R}/releases/(?P<rid>\d+)", "get_release"),
        ("PATCH", rf"/repos/{R}/releases/(?P<rid>\d+)", "edit_release"),
        ("DELETE", rf"/repos/{R}/releases/(?P<rid>\d+)", "delete_release"),
        ("GET", rf"/repos/{R}/releases/(?P<rid>\d+)/assets", "list_assets"),
        ("GET", rf"/repos/{R}/releases/assets/(?P<aid>\d+)", "get_asset"),
        ("PATCH", rf"/repos/{R}/releases/assets/(?P<aid>\d+)", "edit_asset"),
        ("DELETE", rf"/repos/{R}/releases/assets/(?P<aid>\d+)", "delete_asset"),
        ("GET", rf"/repos/{R}/git/ref/tags/(?P<tag>[^/]+)", "get_tag_ref"),
        ("DELETE", rf"/repos/{R}/git/refs/tags/(?P<tag>[^/]+)", "delete_tag_ref"),
    ]
]
UPLOAD_ROUTE = re.compile(rf"^/repos/{R}/releases/(?P<rid>\d+)/assets$")
DOWNLOAD_ROUTE = re.compile(rf"^/{R}/releases/download/(?P<tag>[^/]+)/(?P<name>[^/]+)$")


class _Handler(BaseHTTPRequestHandler):
    fake: FakeGitHub
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else each keep-alive reply waits on a delayed ACK

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while (size := int(self.rfile.readline().strip() or b"0", 16)) > 0:
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _serve(self, method: str) -> None:
        fake = self.fake
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = self._read_body()
        entry = Logged(method, url.path, query)
        with fake.lock:
            fake.requests.append(entry)
            fault = next((f for f in fake.faults if f.matches(method, url.path)), None)
            if fault is not None:
                fault.remaining -= 1
        if fault is not None:
            self._wait_at_barrier(method, url.path)
            return self._send(entry, fault.status, {"message": fault.message}, fault.headers)
        try:
            status, payload, headers = self._route(method, url.path, query, body, entry)
        except Reply as r:
            status, payload, headers = r.status, r.payload, {}
        # after the answer is made, before it is sent: racing requests each see the state as
        # it was when they met, whichever thread the server happens to run first
        self._wait_at_barrier(method, url.path)
        self._send(entry, status, payload, headers)

    def _wait_at_barrier(self, method: str, path: str) -> None:
        for m, rx, barrier, left in self.fake.barriers:
            with self.fake.lock:
                take = m == method and rx.search(path) is not None and left[0] > 0
                if take:
                    left[0] -= 1
            if take:
                barrier.wait()

    def _route(self, method: str, path: str, query: dict[str, str], body: bytes,
               entry: Logged) -> tuple[int, Any, dict[str, str]]:
        fake = self.fake
        if method == "GET" and (m := DOWNLOAD_ROUTE.match(path)):
            return _routes.download(fake, **m.groupdict())
        user = self._authenticate(path, entry)
        entry.user = user["login"] if user else None
        req = Req(method, path, query, self.headers, body, user)
        if path.startswith(UPLOADS) and method == "POST":
            m = UPLOAD_ROUTE.match(path[len(UPLOADS):])
            if m:
                return _routes.upload_asset(fake, req, **m.groupdict())
        if path.startswith(API):
            sub = path[len(API):]
            for m_, rx, name in ROUTES:
                if m_ == method and (m := rx.match(sub)):
                    with fake.lock:
                        return getattr(_routes, name)(fake, req, **m.groupdict())
        raise Reply(404, "Not Found")

    def _authenticate(self, path: str, entry: Logged) -> dict[str, Any] | None:
        scheme, _, cred = (self.headers.get("Authorization") or "").partition(" ")
        entry.scopes = self.fake.token_scopes.get(cred)
        scheme = scheme.lower()
        if path.startswith(f"{API}/app/") or path.endswith("/installation"):
            if scheme != "bearer":
                raise Reply(401, "A JSON web token could not be decoded")
            return _routes.check_jwt(self.fake, cred)
        user = self.fake.tokens.get(cred) if scheme in ("token", "bearer") else None
        if user is None:
            raise Reply(401, "Bad credentials")
        return user

    def _send(self, entry: Logged, status: int, payload: Any, headers: dict[str, str]) -> None:
        entry.status = status
        data = payload if isinstance(payload, bytes) else (
            b"" if payload is None else json.dumps(payload).encode())
        self.send_response(status)
        ctype = "application/octet-stream" if isinstance(payload, bytes) else "application/json"
        self.send_header("Content-Type", f"{ctype}; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        base = {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "4999",
                "X-RateLimit-Reset": str(int(time.time()) + 3600)}
        if entry.scopes is not None:
            base["X-OAuth-Scopes"] = entry.scopes
        for k, v in {**base, **headers}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)


def paginate(fake: FakeGitHub, req: Req, items: list[Any],
             wrap: str | None = None) -> tuple[int, Any, dict[str, str]]:
    """Slice by ``per_page``/``page`` and add GitHub's ``Link`` header."""
    per_page = min(int(req.query.get("per_page", 30)), 100)
    page = max(int(req.query.get("page", 1)), 1)
    last = max(1, -(-len(items) // per_page))
    chunk = items[(page - 1) * per_page: page * per_page]

    def link(p: int) -> str:
        q = urlencode({**req.query, "per_page": per_page, "page": p})
        return f"<{fake.root}{req.path}?{q}>"

    rels = []
    if page < last:
        rels += [f'{link(page + 1)}; rel="next"', f'{link(last)}; rel="last"']
    if page > 1:
        rels += [f'{link(page - 1)}; rel="prev"', f'{link(1)}; rel="first"']
    headers = {"Link": ", ".join(rels)} if rels else {}
    payload = {"total_count": len(items), wrap: chunk} if wrap else chunk
    return 200, payload, headers


from tests import fakegithub_routes as _routes  # noqa: E402  (routes need the classes above)
