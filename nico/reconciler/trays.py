"""Compute trays swapped under nico: the fabric reports other GPU GUIDs at a machine's place.

A technician replaces a compute tray; the new tray's GPUs come up with new GUIDs at the same chassis
serial and slot. The GPUs nico recorded for the machine no longer exist, and the tenant's partition
misses the new ones. When a GPU listing of a domain (every deep pass, and a topology change the
manager announces) shows, at a machine's (chassis serial, slot), a whole tray of GPUs none of which
nico knows while none of the machine's recorded GPUs is reported anywhere, nico records the new
GPUs in place of the old ones (``nico.inventory.location.tray_replaced``): the planner then puts them
where the machine's instance wants them, or home, and the instance's interfaces go Ready again.
A partial or ambiguous picture (some old GUIDs still reported, GUIDs another machine holds) is left
for an operator: ``nico admin machine nvlink-info populate --update-db`` still does it by hand.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.engine import reading
from nico.fabric.backend import FabricError, FabricGpu
from nico.inventory import location
from nico.inventory.records import GpuRecord, NvlinkInfo
from nico.reconciler import state as statemod
from nico.reconciler.pass_context import PassContext
from nico.reconciler.state import DomainState
from nico.services.errors import ServiceError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Swap:
    """A machine whose tray the fabric now reports with other GPUs."""

    machine_id: str
    old: tuple[int, ...]
    info: NvlinkInfo


def swaps(state: DomainState, gpus: Sequence[FabricGpu]) -> list[Swap]:
    """The machines of ``state`` whose tray ``gpus`` (one listing of the domain) shows swapped."""
    reported = {g.gpu_uid for g in gpus}
    if reported.issuperset(state.gpus):
        return []  # a swapped tray's old GPUs are reported nowhere (the usual deep pass stops here)
    at: dict[tuple[str, int | None], list[FabricGpu]] = {}
    for gpu in gpus:
        at.setdefault((gpu.chassis_serial.strip(), gpu.slot_id), []).append(gpu)
    machines: dict[str, list[tuple[int, str, int | None]]] = {}
    for row in state.gpus.values():
        machines.setdefault(row.machine_id, []).append((row.gpu_uid, row.chassis_serial, row.slot_id))
    found = []
    for machine_id, rows in sorted(machines.items()):
        places = {(serial.strip(), slot) for _, serial, slot in rows}
        if len(places) != 1 or None in {slot for _, slot in places}:
            continue  # no single known place: nothing to compare
        (place,) = places
        now = sorted(at.get(place, []), key=lambda g: g.device_id)
        old = {uid for uid, _, _ in rows}
        if len(now) != len(rows) or any(g.gpu_uid in state.gpus for g in now) or old & reported:
            continue  # not a whole new tray where a whole old one was
        tray = now[0].tray_index
        records = tuple(GpuRecord(g.device_id, g.gpu_uid, g.slot_id, g.description or None) for g in now)
        found.append(Swap(machine_id, tuple(sorted(old)), NvlinkInfo(state.domain, place[0], tray, records)))
    return found


async def record(ctx: PassContext, found: Sequence[Swap]) -> int:
    """Record each swap in its own transaction; the number recorded (a refused one is logged)."""
    done = 0
    for swap in found:
        try:
            async with (
                ctx.engine.connect() as conn,
                AsyncSession(bind=conn, expire_on_commit=False) as session,
            ):
                changed, instance = await location.tray_replaced(session, swap.machine_id, swap.info)
                await session.commit()
        except ServiceError as exc:
            log.warning(
                "machine %s: its tray looks swapped but was not recorded: %s", swap.machine_id, exc.message
            )
            continue
        if not changed:
            continue  # recorded meanwhile (a deep pass and a topology change, or another reconciler)
        done += 1
        ctx.metrics.tray_replacements.inc()
        new = [g.gpu_uid for g in swap.info.gpus]
        log.info(
            "machine %s: compute tray swapped (GPUs %s -> %s)%s",
            swap.machine_id,
            list(swap.old),
            new,
            f"; instance {instance} reconfigured" if instance else "",
        )
    return done


async def after_topology_change(ctx: PassContext, domain: uuid.UUID) -> bool:
    """The manager says ``domain``'s topology changed: list its GPUs and record the trays swapped;
    whether any was (the domain then needs a pass). Failures are logged, never raised: the next
    deep pass looks again."""
    try:
        async with reading(ctx.engine) as conn:
            state, _, _ = await statemod.load_one(conn, domain)
        if state is None or not state.gpus:
            return False
        target = await ctx.observer.target(domain, state.chassis_serials)
        return bool(await record(ctx, swaps(state, await ctx.backend.list_gpus(target))))
    except FabricError as exc:
        log.info("domain %s: GPUs not listed after a topology change: %s", domain, exc.message)
    except Exception as exc:
        if not ctx.outages.database_failed(exc, domain):
            log.exception("domain %s: GPUs not checked after a topology change", domain)
    return False
