"""Fixtures of the tenant API tests: a committed NVLink site and the tenant's headers."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
import pytest_asyncio
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from tests.support import factories as f
from tests.support.auth import bearer

ORG = "tenant-org"
BASE = f"/v2/org/{ORG}/nico"


@pytest_asyncio.fixture
async def world(session: AsyncSession) -> f.NvlinkSite:
    """Two racks of four trays each, a tenant with an allocation for all eight, a VPC and a subnet."""
    s = await f.nvlink_site(session, racks=2, trays=4)
    await session.commit()
    return s


@pytest.fixture
def headers(settings: Settings) -> dict[str, str]:
    return bearer(settings, ORG)


def instance_body(world: f.NvlinkSite, name: str = "inst-1", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "instanceTypeId": str(world.instance_type.id),
        "vpcId": str(world.vpc.id),
        "ipxeScript": "#!ipxe\nchain http://boot",
        "interfaces": [{"subnetId": str(world.subnet.id)}],
    }
    body.update(extra)
    return body


async def make_instances(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, partition: uuid.UUID, count: int
) -> list[uuid.UUID]:
    """``count`` instances node-0.. with four NVLink interfaces each in ``partition``; their ids."""
    out = []
    for n in range(count):
        items = [{"nvLinkLogicalPartitionId": str(partition), "deviceInstance": i} for i in range(4)]
        response = await client.post(
            f"{BASE}/instance",
            json=instance_body(world, name=f"node-{n}", nvLinkInterfaces=items),
            headers=headers,
        )
        assert response.status_code == 201, response.text
        out.append(uuid.UUID(response.json()["id"]))
    return out


def batch_body(world: f.NvlinkSite, count: int = 2, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "namePrefix": "worker",
        "count": count,
        "instanceTypeId": str(world.instance_type.id),
        "vpcId": str(world.vpc.id),
        "ipxeScript": "#!ipxe",
        "interfaces": [{"subnetId": str(world.subnet.id)}],
    }
    body.update(extra)
    return body


def error(response: httpx.Response) -> tuple[int, str]:
    return response.status_code, response.json()["message"]
