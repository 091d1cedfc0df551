"""Swagger UI at /docs works without internet: headless Chromium, which can resolve no host but
loopback, loads the page from nico alone and lists the API's operations."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from nico.api.app import build_context, create_app
from nico.config import load_settings
from tests.support.browser import headless_chromium, until
from tests.support.serving import served

pytestmark = pytest.mark.e2e


@pytest.fixture
def docs_server(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """nico on a loopback port; the docs need no database, so none is reachable."""
    url = "postgresql://docs@127.0.0.1:1/unused"
    settings = load_settings(database_url=url, data_dir=tmp_path, auth={"hs256_secret": "x" * 32})
    app = create_app(settings, context=build_context(settings, url), owns_context=True)
    with served(app) as base:
        yield base, app


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    # No name resolves but loopback: a CDN asset could not load even on a machine with internet.
    with headless_chromium(
        tmp_path / "chromium", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
    ) as driver:
        yield driver


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
