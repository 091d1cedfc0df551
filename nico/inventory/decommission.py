"""Decommission: a machine force-deleted by its operator (the reference's ``admin_force_delete_machine``).

The database changes at once, whatever the fabric's state: the machine leaves capacity and its
allocation (no instance type, status Decommissioned) and its instance is released (Terminating, its
NVLink interfaces Deleting, a status history entry saying why). The fabric follows on the next pass
that reaches the machine's domain: its GPUs leave every tenant partition for their home, then the
instance and the machine are removed together (:func:`nico.reconciler.lifecycle.
finish_instance_termination`). A machine without an instance, or whose instance has no NVLink
interface, is removed at once; GPUs of it still found in nico's partitions are taken out by the
reconciler as GPUs of a machine nico no longer manages. Asking again changes nothing more.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InstanceStatus, MachineStatus
from nico.instance import queries as instances
from nico.instance.service import start_termination
from nico.inventory import queries as q
from nico.inventory.views import Decommission
from nico.services import status
from nico.services.nvlink_events import desired_state_changed

RELEASED = "Machine {machine} was force-deleted by the provider: Instance released"
DECOMMISSIONED = (
    "Machine force-deleted: out of capacity now, removed once its GPUs are out of their partitions"
)


async def force_delete_machine(session: AsyncSession, machine_id: str) -> Decommission:
    """Decommission ``machine_id`` (see the module's docstring); never refuses an existing machine."""
    machine = await q.machine_by_id(session, machine_id)
    if machine is None:
        return Decommission(machine_id, found=False, removed=False, instance_id=None, waits_for_fabric=False)
    # Locks in the house order: the instance before its machine.
    instance = await instances.locked_instance(session, machine.instance_id) if machine.instance_id else None
    await q.relock_machine(session, machine)
    if instance is not None and machine.instance_id != instance.id:
        instance = None  # released meanwhile: the machine's own state decides
    domain = machine.domain_uuid
    if instance is None or domain is None or not await instances.has_bindings(session, instance.id):
        if instance is not None:
            await instances.delete_instance(session, instance.id)
        await q.delete_machine_row(session, machine.id)
        await desired_state_changed(session, domains=[domain] if domain else [])
        return Decommission(
            machine_id,
            found=True,
            removed=True,
            instance_id=instance.id if instance else None,
            waits_for_fabric=False,
        )
    if machine.status != MachineStatus.DECOMMISSIONED:
        machine.status = MachineStatus.DECOMMISSIONED
        machine.instance_type_id = None
        await status.record(session, "machine_id", machine.id, MachineStatus.DECOMMISSIONED, DECOMMISSIONED)
    if instance.status != InstanceStatus.TERMINATING:
        await start_termination(session, instance, RELEASED.format(machine=machine.id))
    await desired_state_changed(session, instance_ids=[instance.id])
    return Decommission(machine_id, found=True, removed=False, instance_id=instance.id, waits_for_fabric=True)
