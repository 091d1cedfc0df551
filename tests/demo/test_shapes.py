"""``nico demo --shape minipod --gpu gb300``: a minipod rack (one chassis serial, two NMX-C domains
with one endpoint each) of GB300 trays, end to end: the machines come with the GPU capability the
fabric reports ("NVIDIA GB300"), the instance type matches it, a topology-optimized batch per domain
becomes Ready inside its domain (so the reconciler found both endpoints), and the topology shows both
domains behind the one chassis. Also the seeding of that site over real gRPC, and the snapshot the
runner keeps refusing another shape."""

from __future__ import annotations

import io
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import NvLinkConfig
from nico.db.models import InstanceType, Machine, MachineCapability, NvlinkNmxcEndpoint
from nico.demo import seeding
from nico.demo.runner import DemoError, demo_fabric, load_fabric, save_fabric
from nico.fabric.nmxc.client import NmxcBackend
from nico.sim.nmxc_server import NmxcSimulator
from tests.support.demo_process import DemoProcess
from tests.support.waiting import wait_for

DEADLINE = 60.0


@pytest.mark.e2e
async def test_seeding_a_gb300_minipod_over_grpc_names_capabilities_as_the_fabric_does(
    session: AsyncSession,
) -> None:
    fabric = demo_fabric(1, "minipod", "gb300")
    async with NmxcSimulator(fabric) as nmxc:
        backend = NmxcBackend(NvLinkConfig(backend="nmxc"))
        try:
            found = await seeding.discover(backend, sorted(nmxc.domain_endpoints.values()))
        finally:
            await backend.close()
    assert {g.name for m in found.machines.values() for g in m.gpus} == {"NVIDIA GB300"}
    assert {g.slot_id for m in found.machines.values() for g in m.gpus} == {
        g.slot_id for d in fabric.domains.values() for g in d.gpus.values()
    }
    seeded = await seeding.seed(session, tenant_org="demo", discovery=found)
    await session.commit()
    assert (seeded.machines, seeded.domains, seeded.reserved) == (18, 2, 18)
    itype = await session.get(InstanceType, seeded.instance_type_id)
    assert itype is not None and itype.name == "gb300-4gpu"
    names = set(
        await session.scalars(
            select(MachineCapability.name).where(
                (MachineCapability.instance_type_id == itype.id) | MachineCapability.machine_id.is_not(None)
            )
        )
    )
    assert names == {"NVIDIA GB300"}
    typed = await session.scalars(select(Machine.instance_type_id))
    assert set(typed) == {itype.id}  # every machine matched the type on its GPU capability
    rows = list(await session.scalars(select(NvlinkNmxcEndpoint)))
    assert [r.chassis_serial for r in rows] == ["SIM-0001"]  # one row; the other domain by Hello


def test_the_runner_refuses_a_snapshot_of_another_shape(tmp_path: Path) -> None:
    console = Console(file=io.StringIO())
    path = tmp_path / "demo-fabric-nmxc.json"
    minipod = load_fabric(path, 1, console, shape="minipod", gpu="gb300")
    save_fabric(path, minipod)
    again = load_fabric(path, 1, console, shape="minipod", gpu="gb300")
    assert list(again.domains) == list(minipod.domains) and again.gpu_model == "gb300"
    with pytest.raises(DemoError, match="--shape minipod --gpu gb300"):
        load_fabric(path, 1, console, shape="nvl72", gpu="gb300")
    with pytest.raises(DemoError, match="--shape minipod --gpu gb300"):
        load_fabric(path, 1, console, shape="minipod", gpu="gb200")
    pair = tmp_path / "pair.json"
    save_fabric(pair, load_fabric(pair, 1, console, shape="nvl36x2"))
    assert len(load_fabric(pair, 2, console, shape="nvl36x2").domains) == 2  # grown, not ignored


@pytest.mark.e2e
async def test_nico_demo_runs_a_gb300_minipod(tmp_path: Path) -> None:
    demo = DemoProcess(tmp_path / "data", "--shape", "minipod", "--gpu", "gb300", "--racks", "1").start()
    try:
        assert "1 minipod racks (2 NVLink domains), 18 machines (GB300 trays)" in demo.output()
        base = "/v2/org/demo/nico"
        headers = {"Authorization": f"Bearer {demo.token}"}
        async with httpx.AsyncClient(base_url=demo.url, headers=headers) as client:

            async def get(path: str, **params: str) -> Any:
                response = await client.get(f"{base}{path}", params=params)
                assert response.status_code == 200, response.text
                return response.json()

            async def post(path: str, body: dict[str, Any]) -> Any:
                response = await client.post(f"{base}{path}", json=body)
                assert response.status_code == 201, response.text
                return response.json()

            site = (await get("/site"))[0]["id"]
            types = await get("/instance/type", siteId=site)
            assert [t["name"] for t in types] == ["gb300-4gpu"]
            vpc = await post("/vpc", {"name": "pods", "siteId": site})
            subnet = await post("/subnet", {"name": "pods", "vpcId": vpc["id"]})
            landed: set[str] = set()
            for n in range(2):  # one batch per domain: 9 trays each
                lp = await post("/nvlink-logical-partition", {"name": f"pod{n}", "siteId": site})
                created = await post(
                    "/instance/batch",
                    {
                        "namePrefix": f"pod{n}",
                        "count": 9,
                        "topologyOptimized": True,
                        "instanceTypeId": types[0]["id"],
                        "vpcId": vpc["id"],
                        "interfaces": [{"subnetId": subnet["id"]}],
                        "ipxeScript": "#!ipxe",
                        "nvLinkInterfaces": [
                            {"nvLinkLogicalPartitionId": lp["id"], "deviceInstance": d} for d in range(4)
                        ],
                    },
                )
                ids = [i["id"] for i in created]

                async def ready(ids: list[str] = ids) -> bool:
                    return all([(await get(f"/instance/{i}"))["status"] == "Ready" for i in ids])

                await wait_for(ready, within=DEADLINE, what=f"batch pod{n} Ready")
                domains = {
                    i["nvLinkDomainId"]
                    for i_ in ids
                    for i in (await get(f"/instance/{i_}"))["nvLinkInterfaces"]
                }
                assert len(domains) == 1, domains
                landed |= domains
            topology = await get("/nvlink-topology")
            shown = {d["id"]: d for d in topology["domains"]}
            assert set(shown) == landed and len(landed) == 2
            for body in shown.values():
                assert [c["chassisSerial"] for c in body["chassis"]] == ["SIM-0001"]
                assert len(body["chassis"][0]["trays"]) == 9
            assert all(uuid.UUID(d) for d in landed)
    finally:
        assert demo.stop() == 0, demo.output()
    assert (tmp_path / "data" / "demo-fabric-nmxc.json").exists()
