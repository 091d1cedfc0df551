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

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.queries import nvlink_events as queries

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
        await queries.bump_nvlink_config_versions(session, ids)
        affected.update(await queries.domains_of_instances(session, ids))
    if affected:
        await queries.notify(session, CHANNEL, payload(affected))
    return affected
