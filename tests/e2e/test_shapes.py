"""End to end on each rack shape and tray generation: NVL72, NVL36x2 (one domain over two chassis
serials) and minipods (several NMX-C domains behind one chassis serial, each with its own endpoint),
GB200 and GB300 trays. The tenant REST API, a running reconciler over real gRPC (or NMX-M HTTP) on
loopback, and the simulator: ``topologyOptimized`` batches stay inside one domain, every domain
converges, and ``GET /nvlink-topology`` shows the shape. Every wait has a deadline."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
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
from tests.support.fabric_stack import FabricStack, fabric_stack
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e
WITHIN = 30.0


@dataclass(frozen=True)
class Shape:
    name: str
    kind: str  # fabric manager: nmxc | nmxm
    gpu: str
    discover: bool = False  # list every domain's endpoint in nmxc_endpoints

    def fabric(self) -> SimFabric:
        units = {"nvl72": "racks", "nvl36x2": "nvl36x2", "minipod": "minipods"}[self.name]
        sizes = {"racks": 0, "nvl36x2": 0, "minipods": 0, units: 1}
        return SimFabric(
            sizes["racks"], nvl36x2=sizes["nvl36x2"], minipods=sizes["minipods"], gpu=self.gpu, seed=5
        )


SHAPES = [
    Shape("nvl72", "nmxc", "gb200"),
    Shape("nvl36x2", "nmxc", "gb300"),
    Shape("minipod", "nmxc", "gb300", discover=True),
    Shape("minipod", "nmxm", "gb200"),
]


@dataclass
class ShapeStack:
    shape: Shape
    stack: FabricStack
    client: httpx.AsyncClient
    headers: dict[str, str]

    @property
    def fabric(self) -> SimFabric:
        return self.stack.fabric

    def url(self, path: str) -> str:
        return f"/v2/org/{self.stack.site.nv.tenant.org}/nico{path}"

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        response = await self.client.post(self.url(path), json=body, headers=self.headers)
        assert response.status_code == 201, response.text
        return response.json()

    async def get(self, path: str) -> Any:
        response = await self.client.get(self.url(path), headers=self.headers)
        assert response.status_code == 200, response.text
        return response.json()

    async def batch(self, prefix: str, count: int) -> tuple[str, list[dict[str, Any]]]:
        """A logical partition and a topology-optimized batch of ``count`` instances in it, Ready."""
        nv = self.stack.site.nv
        lp = (await self.post("/nvlink-logical-partition", {"name": prefix, "siteId": str(nv.site.id)}))["id"]
        created = await self.post(
            "/instance/batch",
            {
                "namePrefix": prefix,
                "count": count,
                "topologyOptimized": True,
                "instanceTypeId": str(nv.instance_type.id),
                "vpcId": str(nv.vpc.id),
                "interfaces": [{"subnetId": str(nv.subnet.id)}],
                "ipxeScript": "#!ipxe",
                "nvLinkInterfaces": [{"nvLinkLogicalPartitionId": lp, "deviceInstance": n} for n in range(4)],
            },
        )
        assert len(created) == count
        ids = [i["id"] for i in created]

        async def all_ready() -> bool:
            return all([(await self.get(f"/instance/{i}"))["status"] == "Ready" for i in ids])

        await wait_for(all_ready, within=WITHIN, what=f"{count} instances of {prefix} Ready")
        return lp, [await self.get(f"/instance/{i}") for i in ids]


@pytest_asyncio.fixture(params=SHAPES, ids=[f"{s.name}-{s.gpu}-{s.kind}" for s in SHAPES])
async def shaped(
    request: pytest.FixtureRequest,
    session: AsyncSession,
    app: FastAPI,
    app_context: AppContext,
    settings: Settings,
) -> AsyncIterator[ShapeStack]:
    shape: Shape = request.param
    running = fabric_stack(
        shape.kind,
        session,
        app_context.engine,
        fabric_seed=5,
        call_timeout="2s",
        operation_timeout="3s",
        fabric=shape.fabric(),
        discover=shape.discover,
    )
    transport = httpx.ASGITransport(app=app)
    async with running as s, httpx.AsyncClient(transport=transport, base_url="http://nico.test") as client:
        yield ShapeStack(shape, s, client, bearer(settings, s.site.nv.tenant.org))


async def test_each_domain_takes_a_topology_optimized_batch_and_converges(shaped: ShapeStack) -> None:
    fabric = shaped.fabric
    expected_gpu = {"gb200": "NVIDIA GB200", "gb300": "NVIDIA GB300"}[shaped.shape.gpu]
    trays = {d: len({(g.chassis_serial, g.tray_index) for g in fabric.gpus(d)}) for d in fabric.domains}
    used: set[uuid.UUID] = set()
    for n, size in enumerate(trays.values()):
        lp, ready = await shaped.batch(f"job{n}", size)  # exactly one domain's worth of trays
        domains = {i["nvLinkDomainId"] for r in ready for i in r["nvLinkInterfaces"]}
        assert len(domains) == 1, f"batch {n} spans domains {domains}"
        landed = uuid.UUID(domains.pop())
        assert landed not in used
        used.add(landed)
        # The fabric holds the whole domain in the batch's partition, on that domain's controller.
        named = [p for p in fabric.partitions(landed) if p.name == partition_name(uuid.UUID(lp))]
        assert len(named) == 1 and named[0].gpu_uids == set(fabric.domain(landed).gpus)
    assert used == set(fabric.domains)  # every domain of the shape reconciled, minipods' too
    assert {d.gpu_description for d in fabric.domains.values()} == {expected_gpu}

    topology = await shaped.get("/nvlink-topology")
    shown = {uuid.UUID(d["id"]): d for d in topology["domains"]}
    assert set(shown) == set(fabric.domains)
    for domain, body in shown.items():
        simulated = fabric.domain(domain)
        assert [c["chassisSerial"] for c in body["chassis"]] == list(simulated.chassis_serials)
        trays_shown = sorted(
            (c["chassisSerial"], t["trayIndex"]) for c in body["chassis"] for t in c["trays"]
        )
        assert trays_shown == sorted(simulated.compute_nodes())
        assert {g["state"] for c in body["chassis"] for t in c["trays"] for g in t["gpus"]} == {"mine"}
    if shaped.shape.name == "minipod":  # one chassis serial, several domains with their own trays
        assert len(shown) == fabric.minipod_domains
        assert {c["chassisSerial"] for d in shown.values() for c in d["chassis"]} == {"SIM-0001"}
    if shaped.shape.name == "nvl36x2":  # one domain over two chassis serials
        assert len(shown) == 1 and len(next(iter(shown.values()))["chassis"]) == 2
