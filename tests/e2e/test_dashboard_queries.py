"""Every query of deploy/grafana/nico-nvlink.json, and every alert of deploy/alerts.yml, run by a real
Prometheus (the Debian ``prometheus`` package) scraping ``nico demo`` while a tenant uses it: a full
rack and a partly used one, then an NMX-C endpoint lost. A query that Prometheus refuses, or that
answers nothing (a metric or label spelled wrong, a series nico does not export), fails the test."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.demo.test_topology_page import admin
from tests.deploy.test_grafana_dashboard import ALERTS, load, queries
from tests.support.demo_process import DemoProcess
from tests.support.net import free_port

pytestmark = pytest.mark.e2e
DEADLINE = 90.0
FULL_PASS = 60.0  # monitor_run_interval: a full pass reaches the domain whose manager is lost
POLL = 0.2
BASE = "/v2/org/demo/nico"


def wait(condition: Callable[[], bool], what: str, within: float = DEADLINE) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"{what} not reached within {within:.0f} s"
        time.sleep(POLL)


def answer(prometheus: httpx.Client, expr: str) -> tuple[str, list[dict[str, Any]]]:
    """``("ok", result)``, or ``(error text, [])`` when Prometheus refuses the query."""
    response = prometheus.get("/api/v1/query", params={"query": expr})
    body = response.json()
    if body.get("status") != "success":
        return f"{response.status_code} {body.get('error')}", []
    return "ok", body["data"]["result"]


def unanswered(prometheus: httpx.Client, exprs: dict[str, str]) -> dict[str, str]:
    """The queries that fail or answer no number (NaN only: a rate over nothing)."""
    out = {}
    for name, expr in exprs.items():
        status, result = answer(prometheus, expr)
        numbers = [float(r["value"][1]) for r in result]
        if status != "ok" or not any(not math.isnan(n) for n in numbers):
            out[name] = f"{status}: {result}"
    return out


class Tenant:
    """The demo's tenant org over HTTP."""

    def __init__(self, demo: DemoProcess) -> None:
        self.client = httpx.Client(base_url=demo.url, headers={"Authorization": f"Bearer {demo.token}"})
        self.site = self.post_get("/site")[0]["id"]
        self.type = self.post_get("/instance/type", siteId=self.site)[0]["id"]

    def post_get(self, path: str, body: dict[str, Any] | None = None, **params: str) -> Any:
        if body is None:
            response = self.client.get(BASE + path, params=params)
        else:
            response = self.client.post(BASE + path, json=body)
        assert response.status_code < 300, response.text
        return response.json()

    def vpc(self, name: str) -> tuple[str, str]:
        """A partition, a VPC that uses it by default, and a subnet: (VPC id, subnet id)."""
        lp = self.post_get("/nvlink-logical-partition", {"name": name, "siteId": self.site})["id"]
        vpc = self.post_get("/vpc", {"name": name, "siteId": self.site, "nvLinkLogicalPartitionId": lp})["id"]
        return vpc, self.post_get("/subnet", {"name": name, "vpcId": vpc})["id"]

    def instances(self, vpc: str, subnet: str, prefix: str, count: int, optimized: bool) -> None:
        body = {
            "namePrefix": prefix,
            "count": count,
            "topologyOptimized": optimized,
            "instanceTypeId": self.type,
            "vpcId": vpc,
            "ipxeScript": "#!ipxe",
            "interfaces": [{"subnetId": subnet}],
        }
        self.post_get("/instance/batch", body)

    def ready(self) -> int:
        return sum(i["status"] == "Ready" for i in self.post_get("/instance", pageSize="100"))


def start_prometheus(tmp_path: Path, target: str) -> subprocess.Popen[bytes]:
    binary = shutil.which("prometheus")
    assert binary, "the prometheus binary is required (Debian package prometheus; .ci/run installs it)"
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [{"job_name": "nico", "static_configs": [{"targets": [target]}]}],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    process.url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]

    def ready() -> bool:  # until then Prometheus answers every query 503 "Service Unavailable"
        assert process.poll() is None, "prometheus exited before it was ready"
        try:
            return httpx.get(f"http://127.0.0.1:{port}/-/ready").status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait(ready, "Prometheus ready")
    except BaseException:
        process.kill()
        raise
    return process


def test_every_dashboard_query_and_alert_runs_against_a_demo_in_use(tmp_path: Path) -> None:
    demo = DemoProcess(tmp_path / "data", "--racks", "2").start()
    prometheus = start_prometheus(tmp_path, demo.url.removeprefix("http://"))
    try:
        with httpx.Client(base_url=prometheus.url) as prom:  # type: ignore[attr-defined]

            def scraping() -> bool:
                try:
                    return answer(prom, 'up{job="nico"} == 1')[1] != []
                except httpx.HTTPError:
                    return False

            wait(scraping, "Prometheus scraping the demo")
            tenant = Tenant(demo)
            # One rack filled by one partition; once Prometheus has seen it, two trays of the other in a
            # second partition (that rack is stranded), so the counters move between two scrapes.
            vpc, subnet = tenant.vpc("training")
            tenant.instances(vpc, subnet, "trainer", 18, optimized=True)
            wait(lambda: tenant.ready() == 18, "18 instances Ready")
            seen = "max(nico_nvlink_partition_monitor_num_physical_partitions) >= 1"
            wait(lambda: answer(prom, seen)[1] != [], "Prometheus scraping the first partition")
            small_vpc, small_subnet = tenant.vpc("small")
            tenant.instances(small_vpc, small_subnet, "small", 2, optimized=False)
            wait(lambda: tenant.ready() == 20, "20 instances Ready")
            # One chassis's fabric manager lost (pointed at a port nothing listens on), then a change:
            # that domain's passes fail (at the latest on the next full pass), the other's go on.
            endpoints = json.loads(admin(demo, "nvlink-nmxc-endpoints", "show", "--format", "json"))
            lost = endpoints[0]
            dead = re.sub(r":\d+$", f":{free_port()}", lost["endpoint"])
            serial = ("--chassis-serial", lost["chassis_serial"])
            admin(demo, "nvlink-nmxc-endpoints", "update", *serial, "--endpoint", dead)
            tenant.instances(small_vpc, small_subnet, "late", 2, optimized=False)

            exprs = queries(load())
            left: dict[str, str] = {}

            def all_answered() -> bool:
                left.clear()
                left.update(unanswered(prom, exprs))
                return not left

            try:
                wait(all_answered, "every panel's query answering", within=FULL_PASS + DEADLINE)
            except AssertionError:
                raise AssertionError(f"panels without an answer: {json.dumps(left, indent=2)}") from None
            check_alerts(prom)
    finally:
        prometheus.terminate()
        prometheus.wait(30)
        assert demo.stop() == 0, demo.output()


def check_alerts(prom: httpx.Client) -> None:
    """Prometheus loaded every alert of deploy/alerts.yml and evaluates it without error, and every
    series an alert names exists in the demo's metrics."""
    declared = [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]
    names = {rule["alert"] for rule in declared}
    loaded: dict[str, dict[str, Any]] = {}

    def evaluated() -> bool:
        groups = prom.get("/api/v1/rules").json()["data"]["groups"]
        loaded.update({r["name"]: r for g in groups for r in g["rules"]})
        return set(loaded) >= names and all(
            loaded[n].get("lastEvaluation", "0001").startswith("2") for n in names
        )

    wait(evaluated, "Prometheus evaluating every alert")
    for name in names:
        assert loaded[name]["health"] == "ok", loaded[name]
    for rule in declared:
        for series in set(re.findall(r"\bnico_[a-z_]+", rule["expr"])):
            status, result = answer(prom, f"count({series})")
            assert status == "ok" and result, (rule["alert"], series, "no such series in the demo's metrics")
