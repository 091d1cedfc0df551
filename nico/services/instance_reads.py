"""An instance's status history and Ethernet interfaces (the reference's
``/instance/{id}/status-history`` and ``/instance/{id}/interface``): TENANT_ADMIN of the instance's
tenant."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InterfaceStatus
from nico.db.models import InstanceInterface, StatusDetail
from nico.db.queries import stats as q
from nico.services import status
from nico.services.errors import bad_request, forbidden, not_found
from nico.services.listing import PageRequest, fetch_page
from nico.services.orgs import require_tenant

INTERFACE_ORDER_FIELDS = frozenset(q.INTERFACE_ORDER)


async def _owned(session: AsyncSession, org: str, instance_id: uuid.UUID) -> None:
    tenant = await require_tenant(session, org, status=403)
    owner = await q.instance_tenant(session, instance_id)
    if owner is None:
        raise not_found("Could not find Instance with specified ID")
    if owner != tenant.id:
        raise forbidden("Instance does not belong to current Tenant")


async def status_history(
    session: AsyncSession, org: str, instance_id: uuid.UUID, page: PageRequest
) -> tuple[Sequence[StatusDetail], int]:
    await _owned(session, org, instance_id)
    return await status.page(session, "instance_id", instance_id, page)


async def interfaces(
    session: AsyncSession, org: str, instance_id: uuid.UUID, statuses: Sequence[str], page: PageRequest
) -> tuple[Sequence[InstanceInterface], int]:
    await _owned(session, org, instance_id)
    for value in statuses:
        if value not in set(InterfaceStatus):
            raise bad_request(f"Invalid Status value: {value} in query")
    return await fetch_page(
        session, q.instance_interfaces(instance_id, statuses), page, q.INTERFACE_ORDER, InstanceInterface.id
    )
