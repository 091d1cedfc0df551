"""``GET /nvlink-topology/overview`` (nico extension): one cell of counts per NVLink domain, in the
topology's rack order and paged like it, agreeing GPU for GPU with ``GET /nvlink-topology``; and
``GET /nvlink-topology`` paged by domain (``X-Pagination``) and filtered to one domain, with a partition
split over two pages still shown split."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from sqlalchemy import and_, delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.api.context import AppContext
from nico.config import Settings
from nico.db.enums import NvLinkInterfaceStatus
from nico.db.models import Gpu, Machine, NvlinkDomain, NvlinkInterface, TenantSite
from tests.api.test_topology import base, make_instance
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.db import statements_run

ALPHA, BETA = "tenant-alpha", "tenant-beta"


async def second_instance(
    client: httpx.AsyncClient, org: str, headers: dict[str, str], lp: str, net: Any
) -> str:
    created = await client.post(
        f"{base(org)}/instance",
        json={
            "name": f"{org}-second",
            "instanceTypeId": str(net.instance_type.id),
            "vpcId": str(net.vpc.id),
            "ipxeScript": "#!ipxe",
            "interfaces": [{"subnetId": str(net.subnet.id)}],
            "nvLinkInterfaces": [{"nvLinkLogicalPartitionId": lp, "deviceInstance": d} for d in range(4)],
        },
        headers=headers,
    )
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


async def put_on(session: AsyncSession, net: f.NvlinkSite, instance: str, rack: int, tray: int) -> None:
    """Move ``instance`` onto tray ``tray`` of rack ``rack`` (placement's choice replaced by the test's)."""
    await session.execute(
        update(Machine).where(Machine.instance_id == uuid.UUID(instance)).values(instance_id=None)
    )
    await session.execute(
        update(Machine)
        .where(Machine.domain_uuid == net.domains[rack], Machine.tray_index == tray)
        .values(instance_id=uuid.UUID(instance))
    )


async def hold(session: AsyncSession, domain: uuid.UUID, *, tray: int, gpus: int) -> None:
    """The tray's ``gpus`` in another fabric manager's partition, as the reconciler records it."""
    where = and_(Machine.domain_uuid == domain, Machine.tray_index == tray)
    await session.execute(update(Machine).where(where).values(foreign_gpus=gpus))
    await session.execute(update(NvlinkDomain).where(NvlinkDomain.uuid == domain).values(foreign_gpus=gpus))


async def unhealthy(session: AsyncSession, domain: uuid.UUID, *, tray: int, device_id: int) -> None:
    """The GPU's NVLink down, as the fabric last reported it."""
    machine = select(Machine.id).where(Machine.domain_uuid == domain, Machine.tray_index == tray)
    await session.execute(
        update(Gpu)
        .where(Gpu.machine_id == machine.scalar_subquery(), Gpu.device_id == device_id)
        .values(health="NO_NVLINK")
    )


async def fail(session: AsyncSession, domain: uuid.UUID, error: str, failures: int) -> None:
    """The reconciler's error on the domain after ``failures`` passes."""
    await session.execute(
        update(NvlinkDomain)
        .where(NvlinkDomain.uuid == domain)
        .values(last_error=error, consecutive_failures=failures)
    )


async def a_busy_site(client: httpx.AsyncClient, session: AsyncSession, settings: Settings) -> Any:
    """Three racks of three trays. Rack 0: alpha's first instance (Pending) and a free GPU whose NVLink
    is down. Rack 1: alpha's second instance in the same partition (Ready: the partition is split), and
    a failing reconciler whose error names beta's partition. Rack 2: beta's instance (its GPU 0 not
    healthy, which alpha is not shown) and a tray held by another fabric manager."""
    net = await f.nvlink_site(session, racks=3, trays=3, tenant_org=ALPHA, quota=2)
    beta = await f.tenant(session, BETA)
    await f.allocation(session, beta, net.site, net.instance_type, 1)
    beta_vpc = await f.vpc(session, beta, net.site, name="beta-vpc")
    beta_subnet = await f.subnet(session, beta_vpc, name="beta-subnet")
    await session.commit()
    alpha_headers, beta_headers = bearer(settings, ALPHA), bearer(settings, BETA)
    lp, first = await make_instance(client, ALPHA, alpha_headers, net, net.vpc, net.subnet)
    second = await second_instance(client, ALPHA, alpha_headers, lp["id"], net)
    beta_lp, beta_instance = await make_instance(client, BETA, beta_headers, net, beta_vpc, beta_subnet)
    await put_on(session, net, first["id"], 0, 0)
    await put_on(session, net, second, 1, 0)
    await put_on(session, net, beta_instance["id"], 2, 0)
    await session.execute(
        update(NvlinkInterface)
        .where(NvlinkInterface.instance_id == uuid.UUID(second))
        .values(status=NvLinkInterfaceStatus.READY)
    )
    await unhealthy(session, net.domains[0], tray=2, device_id=2)
    await fail(session, net.domains[1], f"nico-{beta_lp['id']} in {net.domains[1]}: unreachable", 2)
    await unhealthy(session, net.domains[2], tray=0, device_id=1)  # beta's tray
    await hold(session, net.domains[2], tray=1, gpus=2)
    await session.commit()
    return net, lp, beta_lp


def figures(cell: dict[str, Any]) -> dict[str, Any]:
    keys = ("chassis", "gpus", "free", "mine", "other", "held", "unhealthy", "pending")
    more = ("nvLinkLogicalPartitions", "splitNvLinkLogicalPartitions", "foreignGpus", "consecutiveFailures")
    return {k: cell[k] for k in keys + more}


async def test_the_overview_counts_each_domain_as_the_gpu_view_draws_it(
    client: httpx.AsyncClient, session: AsyncSession, settings: Settings, app_context: AppContext
) -> None:
    net, lp, beta_lp = await a_busy_site(client, session, settings)
    headers = bearer(settings, ALPHA)
    with statements_run(app_context.engine) as statements:
        response = await client.get(f"{base(ALPHA)}/nvlink-topology/overview", headers=headers)
    assert response.status_code == 200, response.text
    # the tenant, its sites (with their domain counts), the page's domains of its one site, their GPU
    # counts, the tenant's bindings, the partitions' other domains
    assert len(statements) == 6
    assert json.loads(response.headers["X-Pagination"])["total"] == 3
    cells = response.json()
    assert [c["id"] for c in cells] == [str(d) for d in net.domains]  # rack order
    assert beta_lp["id"] not in response.text
    zero = {"chassis": 1, "gpus": 12, "other": 0, "held": 0, "unhealthy": 0, "foreignGpus": 0}
    expected = [
        {**zero, "free": 8, "mine": 4, "unhealthy": 1, "pending": 4},
        {**zero, "free": 8, "mine": 4, "pending": 0, "consecutiveFailures": 2},
        {**zero, "free": 4, "mine": 0, "other": 4, "held": 4, "pending": 0, "foreignGpus": 2},
    ]
    partitions = [(1, 1), (1, 1), (0, 0)]  # alpha's partition is on racks 0 and 1: split
    for cell, want, (held, split) in zip(cells, expected, partitions, strict=True):
        want = {"consecutiveFailures": 0, **want}
        want |= {"nvLinkLogicalPartitions": held, "splitNvLinkLogicalPartitions": split}
        assert figures(cell) == want, cell["id"]
    assert [c["error"] is None for c in cells] == [True, False, True]
    assert cells[1]["error"] == f"nico-… in {net.domains[1]}: unreachable"

    # Every figure agrees with the GPU-by-GPU view of the same domain.
    full = (await client.get(f"{base(ALPHA)}/nvlink-topology", headers=headers)).json()
    for cell, domain in zip(cells, full["domains"], strict=True):
        gpus = [g for c in domain["chassis"] for t in c["trays"] for g in t["gpus"]]
        assert cell["id"] == domain["id"] and cell["pending"] == domain["pending"]
        for state in ("free", "mine", "other", "held"):
            assert cell[state] == sum(g["state"] == state for g in gpus), (cell["id"], state)
        assert cell["gpus"] == len(gpus)
        assert cell["unhealthy"] == sum(g.get("health") not in (None, "HEALTHY") for g in gpus)
        assert cell["error"] == domain["error"]
    [legend] = full["nvLinkLogicalPartitions"]
    assert legend["id"] == lp["id"] and legend["split"] is True

    # The other tenant: its own instance on rack 2, alpha's as another tenant's.
    mirror = (
        await client.get(f"{base(BETA)}/nvlink-topology/overview", headers=bearer(settings, BETA))
    ).json()
    assert [(c["mine"], c["other"], c["unhealthy"]) for c in mirror] == [(0, 4, 1), (0, 4, 0), (4, 0, 1)]
    assert lp["id"] not in str(mirror)


async def test_both_views_are_paged_by_domain_and_a_partition_split_over_pages_stays_split(
    client: httpx.AsyncClient, session: AsyncSession, settings: Settings
) -> None:
    net, lp, _ = await a_busy_site(client, session, settings)
    headers = bearer(settings, ALPHA)

    async def get(path: str, **params: Any) -> httpx.Response:
        response = await client.get(f"{base(ALPHA)}{path}", params=params, headers=headers)
        assert response.status_code == 200, response.text
        return response

    first = await get("/nvlink-topology/overview", pageSize=2)
    second = await get("/nvlink-topology/overview", pageSize=2, pageNumber=2)
    assert [c["id"] for c in first.json() + second.json()] == [str(d) for d in net.domains]
    assert json.loads(second.headers["X-Pagination"]) == {
        "pageNumber": 2,
        "pageSize": 2,
        "total": 3,
        "orderBy": None,
    }
    past = await get("/nvlink-topology/overview", pageSize=2, pageNumber=3)
    assert past.json() == [] and json.loads(past.headers["X-Pagination"])["total"] == 3

    # Rack 1 alone: alpha's partition is drawn there, and its other domain (rack 0) is named.
    page = await get("/nvlink-topology", pageSize=1, pageNumber=2)
    assert [d["id"] for d in page.json()["domains"]] == [str(net.domains[1])]
    assert json.loads(page.headers["X-Pagination"])["total"] == 3
    [legend] = page.json()["nvLinkLogicalPartitions"]
    assert legend["id"] == lp["id"] and legend["split"] is True
    assert legend["nvLinkDomainIds"] == sorted(str(d) for d in net.domains[:2])

    only = await get("/nvlink-topology", nvLinkDomainId=str(net.domains[2]))
    assert [d["id"] for d in only.json()["domains"]] == [str(net.domains[2])]
    assert only.json()["nvLinkLogicalPartitions"] == []
    assert json.loads(only.headers["X-Pagination"])["total"] == 1

    for path, params in (
        ("/nvlink-topology", {"nvLinkDomainId": "rack-1"}),
        ("/nvlink-topology", {"pageSize": "101"}),
        ("/nvlink-topology/overview", {"pageNumber": "x"}),
    ):
        refused = await client.get(f"{base(ALPHA)}{path}", params=params, headers=headers)
        assert refused.status_code == 400, (path, params, refused.text)
    provider = bearer(settings, ALPHA, "PROVIDER_ADMIN")
    assert (await client.get(f"{base(ALPHA)}/nvlink-topology/overview", headers=provider)).status_code == 403


async def test_rack_order_follows_machines_added_moved_and_removed(
    client: httpx.AsyncClient, session: AsyncSession, settings: Settings
) -> None:
    """The domains' rack order is kept by the writes to machine (rule domain_rack_order): a machine
    with a lower chassis serial moves its domain first, changing that serial moves it back, and a domain
    whose machines are all gone comes first (no serial)."""
    net = await f.nvlink_site(session, racks=3, trays=2, tenant_org=ALPHA, quota=1)
    await session.commit()
    headers = bearer(settings, ALPHA)

    async def order() -> list[uuid.UUID]:
        response = await client.get(f"{base(ALPHA)}/nvlink-topology/overview", headers=headers)
        assert response.status_code == 200, response.text
        return [uuid.UUID(c["id"]) for c in response.json()]

    async def serials() -> list[str | None]:
        rows = await session.execute(select(NvlinkDomain.uuid, NvlinkDomain.rack_serial))
        found = dict(rows.all())
        return [found[d] for d in net.domains]

    first, second, third = net.domains
    assert await order() == [first, second, third]
    late = Machine(
        id="late-tray",
        site_id=net.site.id,
        status="Ready",
        domain_uuid=third,
        chassis_serial="A-0",
        tray_index=0,
    )
    session.add(late)  # an NVL36x2 domain's second chassis, whose serial sorts first
    await session.commit()
    assert await order() == [third, first, second]
    late.chassis_serial = "zzz-9"
    await session.commit()
    assert await order() == [first, second, third]
    assert await serials() == [f"{net.site.name}-CHS{rack:04d}" for rack in range(3)]
    gone = select(Machine.id).where(Machine.domain_uuid == second)
    await session.execute(delete(Gpu).where(Gpu.machine_id.in_(gone)))
    await session.execute(delete(Machine).where(Machine.domain_uuid == second))
    await session.commit()
    assert (await serials())[1] is None
    assert await order() == [second, first, third]


async def test_pages_read_site_by_site_walk_one_rack_order_over_sites_of_one_name(
    client: httpx.AsyncClient, session: AsyncSession, settings: Settings
) -> None:
    """The pages read each site's domains on their own, yet every page size walks the one order (site
    name, rack serial with domains without one first, uuid): two providers' sites of one name interleave
    by serial, and a page reaches over from one site into the next."""
    alpha = await f.tenant(session, ALPHA)
    one, two = await f.provider(session, "provider-one"), await f.provider(session, "provider-two")
    sites = [
        await f.site(session, one, name="b-site"),
        await f.site(session, two, name="b-site"),
        await f.site(session, one, name="a-site"),
    ]
    serials: list[list[str | None]] = [["S-03", None, "S-01"], ["S-02", "S-04"], ["S-09", "S-00", None]]
    domains: list[tuple[str, str | None, uuid.UUID]] = []
    for site, of_site in zip(sites, serials, strict=True):
        session.add(TenantSite(tenant_id=alpha.id, site_id=site.id))
        for serial in of_site:
            domain = NvlinkDomain(uuid=uuid.uuid4(), site_id=site.id, rack_serial=serial)
            session.add(domain)
            domains.append((site.name, serial, domain.uuid))
    await session.commit()
    order = sorted(domains, key=lambda d: (d[0], d[1] is not None, d[1] or "", str(d[2])))
    expected = [str(domain) for _, _, domain in order]
    headers = bearer(settings, ALPHA)
    for size in (1, 2, 3, 4, 7, 100):
        walked: list[str] = []
        for number in range(1, len(domains) // size + 2):
            params = {"pageSize": size, "pageNumber": number}
            response = await client.get(
                f"{base(ALPHA)}/nvlink-topology/overview", params=params, headers=headers
            )
            assert response.status_code == 200, response.text
            assert json.loads(response.headers["X-Pagination"])["total"] == len(domains)
            walked += [cell["id"] for cell in response.json()]
        assert walked == expected, size
