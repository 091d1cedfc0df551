"""Swagger UI at /docs works without internet: headless Chromium, which can resolve no host but
loopback, loads the page from nico alone and lists the API's operations."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from nico.api.app import build_context, create_app
from nico.config import load_settings
from nico.serving import EmbeddedServer
from tests.support.net import free_port

pytestmark = pytest.mark.e2e
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
DEADLINE = 45.0


def until(what: str, check: Callable[[], Any], within: float = DEADLINE) -> Any:
    deadline = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} not reached within {within}s"
        time.sleep(0.1)


@pytest.fixture
def docs_server(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """nico on a loopback port; the docs need no database, so none is reachable."""
    url = "postgresql://docs@127.0.0.1:1/unused"
    settings = load_settings(database_url=url, data_dir=tmp_path, auth={"hs256_secret": "x" * 32})
    app = create_app(settings, context=build_context(settings, url), owns_context=True)
    port = free_port()
    import uvicorn

    server = EmbeddedServer(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    until("nico listening", lambda: server.started)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    assert Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists(), (
        "headless Chromium is required (Debian packages chromium and chromium-driver; .ci/run installs them)"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        # No name resolves but loopback: a CDN asset could not load even on a machine with internet.
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_swagger_ui_lists_the_operations_with_no_network_but_loopback(
    docs_server: tuple[str, Any], browser: WebDriver
) -> None:
    base, app = docs_server
    operations = sum(
        1 for item in app.openapi()["paths"].values() for method in item if method != "parameters"
    )
    browser.get(f"{base}/docs")
    shown = until(
        "Swagger UI lists every operation",
        lambda: len(found := browser.find_elements(By.CSS_SELECTOR, ".opblock")) >= operations and found,
    )
    assert len(shown) == operations
    summaries = {e.text for e in browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-description")}
    assert "Get an instance" in summaries
    loaded = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert loaded and all(name.startswith(base) for name in loaded), loaded
