"""Reading instances as their responses show them, in one query per request.

Each instance comes with its machine, Ethernet interfaces, NVLink interfaces and newest status
history as JSON built by PostgreSQL, so a GET is one round trip and a page of any size is two.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.rows import dict_row
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import (
    InfrastructureProvider,
    InstanceType,
    Machine,
    MachineCapability,
    Site,
    StatusDetail,
    Tenant,
    Vpc,
)
from nico.db.queries.placement_events import CLIQUE_OF_INTERFACE
from nico.db.raw import driver_connection
from nico.services import status

RELATIONS = frozenset(
    {
        "InfrastructureProvider",
        "Site",
        "Tenant",
        "InstanceType",
        "Vpc",
        "Machine",
        "OperatingSystem",
        "NetworkSecurityGroup",
    }
)

_COLUMNS = """
    i.id, i.name, i.description, i.tenant_id, i.site_id, i.instance_type_id, i.vpc_id, i.ipxe_script,
    i.user_data, i.always_boot_with_custom_ipxe, i.phone_home_enabled, i.labels, i.status, i.created,
    i.updated, s.infrastructure_provider_id, s.serial_console_hostname, m.id AS machine_id,
    (SELECT coalesce(json_agg(json_build_object(
            'id', x.id, 'instance_id', x.instance_id, 'subnet_id', x.subnet_id,
            'is_physical', x.is_physical, 'status', x.status, 'created', x.created, 'updated', x.updated)
        ORDER BY x.created, x.id), '[]')
     FROM instance_interface x WHERE x.instance_id = i.id) AS interfaces,
    (SELECT coalesce(json_agg(json_build_object(
            'id', n.id, 'instance_id', n.instance_id, 'nv_link_logical_partition_id', n.logical_partition_id,
            'nv_link_domain_id', n.nvlink_domain_uuid, 'device_instance', n.device_instance,
            'gpu_guid', n.gpu_guid::text, 'status', n.status, 'created', n.created, 'updated', n.updated,
            'nv_link_clique_id', {clique})
        ORDER BY n.created, n.device_instance, n.id), '[]')
     FROM nvlink_interface n WHERE n.instance_id = i.id) AS nvlink_interfaces,
    (SELECT coalesce(json_agg(json_build_object(
            'status', h.status, 'message', h.message, 'created', h.created, 'updated', h.updated)
        ORDER BY h.created {direction}, h.id {direction}), '[]')
     FROM (SELECT d.id, d.status, d.message, d.created, d.updated FROM status_detail d
           WHERE d.instance_id = i.id ORDER BY d.created {direction}, d.id {direction}
           LIMIT %(history_limit)s) h
    ) AS status_history
"""
_COLUMNS = _COLUMNS.replace("{clique}", CLIQUE_OF_INTERFACE.strip())
_FROM = "instance i JOIN site s ON s.id = i.site_id LEFT JOIN machine m ON m.instance_id = i.id"

_BY_IDS = {
    direction: f"SELECT {_COLUMNS.format(direction=direction)} FROM {_FROM} WHERE i.id = ANY(%(ids)s)"
    for direction in ("ASC", "DESC")
}
# One round trip for GET: the caller's tenant and the instance, whichever of them exists.
_FOR_CALLER = (
    "SELECT (SELECT t.id FROM tenant t WHERE t.org = %(org)s) AS caller_tenant_id, d.* "
    f"FROM (SELECT 1) AS one LEFT JOIN LATERAL (SELECT {_COLUMNS.format(direction='DESC')} FROM {_FROM} "
    "WHERE i.id = %(id)s) AS d ON true"
)


Source = AsyncSession | psycopg.AsyncConnection[Any]


async def _fetch(source: Source, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Run ``sql`` at the driver level: in a session's transaction, or on a raw connection of the read
    pool. This is the hot read path: SQLAlchemy's statement, result and session machinery cost more
    than the query itself (see benchmarks/api_bench.py)."""
    driver = await driver_connection(source) if isinstance(source, AsyncSession) else source
    async with driver.cursor(row_factory=dict_row) as cursor:
        await cursor.execute(sql, params)
        rows: list[dict[str, Any]] = await cursor.fetchall()
    return rows


@dataclass
class InstanceView:
    """An instance row with everything its response shows (``data`` keys are the column labels)."""

    data: dict[str, Any]
    tenant: Tenant | None = None
    site: Site | None = None
    provider: InfrastructureProvider | None = None
    instance_type: InstanceType | None = None
    vpc: Vpc | None = None
    machine: Machine | None = None
    machine_capabilities: list[MachineCapability] = field(default_factory=list)
    machine_history: list[StatusDetail] = field(default_factory=list)

    @property
    def id(self) -> uuid.UUID:
        value: uuid.UUID = self.data["id"]
        return value


async def load(
    session: AsyncSession,
    ids: Sequence[uuid.UUID],
    *,
    relations: frozenset[str] = frozenset(),
    chronological: bool = False,
    history_limit: int = status.DEFAULT_LIMIT,
) -> list[InstanceView]:
    """The instances ``ids`` in that order. ``chronological`` lists all history oldest first (what a
    create response shows); otherwise the newest ``history_limit`` entries, newest first."""
    if not ids:
        return []
    sql = _BY_IDS["ASC" if chronological else "DESC"]
    limit = None if chronological else history_limit
    rows = await _fetch(session, sql, {"ids": list(ids), "history_limit": limit})
    by_id = {row["id"]: InstanceView(row) for row in rows}
    views = [by_id[i] for i in ids if i in by_id]
    await attach_relations(session, views, relations)
    return views


async def load_for_caller(
    source: Source, org: str, instance_id: uuid.UUID
) -> tuple[uuid.UUID | None, InstanceView | None]:
    """The org's tenant id and the instance (either may be missing), in one query."""
    (data,) = await _fetch(
        source, _FOR_CALLER, {"org": org, "id": instance_id, "history_limit": status.DEFAULT_LIMIT}
    )
    caller = data.pop("caller_tenant_id")
    return caller, (InstanceView(data) if data["id"] is not None else None)


async def attach_relations(
    session: AsyncSession, views: Sequence[InstanceView], relations: frozenset[str]
) -> None:
    """Fill the ``includeRelation`` objects of ``views``, one query per relation kind."""
    if not views or not relations:
        return

    async def rows_by_id(model: Any, ids: set[Any]) -> dict[Any, Any]:
        ids.discard(None)
        if not ids:
            return {}
        return {row.id: row for row in await session.scalars(select(model).where(model.id.in_(ids)))}

    tenants = await rows_by_id(Tenant, {v.data["tenant_id"] for v in views}) if "Tenant" in relations else {}
    sites = await rows_by_id(Site, {v.data["site_id"] for v in views}) if "Site" in relations else {}
    providers = (
        await rows_by_id(InfrastructureProvider, {v.data["infrastructure_provider_id"] for v in views})
        if "InfrastructureProvider" in relations
        else {}
    )
    types = (
        await rows_by_id(InstanceType, {v.data["instance_type_id"] for v in views})
        if "InstanceType" in relations
        else {}
    )
    vpcs = await rows_by_id(Vpc, {v.data["vpc_id"] for v in views}) if "Vpc" in relations else {}
    machines: dict[Any, Any] = {}
    capabilities: dict[str, list[MachineCapability]] = {}
    machine_history: dict[uuid.UUID | str, list[StatusDetail]] = {}
    if "Machine" in relations:
        machines = await rows_by_id(Machine, {v.data["machine_id"] for v in views})
        for capability in await session.scalars(
            select(MachineCapability)
            .where(MachineCapability.machine_id.in_(list(machines)))
            .order_by(MachineCapability.position, MachineCapability.created)
        ):
            capabilities.setdefault(str(capability.machine_id), []).append(capability)
        machine_history = await status.history(session, "machine_id", list(machines))
    for view in views:
        view.tenant = tenants.get(view.data["tenant_id"])
        view.site = sites.get(view.data["site_id"])
        view.provider = providers.get(view.data["infrastructure_provider_id"])
        view.instance_type = types.get(view.data["instance_type_id"])
        view.vpc = vpcs.get(view.data["vpc_id"])
        view.machine = machines.get(view.data["machine_id"])
        view.machine_capabilities = capabilities.get(str(view.data["machine_id"]), [])
        view.machine_history = machine_history.get(view.data["machine_id"], [])
