"""A local stand-in for the Hugging Face hub's file API, for huggingface_hub's own client (``HF_ENDPOINT``).

It answers what ``HfApi.model_info(..., files_metadata=True)``, ``hf_hub_download`` and the loader's one-request
check ask: ``GET /api/models/ORG/NAME[/revision/REV]`` (the commit and each file's size, git blob id and, for LFS
files, SHA-256), and ``HEAD`` / ``GET /ORG/NAME/resolve/REV/FILE`` with the headers huggingface_hub reads
(``X-Repo-Commit``, ``ETag``, ``X-Linked-Etag``, ``X-Linked-Size``, ``Content-Length``). A repository holds commits,
each a ``{file: bytes}`` map; ``main`` is the last. Every request is logged (``requests``), and a file may be served
with other bytes than the ones its listing states (``corrupt``), to test verification.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    """``repos``: repository -> list of (commit, {file: bytes}); ``main`` is the last commit of each."""

    def __init__(self) -> None:
        self.repos: dict[str, list[tuple[str, dict[str, bytes]]]] = {}
        self.corrupt: set[tuple[str, str]] = set()
        self.requests: list[tuple[str, str]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def add(self, repo: str, commit: str, files: dict[str, bytes]) -> None:
        self.repos.setdefault(repo, []).append((commit, files))

    def start(self) -> FakeHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def commit_of(self, repo: str, revision: str) -> tuple[str, dict[str, bytes]] | None:
        commits = self.repos.get(repo)
        if not commits:
            return None
        if revision == "main":
            return commits[-1]
        return next((c for c in commits if c[0] == revision), None)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                self._answer(body=False)

            def do_GET(self) -> None:
                self._answer(body=True)

            def _fail(self, code: int, error: str) -> None:
                self.send_response(code)
                self.send_header("X-Error-Code", error)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _answer(self, body: bool) -> None:
                path = unquote(urlparse(self.path).path)
                hub.requests.append((self.command, path))
                parts = path.strip("/").split("/")
                if parts[:2] == ["api", "models"] and len(parts) >= 4:
                    return self._info("/".join(parts[2:4]), parts[5] if len(parts) >= 6 else "main")
                if len(parts) >= 5 and parts[2] == "resolve":
                    return self._file("/".join(parts[:2]), parts[3], "/".join(parts[4:]), body)
                return self._fail(404, "EntryNotFound")

            def _info(self, repo: str, revision: str) -> None:
                found = hub.commit_of(repo, revision)
                if found is None:
                    return self._fail(404, "RepoNotFound" if repo not in hub.repos else "RevisionNotFound")
                commit, files = found
                siblings = []
                for name, data in sorted(files.items()):
                    item: dict = {"rfilename": name, "size": len(data), "blobId": blob_id(data)}
                    if name.endswith(LFS_SUFFIXES):
                        item["lfs"] = {
                            "size": len(data),
                            "sha256": hashlib.sha256(data).hexdigest(),
                            "pointerSize": 134,
                        }
                    siblings.append(item)
                raw = json.dumps({"id": repo, "modelId": repo, "sha": commit, "siblings": siblings}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _file(self, repo: str, revision: str, name: str, body: bool) -> None:
                found = hub.commit_of(repo, revision)
                if found is None:
                    return self._fail(404, "RepoNotFound" if repo not in hub.repos else "RevisionNotFound")
                commit, files = found
                if name not in files:
                    return self._fail(404, "EntryNotFound")
                data = files[name]
                etag = hashlib.sha256(data).hexdigest() if name.endswith(LFS_SUFFIXES) else blob_id(data)
                if (repo, name) in hub.corrupt:
                    data = bytes([data[0] ^ 1]) + data[1:]
                self.send_response(200)
                self.send_header("X-Repo-Commit", commit)
                self.send_header("ETag", f'"{etag}"')
                if name.endswith(LFS_SUFFIXES):
                    self.send_header("X-Linked-Etag", f'"{etag}"')
                    self.send_header("X-Linked-Size", str(len(data)))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

        return Handler
