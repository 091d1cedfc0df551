"""The commit's quota check (``nico_check_quota``) counts, beside the tenant's instances of the type,
the machines of the type its own logical partitions hold in reserve without an instance: not another
tenant's reserved machines, not reserved machines of another type."""

from __future__ import annotations

import uuid

import psycopg
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Machine
from nico.db.raw import driver_connection
from tests.support import factories as f


async def reserve(session: AsyncSession, ids: list[str], lp: uuid.UUID, **values: object) -> None:
    await session.execute(update(Machine).where(Machine.id.in_(ids)).values(reserved_lp_id=lp, **values))
    await session.commit()


async def check(session: AsyncSession, tenant: uuid.UUID, itype: uuid.UUID) -> str | None:
    """None when the quota holds, else the refusal's detail (count/reserved)."""
    driver = await driver_connection(session)
    try:
        await driver.execute("SELECT nico_check_quota(%s, %s)", (tenant, itype))
    except psycopg.Error as exc:
        assert exc.sqlstate == "NC003"
        return exc.diag.message_detail
    finally:
        await session.rollback()
    return None


async def test_only_the_tenants_own_reserved_machines_of_the_type_count(session: AsyncSession) -> None:
    world = await f.nvlink_site(session, racks=2, trays=4, quota=3)
    other = await f.tenant(session, "other-org")
    other_type = await f.instance_type(session, world.site, name="other-type")
    mine = await f.logical_partition(session, world.tenant, world.site, name="mine")
    theirs = await f.logical_partition(session, other, world.site, name="theirs")
    tenant, itype, m = world.tenant.id, world.instance_type.id, [machine.id for machine in world.machines]
    mine_id, theirs_id, other_type_id = mine.id, theirs.id, other_type.id
    await session.commit()
    await reserve(session, m[0:2], mine_id)
    await reserve(session, m[2:5], theirs_id)  # another tenant's: never counted
    await reserve(session, m[5:6], mine_id, instance_type_id=other_type_id)  # another type: never counted
    assert await check(session, tenant, itype) is None  # 2 of 3
    await reserve(session, m[6:7], mine_id)
    assert await check(session, tenant, itype) is None  # 3 of 3
    await reserve(session, m[7:8], mine_id)
    assert await check(session, tenant, itype) == "4/3"
