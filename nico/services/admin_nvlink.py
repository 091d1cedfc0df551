"""Operator (admin CLI) actions on NVLink partitions and instance NVLink configs, across tenants.

They reuse the tenant services (same checks, same messages), acting as the owning tenant: the org is
looked up from the object when the operator does not give it.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.queries import admin_nvlink as queries
from nico.db.raw import driver_connection
from nico.instance.service import update_instance
from nico.logical_partition import queries as partition_queries
from nico.logical_partition import service as partition
from nico.services.errors import ServiceError
from nico.services.nvlink_interface import Binding


async def physical_partitions(
    session: AsyncSession,
    *,
    partition_id: uuid.UUID | None = None,
    logical_partition_id: uuid.UUID | None = None,
    domain_uuid: uuid.UUID | None = None,
    org: str | None = None,
    name: str | None = None,
) -> list[dict[str, Any]]:
    rows = await queries.physical_partitions(
        session,
        partition_id=partition_id,
        logical_partition_id=logical_partition_id,
        domain_uuid=domain_uuid,
        org=org,
        name=name,
    )
    if partition_id is not None and not rows:
        raise ServiceError(404, f"no physical partition {partition_id}")
    return rows


async def logical_partitions(
    session: AsyncSession,
    *,
    partition_id: uuid.UUID | None = None,
    org: str | None = None,
    site_id: uuid.UUID | None = None,
    name: str | None = None,
) -> list[dict[str, Any]]:
    rows = await queries.logical_partitions(
        session, partition_id=partition_id, org=org, site_id=site_id, name=name
    )
    if partition_id is not None and not rows:
        raise ServiceError(404, f"no logical partition {partition_id}")
    await _with_spread(session, rows)
    return rows


async def _with_spread(session: AsyncSession, rows: list[dict[str, Any]]) -> None:
    """Where each partition's GPUs are (``domains``: how many NVLink domains, marked ``split`` when
    more than one: its GPUs cannot all share memory) and how many machines its reservation holds."""
    spreads = await partition_queries.spreads(
        await driver_connection(session), [uuid.UUID(row["id"]) for row in rows]
    )
    for row in rows:
        spread = spreads[uuid.UUID(row["id"])]
        found = len(spread.gpu_domains)
        row["domains"] = f"{found} (split)" if found > 1 else str(found)
        row["split"] = found > 1
        row["nvlink_domain_ids"] = [str(d) for d in spread.gpu_domains]
        row["reserved_machines"] = spread.reserved


async def create_logical_partition(
    session: AsyncSession,
    *,
    org: str,
    name: str,
    site_id: uuid.UUID | None,
    description: str | None,
    quota: int,
) -> dict[str, Any]:
    """Create a logical partition for ``org`` with the tenant API's checks (its quota included);
    without ``site_id``, at the one site with NVLink partitioning the tenant uses (the reference's CLI
    names no site: it serves one)."""
    if site_id is None:
        site_id = await only_nvlink_site(session, org)
    conn = await driver_connection(session)
    view = await partition.create(
        conn, org, name=name, description=description, site_id=site_id, created_by="admin-cli", quota=quota
    )
    rows = await queries.logical_partitions(session, partition_id=view.id)
    await _with_spread(session, rows)
    return rows[0]


async def only_nvlink_site(session: AsyncSession, org: str) -> uuid.UUID:
    """The org's one site with NVLink partitioning; none or several is a 400 saying what to give."""
    sites = await queries.nvlink_sites_of_org(session, org)
    if len(sites) == 1:
        return sites[0]
    if not sites:
        raise ServiceError(400, f"org {org} uses no site with NVLink partitioning enabled")
    raise ServiceError(
        400,
        f"org {org} uses {len(sites)} sites with NVLink partitioning: pass --site-id (one of "
        + ", ".join(str(site) for site in sites)
        + ")",
    )


async def delete_logical_partition(session: AsyncSession, partition_id: uuid.UUID) -> str:
    """Delete (or mark Deleting, when it is on the fabric) a logical partition; returns its status
    afterwards: ``deleted`` or ``Deleting``."""
    org = await queries.org_of_logical_partition(session, partition_id)
    if org is None:
        raise ServiceError(404, f"no logical partition {partition_id}")
    await partition.delete_partition(session, org, partition_id)
    rows = await queries.logical_partitions(session, partition_id=partition_id)
    return str(rows[0]["status"]) if rows else "deleted"


def parse_nvlink_config(document: Any) -> list[Binding]:
    """The reference's ``{"gpu_configs": [{"device_instance": 0, "logical_partition_id": "<uuid>"}]}``."""
    if not isinstance(document, dict) or not isinstance(document.get("gpu_configs"), list):
        raise ServiceError(400, 'the config must be {"gpu_configs": [...]}')
    bindings = []
    for item in document["gpu_configs"]:
        try:
            device = item["device_instance"]
            if not isinstance(device, int) or isinstance(device, bool) or device < 0:
                raise ValueError(device)
            bindings.append(
                Binding(partition_id=uuid.UUID(str(item["logical_partition_id"])), device_instance=device)
            )
        except (KeyError, TypeError, ValueError):
            raise ServiceError(
                400, f"bad gpu_config {item!r}: needs device_instance (>= 0) and logical_partition_id (uuid)"
            ) from None
    return bindings


async def update_instance_nvlink_config(
    session: AsyncSession, instance_id: uuid.UUID, bindings: list[Binding]
) -> list[dict[str, Any]]:
    """Replace an instance's NVLink bindings (as its tenant would); returns the bindings now held."""
    org = await queries.org_of_instance(session, instance_id)
    if org is None:
        raise ServiceError(404, f"no instance {instance_id}")
    view = await update_instance(session, org, instance_id, {}, bindings, in_flight_limit=None)
    return [dict(binding) for binding in view.nvlink_interfaces]
