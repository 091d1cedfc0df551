"""NVLink logical partition bodies: create/update requests and the partition object."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from pydantic import ConfigDict, Field

from nico.api.parsing import FieldErrors, description_problem, name_problem, parse_uuid, uuid_problem
from nico.api.schemas.common import (
    DESCRIPTION_SCHEMA,
    NAME_SCHEMA,
    UUID_SCHEMA,
    RequestModel,
    ResponseModel,
    StatusDetail,
    declared,
    nullable,
    omit_if_empty,
    omit_if_none,
)
from nico.api.schemas.nvlink_interface import NVLinkInterfaceSummary
from nico.api.schemas.org import TenantSummary
from nico.api.schemas.site import SiteSummary
from nico.api.schemas.vpc import VpcSummary
from nico.logical_partition.reservation import NO_RESERVATION, Reservation
from nico.logical_partition.service import MAX_MULTICAST_GROUPS_LIMIT
from nico.logical_partition.views import PartitionView

# A reservation's count: 0 (or a null reservation) holds nothing; at most a whole NVL72 rack's trays
# many times over, a bound that only refuses nonsense.
MAX_RESERVATION = 1024


class ReservationRequest(RequestModel):
    """nico extension: machines of one instance type held in one NVLink domain for the partition."""

    model_config = ConfigDict(json_schema_extra={"required": ["instanceTypeId", "count"]})

    instance_type_id: Annotated[str | None, declared(UUID_SCHEMA)] = None
    count: Annotated[int | None, declared({"type": "integer", "minimum": 0, "maximum": MAX_RESERVATION})] = (
        None
    )

    def problem(self) -> str | None:
        if uuid_problem(self.instance_type_id) is not None:
            return "instanceTypeId must be a valid UUID"
        if self.count is None or not 0 <= self.count <= MAX_RESERVATION:
            return f"count must be an integer between 0 and {MAX_RESERVATION}"
        return None

    def wanted(self) -> Reservation:
        instance_type_id = parse_uuid(self.instance_type_id)
        assert instance_type_id is not None and self.count is not None
        return Reservation(instance_type_id, self.count)


class DomainFields(RequestModel):
    """nico extensions create and update share: the NVLink domains the partition's GPUs may go to."""

    # true: an instance create, batch or update that would put its GPUs in a second NVLink domain is a 409
    single_nv_link_domain: bool | None = None
    # null or a count of 0 clears it (on update); absent leaves it as it is
    reservation: ReservationRequest | None = None

    def check_placement(self, errors: FieldErrors) -> None:
        if self.reservation is not None:
            errors.add("reservation", self.reservation.problem())

    def wanted_reservation(self) -> Reservation | None:
        """What the body asks of the reservation: None leaves it, a count of 0 clears it."""
        if self.reservation is not None:
            return self.reservation.wanted()
        return NO_RESERVATION if self.given("reservation") else None


class LogicalPartitionCreateRequest(DomainFields):
    model_config = ConfigDict(json_schema_extra={"required": ["name", "siteId"]})

    name: Annotated[str | None, declared(NAME_SCHEMA)] = None
    # the reference sets no limit; nico's is every other resource's
    description: Annotated[str | None, declared(nullable(DESCRIPTION_SCHEMA))] = None
    site_id: Annotated[str | None, declared(UUID_SCHEMA)] = None
    # nico extension: multicast groups each physical partition asks the fabric for (default 16)
    multicast_groups_limit: Annotated[
        int | None,
        declared(
            {
                "type": ["integer", "null"],
                "minimum": 0,
                "maximum": MAX_MULTICAST_GROUPS_LIMIT,
                "multipleOf": 4,
            }
        ),
    ] = None

    def check(self, errors: FieldErrors) -> None:
        errors.add("name", name_problem(self.name))
        errors.add("description", description_problem(self.description))
        errors.add("siteId", uuid_problem(self.site_id))
        errors.add("multicastGroupsLimit", multicast_limit_problem(self.multicast_groups_limit))
        self.check_placement(errors)


def multicast_limit_problem(value: int | None) -> str | None:
    if value is None:
        return None
    if not 0 <= value <= MAX_MULTICAST_GROUPS_LIMIT or value % 4:
        return f"must be a multiple of 4 between 0 and {MAX_MULTICAST_GROUPS_LIMIT}"
    return None


class LogicalPartitionUpdateRequest(DomainFields):
    name: Annotated[str | None, declared(nullable(NAME_SCHEMA))] = None
    # "" is stored; null or absent leaves it as it is
    description: Annotated[str | None, declared({**DESCRIPTION_SCHEMA, "type": ["string", "null"]})] = None

    def check(self, errors: FieldErrors) -> None:
        errors.add("name", name_problem(self.name, required=False))
        errors.add("description", description_problem(self.description))
        self.check_placement(errors)


class NVLinkLogicalPartitionStats(ResponseModel):
    total_gpus: int
    total_distinct_instances: int
    # nico extension: machines its reservation holds free; absent without a reservation's free machine
    total_reserved_machines: int = Field(default=0, exclude_if=omit_if_empty)


class NVLinkLogicalPartitionReservation(ResponseModel):
    """nico extension: ``count`` machines of the type held in one NVLink domain, ``available`` of them
    free (the others run the partition's instances)."""

    instance_type_id: uuid.UUID
    count: int
    nv_link_domain_id: uuid.UUID | None
    available: int


class NVLinkLogicalPartition(ResponseModel):
    id: uuid.UUID
    name: str
    description: str | None
    site_id: uuid.UUID
    site: SiteSummary | None = Field(default=None, exclude_if=omit_if_none)
    tenant_id: uuid.UUID
    tenant: TenantSummary | None = Field(default=None, exclude_if=omit_if_none)
    vpcs: list[VpcSummary] | None = Field(default=None, exclude_if=omit_if_empty)
    nv_link_interfaces: list[NVLinkInterfaceSummary] | None = Field(default=None, exclude_if=omit_if_empty)
    nv_link_logical_partition_stats: NVLinkLogicalPartitionStats | None = None  # always present
    multicast_groups_limit: int  # nico extension
    # nico extension: the worst health of its physical partitions; absent until observed.
    nv_link_health: str | None = Field(default=None, exclude_if=omit_if_none)
    # nico extensions: whether its GPUs stay in one NVLink domain, the domains they are in, its reservation
    single_nv_link_domain: bool = False
    nv_link_domain_ids: list[uuid.UUID] = Field(default_factory=list)
    reservation: NVLinkLogicalPartitionReservation | None = Field(default=None, exclude_if=omit_if_none)
    status: str
    status_history: list[StatusDetail]
    created: datetime
    updated: datetime

    @classmethod
    def of(cls, view: PartitionView) -> NVLinkLogicalPartition:
        stats = view.stats
        return cls(
            id=view.id,
            name=view.name,
            description=view.description,
            site_id=view.site_id,
            site=SiteSummary.of(view.site) if view.site else None,
            tenant_id=view.tenant_id,
            tenant=TenantSummary.of(view.tenant) if view.tenant else None,
            vpcs=[VpcSummary.of(vpc) for vpc in view.vpcs],
            nv_link_interfaces=[NVLinkInterfaceSummary.of(b) for b in view.interfaces],
            nv_link_logical_partition_stats=(
                NVLinkLogicalPartitionStats(
                    total_gpus=stats.total_gpus,
                    total_distinct_instances=stats.total_distinct_instances,
                    total_reserved_machines=stats.total_reserved_machines,
                )
                if stats is not None
                else None
            ),
            multicast_groups_limit=view.multicast_groups_limit,
            nv_link_health=view.health,
            single_nv_link_domain=view.single_nvlink_domain,
            nv_link_domain_ids=list(view.domain_ids),
            reservation=(
                NVLinkLogicalPartitionReservation(
                    instance_type_id=view.reservation.instance_type_id,
                    count=view.reservation.count,
                    nv_link_domain_id=view.reservation.domain_uuid,
                    available=view.reservation.available,
                )
                if view.reservation is not None
                else None
            ),
            status=view.status,
            status_history=StatusDetail.many(view.history),
            created=view.created,
            updated=view.updated,
        )
