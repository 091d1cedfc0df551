"""Where the logical partitions a create or update binds GPUs to let those GPUs be: a single-domain
partition (``singleNvLinkDomain``) keeps every GPU in the one NVLink domain it is in, and a partition's
reservation offers its own machines first. :class:`Fence` is pure: the partitions' homes in, the
domains allowed and the 409s' words out (the claim reads the homes with placement's inputs);
:func:`refuse_outside_home` is the check of a machine chosen already (a targeted create, an update of
an instance's bindings)."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from nico.db.models import Machine
from nico.db.raw import driver_connection
from nico.instance import queries
from nico.instance.queries import PartitionHome
from nico.services.errors import ServiceError, conflict

SINGLE = "is limited to one NVLink domain (singleNvLinkDomain)"


def _named(home: PartitionHome) -> str:
    return f"NVLink Logical Partition '{home.name}' ({home.id})"


@dataclass(frozen=True)
class Fence:
    """The single-domain and reserving partitions of one request (their homes)."""

    homes: Sequence[PartitionHome] = ()

    @property
    def confined(self) -> list[PartitionHome]:
        """The single-domain partitions."""
        return [home for home in self.homes if home.single_domain]

    def reserving(self, instance_type_id: uuid.UUID) -> list[uuid.UUID]:
        """The partitions holding machines of the type in reserve."""
        return [home.id for home in self.homes if home.reserved_type == instance_type_id]

    @property
    def reserved_domains(self) -> frozenset[uuid.UUID]:
        return frozenset().union(*(home.reserved_domains for home in self.homes))

    def allowed(self) -> frozenset[uuid.UUID] | None:
        """The domains new GPUs may go to: those every single-domain partition already is in (None:
        any, as long as it is one domain when a partition is confined). A 409 when two of them are in
        different domains."""
        present = [home for home in self.confined if home.domains]
        if not present:
            return None
        allowed = frozenset.intersection(*(home.domains for home in present))
        if not allowed:
            first, other = present[0], next(h for h in present[1:] if not h.domains & present[0].domains)
            raise conflict(
                f"{_named(first)} and {_named(other)} are each limited to one NVLink domain "
                f"(singleNvLinkDomain) and are in different ones: {_domains(first.domains)} and "
                f"{_domains(other.domains)}"
            )
        return allowed

    def refusal(self, domain: uuid.UUID | None, free: int, requested: int) -> ServiceError:
        """The 409 of a create the confined partitions cannot take: ``domain`` is where they are (None:
        nowhere yet, ``free`` then the best domain's free count) and ``free`` what is left there."""
        home = next((h for h in self.confined if domain in h.domains), self.confined[0])
        if domain is None:
            return conflict(
                f"{_named(home)} {SINGLE}, and no NVLink domain has the {requested} free Machines of the "
                f"Instance Type requested: the best has {free}"
            )
        return conflict(
            f"{_named(home)} {SINGLE} and is in NVLink domain {domain}, which has {free} free Machines of "
            f"the Instance Type left; {requested} requested"
        )

    def refuse_elsewhere(
        self, machine_domain: uuid.UUID | None, free: dict[uuid.UUID, int]
    ) -> ServiceError | None:
        """The 409 of binding GPUs of a machine in ``machine_domain`` to a single-domain partition that
        is elsewhere (``free``: machines left in each partition's domain), or None when it may."""
        for home in self.confined:
            if home.domains and machine_domain not in home.domains:
                domain = min(home.domains)
                return conflict(
                    f"{_named(home)} {SINGLE} and is in NVLink domain {domain}, which has "
                    f"{free.get(domain, 0)} free Machines of the Instance Type left; the Instance's "
                    f"Machine is in NVLink domain {machine_domain}"
                )
        return None


def _domains(domains: Collection[uuid.UUID]) -> str:
    return ", ".join(str(d) for d in sorted(domains))


async def refuse_outside_home(
    session: AsyncSession, partition_ids: Collection[uuid.UUID], machine: Machine
) -> None:
    """A 409 when GPUs of ``machine`` would join a single-domain partition of ``partition_ids`` that
    is in another domain; the homes are read under the partitions' lock (``queries.locked_homes``),
    so the answer stays true to the commit."""
    if not partition_ids or machine.domain_uuid is None:
        return
    conn = await driver_connection(session)
    fence = Fence(await queries.partition_homes(conn, partition_ids))
    if not fence.confined:
        return
    fence = Fence(await queries.locked_homes(conn, [home.id for home in fence.confined], partition_ids))
    homes = [home for home in fence.confined if machine.domain_uuid not in home.domains]
    elsewhere = {domain for home in homes for domain in home.domains}
    if not elsewhere:
        return
    free = {}
    for domain in elsewhere:
        if machine.instance_type_id is None:
            free[domain] = 0
        else:
            free[domain] = await queries.free_there(
                conn, machine.site_id, machine.instance_type_id, domain, partition_ids
            )
    refusal = fence.refuse_elsewhere(machine.domain_uuid, free)
    if refusal is not None:
        raise refusal
