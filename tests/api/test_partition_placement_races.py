"""Racing creates through the API, on real PostgreSQL (property test): whatever mix of requests
arrives together, a single-domain logical partition never spans two NVLink domains, no request of
another tenant or another partition takes a machine a reservation holds, the reservation keeps all
its machines, and the free counts stay equal to a recount."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import Settings
from tests.api.conftest import batch_body, instance_body
from tests.api.test_domain_capacity import assert_in_step
from tests.api.test_partition_placement import other_tenant
from tests.support import db as testdb
from tests.support import factories as f
from tests.support.auth import bearer

# (who, how many machines): "single" and "reserved" are the tenant's partitions, "mine" its
# instances outside them, "other" another tenant's instances, "other-lp" another tenant's partition.
REQUESTS = st.lists(
    st.tuples(st.sampled_from(["single", "reserved", "mine", "other", "other-lp"]), st.integers(1, 3)),
    min_size=2,
    max_size=8,
)

_SPAN = """
SELECT count(DISTINCT m.domain_uuid) FROM nvlink_interface n JOIN machine m ON m.instance_id = n.instance_id
WHERE n.logical_partition_id = :lp
"""
# Machines a reservation holds that run an instance with no GPU in the reserving partition.
_TRESPASS = """
SELECT m.id FROM machine m
WHERE m.reserved_lp_id IS NOT NULL AND m.instance_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM nvlink_interface n
                  WHERE n.instance_id = m.instance_id AND n.logical_partition_id = m.reserved_lp_id)
"""


async def partition(client: httpx.AsyncClient, who: f.NvlinkSite, h: dict[str, str], **extra: Any) -> str:
    response = await client.post(
        f"/v2/org/{who.tenant.org}/nico/nvlink-logical-partition",
        json={"name": f"lp-{uuid.uuid4().hex[:8]}", "siteId": str(who.site.id), **extra},
        headers=h,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def create(
    client: httpx.AsyncClient, who: f.NvlinkSite, h: dict[str, str], n: int, lp: str | None, k: int
) -> Any:
    base = f"/v2/org/{who.tenant.org}/nico/instance"
    gpus = {"nvLinkInterfaces": [{"nvLinkLogicalPartitionId": lp, "deviceInstance": d} for d in range(4)]}
    extra = gpus if lp else {}
    if n == 1:
        return client.post(base, json=instance_body(who, name=f"one-{k}", **extra), headers=h)
    return client.post(
        f"{base}/batch", json=batch_body(who, count=n, topologyOptimized=False, **extra), headers=h
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(requests=REQUESTS, racks=st.integers(2, 3), trays=st.integers(2, 4), held=st.integers(1, 2))
async def test_racing_creates_keep_partitions_in_one_domain_and_reservations_to_their_partition(
    client: httpx.AsyncClient,
    session: AsyncSession,
    settings: Settings,
    cleaner: testdb.Cleaner,
    requests: list[tuple[str, int]],
    racks: int,
    trays: int,
    held: int,
) -> None:
    cleaner.empty()
    session.expunge_all()
    world = await f.nvlink_site(session, racks=racks, trays=trays)
    await session.commit()
    other = await other_tenant(session, world)
    mine, theirs = bearer(settings, world.tenant.org), bearer(settings, other.tenant.org)
    single = await partition(client, world, mine, singleNvLinkDomain=True)
    reservation = {"instanceTypeId": str(world.instance_type.id), "count": held}
    reserved = await partition(client, world, mine, reservation=reservation)
    other_lp = await partition(client, other, theirs)
    targets = {
        "single": (world, mine, single),
        "reserved": (world, mine, reserved),
        "mine": (world, mine, None),
        "other": (other, theirs, None),
        "other-lp": (other, theirs, other_lp),
    }
    responses = await asyncio.gather(
        *(create(client, *targets[who][:2], n, targets[who][2], k) for k, (who, n) in enumerate(requests))
    )
    codes = Counter(r.status_code for r in responses)
    assert set(codes) <= {201, 403, 409}, [r.text for r in responses]
    for (who, _), response in zip(requests, responses, strict=True):
        if response.status_code == 409 and who == "single":
            assert single in response.json()["message"]
    await session.commit()
    span = (await session.execute(text(_SPAN), {"lp": single})).scalar_one()
    assert span <= 1
    assert (await session.execute(text(_TRESPASS))).all() == []
    still = "SELECT count(*) FROM machine WHERE reserved_lp_id = :lp"
    assert (await session.execute(text(still), {"lp": reserved})).scalar_one() == held
    await assert_in_step(session)
