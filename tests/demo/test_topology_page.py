"""The topology page in headless Chromium against a running ``nico demo``: the site overview marks the
domain whose NMX-C endpoint is unreachable, and a click on it draws the tenant's partitions there GPU
by GPU with the domain's error and its Pending GPUs; the page follows the repair without a reload.
The README's picture (docs/topology.png) is a healthy site in use: ``NICO_README_PICTURE=docs/topology.png``
makes the test that takes it write it there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.browser import click, datasets, headless_chromium, until
from tests.support.demo_process import DemoProcess, free_port

pytestmark = pytest.mark.e2e


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    with headless_chromium(tmp_path / "chromium", "--window-size=1360,1000") as driver:
        yield driver


class Tenant:
    def __init__(self, demo: DemoProcess) -> None:
        self.demo = demo
        self.client = httpx.Client(
            base_url=f"{demo.url}/v2/org/demo/nico", headers={"Authorization": f"Bearer {demo.token}"}
        )

    def post(self, path: str, body: dict[str, Any]) -> Any:
        response = self.client.post(path, json=body)
        assert response.status_code == 201, response.text
        return response.json()

    def get(self, path: str, **params: Any) -> Any:
        response = self.client.get(path, params=params)
        assert response.status_code == 200, response.text
        return response.json()


def admin(demo: DemoProcess, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "nico.cli", "admin", *args],
        env=demo.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def point(demo: DemoProcess, serial: str, endpoint: str) -> None:
    """Register ``endpoint`` as the chassis's NMX-C endpoint, as an operator would."""
    admin(demo, "nvlink-nmxc-endpoints", "update", "--chassis-serial", serial, "--endpoint", endpoint)


def drawn(driver: WebDriver, selector: str, view: str = "#domains") -> int:
    return len(driver.find_elements(By.CSS_SELECTOR, f"{view} {selector}"))


def test_the_page_draws_the_demo_partitions_errors_and_pending_gpus_and_follows_changes(
    tmp_path: Path, browser: WebDriver
) -> None:
    # A full reconcile pass every second, so a changed endpoint registry is read at once.
    demo = DemoProcess(tmp_path / "data", env={"NICO_NVLINK_CONFIG__MONITOR_RUN_INTERVAL": "1s"}).start()
    try:
        tenant = Tenant(demo)
        site = tenant.get("/site")[0]["id"]
        itype = tenant.get("/instance/type", siteId=site)[0]["id"]
        alpha = tenant.post("/nvlink-logical-partition", {"name": "alpha", "siteId": site})
        beta = tenant.post("/nvlink-logical-partition", {"name": "beta", "siteId": site})
        vpc = tenant.post("/vpc", {"name": "page-vpc", "siteId": site})
        subnet = tenant.post("/subnet", {"name": "page-subnet", "vpcId": vpc["id"]})

        def instances(lp: dict[str, Any], **shape: Any) -> dict[str, Any]:
            return {
                "instanceTypeId": itype,
                "vpcId": vpc["id"],
                "ipxeScript": "#!ipxe",
                "interfaces": [{"subnetId": subnet["id"]}],
                "nvLinkInterfaces": [
                    {"nvLinkLogicalPartitionId": lp["id"], "deviceInstance": d} for d in range(4)
                ],
                **shape,
            }

        tenant.post("/instance/batch", instances(alpha, namePrefix="alpha", count=3, topologyOptimized=True))
        until(
            "alpha's instances Ready",
            lambda: [i["status"] for i in tenant.get("/instance", pageSize=100)] == ["Ready"] * 3,
        )
        topology = tenant.get("/nvlink-topology")
        home = next(
            d
            for d in topology["domains"]
            if any(g["state"] == "mine" for t in d["chassis"][0]["trays"] for g in t["gpus"])
        )
        serial = home["chassis"][0]["chassisSerial"]
        registered = json.loads(
            admin(demo, "nvlink-nmxc-endpoints", "show", "--chassis-serial", serial, "--format", "json")
        )
        # The rack's NMX-C endpoint becomes unreachable; beta's instance is placed beside alpha's.
        point(demo, serial, f"http://127.0.0.1:{free_port()}")
        tenant.post("/instance", instances(beta, name="beta-1"))
        until(
            "the domain's error",
            lambda: next(d for d in tenant.get("/nvlink-topology")["domains"] if d["id"] == home["id"])[
                "error"
            ],
        )

        browser.get(f"{demo.url}/#org=demo&token={demo.token}")
        # The page opens on the site overview: a cell per domain, the failing one marked.
        until(
            "the overview's cells",
            lambda: (
                drawn(browser, "a.cell", "#overview") == 4
                and drawn(browser, "a.cell[data-error='true']", "#overview") == 1
            ),
        )
        cells = {c["domain"]: c for c in datasets(browser, "#overview a.cell")}
        assert sorted(cells) == sorted(d["id"] for d in topology["domains"])
        assert cells[home["id"]]["error"] == "true" and cells[home["id"]]["pending"] == "4"
        assert cells[home["id"]]["mine"] == "16"
        click(browser, f'#overview a.cell[data-domain="{home["id"]}"]')
        until(
            "the partitions drawn",
            lambda: (
                drawn(browser, f'.gpu[data-partition="{alpha["id"]}"][data-status="Ready"]') == 12
                and drawn(browser, f'.gpu[data-partition="{beta["id"]}"][data-status="Pending"]') == 4
                and drawn(browser, ".domain[data-error='true']") == 1
            ),
        )
        assert [
            e.get_attribute("data-domain") for e in browser.find_elements(By.CSS_SELECTOR, ".domain")
        ] == [home["id"]]
        assert drawn(browser, ".gpu") == 72
        assert drawn(browser, '.gpu[data-state="free"]') == 72 - 16
        broken = browser.find_element(By.CSS_SELECTOR, f'.domain[data-domain="{home["id"]}"]')
        assert broken.get_attribute("data-error") == "true" and broken.get_attribute("data-pending") == "4"
        assert "reconciler error" in broken.find_element(By.CSS_SELECTOR, ".problem").text
        legend = browser.find_element(By.ID, "partitions").text
        assert "alpha (12 GPUs)" in legend and "beta (4 GPUs)" in legend
        colors = {
            lp["id"]: {
                e.value_of_css_property("border-color")
                for e in browser.find_elements(By.CSS_SELECTOR, f'#domains .gpu[data-partition="{lp["id"]}"]')
            }
            for lp in (alpha, beta)
        }
        assert (
            len(colors[alpha["id"]]) == len(colors[beta["id"]]) == 1
            and colors[alpha["id"]] != colors[beta["id"]]
        )
        assert browser.save_screenshot(str(tmp_path / "topology-error.png"))

        # Repair: the page follows without a reload.
        point(demo, serial, registered[0]["endpoint"])
        until(
            "beta Ready and the error gone on the page",
            lambda: (
                drawn(browser, f'.gpu[data-partition="{beta["id"]}"][data-status="Ready"]') == 4
                and drawn(browser, ".domain[data-error='true']") == 0
            ),
        )
    finally:
        assert demo.stop() == 0, demo.output()


def test_the_readme_picture_is_a_healthy_site_in_use(tmp_path: Path, browser: WebDriver) -> None:
    """Two partitions Ready on the demo, nothing Pending, no error on the overview nor in the busier
    rack's trays when the screenshot of them is taken (a newcomer takes what the README shows for what
    they should see)."""
    demo = DemoProcess(tmp_path / "data", "--racks", "2").start()
    try:
        tenant = Tenant(demo)
        site = tenant.get("/site")[0]["id"]
        itype = tenant.get("/instance/type", siteId=site)[0]["id"]
        for name, count in (("training", 12), ("inference", 4)):
            lp = tenant.post("/nvlink-logical-partition", {"name": name, "siteId": site})
            vpc = tenant.post("/vpc", {"name": name, "siteId": site, "nvLinkLogicalPartitionId": lp["id"]})
            subnet = tenant.post("/subnet", {"name": name, "vpcId": vpc["id"]})
            batch = {
                "namePrefix": name,
                "count": count,
                "topologyOptimized": True,
                "instanceTypeId": itype,
                "vpcId": vpc["id"],
                "ipxeScript": "#!ipxe",
                "interfaces": [{"subnetId": subnet["id"]}],
            }
            tenant.post("/instance/batch", batch)
        until(
            "every instance Ready",
            lambda: [i["status"] for i in tenant.get("/instance", pageSize=100)] == ["Ready"] * 16,
        )
        browser.get(f"{demo.url}/#org=demo&token={demo.token}")

        def in_use() -> list[dict[str, str]] | None:
            found = datasets(browser, "#overview a.cell")
            return found if len(found) == 2 and sum(int(c["mine"]) for c in found) == 16 * 4 else None

        cells = until("both racks in use on the overview", in_use)
        assert all(c["error"] == "false" and c["pending"] == "0" for c in cells)
        busiest = max(cells, key=lambda c: int(c["mine"]))
        click(browser, f'#overview a.cell[data-domain="{busiest["domain"]}"]')
        until(
            "the busiest rack's partitions drawn Ready",
            lambda: (
                drawn(browser, '.gpu[data-status="Ready"]') == int(busiest["mine"])
                and drawn(browser, ".domain") == 1
            ),
        )
        assert drawn(browser, '.gpu[data-status="Pending"]') == 0
        assert drawn(browser, ".domain[data-error='true']") == 0
        assert browser.find_elements(By.CSS_SELECTOR, "[role=alert], .problem") == []
        assert browser.find_element(By.ID, "status").get_attribute("data-problem") is None
        assert "training (" in browser.find_element(By.ID, "partitions").text
        target = Path(os.environ.get("NICO_README_PICTURE") or tmp_path / "topology.png")
        assert browser.save_screenshot(str(target))
        assert target.stat().st_size > 10_000
    finally:
        assert demo.stop() == 0, demo.output()
