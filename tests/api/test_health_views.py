"""What tenants see of NVLink health (issue 13 part 1): the GPU's health on its NVLink interface, the
worst physical-partition health on the logical partition, and the health of free and own GPUs on the
topology (never another tenant's). The rows are written as the reconciler writes them
(tests/reconciler/test_health.py drives the same columns from the simulator's knobs)."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Gpu, Machine, NvlinkInterface, PhysicalPartition
from tests.api.conftest import BASE, instance_body
from tests.support import factories as f

STATIC = Path(__file__).resolve().parents[2] / "nico" / "web" / "static"


async def test_interfaces_partitions_and_topology_show_fabric_health(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    lp = (
        await client.post(
            f"{BASE}/nvlink-logical-partition",
            json={"name": "lp-h", "siteId": str(world.site.id)},
            headers=headers,
        )
    ).json()
    lp_id = uuid.UUID(lp["id"])
    nvlink = [{"nvLinkLogicalPartitionId": lp["id"], "deviceInstance": n} for n in range(4)]
    created = await client.post(
        f"{BASE}/instance", json=instance_body(world, nvLinkInterfaces=nvlink), headers=headers
    )
    assert created.status_code == 201, created.text
    machine = await session.scalar(select(Machine).where(Machine.id == created.json()["machineId"]))
    assert machine is not None and machine.domain_uuid is not None

    # Not observed yet: no health anywhere.
    listed = (await client.get(f"{BASE}/nvlink-interface", headers=headers)).json()
    assert listed and all("nvLinkHealth" not in i for i in listed)
    assert (
        "nvLinkHealth"
        not in (await client.get(f"{BASE}/nvlink-logical-partition/{lp_id}", headers=headers)).json()
    )

    # The reconciler realised the partition and read health: GPU 1 lost NVLink.
    physical = PhysicalPartition(
        logical_partition_id=lp_id,
        domain_uuid=machine.domain_uuid,
        nmx_partition_id=3,
        fabric_ref="3",
        name=f"nico-{lp_id}",
        health="DEGRADED",
    )
    session.add(physical)
    gpus = list(
        await session.scalars(select(Gpu).where(Gpu.machine_id == machine.id).order_by(Gpu.device_id))
    )
    for gpu in gpus:
        gpu.health = "NO_NVLINK" if gpu.device_id == 2 else "HEALTHY"
    await session.execute(update(Gpu).where(Gpu.machine_id != machine.id).values(health="HEALTHY"))
    for binding in await session.scalars(
        select(NvlinkInterface).where(NvlinkInterface.instance_id == machine.instance_id)
    ):
        binding.gpu_uid = gpus[binding.device_instance].gpu_uid
    other = next(m for m in world.machines if m.id != machine.id and m.domain_uuid == machine.domain_uuid)
    await session.execute(
        update(Gpu).where(Gpu.machine_id == other.id, Gpu.device_id == 1).values(health="DEGRADED")
    )
    await session.commit()

    listed = (await client.get(f"{BASE}/nvlink-interface", headers=headers)).json()
    assert {i["deviceInstance"]: i["nvLinkHealth"] for i in listed} == {
        0: "HEALTHY",
        1: "NO_NVLINK",
        2: "HEALTHY",
        3: "HEALTHY",
    }
    got = (await client.get(f"{BASE}/nvlink-logical-partition/{lp_id}", headers=headers)).json()
    assert got["nvLinkHealth"] == "DEGRADED"

    topology = (await client.get(f"{BASE}/nvlink-topology", headers=headers)).json()
    [domain] = [d for d in topology["domains"] if d["id"] == str(machine.domain_uuid)]
    trays = {t["trayIndex"]: t for c in domain["chassis"] for t in c["trays"]}
    mine = trays[machine.tray_index]["gpus"]
    assert [g.get("health") for g in mine] == ["HEALTHY", "NO_NVLINK", "HEALTHY", "HEALTHY"]
    assert trays[other.tray_index]["gpus"][0]["health"] == "DEGRADED"  # a free GPU: the tenant may see it

    # The page marks GPUs that are not HEALTHY.
    script = (STATIC / "app.js").read_text()
    assert '"data-health": gpu.health && gpu.health !== "HEALTHY"' in script
    assert ".gpu[data-health]" in (STATIC / "style.css").read_text()
