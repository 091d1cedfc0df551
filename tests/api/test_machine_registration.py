"""``POST /machine/registration``, ``replace_nvlink_info`` and ``nico admin machine register``: upsert
all or nothing, idempotent, thorough validation, conflicts against other machines, races."""

from __future__ import annotations

import asyncio
import copy
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from typer.testing import CliRunner

from nico.cli import app as cli
from nico.config import Settings
from nico.db.models import (
    Gpu,
    Instance,
    InstanceType,
    Machine,
    MachineCapability,
    NvlinkDomain,
    Site,
    StatusDetail,
)
from nico.db.types import U64_MAX
from nico.inventory import location, records
from nico.services.errors import ServiceError
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.snapshots import snapshot

PROVIDER, OTHER_PROVIDER = "prov", "prov-b"
PATH = "/v2/org/{org}/nico/machine/registration"
INVALID = "Error validating Machine registration request data"
DOMAIN = "3f0c8a52-1d1e-4c84-9c38-2f5f1f0a0001"
OTHER_DOMAIN = "3f0c8a52-1d1e-4c84-9c38-2f5f1f0a0002"


def envelope(status: int, message: str, data: Any = None) -> tuple[int, dict[str, Any]]:
    return status, {"source": "nico", "message": message, "data": data}


def uid(tray: int, device: int) -> int:
    return U64_MAX - tray * 16 - device  # high values: only an unsigned 64-bit column holds them


def tray(
    index: int, *, chassis: str = "CHS-1", domain: str = DOMAIN, machine_id: str | None = None
) -> dict[str, Any]:
    return {
        "id": machine_id or f"tray-{index:02d}",
        "hostname": f"gb200-{index:02d}",
        "serialNumber": f"SN{index:04d}",
        "vendor": "NVIDIA",
        "productName": "GB200 NVL72 compute tray",
        "hwSkuDeviceType": "gpu",
        "nvLinkInfo": {
            "domainUuid": domain,
            "chassisSerial": chassis,
            "trayIndex": index,
            "gpus": [{"deviceId": d, "gpuUid": str(uid(index, d)), "slotId": d - 1} for d in range(1, 5)],
        },
    }


@dataclass
class World:
    site: Site
    other_site: Site
    foreign_site: Site
    itype: InstanceType
    headers: dict[str, dict[str, str]]

    def body(self, *machines: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {"siteId": str(self.site.id), "machines": list(machines), **extra}


@pytest_asyncio.fixture
async def world(session: AsyncSession, settings: Settings) -> World:
    owner = await f.provider(session, PROVIDER)
    other = await f.provider(session, OTHER_PROVIDER)
    site = await f.site(session, owner, name="alpha")
    other_site = await f.site(session, owner, name="beta")
    foreign_site = await f.site(session, other, name="alpha")
    itype = await f.instance_type(session, site)
    await session.commit()
    session.expunge_all()  # the world's rows stay readable when a test expires the session
    headers = {
        "provider": bearer(settings, PROVIDER, "PROVIDER_ADMIN"),
        "viewer": bearer(settings, PROVIDER, "PROVIDER_VIEWER"),
        "tenant": bearer(settings, PROVIDER, "TENANT_ADMIN"),
        "other": bearer(settings, OTHER_PROVIDER, "PROVIDER_ADMIN"),
    }
    return World(site, other_site, foreign_site, itype, headers)


async def register(
    client: httpx.AsyncClient, world: World, body: Any, who: str = "provider"
) -> httpx.Response:
    org = OTHER_PROVIDER if who == "other" else PROVIDER
    return await client.post(PATH.format(org=org), headers=world.headers[who], json=body)


# --- create, idempotence, update -------------------------------------------------------------------


async def test_register_creates_ready_machines_with_their_nvlink_info(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    body = world.body(tray(0), tray(1), instanceTypeId=str(world.itype.id))
    body["machines"][1]["nvLinkInfo"]["gpus"][0]["gpuUid"] = uid(1, 1)  # a JSON integer works too
    response = await register(client, world, body)
    assert (response.status_code, response.json()) == (
        201,
        {"created": ["tray-00", "tray-01"], "updated": [], "unchanged": []},
    )
    shown = await client.get(f"/v2/org/{PROVIDER}/nico/machine/tray-01", headers=world.headers["provider"])
    machine = shown.json()
    assert machine["status"] == "Ready" and machine["instanceTypeId"] == str(world.itype.id)
    assert machine["hostname"] == "gb200-01" and machine["serialNumber"] == "SN0001"
    assert machine["machineCapabilities"] == [
        {"type": "GPU", "name": "NVIDIA GB200", "count": 4, "deviceType": "NVLink"}
    ]
    assert machine["nvLinkInfo"] == {
        "domainUuid": DOMAIN,
        "chassisSerial": "CHS-1",
        "trayIndex": 1,
        "gpus": [{"deviceId": d, "gpuUid": str(uid(1, d)), "slotId": d - 1} for d in range(1, 5)],
    }
    assert [(h["status"], h["message"]) for h in machine["statusHistory"]] == [
        ("Ready", "Machine has been registered")
    ]
    domain = await session.get(NvlinkDomain, uuid.UUID(DOMAIN))
    assert domain is not None and domain.site_id == world.site.id
    assert await session.scalar(select(func.count()).select_from(Gpu)) == 8


async def test_a_minipod_chassis_holds_trays_of_several_domains_named_by_their_gpus(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    """A minipod rack: one chassis serial, trays 0-1 in one NVLink domain and trays 2-3 in another
    (in one request and in a later one); the GPU capability is named as the fabric reports the GPUs."""
    gb300 = [tray(i, domain=DOMAIN if i < 2 else OTHER_DOMAIN) for i in range(3)]
    for machine in gb300:
        for gpu in gpus_of(machine):
            gpu["name"] = "NVIDIA GB300"
    response = await register(client, world, world.body(*gb300))
    assert response.status_code == 201, response.text
    later = await register(client, world, world.body(tray(3, domain=OTHER_DOMAIN)))
    assert later.status_code == 201, later.text
    rows = (await session.execute(select(Machine.id, Machine.domain_uuid))).all()
    assert {machine_id: str(domain) for machine_id, domain in rows} == {
        "tray-00": DOMAIN,
        "tray-01": DOMAIN,
        "tray-02": OTHER_DOMAIN,
        "tray-03": OTHER_DOMAIN,
    }
    shown = await client.get(f"/v2/org/{PROVIDER}/nico/machine/tray-02", headers=world.headers["provider"])
    assert shown.json()["machineCapabilities"] == [
        {"type": "GPU", "name": "NVIDIA GB300", "count": 4, "deviceType": "NVLink"}
    ]
    unnamed = await client.get(f"/v2/org/{PROVIDER}/nico/machine/tray-03", headers=world.headers["provider"])
    assert unnamed.json()["machineCapabilities"][0]["name"] == records.DERIVED_GPU_NAME


async def test_registering_the_same_payload_twice_changes_nothing(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    body = world.body(*(tray(i) for i in range(3)), instanceTypeId=str(world.itype.id))
    assert (await register(client, world, body)).status_code == 201
    before = await snapshot(session)
    again = await register(client, world, copy.deepcopy(body))
    assert again.json() == {"created": [], "updated": [], "unchanged": ["tray-00", "tray-01", "tray-02"]}
    assert await snapshot(session) == before


async def test_existing_machines_get_fields_and_nvlink_info_replaced(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    assert (await register(client, world, world.body(tray(0), tray(1), tray(2)))).status_code == 201
    gpu = await session.scalar(select(Gpu).where(Gpu.machine_id == "tray-02", Gpu.device_id == 1))
    assert gpu is not None
    gpu.nmx_partition_id = 32766  # what the reconciler saw; unchanged GPUs keep it
    await session.commit()
    swapped = [tray(0), tray(2, machine_id="tray-01"), tray(1, machine_id="tray-02")]
    swapped[0]["hostname"] = "renamed"
    swapped[0]["nvLinkInfo"]["gpus"][0]["gpuUid"], swapped[0]["nvLinkInfo"]["gpus"][1]["gpuUid"] = (
        swapped[0]["nvLinkInfo"]["gpus"][1]["gpuUid"],
        swapped[0]["nvLinkInfo"]["gpus"][0]["gpuUid"],
    )
    swapped.append(tray(3))
    del swapped[3]["nvLinkInfo"]
    swapped[3]["machineCapabilities"] = [{"type": "CPU", "name": "Grace", "cores": 72}]
    response = await register(client, world, world.body(*swapped))
    assert response.json() == {
        "created": ["tray-03"],
        "updated": ["tray-00", "tray-01", "tray-02"],
        "unchanged": [],
    }
    session.expire_all()
    machines = {m.id: m for m in (await session.scalars(select(Machine))).all()}
    assert machines["tray-00"].hostname == "renamed"
    assert (machines["tray-01"].tray_index, machines["tray-02"].tray_index) == (2, 1)
    assert machines["tray-03"].domain_uuid is None
    gpus = {(g.machine_id, g.device_id): g for g in (await session.scalars(select(Gpu))).all()}
    assert gpus[("tray-00", 1)].gpu_uid == uid(0, 2) and gpus[("tray-00", 2)].gpu_uid == uid(0, 1)
    assert gpus[("tray-01", 1)].gpu_uid == uid(2, 1)
    caps = (
        await session.scalars(select(MachineCapability).where(MachineCapability.machine_id == "tray-03"))
    ).all()
    assert [(c.type, c.name, c.cores) for c in caps] == [("CPU", "Grace", 72)]
    # Dropping NVLink info from a machine clears it; its GPUs go with it.
    cleared = tray(0)
    del cleared["nvLinkInfo"]
    cleared["hostname"] = "renamed"
    again = await register(client, world, world.body(cleared))
    assert again.json()["updated"] == ["tray-00"]
    assert await session.scalar(select(func.count()).where(Gpu.machine_id == "tray-00")) == 0


async def test_unchanged_gpus_keep_their_rows(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    assert (await register(client, world, world.body(tray(5)))).status_code == 201
    gpu = await session.scalar(select(Gpu).where(Gpu.machine_id == "tray-05", Gpu.device_id == 2))
    assert gpu is not None
    gpu.nmx_partition_id = 32766
    await session.commit()
    changed = tray(5)
    changed["nvLinkInfo"]["gpus"][0]["gpuUid"] = "12345"
    assert (await register(client, world, world.body(changed))).json()["updated"] == ["tray-05"]
    session.expire_all()
    kept = await session.scalar(select(Gpu).where(Gpu.machine_id == "tray-05", Gpu.device_id == 2))
    assert kept is not None and kept.nmx_partition_id == 32766


async def test_a_pending_site_is_paired_by_its_first_registration(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    owner = await session.get(f.InfrastructureProvider, world.site.infrastructure_provider_id)
    assert owner is not None
    pending = await f.site(session, owner, name="pending", registered=False)
    await session.commit()
    response = await register(client, world, {"siteId": str(pending.id), "machines": [tray(0)]})
    assert response.status_code == 201
    site = await session.get(Site, pending.id, populate_existing=True)
    assert site is not None and site.status == "Registered"
    entries = (await session.scalars(select(StatusDetail).where(StatusDetail.site_id == pending.id))).all()
    assert [e.message for e in entries] == ["Site has been successfully paired"]


# --- validation (400) ------------------------------------------------------------------------------


def edited(index: int, change: Any) -> dict[str, Any]:
    machine = tray(index)
    change(machine)
    return machine


def gpus_of(machine: dict[str, Any]) -> list[dict[str, Any]]:
    gpus: list[dict[str, Any]] = machine["nvLinkInfo"]["gpus"]
    return gpus


BAD_BODIES: list[tuple[str, Any, dict[str, str]]] = [
    ("no machines", [], {"machines": "1 to 10000 machines must be specified"}),
    ("bad id", [edited(0, lambda m: m.update(id="has space"))], {"machines.0.id": records.MACHINE_ID_RULE}),
    (
        "id too long",
        [edited(0, lambda m: m.update(id="x" * 257))],
        {"machines.0.id": records.MACHINE_ID_RULE},
    ),
    (
        "duplicate id",
        [tray(0), tray(1, machine_id="tray-00")],
        {"machines.1.id": "machine ID is given more than once in the request"},
    ),
    (
        "hostname too long",
        [edited(0, lambda m: m.update(hostname="h" * 257))],
        {"machines.0.hostname": "must be at most 256 characters"},
    ),
    (
        "bad domain",
        [edited(0, lambda m: m["nvLinkInfo"].update(domainUuid="rack-1"))],
        {"machines.0.nvLinkInfo.domainUuid": "must be a valid UUID"},
    ),
    (
        "empty chassis",
        [edited(0, lambda m: m["nvLinkInfo"].update(chassisSerial=""))],
        {"machines.0.nvLinkInfo.chassisSerial": "must be 1 to 256 characters without surrounding whitespace"},
    ),
    (
        "negative tray",
        [edited(0, lambda m: m["nvLinkInfo"].update(trayIndex=-1))],
        {"machines.0.nvLinkInfo.trayIndex": "must be between 0 and 2147483647"},
    ),
    (
        "no gpus",
        [edited(0, lambda m: m["nvLinkInfo"].update(gpus=[]))],
        {"machines.0.nvLinkInfo.gpus": "1 to 16 GPUs must be specified"},
    ),
    (
        "device id 0",
        [edited(0, lambda m: gpus_of(m)[0].update(deviceId=0))],
        {"machines.0.nvLinkInfo.gpus.0.deviceId": "must be between 1 and 2147483647"},
    ),
    (
        "duplicate device",
        [edited(0, lambda m: gpus_of(m)[1].update(deviceId=1))],
        {"machines.0.nvLinkInfo.gpus.1.deviceId": "deviceId must be unique within a machine"},
    ),
    (
        "uid too big",
        [edited(0, lambda m: gpus_of(m)[0].update(gpuUid=str(U64_MAX + 1)))],
        {"machines.0.nvLinkInfo.gpus.0.gpuUid": records.GPU_UID_RULE},
    ),
    (
        "uid negative",
        [edited(0, lambda m: gpus_of(m)[0].update(gpuUid=-1))],
        {"machines.0.nvLinkInfo.gpus.0.gpuUid": records.GPU_UID_RULE},
    ),
    (
        "uid hex",
        [edited(0, lambda m: gpus_of(m)[0].update(gpuUid="0x10"))],
        {"machines.0.nvLinkInfo.gpus.0.gpuUid": records.GPU_UID_RULE},
    ),
    (
        "uid missing",
        [edited(0, lambda m: gpus_of(m)[0].pop("gpuUid"))],
        {"machines.0.nvLinkInfo.gpus.0.gpuUid": records.GPU_UID_RULE},
    ),
    (
        "negative slot",
        [edited(0, lambda m: gpus_of(m)[0].update(slotId=-2))],
        {"machines.0.nvLinkInfo.gpus.0.slotId": "must be between 0 and 2147483647"},
    ),
    (
        "same uid twice",
        [tray(0), edited(1, lambda m: gpus_of(m)[2].update(gpuUid=str(uid(0, 1))))],
        {"machines.1.nvLinkInfo.gpus.2.gpuUid": f"gpuUid {uid(0, 1)} is given more than once in the request"},
    ),
    (
        "same tray twice",
        [tray(0), edited(1, lambda m: m["nvLinkInfo"].update(trayIndex=0))],
        {
            "machines.1.nvLinkInfo.trayIndex": (
                "chassis CHS-1 tray 0 is also given for machine tray-00 in the request"
            )
        },
    ),
    (
        "two GPU names in one machine",
        [
            edited(
                0,
                lambda m: [
                    g.update(name=f"NVIDIA GB{n}")
                    for n, g in zip((200, 300, 300, 300), gpus_of(m), strict=True)
                ],
            )
        ],
        {"machines.0.nvLinkInfo.gpus.1.name": "the GPUs of one machine must report one name"},
    ),
    (
        "empty GPU name",
        [edited(0, lambda m: gpus_of(m)[0].update(name=" "))],
        {"machines.0.nvLinkInfo.gpus.0.name": "must be 1 to 256 characters"},
    ),
    (
        "capability type",
        [edited(0, lambda m: m.update(machineCapabilities=[{"type": "TPU", "name": "tt"}]))],
        {"machines.0.machineCapabilities.0.type": "invalid value: TPU for Machine Capability type"},
    ),
]


@pytest.mark.parametrize(("case", "machines", "data"), BAD_BODIES, ids=[c[0] for c in BAD_BODIES])
async def test_invalid_registrations_change_nothing(
    client: httpx.AsyncClient,
    session: AsyncSession,
    world: World,
    case: str,
    machines: list[Any],
    data: dict[str, str],
) -> None:
    before = await snapshot(session)
    response = await register(client, world, world.body(*machines))
    assert (response.status_code, response.json()) == envelope(400, INVALID, data)
    assert await snapshot(session) == before


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"machines": [tray(0)]}, envelope(400, INVALID, {"siteId": "a value is required"})),
        ({"siteId": "s", "machines": [tray(0)]}, envelope(400, INVALID, {"siteId": "must be a valid UUID"})),
        (
            {"siteId": str(uuid.UUID(int=1)), "instanceTypeId": "t", "machines": [tray(0)]},
            envelope(400, INVALID, {"instanceTypeId": "must be a valid UUID"}),
        ),
        (
            {"siteId": str(uuid.UUID(int=1)), "machines": {"id": "m"}},
            envelope(
                400,
                "Failed to parse request data, potentially invalid structure",
                {"machines": "Input should be a valid list"},
            ),
        ),
        (
            {
                "siteId": str(uuid.UUID(int=1)),
                "machines": [edited(0, lambda m: gpus_of(m)[0].update(gpuUid=1.5))],
            },
            (400, "Failed to parse request data, potentially invalid structure"),
        ),
        (
            {
                "siteId": str(uuid.UUID(int=1)),
                "machines": [edited(0, lambda m: gpus_of(m)[0].update(gpuUid=True))],
            },
            (400, "Failed to parse request data, potentially invalid structure"),
        ),
        (
            {"siteId": str(uuid.UUID(int=1)), "machines": [tray(0)]},
            envelope(404, "Could not find Site with specified ID"),
        ),
        (
            {"siteId": "{foreign_site}", "machines": [tray(0)]},
            envelope(403, "Site does not belong to org's Infrastructure Provider"),
        ),
        (
            {"siteId": "{site}", "instanceTypeId": str(uuid.UUID(int=1)), "machines": [tray(0)]},
            envelope(404, "Could not find Instance Type with specified ID"),
        ),
        (
            {"siteId": "{other_site}", "instanceTypeId": "{itype}", "machines": [tray(0)]},
            envelope(400, "Instance Type does not belong to the Site specified in request"),
        ),
        (
            {
                "siteId": "{site}",
                "machines": [
                    edited(
                        0,
                        lambda m: m.update(
                            machineCapabilities=[{"type": "GPU", "name": "gg", "deviceType": "PCIe"}]
                        ),
                    )
                ],
            },
            envelope(400, "Unsupported Device Type specified for GPU Capability PCIe"),
        ),
        (
            {
                "siteId": "{site}",
                "instanceTypeId": "{itype}",
                "machines": [
                    edited(
                        0,
                        lambda m: m.update(
                            machineCapabilities=[
                                {"type": "GPU", "name": "NVIDIA GB200", "count": 2, "deviceType": "NVLink"}
                            ]
                        ),
                    )
                ],
            },
            envelope(409, "Capabilities for Machine: tray-00 do not match Instance Type's Capabilities"),
        ),
    ],
)
async def test_registration_refusals_in_order(
    client: httpx.AsyncClient, session: AsyncSession, world: World, body: dict[str, Any], expected: Any
) -> None:
    raw = json.dumps(body)
    for key, value in (
        ("site", world.site.id),
        ("other_site", world.other_site.id),
        ("foreign_site", world.foreign_site.id),
        ("itype", world.itype.id),
    ):
        raw = raw.replace("{" + key + "}", str(value))
    before = await snapshot(session)
    response = await client.post(
        PATH.format(org=PROVIDER),
        headers={**world.headers["provider"], "content-type": "application/json"},
        content=raw,
    )
    if len(expected) == 2 and isinstance(expected[1], str):
        assert (response.status_code, response.json()["message"]) == expected
    else:
        assert (response.status_code, response.json()) == expected
    assert await snapshot(session) == before


async def test_registration_needs_a_provider_admin_with_a_provider(
    client: httpx.AsyncClient, settings: Settings, world: World
) -> None:
    for who in ("viewer", "tenant"):
        response = await client.post(
            PATH.format(org=PROVIDER),
            headers={**world.headers[who], "content-type": "application/json"},
            content=b"{broken",
        )
        assert (response.status_code, response.json()) == envelope(
            403, "User does not have Provider Admin role with org"
        )
    ghost = await client.post(
        PATH.format(org="ghost"),
        headers=bearer(settings, "ghost", "PROVIDER_ADMIN"),
        json=world.body(tray(0)),
    )
    assert (ghost.status_code, ghost.json()) == envelope(
        404, "Org 'ghost' does not have an Infrastructure Provider"
    )
    unauthenticated = await client.post(PATH.format(org=PROVIDER), json=world.body(tray(0)))
    assert unauthenticated.status_code == 401


# --- conflicts with other machines (409) -----------------------------------------------------------


async def test_conflicts_with_other_machines_change_nothing(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    assert (
        await register(client, world, world.body(tray(0), tray(1), instanceTypeId=str(world.itype.id)))
    ).status_code == 201
    await f.rack(session, world.other_site, None, index=7, trays=1)
    foreign_domain = f.domain_uuid(world.other_site.name, 7)
    network = await f.vpc(session, await f.tenant(session, "ten"), world.site)
    busy = Instance(tenant_id=network.tenant_id, site_id=world.site.id, vpc_id=network.id, name="i-1")
    session.add(busy)
    await session.flush()
    machine = await session.get(Machine, "tray-01")
    assert machine is not None
    machine.instance_id = busy.id
    await session.commit()
    other_type = await f.instance_type(session, world.site, name="other-type", gpus=None)
    await session.commit()
    cases = [
        (
            "machine at another site",
            {"siteId": str(world.other_site.id), "machines": [tray(0, chassis="CHS-9")]},
            envelope(409, "Machine: tray-00 is registered at another Site"),
        ),
        (
            "domain at another site",
            world.body(tray(4, chassis="CHS-4", domain=str(foreign_domain))),
            envelope(409, f"NVLink domain {foreign_domain} belongs to another Site"),
        ),
        (
            "tray taken",
            world.body(tray(0, machine_id="newcomer")),
            envelope(409, "Chassis CHS-1 tray 0 is already registered to Machine: tray-00"),
        ),
        (
            "gpu taken",
            world.body(edited(5, lambda m: gpus_of(m)[0].update(gpuUid=str(uid(0, 1))))),
            envelope(409, f"GPU {uid(0, 1)} is already registered to Machine: tray-00"),
        ),
        (
            "nvlink of a busy machine",
            world.body(edited(1, lambda m: m["nvLinkInfo"].update(trayIndex=9))),
            envelope(409, "Machine: tray-01 is in use by an Instance, its NVLink info cannot be changed"),
        ),
        (
            "already typed",
            world.body(tray(0), instanceTypeId=str(other_type.id)),
            envelope(409, f"Machine: tray-00 is already associated with Instance Type {world.itype.id}"),
        ),
    ]
    before = await snapshot(session)
    for case, body, expected in cases:
        response = await register(client, world, body)
        assert (response.status_code, response.json()) == expected, case
    assert await snapshot(session) == before


# --- races -----------------------------------------------------------------------------------------


async def test_concurrent_overlapping_registrations_end_consistent(
    client: httpx.AsyncClient, session: AsyncSession, world: World
) -> None:
    same = world.body(*(tray(i) for i in range(6)))
    results = await asyncio.gather(*(register(client, world, copy.deepcopy(same)) for _ in range(3)))
    assert sorted(r.status_code for r in results) == [201, 201, 201]
    outcomes = sorted((len(r.json()["created"]), len(r.json()["unchanged"])) for r in results)
    assert outcomes == [(0, 6), (0, 6), (6, 0)]
    # Two registrations fight over one tray (and its GPUs) under different machine ids.
    first = world.body(tray(6, machine_id="left"))
    second = world.body(tray(6, machine_id="right"))
    raced = await asyncio.gather(register(client, world, first), register(client, world, second))
    assert sorted(r.status_code for r in raced) == [201, 409]
    loser = next(r for r in raced if r.status_code == 409).json()["message"]
    assert loser.startswith("Chassis CHS-1 tray 6 is already registered to Machine: ")
    trays = (await session.execute(select(Machine.chassis_serial, Machine.tray_index))).all()
    assert len(trays) == len(set(trays)) == 7
    uids = (await session.scalars(select(Gpu.gpu_uid))).all()
    assert len(uids) == len(set(uids)) == 28


# --- replace_nvlink_info ---------------------------------------------------------------------------


def info(index: int, **changes: Any) -> records.NvlinkInfo:
    raw = tray(index)["nvLinkInfo"]
    raw.update(changes)
    return records.NvlinkInfo(
        domain_uuid=raw["domainUuid"],
        chassis_serial=raw["chassisSerial"],
        tray_index=raw["trayIndex"],
        gpus=tuple(records.GpuRecord(g["deviceId"], g["gpuUid"], g.get("slotId")) for g in raw["gpus"]),
    )


async def test_replace_nvlink_info(client: httpx.AsyncClient, session: AsyncSession, world: World) -> None:
    bare = tray(0)
    del bare["nvLinkInfo"]
    assert (await register(client, world, world.body(bare, tray(1)))).status_code == 201
    assert await location.replace_nvlink_info(session, "tray-00", info(0)) is True
    await session.commit()
    assert await location.replace_nvlink_info(session, "tray-00", info(0)) is False
    await session.commit()
    machine = await session.get(Machine, "tray-00", populate_existing=True)
    assert machine is not None and (machine.chassis_serial, machine.tray_index) == ("CHS-1", 0)
    with pytest.raises(ServiceError) as taken:
        await location.replace_nvlink_info(session, "tray-00", info(1))
    assert (taken.value.status, taken.value.message) == (
        409,
        "Chassis CHS-1 tray 1 is already registered to Machine: tray-01",
    )
    await session.rollback()
    with pytest.raises(ServiceError) as bad:
        await location.replace_nvlink_info(session, "tray-00", info(0, trayIndex=-1))
    assert (bad.value.status, bad.value.data) == (
        400,
        {"nvLinkInfo.trayIndex": "must be between 0 and 2147483647"},
    )
    with pytest.raises(ServiceError) as missing:
        await location.replace_nvlink_info(session, "nope", None)
    assert (missing.value.status, missing.value.message) == (404, "Could not find Machine with specified ID")
    await session.rollback()
    assert await location.replace_nvlink_info(session, "tray-00", None) is True
    await session.commit()
    assert await session.scalar(select(func.count()).where(Gpu.machine_id == "tray-00")) == 0


# --- nico admin machine register -------------------------------------------------------------------


async def test_admin_cli_registers_from_a_file_and_stdin(
    session: AsyncSession, world: World, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NICO_DATABASE_URL", database_url)
    monkeypatch.setenv("NICO_DATA_DIR", str(tmp_path))
    document = tmp_path / "machines.json"
    document.write_text(json.dumps({"machines": [tray(i) for i in range(3)]}))
    runner = CliRunner()
    args = [
        "admin",
        "machine",
        "register",
        "--site-id",
        str(world.site.id),
        "--file",
        str(document),
        "--instance-type-id",
        str(world.itype.id),
    ]
    first = await asyncio.to_thread(runner.invoke, cli, args)
    assert first.exit_code == 0, first.output
    assert "created" in first.output and "tray-00, tray-01, tray-02" in first.output
    again = await asyncio.to_thread(
        runner.invoke, cli, [*args[:-4], "--file", "-"], input=document.read_text()
    )
    assert again.exit_code == 0 and "unchanged" in again.output
    machines = (await session.scalars(select(Machine).order_by(Machine.id))).all()
    assert [(m.id, m.instance_type_id) for m in machines] == [
        (f"tray-0{i}", world.itype.id) for i in range(3)
    ]


@pytest.mark.parametrize(
    ("document", "args", "fragment"),
    [
        ("{nope", [], "is not valid JSON"),
        (
            json.dumps({"machines": [tray(0)], "siteId": str(uuid.UUID(int=4))}),
            [],
            "differs from the command line",
        ),
        (json.dumps({"machines": "x"}), [], '"machines" must be a list'),
        (json.dumps({"machines": [{"id": 5}]}), [], "machines.0.id"),
        (
            json.dumps({"machines": [edited(0, lambda m: gpus_of(m)[0].update(gpuUid="-1"))]}),
            [],
            "Error validating Machine registration request data",
        ),
        (
            json.dumps({"machines": [tray(0)]}),
            ["--instance-type-id", "nope"],
            "--instance-type-id must be a UUID",
        ),
    ],
)
async def test_admin_cli_refuses_bad_input(
    session: AsyncSession,
    world: World,
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    document: str,
    args: list[str],
    fragment: str,
) -> None:
    monkeypatch.setenv("NICO_DATABASE_URL", database_url)
    monkeypatch.setenv("NICO_DATA_DIR", str(tmp_path))
    path = tmp_path / "machines.json"
    path.write_text(document)
    before = await snapshot(session)
    result = await asyncio.to_thread(
        CliRunner().invoke,
        cli,
        ["admin", "machine", "register", "--site-id", str(world.site.id), "--file", str(path), *args],
    )
    assert result.exit_code != 0 and fragment in " ".join(result.output.split()), result.output
    assert await snapshot(session) == before
