"""Status never lies on the way out (issue 10, part 5).

From the moment DELETE /instance/{id} or a PATCH that removes GPUs is accepted, no NVLink interface
may say Ready while its GPU is not in its partition on the fabric: the deleted instance says
Terminating and its interfaces Deleting, a PATCH's replaced rows say Deleting, until the fabric holds
the new truth. The fabric (the simulator) and the API (GET /instance/{id}, GET /instance,
GET /nvlink-interface) are sampled together in a loop while the teardown runs with latency injected:
NMX-C over gRPC, and NMX-M over HTTP with operations that complete after the client stopped waiting
(late completions). The count of false Ready must be 0, and the samples must have covered the window
where the GPUs are already out of their partition but the database has not heard of it yet.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from nico.api.context import AppContext
from nico.config import Settings
from nico.reconciler.planner import partition_name
from nico.sim.fabric import SimFabric
from tests.support.auth import bearer
from tests.support.fabric_stack import fabric_stack
from tests.support.sim_site import SimSite
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e
WITHIN = 30.0
LATENCY = 0.3  # seconds before every fabric answer
OPERATION_TIMEOUT = "1s"  # NMX-M: the client stops waiting for an operation after this ...
LATE = 1.6  # ... and the operation completes only after this many seconds


@dataclass
class Site:
    kind: str
    site: SimSite
    client: httpx.AsyncClient
    headers: dict[str, str]

    @property
    def fabric(self) -> SimFabric:
        return self.site.fabric

    def url(self, path: str) -> str:
        return f"/v2/org/{self.site.nv.tenant.org}/nico{path}"

    async def call(self, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        response = await self.client.request(method, self.url(path), json=body, headers=self.headers)
        assert response.status_code == expect, response.text
        return response.json() if "json" in response.headers.get("content-type", "") else None

    async def partition(self, name: str) -> str:
        body = {"name": name, "siteId": str(self.site.nv.site.id)}
        return str((await self.call("POST", "/nvlink-logical-partition", body, expect=201))["id"])

    def slow_down(self) -> None:
        """Latency on every fabric answer; NMX-M operations complete late."""
        if self.kind == "nmxc":
            for domain in self.site.domains:
                self.fabric.set_faults(domain, latency=LATENCY)
        else:
            self.fabric.set_site_faults(latency=LATENCY, operation_delay=LATE)


@pytest_asyncio.fixture(params=["nmxc", "nmxm"])
async def stack(
    request: pytest.FixtureRequest,
    session: AsyncSession,
    app: FastAPI,
    app_context: AppContext,
    settings: Settings,
) -> AsyncIterator[Site]:
    running = fabric_stack(
        request.param,
        session,
        app_context.engine,
        fabric_seed=23,
        call_timeout="3s",
        operation_timeout=OPERATION_TIMEOUT,
    )
    transport = httpx.ASGITransport(app=app)
    async with running as s, httpx.AsyncClient(transport=transport, base_url="http://nico.test") as client:
        yield Site(s.kind, s.site, client, bearer(settings, s.site.nv.tenant.org))


@dataclass
class Tally:
    samples: int = 0
    false_ready: list[str] = field(default_factory=list)
    out_and_unheard: int = 0  # samples where a GPU had left its partition and the API still listed it
    statuses: set[str] = field(default_factory=set)


def holders(fabric: SimFabric, domain: uuid.UUID) -> dict[int, str]:
    """GPU -> the name of the partition holding it, as the fabric has it right now."""
    return {g: p.name for p in fabric.partitions(domain) for g in p.gpu_uids}


async def sample(
    stack: Site, instance_id: str, domain: uuid.UUID, leaving: set[int], lp: str, tally: Tally
) -> bool:
    """One sample of the fabric and the API together; False once the instance is gone. A Ready
    interface is false when its GPU is out of its partition both before and after the API read."""
    before = holders(stack.fabric, domain)
    one = await stack.client.get(stack.url(f"/instance/{instance_id}"), headers=stack.headers)
    listed = await stack.call("GET", f"/instance?pageSize=100&vpcId={stack.site.nv.vpc.id}")
    by_instance = await stack.client.get(
        stack.url(f"/nvlink-interface?instanceId={instance_id}&pageSize=100"), headers=stack.headers
    )
    assert by_instance.status_code in (200, 404), by_instance.text  # 404: the instance went meanwhile
    interfaces = by_instance.json() if by_instance.status_code == 200 else []
    after = holders(stack.fabric, domain)
    if one.status_code == 404:
        return False
    assert one.status_code == 200, one.text
    tally.samples += 1
    found = [("GET /instance/{id}", i) for i in one.json()["nvLinkInterfaces"]]
    for body in listed:
        if body["id"] == instance_id:
            found += [("GET /instance", i) for i in body["nvLinkInterfaces"]]
    found += [("GET /nvlink-interface", i) for i in interfaces]
    tally.statuses.add(one.json()["status"])
    for where, interface in found:
        if interface["status"] != "Ready":
            continue
        guid = int(interface["gpuGuid"])
        name = partition_name(uuid.UUID(interface["nvLinklogicalPartitionId"]))
        if before.get(guid) != name and after.get(guid) != name:
            tally.false_ready.append(f"{where}: device {interface['deviceInstance']} Ready, GPU {guid} out")
    if any(before.get(g) != partition_name(uuid.UUID(lp)) for g in leaving):
        tally.out_and_unheard += 1  # a GPU on its way out has left; the database has not heard yet
    return True


async def ready_instance(stack: Site, lp: str) -> tuple[str, uuid.UUID, dict[int, int]]:
    body = {
        "name": "leaving",
        "instanceTypeId": str(stack.site.nv.instance_type.id),
        "vpcId": str(stack.site.nv.vpc.id),
        "interfaces": [{"subnetId": str(stack.site.nv.subnet.id)}],
        "ipxeScript": "#!ipxe",
        "nvLinkInterfaces": [{"nvLinkLogicalPartitionId": lp, "deviceInstance": n} for n in range(4)],
    }
    created = await stack.call("POST", "/instance", body, expect=201)

    async def ready() -> bool:
        return bool((await stack.call("GET", f"/instance/{created['id']}"))["status"] == "Ready")

    await wait_for(ready, within=WITHIN, what="the instance Ready")
    shown = await stack.call("GET", f"/instance/{created['id']}")
    guids = {i["deviceInstance"]: int(i["gpuGuid"]) for i in shown["nvLinkInterfaces"]}
    return created["id"], uuid.UUID(shown["nvLinkInterfaces"][0]["nvLinkDomainId"]), guids


async def test_deleted_instance_never_shows_ready_interfaces_while_its_gpus_leave(stack: Site) -> None:
    lp = await stack.partition("gone")
    instance_id, domain, guids = await ready_instance(stack, lp)
    stack.slow_down()

    deleted = await stack.client.delete(stack.url(f"/instance/{instance_id}"), headers=stack.headers)
    assert deleted.status_code == 202, deleted.text
    tally = Tally()
    deadline = asyncio.get_running_loop().time() + WITHIN
    while await sample(stack, instance_id, domain, set(guids.values()), lp, tally):
        assert asyncio.get_running_loop().time() < deadline, "the instance never went"

    print(
        f"{stack.kind} delete: {tally.samples} samples, {tally.out_and_unheard} with GPUs out, "
        f"false Ready: {len(tally.false_ready)}"
    )
    assert tally.false_ready == []
    assert tally.out_and_unheard > 0  # the samples covered the window the issue is about
    assert tally.statuses == {"Terminating"}
    assert partition_name(uuid.UUID(lp)) not in holders(stack.fabric, domain).values()


@pytest.mark.parametrize("keep", [2, 0], ids=["shrink", "empty"])
async def test_patch_removing_gpus_never_shows_ready_for_the_ones_leaving(stack: Site, keep: int) -> None:
    lp = await stack.partition("shrinks")
    instance_id, domain, guids = await ready_instance(stack, lp)
    leaving = {guids[n] for n in range(keep, 4)}
    stack.slow_down()

    await stack.call(
        "PATCH",
        f"/instance/{instance_id}",
        {"nvLinkInterfaces": [{"nvLinkLogicalPartitionId": lp, "deviceInstance": n} for n in range(keep)]},
    )
    tally = Tally()
    deadline = asyncio.get_running_loop().time() + WITHIN
    name = partition_name(uuid.UUID(lp))
    while True:
        assert await sample(stack, instance_id, domain, leaving, lp, tally)
        shown = await stack.call("GET", f"/instance/{instance_id}")
        held = holders(stack.fabric, domain)
        if shown["status"] == "Ready" and not any(held.get(g) == name for g in leaving):
            break
        assert asyncio.get_running_loop().time() < deadline, "the PATCH never settled"

    print(
        f"{stack.kind} patch to {keep}: {tally.samples} samples, {tally.out_and_unheard} with GPUs out, "
        f"false Ready: {len(tally.false_ready)}"
    )
    assert tally.false_ready == []
    assert tally.out_and_unheard > 0
    final = await stack.call("GET", f"/instance/{instance_id}")
    assert sorted(i["deviceInstance"] for i in final["nvLinkInterfaces"]) == list(range(keep))
    assert {i["status"] for i in final["nvLinkInterfaces"]} <= {"Ready"}
