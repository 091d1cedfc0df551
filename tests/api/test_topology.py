"""``GET /nvlink-topology`` (nico extension): every GPU of the domains at the tenant's sites, the
tenant's own with instance, partition and binding state, other tenants' as "other" with nothing else,
domain errors without other tenants' ids, in a fixed number of queries."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import httpx
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.api.context import AppContext
from nico.config import Settings
from nico.db.enums import NvLinkInterfaceStatus
from nico.db.models import Gpu, Machine, NvlinkDomain, NvlinkInterface, PhysicalPartition
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.db import statements_run

ALPHA, BETA = "tenant-alpha", "tenant-beta"


def base(org: str) -> str:
    return f"/v2/org/{org}/nico"


async def make_instance(
    client: httpx.AsyncClient, org: str, headers: dict[str, str], net: f.NvlinkSite, vpc: Any, subnet: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A logical partition of the org and one instance with all four GPUs in it."""
    lp = await client.post(
        f"{base(org)}/nvlink-logical-partition",
        json={"name": f"{org}-secret-lp", "siteId": str(net.site.id)},
        headers=headers,
    )
    assert lp.status_code == 201, lp.text
    created = await client.post(
        f"{base(org)}/instance",
        json={
            "name": f"{org}-secret-instance",
            "instanceTypeId": str(net.instance_type.id),
            "vpcId": str(vpc.id),
            "ipxeScript": "#!ipxe",
            "interfaces": [{"subnetId": str(subnet.id)}],
            "nvLinkInterfaces": [
                {"nvLinkLogicalPartitionId": lp.json()["id"], "deviceInstance": d} for d in range(4)
            ],
        },
        headers=headers,
    )
    assert created.status_code == 201, created.text
    return lp.json(), created.json()


def gpus_by_state(body: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {"free": [], "mine": [], "other": []}
    for domain in body["domains"]:
        for chassis in domain["chassis"]:
            for tray in chassis["trays"]:
                for gpu in tray["gpus"]:
                    found[gpu["state"]].append(gpu)
    return found


async def beta_network(session: AsyncSession, net: f.NvlinkSite, machines: int) -> tuple[Any, Any]:
    """BETA, a second tenant with ``machines`` of the site's allocation, and its VPC and subnet."""
    beta = await f.tenant(session, BETA)
    await f.allocation(session, beta, net.site, net.instance_type, machines)
    beta_vpc = await f.vpc(session, beta, net.site, name="beta-vpc")
    return beta_vpc, await f.subnet(session, beta_vpc, name="beta-subnet")


async def fabric_holds(session: AsyncSession, lp_id: str, machine: Machine, devices: Sequence[int]) -> None:
    """The fabric seen holding ``devices`` (device ids) of the machine's GPUs in the logical partition
    (a physical partition of it in the machine's domain)."""
    physical = PhysicalPartition(
        logical_partition_id=uuid.UUID(lp_id),
        domain_uuid=machine.domain_uuid,
        nmx_partition_id=1,
        fabric_ref="1",
        name=f"nico-{lp_id}",
    )
    session.add(physical)
    await session.flush()
    await session.execute(
        update(Gpu)
        .where(Gpu.machine_id == machine.id, Gpu.device_id.in_(devices))
        .values(physical_partition_id=physical.id)
    )


async def test_a_tenant_sees_its_gpus_and_only_that_others_are_in_use(
    client: httpx.AsyncClient, session: AsyncSession, settings: Settings, app_context: AppContext
) -> None:
    net = await f.nvlink_site(session, racks=2, trays=3, tenant_org=ALPHA, quota=3)
    beta_vpc, beta_subnet = await beta_network(session, net, 3)
    await session.commit()
    alpha_headers, beta_headers = bearer(settings, ALPHA), bearer(settings, BETA)
    alpha_lp, alpha_instance = await make_instance(client, ALPHA, alpha_headers, net, net.vpc, net.subnet)
    beta_lp, beta_instance = await make_instance(client, BETA, beta_headers, net, beta_vpc, beta_subnet)
    for domain in net.domains:
        await session.execute(
            update(NvlinkDomain)
            .where(NvlinkDomain.uuid == domain)
            .values(
                last_error=f"nico-{beta_lp['id']} and nico-{alpha_lp['id']} in {domain}: unreachable",
                consecutive_failures=3,
            )
        )
    await session.commit()

    with statements_run(app_context.engine) as statements:
        response = await client.get(f"{base(ALPHA)}/nvlink-topology", headers=alpha_headers)
    assert response.status_code == 200, response.text
    # the tenant, its sites (with their domain counts), the page's domains of its one site, the other
    # domains of their partitions (every GPU is read at the driver level, in one more statement, which
    # SQLAlchemy does not see): not one per domain or tray
    assert len(statements) == 4
    body = response.json()
    for secret in (beta_lp["id"], beta_lp["name"], beta_instance["id"], beta_instance["name"], BETA):
        assert secret not in response.text

    assert [d["id"] for d in body["domains"]] == [str(d) for d in net.domains]  # by chassis serial
    for shown in body["domains"]:
        assert shown["siteName"] == net.site.name
        index = net.domains.index(uuid.UUID(shown["id"]))
        assert [c["chassisSerial"] for c in shown["chassis"]] == [f"{net.site.name}-CHS{index:04d}"]
        assert [t["trayIndex"] for t in shown["chassis"][0]["trays"]] == [0, 1, 2]
        for tray in shown["chassis"][0]["trays"]:
            assert [g["deviceInstance"] for g in tray["gpus"]] == [0, 1, 2, 3]
        assert shown["consecutiveFailures"] == 3
        assert alpha_lp["id"] in shown["error"] and str(shown["id"]) in shown["error"]
        assert shown["error"].count("…") == 1
    states = gpus_by_state(body)
    assert len(states["mine"]) == 4 and len(states["other"]) == 4 and len(states["free"]) == 16
    for gpu in states["mine"]:
        assert gpu["instanceId"] == alpha_instance["id"]
        assert gpu["instanceName"] == alpha_instance["name"]
        assert gpu["nvLinkLogicalPartitionId"] == alpha_lp["id"]
        assert gpu["nvLinkLogicalPartitionName"] == alpha_lp["name"]
        assert gpu["status"] == "Pending" and gpu["observed"] is False
    for gpu in states["other"] + states["free"]:
        assert {k: v for k, v in gpu.items() if k not in ("state", "deviceInstance")} == {
            "instanceId": None,
            "instanceName": None,
            "nvLinkLogicalPartitionId": None,
            "nvLinkLogicalPartitionName": None,
            "status": None,
            "observed": False,
        }
    assert sum(d["pending"] for d in body["domains"]) == 4
    [alpha_domain] = {
        d["id"] for d in body["domains"] for c in d["chassis"] for t in c["trays"] for g in t["gpus"]
        if g["state"] == "mine"
    }  # fmt: skip
    assert body["nvLinkLogicalPartitions"] == [
        {
            "id": alpha_lp["id"],
            "name": alpha_lp["name"],
            "status": "Ready",
            "nvLinkDomainIds": [alpha_domain],
            "split": False,
        }
    ]

    # The other tenant sees the mirror image.
    mirror = await client.get(f"{base(BETA)}/nvlink-topology", headers=beta_headers)
    assert alpha_lp["id"] not in mirror.text and alpha_instance["id"] not in mirror.text
    assert {g["instanceId"] for g in gpus_by_state(mirror.json())["mine"]} == {beta_instance["id"]}


async def test_realised_bindings_are_ready_and_observed_and_a_deleting_one_hides_behind_the_live_one(
    client: httpx.AsyncClient, session: AsyncSession, settings: Settings
) -> None:
    net = await f.nvlink_site(session, racks=1, trays=2, tenant_org=ALPHA)
    await session.commit()
    headers = bearer(settings, ALPHA)
    lp, instance = await make_instance(client, ALPHA, headers, net, net.vpc, net.subnet)
    machine = await session.scalar(select(Machine).where(Machine.instance_id == uuid.UUID(instance["id"])))
    assert machine is not None and machine.domain_uuid is not None
    await fabric_holds(session, lp["id"], machine, [1, 2])
    await session.execute(
        update(NvlinkInterface)
        .where(NvlinkInterface.instance_id == uuid.UUID(instance["id"]), NvlinkInterface.device_instance <= 1)
        .values(status=NvLinkInterfaceStatus.READY)
    )
    # An older binding of GPU 0, on its way out, beside the live one.
    session.add(
        NvlinkInterface(
            instance_id=uuid.UUID(instance["id"]),
            logical_partition_id=uuid.UUID(lp["id"]),
            site_id=net.site.id,
            device_instance=0,
            status=NvLinkInterfaceStatus.DELETING,
        )
    )
    await session.commit()

    response = await client.get(f"{base(ALPHA)}/nvlink-topology", headers=headers)
    assert response.status_code == 200
    [domain] = response.json()["domains"]
    tray = next(t for c in domain["chassis"] for t in c["trays"] if t["trayIndex"] == machine.tray_index)
    assert [(g["deviceInstance"], g["status"], g["observed"]) for g in tray["gpus"]] == [
        (0, "Ready", True),
        (1, "Ready", True),
        (2, "Pending", False),
        (3, "Pending", False),
    ]
    assert domain["pending"] == 2 and domain["error"] is None and domain["errorSince"] is None


async def test_sites_without_an_allocation_and_callers_without_the_role(
    client: httpx.AsyncClient, session: AsyncSession, settings: Settings
) -> None:
    await f.nvlink_site(session, racks=1, trays=2, tenant_org=ALPHA)
    await f.tenant(session, BETA)  # a tenant, but no allocation anywhere
    await session.commit()
    response = await client.get(f"{base(BETA)}/nvlink-topology", headers=bearer(settings, BETA))
    assert response.status_code == 200
    assert response.json() == {"domains": [], "nvLinkLogicalPartitions": []}
    provider_only = await client.get(
        f"{base(ALPHA)}/nvlink-topology", headers=bearer(settings, ALPHA, "PROVIDER_ADMIN")
    )
    assert provider_only.status_code == 403
    no_tenant = await client.get(f"{base('nobody')}/nvlink-topology", headers=bearer(settings, "nobody"))
    assert no_tenant.status_code == 403
    assert (await client.get(f"{base(ALPHA)}/nvlink-topology")).status_code == 401
