"""What operator commands read across the site: NVLink domains with the reconciler's last error in
full, the machines, a machine's recorded NVLink info and where on the fabric to look for it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from nico.config import NvLinkConfig
from nico.db.queries import admin_reads as queries
from nico.inventory.queries import gpus_of_machine
from nico.services import fabric_registry
from nico.services.errors import ServiceError


async def nvlink_domains(session: AsyncSession) -> list[dict[str, object]]:
    """Every domain with its failure count, homeless GPUs, GPUs in partitions nico did not make
    (foreign) and last error (endpoint addresses included: tenants see the error only in their own
    terms)."""
    return [
        {
            "uuid": str(d.uuid),
            "consecutive_failures": d.consecutive_failures,
            "gpus_without_home": d.gpus_without_home,
            "foreign_gpus": d.foreign_gpus,
            "last_error": d.last_error,
            "last_error_at": d.last_error_at.isoformat() if d.last_error_at else None,
        }
        for d in await queries.nvlink_domains(session)
    ]


async def machines(session: AsyncSession, site_id: uuid.UUID | None = None) -> list[dict[str, object]]:
    """Every machine (or one site's): where it is, what it holds and its NVLink place."""
    return [
        {
            "id": m.id,
            "site_id": str(m.site_id),
            "status": m.status,
            "instance_type_id": str(m.instance_type_id) if m.instance_type_id else None,
            "instance_id": str(m.instance_id) if m.instance_id else None,
            "hostname": m.hostname,
            "domain_uuid": str(m.domain_uuid) if m.domain_uuid else None,
            "chassis_serial": m.chassis_serial,
            "tray_index": m.tray_index,
            "gpus": gpus,
        }
        for m, gpus in await queries.machines(session, site_id)
    ]


async def machine_nvlink_info(session: AsyncSession, machine_id: str) -> dict[str, object]:
    """The NVLink info recorded for a machine, in the reference's ``nvlink-info show`` shape (struct
    order)."""
    machine = await queries.machine(session, machine_id)
    if machine is None:
        raise ServiceError(404, f"Machine {machine_id} not found")
    if machine.domain_uuid is None:
        raise ServiceError(404, f"Machine {machine_id} has no nvlink_info in database")
    gpus = await gpus_of_machine(session, machine_id)
    return {
        "domain_uuid": str(machine.domain_uuid),
        "gpus": [
            {
                "tray_index": machine.tray_index,
                "slot_id": g.slot_id,
                "device_id": g.device_id,
                "guid": g.gpu_uid,
            }
            for g in gpus
        ],
        "chassis_serial": machine.chassis_serial,
    }


@dataclass(frozen=True)
class FabricAddress:
    """Where to ask the fabric about one machine: its chassis serial and tray, and the NMX-C endpoints
    to try (none with NMX-M, which serves the whole site)."""

    chassis_serial: str
    tray: int
    endpoints: list[str]


async def fabric_address(
    session: AsyncSession,
    config: NvLinkConfig,
    machine_id: str,
    chassis_serial: str | None,
    tray_index: int | None,
) -> FabricAddress:
    """The given chassis serial and tray index, else the recorded ones, with the chassis' registered
    NMX-C endpoint first, then the discovery list (minipod racks)."""
    machine = await queries.machine(session, machine_id)
    if machine is None:
        raise ServiceError(404, f"Machine {machine_id} not found")
    serial = (chassis_serial or machine.chassis_serial or "").strip()
    tray = tray_index if tray_index is not None else machine.tray_index
    if not serial or tray is None:
        raise ServiceError(400, f"Machine {machine_id} has no chassis serial and tray index; pass them")
    endpoints: list[str] = []
    if config.backend == "nmxc":
        rows = await fabric_registry.list_endpoints(session, serial)
        endpoints = [row.endpoint for row in rows] + config.nmxc_endpoints
        if not endpoints:
            raise ServiceError(404, f"no NMX-C endpoint registered for chassis {serial}")
    return FabricAddress(serial, tray, endpoints)
