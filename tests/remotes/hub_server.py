"""A small Hugging Face Hub API server for tests: just the endpoints huggingface_hub calls here.

It keeps repositories in memory as git-like commits (each a full path → bytes map with a parent),
listens on 127.0.0.1 on a free port, and answers the real ``huggingface_hub`` client:

- ``POST /api/repos/create``                         create a repo (409 when it exists)
- ``GET  /api/{type}s/{repo}/revision/{rev}``        repo info with the commit ``sha``
- ``POST /api/{type}s/{repo}/preupload/{rev}``       upload mode: always ``regular`` (base64 in
  the commit payload), with the existing file's git oid so unchanged files are skipped
- ``POST /api/validate-yaml``                        README front matter check (PyYAML)
- ``POST /api/{type}s/{repo}/commit/{rev}``          NDJSON commit; ``parentCommit`` that is not
  the branch head → 412 "A commit has happened since", as the Hub answers
- ``POST /api/{type}s/{repo}/paths-info/{rev}``      which paths exist
- ``GET  /api/{type}s/{repo}/tree/{rev}[/{path}]``   list files (``recursive``)
- ``HEAD|GET /{repo}/resolve/{rev}/{path}``          download, with ``X-Repo-Commit``, ``ETag``
  and ``Content-Length``; errors carry ``X-Error-Code`` (RepoNotFound, RevisionNotFound,
  EntryNotFound) which huggingface_hub turns into its typed errors

Files are never LFS here: the client then sends every file inline in the commit, which is what
it does for small regular files on the real Hub.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

USER = "tester"


def git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass
class Commit:
    sha: str
    parent: str | None
    message: str
    files: dict[str, bytes]


@dataclass
class Repo:
    repo_id: str
    repo_type: str
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)

    def resolve(self, rev: str) -> Commit | None:
        if rev in self.branches:
            return self.commits[self.branches[rev]]
        matches = [c for sha, c in self.commits.items() if len(rev) >= 7 and sha.startswith(rev)]
        return matches[0] if len(matches) == 1 else None


class HubState:
    """Everything the server holds, plus what tests want to look at afterwards."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.lock = threading.Lock()
        self.authorizations: list[str | None] = []
        self.requests: list[tuple[str, str]] = []
        self._counter = itertools.count()

    def new_commit(self, repo: Repo, branch: str, files: dict[str, bytes], message: str) -> Commit:
        parent = repo.branches.get(branch)
        seed = f"{repo.repo_id}:{parent}:{message}:{next(self._counter)}".encode()
        oids = b"".join(sorted(git_oid(v).encode() for v in files.values()))
        sha = hashlib.sha1(seed + oids, usedforsecurity=False).hexdigest()
        commit = Commit(sha, parent, message, files)
        repo.commits[commit.sha] = commit
        repo.branches[branch] = commit.sha
        return commit

    def create(self, repo_id: str, repo_type: str = "model") -> Repo:
        repo = Repo(repo_id, repo_type)
        # the Hub starts every repository with a commit holding .gitattributes
        self.new_commit(repo, "main", {".gitattributes": b"*.safetensors filter=lfs\n"},
                        "initial commit")
        self.repos[repo_id] = repo
        return repo

    def commit_directly(self, repo_id: str, files: dict[str, bytes], message: str = "other") -> str:
        """Commit as another client would, moving the branch under a running push."""
        with self.lock:
            repo = self.repos[repo_id]
            head = repo.commits[repo.branches["main"]]
            return self.new_commit(repo, "main", {**head.files, **files}, message).sha


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args) -> None:  # keep test output quiet
        pass

    # ---- plumbing -----------------------------------------------------------------------

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status: int, payload: object = None, headers: dict | None = None,
              raw: bytes | None = None) -> None:
        if raw is not None:
            body = raw
        else:
            body = json.dumps(payload).encode() if payload is not None else b""
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if raw is None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, message: str, code: str | None = None,
               commit: str | None = None) -> None:
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        if commit:
            headers["X-Repo-Commit"] = commit
        self._send(status, {"error": message}, headers)

    def _route(self) -> None:
        state = self.server.state
        parts = urlsplit(self.path)
        segments = [unquote(s) for s in parts.path.strip("/").split("/")]
        query = parse_qs(parts.query)
        with state.lock:
            state.authorizations.append(self.headers.get("Authorization"))
            state.requests.append((self.command, parts.path))
        body = self._body() if self.command in ("POST", "PUT") else b""
        if segments[:2] == ["api", "validate-yaml"]:
            return self._validate_yaml(body)
        if segments[:3] == ["api", "repos", "create"]:
            return self._create(json.loads(body))
        if segments[0] == "api" and len(segments) >= 6 and segments[1] in ("models", "datasets"):
            repo_id, action, rev = f"{segments[2]}/{segments[3]}", segments[4], segments[5]
            rest = "/".join(segments[6:])
            return self._api(repo_id, action, rev, rest, query, body)
        if segments[0] == "datasets":
            segments = segments[1:]
        if len(segments) >= 5 and segments[2] == "resolve":
            repo_id, path = f"{segments[0]}/{segments[1]}", "/".join(segments[4:])
            return self._resolve(repo_id, segments[3], path)
        return self._error(404, f"no route for {self.command} {parts.path}")

    do_GET = do_POST = do_HEAD = _route

    # ---- endpoints ----------------------------------------------------------------------

    def _validate_yaml(self, body: bytes) -> None:
        content = json.loads(body)["content"]
        try:
            if content.startswith("---"):
                yaml.safe_load(content.split("---", 2)[1])
        except yaml.YAMLError as exc:
            return self._send(400, {"errors": [{"message": str(exc)}], "warnings": []})
        return self._send(200, {"errors": [], "warnings": []})

    def _create(self, payload: dict) -> None:
        repo_id = f"{payload.get('organization') or USER}/{payload['name']}"
        state = self.server.state
        with state.lock:
            if repo_id in state.repos:
                # the Hub names the existing repo's url; create_repo(exist_ok=True) reads it
                return self._send(409, {"error": "You already created this model repo",
                                        "url": f"{self.server.endpoint}/{repo_id}"})
            state.create(repo_id, payload.get("type") or "model")
        return self._send(200, {"url": f"{self.server.endpoint}/{repo_id}", "name": repo_id})

    def _lookup(self, repo_id: str, rev: str) -> tuple[Repo, Commit] | None:
        repo = self.server.state.repos.get(repo_id)
        if repo is None:
            self._error(404, "Repository not found", "RepoNotFound")
            return None
        commit = repo.resolve(rev)
        if commit is None:
            self._error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
            return None
        return repo, commit

    def _api(self, repo_id: str, action: str, rev: str, rest: str, query: dict,
             body: bytes) -> None:
        state = self.server.state
        with state.lock:
            found = self._lookup(repo_id, rev)
            if found is None:
                return None
            repo, commit = found
            if action == "revision":
                siblings = [{"rfilename": p} for p in sorted(commit.files)]
                return self._send(200, {"id": repo_id, "sha": commit.sha, "private": False,
                                        "siblings": siblings})
            if action == "preupload":
                files = json.loads(body)["files"]
                return self._send(200, {"files": [
                    {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                     "oid": git_oid(commit.files[f["path"]]) if f["path"] in commit.files else None}
                    for f in files]})
            if action == "paths-info":
                form = parse_qs(body.decode())
                return self._send(200, [
                    {"type": "file", "path": p, "size": len(commit.files[p]),
                     "oid": git_oid(commit.files[p])}
                    for p in form.get("paths", []) if p in commit.files])
            if action == "tree":
                recursive = query.get("recursive", ["false"])[0].lower() == "true"
                return self._tree(commit, rest, recursive)
            if action == "commit":
                return self._commit(repo, rev, commit, body)
        return self._error(404, f"unknown action {action}")

    def _tree(self, commit: Commit, path: str, recursive: bool) -> None:
        prefix = f"{path}/" if path else ""
        under = sorted(p for p in commit.files if p.startswith(prefix))
        if path and not under:
            return self._error(404, f"{path} does not exist", "EntryNotFound", commit.sha)
        entries, folders = [], set()
        for p in under:
            rel = p[len(prefix):]
            if "/" in rel and not recursive:
                folders.add(prefix + rel.split("/")[0])
                continue
            if recursive:
                parts = rel.split("/")[:-1]
                folders.update(prefix + "/".join(parts[: i + 1]) for i in range(len(parts)))
            entries.append({"type": "file", "path": p, "size": len(commit.files[p]),
                            "oid": git_oid(commit.files[p])})
        entries += [{"type": "directory", "path": f, "oid": "0" * 40} for f in sorted(folders)]
        return self._send(200, entries)

    def _commit(self, repo: Repo, branch: str, head: Commit, body: bytes) -> None:
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        header = lines[0]["value"]
        parent = header.get("parentCommit")
        if parent and not head.sha.startswith(parent):
            # the message and status the Hub gives (huggingface/dataset-viewer#2206)
            return self._error(412, "A commit has happened since. Please refresh and try again.")
        files = dict(head.files)
        for line in lines[1:]:
            key, value = line["key"], line["value"]
            if key == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif key == "deletedFile":
                files.pop(value["path"], None)
            elif key == "deletedFolder":
                folder = value["path"].rstrip("/") + "/"
                files = {p: v for p, v in files.items() if not p.startswith(folder)}
            else:
                return self._error(400, f"this test server does not take {key} operations")
        commit = self.server.state.new_commit(repo, branch, files, header["summary"])
        url = f"{self.server.endpoint}/{repo.repo_id}/commit/{commit.sha}"
        return self._send(200, {"success": True, "commitOid": commit.sha, "commitUrl": url})

    def _resolve(self, repo_id: str, rev: str, path: str) -> None:
        state = self.server.state
        with state.lock:
            found = self._lookup(repo_id, rev)
            if found is None:
                return None
            _, commit = found
            data = commit.files.get(path)
        if data is None:
            return self._error(404, "Entry not found", "EntryNotFound", commit.sha)
        return self._send(200, raw=data, headers={
            "X-Repo-Commit": commit.sha, "ETag": f'"{git_oid(data)}"',
            "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: HubState
    endpoint: str


class HubServer:
    """Start with :meth:`start`, point ``HF_ENDPOINT`` at :attr:`endpoint`, :meth:`stop` after."""

    def __init__(self) -> None:
        self.state = HubState()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        assert self._server is not None, "start() first"
        return self._server.endpoint

    def start(self) -> HubServer:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        host, port = self._server.server_address[:2]
        self._server.state = self.state
        self._server.endpoint = f"http://{host}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="hub-test-server")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = None

    def files(self, repo_id: str, rev: str = "main") -> dict[str, bytes]:
        with self.state.lock:
            return dict(self.state.repos[repo_id].resolve(rev).files)

    def head(self, repo_id: str) -> str:
        with self.state.lock:
            return self.state.repos[repo_id].branches["main"]
