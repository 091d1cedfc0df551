"""End to end: the tenant REST API, a running reconciler and a simulated site on loopback (NMX-C over
gRPC, one server per rack, or NMX-M over HTTP), for both backends. Every wait has a deadline."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy.ext.asyncio import AsyncSession

from nico.api.context import AppContext
from nico.config import Settings
from nico.fabric.backend import DEFAULT_PARTITION_ID
from nico.reconciler.metrics import ReconcilerMetrics
from nico.reconciler.planner import partition_name
from nico.reconciler.scheduler import Reconciler
from nico.sim.fabric import SimFabric
from nico.sim.nmxc_server import NmxcSimulator
from tests.support.auth import bearer
from tests.support.fabric_stack import fabric_stack
from tests.support.sim_site import SimSite
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e
WITHIN = 15.0


@dataclass
class Stack:
    kind: str
    site: SimSite
    client: httpx.AsyncClient
    headers: dict[str, str]
    reconciler: Reconciler
    registry: CollectorRegistry
    nmxc: NmxcSimulator | None

    @property
    def fabric(self) -> SimFabric:
        return self.site.fabric

    def url(self, path: str) -> str:
        return f"/v2/org/{self.site.nv.tenant.org}/nico{path}"

    async def post(self, path: str, body: dict[str, Any], expect: int = 201) -> Any:
        response = await self.client.post(self.url(path), json=body, headers=self.headers)
        assert response.status_code == expect, response.text
        return response.json()

    async def get(self, path: str) -> Any:
        response = await self.client.get(self.url(path), headers=self.headers)
        assert response.status_code == 200, response.text
        return response.json()

    async def partition(self, name: str) -> str:
        return str(
            (
                await self.post(
                    "/nvlink-logical-partition", {"name": name, "siteId": str(self.site.nv.site.id)}
                )
            )["id"]
        )

    def instance_body(self, name: str, **extra: Any) -> dict[str, Any]:
        return {
            "name": name,
            "instanceTypeId": str(self.site.nv.instance_type.id),
            "vpcId": str(self.site.nv.vpc.id),
            "interfaces": [{"subnetId": str(self.site.nv.subnet.id)}],
            "ipxeScript": "#!ipxe",
            **extra,
        }

    async def ready(self, instance_id: str, status: str = "Ready") -> dict[str, Any]:
        async def reached() -> bool:
            return (await self.get(f"/instance/{instance_id}"))["status"] == status

        await wait_for(reached, within=WITHIN, what=f"instance {instance_id} {status}")
        body: dict[str, Any] = await self.get(f"/instance/{instance_id}")
        return body

    async def gone(self, path: str) -> None:
        async def vanished() -> bool:
            response = await self.client.get(self.url(path), headers=self.headers)
            return response.status_code == 404

        await wait_for(vanished, within=WITHIN, what=f"{path} gone")

    def holders(self, gpu_guids: list[str]) -> set[int | None]:
        return {self.fabric.partition_of(int(g)) for g in gpu_guids}

    def named(self, domain: uuid.UUID, lp_id: str) -> frozenset[int] | None:
        found = [p for p in self.fabric.partitions(domain) if p.name == partition_name(uuid.UUID(lp_id))]
        return frozenset(found[0].gpu_uids) if found else None


@pytest_asyncio.fixture(params=["nmxc", "nmxm"])
async def stack(
    request: pytest.FixtureRequest,
    session: AsyncSession,
    app: FastAPI,
    app_context: AppContext,
    settings: Settings,
) -> AsyncIterator[Stack]:
    running = fabric_stack(
        request.param, session, app_context.engine, fabric_seed=11, call_timeout="1s", operation_timeout="2s"
    )
    transport = httpx.ASGITransport(app=app)
    async with running as s, httpx.AsyncClient(transport=transport, base_url="http://nico.test") as client:
        headers = bearer(settings, s.site.nv.tenant.org)
        yield Stack(s.kind, s.site, client, headers, s.reconciler, s.registry, s.nmxc)


async def test_instance_with_a_logical_partition_becomes_ready(stack: Stack) -> None:
    lp = await stack.partition("training")
    created = await stack.post(
        "/instance",
        stack.instance_body(
            "worker",
            nvLinkInterfaces=[{"nvLinkLogicalPartitionId": lp, "deviceInstance": n} for n in range(4)],
        ),
    )
    assert created["status"] == "Pending"
    assert {i["status"] for i in created["nvLinkInterfaces"]} == {"Pending"}

    ready = await stack.ready(created["id"])
    interfaces = ready["nvLinkInterfaces"]
    assert {i["status"] for i in interfaces} == {"Ready"}
    assert len({i["nvLinkDomainId"] for i in interfaces}) == 1
    guids = [i["gpuGuid"] for i in interfaces]
    domain = uuid.UUID(interfaces[0]["nvLinkDomainId"])
    assert stack.named(domain, lp) == frozenset(int(g) for g in guids)


async def test_vpc_default_partition_binds_every_gpu(stack: Stack) -> None:
    lp = await stack.partition("vpc-default")
    vpc = await stack.post(
        "/vpc", {"name": "with-default", "siteId": str(stack.site.nv.site.id), "nvLinkLogicalPartitionId": lp}
    )
    subnet = await stack.post("/subnet", {"name": "s2", "vpcId": vpc["id"]})
    body = stack.instance_body("by-default", vpcId=vpc["id"], interfaces=[{"subnetId": subnet["id"]}])
    created = await stack.post("/instance", body)
    assert sorted(i["deviceInstance"] for i in created["nvLinkInterfaces"]) == [0, 1, 2, 3]
    ready = await stack.ready(created["id"])
    assert {i["nvLinklogicalPartitionId"] for i in ready["nvLinkInterfaces"]} == {lp}


async def test_batch_of_18_on_one_domain(stack: Stack) -> None:
    lp = await stack.partition("whole-rack")
    body = {
        **stack.instance_body("unused"),
        "namePrefix": "rack",
        "count": 18,
        "topologyOptimized": True,
        "nvLinkInterfaces": [{"nvLinkLogicalPartitionId": lp, "deviceInstance": n} for n in range(4)],
    }
    body.pop("name")
    created = await stack.post("/instance/batch", body)
    assert len(created) == 18
    ready = [await stack.ready(i["id"]) for i in created]
    domains = {i["nvLinkDomainId"] for r in ready for i in r["nvLinkInterfaces"]}
    assert len(domains) == 1
    domain = uuid.UUID(domains.pop())
    assert len(stack.named(domain, lp) or ()) == 72  # the whole rack in one partition
    assert stack.fabric.members(domain)[DEFAULT_PARTITION_ID] == frozenset()  # emptied, never deleted


async def test_patch_moves_gpus_between_partitions_in_one_pass(stack: Stack) -> None:
    a, b = await stack.partition("lp-a"), await stack.partition("lp-b")
    created = await stack.post(
        "/instance",
        stack.instance_body(
            "mover", nvLinkInterfaces=[{"nvLinkLogicalPartitionId": a, "deviceInstance": n} for n in range(4)]
        ),
    )
    await stack.ready(created["id"])
    before = sum(
        s.value
        for f in stack.registry.collect()
        if f.name.endswith("changes_applied")
        for s in f.samples
        if s.labels.get("status") == "completed"
    )

    patched = await stack.client.patch(
        stack.url(f"/instance/{created['id']}"),
        json={
            "ipxeScript": "#!ipxe",
            "nvLinkInterfaces": [{"nvLinkLogicalPartitionId": b, "deviceInstance": n} for n in range(2)]
            + [{"nvLinkLogicalPartitionId": a, "deviceInstance": n} for n in (2, 3)],
        },
        headers=stack.headers,
    )
    assert patched.status_code == 200, patched.text
    ready = await stack.ready(created["id"])
    by_device = {i["deviceInstance"]: i for i in ready["nvLinkInterfaces"]}
    assert len(by_device) == 4 and {i["status"] for i in by_device.values()} == {"Ready"}
    domain = uuid.UUID(by_device[0]["nvLinkDomainId"])
    assert {int(by_device[n]["gpuGuid"]) for n in (0, 1)} == stack.named(domain, b)
    assert {int(by_device[n]["gpuGuid"]) for n in (2, 3)} == stack.named(domain, a)
    after = sum(
        s.value
        for f in stack.registry.collect()
        if f.name.endswith("changes_applied")
        for s in f.samples
        if s.labels.get("status") == "completed"
    )
    assert after - before == 2  # remove from a, create b: the move took one pass


async def test_deleting_an_instance_returns_its_gpus_and_then_the_partition_may_go(stack: Stack) -> None:
    lp = await stack.partition("short-lived")
    created = await stack.post(
        "/instance",
        stack.instance_body(
            "temp", nvLinkInterfaces=[{"nvLinkLogicalPartitionId": lp, "deviceInstance": n} for n in range(4)]
        ),
    )
    ready = await stack.ready(created["id"])
    guids = [i["gpuGuid"] for i in ready["nvLinkInterfaces"]]
    domain = uuid.UUID(ready["nvLinkInterfaces"][0]["nvLinkDomainId"])

    refused = await stack.client.delete(stack.url(f"/nvlink-logical-partition/{lp}"), headers=stack.headers)
    assert refused.status_code == 400
    assert (
        refused.json()["message"]
        == "1 active Instances are associated with this NVLink Logical Partition, unable to delete"
    )

    deleted = await stack.client.delete(stack.url(f"/instance/{created['id']}"), headers=stack.headers)
    assert deleted.status_code == 202 and deleted.text == "Deletion request was accepted"
    await stack.gone(f"/instance/{created['id']}")
    assert stack.holders(guids) == {DEFAULT_PARTITION_ID}
    assert stack.named(domain, lp) is None

    accepted = await stack.client.delete(stack.url(f"/nvlink-logical-partition/{lp}"), headers=stack.headers)
    assert accepted.status_code == 202
    await stack.gone(f"/nvlink-logical-partition/{lp}")


async def test_one_chassis_down_the_others_converge_and_all_converge_once_it_is_back(stack: Stack) -> None:
    """NMX-C: one rack's endpoint stops listening. NMX-M (one site-wide endpoint): operations on one
    domain never complete, so they time out and stay tracked until they do."""
    d0, d1 = stack.site.domains
    lp = await stack.partition("split")
    if stack.nmxc is not None:
        await stack.nmxc.stop_domain(d1)
    else:
        stack.fabric.set_faults(d1, never_complete=True)
    ids = {}
    for domain in (d0, d1):
        machine = stack.site.machines[domain][0].id
        body = stack.instance_body(
            f"on-{domain}", nvLinkInterfaces=[{"nvLinkLogicalPartitionId": lp, "deviceInstance": 0}]
        )
        body.pop("instanceTypeId")
        ids[domain] = (await stack.post("/instance", {**body, "machineId": machine}, expect=201))["id"]
    await stack.ready(ids[d0])

    async def error_series() -> bool:
        return (
            f"nico_nvlink_partition_monitor_{stack.kind}_connect_error_count{{"
            in generate_latest(stack.registry).decode()
        )

    await wait_for(error_series, within=WITHIN, what="connect-error series")
    assert (await stack.get(f"/instance/{ids[d1]}"))["status"] == "Pending"

    if stack.nmxc is not None:
        await stack.nmxc.start_domain(d1)
    else:
        stack.fabric.set_faults(d1, never_complete=False)
    await stack.ready(ids[d1])

    async def cleared() -> bool:
        return not await error_series()

    await wait_for(cleared, within=WITHIN, what="connect-error series cleared")


async def test_two_reconcilers_at_once_leave_one_partition_per_domain(
    stack: Stack, app_context: AppContext
) -> None:
    backend = stack.reconciler.backend
    second = Reconciler(
        app_context.engine,
        backend,
        stack.reconciler.config,
        ReconcilerMetrics(CollectorRegistry(), stack.kind, 120.0),
    )
    task = asyncio.create_task(second.run())
    try:
        lp = await stack.partition("shared")
        body = {
            **stack.instance_body("unused"),
            "namePrefix": "pair",
            "count": 6,
            "topologyOptimized": False,
            "nvLinkInterfaces": [{"nvLinkLogicalPartitionId": lp, "deviceInstance": n} for n in range(4)],
        }
        body.pop("name")
        created = await stack.post("/instance/batch", body)
        for instance in created:
            await stack.ready(instance["id"])
        for domain in stack.site.domains:
            names = [p.name for p in stack.fabric.partitions(domain)]
            assert len(names) == len(set(names))
            assert names.count(partition_name(uuid.UUID(lp))) <= 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await second.close()


class Killed(BaseException):
    """Stands for the process dying: nothing after the raise runs, no handler catches it."""


async def test_reconciler_killed_between_a_fabric_call_and_its_write_back(
    stack: Stack, app_context: AppContext
) -> None:
    async def die_after_create(op: object) -> None:
        if type(op).__name__ == "CreatePartition":
            raise Killed

    stack.reconciler.after_call = die_after_create
    lp = await stack.partition("survivor")
    created = await stack.post(
        "/instance",
        stack.instance_body(
            "crash",
            nvLinkInterfaces=[{"nvLinkLogicalPartitionId": lp, "deviceInstance": n} for n in range(4)],
        ),
    )

    def partitions_named() -> list[tuple[uuid.UUID, int]]:
        return [
            (d, p.partition_id)
            for d in stack.site.domains
            for p in stack.fabric.partitions(d)
            if p.name == partition_name(uuid.UUID(lp))
        ]

    await wait_for(lambda: bool(partitions_named()), within=WITHIN, what="the partition to be created")
    assert (await stack.get(f"/instance/{created['id']}"))["status"] == "Pending"  # never written back

    successor = Reconciler(
        app_context.engine,
        stack.reconciler.backend,
        stack.reconciler.config,
        ReconcilerMetrics(CollectorRegistry(), stack.kind, 120.0),
    )
    task = asyncio.create_task(successor.run())
    try:
        ready = await stack.ready(created["id"])
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await successor.close()
    assert len(partitions_named()) == 1  # adopted: no ghost, no duplicate, not rebuilt
    ((domain, _),) = partitions_named()
    assert {int(i["gpuGuid"]) for i in ready["nvLinkInterfaces"]} == stack.named(domain, lp)
    completed = sum(
        s.value
        for f in successor.metrics.changes.collect()
        for s in f.samples
        if s.labels.get("operation") == "create" and s.labels.get("status") == "completed"
    )
    assert completed == 0  # the successor created nothing
