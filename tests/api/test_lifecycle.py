"""The lifecycle in one system: instances and bindings wait for the reconciler's reports
(:mod:`nico.reconciler.lifecycle`, driven here directly), deletes wait for the fabric, and what needs
no fabric work happens at once. Also the instance delete checks of spec §5.7."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from nico.db.models import Instance, Machine, NvlinkInterface, PhysicalPartition, StatusDetail
from nico.reconciler.lifecycle import (
    apply_nvlink_observation,
    finish_instance_termination,
    finish_partition_deletion,
)
from tests.api.conftest import BASE, error, instance_body
from tests.support import factories as f
from tests.support.auth import bearer
from tests.support.state import fingerprint

PATH = f"{BASE}/instance"


def items(partition: uuid.UUID, *indexes: int) -> list[dict[str, Any]]:
    return [{"nvLinkLogicalPartitionId": str(partition), "deviceInstance": i} for i in indexes]


async def version_of(session: AsyncSession, instance_id: uuid.UUID) -> int:
    value = await session.scalar(select(Instance.nvlink_config_version).where(Instance.id == instance_id))
    assert value is not None
    return value


async def test_instance_becomes_ready_when_the_fabric_matches(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition = await f.logical_partition(session, world.tenant, world.site)
    other = await f.logical_partition(session, world.tenant, world.site, name="lp-2")
    await session.commit()
    body = instance_body(world, nvLinkInterfaces=items(partition.id, 0, 1))
    inst = (await client.post(PATH, json=body, headers=headers)).json()
    iid = uuid.UUID(inst["id"])
    version = await version_of(session, iid)
    gpus = {0: (world.domains[0], 2**63 + 1), 1: (world.domains[0], 2**63 + 2)}

    before = await fingerprint(session)
    assert not await apply_nvlink_observation(session, iid, version - 1, gpus)  # stale report
    await session.commit()
    assert await fingerprint(session) == before

    assert await apply_nvlink_observation(session, iid, version, gpus)
    await session.commit()
    shown = (await client.get(f"{PATH}/{iid}", headers=headers)).json()
    assert shown["status"] == "Ready"
    assert shown["statusHistory"][0] == {**shown["statusHistory"][0], "message": "Instance is ready for use"}
    assert [(b["status"], b["nvLinkDomainId"], b["gpuGuid"]) for b in shown["nvLinkInterfaces"]] == [
        ("Ready", str(world.domains[0]), str(2**63 + 1)),
        ("Ready", str(world.domains[0]), str(2**63 + 2)),
    ]
    applied = await session.scalar(select(Instance.nvlink_applied_version).where(Instance.id == iid))
    assert applied == version
    history = await session.scalar(select(func.count()).where(StatusDetail.instance_id == iid))
    assert await apply_nvlink_observation(session, iid, version, gpus)  # idempotent
    await session.commit()
    assert await session.scalar(select(func.count()).where(StatusDetail.instance_id == iid)) == history

    # The tenant moves the GPUs: Configuring until the new version is seen; the old rows then go.
    moved = await client.patch(
        f"{PATH}/{iid}", json={"nvLinkInterfaces": items(other.id, 0)}, headers=headers
    )
    assert moved.json()["status"] == "Configuring"
    assert not await apply_nvlink_observation(session, iid, version, gpus)
    new_version = await version_of(session, iid)
    assert await apply_nvlink_observation(session, iid, new_version, gpus)
    await session.commit()
    shown = (await client.get(f"{PATH}/{iid}", headers=headers)).json()
    assert shown["status"] == "Ready"
    assert [(b["nvLinklogicalPartitionId"], b["status"]) for b in shown["nvLinkInterfaces"]] == [
        (str(other.id), "Ready")
    ]
    # The old partition is free of bindings and can now go at once.
    assert (
        await client.delete(f"{BASE}/nvlink-logical-partition/{partition.id}", headers=headers)
    ).status_code == 202


async def test_terminating_until_the_gpus_are_out(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition = await f.logical_partition(session, world.tenant, world.site)
    await session.commit()
    inst = (
        await client.post(
            PATH, json=instance_body(world, nvLinkInterfaces=items(partition.id, 0)), headers=headers
        )
    ).json()
    iid = uuid.UUID(inst["id"])
    assert not await finish_instance_termination(session, iid)  # not Terminating: nothing happens
    await session.commit()  # the row lock is released, as the reconciler's transaction would
    response = await client.delete(f"{PATH}/{iid}", headers=headers)
    assert response.status_code == 202 and response.text == "Deletion request was accepted"
    shown = (await client.get(f"{PATH}/{iid}", headers=headers)).json()
    assert shown["status"] == "Terminating"
    assert shown["statusHistory"][0]["message"] == "Instance deletion successfully initiated on Site"
    assert len(shown["nvLinkInterfaces"]) == 1  # still listed, still blocking the partition
    assert not await apply_nvlink_observation(
        session, iid, await version_of(session, iid), {0: (world.domains[0], 1)}
    )
    await session.commit()
    assert (await client.delete(f"{PATH}/{iid}", headers=headers)).status_code == 202  # no guard on repeats
    assert await finish_instance_termination(session, iid)
    await session.commit()
    assert (await client.get(f"{PATH}/{iid}", headers=headers)).status_code == 404
    assert await session.scalar(select(func.count()).select_from(NvlinkInterface)) == 0
    assert await session.scalar(select(func.count()).where(Machine.instance_id.is_not(None))) == 0
    assert not await finish_instance_termination(session, iid)  # gone: nothing to do


async def test_instance_without_bindings_is_removed_at_once(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    inst = (await client.post(PATH, json=instance_body(world), headers=headers)).json()
    assert (await client.delete(f"{PATH}/{inst['id']}", headers=headers)).status_code == 202
    assert (await client.get(f"{PATH}/{inst['id']}", headers=headers)).status_code == 404
    assert await session.scalar(select(func.count()).where(Machine.instance_id.is_not(None))) == 0


async def test_instance_delete_checks(
    client: httpx.AsyncClient,
    settings: Settings,
    headers: dict[str, str],
    world: f.NvlinkSite,
    session: AsyncSession,
) -> None:
    inst = (await client.post(PATH, json=instance_body(world), headers=headers)).json()
    url = f"{PATH}/{inst['id']}"
    await f.tenant(session, "other-org")
    await session.commit()
    before = await fingerprint(session)
    assert error(await client.delete(f"{PATH}/bad", headers=headers)) == (400, "Invalid Instance ID in URL")
    assert error(await client.delete(f"{PATH}/{uuid.uuid4()}", headers=headers)) == (
        404,
        "Could not find Instance with specified ID",
    )
    theirs = bearer(settings, "other-org")
    assert error(await client.delete(f"/v2/org/other-org/nico/instance/{inst['id']}", headers=theirs)) == (
        403,
        "Org specified in request does not match Org of Tenant associated with Instance",
    )
    bad_issue = await client.request(
        "DELETE", url, json={"machineHealthIssue": {"category": "Mood"}}, headers=headers
    )
    assert bad_issue.status_code == 400
    assert bad_issue.json()["data"] == {
        "category": "must be one of Hardware, Network, Performance, Other",
        "summary": "a value is required",
    }
    assert (
        error(await client.request("DELETE", url, json={"isRepairTenant": True}, headers=headers))[0] == 403
    )
    assert await fingerprint(session) == before
    world.site.status = "Pending"
    await session.commit()
    before = await fingerprint(session)
    assert error(await client.delete(url, headers=headers)) == (
        500,
        "Site is not in Registered state - cannot delete Instance",
    )
    assert await fingerprint(session) == before
    world.site.status = "Registered"
    await session.commit()
    issue = {"machineHealthIssue": {"category": "Hardware", "summary": "GPU 2 fell off the bus"}}
    assert (await client.request("DELETE", url, json=issue, headers=headers)).status_code == 202
    reported = await session.scalar(
        select(StatusDetail.message).where(StatusDetail.machine_id == inst["machineId"])
    )
    assert reported == "Tenant reported a Hardware issue: GPU 2 fell off the bus"


async def test_partition_deleting_until_its_physical_partitions_are_gone(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    partition = await f.logical_partition(session, world.tenant, world.site)
    physical = PhysicalPartition(
        logical_partition_id=partition.id,
        domain_uuid=world.domains[0],
        nmx_partition_id=9,
        fabric_ref="9",
        name="pp",
    )
    session.add(physical)
    await session.commit()
    assert not await finish_partition_deletion(session, partition.id)  # not Deleting
    await session.commit()
    url = f"{BASE}/nvlink-logical-partition/{partition.id}"
    assert (await client.delete(url, headers=headers)).status_code == 202
    assert (await client.get(url, headers=headers)).json()["status"] == "Deleting"
    assert not await finish_partition_deletion(session, partition.id)  # the fabric still has it
    await session.commit()
    await session.delete(physical)
    await session.commit()
    assert await finish_partition_deletion(session, partition.id)
    await session.commit()
    assert (await client.get(url, headers=headers)).status_code == 404
    assert not await finish_partition_deletion(session, partition.id)
