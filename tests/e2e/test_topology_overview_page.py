"""The topology page opens on the site overview, in headless Chromium against nico serving a 200-rack
site: one cell per NVLink domain with what is in it (the tenant's GPUs, another tenant's, a tray held by
another fabric manager, a split partition, a GPU whose NVLink is down, a failing domain); a click on a
cell draws that domain's chassis, trays and GPUs, and the way back is the overview again. The picture in
docs/ (docs/topology-overview.png) is this page: ``NICO_OVERVIEW_PICTURE=docs/topology-overview.png``
makes the test write it there."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from sqlalchemy.ext.asyncio import AsyncSession

from nico.api.app import build_context, create_app
from nico.config import Settings
from tests.api.test_topology import make_instance
from tests.api.test_topology_overview import fail, hold, put_on, second_instance, unhealthy
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.browser import click, datasets, headless_chromium, until
from tests.support.serving import served

pytestmark = pytest.mark.e2e

RACKS = 200
TENANT, OTHER = "tenant-alpha", "tenant-beta"


@pytest.fixture
def nico(settings: Settings, db: str) -> Iterator[str]:
    """nico's API and page on a loopback port, on the test database."""
    with served(create_app(settings, context=build_context(settings, db), owns_context=True)) as base:
        yield base


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    with headless_chromium(tmp_path / "chromium", "--window-size=1280,640") as driver:
        yield driver


async def a_site_in_use(client: httpx.AsyncClient, session: AsyncSession, settings: Settings) -> f.NvlinkSite:
    """200 racks. The tenant's partition on racks 3 and 7 (split), another tenant on rack 5, a tray of
    rack 9 held by another fabric manager, a free GPU of rack 11 with NVLink down, rack 7 failing."""
    net = await f.nvlink_site(session, racks=RACKS, tenant_org=TENANT, quota=2)
    other = await f.tenant(session, OTHER)
    await f.allocation(session, other, net.site, net.instance_type, 1)
    other_vpc = await f.vpc(session, other, net.site, name="other-vpc")
    other_subnet = await f.subnet(session, other_vpc, name="other-subnet")
    await session.commit()
    headers = bearer(settings, TENANT)
    lp, first = await make_instance(client, TENANT, headers, net, net.vpc, net.subnet)
    second = await second_instance(client, TENANT, headers, lp["id"], net)
    _, theirs = await make_instance(client, OTHER, bearer(settings, OTHER), net, other_vpc, other_subnet)
    await put_on(session, net, first["id"], 3, 0)
    await put_on(session, net, second, 7, 0)
    await put_on(session, net, theirs["id"], 5, 0)
    await hold(session, net.domains[9], tray=4, gpus=4)
    await unhealthy(session, net.domains[11], tray=2, device_id=3)
    await fail(session, net.domains[7], "NMX-C endpoint unreachable", 4)
    await session.commit()
    return net


def cells(driver: WebDriver) -> list[dict[str, str]]:
    """The overview's cells in page order, with the counts they show."""
    return datasets(driver, "#overview a.cell")


def count(driver: WebDriver, selector: str) -> int:
    return len(driver.find_elements(By.CSS_SELECTOR, selector))


async def test_the_page_opens_on_one_cell_per_domain_and_drills_into_a_domains_trays(
    client: httpx.AsyncClient,
    session: AsyncSession,
    settings: Settings,
    nico: str,
    browser: WebDriver,
    tmp_path: Path,
) -> None:
    net = await a_site_in_use(client, session, settings)
    token = bearer(settings, TENANT)["Authorization"].removeprefix("Bearer ")
    browser.get(f"{nico}/#org={TENANT}&token={token}")
    shown = until("a cell per domain", lambda: len(found := cells(browser)) == RACKS and found)
    assert [c["domain"] for c in shown] == [str(d) for d in net.domains]  # rack order
    quiet = {"mine": "0", "other": "0", "held": "0", "free": "72", "pending": "0"}
    quiet |= {"split": "0", "unhealthy": "0", "error": "false", "gpus": "72", "foreign": "0"}
    expected = {
        3: {"mine": "4", "free": "68", "split": "1", "pending": "4"},
        5: {"other": "4", "free": "68"},
        7: {"mine": "4", "free": "68", "split": "1", "pending": "4", "error": "true"},
        9: {"held": "4", "free": "68", "foreign": "4"},
        11: {"unhealthy": "1"},
    }
    for index, cell in enumerate(shown):
        assert cell == {**quiet, "domain": str(net.domains[index]), **expected.get(index, {})}, index
    assert not browser.find_element(By.ID, "domains").is_displayed()
    target = Path(os.environ.get("NICO_OVERVIEW_PICTURE") or tmp_path / "topology-overview.png")
    assert browser.save_screenshot(str(target))

    # Into the failing rack: its chassis, 18 trays of 4 GPUs, the tenant's tray, the error.
    click(browser, f'#overview a.cell[data-domain="{net.domains[7]}"]')
    until(
        "the domain's trays",
        lambda: count(browser, f'#domains .domain[data-domain="{net.domains[7]}"] .gpu') == 72,
    )
    drawn = browser.execute_script(
        "const d = document.querySelector('#domains');"
        "return {domains: d.querySelectorAll('.domain').length, trays: d.querySelectorAll('.tray').length,"
        " mine: d.querySelectorAll('.gpu[data-state=mine]').length,"
        " problem: d.querySelector('.problem').textContent,"
        " legend: document.querySelector('#partitions').textContent,"
        " overview: document.querySelector('#overview').checkVisibility()}"
    )
    assert drawn["domains"] == 1 and drawn["trays"] == 18 and drawn["mine"] == 4
    assert "NMX-C endpoint unreachable" in drawn["problem"]
    assert "split over 2 NVLink domains" in drawn["legend"]
    assert drawn["overview"] is False

    # And back to the overview.
    click(browser, "#back")
    until(
        "the overview again",
        lambda: browser.find_element(By.ID, "overview").is_displayed() and len(cells(browser)) == RACKS,
    )
    assert count(browser, "#domains .domain") == 0
