"""A real Streamlit server and Debian's Chromium driven by Playwright.

Every test fails on a browser console error and on any request that leaves localhost. Screenshots go to the
git-ignored tests/e2e/screenshots/.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]

CHROMIUM = os.environ.get("ENCODERLAB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_streamlit(env: dict[str, str], log: Path) -> tuple[str, subprocess.Popen]:
    """`streamlit run app/serve.py` (app/main.py behind its deep-link redirect, as `make run` does) on a free port
    with ``env``; returns its URL once healthy, and the process (stop it with ``stop_streamlit``)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install chromium).")
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "app/serve.py",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
    ]
    fh = open(log, "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
    proc.log_file = fh
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read().strip() == b"ok":
                return url, proc
        except OSError:
            time.sleep(0.3)
        if proc.poll() is not None:
            pytest.fail("streamlit exited early:\n" + log.read_text())
    proc.kill()
    pytest.fail("streamlit did not become healthy in 90s:\n" + log.read_text())


def stop_streamlit(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    proc.log_file.close()


@pytest.fixture(scope="session")
def server(tiny_zoo, tmp_path_factory):
    """A real server on a free port with the tiny zoo as the bundled models."""
    env = {
        **os.environ,
        "ENCODERLAB_ZOO": str(tiny_zoo),
        "HF_HUB_OFFLINE": "1",
        "ENCODERLAB_RUNS": str(tmp_path_factory.mktemp("runs")),
        "PYTHONUNBUFFERED": "1",
    }
    url, proc = start_streamlit(env, tmp_path_factory.mktemp("server") / "streamlit.log")
    yield url
    stop_streamlit(proc)


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


class PageWatch:
    """Console errors and off-localhost requests seen by one page."""

    def __init__(self):
        self.console_errors: list[str] = []
        self.external: list[str] = []
        self.dialogs: list[str] = []


@pytest.fixture()
def page(browser, server):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    watch = PageWatch()

    def on_console(msg):
        if msg.type == "error":
            watch.console_errors.append(f"{msg.text} ({(msg.location or {}).get('url', '')})")

    def on_request(req):
        host = urlparse(req.url).hostname or ""
        if urlparse(req.url).scheme in ("http", "https", "ws", "wss") and host not in LOCAL_HOSTS:
            watch.external.append(req.url)

    def on_response(resp):
        if resp.status >= 400:
            watch.console_errors.append(f"HTTP {resp.status} {resp.url}")

    def on_dialog(d):
        watch.dialogs.append(d.message)
        d.dismiss()

    pg.on("console", on_console)
    pg.on("request", on_request)
    pg.on("dialog", on_dialog)
    pg.on("response", on_response)
    pg.watch = watch
    pg.base_url = server
    yield pg
    ctx.close()
    assert not watch.external, f"requests left localhost: {watch.external}"
    assert not watch.console_errors, f"browser console errors: {watch.console_errors}"
