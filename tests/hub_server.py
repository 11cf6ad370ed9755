"""A local HTTP server that speaks the Hugging Face Hub's file protocol, for tests (this machine has no Hub).

huggingface_hub's real download path (``snapshot_download`` through ``HF_ENDPOINT``) runs against it:
- ``GET /api/models/<repo>/revision/<rev>``: the repo's info (its commit ``sha`` and ``siblings``);
- ``GET /api/models/<repo>/tree/<rev>[/<path>]``: the file listing (path, size, oid, lfs);
- ``HEAD|GET /<repo>/resolve/<rev>/<file>``: a file, with the ``X-Repo-Commit``, ``ETag``/``X-Linked-Etag`` and
  ``X-Linked-Size`` headers the client reads, and ``Range`` for resumed downloads.

Each repo is a folder of files. ``throttle_bps`` slows large files down (so a progress bar has time to move),
and ``cut_after`` drops the connection once that many bytes of one file body have gone out (a network cut
halfway), for the next ``cuts`` bodies (then downloads go through again).
Every request is recorded in ``requests`` so a test can tell a cached load from a download.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"
LFS_MIN = 1024  # files at least this large are served as LFS files (their sha256 is their etag), as the Hub does


class HubServer:
    def __init__(self, repos: dict[str, Path], throttle_bps: float | None = None):
        self.repos = {k: Path(v) for k, v in repos.items()}
        self.throttle_bps = throttle_bps
        self.cut_after: int | None = None  # bytes of one file body, then the connection is dropped
        self.cuts = 1  # how many bodies are cut before the network is back
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._hashes: dict[Path, tuple[str, str]] = {}
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> HubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -------------------------------------------------------------------------------------- the protocol
    def files(self, repo: str) -> list[Path]:
        root = self.repos[repo]
        return sorted(p for p in root.rglob("*") if p.is_file())

    def hashes(self, path: Path) -> tuple[str, str]:
        """(git blob sha1, sha256) of a file, as the Hub reports them."""
        with self._lock:
            if path not in self._hashes:
                data = path.read_bytes()
                blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
                self._hashes[path] = (blob, hashlib.sha256(data).hexdigest())
            return self._hashes[path]

    def entry(self, repo: str, path: Path) -> dict:
        blob, sha = self.hashes(path)
        size = path.stat().st_size
        e = {"type": "file", "path": path.relative_to(self.repos[repo]).as_posix(), "size": size, "oid": blob}
        if size >= LFS_MIN:
            e["lfs"] = {"oid": sha, "size": size, "pointerSize": 134}
        return e

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet: tests print what they need
                pass

            def _json(self, obj, status: int = 200) -> None:
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _missing(self, what: str) -> None:
                body = json.dumps({"error": what}).encode()
                self.send_response(404)
                self.send_header("X-Error-Code", "RepoNotFound" if "repo" in what.lower() else "EntryNotFound")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_HEAD(self) -> None:
                self._serve(head=True)

            def do_GET(self) -> None:
                self._serve(head=False)

            def _serve(self, head: bool) -> None:
                path = unquote(urlparse(self.path).path)
                hub.requests.append(
                    (self.command, path if "Range" not in self.headers else f"{path} ({self.headers['Range']})")
                )
                m = re.fullmatch(r"/api/models/(.+?)/revision/([^/]+)", path)
                if m:
                    return self._info(m.group(1))
                m = re.fullmatch(r"/api/models/(.+?)/tree/([^/]+)(/.*)?", path)
                if m:
                    return self._tree(m.group(1), (m.group(3) or "").strip("/"))
                m = re.fullmatch(r"/(.+?)/resolve/([^/]+)/(.+)", path)
                if m:
                    return self._file(m.group(1), m.group(3), head)
                self._missing(f"no route for {path}")

            def _info(self, repo: str) -> None:
                if repo not in hub.repos:
                    return self._missing(f"Repository {repo} not found")
                siblings = [{"rfilename": hub.entry(repo, p)["path"]} for p in hub.files(repo)]
                self._json({"id": repo, "modelId": repo, "sha": COMMIT, "siblings": siblings, "private": False})

            def _tree(self, repo: str, sub: str) -> None:
                if repo not in hub.repos:
                    return self._missing(f"Repository {repo} not found")
                entries = [hub.entry(repo, p) for p in hub.files(repo)]
                self._json([e for e in entries if e["path"].startswith(sub)])

            def _file(self, repo: str, name: str, head: bool) -> None:
                if repo not in hub.repos:
                    return self._missing(f"Repository {repo} not found")
                p = hub.repos[repo] / name
                if not p.is_file():
                    return self._missing(f"Entry {name} not found")
                blob, sha = hub.hashes(p)
                size = p.stat().st_size
                etag = sha if size >= LFS_MIN else blob
                start = 0
                rng = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", "") or "")
                if rng and not head:
                    start = int(rng.group(1))
                self.send_response(206 if start else 200)
                self.send_header("X-Repo-Commit", COMMIT)
                self.send_header("ETag", f'"{etag}"')
                if size >= LFS_MIN:
                    self.send_header("X-Linked-Etag", f'"{sha}"')
                    self.send_header("X-Linked-Size", str(size))
                self.send_header("Content-Length", str(size - start))
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
                self.send_header("Accept-Ranges", "bytes")
                self.end_headers()
                if head:
                    return
                self._body(p.read_bytes()[start:])

            def _body(self, data: bytes) -> None:
                chunk = 64 * 1024
                sent = 0
                cut = hub.cut_after
                while sent < len(data):
                    if cut is not None and sent >= cut and hub.cuts > 0:
                        hub.cuts -= 1
                        self.close_connection = True
                        try:
                            self.connection.shutdown(2)  # the network goes away mid-file
                        except OSError:
                            pass
                        return
                    part = data[sent : sent + chunk]
                    self.wfile.write(part)
                    sent += len(part)
                    if hub.throttle_bps and len(data) >= LFS_MIN:
                        time.sleep(len(part) / hub.throttle_bps)

        return Handler


def go_online(monkeypatch, cache_dir: Path) -> Path:
    """Make this test process a machine with network: downloads allowed and an empty HF cache of its own.

    huggingface_hub reads HF_HUB_OFFLINE and the cache folder once, at import, and the test suite starts offline
    (tests/conftest.py), so its module constants are patched as well as the environment."""
    import huggingface_hub.constants as hc

    for var in ("HF_HUB_OFFLINE", "ENCODERLAB_ALLOW_DOWNLOAD", "ENCODERLAB_HOSTED"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(cache_dir))
    return cache_dir
