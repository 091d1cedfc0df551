"""The topology page's body is written without a model per GPU (PostgreSQL writes each domain's chassis,
trays and GPUs as JSON, nico the domain's own fields and the legend by their models): it must be byte
for byte what the declared schema (``NVLinkTopology``) dumps of it, for every kind of GPU and for text
that JSON has to escape."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.api.schemas.topology import NVLinkTopology
from nico.config import Settings
from nico.db.enums import NvLinkInterfaceStatus
from nico.db.models import Gpu, Instance, LogicalPartition, Machine, NvlinkInterface
from tests.api.test_topology import ALPHA, BETA, base, beta_network, fabric_holds, make_instance
from tests.support import factories as f
from tests.support.auth import bearer

# Quotes, backslashes, every control character PostgreSQL's text can hold (not NUL), non-ASCII, an
# emoji, DEL, and the line separators JavaScript cares about: what a tenant may put in an instance or
# partition name, or a fabric in a chassis serial or a health word.
AWKWARD = 'a"b\\c/' + "".join(map(chr, range(1, 32))) + "é中😀\x7f\u2028\u2029"
SHORT = 'a"b\\\n\x01\x1fé😀\x7f\u2028'  # within health's 32 characters


async def test_the_body_is_the_schemas_dump_byte_for_byte(
    client: httpx.AsyncClient, session: AsyncSession, settings: Settings
) -> None:
    net = await f.nvlink_site(session, racks=2, trays=4, tenant_org=ALPHA, quota=2)
    beta_vpc, beta_subnet = await beta_network(session, net, 1)
    await session.commit()
    headers = bearer(settings, ALPHA)
    lp, instance = await make_instance(client, ALPHA, headers, net, net.vpc, net.subnet)
    await make_instance(client, BETA, bearer(settings, BETA), net, beta_vpc, beta_subnet)
    mine = await session.scalar(select(Machine).where(Machine.instance_id == uuid.UUID(instance["id"])))
    assert mine is not None and mine.domain_uuid is not None
    # Text to escape everywhere PostgreSQL writes it: the instance's and partition's names, a chassis
    # serial, a GPU's health (an own GPU's and a free one's).
    await session.execute(update(Instance).where(Instance.id == mine.instance_id).values(name=AWKWARD))
    await session.execute(
        update(LogicalPartition).where(LogicalPartition.id == uuid.UUID(lp["id"])).values(name=AWKWARD)
    )
    await session.execute(
        update(Machine).where(Machine.chassis_serial == mine.chassis_serial).values(chassis_serial=AWKWARD)
    )
    free = await session.scalar(
        select(Machine).where(Machine.instance_id.is_(None), Machine.domain_uuid == mine.domain_uuid)
    )
    assert free is not None
    await session.execute(
        update(Gpu).where(Gpu.machine_id.in_([mine.id, free.id]), Gpu.device_id == 1).values(health=SHORT)
    )
    # A held tray, a binding the fabric holds (observed) and a Deleting one behind it (GPU 0).
    held = await session.scalar(select(Machine).where(Machine.instance_id.is_(None), Machine.id != free.id))
    assert held is not None
    await session.execute(update(Machine).where(Machine.id == held.id).values(foreign_gpus=1))
    await fabric_holds(session, lp["id"], mine, [1])
    await session.execute(
        update(NvlinkInterface)
        .where(NvlinkInterface.instance_id == mine.instance_id, NvlinkInterface.device_instance == 0)
        .values(status=NvLinkInterfaceStatus.READY)
    )
    # GPU 3's binding on its way out with an older one: two Deleting bindings and no live one.
    await session.execute(
        update(NvlinkInterface)
        .where(NvlinkInterface.instance_id == mine.instance_id, NvlinkInterface.device_instance == 3)
        .values(status=NvLinkInterfaceStatus.DELETING)
    )
    for device in (0, 3):
        session.add(
            NvlinkInterface(
                instance_id=mine.instance_id,
                logical_partition_id=uuid.UUID(lp["id"]),
                site_id=net.site.id,
                device_instance=device,
                status=NvLinkInterfaceStatus.DELETING,
            )
        )
    await session.commit()

    response = await client.get(f"{base(ALPHA)}/nvlink-topology", headers=headers)
    assert response.status_code == 200, response.text
    body = response.content
    assert body == NVLinkTopology.model_validate_json(body).model_dump_json().encode()

    # The page holds what the test put there (so the comparison above covered it).
    shown = response.json()
    gpus: dict[str, list[dict[str, Any]]] = {}
    for domain in shown["domains"]:
        for chassis in domain["chassis"]:
            for tray in chassis["trays"]:
                for gpu in tray["gpus"]:
                    gpus.setdefault(gpu["state"], []).append(gpu)
    assert {state: len(found) for state, found in gpus.items()} == {
        "mine": 4,
        "other": 4,
        "held": 4,
        "free": 20,
    }
    assert {g["instanceName"] for g in gpus["mine"]} == {AWKWARD}
    assert {g["nvLinkLogicalPartitionName"] for g in gpus["mine"]} == {AWKWARD}
    first, second = gpus["mine"][:2]
    assert (first["status"], first["observed"], first["health"]) == ("Ready", True, SHORT)
    assert (second["status"], second["observed"]) == ("Pending", False)
    assert [g["status"] for g in gpus["mine"]] == ["Ready", "Pending", "Pending", "Deleting"]
    assert SHORT in {g.get("health") for g in gpus["free"]}
    assert AWKWARD in {c["chassisSerial"] for d in shown["domains"] for c in d["chassis"]}
    assert [p["name"] for p in shown["nvLinkLogicalPartitions"]] == [AWKWARD]


async def test_an_empty_page_too(
    client: httpx.AsyncClient, session: AsyncSession, settings: Settings
) -> None:
    await f.nvlink_site(session, racks=1, trays=2, tenant_org=ALPHA)
    await session.commit()
    response = await client.get(
        f"{base(ALPHA)}/nvlink-topology", params={"pageNumber": 9}, headers=bearer(settings, ALPHA)
    )
    assert response.status_code == 200
    assert response.content == NVLinkTopology.model_validate_json(response.content).model_dump_json().encode()
    assert response.json()["domains"] == []
