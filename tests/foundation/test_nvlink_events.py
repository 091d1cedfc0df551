"""The API-to-reconciler hand-off: versions bumped and NOTIFY sent only when the transaction commits."""

from __future__ import annotations

import asyncio
import uuid

import psycopg
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.engine import libpq_url
from nico.db.models import Instance
from nico.services.nvlink_events import CHANNEL, desired_state_changed, parse_payload, payload
from tests.support import factories as f


def test_payload_round_trip_and_garbage() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    assert parse_payload(payload([b, a, a])) == {a, b}
    assert parse_payload("not json") == set()
    assert parse_payload('{"domains": ["nope"]}') == set()


async def test_bump_and_notify_on_commit_only(session: AsyncSession, database_url: str) -> None:
    s = await f.nvlink_site(session, racks=2, trays=1)
    inst = Instance(tenant_id=s.tenant.id, site_id=s.site.id, vpc_id=s.vpc.id, name="i")
    session.add(inst)
    await session.flush()
    s.machines[1].instance_id = inst.id
    await session.commit()
    inst_id, first, second = inst.id, s.domains[0], s.domains[1]  # a rollback below expires the objects

    listener = await psycopg.AsyncConnection.connect(libpq_url(database_url), autocommit=True)
    try:
        await listener.execute(f"LISTEN {CHANNEL}")
        gen = listener.notifies(timeout=5)

        extra = uuid.uuid4()
        await desired_state_changed(session, instance_ids=[inst_id], domains=[first])
        await session.rollback()  # nothing is delivered for a rolled-back change
        notified = await desired_state_changed(session, instance_ids=[inst_id], domains=[extra])
        await session.commit()
        assert notified == {second, extra}

        note = await asyncio.wait_for(anext(gen), timeout=5)
        assert parse_payload(note.payload) == {second, extra}
    finally:
        await listener.close()
    version = await session.scalar(select(Instance.nvlink_config_version).where(Instance.id == inst_id))
    assert version == 2
