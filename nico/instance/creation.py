"""Creating instances: one on a machine placed by policy (or a targeted one), or a batch on one
NVLink domain (spec §5, §6), all or nothing. Both take the same steps, top down: the creation
context (one round trip), the checks (:func:`nico.instance.checks.check_request`), the machines
(:func:`nico.instance.claim.claim`, or the targeted one), the NVLink bindings, the one statement that
writes everything (:func:`nico.instance.queries.insert_instances`) and the quota checked again, both
sent with the request's commit (:func:`nico.instance.queries.check_quota_at_commit`). The service never
commits: it answers with :class:`Created`, whose views are read once the commit is done.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.enums import InstanceStatus, MachineStatus
from nico.db.models import Machine, Tenant, Vpc
from nico.db.raw import WrittenAtCommit, driver_connection
from nico.instance import queries
from nico.instance.bindings import creation_bindings
from nico.instance.checks import (
    BATCH_CREATE,
    NO_ALLOCATION,
    PENDING_MESSAGE,
    READY_MESSAGE,
    SINGLE_CREATE,
    CreateTexts,
    check_request,
    creation_context,
    requested_partitions,
)
from nico.instance.claim import Claimed, claim, sample_size
from nico.instance.confinement import refuse_outside_home
from nico.instance.views import InstanceSpec, InstanceView, Port
from nico.services.errors import bad_request, conflict, forbidden
from nico.services.nvlink_events import CHANNEL, payload
from nico.services.nvlink_interface import Binding, nvlink_capabilities
from nico.services.placement import Ask, NoCapacity
from nico.services.quotas import check_changes_in_flight


async def create(
    session: AsyncSession,
    org: str,
    spec: InstanceSpec,
    *,
    name: str,
    instance_type_id: uuid.UUID | None,
    machine_id: str | None,
    in_flight_limit: int,
    seed: int | None = None,
) -> Created:
    """One instance on a machine placed by policy (or on ``machine_id`` for targeted creation);
    ``in_flight_limit``: the tenant's quota of instances with NVLink changes in flight at the site."""
    return await _create(
        session,
        org,
        spec,
        SINGLE_CREATE,
        names=[name],
        instance_type_id=instance_type_id,
        machine_id=machine_id,
        in_flight_limit=in_flight_limit,
        seed=seed,
    )


async def create_batch(
    session: AsyncSession,
    org: str,
    spec: InstanceSpec,
    *,
    name_prefix: str,
    count: int,
    instance_type_id: uuid.UUID,
    topology_optimized: bool,
    in_flight_limit: int,
    seed: int | None = None,
) -> Created:
    """``count`` instances (spec §6)."""
    suffix = uuid.uuid4().hex[:6]
    return await _create(
        session,
        org,
        spec,
        BATCH_CREATE,
        names=[f"{name_prefix}-{suffix}-{n}" for n in range(1, count + 1)],
        instance_type_id=instance_type_id,
        topology_optimized=topology_optimized,
        in_flight_limit=in_flight_limit,
        seed=seed,
    )


async def _create(
    session: AsyncSession,
    org: str,
    spec: InstanceSpec,
    texts: CreateTexts,
    *,
    names: list[str],
    instance_type_id: uuid.UUID | None,
    in_flight_limit: int,
    machine_id: str | None = None,
    topology_optimized: bool = False,
    seed: int | None = None,
) -> Created:
    """The steps of every create, in order; ``texts`` says how single and batch creation differ."""
    # The context, the claim and the insert go out on the session's driver connection, taken once
    # (each time from the session costs more CPU than sending a statement).
    conn = await driver_connection(session)
    context = await creation_context(
        conn, org, spec, instance_type_id=instance_type_id, names=names, per_kind=sample_size(seed)
    )
    checked = check_request(context, spec, texts, typed=instance_type_id is not None, count=len(names))
    tenant, vpc, itype = checked.tenant, checked.vpc, checked.itype
    explicit = list(spec.nvlink or ())
    capabilities = context.capabilities
    if itype is not None:
        wants_nvlink = bool(explicit) or (vpc.nvlink_logical_partition_id is not None and bool(capabilities))
        ask = Ask(itype.id, len(names), needs_nvlink=wants_nvlink, topology_optimized=topology_optimized)
        try:
            machines = await claim(
                conn,
                site_id=vpc.site_id,
                ask=ask,
                partition_ids=requested_partitions(spec, vpc),
                seed=seed,
                inputs=context.placement,
            )
        except NoCapacity as exc:
            raise conflict(texts.no_capacity(exc, len(names))) from None
    else:
        assert machine_id is not None
        wanted = requested_partitions(spec, vpc)
        target = await _targeted_machine(session, tenant, vpc.site_id, machine_id, wanted)
        machines, capabilities = [Claimed(target.id, target.domain_uuid)], []
    if not capabilities and texts.machine_capabilities:
        capabilities = await nvlink_capabilities(session, machine_id=machines[0].id)
    bindings = await creation_bindings(
        session, tenant, vpc, explicit, capabilities, texts, context.partitions
    )
    if bindings and any(m.domain_uuid is None for m in machines):
        raise bad_request(texts.no_capability)
    created = _add_instances(
        session,
        tenant=tenant,
        vpc=vpc,
        itype_id=itype.id if itype else None,
        spec=spec,
        names=names,
        machines=machines,
        bindings=bindings,
    )
    if itype is not None:
        _check_quota_at_commit(session, tenant.id, itype.id, len(names), texts)
    if any(m.domain_uuid is not None for m in machines):  # instances the fabric must settle
        check_changes_in_flight(session, tenant.id, vpc.site_id, in_flight_limit)
    return created


async def _targeted_machine(
    session: AsyncSession, tenant: Tenant, site_id: uuid.UUID, machine_id: str, wanted: set[uuid.UUID]
) -> Machine:
    """The machine of a targeted create, locked: free, and held by no reservation but those of the
    partitions ``wanted`` (the request binds GPUs to), and in the domain of those that are
    single-domain."""
    if not tenant.targeted_instance_creation:
        raise forbidden("Tenant does not have the capability to create Instances on a specific Machine")
    machine = await queries.locked_machine(session, machine_id)
    if machine is None or machine.site_id != site_id:
        raise bad_request("Could not find Machine with ID specified in request data")
    taken = machine.instance_id is not None or machine.status != MachineStatus.READY
    held = machine.reserved_lp_id is not None and machine.reserved_lp_id not in wanted
    # foreign_gpus: GPUs in a partition nico did not make, which it keeps: the machine is held.
    if taken or held or machine.is_missing_on_site or machine.foreign_gpus > 0:
        raise bad_request("Machine specified in request data is not available for Instance creation")
    await refuse_outside_home(session, wanted, machine)
    return machine


@dataclass(frozen=True)
class Created:
    """The instances of a create, inserted with the request's commit: their views once it is done."""

    written: WrittenAtCommit
    ids: list[uuid.UUID]  # in the request's order of names

    def views(self) -> list[InstanceView]:
        """The new instances as their response shows them (chronological history), in the order of
        the request's names: the insert answers with them, nothing is read back."""
        by_id = {d["id"]: InstanceView.of(d) for d in self.written.rows()}
        assert len(by_id) == len(self.ids) and all(v.machine_id is not None for v in by_id.values())
        return [by_id[i] for i in self.ids]


def _add_instances(
    session: AsyncSession,
    *,
    tenant: Tenant,
    vpc: Vpc,
    itype_id: uuid.UUID | None,
    spec: InstanceSpec,
    names: Sequence[str],
    machines: Sequence[Claimed],
    bindings: Sequence[Binding],
) -> Created:
    """Have the request's commit insert the instances with their interfaces, bindings and first
    history, assign the machines, and hand the change to the reconciler (NOTIFY of the machines'
    domains, in the same statement, so in the same transaction), ahead of the checks that go with it.
    A new instance starts at NVLink config version 1.

    Assigning the machines moves their domains' free counts (``domain_capacity``'s trigger locks
    those rows to the commit)."""
    ports = list(spec.ports)
    if not any(p.is_physical for p in ports):
        ports[0] = Port(ports[0].subnet_id, True)  # the first interface is the physical one
    rows: list[queries.NewInstance] = []
    history: list[tuple[uuid.UUID, str, str]] = []
    for name, machine in zip(names, machines, strict=True):
        ready = machine.domain_uuid is None  # nothing on the fabric to wait for
        row = queries.NewInstance(
            uuid.uuid4(), name, str(InstanceStatus.READY if ready else InstanceStatus.PENDING), machine.id
        )
        rows.append(row)
        history.append((row.id, str(InstanceStatus.PENDING), PENDING_MESSAGE))
        if ready:
            history.append((row.id, str(InstanceStatus.READY), READY_MESSAGE))
    domains = {m.domain_uuid for m in machines if m.domain_uuid is not None}
    written = queries.insert_instances(
        session,
        queries.SharedFields(
            tenant_id=tenant.id,
            site_id=vpc.site_id,
            instance_type_id=itype_id,
            vpc_id=vpc.id,
            description=spec.description,
            ipxe_script=spec.ipxe_script,
            user_data=spec.user_data,
            always_boot_with_custom_ipxe=spec.always_boot_with_custom_ipxe,
            phone_home_enabled=spec.phone_home_enabled,
            labels=spec.labels,
            created_by=spec.created_by,
        ),
        rows,
        history,
        [(r.id, p.subnet_id, p.is_physical) for r in rows for p in ports],
        [(r.id, b.partition_id, b.device_instance, b.device) for r in rows for b in bindings],
        channel=CHANNEL,
        notify=payload(domains) if domains else None,
    )
    return Created(written, [r.id for r in rows])


def _check_quota_at_commit(
    session: AsyncSession, tenant_id: uuid.UUID, itype_id: uuid.UUID, count: int, texts: CreateTexts
) -> None:
    """The quota checked again, last, under the lock of the tenant's reservations, in the round trip
    of the request's commit: the lock every create of the tenant waits for is held for no round trip
    (lock order: docs/architecture.md, "Locks"). A refusal commits nothing and answers 403."""

    def refused(why: queries.QuotaRefusal) -> Exception:
        if why.count is None or why.reserved is None:
            return forbidden(NO_ALLOCATION)
        return forbidden(texts.over_quota(why.count - count, count, why.reserved))  # these included

    queries.check_quota_at_commit(session, tenant_id, itype_id, refused)
