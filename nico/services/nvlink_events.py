"""The hand-off from the API to the reconciler.

Every transaction that changes desired NVLink state calls :func:`desired_state_changed` before it
commits: the instances' NVLink config versions are bumped and ``NOTIFY nico_nvlink`` carries the
affected NVLink domains as JSON (``{"domains": ["<uuid>", ...]}``). PostgreSQL delivers the
notification only if, and when, the transaction commits, so the reconciler never acts on a change
that was rolled back, and never misses one that was committed (it also runs periodic full passes).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable

from sqlalchemy import func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Instance, Machine

CHANNEL = "nico_nvlink"


def payload(domains: Iterable[uuid.UUID]) -> str:
    return json.dumps({"domains": sorted({str(d) for d in domains})}, separators=(",", ":"))


def parse_payload(raw: str) -> set[uuid.UUID]:
    """The domains named by a notification; an unreadable payload names none."""
    try:
        data = json.loads(raw)
        return {uuid.UUID(value) for value in data.get("domains", [])}
    except (ValueError, TypeError, AttributeError):
        return set()


async def desired_state_changed(
    session: AsyncSession, *, instance_ids: Iterable[uuid.UUID] = (), domains: Iterable[uuid.UUID] = ()
) -> set[uuid.UUID]:
    """Bump the NVLink config version of ``instance_ids`` and notify the reconciler of their machines'
    domains plus ``domains``. Returns the domains notified (none: no notification is sent)."""
    ids = list(dict.fromkeys(instance_ids))
    affected = set(domains)
    if ids:
        await session.execute(
            update(Instance)
            .where(Instance.id.in_(ids))
            .values(
                nvlink_config_version=Instance.nvlink_config_version + 1,
                nvlink_config_changed_at=func.now(),
            )
            .execution_options(synchronize_session=False)
        )
        rows = await session.scalars(
            select(Machine.nvlink_domain_uuid).where(
                Machine.instance_id.in_(ids), Machine.nvlink_domain_uuid.is_not(None)
            )
        )
        affected.update(d for d in rows if d is not None)
    if affected:
        await session.execute(
            text("SELECT pg_notify(:channel, :payload)"), {"channel": CHANNEL, "payload": payload(affected)}
        )
    return affected
