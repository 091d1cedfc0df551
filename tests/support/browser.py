"""Headless Chromium for the page tests (Swagger UI offline, the topology page), and waiting on what a
page shows with a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
DEADLINE = 45.0
POLL = 0.1


def until(what: str, check: Callable[[], Any], within: float = DEADLINE) -> Any:
    """``check()``'s first true value; fail when none comes within ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} not reached within {within}s"
        time.sleep(POLL)


@contextmanager
def headless_chromium(profile: Path, *flags: str) -> Iterator[WebDriver]:
    """Chromium, headless, with its profile in ``profile`` and ``flags`` added to the common ones."""
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
        *flags,
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def click(driver: WebDriver, selector: str) -> None:
    """Click what ``selector`` finds, again when the page redrew it between finding and clicking (the
    topology page redraws on every poll)."""

    def clicked() -> bool:
        try:
            driver.find_element(By.CSS_SELECTOR, selector).click()
        except StaleElementReferenceException:
            return False
        return True

    until(f"{selector} clicked", clicked)


def datasets(driver: WebDriver, selector: str) -> list[dict[str, str]]:
    """The data-* attributes of every element ``selector`` finds, read in one script (the page may
    redraw between two reads of a single element)."""
    found: list[dict[str, str]] = driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map((e) => ({...e.dataset}))", selector
    )
    return found
