"""Reading instances as their responses show them, in one query per request.

Each instance comes with its machine, Ethernet interfaces, NVLink interfaces and newest status
history as JSON built by PostgreSQL, so a GET is one round trip and a page of any size is two.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

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
from nico.db.queries import common
from nico.db.queries import instance as queries
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

Source = queries.Source


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
    limit = None if chronological else history_limit
    rows = await queries.instance_documents(session, ids, chronological=chronological, history_limit=limit)
    by_id = {row["id"]: InstanceView(row) for row in rows}
    views = [by_id[i] for i in ids if i in by_id]
    await attach_relations(session, views, relations)
    return views


async def load_for_caller(
    source: Source, org: str, instance_id: uuid.UUID
) -> tuple[uuid.UUID | None, InstanceView | None]:
    """The org's tenant id and the instance (either may be missing), in one query."""
    data = await queries.instance_document_for_caller(source, org, instance_id, status.DEFAULT_LIMIT)
    caller = data.pop("caller_tenant_id")
    return caller, (InstanceView(data) if data["id"] is not None else None)


async def attach_relations(
    session: AsyncSession, views: Sequence[InstanceView], relations: frozenset[str]
) -> None:
    """Fill the ``includeRelation`` objects of ``views``, one query per relation kind."""
    if not views or not relations:
        return

    async def rows_by_id(model: Any, ids: set[Any]) -> dict[Any, Any]:
        return await common.rows_by_id(session, model, ids)

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
        for capability in await queries.capabilities_of_machines(session, list(machines)):
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
