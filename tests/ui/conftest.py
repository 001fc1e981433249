"""Browser tests: a real JupyterLab server and Debian's headless Chromium driven by Playwright.

Run apart from the other tests (`pytest -p no:asyncio tests/ui`): Playwright's sync API cannot
run under the event loop that pytest-jupyter installs for every test. Fixtures: `lab` (a running
JupyterLab: url, token, root dir), `page` (a fresh browser page) and `console_errors` (what the
page logged as errors). Screenshots go to `test-output/`.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("NBTOOLKIT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
OUTPUT = Path(__file__).resolve().parents[2] / "test-output"
LAB_START_TIMEOUT_S = 90


@dataclass(frozen=True)
class Lab:
    """A running JupyterLab: its base URL, token and root directory (where notebooks go)."""

    url: str
    token: str
    root_dir: Path

    def tree(self, path: str) -> str:
        """The URL that opens `path` (relative to root_dir) in Lab."""
        return f"{self.url}lab/tree/{path}?token={self.token}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _quiet_settings(settings_dir: Path) -> None:
    """No "Jupyter news" toast: it would fetch from the internet and cover the page."""
    path = settings_dir / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"fetchNews": "false"}))


@pytest.fixture(scope="session")
def lab(tmp_path_factory) -> Iterator[Lab]:
    base = tmp_path_factory.mktemp("lab")
    root, settings = base / "root", base / "settings"
    root.mkdir()
    _quiet_settings(settings)
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTERLAB_WORKSPACES_DIR": str(base / "ws"),
           "JUPYTER_CONFIG_DIR": str(base / "config"), "NBTOOLKIT_HOME": str(base / "nbhome"),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    argv = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
            f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}"]
    if os.geteuid() == 0:
        argv.append("--allow-root")
    log = open(base / "lab.log", "wb")
    server = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + LAB_START_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(f"{url}api/status?token={token}", timeout=5) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise RuntimeError(f"JupyterLab did not start: {(base / 'lab.log').read_text()[-3000:]}")
        time.sleep(0.5)
    try:
        yield Lab(url=url, token=token, root_dir=root)
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="session")
def browser_context(tmp_path_factory):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM}; `apt-get install -y chromium` (make test does it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, args=CHROMIUM_ARGS,
            headless=True, viewport={"width": 1500, "height": 1100})
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(browser_context):
    page = browser_context.new_page()
    page.set_default_timeout(60_000)
    try:
        yield page
    finally:
        page.close()


@pytest.fixture
def console_errors(page) -> list[str]:
    """Errors the page logs from now on (console.error and uncaught exceptions)."""
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


@pytest.fixture
def screenshot(request, page):
    """`screenshot(name)` saves the page as test-output/<name>.png and returns the path."""
    OUTPUT.mkdir(exist_ok=True)

    def save(name: str) -> Path:
        path = OUTPUT / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save
