"""A create's names reach the database as the request gave them: they travel in array literals
(:func:`nico.db.raw.array_literal`), so a name holding the literal's own syntax (quotes,
backslashes, commas, braces, the word NULL) must come back unchanged, single or batch."""

from __future__ import annotations

import httpx
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Instance
from tests.api.conftest import BASE, batch_body, instance_body
from tests.support import factories as f

NAME = 'a "quoted" back\\slash, {braced} NULL'
PREFIX = 'p "q" \\b,{c}'


async def test_odd_names_are_stored_and_answered_as_given(
    client: httpx.AsyncClient, headers: dict[str, str], world: f.NvlinkSite, session: AsyncSession
) -> None:
    single = await client.post(f"{BASE}/instance", json=instance_body(world, name=NAME), headers=headers)
    assert single.status_code == 201, single.text
    assert single.json()["name"] == NAME
    batch = await client.post(
        f"{BASE}/instance/batch", json=batch_body(world, count=2, namePrefix=PREFIX), headers=headers
    )
    assert batch.status_code == 201, batch.text
    names = [item["name"] for item in batch.json()]
    assert all(name.startswith(PREFIX + "-") for name in names)
    stored = set((await session.scalars(select(Instance.name))).all())
    assert stored == {NAME, *names}
